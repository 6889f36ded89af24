/* tranalyze --watch DIR: the loop (ta_watch.h, docs/live.md).
 *
 * About once a second every rank's ring header is read (watch_ring.c). A
 * stall is triggered by
 *   - a rank whose own hang watchdog found a call stuck (the ring's
 *     stall_ns: TRSHIM_HANG_SEC, seen by the rank's own clock), or an
 *     operation pending on a rank for longer than the threshold by the
 *     rank's clock (extrapolated from its heartbeat: no two hosts' clocks
 *     are compared);
 *   - a rank whose process is gone while another still has operations
 *     pending, the same oldest one through the settle time (at a clean
 *     end, the last operations complete within it).
 * Nothing pending is never a stall: a long evaluation or checkpoint write
 * between collectives waits on nothing. After the settle time, tranalyze
 * itself runs on the folder (a child process: the analysis of the live
 * files is the post-mortem's, with the reports written as DIR/tranalyze.
 * JOB.hangN.{txt,json,md}) and its ROOT CAUSE block goes to stderr. A line
 * says when the ranks that waited go on again; the next stall is reported
 * anew. At the job's end (every rank gone, standard input's end under
 * trshim run, SIGINT, SIGTERM) the final analysis writes DIR/tranalyze.JOB.
 * {txt,json,md} and one verdict line. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/ta_model.h"
#include "ta_watch.h"

#define TW_ANALYSIS_SEC 600     /* an analysis that takes longer is stopped */
#define TW_BLOCK_LINES 40       /* root-cause lines printed at most */
#define TW_TEXT_MAX (8u << 20)  /* report text read back at most */

static volatile sig_atomic_t g_stop;
static void on_stop(int sig) { g_stop = sig; }

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct {
    const ta_watch_opts *o;
    tw_set s;
    char self[4096];
    double thr;                 /* the threshold (s) */
    int quiet;                  /* rank 0 runs on another host that sees the folder: its watcher answers */
    int stalls;                 /* stalls reported */
    int aborted;
} watcher;

/* ---- what the headers say ------------------------------------------------------- */

typedef struct {
    int kind;                   /* 0 none, 1 a rank waits beyond the threshold, 2 a rank gone while others wait */
    int who;                    /* index into s.r: the rank stuck longest, or the rank gone */
    double waited;              /* s */
    int by_watchdog;            /* the rank's own watchdog said it */
} trigger;

static int alive(const tw_rank *r) { return r->gone == TW_ALIVE; }

/* how long r's oldest pending operation has waited, by r's clock (s) */
static double pending_age(const tw_rank *r, double now)
{
    if (!r->h.pending || !r->h.pending_since_ns) return 0;
    uint64_t t = tw_rank_now(r, now);
    return t > r->h.pending_since_ns ? (double)(t - r->h.pending_since_ns) / 1e9 : 0;
}

static trigger evaluate(const watcher *w, double now)
{
    trigger t = {0, -1, 0, 0};
    const tw_set *s = &w->s;
    int gone = -1, waiting = 0;
    for (int i = 0; i < s->n; i++) {
        const tw_rank *r = &s->r[i];
        if (!alive(r)) {
            if (gone < 0 || r->gone_at < s->r[gone].gone_at) gone = i;
            continue;
        }
        if (r->h.pending) waiting = 1;
        double age = pending_age(r, now);
        int dog = r->h.stall_ns != 0;
        if (dog && r->h.stall_since_ns) {
            uint64_t rn = tw_rank_now(r, now);
            double a = rn > r->h.stall_since_ns ? (double)(rn - r->h.stall_since_ns) / 1e9 : 0;
            if (a > age) age = a;
        }
        if ((dog || age >= w->thr) && age >= t.waited) t = (trigger){1, i, age, dog};
    }
    if (gone >= 0 && waiting) t = (trigger){2, gone, t.waited, 0};   /* the rank gone says more than its victims */
    return t;
}

