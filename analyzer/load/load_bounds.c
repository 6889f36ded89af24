/* The places the job's communicators claim, against what the input can
 * describe (ta_bounds.h). Every per-place table of the analysis (align.c:
 * members by place; the stuck collectives' members) is sized by the
 * largest claim of each communicator: one trace of a few KiB that says
 * 256 communicators of 1,048,575 ranks would otherwise cost 2 GiB. A
 * legitimate trace's claims are shared by every member that has a trace
 * (a 100,000-rank job: 100,000 traces name its world communicator), and a
 * trace analysed alone still gets the floor (4 communicators of the
 * largest size). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ta_bounds.h"

typedef struct {
    uint64_t id;
    int64_t cost;       /* the largest claim */
    int support;        /* traces that have it */
    int ok;
} ccost;

static int cmp_id(const void *x, const void *y)
{
    const ccost *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

/* most shared first, then the cheapest, then by id (the same order every run) */
static int cmp_accept(const void *x, const void *y)
{
    const ccost *a = *(ccost *const *)x, *b = *(ccost *const *)y;
    if (a->support != b->support) return a->support > b->support ? -1 : 1;
    if (a->cost != b->cost) return a->cost < b->cost ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int64_t claim_of(const ta_comm *c)
{
    int64_t p = c->rank + 1;
    if (c->size > p) p = c->size;
    if (c->grow_ranks > p) p = c->grow_ranks;
    return p;
}

/* the file's real size: its allocated bytes when it is sparse (a hole costs nothing to make) */
static int64_t real_bytes(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    int64_t n = (int64_t)st.st_size, alloc = (int64_t)st.st_blocks * 512;
    return st.st_blocks > 0 && alloc < n ? alloc : n;
}

static ccost *find(ccost *v, int n, uint64_t id)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (v[mid].id == id) return &v[mid];
        if (v[mid].id < id) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

void ta_places_bound(ta_an *a)
{
    int64_t ncomm = 0, bytes = 0;
    for (int i = 0; i < a->ntr; i++) ncomm += a->tr[i]->ncomms;
    if (!ncomm) return;
    /* each file once (a ring of several devices gives several traces) */
    const char **seen = xcalloc((size_t)a->ntr + 1, sizeof *seen);
    int nseen = 0;
    for (int i = 0; i < a->ntr; i++) {
        const char *f = a->tr[i]->file;
        int dup = 0;
        for (int k = 0; k < nseen && !dup; k++) dup = !strcmp(seen[k], f);
        if (dup) continue;
        seen[nseen++] = f;
        bytes += real_bytes(f);
    }
    free(seen);
    ccost *v = xcalloc((size_t)ncomm + 1, sizeof *v);
    int64_t n = 0;
    for (int i = 0; i < a->ntr; i++)
        for (int k = 0; k < a->tr[i]->ncomms; k++) v[n++] = (ccost){a->tr[i]->comms[k].id, 0, 0, 0};
    qsort(v, (size_t)n, sizeof *v, cmp_id);
    int64_t nd = 0;
    for (int64_t i = 0; i < n; i++)
        if (!nd || v[nd - 1].id != v[i].id) v[nd++] = v[i];
    for (int i = 0; i < a->ntr; i++)
        for (int k = 0; k < a->tr[i]->ncomms; k++) {
            const ta_comm *c = &a->tr[i]->comms[k];
            ccost *e = find(v, (int)nd, c->id);
            int64_t p = claim_of(c);
            if (p > e->cost) e->cost = p;
            int again = 0;      /* a communicator listed twice in one trace supports it once */
            for (int j = 0; j < k && !again; j++) again = a->tr[i]->comms[j].id == c->id;
            e->support += !again;
        }
    ccost **order = xmalloc(sizeof *order * (size_t)(nd + 1));
    for (int64_t i = 0; i < nd; i++) order[i] = &v[i];
    qsort(order, (size_t)nd, sizeof *order, cmp_accept);
    int64_t budget = TA_PLACES_FLOOR + TA_PLACES_PER_BYTE * bytes, used = 0;
    for (int64_t i = 0; i < nd; i++)
        if (used + order[i]->cost <= budget) {
            used += order[i]->cost;
            order[i]->ok = 1;
        }
    free(order);
    int keep = 0;
    for (int i = 0; i < a->ntr; i++) {
        ta_trace *t = a->tr[i];
        int bad = -1;
        for (int k = 0; k < t->ncomms && bad < 0; k++)
            if (!find(v, (int)nd, t->comms[k].id)->ok) bad = k;
        if (bad < 0) {
            t->idx = keep;
            a->tr[keep++] = t;
            continue;
        }
        const ta_comm *c = &t->comms[bad];
        ta_note_add(a, t->file, 1, "communicator %d of this trace (0x%016llx) claims %lld ranks, more than the input "
                    "can describe: the job's communicators may have %lld places in all (%lld + %d per byte of the %lld "
                    "bytes of input), %lld taken by those accepted first; the trace is not used",
                    bad, (unsigned long long)c->id, (long long)claim_of(c), (long long)budget, TA_PLACES_FLOOR,
                    TA_PLACES_PER_BYTE, (long long)bytes, (long long)used);
    }
    a->ntr = keep;
    free(v);
}
