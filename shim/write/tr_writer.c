/* Trace files: the background writer, the signal handlers and the
 * exit-time write.
 *
 * The application's threads never do I/O for the shim: they only ask the
 * writer thread to write, through the ground's write queue (tr_core.h:
 * tr_write_request, an eventfd write, async-signal-safe), which this thread
 * serves; nothing below calls the writer. The exit handler (tr_init.c)
 * writes from the exiting thread, serialized with the writer by a mutex.
 * Signals (see "signals" below): on SIGTERM, SIGINT, SIGABRT, SIGSEGV,
 * SIGBUS, SIGFPE and SIGILL the handler marks the ring file, asks for a
 * write and waits up to ~3 s for it, then lets the application's handler or
 * the default action run as before (the process still dies of that signal);
 * on the snapshot signal (TRSHIM_SNAPSHOT_SIGNAL, SIGUSR1) it asks for a
 * write and returns at once.
 *
 * Every file is written to a new temporary name with a random part
 * (<name>.tmp.XXXXXXXX, created exclusively, mode 0600, no link followed,
 * in the folder opened and checked by tr_dir_open: tr_files.c) and renamed,
 * never past the file-size limit (tr_out_open: EFBIG, no SIGXFSZ). A write
 * that fails (disk full, quota, file-size limit) removes its temporary file
 * (freeing its space), leaves a small marker <name without .json>.write-failed
 * (write_trace) where it can, and says so in one line; the job goes on. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <ucontext.h>
#include <sys/stat.h>

#include "tr_record.h"
#include "tr_core.h"
#include "trshim/trace_format.h"
#include "tr_nancheck.h"
#include "tr_stacks.h"
#include "tr_ring.h"
#include "tr_write.h"
#include "tr_write_int.h"
#include "tr_memjson.h"

static atomic_int g_signo;                  /* the fatal signal of a TR_WRITE_SIGNAL write */
static atomic_int g_snap_signo;             /* the signal that asked for a TR_WRITE_SNAPSHOT write, 0 */
static atomic_int g_writer_tid;             /* the writer thread (a signal there must not wait for it) */
static atomic_int g_exit_tid;               /* the thread inside the exit write, 0 */
static atomic_int g_exited;                 /* the exit write is done: no more writes */
static pthread_mutex_t g_write_mu = PTHREAD_MUTEX_INITIALIZER;

static int g_ver_rt, g_ver_drv, g_ver_nccl;     /* 0: unknown; only under g_write_mu */
static atomic_int g_versions_asked;             /* the writer thread asked CUDA once */

/* files of the previous write (names in the trace folder), removed when a
 * rank's name changed */
#define MAX_VIEWS 256
static char *g_prev[MAX_VIEWS];
static int g_nprev;

/* write-failed markers this process left (names), removed once their trace
 * is written */
static char *g_markers[MAX_VIEWS];
static int g_nmarkers;

/* ---- one trace file ----------------------------------------------------------- */

/* The whole of a /proc file (NUL-separated strings); NULL on failure. */
static char *read_proc(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
        if (n == cap) {
            char *grown = realloc(buf, 2 * cap + 1);
            if (!grown) break;
            buf = grown;
            cap *= 2;
        }
    }
    close(fd);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

/* The command line, each argument redacted (tr_redact_argv) and made valid UTF-8. */
static void write_cmdline(tr_json *j)
{
    size_t n = 0;
    char *buf = read_proc("/proc/self/cmdline", &n);
    int argc = 0;
    for (size_t i = 0; buf && i < n; i += strlen(buf + i) + 1) argc++;
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    int k = 0;
    for (size_t i = 0; argv && buf && i < n; i += strlen(buf + i) + 1)
        if ((argv[k] = strdup(buf + i))) k++;
    if (argv) tr_redact_argv(argv, k);
    trj_array_begin(j, "cmdline");
    for (int i = 0; argv && i < k; i++) trj_str(j, NULL, tr_utf8_clean(argv[i]));
    trj_array_end(j);
    for (int i = 0; argv && i < k; i++) free(argv[i]);
    free(argv);
    free(buf);
}