/* the ranks that waited at the trigger have gone on (their oldest operation then completed) */
static int moved_on(const watcher *w, double now)
{
    int any = 0;
    for (int i = 0; i < w->s.n; i++) {
        const tw_rank *r = &w->s.r[i];
        if (!alive(r)) continue;
        any = 1;
        if (r->h.stall_ns || pending_age(r, now) >= w->thr) return 0;
        if (r->t_pending && r->h.pending && r->h.pending_since_ns == r->t_since) return 0;
    }
    return any;
}

static int all_gone(const watcher *w)
{
    for (int i = 0; i < w->s.n; i++)
        if (alive(&w->s.r[i])) return 0;
    return w->s.n > 0;
}

static void remember_waits(watcher *w)
{
    for (int i = 0; i < w->s.n; i++) {
        tw_rank *r = &w->s.r[i];
        r->t_pending = r->h.pending;
        r->t_since = r->h.pending_since_ns;
    }
}

/* the same oldest operation still pending on a rank that waited at the trigger */
static int still_waiting(const watcher *w)
{
    for (int i = 0; i < w->s.n; i++) {
        const tw_rank *r = &w->s.r[i];
        if (alive(r) && r->t_pending && r->h.pending && r->h.pending_since_ns == r->t_since) return 1;
    }
    return 0;
}

static void rank_name(char *out, size_t cap, const tw_rank *r)
{
    int k = tw_rank_of(r);
    if (k >= 0) snprintf(out, cap, "rank %d", k);
    else snprintf(out, cap, "pid %d", (int)r->h.pid);
}

static const char *gone_text(const tw_rank *r, char *buf, size_t cap)
{
    switch (r->gone) {
    case TW_EXITED: return "exited";
    case TW_SIGNALED: snprintf(buf, cap, "was ended by signal %d", r->h.signo); return buf;
    case TW_KILLED: return "is gone (killed: SIGKILL, the OOM killer)";
    case TW_SILENT: return "stopped responding (no heartbeat)";
    default: return "runs";
    }
}

/* ---- the analysis (a child: tranalyze itself) ------------------------------------ */

/* Runs tranalyze on the folder, --reports prefix (NULL: none); its text on
 * stdout into *text. Its exit status, or -1. */
