/* Trace files: the background writer, the SIGTERM/SIGINT handler and the
 * exit-time write.
 *
 * The application's threads never do I/O for the shim: they only ask the
 * writer thread (an eventfd write, async-signal-safe) to write. The exit
 * handler writes from the exiting thread, serialized with the writer by a
 * mutex. The signal handler asks for a write, waits up to ~3 s for it, then
 * lets the application's handler or the default action run as before. Every
 * file is written to a temporary name and renamed. */
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
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <cuda_runtime_api.h>

#include "tr_core.h"
#include "trshim/trace_format.h"
#include "tr_nancheck.h"

static int g_efd = -1;
static atomic_uint g_req_gen, g_done_gen;
static atomic_int g_req_mask;
static atomic_int g_signo;
static atomic_int g_writer_up;
static atomic_int g_exited;                 /* the exit write is done: no more writes */
static pthread_mutex_t g_write_mu = PTHREAD_MUTEX_INITIALIZER;

static const int g_sigs[2] = {SIGTERM, SIGINT};
static struct sigaction g_old[2];

static int g_ver_rt, g_ver_drv, g_ver_nccl;     /* 0: unknown; only under g_write_mu */
static atomic_int g_versions_asked;             /* the writer thread asked CUDA once */

/* TRSHIM_DIR made absolute at activation: a later chdir() moves nothing */
static char g_dir[2100];

/* files of the previous write, removed when a rank's name changed */
#define MAX_VIEWS 256
static char *g_prev[MAX_VIEWS];
static int g_nprev;

/* ---- requests -------------------------------------------------------------- */

static unsigned request(tr_write_reason reason)
{
    atomic_fetch_or(&g_req_mask, 1 << reason);
    unsigned gen = atomic_fetch_add(&g_req_gen, 1) + 1;
    uint64_t one = 1;
    ssize_t w;
    do w = write(g_efd, &one, sizeof one); while (w < 0 && errno == EINTR);
    return gen;
}

void tr_writer_request(tr_write_reason reason)
{
    if (!atomic_load(&g_writer_up) || tr_is_forked_child()) return;
    int saved = errno;
    request(reason);
    errno = saved;
}

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

/* Replaces, in place, every byte that is not part of valid UTF-8 with '?':
 * command lines and environments may hold anything, a trace must parse. */
static char *utf8_clean(char *str)
{
    unsigned char *p = (unsigned char *)str;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : -1;
        int ok = n >= 0 && !(n == 1 && *p < 0xc2) && !(n == 3 && *p > 0xf4);
        for (int k = 1; ok && k <= n; k++) ok = (p[k] & 0xc0) == 0x80;
        if (ok && n == 2) {
            unsigned cp = (unsigned)(p[0] & 0x0f) << 12 | (unsigned)(p[1] & 0x3f) << 6;
            ok = cp >= 0x800 && !(cp >= 0xd800 && cp <= 0xdfff);
        }
        if (ok && n == 3) {
            unsigned cp = (unsigned)(p[0] & 0x07) << 18 | (unsigned)(p[1] & 0x3f) << 12;
            ok = cp >= 0x10000 && cp <= 0x10ffff;
        }
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n + 1;
    }
    return str;
}

static int secret_name(const char *name, size_t len)
{
    static const char *const words[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t wl = strlen(words[w]);
        for (size_t i = 0; i + wl <= len; i++)
            if (!strncasecmp(name + i, words[w], wl)) return 1;
    }
    return 0;
}

static void write_strings(tr_json *j, const char *key, const char *path)
{
    size_t n = 0;
    char *buf = read_proc(path, &n);
    trj_array_begin(j, key);
    for (size_t i = 0; buf && i < n; i += strlen(buf + i) + 1) trj_str(j, NULL, utf8_clean(buf + i));
    trj_array_end(j);
    free(buf);
}