static void int_or_null(tr_json *j, const char *key, int v)
{
    if (v >= 0) trj_int(j, key, v);
    else trj_null(j, key);
}

static void version_or_null(tr_json *j, const char *key, int v)
{
    if (v > 0) trj_int(j, key, v);
    else trj_null(j, key);
}

/* "ring": the window of records the calls above were written from */
static void write_ring(tr_json *j)
{
    uint64_t first, next;
    tr_nccl_window(&first, &next);
    char path[2400];
    const char *file = tr_ring_path();
    trj_object_begin(j, "ring");
    if (file) {
        snprintf(path, sizeof path, "%s", file);
        trj_str(j, "file", tr_utf8_clean(path));
    } else {
        trj_null(j, "file");
    }
    trj_uint(j, "capacity", tr_ring_capacity());
    trj_uint(j, "first", first);
    trj_uint(j, "next", next);
    trj_uint(j, "lost", first);
    trj_object_end(j);
}

typedef struct {
    const char *job_id, *job_source, *host;
    tr_write_reason reason;
    int signo;
} write_ctx;

/* The marker name of trace name: ".json" replaced by ".write-failed". */
static void marker_name(char *out, size_t cap, const char *name)
{
    size_t n = strlen(name);
    if (n > 5 && !strcmp(name + n - 5, ".json")) n -= 5;
    snprintf(out, cap, "%.*s" TRSHIM_WRITE_FAILED_SUFFIX, (int)n, name);
}

/* A file of the folder dfd written through a temporary name (exclusive,
 * 0600, random part) and renamed to name; fill writes its content. 0, or
 * -1 with *err (errno value) and *bytes (written before the failure);
 * *taken_by: the owner of another user's file at name (EEXIST), else -1. */
typedef void (*fill_fn)(FILE *f, const void *arg);

static int write_file(int dfd, const char *name, fill_fn fill, const void *arg, int *err, uint64_t *bytes,
                      long *taken_by)
{
    *taken_by = -1;
    char tmp[800], prefix[800];
    snprintf(prefix, sizeof prefix, "%s.tmp.", name);
    *bytes = 0;
    int fd = tr_create_unique(dfd, prefix, "", tmp, sizeof tmp, O_WRONLY);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    tr_out o;
    FILE *f = tr_out_open(&o, fd);
    if (!f) {
        *err = errno;
        close(fd);
        unlinkat(dfd, tmp, 0);
        return -1;
    }
    fill(f, arg);
    int bad = fflush(f) != 0 || ferror(f);
    if (fclose(f) != 0) bad = 1;
    *bytes = o.bytes;
    *err = o.err ? o.err : EIO;
    /* another user's file at the name (a shared folder): left as it is, even
     * where this process could replace it (root); a link is replaced, never
     * followed */
    struct stat st;
    if (!bad && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid != geteuid()) {
        bad = 1;
        *err = EEXIST;
        *taken_by = (long)st.st_uid;
    }
    if (!bad && renameat(dfd, tmp, dfd, name) != 0) {
        bad = 1;
        *err = errno;
    }
    if (bad) {
        unlinkat(dfd, tmp, 0);       /* first: its space may be what the marker needs */
        return -1;
    }
    return 0;
}

static const char *const g_reasons[] = {"exit", "signal", "comm_end", "snapshot", "hang"};

typedef struct {
    const tr_rank_view *view;
    const write_ctx *w;
} trace_arg;

