/* trsim-launch: starts the N ranks of a multi-process job, like torchrun, for
 * the tests and examples that run on the simulated CUDA runtime + NCCL.
 *
 *   trsim-launch -n N [--timeout SEC] [--signal SIG] [--grace SEC]
 *                [--no-kill-on-fail] [--quiet] -- PROG [ARGS...]
 *
 * Each rank runs in a process group of its own (so that a signal reaches its
 * children too) with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
 * GROUP_RANK, MASTER_ADDR, MASTER_PORT, TRSIM_RDZV (a private folder for the
 * unique-id exchange, removed at the end) and TRSIM_SHM_TAG (the simulated
 * NCCL names its shared memory /dev/shm/trsim.<tag>.*; whatever remains of it
 * is unlinked at the end). A failing rank makes the launcher terminate the
 * others (SIGTERM, then SIGKILL after the grace period) unless
 * --no-kill-on-fail; so does the timeout (with --signal: that signal first,
 * as a scheduler or a watchdog would send it). SIGINT/SIGTERM are forwarded;
 * SIGUSR1/SIGUSR2 are forwarded and the job goes on (a live look at it).
 * Exit status: 0 when every rank exited 0, 124 on timeout, 128+SIG when the
 * launcher was interrupted by SIG, else the status of the first rank that
 * failed (128+signal for a signal death). Ranks get SIGKILL should the
 * launcher die. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define ME "trsim-launch"
#define MAX_RANKS 4096

typedef struct {
    pid_t pid;
    int alive;
    int status;         /* wait status, once it has exited */
    uint64_t sent;      /* bit s set: the launcher sent it signal s */
} rank_t;

static rank_t *ranks;
static int nranks;
static int quiet;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: " ME " -n N [--timeout SEC] [--signal SIG] [--grace SEC] [--no-kill-on-fail] [--quiet]\n"
        "       -- PROG [ARGS...]\n"
        "  -n N               number of ranks to start (1..%d)\n"
        "  --timeout SEC      terminate the job after SEC seconds, exit 124 (default: none;\n"
        "                     env TRSIM_LAUNCH_TIMEOUT)\n"
        "  --signal SIG       the signal the timeout sends first: TERM (default), INT, ABRT, KILL,\n"
        "                     QUIT, HUP, USR1, USR2 or a number\n"
        "  --grace SEC        seconds between that signal and SIGKILL (default 5)\n"
        "  --no-kill-on-fail  keep waiting for the other ranks when one fails\n"
        "  --quiet            no report of the ranks that failed\n"
        "The ranks run PROG with the simulator when it is preloaded: LD_PRELOAD=libtrsim.so for\n"
        "CUDA C programs; for PyTorch (which loads the driver and NVML by name) also\n"
        "driver/libcuda.so.1 and driver/libnvidia-ml.so.1 from libtrsim.so's folder, after it.\n",
        MAX_RANKS);
}

static void __attribute__((noreturn, format(printf, 1, 2))) bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(ME ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage(stderr);
    exit(2);
}

/* Seconds as a non-negative decimal number; -1 when malformed. */
static double parse_secs(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < 0) return -1;
    return v;
}

