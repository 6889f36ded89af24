/* The ground of the shim: start-up, settings, per-thread state, warnings,
 * background threads and the write queue.
 *
 * The constructor only reads the environment and the clocks: a process that
 * never calls a wrapped function (the launcher, a compiler, a data-loader
 * worker) pays nothing else. The first recorded call activates the shim
 * (tr_init.c: ring, writer thread, signal handlers, exit handler); this
 * file only keeps whether that happened (for fork). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "tr_core.h"

#define TR_TLS __thread __attribute__((tls_model("initial-exec")))

static tr_settings g_cfg = {
    .enabled = 1,
    .dir = "./traces",
    .stack_depth = 64,
    .pystack_depth = 64,
    .ring = 131072,
    .hang_sec = 300,
    .snapshot_signal = SIGUSR1,
    .completion = 1,
    .nancheck = TR_NAN_ALL,
    .nancheck_engine = TR_NAN_ENGINE_AUTO,
    .nancheck_max_bytes = 64ull << 20,
    .nancheck_pool_bytes = 0,          /* 0: 4 x nancheck_max_bytes */
};
static tr_process g_proc = {
    .env_rank = -1, .world_size = -1, .local_rank = -1,
};

static atomic_int g_active;        /* activation done (tr_init.c) */
static atomic_int g_forked;        /* forked child of a recording process */

static TR_TLS int t_depth;
static TR_TLS int t_tid;

/* Warnings about settings wait for activation: a process that never
 * records (the launcher, a compiler) stays silent. */
#define MAX_PENDING 10
static char g_pending[MAX_PENDING][320];
static int g_npending;

const tr_settings *tr_cfg(void) { return &g_cfg; }
const tr_process *tr_proc(void) { return &g_proc; }

uint64_t tr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int tr_tid(void)
{
    if (!t_tid) t_tid = (int)syscall(SYS_gettid);
    return t_tid;
}

int tr_is_forked_child(void) { return atomic_load_explicit(&g_forked, memory_order_relaxed); }

int tr_nest(void)
{
    if (t_depth++ != 0) return 0;
    if (!g_cfg.enabled || atomic_load_explicit(&g_forked, memory_order_relaxed)) return 0;
    return atomic_load_explicit(&g_active, memory_order_acquire) ? 1 : 2;
}

void tr_leave(void)
{
    if (t_depth > 0) t_depth--;
}

int tr_depth(void) { return t_depth; }

void tr_mark_active(void) { atomic_store_explicit(&g_active, 1, memory_order_release); }

/* ---- warnings -------------------------------------------------------------- */

static void warn_line(const char *msg)
{
    char line[512];
    int n = snprintf(line, sizeof line, "trshim: %s\n", msg);
    if (n < 0) return;
    if ((size_t)n >= sizeof line) {
        n = sizeof line - 1;
        line[n - 1] = '\n';
    }
    ssize_t w;
    do w = write(2, line, (size_t)n); while (w < 0 && errno == EINTR);
}

void tr_warn(const char *fmt, ...)
{
    static _Atomic(const char *) seen[128];
    size_t i;
    for (i = 0; i < sizeof seen / sizeof seen[0]; i++) {
        const char *cur = atomic_load(&seen[i]);
        if (cur == fmt) return;
        if (!cur) {
            const char *expect = NULL;
            if (atomic_compare_exchange_strong(&seen[i], &expect, fmt)) break;
            if (expect == fmt) return;
        }
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    warn_line(msg);
}

static void pending(const char *fmt, const char *name, const char *value, const char *dflt)
{
    if (g_npending < MAX_PENDING)
        snprintf(g_pending[g_npending++], sizeof g_pending[0], fmt, name, value, dflt);
}

void tr_print_setting_warnings(void)
{
    for (int i = 0; i < g_npending; i++) warn_line(g_pending[i]);
    g_npending = 0;
}

/* ---- settings ---------------------------------------------------------------- */

/* A non-negative decimal integer up to max; -1 when malformed. */
static long long parse_count(const char *s, long long max)
{
    long long v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (*s - '0');
        if (v > max) return -1;
    }
    return v;
}

#define TR_MAX_STACK_DEPTH 256
#define TR_MAX_NANCHECK_MB (1ll << 20)     /* 1 TiB */
#define TR_RING_MIN 64
#define TR_RING_MAX (1ll << 26)
#define TR_HANG_MAX (7 * 24 * 3600)

/* A 0/1 setting; *flag holds its default. */
static void read_flag(const char *name, int *flag)
{
    const char *v = getenv(name);
    if (!v || !*v) return;
    if (!strcmp(v, "0") || !strcmp(v, "1")) *flag = v[0] == '1';
    else pending("ignoring %s=%s (want 0 or 1); using %s", name, v, *flag ? "1" : "0");
}