static void fill_trace(FILE *f, const void *arg)
{
    const tr_rank_view *view = ((const trace_arg *)arg)->view;
    const write_ctx *w = ((const trace_arg *)arg)->w;
    const tr_process *proc = tr_proc();
    const tr_settings *cfg = tr_cfg();
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_mono = tr_now_ns();     /* read with `now`: a second clock sample (clock_write) */

    tr_json j;
    trj_init(&j, f);
    trj_object_begin(&j, NULL);
    trj_str(&j, "format", TRSHIM_TRACE_FORMAT);
    trj_int(&j, "version", TRSHIM_TRACE_VERSION);
    trj_object_begin(&j, "job");
    trj_str(&j, "id", w->job_id);
    trj_str(&j, "source", w->job_source);
    trj_object_end(&j);
    int_or_null(&j, "rank", view->rank);
    trj_str(&j, "rank_source", view->rank_source);
    int_or_null(&j, "world_size", proc->world_size);
    int_or_null(&j, "local_rank", proc->local_rank);
    int_or_null(&j, "device", view->trace_device);
    trj_str(&j, "host", w->host);
    trj_int(&j, "pid", getpid());
    write_cmdline(&j);
    trj_double(&j, "start_time", proc->start_realtime);
    trj_double(&j, "write_time", (double)now.tv_sec + (double)now.tv_nsec * 1e-9);
    trj_object_begin(&j, "versions");
    trj_str(&j, "trshim", TR_VERSION);
    version_or_null(&j, "cuda_runtime", g_ver_rt);
    version_or_null(&j, "cuda_driver", g_ver_drv);
    version_or_null(&j, "nccl", g_ver_nccl);
    trj_object_end(&j);
    tr_nccl_library_write_json(&j);
    tr_env_write_json(&j);
    tr_sysinfo_write_json(&j, g_ver_nccl, g_ver_rt, g_ver_drv);
    trj_object_begin(&j, "settings");
    trj_bool(&j, "enabled", cfg->enabled);
    char dir[sizeof cfg->dir];
    snprintf(dir, sizeof dir, "%s", cfg->dir);
    trj_str(&j, "dir", tr_utf8_clean(dir));
    trj_int(&j, "stack_depth", cfg->stack_depth);
    trj_int(&j, "pystack_depth", cfg->pystack_depth);
    trj_uint(&j, "ring", cfg->ring);
    trj_int(&j, "hang_sec", cfg->hang_sec);
    trj_int(&j, "snapshot_signal", cfg->snapshot_signal);
    trj_bool(&j, "completion", cfg->completion);
    trj_bool(&j, "keep_ring", cfg->keep_ring);
    trj_bool(&j, "quiet", cfg->quiet);
    trj_object_end(&j);
    trj_object_begin(&j, "clock");
    trj_double(&j, "realtime", proc->start_realtime);
    trj_uint(&j, "monotonic_ns", proc->start_mono_ns);
    trj_object_end(&j);
    trj_object_begin(&j, "clock_write");
    trj_double(&j, "realtime", (double)now.tv_sec + (double)now.tv_nsec * 1e-9);
    trj_uint(&j, "monotonic_ns", now_mono);
    trj_object_end(&j);
    tr_nan_snap *checks = tr_nan_snapshot();
    int in_call = tr_nccl_write_json(&j, view, checks);
    tr_nan_write_json(&j, checks);       /* "nancheck", "check_fields", "checks" */
    tr_memory_write_json(&j, view->device);
    tr_stack_write_json(&j);
    tr_pystack_write_json(&j);           /* "python", "pycodes", "pystacks" */
    trj_uint(&j, "dropped", tr_nccl_dropped());
    write_ring(&j);
    tr_crash_write_json(&j);             /* "crash", "errors" (tr_crash.c) */
    tr_pyexit_write_json(&j);            /* "python_exception" (tr_pyexit.c) */
    /* last: in_call agrees with the calls written above */
    trj_object_begin(&j, "end");
    trj_str(&j, "reason", g_reasons[w->reason]);
    if ((w->reason == TR_WRITE_SIGNAL || w->reason == TR_WRITE_SNAPSHOT) && w->signo > 0)
        trj_int(&j, "signal", w->signo);
    else trj_null(&j, "signal");
    trj_bool(&j, "in_call", in_call);
    trj_object_end(&j);
    trj_object_end(&j);

}

typedef struct {
    const char *trace;
    const tr_rank_view *view;
    const write_ctx *w;
    int err;
    uint64_t bytes;
} marker_arg;

