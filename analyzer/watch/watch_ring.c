/* The rings a watcher reads (ta_watch.h): the ring files of one job in the
 * trace folder, each one's header page mapped read-only, and what the
 * headers say about each rank's process: alive, ended, killed, silent.
 * Nothing here writes to a ring or takes a lock a rank could wait on; a
 * file is accepted only when it is a regular file of this user (the folder
 * may be shared: another user's file must not be able to forge a hang),
 * not a link, with a ring header of this version. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/ta_model.h"
#include "ta_watch.h"
#include "trshim/trace_format.h"

#define TW_RESCAN_SEC 0.9      /* between two listings of the folder: each poll */
#define TW_SILENT_SEC 10.0     /* a heartbeat that stopped this long: the rank is not responding */
#define TW_KILLED_SEC 1.5      /* a process gone whose heartbeat stopped this long: killed */

/* A header page whose file was cut short under the mapping raises SIGBUS
 * on reading: the copy is guarded, the rank then reads as unchanged. */
static sigjmp_buf g_bus;
static volatile sig_atomic_t g_copying;
static void on_bus(int sig)
{
    if (g_copying) siglongjmp(g_bus, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int copy_header(trr_header *out, const trr_header *map)
{
    if (sigsetjmp(g_bus, 1)) {
        g_copying = 0;
        return -1;
    }
    g_copying = 1;
    memcpy(out, map, sizeof *out);
    g_copying = 0;
    return 0;
}

static int process_ended(pid_t pid);

static int cmp_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

static int seen(const tw_set *s, const char *name)
{
    return s->nseen && bsearch(&name, s->seen, (size_t)s->nseen, sizeof *s->seen, cmp_str) != NULL;
}

int tw_open(tw_set *s, const char *dir, const char *job)
{
    memset(s, 0, sizeof *s);
    s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0) {
        fprintf(stderr, "tranalyze: --watch %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (job) s->job = xstrdup(job), s->job_fixed = 1;
    if (gethostname(s->host, sizeof s->host - 1) != 0) s->host[0] = 0;
    s->uid = geteuid();
    s->scanned_at = -1e9;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_bus;
    sigaction(SIGBUS, &sa, NULL);
    return 0;
}

/* The job of a ring: its header's, else the one its file name holds
 * (TRSHIM_TRACE_PREFIX<job>.<host>.<pid>.ring) */
static char *job_of(const char *name, const trr_header *h)
{
    if (memchr(h->job_id, 0, sizeof h->job_id) && h->job_id[0]) return xstrdup(h->job_id);
    char tail[128];
    if (!memchr(h->host, 0, sizeof h->host)) return NULL;
    snprintf(tail, sizeof tail, ".%s.%d%s", h->host, (int)h->pid, TRSHIM_RING_SUFFIX);
    size_t n = strlen(name), p = strlen(TRSHIM_TRACE_PREFIX), t = strlen(tail);
    if (n <= p + t || strcmp(name + n - t, tail)) return NULL;
    char *j = xmalloc(n - p - t + 1);
    memcpy(j, name + p, n - p - t);
    j[n - p - t] = 0;
    return j;
}

/* name's header page mapped, when it is a ring this watcher may read; NULL,
 * with *later 1 when it may become one (a rank's shim is still making it:
 * short, or its magic not yet stored) */
static const trr_header *map_ring(tw_set *s, const char *name, trr_header *h, int *later)
{
    *later = 0;
    int fd = openat(s->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *later = errno != ELOOP;
        return NULL;
    }
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == s->uid) {
        if (st.st_size >= TRR_HEADER_BYTES) m = mmap(NULL, TRR_HEADER_BYTES, PROT_READ, MAP_SHARED, fd, 0);
        else *later = 1;
    }
    close(fd);
    if (m == MAP_FAILED) return NULL;
    if (copy_header(h, m) < 0 || memcmp(h->magic, TRSHIM_RING_MAGIC, 8) || h->version != TRSHIM_RING_VERSION ||
        h->header_bytes != TRR_HEADER_BYTES) {
        *later = !memcmp(h->magic, "\0\0\0\0\0\0\0\0", 8);
        munmap(m, TRR_HEADER_BYTES);
        return NULL;
    }
    return m;
}

typedef struct { char *name; const trr_header *map; trr_header h; char *job; int later; } candidate;

/* A JSON trace TRSHIM_TRACE_PREFIX<job>.r<rank>.<host>.<pid>.json: its parts
 * (pointers into name, lengths); 0 when the name is not one */
typedef struct { const char *job, *host; size_t job_len, host_len; int rank; pid_t pid; } trace_name;
static int parse_trace_name(const char *name, trace_name *t)
{
    size_t n = strlen(name), p = strlen(TRSHIM_TRACE_PREFIX);
    if (n < p + 12 || strncmp(name, TRSHIM_TRACE_PREFIX, p) || strcmp(name + n - 5, ".json")) return 0;
    const char *end = name + n - 5, *dot = end;
    while (dot > name && dot[-1] != '.') dot--;
    char *e;
    long pid = strtol(dot, &e, 10);
    if (dot == end || e != end || pid <= 0 || dot - 1 <= name + p) return 0;
    /* the rank: the last ".r<digits>." before the host (a host name holds no ".r<digits>." of its own: rare) */
    for (const char *r = dot - 2; r > name + p; r--) {
        if (r[0] != '.' || r[1] != 'r') continue;
        const char *q = r + 2;
        long rank = strtol(q, &e, 10);
        if (e == q || *e != '.' || e >= dot - 1) continue;
        *t = (trace_name){name + p, e + 1, (size_t)(r - (name + p)), (size_t)(dot - 1 - (e + 1)), (int)rank, (pid_t)pid};
        return 1;
    }
    return 0;
}

/* A rank whose process ended cleanly removes its ring (its JSON trace is
 * whole): a JSON trace of the job on this host, of a process that ended and
 * whose ring was never seen, is a rank that exited (a rank the watcher
 * would otherwise not know of: the job's answer is then not partial). */
static void add_exited(tw_set *s, const char *name, double now)
{
    trace_name t;
    if (!parse_trace_name(name, &t)) return;
    int ours = 0, here = 0;
    char head[512];
    snprintf(head, sizeof head, "%s%.*s.", TRSHIM_TRACE_PREFIX, (int)t.job_len, t.job);
    for (int i = 0; i < s->n; i++) {
        const tw_rank *r = &s->r[i];
        if (r->h.pid == t.pid && (r->same_host || !r->map)) return;   /* known */
        if (!r->map || strncmp(r->name, head, strlen(head))) continue;
        ours = 1;
        char tail[128];
        snprintf(tail, sizeof tail, ".%.*s.%d%s", (int)t.host_len, t.host, (int)r->h.pid, TRSHIM_RING_SUFFIX);
        size_t nl = strlen(r->name), tl = strlen(tail);
        if (r->same_host && nl > tl && !strcmp(r->name + nl - tl, tail)) here = 1;
    }
    if (!ours || !here || !process_ended(t.pid)) return;
    s->r = xrealloc(s->r, sizeof *s->r * (size_t)(s->n + 1));
    tw_rank *r = &s->r[s->n++];
    memset(r, 0, sizeof *r);
    r->name = xstrdup(name);
    r->h.pid = t.pid;
    r->h.env_rank = t.rank;
    r->h.world_size = -1;
    r->h.state = TRR_EXITED;
    r->same_host = 1;
    r->gone = TW_EXITED;
    r->gone_at = now;
}

void tw_scan(tw_set *s, double now)
{
    if (now - s->scanned_at < TW_RESCAN_SEC) return;
    s->scanned_at = now;
    int fd = dup(s->dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    rewinddir(d);
    candidate *c = NULL;
    int nc = 0;
    char **traces = NULL;          /* JSON traces: ranks that may have ended without their ring */
    int ntraces = 0;
    struct dirent *e;
    size_t plen = strlen(TRSHIM_TRACE_PREFIX), slen = strlen(TRSHIM_RING_SUFFIX);
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > plen + 5 && !strncmp(e->d_name, TRSHIM_TRACE_PREFIX, plen) && !strcmp(e->d_name + n - 5, ".json")) {
            if (ntraces < 65536 && !seen(s, e->d_name)) {
                traces = xrealloc(traces, sizeof *traces * (size_t)(ntraces + 1));
                traces[ntraces++] = xstrdup(e->d_name);
            }
            continue;
        }
        if (n <= plen + slen || strncmp(e->d_name, TRSHIM_TRACE_PREFIX, plen) ||
            strcmp(e->d_name + n - slen, TRSHIM_RING_SUFFIX) || seen(s, e->d_name))
            continue;
        c = xrealloc(c, sizeof *c * (size_t)(nc + 1));
        memset(&c[nc], 0, sizeof *c);
        c[nc].name = xstrdup(e->d_name);
        c[nc].map = map_ring(s, e->d_name, &c[nc].h, &c[nc].later);
        if (c[nc].map) c[nc].job = job_of(e->d_name, &c[nc].h);
        nc++;
    }
    closedir(d);
    if (!s->job) {
        /* the newest job: of the rings whose process runs, else of all */
        int best = -1, best_run = 0;
        for (int i = 0; i < nc; i++) {
            if (!c[i].job) continue;
            int run = c[i].h.state == TRR_RUNNING;
            if (best < 0 || run > best_run || (run == best_run && c[i].h.start_realtime > c[best].h.start_realtime))
                best = i, best_run = run;
        }
        if (best >= 0) s->job = xstrdup(c[best].job);
    }
    int added = 0;
    for (int i = 0; i < nc; i++) {
        int mine = c[i].job && s->job && !strcmp(c[i].job, s->job);
        if (c[i].later) {             /* looked at again next time */
            free(c[i].name);
            continue;
        }
        s->seen = xrealloc(s->seen, sizeof *s->seen * (size_t)(s->nseen + 1));
        s->seen[s->nseen++] = xstrdup(c[i].name);
        added = 1;
        if (mine) {
            s->r = xrealloc(s->r, sizeof *s->r * (size_t)(s->n + 1));
            tw_rank *r = &s->r[s->n++];
            memset(r, 0, sizeof *r);
            r->name = c[i].name;
            r->map = c[i].map;
            r->h = c[i].h;
            r->same_host = s->host[0] && !strncmp(r->h.host, s->host, sizeof r->h.host);
            r->beat = 0;
            r->beat_at = now;
            c[i].name = NULL;
        } else if (c[i].map) {
            munmap((void *)c[i].map, TRR_HEADER_BYTES);
        }
        free(c[i].name);
        free(c[i].job);
    }
    free(c);
    for (int i = 0; i < ntraces; i++) {
        int before = s->n;
        if (s->job) add_exited(s, traces[i], now);
        if (s->n > before) {         /* looked at once it is known; the others again (a rank still running) */
            s->seen = xrealloc(s->seen, sizeof *s->seen * (size_t)(s->nseen + 1));
            s->seen[s->nseen++] = traces[i];
            added = 1;
        } else {
            free(traces[i]);
        }
    }
    free(traces);
    if (added) qsort(s->seen, (size_t)s->nseen, sizeof *s->seen, cmp_str);
}

static uint64_t beat_of(const trr_header *h)
{
    return h->heartbeat_ns > h->pass_ns ? h->heartbeat_ns : h->pass_ns;
}

/* pid ended: no such process, or one that died and waits to be reaped */
static int process_ended(pid_t pid)
{
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *p = strrchr(buf, ')');   /* the name may hold anything, the state follows its last ')' */
    return p && (p[1] == ' ') && (p[2] == 'Z' || p[2] == 'X');
}

void tw_read(tw_set *s, double now)
{
    for (int i = 0; i < s->n; i++) {
        tw_rank *r = &s->r[i];
        trr_header h;
        if (!r->map || copy_header(&h, r->map) < 0) continue;   /* no map: a rank that exited (add_exited) */
        r->h = h;
        uint64_t b = beat_of(&h);
        if (b != r->beat) {
            if (r->beat) r->beat_moved = 1;
            r->beat = b;
            r->beat_at = now;
        }
        int gone = TW_ALIVE;
        if (h.state == TRR_EXITED) gone = TW_EXITED;
        else if (h.state == TRR_SIGNALED) gone = TW_SIGNALED;
        else if (r->same_host && h.pid > 0 && now - r->beat_at >= TW_KILLED_SEC && process_ended(h.pid))
            gone = TW_KILLED;   /* a process of another pid namespace would keep its heartbeat */
        else if (r->beat_moved && now - r->beat_at >= TW_SILENT_SEC)
            gone = TW_SILENT;
        if (gone != r->gone) r->gone_at = now;
        r->gone = gone;
    }
}

uint64_t tw_rank_now(const tw_rank *r, double now)
{
    double d = now - r->beat_at;
    return r->beat + (uint64_t)(d > 0 ? d * 1e9 : 0);
}

int tw_rank_of(const tw_rank *r)
{
    return r->h.env_rank >= 0 ? r->h.env_rank : -1;
}

void tw_close(tw_set *s)
{
    for (int i = 0; i < s->n; i++) {
        if (s->r[i].map) munmap((void *)s->r[i].map, TRR_HEADER_BYTES);
        free(s->r[i].name);
    }
    for (int i = 0; i < s->nseen; i++) free(s->seen[i]);
    free(s->seen);
    free(s->r);
    free(s->job);
    if (s->dirfd >= 0) close(s->dirfd);
    memset(s, 0, sizeof *s);
    s->dirfd = -1;
}