static void read_settings(void)
{
    const char *v = getenv("TRSHIM");
    if (v && *v) {
        if (!strcmp(v, "0")) g_cfg.enabled = 0;
        else if (strcmp(v, "1") != 0)
            pending("ignoring %s=%s (want 0 or 1); using %s", "TRSHIM", v, "1");
    }
    v = getenv("TRSHIM_DIR");
    if (v && *v) {
        if (strlen(v) < sizeof g_cfg.dir - 200) snprintf(g_cfg.dir, sizeof g_cfg.dir, "%s", v);
        else pending("ignoring %s=%.40s... (too long); using %s", "TRSHIM_DIR", v, g_cfg.dir);
    }
    v = getenv("TRSHIM_STACK_DEPTH");
    if (v && *v) {
        long long n = parse_count(v, TR_MAX_STACK_DEPTH);
        if (n >= 0) g_cfg.stack_depth = (int)n;
        else pending("ignoring %s=%s (want frames, 0 to 256); using %s", "TRSHIM_STACK_DEPTH", v, "64");
    }
    v = getenv("TRSHIM_PYSTACK_DEPTH");
    if (v && *v) {
        long long n = parse_count(v, TR_PYSTACK_MAX_DEPTH);
        if (n >= 0) g_cfg.pystack_depth = (int)n;
        else pending("ignoring %s=%s (want Python frames, 0 to 256); using %s", "TRSHIM_PYSTACK_DEPTH", v, "64");
    }
    v = getenv("TRSHIM_RING");
    if (v && *v) {
        long long n = parse_count(v, TR_RING_MAX);
        if (n >= TR_RING_MIN) g_cfg.ring = (uint64_t)n;
        else pending("ignoring %s=%s (want records, 64 to 67108864); using %s", "TRSHIM_RING", v, "131072");
    }
    v = getenv("TRSHIM_HANG_SEC");
    if (v && *v) {
        long long n = parse_count(v, TR_HANG_MAX);
        if (n >= 0) g_cfg.hang_sec = (int)n;
        else pending("ignoring %s=%s (want seconds, 0 to 604800; 0: off); using %s", "TRSHIM_HANG_SEC", v, "300");
    }
    v = getenv("TRSHIM_SNAPSHOT_SIGNAL");
    if (v && *v) {
        long long n = -1;
        if (!strcmp(v, "off") || !strcmp(v, "0")) n = 0;
        else if (!strcmp(v, "USR1") || !strcmp(v, "SIGUSR1")) n = SIGUSR1;
        else if (!strcmp(v, "USR2") || !strcmp(v, "SIGUSR2")) n = SIGUSR2;
        else {
            n = parse_count(v, 64);
            /* signals the job or the shim already gives a meaning */
            if (n == SIGKILL || n == SIGSTOP || n == SIGTERM || n == SIGINT || n == SIGABRT || n == SIGSEGV ||
                n == SIGBUS || n == SIGFPE || n == SIGILL || n == SIGCHLD || n == SIGCONT || n < 1) n = -1;
        }
        if (n >= 0) g_cfg.snapshot_signal = (int)n;
        else pending("ignoring %s=%s (want USR1, USR2, a free signal number, or off); using %s",
                     "TRSHIM_SNAPSHOT_SIGNAL", v, "USR1");
    }
    read_flag("TRSHIM_COMPLETION", &g_cfg.completion);
    read_flag("TRSHIM_KEEP_RING", &g_cfg.keep_ring);
    read_flag("TRSHIM_QUIET", &g_cfg.quiet);
    v = getenv("TRSHIM_NANCHECK");
    if (v && *v) {
        if (!strcmp(v, "off")) g_cfg.nancheck = TR_NAN_OFF;
        else if (!strcmp(v, "output")) g_cfg.nancheck = TR_NAN_OUTPUT;
        else if (!strcmp(v, "all")) g_cfg.nancheck = TR_NAN_ALL;
        else pending("ignoring %s=%s (want off, output or all); using %s", "TRSHIM_NANCHECK", v, "all");
    }
    v = getenv("TRSHIM_NANCHECK_ENGINE");
    if (v && *v) {
        if (!strcmp(v, "auto")) g_cfg.nancheck_engine = TR_NAN_ENGINE_AUTO;
        else if (!strcmp(v, "host")) g_cfg.nancheck_engine = TR_NAN_ENGINE_HOST;
        else if (!strcmp(v, "gpu")) g_cfg.nancheck_engine = TR_NAN_ENGINE_GPU;
        else pending("ignoring %s=%s (want auto, host or gpu); using %s", "TRSHIM_NANCHECK_ENGINE", v, "auto");
    }
    v = getenv("TRSHIM_NANCHECK_MAX_MB");
    if (v && *v) {
        long long n = parse_count(v, TR_MAX_NANCHECK_MB);
        if (n >= 1) g_cfg.nancheck_max_bytes = (uint64_t)n << 20;
        else pending("ignoring %s=%s (want MiB, 1 to 1048576); using %s", "TRSHIM_NANCHECK_MAX_MB", v, "64");
    }
    v = getenv("TRSHIM_NANCHECK_POOL_MB");
    if (v && *v) {
        long long n = parse_count(v, TR_MAX_NANCHECK_MB);
        if (n >= 1) g_cfg.nancheck_pool_bytes = (uint64_t)n << 20;
        else pending("ignoring %s=%s (want MiB, 1 to 1048576); using %s", "TRSHIM_NANCHECK_POOL_MB", v,
                     "4 x TRSHIM_NANCHECK_MAX_MB");
    }
    if (!g_cfg.nancheck_pool_bytes) {
        uint64_t four = g_cfg.nancheck_max_bytes * 4;
        g_cfg.nancheck_pool_bytes = four < (TR_MAX_NANCHECK_MB << 20) ? four : (uint64_t)TR_MAX_NANCHECK_MB << 20;
    }
}