/* The marker: one line of JSON (docs/trace-format.md, "Failed writes"). */
static void fill_marker(FILE *f, const void *arg)
{
    const marker_arg *m = arg;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char trace[800];
    snprintf(trace, sizeof trace, "%s", m->trace);
    tr_json j;
    trj_init(&j, f);
    trj_object_begin(&j, NULL);
    trj_str(&j, "format", TRSHIM_WRITE_FAILED_FORMAT);
    trj_int(&j, "version", TRSHIM_WRITE_FAILED_VERSION);
    trj_str(&j, "job", m->w->job_id);
    trj_str(&j, "job_source", m->w->job_source);
    int_or_null(&j, "rank", m->view->rank);
    trj_str(&j, "host", m->w->host);
    trj_int(&j, "pid", getpid());
    trj_str(&j, "trace", tr_utf8_clean(trace));
    trj_str(&j, "reason", g_reasons[m->w->reason]);
    trj_double(&j, "time", (double)now.tv_sec + (double)now.tv_nsec * 1e-9);
    trj_int(&j, "errno", m->err);
    trj_str(&j, "error", strerror(m->err));
    trj_uint(&j, "bytes", m->bytes);
    trj_object_end(&j);             /* and its newline */
}

static void forget_marker(int k)
{
    free(g_markers[k]);
    g_markers[k] = g_markers[--g_nmarkers];
}

/* The trace of one rank into the folder dfd under name; on failure, the
 * marker and one line. */
static int write_trace(int dfd, const char *name, const tr_rank_view *view, const write_ctx *w)
{
    trace_arg ta = {view, w};
    int err = 0;
    uint64_t bytes = 0;
    long taken_by = -1, mtaken = -1;
    char mname[800];
    marker_name(mname, sizeof mname, name);
    if (write_file(dfd, name, fill_trace, &ta, &err, &bytes, &taken_by) == 0) {
        for (int k = 0; k < g_nmarkers; k++)
            if (!strcmp(g_markers[k], mname)) {
                unlinkat(dfd, mname, 0);      /* that trace is complete now */
                forget_marker(k);
                break;
            }
        return 0;
    }
    marker_arg ma = {name, view, w, err, bytes};
    int merr = 0, known = 0, made = 0;
    uint64_t mbytes = 0;
    for (int k = 0; k < g_nmarkers && !known; k++) known = !strcmp(g_markers[k], mname);
    char note[1000];
    if (write_file(dfd, mname, fill_marker, &ma, &merr, &mbytes, &mtaken) == 0) {
        made = 1;
        snprintf(note, sizeof note, "marker %s left", mname);
    } else if (known) {
        /* no room for the new one: the marker of the earlier failure stays */
        snprintf(note, sizeof note, "marker %s of an earlier failure kept (%s)", mname, strerror(merr));
    } else {
        /* not even a few hundred bytes: an empty marker (a name needs no
         * data block), when even that fails, none */
        int fd = tr_create_at(dfd, mname, O_WRONLY);
        if (fd >= 0) {
            close(fd);
            made = 1;
            snprintf(note, sizeof note, "empty marker %s left (%s)", mname, strerror(merr));
        } else {
            snprintf(note, sizeof note, "no marker either (%s)", strerror(errno));
        }
    }
    if (made && !known && g_nmarkers < MAX_VIEWS && (g_markers[g_nmarkers] = strdup(mname))) g_nmarkers++;
    /* one format: one line per process, however many writes fail; none when
     * this process said already that the folder is full (the ring's line) */
    if (taken_by >= 0)
        tr_warn("cannot write trace %s/%s: the name is taken by a file of uid %ld, not this process's (left as it is); "
                "%s", tr_dir_path(), name, taken_by, note);
    else if (tr_ring_folder_full(err) != 0)
        tr_warn("cannot write trace %s/%s: %s (after %llu bytes); %s", tr_dir_path(), name, strerror(err),
                (unsigned long long)bytes, note);
    return -1;
}