static void write_env(tr_json *j)
{
    static const char *const prefixes[] = {"NCCL_", "CUDA_", "TORCH_", "TRSHIM_"};
    size_t n = 0;
    char *buf = read_proc("/proc/self/environ", &n);
    trj_object_begin(j, "env");
    for (size_t i = 0; buf && i < n; i += strlen(buf + i) + 1) {
        char *var = buf + i, *eq = strchr(var, '=');
        if (!eq) continue;
        int keep = 0;
        for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++)
            keep |= !strncmp(var, prefixes[p], strlen(prefixes[p]));
        if (!keep) continue;
        *eq = 0;
        trj_str(j, utf8_clean(var), secret_name(var, (size_t)(eq - var)) ? "<redacted>" : utf8_clean(eq + 1));
        *eq = '=';
    }
    trj_object_end(j);
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

typedef struct {
    const char *job_id, *job_source, *host;
    tr_write_reason reason;
    int signo;
} write_ctx;

static int write_trace(const char *path, const tr_rank_view *view, const write_ctx *w)
{
    char tmp[2800];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "we");
    if (!f) {
        tr_warn("cannot write trace %s: %s", tmp, strerror(errno));
        return -1;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    const tr_process *proc = tr_proc();
    const tr_settings *cfg = tr_cfg();
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    static const char *const reasons[] = {"exit", "signal", "comm_end", "snapshot"};

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
    write_strings(&j, "cmdline", "/proc/self/cmdline");
    trj_double(&j, "start_time", proc->start_realtime);
    trj_double(&j, "write_time", (double)now.tv_sec + (double)now.tv_nsec * 1e-9);
    trj_object_begin(&j, "versions");
    trj_str(&j, "trshim", TR_VERSION);
    version_or_null(&j, "cuda_runtime", g_ver_rt);
    version_or_null(&j, "cuda_driver", g_ver_drv);
    version_or_null(&j, "nccl", g_ver_nccl);
    trj_object_end(&j);
    write_env(&j);
    trj_object_begin(&j, "settings");
    trj_bool(&j, "enabled", cfg->enabled);
    char dir[sizeof cfg->dir];
    snprintf(dir, sizeof dir, "%s", cfg->dir);
    trj_str(&j, "dir", utf8_clean(dir));
    trj_int(&j, "stack_depth", cfg->stack_depth);
    trj_uint(&j, "max_records", cfg->max_records);
    trj_object_end(&j);
    trj_object_begin(&j, "clock");
    trj_double(&j, "realtime", proc->start_realtime);
    trj_uint(&j, "monotonic_ns", proc->start_mono_ns);
    trj_object_end(&j);
    tr_nan_snap *checks = tr_nan_snapshot();
    int in_call = tr_nccl_write_json(&j, view, checks);
    tr_nan_write_json(&j, checks);       /* "nancheck", "check_fields", "checks" */
    tr_memory_write_json(&j, view->device);
    tr_stack_write_json(&j);
    trj_uint(&j, "dropped", tr_nccl_dropped());
    /* last: in_call agrees with the calls written above */
    trj_object_begin(&j, "end");
    trj_str(&j, "reason", reasons[w->reason]);
    if (w->reason == TR_WRITE_SIGNAL && w->signo > 0) trj_int(&j, "signal", w->signo);
    else trj_null(&j, "signal");
    trj_bool(&j, "in_call", in_call);
    trj_object_end(&j);
    trj_object_end(&j);

    int err = fflush(f) != 0 || ferror(f);
    int saved = errno;
    if (fclose(f) != 0 && !err) {
        err = 1;
        saved = errno;
    }
    if (err || rename(tmp, path) != 0) {
        if (!err) saved = errno;
        tr_warn("cannot write trace %s: %s", path, strerror(saved));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* ---- all ranks' traces ------------------------------------------------------------ */

static int mkdir_p(const char *dir)
{
    char path[sizeof g_dir];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* characters outside [A-Za-z0-9_-] (and '.' when keep_dot) become '_' */
static void clean_name(char *out, size_t cap, const char *in, size_t max, int keep_dot)
{
    size_t n = 0;
    for (; in[n] && n < max && n + 1 < cap; n++) {
        char c = in[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '-' || (keep_dot && c == '.');
        out[n] = ok ? c : '_';
    }
    out[n] = 0;
}

static void query_versions(int with_cuda)
{
    typedef cudaError_t (*ver_fn)(int *);
    if (with_cuda && !g_ver_rt) {
        ver_fn f = (ver_fn)tr_real("cudaRuntimeGetVersion", TR_LIB_CUDART);
        int v = 0;
        if (f && f(&v) == cudaSuccess) g_ver_rt = v;
    }
    if (with_cuda && !g_ver_drv) {
        ver_fn f = (ver_fn)tr_real("cudaDriverGetVersion", TR_LIB_CUDART);
        int v = 0;
        if (f && f(&v) == cudaSuccess) g_ver_drv = v;
    }
    if (!g_ver_nccl) g_ver_nccl = tr_nccl_version();
}

/* Called with g_write_mu held. */
static void write_all(tr_write_reason reason, int signo, int from_writer)
{
    const tr_process *proc = tr_proc();
    query_versions(from_writer);
    if (mkdir_p(g_dir) != 0) {
        tr_warn("cannot create trace folder %s: %s", g_dir, strerror(errno));
        return;
    }
    char host[256] = "", job[300], job_clean[64], host_clean[256];
    gethostname(host, sizeof host - 1);
    utf8_clean(host);
    write_ctx w = {.host = host, .reason = reason, .signo = signo};
    uint64_t first = tr_nccl_first_comm_id();
    if (proc->job_source) {
        snprintf(job, sizeof job, "%s", proc->job_id);
        w.job_id = utf8_clean(job);
        w.job_source = proc->job_source;
    } else if (first) {
        snprintf(job, sizeof job, "0x%llx", (unsigned long long)first);   /* as comms[].id */
        w.job_id = job;
        w.job_source = "comm";
    } else {
        snprintf(job, sizeof job, "%s-%d", host, (int)getpid());
        w.job_id = job;
        w.job_source = "process";
    }
    clean_name(job_clean, sizeof job_clean, w.job_id, 48, 0);
    clean_name(host_clean, sizeof host_clean, host, sizeof host_clean, 1);

    tr_rank_view views[MAX_VIEWS];
    int nv = tr_nccl_ranks(views, MAX_VIEWS);
    char *paths[MAX_VIEWS];
    int np = 0;
    for (int v = 0; v < nv; v++) {
        char rank[16], path[2700];
        if (views[v].rank >= 0) snprintf(rank, sizeof rank, "%d", views[v].rank);
        else snprintf(rank, sizeof rank, "x");
        snprintf(path, sizeof path, "%s/" TRSHIM_TRACE_PREFIX "%s.r%s.%s.%d.json", g_dir, job_clean, rank, host_clean,
                 (int)getpid());
        if (write_trace(path, &views[v], &w) == 0 && (paths[np] = strdup(path))) np++;
    }
    /* a rank whose file name changed (rank learnt later, one rank became
     * several): its older file goes */
    for (int i = 0; i < g_nprev; i++) {
        int kept = 0;
        for (int k = 0; k < np && !kept; k++) kept = !strcmp(g_prev[i], paths[k]);
        if (!kept) unlink(g_prev[i]);
        free(g_prev[i]);
    }
    memcpy(g_prev, paths, (size_t)np * sizeof *paths);
    g_nprev = np;
}

/* ---- the writer thread ---------------------------------------------------------------- */

static void *writer_main(void *arg)
{
    (void)arg;
    tr_enter();          /* nothing this thread calls is the application's: never leaves */
    /* CUDA's version getters set the calling thread's last error when there
     * is no driver: only this thread asks them */
    pthread_mutex_lock(&g_write_mu);
    query_versions(1);
    pthread_mutex_unlock(&g_write_mu);
    atomic_store(&g_versions_asked, 1);
    for (;;) {
        uint64_t v;
        ssize_t n = read(g_efd, &v, sizeof v);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            break;
        }
        unsigned target = atomic_load(&g_req_gen);
        int mask = atomic_exchange(&g_req_mask, 0);
        tr_write_reason reason = mask & (1 << TR_WRITE_SIGNAL)     ? TR_WRITE_SIGNAL
                                 : mask & (1 << TR_WRITE_COMM_END) ? TR_WRITE_COMM_END
                                 : mask & (1 << TR_WRITE_EXIT)     ? TR_WRITE_EXIT
                                                                   : TR_WRITE_SNAPSHOT;
        pthread_mutex_lock(&g_write_mu);
        if (!atomic_load(&g_exited)) write_all(reason, atomic_load(&g_signo), 1);
        pthread_mutex_unlock(&g_write_mu);
        atomic_store(&g_done_gen, target);
    }
    atomic_store(&g_writer_up, 0);
    return NULL;
}

void tr_writer_exit(void)
{
    if (tr_is_forked_child()) return;
    tr_enter();
    /* a process that exits right after its first CUDA call: let the writer
     * thread ask the versions first (bounded: never hang an exit) */
    for (int i = 0; i < 1000 && atomic_load(&g_writer_up) && !atomic_load(&g_versions_asked); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&g_write_mu);
    if (!atomic_load(&g_exited)) {
        write_all(TR_WRITE_EXIT, 0, 0);
        atomic_store(&g_exited, 1);
    }
    pthread_mutex_unlock(&g_write_mu);
    tr_leave();
}

/* ---- signals -------------------------------------------------------------------------- */

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    int k = sig == SIGTERM ? 0 : 1;
    if (!tr_is_forked_child() && atomic_load(&g_writer_up) && !atomic_load(&g_exited)) {
        atomic_store(&g_signo, sig);
        unsigned target = request(TR_WRITE_SIGNAL);
        for (int i = 0; i < 3000 && (int)(atomic_load(&g_done_gen) - target) < 0; i++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    const struct sigaction *old = &g_old[k];
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) old->sa_sigaction(sig, si, uc);
    } else if (old->sa_handler == SIG_DFL) {
        /* as if we had never been here: the default action, once we return */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        raise(sig);
    } else if (old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    }
    errno = saved;
}

static void install_handlers(void)
{
    for (int k = 0; k < 2; k++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        /* g_old first: the handler may run as soon as it is installed */
        if (sigaction(g_sigs[k], NULL, &g_old[k]) != 0) continue;
        if (!(g_old[k].sa_flags & SA_SIGINFO) && g_old[k].sa_handler == SIG_IGN) continue;
        if (sigaction(g_sigs[k], &sa, &old) != 0) continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) {
            sigaction(g_sigs[k], &old, NULL);   /* set to ignore meanwhile: keep it */
            continue;
        }
        g_old[k] = old;
    }
}

void tr_writer_start(void)
{
    const char *dir = tr_cfg()->dir;
    char cwd[1024];
    if (dir[0] != '/' && getcwd(cwd, sizeof cwd))
        snprintf(g_dir, sizeof g_dir, "%s/%s", cwd, dir);
    else
        snprintf(g_dir, sizeof g_dir, "%s", dir);
    g_efd = eventfd(0, EFD_CLOEXEC);
    if (g_efd < 0) {
        tr_warn("cannot create the writer's eventfd (%s): traces are written at exit only", strerror(errno));
        return;
    }
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev);   /* the writer never takes a signal */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int e = pthread_create(&t, &attr, writer_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    if (e == 0) pthread_setname_np(t, "trshim-writer");
    if (e != 0) {
        tr_warn("cannot start the writer thread (%s): traces are written at exit only", strerror(e));
        return;
    }
    atomic_store(&g_writer_up, 1);
    install_handlers();
}