static int env_int(const char *name, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    long long n = parse_count(v, 1 << 30);
    if (n < 0) return 0;
    *out = (int)n;
    return 1;
}

static void read_identity(void)
{
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++)
        if (env_int(rank_vars[i], &g_proc.env_rank)) {
            g_proc.env_rank_source = rank_vars[i];
            break;
        }
    if (!env_int("WORLD_SIZE", &g_proc.world_size) && !env_int("OMPI_COMM_WORLD_SIZE", &g_proc.world_size) &&
        !env_int("PMI_SIZE", &g_proc.world_size))
        env_int("SLURM_NTASKS", &g_proc.world_size);
    if (!env_int("LOCAL_RANK", &g_proc.local_rank) && !env_int("OMPI_COMM_WORLD_LOCAL_RANK", &g_proc.local_rank))
        env_int("SLURM_LOCALID", &g_proc.local_rank);

    static const char *const job_vars[] = {"TRSHIM_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                                           "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "TRSIM_SHM_TAG"};
    for (size_t i = 0; i < sizeof job_vars / sizeof job_vars[0]; i++) {
        const char *v = getenv(job_vars[i]);
        if (!v || !*v) continue;
        /* torchrun's default run id is the literal "none": it names no job */
        if (!strcmp(job_vars[i], "TORCHELASTIC_RUN_ID") && !strcmp(v, "none")) continue;
        const char *step = getenv("SLURM_STEP_ID");
        if (!strcmp(job_vars[i], "SLURM_JOB_ID") && step && *step)
            snprintf(g_proc.job_id, sizeof g_proc.job_id, "%s.%s", v, step);
        else
            snprintf(g_proc.job_id, sizeof g_proc.job_id, "%s", v);
        g_proc.job_source = job_vars[i];
        break;
    }
}

static void atfork_child(void)
{
    /* The child of a recording process never writes its parent's trace. A
     * process that had recorded nothing yet (workers forked before any CUDA
     * call) stays free to record on its own. */
    t_tid = 0;
    if (atomic_load(&g_active)) atomic_store(&g_forked, 1);
}

__attribute__((constructor)) static void tr_core_init(void)
{
    struct timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    g_proc.start_realtime = (double)rt.tv_sec + (double)rt.tv_nsec * 1e-9;
    g_proc.start_mono_ns = (uint64_t)mono.tv_sec * 1000000000ull + (uint64_t)mono.tv_nsec;
    read_settings();
    read_identity();
    pthread_atfork(NULL, NULL, atfork_child);
}

/* ---- helpers of the background parts ------------------------------------------- */

int tr_thread_start(void *(*fn)(void *), const char *name)
{
    sigset_t all, prev;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int e = pthread_create(&t, &attr, fn, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    if (e == 0) pthread_setname_np(t, name);
    return e;
}

int tr_mkdir_p(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* ---- the write queue (tr_core.h) ---------------------------------------------- */

static int g_efd = -1;                 /* the writer thread waits on it */
static atomic_uint g_req_gen, g_done_gen;
static atomic_int g_req_mask;
static atomic_int g_served;            /* a writer thread serves the queue */

int tr_write_queue_open(void)
{
    g_efd = eventfd(0, EFD_CLOEXEC);
    return g_efd < 0 ? -1 : 0;
}

void tr_write_queue_serve(int served) { atomic_store(&g_served, served); }
int tr_write_queue_served(void) { return atomic_load(&g_served); }

unsigned tr_write_post(tr_write_reason reason)
{
    atomic_fetch_or(&g_req_mask, 1 << reason);
    unsigned gen = atomic_fetch_add(&g_req_gen, 1) + 1;
    uint64_t one = 1;
    ssize_t w;
    do w = write(g_efd, &one, sizeof one); while (w < 0 && errno == EINTR);
    return gen;
}

void tr_write_request(tr_write_reason reason)
{
    if (!atomic_load(&g_served) || tr_is_forked_child()) return;
    int saved = errno;
    tr_write_post(reason);
    errno = saved;
}

int tr_write_queue_wait(unsigned *upto, int *mask)
{
    for (;;) {
        uint64_t v;
        ssize_t n = read(g_efd, &v, sizeof v);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -1;
        }
        *upto = atomic_load(&g_req_gen);
        *mask = atomic_exchange(&g_req_mask, 0);
        return 0;
    }
}

void tr_write_done(unsigned upto) { atomic_store(&g_done_gen, upto); }
unsigned tr_write_done_upto(void) { return atomic_load(&g_done_gen); }