/* ---- all ranks' traces ------------------------------------------------------------ */

static void query_versions(int with_cuda)
{
    if (with_cuda && !g_ver_rt) g_ver_rt = tr_cuda_runtime_version();
    if (with_cuda && !g_ver_drv) g_ver_drv = tr_cuda_driver_version();
    if (!g_ver_nccl) g_ver_nccl = tr_nccl_version();
}

/* The file name of the trace of view (TRSHIM_TRACE_PREFIX<job>.r<rank>.<host>.<pid>.json). */
static void trace_name(char *out, size_t cap, const char *job_clean, const tr_rank_view *view, const char *host_clean)
{
    char rank[16];
    if (view->rank >= 0) snprintf(rank, sizeof rank, "%d", view->rank);
    else snprintf(rank, sizeof rank, "x");
    snprintf(out, cap, TRSHIM_TRACE_PREFIX "%s.r%s.%s.%d.json", job_clean, rank, host_clean, (int)getpid());
}

/* Every rank's trace, called with g_write_mu held: 1 when each was written. */
static int write_all(tr_write_reason reason, int signo, int from_writer)
{
    query_versions(from_writer);
    tr_crash_prepare();                  /* the crash stack interned before "stacks" is written */
    if (tr_dir_refused()) return 0;      /* said once, at activation */
    const char *why = NULL;
    int dfd = tr_dir_open(&why);
    if (dfd < 0) {
        if (!tr_dir_refused()) tr_warn("cannot write traces in %s (%s: %s)", tr_dir_path(), why, strerror(errno));
        return 0;
    }
    char host[256], job[300], job_clean[64], host_clean[256];
    tr_host_name(host, sizeof host);
    tr_utf8_clean(host);
    write_ctx w = {.host = host, .reason = reason, .signo = signo};
    tr_job_id(job, sizeof job, &w.job_source, tr_nccl_first_comm_id());
    w.job_id = tr_utf8_clean(job);
    tr_job_file_part(job_clean, sizeof job_clean, w.job_id);
    tr_clean_name(host_clean, sizeof host_clean, host, sizeof host_clean, 1);
    tr_ring_name_job(dfd, job_clean);     /* before the traces, which name the ring */

    tr_rank_view views[MAX_VIEWS];
    int nv = tr_nccl_ranks(views, MAX_VIEWS);
    char *names[MAX_VIEWS];          /* every trace this write is for */
    int ok[MAX_VIEWS], nn = 0, all_ok = nv > 0;
    for (int v = 0; v < nv; v++) {
        char name[700];
        trace_name(name, sizeof name, job_clean, &views[v], host_clean);
        int r = write_trace(dfd, name, &views[v], &w);
        all_ok &= r == 0;
        if ((names[nn] = strdup(name))) ok[nn++] = r == 0;
    }
    /* a rank whose file name changed (rank learnt later, one rank became
     * several): its older file goes, and a marker of it; a trace whose
     * write failed keeps its older complete file */
    char *keep[MAX_VIEWS];
    int nk = 0;
    for (int k = 0; k < nn; k++) {
        int before = 0;
        for (int i = 0; i < g_nprev && !before; i++) before = !strcmp(g_prev[i], names[k]);
        if (ok[k] || before) keep[nk++] = names[k];
        else free(names[k]);
    }
    for (int i = 0; i < g_nprev; i++) {
        int kept = 0;
        for (int k = 0; k < nk && !kept; k++) kept = !strcmp(g_prev[i], keep[k]);
        if (!kept) unlinkat(dfd, g_prev[i], 0);
        free(g_prev[i]);
    }
    memcpy(g_prev, keep, (size_t)nk * sizeof *keep);
    g_nprev = nk;
    for (int m = 0; m < g_nmarkers;) {
        int current = 0;
        for (int v = 0; v < nv && !current; v++) {
            char name[700], mname[800];
            trace_name(name, sizeof name, job_clean, &views[v], host_clean);
            marker_name(mname, sizeof mname, name);
            current = !strcmp(mname, g_markers[m]);
        }
        if (current) {
            m++;
            continue;
        }
        unlinkat(dfd, g_markers[m], 0);
        forget_marker(m);
    }
    close(dfd);
    return all_ok;
}