static int analyse(watcher *w, const char *prefix, char **text)
{
    *text = NULL;
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return -1;
    int nargs = w->o->npass + 8;
    char **argv = xmalloc(sizeof *argv * (size_t)nargs);
    int k = 0;
    argv[k++] = w->self;
    for (int i = 0; i < w->o->npass; i++) argv[k++] = w->o->pass[i];
    argv[k++] = "--job";
    argv[k++] = w->s.job;
    if (prefix) argv[k++] = "--reports", argv[k++] = (char *)prefix;
    argv[k++] = "--";
    argv[k++] = (char *)w->o->dir;
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        int dn = open("/dev/null", O_RDONLY);
        if (dn >= 0) dup2(dn, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(w->self, argv);
        _exit(127);
    }
    free(argv);
    close(out[1]);
    if (pid < 0) {
        close(out[0]);
        return -1;
    }
    size_t n = 0, cap = 65536;
    char *buf = xmalloc(cap);
    double end = mono() + TW_ANALYSIS_SEC;
    for (;;) {
        struct pollfd p = {out[0], POLLIN, 0};
        int left = (int)((end - mono()) * 1000);
        if (left <= 0) {
            kill(pid, SIGKILL);
            break;
        }
        int pr = poll(&p, 1, left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        if (n + 4096 > cap && cap < TW_TEXT_MAX) buf = xrealloc(buf, cap *= 2);
        ssize_t got = n + 4096 <= cap ? read(out[0], buf + n, cap - n - 1) : read(out[0], (char[4096]){0}, 4096);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (n + 4096 <= cap) n += (size_t)got;
    }
    close(out[0]);
    buf[n] = 0;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *text = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int starts(const char *line, const char *word) { return !strncmp(line, word, strlen(word)); }

/* The report's root cause: its lines from the first "ROOT CAUSE" to the
 * next section, else its verdict line and the other findings' first line */
static void print_block(const char *text, const char *indent)
{
    int printing = 0, lines = 0, verdict_seen = 0;
    for (const char *p = text; *p && lines < TW_BLOCK_LINES;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        p += len + (e != NULL);
        if (starts(line, "ROOT CAUSE") || starts(line, "ENDED BY ABORT")) printing = 1;
        else if (starts(line, "No problem found") || starts(line, "Nothing hung or failed")) printing = 1, verdict_seen = 1;
        else if (starts(line, "RANKS") || starts(line, "WARNINGS") || starts(line, "NOTES")) break;
        else if (starts(line, "OTHER FINDINGS")) {
            if (!verdict_seen) break;
            printing = 1;
        }
        if (printing && line[0]) fprintf(stderr, "trshim: %s%s\n", indent, line), lines++;
    }
}

/* the report's first root-cause line, else its verdict ("No problem found..."); static */
static const char *verdict_of(const char *text)
{
    static char v[1024];
    snprintf(v, sizeof v, "the analysis printed no verdict");
    const char *best = NULL;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!best && (starts(p, "No problem found") || starts(p, "Nothing hung or failed"))) best = p;
        if (starts(p, "ROOT CAUSE")) { best = p; break; }
        p += len + (e != NULL);
    }
    if (best) {
        const char *e = strchr(best, '\n');
        size_t len = e ? (size_t)(e - best) : strlen(best);
        while (len && best[len - 1] == '.') len--;
        snprintf(v, sizeof v, "%.*s", (int)(len < sizeof v - 1 ? len : sizeof v - 1), best);
        /* only other findings (a straggler): the first one's heading after the verdict */
        const char *other = starts(best, "ROOT CAUSE") ? NULL : strstr(text, "\nOTHER FINDINGS\n");
        if (other) {
            other += strlen("\nOTHER FINDINGS\n");
            while (*other == ' ') other++;
            const char *oe = strchr(other, '\n');
            size_t ol = oe ? (size_t)(oe - other) : strlen(other), used = strlen(v);
            if (ol && used + 8 < sizeof v) snprintf(v + used, sizeof v - used, "; %.*s", (int)ol, other);
        }
    }
    return v;
}

/* DIR/tranalyze.JOB[.SUFFIX]: the job's characters that a file name cannot hold as they are become _ */
static char *report_prefix(const watcher *w, const char *suffix)
{
    size_t n = strlen(w->o->dir) + strlen(w->s.job) + 64;
    char *p = xmalloc(n);
    int k = snprintf(p, n, "%s/tranalyze.", w->o->dir);
    for (const char *c = w->s.job; *c && (size_t)k < n - 40; c++)
        p[k++] = (*c == '/' || (unsigned char)*c < 0x20 || *c == 0x7f) ? '_' : *c;
    p[k] = 0;
    if (suffix) snprintf(p + k, n - (size_t)k, ".%s", suffix);
    return p;
}

static int partial(const watcher *w, int *world)
{
    *world = 0;
    for (int i = 0; i < w->s.n; i++)
        if (w->s.r[i].h.world_size > *world) *world = w->s.r[i].h.world_size;
    return *world > w->s.n;
}

static void end_job(watcher *w, pid_t pid)
{
    if (w->aborted) return;
    w->aborted = 1;
    if (pid > 0) {
        fprintf(stderr, "trshim: --on-hang abort: ending the job (SIGTERM to the launcher, pid %d)\n", (int)pid);
        kill(pid, SIGTERM);
        return;
    }
    int n = 0;
    for (int i = 0; i < w->s.n; i++) {
        const tw_rank *r = &w->s.r[i];
        if (alive(r) && r->same_host && r->h.pid > 0 && kill(r->h.pid, SIGTERM) == 0) n++;
    }
    fprintf(stderr, "trshim: --on-hang abort: ending the job (SIGTERM to the %d rank%s on this host)\n", n,
            n == 1 ? "" : "s");
}