/* A signal by name (with or without SIG) or number; -1 when unknown. */
static int parse_signal(const char *s)
{
    static const struct { const char *name; int sig; } names[] = {
        {"TERM", SIGTERM}, {"INT", SIGINT}, {"ABRT", SIGABRT}, {"KILL", SIGKILL}, {"QUIT", SIGQUIT},
        {"HUP", SIGHUP}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    };
    if (!strncmp(s, "SIG", 3)) s += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) return names[i].sig;
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= 1 && v < 64 ? (int)v : -1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *signame(int sig, char *buf, size_t len)
{
    static const struct { int sig; const char *name; } names[] = {
        {SIGHUP, "SIGHUP"}, {SIGINT, "SIGINT"}, {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
        {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) return names[i].name;
    snprintf(buf, len, "signal %d", sig);
    return buf;
}

static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* "exited with status 3", "killed by signal SIGTERM (sent by trsim-launch)" */
static const char *describe(const rank_t *r, char *buf, size_t len)
{
    char tmp[32];
    if (WIFEXITED(r->status)) {
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(r->status));
    } else {
        int s = WTERMSIG(r->status);
        snprintf(buf, len, "killed by signal %s%s (%ssent by " ME ")",
                 signame(s, tmp, sizeof tmp), WCOREDUMP(r->status) ? ", core dumped" : "",
                 s < 64 && (r->sent >> s & 1) ? "" : "not ");
    }
    return buf;
}

/* Sends sig to the process group of every rank still alive; writes the
 * message "PREFIX: sending SIG to ranks 0 1 ..." unless it is NULL (or the
 * launcher is quiet and loud is 0). */
static void signal_ranks(int sig, const char *prefix, int loud)
{
    char list[256] = "", tmp[32];
    size_t used = 0;
    int count = 0;
    for (int i = 0; i < nranks; i++) {
        rank_t *r = &ranks[i];
        if (!r->alive) continue;
        if (kill(-r->pid, sig) != 0) kill(r->pid, sig);
        r->sent |= (uint64_t)1 << sig;
        count++;
        if (used < sizeof list - 16)
            used += (size_t)snprintf(list + used, sizeof list - used, " %d", i);
        else if (!strstr(list, "..."))
            strcat(list, " ...");
    }
    if (prefix && count && (loud || !quiet))
        fprintf(stderr, ME ": %s: sending %s to rank%s%s\n", prefix, signame(sig, tmp, sizeof tmp),
                count > 1 ? "s" : "", list);
}

/* A port nobody listens on right now (the kernel's choice). */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof a;
    int port = 29500, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    else
        fprintf(stderr, ME ": warning: no free port found (%s), using %d\n", strerror(errno), port);
    if (fd >= 0) close(fd);
    return port;
}

static unsigned random32(void)
{
    unsigned v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (unsigned)ts.tv_nsec ^ (unsigned)getpid() << 16;
    }
    if (fd >= 0) close(fd);
    return v;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        fprintf(stderr, ME ": cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

/* Unlinks /dev/shm/trsim.<tag>.*; returns how many. */
static int remove_shm(const char *tag)
{
    char prefix[300];
    int n = 0;
    snprintf(prefix, sizeof prefix, "trsim.%s.", tag);
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && unlinkat(dirfd(d), e->d_name, 0) == 0)
            n++;
    closedir(d);
    return n;
}

static void __attribute__((noreturn)) run_rank(int r, char **argv, const sigset_t *mask,
                                               pid_t launcher, int port, const char *rdzv,
                                               const char *tag)
{
    char buf[32];
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(128 + SIGKILL);   /* the launcher is gone already */
#define SETENV_INT(name, v) (snprintf(buf, sizeof buf, "%d", (v)), setenv(name, buf, 1))
    SETENV_INT("RANK", r);
    SETENV_INT("LOCAL_RANK", r);
    SETENV_INT("WORLD_SIZE", nranks);
    SETENV_INT("LOCAL_WORLD_SIZE", nranks);
    SETENV_INT("GROUP_RANK", 0);
    SETENV_INT("MASTER_PORT", port);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("TRSIM_RDZV", rdzv, 1);
    setenv("TRSIM_SHM_TAG", tag, 1);
    sigprocmask(SIG_SETMASK, mask, NULL);
    execvp(argv[0], argv);
    int e = errno;
    fprintf(stderr, ME ": rank %d: cannot run %s: %s\n", r, argv[0], strerror(e));
    _exit(e == ENOENT ? 127 : 126);
}