/* ---- the writer thread ---------------------------------------------------------------- */

static void *writer_main(void *arg)
{
    (void)arg;
    tr_nest();           /* nothing this thread calls is the application's: never leaves */
    atomic_store(&g_writer_tid, tr_tid());
    tr_pyroots_collect();   /* Python's install folders: file reads kept off the application's threads */
    /* CUDA's version getters set the calling thread's last error when there
     * is no driver: only this thread asks them */
    pthread_mutex_lock(&g_write_mu);
    query_versions(1);
    pthread_mutex_unlock(&g_write_mu);
    atomic_store(&g_versions_asked, 1);
    unsigned target;
    int mask;
    while (tr_write_queue_wait(&target, &mask) == 0) {
        /* requests that arrived together make one write, named after the
         * most telling; none left: an earlier write covered them */
        tr_write_reason reason = mask & (1 << TR_WRITE_SIGNAL)     ? TR_WRITE_SIGNAL
                                 : mask & (1 << TR_WRITE_HANG)     ? TR_WRITE_HANG
                                 : mask & (1 << TR_WRITE_SNAPSHOT) ? TR_WRITE_SNAPSHOT
                                 : mask & (1 << TR_WRITE_COMM_END) ? TR_WRITE_COMM_END
                                                                   : TR_WRITE_EXIT;
        int signo = reason == TR_WRITE_SIGNAL     ? atomic_load(&g_signo)
                    : reason == TR_WRITE_SNAPSHOT ? atomic_exchange(&g_snap_signo, 0)
                                                  : 0;
        pthread_mutex_lock(&g_write_mu);
        if (mask && !atomic_load(&g_exited)) write_all(reason, signo, 1);
        pthread_mutex_unlock(&g_write_mu);
        tr_write_done(target);
    }
    tr_write_queue_serve(0);
    return NULL;
}

