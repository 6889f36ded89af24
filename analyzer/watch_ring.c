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

#include "ta_model.h"
#include "ta_watch.h"
#include "trshim/trace_format.h"

#define TW_RESCAN_SEC 2.0      /* between two listings of the folder */
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
    struct dirent *e;
    size_t plen = strlen(TRSHIM_TRACE_PREFIX), slen = strlen(TRSHIM_RING_SUFFIX);
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
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
    if (added) qsort(s->seen, (size_t)s->nseen, sizeof *s->seen, cmp_str);
}

static uint64_t beat_of(const trr_header *h)
{
    return h->heartbeat_ns > h->pass_ns ? h->heartbeat_ns : h->pass_ns;
}

void tw_read(tw_set *s, double now)
{
    for (int i = 0; i < s->n; i++) {
        tw_rank *r = &s->r[i];
        trr_header h;
        if (copy_header(&h, r->map) < 0) continue;
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
        else if (r->same_host && h.pid > 0 && kill(h.pid, 0) != 0 && errno == ESRCH && now - r->beat_at >= TW_KILLED_SEC)
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
        munmap((void *)s->r[i].map, TRR_HEADER_BYTES);
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