static void report_stall(watcher *w, const trigger *t, double now)
{
    const tw_rank *r = &w->s.r[t->who];
    char who[64], buf[64];
    rank_name(who, sizeof who, r);
    if (w->quiet) {
        const char *zero = "rank 0's host";
        for (int i = 0; i < w->s.n; i++)
            if (tw_rank_of(&w->s.r[i]) == 0 && memchr(w->s.r[i].h.host, 0, sizeof w->s.r[i].h.host))
                zero = w->s.r[i].h.host;
        ta_esc_printf(stderr, "trshim: %s: the job stalls; the watcher on %s (rank 0's) gives the job-wide answer\n",
                who, zero);
        return;
    }
    w->stalls++;
    int world;
    int part = partial(w, &world);
    if (t->kind == 1)
        fprintf(stderr, "trshim: HANG: %s has waited %.1f s for an operation (%s%g%s); the traces of %d rank%s "
                "analysed:\n", who, t->waited, t->by_watchdog ? "its watchdog: TRSHIM_HANG_SEC=" : "threshold ",
                t->by_watchdog && r->h.hang_sec ? (double)r->h.hang_sec : w->thr, t->by_watchdog ? "" : " s", w->s.n,
                w->s.n == 1 ? "" : "s");
    else
        fprintf(stderr, "trshim: HANG: %s %s while other ranks wait for their operations; the traces of %d rank%s "
                "analysed:\n", who, gone_text(r, buf, sizeof buf), w->s.n, w->s.n == 1 ? "" : "s");
    char sfx[32];
    snprintf(sfx, sizeof sfx, "hang%d", w->stalls);
    char *prefix = report_prefix(w, sfx), *text = NULL;
    int rc = analyse(w, prefix, &text);
    if (rc == 0 || rc == 1) print_block(text, "");
    else fprintf(stderr, "trshim: the analysis of the live traces failed (status %d)\n", rc);
    if (part)
        fprintf(stderr, "trshim: partial answer: %d of %d ranks' rings are in %s (the others' are on their "
                "nodes: a trace folder all nodes share gives the whole job)\n", w->s.n, world, w->o->dir);
    if (rc == 0 || rc == 1)
        ta_esc_printf(stderr, "trshim: full report: %s.txt (.json, .md); again: tranalyze --job %s %s\n", prefix, w->s.job,
                w->o->dir);
    fflush(stderr);
    free(text);
    free(prefix);
    (void)now;
    if (w->o->abort) end_job(w, w->o->signal_pid);
}

/* open_stall: a stall was reported and no line said the job went on since */
static int final_verdict(watcher *w, int open_stall)
{
    /* a job shorter than the first look leaves no ring (a clean exit removes it): its JSON traces answer */
    if (!w->s.job) {
        fprintf(stderr, "trshim: verdict: no ring of any job in %s: nothing was recorded (was libtrshim.so "
                "preloaded into the ranks? trshim doctor checks)\n", w->o->dir);
        return 2;
    }
    char *prefix = w->quiet ? NULL : report_prefix(w, NULL), *text = NULL;
    int rc = analyse(w, prefix, &text);
    if (rc == 2 && !w->s.n) {
        ta_esc_printf(stderr, "trshim: verdict: no trace of job %s in %s: nothing was recorded (was libtrshim.so "
                "preloaded into the ranks? trshim doctor checks)\n", w->s.job, w->o->dir);
        free(text);
        free(prefix);
        return 2;
    }
    int world;
    int part = partial(w, &world);
    if ((rc == 0 || rc == 1) && open_stall && !w->quiet && !strstr(text, "\nROOT CAUSE"))
        fprintf(stderr, "trshim: the job went on and ended without a hang: the report above (hang%d) was a slow "
                "rank, not a hang\n", w->stalls);
    if (rc == 0 || rc == 1) {
        if (prefix)
            fprintf(stderr, "trshim: verdict: %s%s; reports: %s.txt (.json, .md)\n", verdict_of(text),
                    part ? " (partial: the ranks of this node)" : "", prefix);
        else
            fprintf(stderr, "trshim: verdict: %s (the reports: from the watcher on rank 0's host)\n", verdict_of(text));
    } else {
        ta_esc_printf(stderr, "trshim: verdict: the traces in %s could not be analysed (tranalyze --job %s %s says why)\n",
                w->o->dir, w->s.job, w->o->dir);
    }
    fflush(stderr);
    free(text);
    free(prefix);
    return rc < 0 ? 2 : rc;
}