void tr_writer_exit(void)
{
    if (tr_is_forked_child()) return;
    tr_nest();
    /* a process that exits right after its first CUDA call: let the writer
     * thread ask the versions first (bounded: never hang an exit) */
    for (int i = 0; i < 1000 && tr_write_queue_served() && !atomic_load(&g_versions_asked); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    /* A SIGTERM or SIGINT during the exit write goes to another thread,
     * whose handler waits for this write, or stays pending until it is
     * done: either way the process dies of it after a complete write. */
    sigset_t async, prev;
    sigemptyset(&async);
    sigaddset(&async, SIGTERM);
    sigaddset(&async, SIGINT);
    if (tr_cfg()->snapshot_signal > 0) sigaddset(&async, tr_cfg()->snapshot_signal);
    pthread_sigmask(SIG_BLOCK, &async, &prev);
    pthread_mutex_lock(&g_write_mu);
    atomic_store(&g_exit_tid, tr_tid());
    if (!atomic_load(&g_exited)) {
        int written = write_all(TR_WRITE_EXIT, 0, 0);
        atomic_store(&g_exited, 1);
        tr_ring_set_state(TRR_EXITED, 0);   /* after the write: EXITED means its trace is complete */
        /* the traces hold all the ring has: the ring file is redundant */
        if (written && !tr_cfg()->keep_ring) tr_ring_retire();
    }
    atomic_store(&g_exit_tid, 0);
    pthread_mutex_unlock(&g_write_mu);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    tr_leave();
}

/* ---- signals --------------------------------------------------------------------------
 *
 * Fatal signals (SIGTERM, SIGINT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL):
 * the ring file is marked SIGNALED, the writer thread is asked for the full
 * trace and waited for (up to ~3 s; not when the signal arrived on the
 * writer thread itself or in the thread doing the exit write: they would
 * wait for themselves), then what the application had runs as if the shim
 * were not there: its handler (plain or SA_SIGINFO, same arguments, under
 * its sa_mask, SA_NODEFER and SA_RESETHAND honoured), else the default
 * action: the disposition goes back to SIG_DFL and the signal is raised
 * again (delivered once this handler returns), or, for a fault the kernel
 * raised (si_code > 0), the handler returns and the faulting instruction
 * faults again, so a core dump shows the real fault. The process dies of
 * the same signal with the same wait status: SIGTERM, SIGINT and the
 * snapshot signal stay blocked while a fatal signal is handled, and after
 * it when it takes the default action (a launcher's SIGTERM to every rank
 * once one aborted must not turn that rank's SIGABRT into a SIGTERM). A
 * synchronous fault that comes back (an application handler that returns)
 * asks for one write only.
 *
 * The snapshot signal (TRSHIM_SNAPSHOT_SIGNAL, default SIGUSR1): asks for a
 * write (end.reason "snapshot") and returns at once; an application
 * handler of it still runs; its default action (ending the process) does not.
 *
 * A disposition of SIG_IGN is left alone. Handlers are installed with
 * SA_ONSTACK: a SIGSEGV from a stack overflow runs on the thread's
 * alternate stack when it has one (with none, the kernel kills the process
 * as it would without the shim). SA_RESTART follows the application's
 * handler (its own choice of EINTR), and is set where there was none.
 * Everything here is async-signal-safe: atomics, tr_write_post (a write()
 * on the eventfd), nanosleep, sigaction, pthread_sigmask, raise. */

#define MAX_SIGS 8
static const int g_fatal[] = {SIGTERM, SIGINT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static int g_sig[MAX_SIGS];                  /* the signals taken, in slots; 0: free */
static struct sigaction g_old[MAX_SIGS];     /* what the application had */
static atomic_int g_old_spent[MAX_SIGS];     /* its SA_RESETHAND handler ran: the default from now on */
static atomic_int g_fault_asked[MAX_SIGS];   /* a synchronous fault asked for its write */

static int has_function(const struct sigaction *sa)
{
    /* sa_handler and sa_sigaction share storage: SIG_DFL/SIG_IGN read the same */
    return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

static int synchronous_fault(int sig, const siginfo_t *si)
{
    return si && si->si_code > 0 && (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL);
}

/* The full trace for fatal signal sig, waited for when that can end. */
static void write_for_signal(int sig)
{
    tr_ring_set_state(TRR_SIGNALED, sig);
    if (!tr_write_queue_served()) return;
    atomic_store(&g_signo, sig);
    unsigned target = tr_write_post(TR_WRITE_SIGNAL);
    int self = tr_tid();
    if (self == atomic_load(&g_writer_tid) || self == atomic_load(&g_exit_tid)) return;
    for (int i = 0; i < 3000 && (int)(tr_write_done_upto() - target) < 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* The signals that end a job from outside (and the snapshot signal): kept
 * pending while a fatal signal is handled, so that one arriving meanwhile
 * (a launcher's SIGTERM to the other ranks once one aborted) neither
 * replaces the write nor kills the process with another signal. */
static void add_outside_signals(sigset_t *set)
{
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    if (tr_cfg()->snapshot_signal > 0) sigaddset(set, tr_cfg()->snapshot_signal);
}

/* What the application had for signal slot k. */
static void chain(int k, int sig, siginfo_t *si, void *uc)
{
    const struct sigaction *old = &g_old[k];
    ucontext_t *ctx = uc;
    if (has_function(old) && !atomic_load(&g_old_spent[k])) {
        if (old->sa_flags & SA_RESETHAND) atomic_store(&g_old_spent[k], 1);
        /* the mask the kernel would have set for it: the interrupted
         * code's, its sa_mask, and sig unless SA_NODEFER */
        sigset_t mask, prev;
        if (ctx) mask = ctx->uc_sigmask;
        else pthread_sigmask(SIG_SETMASK, NULL, &mask);
        for (int s = 1; s < NSIG; s++)
            if (sigismember(&old->sa_mask, s) == 1) sigaddset(&mask, s);
        if (old->sa_flags & SA_NODEFER) sigdelset(&mask, sig);
        else sigaddset(&mask, sig);
        pthread_sigmask(SIG_SETMASK, &mask, &prev);
        if (old->sa_flags & SA_SIGINFO) old->sa_sigaction(sig, si, uc);
        else old->sa_handler(sig);
        pthread_sigmask(SIG_SETMASK, &prev, NULL);
        return;
    }
    /* the snapshot signal's default would end the job: the snapshot replaces it (not in a forked child,
     * which takes no snapshot) */
    if (sig == tr_cfg()->snapshot_signal && !tr_is_forked_child()) return;
    if (old->sa_handler == SIG_IGN) return;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    /* the mask restored on return: sig open, the outside signals still
     * blocked, so that sig is the one the process dies of */
    if (ctx) {
        add_outside_signals(&ctx->uc_sigmask);
        sigdelset(&ctx->uc_sigmask, sig);
    }
    if (!synchronous_fault(sig, si)) raise(sig);     /* pending until this handler returns */
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    int k = 0;
    while (k < MAX_SIGS && g_sig[k] != sig) k++;
    if (k == MAX_SIGS) {                 /* not one of ours: cannot happen */
        errno = saved;
        return;
    }
    int live = !tr_is_forked_child() && !atomic_load(&g_exited);
    /* the crash site first (tr_crash.c; a fault inside that capture jumps back into it) */
    if (live) tr_crash_signal(sig, si, uc);
    /* a dying process: an operation that completes from now on was released, not done */
    if (live && (sig == SIGABRT || synchronous_fault(sig, si))) tr_complete_fatal();
    if (sig == tr_cfg()->snapshot_signal) {
        if (live && tr_write_queue_served()) {
            atomic_store(&g_snap_signo, sig);
            tr_write_post(TR_WRITE_SNAPSHOT);
        }
    } else if (live && !(synchronous_fault(sig, si) && atomic_exchange(&g_fault_asked[k], 1))) {
        write_for_signal(sig);
    }
    chain(k, sig, si, uc);
    errno = saved;
}

static void take_signal(int sig)
{
    int k = 0;
    while (k < MAX_SIGS && g_sig[k] && g_sig[k] != sig) k++;
    if (k == MAX_SIGS || g_sig[k]) return;
    /* g_old first: the handler may run as soon as it is installed */
    if (sigaction(sig, NULL, &g_old[k]) != 0 || g_old[k].sa_handler == SIG_IGN) return;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (has_function(&g_old[k]) ? g_old[k].sa_flags & SA_RESTART : SA_RESTART);
    sigemptyset(&sa.sa_mask);
    add_outside_signals(&sa.sa_mask);
    g_sig[k] = sig;
    if (sigaction(sig, &sa, &old) != 0) {
        g_sig[k] = 0;
        return;
    }
    if (old.sa_handler == SIG_IGN) {
        sigaction(sig, &old, NULL);         /* set to ignore meanwhile: keep it */
        g_sig[k] = 0;
        return;
    }
    g_old[k] = old;
}

static void install_handlers(void)
{
    for (size_t i = 0; i < sizeof g_fatal / sizeof g_fatal[0]; i++) take_signal(g_fatal[i]);
    if (tr_cfg()->snapshot_signal > 0) take_signal(tr_cfg()->snapshot_signal);
}

void tr_writer_start(void)
{
    if (tr_write_queue_open() != 0) {
        tr_warn("cannot create the writer's eventfd (%s): traces are written at exit only", strerror(errno));
        return;
    }
    int e = tr_thread_start(writer_main, "trshim-writer");
    if (e != 0) {
        tr_warn("cannot start the writer thread (%s): traces are written at exit only", strerror(e));
        return;
    }
    tr_write_queue_serve(1);
    tr_crash_init();                     /* the crash record, before the handlers that fill it */
    install_handlers();
}