int main(int argc, char **argv)
{
    double timeout = 0, grace = 5;
    int kill_on_fail = 1, have_timeout = 0, timeout_sig = SIGTERM, i;

    /* ---- arguments ---- */
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i], *val = NULL;
        static const char *const with_value[] = {"-n", "--timeout", "--grace", "--signal"};
        int opt = -1;
        for (int k = 0; k < 4 && opt < 0; k++) {
            size_t l = strlen(with_value[k]);
            if (strncmp(a, with_value[k], l) != 0) continue;
            if (a[l] == '\0') {
                if (i + 1 >= argc) bad_usage("option %s needs a value", a);
                opt = k, val = argv[++i];
            } else if (a[l] == '=' || (k == 0 && a[l] >= '0' && a[l] <= '9')) {
                opt = k, val = a + l + (a[l] == '=');
            }
        }
        if (opt == 0) {
            char *end;
            long v = strtol(val, &end, 10);
            if (!*val || *end || v < 1 || v > MAX_RANKS)
                bad_usage("-n wants a number of ranks from 1 to %d, not '%s'", MAX_RANKS, val);
            nranks = (int)v;
        } else if (opt == 1) {
            if ((timeout = parse_secs(val)) < 0) bad_usage("--timeout wants seconds, not '%s'", val);
            have_timeout = 1;
        } else if (opt == 2) {
            if ((grace = parse_secs(val)) < 0) bad_usage("--grace wants seconds, not '%s'", val);
        } else if (opt == 3) {
            if ((timeout_sig = parse_signal(val)) < 0) bad_usage("--signal wants a signal name or number, not '%s'", val);
        } else if (strcmp(a, "--no-kill-on-fail") == 0) {
            kill_on_fail = 0;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-') {
            bad_usage("unknown option '%s'", a);
        } else {
            bad_usage("'--' is required before PROG ('%s')", a);
        }
    }
    if (i >= argc) bad_usage("'--' and PROG are required");
    if (i + 1 >= argc) bad_usage("PROG is missing after '--'");
    if (nranks == 0) bad_usage("-n N is required");
    char **prog = argv + i + 1;
    if (!have_timeout) {
        const char *env = getenv("TRSIM_LAUNCH_TIMEOUT");
        if (env && *env && (timeout = parse_secs(env)) < 0)
            bad_usage("TRSIM_LAUNCH_TIMEOUT wants seconds, not '%s'", env);
    }

    /* ---- the job's environment ---- */
    pid_t self = getpid();
    char tag[256], rdzv[4096];
    const char *outer = getenv("TRSIM_SHM_TAG");
    if (outer && *outer)
        snprintf(tag, sizeof tag, "%s.%ld-%08x", outer, (long)self, random32());
    else
        snprintf(tag, sizeof tag, "%ld-%08x", (long)self, random32());
    const char *tmp = getenv("TMPDIR");
    snprintf(rdzv, sizeof rdzv, "%s/trsim-rdzv.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(rdzv)) {
        fprintf(stderr, ME ": cannot create a folder %s: %s\n", rdzv, strerror(errno));
        return 1;
    }
    int port = free_port();
    ranks = calloc((size_t)nranks, sizeof *ranks);
    if (!ranks) { perror(ME); return 1; }

    /* SIGCHLD, SIGINT and SIGTERM stay blocked and are taken with sigtimedwait,
     * so none is lost between two waits. */
    sigset_t set, oldmask;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    signal(SIGCHLD, SIG_DFL);   /* an inherited SIG_IGN would make waitpid fail */
    sigprocmask(SIG_BLOCK, &set, &oldmask);
    prctl(PR_SET_CHILD_SUBREAPER, 1);   /* orphaned grandchildren: ours to reap */

    /* ---- start the ranks ---- */
    int alive = 0, first_fail = -1, timed_out = 0, got_sig = 0, terminating = 0;
    double start = now(), kill_at = INFINITY;
    for (int r = 0; r < nranks; r++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) run_rank(r, prog, &oldmask, self, port, rdzv, tag);
        if (pid < 0) {
            fprintf(stderr, ME ": cannot start rank %d: %s\n", r, strerror(errno));
            ranks[r].status = 1 << 8;   /* counts as "exited with status 1" */
            if (first_fail < 0) first_fail = r;
            signal_ranks(SIGKILL, NULL, 0);
            kill_at = now();    /* nothing to wait for: kill and reap the others */
            terminating = 1;
            break;
        }
        setpgid(pid, pid);      /* also here: no race with a signal sent right away */
        ranks[r].pid = pid;
        ranks[r].alive = 1;
        alive++;
    }
    double deadline = timeout > 0 ? start + timeout : INFINITY;

    /* ---- wait for them ---- */
    while (alive > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) {  /* ECHILD: should not happen, but never spin */
            fprintf(stderr, ME ": waitpid: %s\n", strerror(errno));
            for (int r = 0; r < nranks; r++)
                if (ranks[r].alive) ranks[r].alive = 0, ranks[r].status = 1 << 8;
            if (first_fail < 0) first_fail = 0;
            break;
        }
        if (pid > 0) {
            for (int r = 0; r < nranks; r++) {
                if (ranks[r].pid != pid || !ranks[r].alive) continue;
                ranks[r].alive = 0;
                ranks[r].status = st;
                alive--;
                if (st == 0 || first_fail >= 0) break;
                first_fail = r;
                if (kill_on_fail && !terminating && alive > 0) {
                    char why[160], d[96];
                    snprintf(why, sizeof why, "rank %d %s", r, describe(&ranks[r], d, sizeof d));
                    signal_ranks(SIGTERM, why, 0);
                    terminating = 1;
                    kill_at = now() + grace;
                }
                break;
            }
            continue;   /* reap everything that is ready before sleeping */
        }

        double t = now();
        if (!terminating && t >= deadline) {
            char why[64];
            snprintf(why, sizeof why, "timeout after %g s", timeout);
            signal_ranks(timeout_sig, why, 1);
            timed_out = terminating = 1;
            kill_at = t + grace;
        }
        if (t >= kill_at) {
            char why[64];
            char tmpn[32];
            snprintf(why, sizeof why, "still running %g s after %s", grace,
                     timed_out ? signame(timeout_sig, tmpn, sizeof tmpn) : "SIGTERM");
            signal_ranks(SIGKILL, why, 0);
            kill_at = INFINITY;
        }
        double until = terminating ? kill_at : deadline;
        siginfo_t si;
        int sig;
        if (isinf(until)) {
            sig = sigwaitinfo(&set, &si);
        } else {
            double w = until - t;
            if (w < 0) w = 0;
            struct timespec ts = {(time_t)w, (long)((w - (time_t)w) * 1e9)};
            sig = sigtimedwait(&set, &si, &ts);
        }
        if (sig == SIGUSR1 || sig == SIGUSR2) {
            char why[64], tmpn[32];
            snprintf(why, sizeof why, "received %s", signame(sig, tmpn, sizeof tmpn));
            signal_ranks(sig, why, 0);
        } else if (sig == SIGINT || sig == SIGTERM) {
            char why[64], tmpn[32];
            if (!got_sig) {
                snprintf(why, sizeof why, "received %s", signame(sig, tmpn, sizeof tmpn));
                signal_ranks(sig, why, 0);
                got_sig = sig;
                if (!terminating) terminating = 1, kill_at = now() + grace;
            } else {    /* asked twice: no more grace */
                snprintf(why, sizeof why, "received %s again", signame(sig, tmpn, sizeof tmpn));
                signal_ranks(SIGKILL, why, 0);
                kill_at = INFINITY;
            }
        }
    }

    /* ---- report and clean up ---- */
    for (int r = 0; r < nranks; r++) {
        char d[96];
        if (ranks[r].pid && ranks[r].status != 0 && !quiet)
            fprintf(stderr, ME ": rank %d (pid %ld) %s\n", r, (long)ranks[r].pid,
                    describe(&ranks[r], d, sizeof d));
        /* Whatever a rank left running in its process group goes too. */
        if (ranks[r].pid) kill(-ranks[r].pid, SIGKILL);
    }
    /* Reap it (orphans of the job are the launcher's children: it is their
     * subreaper), waiting a second at most for stragglers outside the groups. */
    for (double until = now() + 1;;) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid > 0 || (pid < 0 && errno == EINTR)) continue;
        if (pid < 0 || now() >= until) break;
        struct timespec ts = {0, 20000000};
        sigtimedwait(&set, NULL, &ts);
    }
    nftw(rdzv, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    int nshm = remove_shm(tag);
    if (nshm && !quiet)
        fprintf(stderr, ME ": removed %d leftover shared-memory object%s /dev/shm/trsim.%s.*\n",
                nshm, nshm > 1 ? "s" : "", tag);
    int code = timed_out ? 124 : got_sig ? 128 + got_sig
             : first_fail >= 0 ? exit_code(ranks[first_fail].status) : 0;
    free(ranks);
    return code;
}