/* A node's watcher (some rank runs on this host) whose folder also holds
 * rank 0's ring, from another host: that host's watcher answers for the
 * job. A watcher on a machine that runs no rank (a terminal elsewhere)
 * always answers. */
static void decide_quiet(watcher *w)
{
    int zero_here = -1, any_here = 0;
    for (int i = 0; i < w->s.n; i++) {
        any_here |= w->s.r[i].same_host;
        if (tw_rank_of(&w->s.r[i]) == 0) zero_here = w->s.r[i].same_host;
    }
    w->quiet = any_here && zero_here == 0;
}

int ta_watch(const ta_watch_opts *o)
{
    watcher w;
    memset(&w, 0, sizeof w);
    w.o = o;
    ssize_t n = readlink("/proc/self/exe", w.self, sizeof w.self - 1);
    if (n <= 0) {
        fputs("tranalyze: --watch: cannot find its own executable (/proc/self/exe)\n", stderr);
        return 2;
    }
    w.self[n] = 0;
    if (tw_open(&w.s, o->dir, o->job) < 0) return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;             /* no SA_RESTART: the wait below returns */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int state = 0;                       /* 0 watching, 1 settling a trigger, 2 a stall reported */
    trigger t = {0, -1, 0, 0};
    double settle_end = 0, stall_at = 0, all_gone_at = -1;
    int stdin_open = o->end_on_eof;
    while (!g_stop) {
        double now = mono();
        tw_scan(&w.s, now);
        tw_read(&w.s, now);
        decide_quiet(&w);
        if (w.thr <= 0) {
            w.thr = o->hang_sec;
            for (int i = 0; w.thr < 0 && i < w.s.n; i++)
                if (w.s.r[i].h.hang_sec) w.thr = w.s.r[i].h.hang_sec;
            if (w.thr < 0 && w.s.n) w.thr = 300;
        }
        trigger now_t = w.thr > 0 ? evaluate(&w, now) : (trigger){0, -1, 0, 0};
        if (state == 0 && now_t.kind) {
            t = now_t;
            remember_waits(&w);
            settle_end = now + o->settle_sec;
            state = 1;
        } else if (state == 1 && now >= settle_end) {
            int holds = now_t.kind == 1 || (now_t.kind == 2 && still_waiting(&w));
            if (holds) {
                t = now_t;
                report_stall(&w, &t, now);
                stall_at = now;
                state = 2;
            } else {
                state = 0;
            }
        } else if (state == 2 && moved_on(&w, now)) {
            if (!w.quiet)
                fprintf(stderr, "trshim: the job went on after %.1f s: the ranks that waited completed their "
                        "operations; the report above (hang%d) was a slow rank, not a hang\n",
                        now - stall_at + t.waited, w.stalls);
            state = 0;
        }
        if (all_gone(&w)) {
            if (all_gone_at < 0) all_gone_at = now;
            if (!o->end_on_eof && now - all_gone_at >= 1) break;
        } else {
            all_gone_at = -1;
        }
        /* the wait: standard input's end (trshim run: its launcher ended) or the poll period */
        struct pollfd p = {0, POLLIN, 0};
        int ms = (int)(o->poll_sec * 1000);
        if (stdin_open) {
            if (poll(&p, 1, ms) > 0) {
                char b[256];
                ssize_t got = read(0, b, sizeof b);
                if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) break;
            }
        } else {
            struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    tw_scan(&w.s, mono() + 1e6);         /* the last rings */
    tw_read(&w.s, mono());
    int rc = final_verdict(&w, state == 2);
    tw_close(&w.s);
    return rc;
}
