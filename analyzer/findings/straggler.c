/* Stragglers: ranks that enter the collectives of a communicator
 * consistently later than its other members (a slow input pipeline, a busy
 * host, rank-specific work). Every other member waits for them in each
 * collective, so the whole job runs at their pace; nothing hangs.
 *
 * Per communicator, over the collectives every member issued (not inside a
 * group, not failed, with the same arguments on all members), the members'
 * entry times are put on one clock (docs/analysis-format.md, "Stragglers"):
 * the CLOCK_MONOTONIC times as they are when all members share a host, else
 * each host's times relative to when its members left the communicator's
 * init (they leave it together), else wall time. The rule:
 *   - at least MIN_COLLECTIVES such collectives;
 *   - a set S of k ranks (k <= members / 2, the smallest k that fits) is the
 *     last k to enter in at least LAST_FRACTION of them;
 *   - gap(c) = first entry of S - median entry of the other members, at each
 *     collective c; jitter(c) = last entry of the others - their median;
 *     median gap >= max(--straggler-ms, --straggler-fraction x the mean
 *     interval between the communicator's collectives, NOISE_FACTOR x
 *     median jitter).
 * Random jitter makes no rank last most of the time, a single slow
 * collective moves no median, and a rank that is always last by less than
 * the others' own spread is not singled out. The floor (50 ms) and the
 * fraction of the interval (10%) keep out what only costs little: ranks a
 * few milliseconds late on an oversubscribed host, or on a job whose steps
 * take seconds, are noise that would mislead next to a real cause. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_tx.h"

#define MIN_COLLECTIVES 8
#define LAST_FRACTION_NUM 3          /* last in at least 3/4 of the collectives examined */
#define LAST_FRACTION_DEN 4
#define NOISE_FACTOR 3
#define TIME_LIMIT_NS (INT64_C(1) << 61)   /* an entry time on the common clock beyond this is no real clock's */


/* straggler: ranks that enter the collectives of a communicator consistently late */
typedef struct {
    int clock;               /* TC_* */
    int64_t examined;        /* collectives every member issued (outside groups, not failed) */
    int64_t last;            /* of those, the ones where these ranks were the last to enter */
    int64_t median_ns;       /* median over them of: first entry of these ranks - median entry of the others */
    int64_t max_ns;          /* the latest of these ranks behind the others' median, at its worst (seq) */
    int64_t jitter_ns;       /* median of: last entry of the others - their median */
    int64_t threshold_ns;    /* what median_ns had to reach: max(--straggler-ms, --straggler-fraction x
                                interval_ns, 3 x jitter_ns) */
    int64_t interval_ns;     /* mean time between the communicator's collectives examined */
    int64_t spread_ns;       /* median of: last entry - first entry */
    int *also; int nalso;    /* smaller communicators where the same ranks are late (global indices) */
} ta_straggler;

typedef struct { int64_t e; int p; } entry;

static int cmp_entry(const void *x, const void *y)
{
    const entry *a = x, *b = y;
    if (a->e != b->e) return (a->e > b->e) - (a->e < b->e);
    return (a->p > b->p) - (a->p < b->p);
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* "30 ms", "5.5 ms", "0.42 ms", "1.2 s" */
static char *dur_text(int64_t ns)
{
    double ms = (double)ns / 1e6;
    if (ms >= 10000) return xasprintf("%.0f s", ms / 1000);
    if (ms >= 1000) return xasprintf("%.1f s", ms / 1000);
    if (ms >= 10) return xasprintf("%.0f ms", ms);
    if (ms >= 1) return xasprintf("%.1f ms", ms);
    return xasprintf("%.2f ms", ms);
}

/* One communicator's collectives, entry times on one clock. */
typedef struct {
    int n;                /* members (places) */
    int64_t nrows;        /* collectives examined */
    int64_t *e;           /* [row * n + place]: entry time */
    uint32_t *seq;        /* [row] */
    int *ord;             /* [row * n + i]: place of the i-th to enter */
    int clock;            /* TC_* */
    int64_t clock_err;    /* the uncertainty between the members' clocks: no lateness below it counts */
} table;

/* Offsets that put each place's CLOCK_MONOTONIC times on one clock (clocks.c);
 * 0 when the communicator cannot be examined (a place without a trace, or
 * members whose clocks could not be checked against each other). *clock: the
 * worst placement among the members' domains (TC_REFERENCE: all on one
 * domain, times as they are); *err: the uncertainty between the members'
 * clocks. */
static int clock_bases(ta_an *a, const ta_gcomm *gc, int64_t *base, int *clock, int64_t *err)
{
    int n = gc->npos, one = 1;
    for (int p = 0; p < n; p++) {
        if (gc->member[p] < 0) return 0;
        if (a->tr[gc->member[p]]->clk_dom != a->tr[gc->member[0]]->clk_dom) one = 0;
    }
    *clock = TC_REFERENCE;
    *err = 0;
    for (int p = 0; p < n; p++) base[p] = 0;
    if (one || !a->clk) return 1;
    /* errors of two domains against the reference add up: the two largest */
    int64_t e1 = 0, e2 = 0;
    int d1 = -1;
    for (int p = 0; p < n; p++) {
        const ta_trace *t = a->tr[gc->member[p]];
        const ta_clock_domain *D = &a->clk->d[t->clk_dom];
        if (D->method > *clock) *clock = D->method;
        if (D->err_ns < 0) return 0;           /* never checked: a lateness could be the clocks' */
        if (D->err_ns > e1 && t->clk_dom != d1) { e2 = e1; e1 = D->err_ns; d1 = t->clk_dom; }
        else if (D->err_ns > e2 && t->clk_dom != d1) e2 = D->err_ns;
        base[p] = -t->clk_off_ns;
    }
    *err = e1 + e2;
    return 1;
}

static int table_build(ta_an *a, int g, table *tb)
{
    const ta_gcomm *gc = &a->gc[g];
    memset(tb, 0, sizeof *tb);
    int n = gc->npos;
    if (n < 2 || !gc->nseqs) return 0;
    /* rows: the seqs every member issued alike, outside groups, not failed;
     * only those every member's kept range holds can be, so that the table
     * is no larger than the calls kept (members' windows may hardly overlap) */
    uint32_t lo = 0, hi = UINT32_MAX;
    for (int p = 0; p < n; p++) {
        if (gc->member[p] < 0) return 0;
        const ta_comm *k = &a->tr[gc->member[p]]->comms[gc->local[p]];
        if (!k->nkept) return 0;
        if (k->seq0 > lo) lo = k->seq0;
        if (k->nseq < hi) hi = k->nseq;
    }
    if (lo > hi) return 0;
    uint32_t i0 = ta_gseq_lower(gc, lo), m = ta_gseq_lower(gc, (uint64_t)hi + 1) - i0;
    int64_t *base = xmalloc(sizeof(int64_t) * (size_t)n);
    if (!m || !clock_bases(a, gc, base, &tb->clock, &tb->clock_err)) { free(base); return 0; }
    tb->n = n;
    tb->e = xmalloc(sizeof(int64_t) * (size_t)n * m);
    tb->seq = xmalloc(sizeof(uint32_t) * m);
    uint8_t *ok = xmalloc(m);
    for (uint32_t r = 0; r < m; r++) ok[r] = !gc->sigbad[i0 + r];   /* a divergence: its times mean nothing */
    for (int p = 0; p < n; p++) {         /* place by place: each trace's calls in order */
        const ta_trace *t = a->tr[gc->member[p]];
        const ta_comm *k = &t->comms[gc->local[p]];
        for (uint32_t r = 0; r < m; r++) {
            if (!ok[r]) continue;
            int64_t ci = ta_comm_call(k, ta_gseq_at(gc, i0 + r));
            if (ci < 0) { ok[r] = 0; continue; }
            const ta_call *c = &t->calls[ci];
            if (c->group || ta_rc_failed(c->rc)) { ok[r] = 0; continue; }
            /* crafted times far from any clock would overflow what follows (gaps, spreads): such a
             * collective is not examined */
            int64_t e;
            if (__builtin_sub_overflow(c->enter_ns, base[p], &e) || e > TIME_LIMIT_NS || e < -TIME_LIMIT_NS) {
                ok[r] = 0;
                continue;
            }
            tb->e[(size_t)r * n + p] = e;
        }
    }
    for (uint32_t r = 0; r < m; r++) {
        if (!ok[r]) continue;
        if ((uint32_t)tb->nrows != r)
            memmove(tb->e + tb->nrows * n, tb->e + (size_t)r * n, sizeof(int64_t) * (size_t)n);
        tb->seq[tb->nrows++] = ta_gseq_at(gc, i0 + r);
    }
    free(ok);
    free(base);
    return tb->nrows > 0;
}

/* The mean time between consecutive collectives examined, each one's time
 * being its members' median entry; 0 with fewer than two. The mean, not the
 * median: a communicator with two collectives 10 ms apart in each 2 s step
 * has a median interval of 10 ms, which would make any delay "large". */
static int64_t row_median(const table *tb, int64_t r, int64_t *scratch)
{
    memcpy(scratch, tb->e + r * tb->n, sizeof(int64_t) * (size_t)tb->n);
    return ta_median64(scratch, tb->n);
}

static int64_t interval_mean(const table *tb)
{
    if (tb->nrows < 2) return 0;
    int64_t *row = xmalloc(sizeof(int64_t) * (size_t)tb->n);
    int64_t first = row_median(tb, 0, row), last = row_median(tb, tb->nrows - 1, row);
    free(row);
    return last > first ? (last - first) / (tb->nrows - 1) : 0;
}

/* Each row's places in entry order. */
static void table_sort(table *tb)
{
    int n = tb->n;
    tb->ord = xmalloc(sizeof(int) * (size_t)n * (size_t)tb->nrows);
    entry *en = xmalloc(sizeof(entry) * (size_t)n);
    for (int64_t r = 0; r < tb->nrows; r++) {
        for (int p = 0; p < n; p++) en[p] = (entry){tb->e[r * n + p], p};
        if (n > 1) qsort(en, (size_t)n, sizeof *en, cmp_entry);
        for (int i = 0; i < n; i++) tb->ord[r * n + i] = en[i].p;
    }
    free(en);
}

static void table_free(table *tb)
{
    free(tb->e); free(tb->seq); free(tb->ord);
}

/* The spread of entries (last - first) per collective: the communicator's
 * summary in --json's comms[]. Returns how many collectives spread at least
 * min_ns: a straggler's gap is never larger than the spread, so fewer than
 * half of them rule out a finding without sorting anything. */
static int64_t spread_summary(ta_gcomm *gc, const table *tb, int64_t min_ns)
{
    int n = tb->n;
    int64_t *v = xmalloc(sizeof(int64_t) * (size_t)tb->nrows), wide = 0;
    gc->spread_max_ns = -1;
    for (int64_t r = 0; r < tb->nrows; r++) {
        const int64_t *e = tb->e + r * n;
        int64_t lo = e[0], hi = e[0];
        for (int p = 1; p < n; p++) {
            if (e[p] < lo) lo = e[p];
            if (e[p] > hi) hi = e[p];
        }
        v[r] = hi - lo;
        wide += v[r] >= min_ns;
        if (v[r] > gc->spread_max_ns) { gc->spread_max_ns = v[r]; gc->spread_max_seq = tb->seq[r]; }
    }
    gc->spread_n = tb->nrows;
    gc->spread_median_ns = ta_median64(v, tb->nrows);
    gc->spread_clock = tb->clock;
    free(v);
    return wide;
}

/* Entry of S's first member minus the median entry of the others, and the
 * others' last minus their median, at row r. in_s: per place. Rows where S
 * is the last k take O(1). */
static void row_gap(const table *tb, int64_t r, const uint8_t *in_s, int k, int is_last, int64_t *gap, int64_t *jit)
{
    int n = tb->n, no = n - k;
    const int *ord = tb->ord + r * n;
    const int64_t *e = tb->e + r * n;
    int64_t first_s, med_o, last_o;
    if (is_last) {
        first_s = e[ord[no]];
        med_o = no % 2 ? e[ord[no / 2]] : e[ord[no / 2 - 1]] + (e[ord[no / 2]] - e[ord[no / 2 - 1]]) / 2;
        last_o = e[ord[no - 1]];
    } else {
        int64_t lo = 0, hi = 0;
        int io = 0;
        first_s = INT64_MAX;
        last_o = INT64_MIN;
        for (int i = 0; i < n; i++) {
            int p = ord[i];
            if (in_s[p]) { if (e[p] < first_s) first_s = e[p]; continue; }
            if (io == (no - 1) / 2) lo = e[p];
            if (io == no / 2) hi = e[p];
            io++;
            last_o = e[p];
        }
        med_o = lo + (hi - lo) / 2;
    }
    *gap = first_s - med_o;
    *jit = last_o - med_o;
}

typedef struct {
    int k;
    int *places;          /* S, k places */
    int64_t last, examined, median, max, jitter, threshold, spread;
    int64_t max_row; int max_place, med_place;   /* where the latest of S was most late */
} result;

/* The smallest set of ranks that is consistently last and late enough, 0 none. */
static int find_late_set(const table *tb, int64_t min_ns, result *res)
{
    int n = tb->n, kmax = n / 2;
    int64_t N = tb->nrows;
    uint64_t *h = xcalloc((size_t)N, sizeof(uint64_t));
    uint8_t *in_s = xcalloc((size_t)n, 1), *is_last = xmalloc((size_t)N);
    int64_t *gap = xmalloc(sizeof(int64_t) * (size_t)N), *jit = xmalloc(sizeof(int64_t) * (size_t)N);
    int found = 0;
    for (int k = 1; k <= kmax && !found; k++) {
        /* the set of the last k to enter, as a hash of the set (order-free
         * sum of mixed places; a collision of 64-bit sums is not a concern) */
        for (int64_t r = 0; r < N; r++) h[r] += mix64((uint64_t)tb->ord[r * n + n - k] + 1);
        uint64_t cand = 0;
        int64_t votes = 0;
        for (int64_t r = 0; r < N; r++) {     /* majority vote: the only set that can reach 3/4 */
            if (!votes) { cand = h[r]; votes = 1; }
            else votes += h[r] == cand ? 1 : -1;
        }
        int64_t q = 0, rep = -1;
        for (int64_t r = 0; r < N; r++) {
            is_last[r] = h[r] == cand;
            if (is_last[r]) { q++; if (rep < 0) rep = r; }
        }
        if (q * LAST_FRACTION_DEN < N * LAST_FRACTION_NUM) continue;
        memset(in_s, 0, (size_t)n);
        for (int i = n - k; i < n; i++) in_s[tb->ord[rep * n + i]] = 1;
        /* a median gap >= min_ns needs half the rows at or above it; the rows
         * where S is last are cheap, see first whether they can make it */
        int64_t big = 0;
        for (int64_t r = 0; r < N; r++)
            if (is_last[r]) {
                row_gap(tb, r, in_s, k, 1, &gap[r], &jit[r]);
                big += gap[r] >= min_ns;
            }
        if ((big + (N - q)) * 2 < N) continue;
        for (int64_t r = 0; r < N; r++)
            if (!is_last[r]) row_gap(tb, r, in_s, k, 0, &gap[r], &jit[r]);
        int64_t med_gap = ta_median64(gap, N), med_jit = ta_median64(jit, N);
        int64_t thr = med_jit * NOISE_FACTOR > min_ns ? med_jit * NOISE_FACTOR : min_ns;
        if (thr < 1) thr = 1;             /* late means later: entries that tie are not */
        if (med_gap < thr) continue;
        found = 1;
        memset(res, 0, sizeof *res);
        res->k = k;
        res->places = xmalloc(sizeof(int) * (size_t)k);
        for (int i = 0, j = 0; i < n; i++) if (in_s[i]) res->places[j++] = i;
        res->last = q;
        res->examined = N;
        res->median = med_gap;
        res->jitter = med_jit;
        res->threshold = thr;
        /* the latest member of S behind the others' median, at its worst */
        res->max = INT64_MIN;
        int64_t *o = xmalloc(sizeof(int64_t) * (size_t)n), *sp = gap;
        int *op = xmalloc(sizeof(int) * (size_t)n);
        for (int64_t r = 0; r < N; r++) {
            const int64_t *e = tb->e + r * n;
            int no = 0, late = -1;
            for (int i = 0; i < n; i++) {
                int p = tb->ord[r * n + i];
                if (in_s[p]) { if (late < 0 || e[p] > e[late]) late = p; }
                else { op[no] = p; o[no++] = e[p]; }
            }
            /* op is in entry order: the median place is op[(no - 1) / 2] */
            int64_t med_o = no % 2 ? o[no / 2] : o[no / 2 - 1] + (o[no / 2] - o[no / 2 - 1]) / 2;
            if (e[late] - med_o > res->max) {
                res->max = e[late] - med_o;
                res->max_row = r;
                res->max_place = late;
                res->med_place = op[(no - 1) / 2];
            }
            sp[r] = e[tb->ord[r * n + n - 1]] - e[tb->ord[r * n]];
        }
        res->spread = ta_median64(sp, N);
        free(o); free(op);
    }
    free(h); free(in_s); free(is_last); free(gap); free(jit);
    return found;
}

static void describe(ta_an *a, ta_finding *f)
{
    ta_straggler *st = f->data;
    char *who = ta_ranks_text(f->culprit.ranks, f->culprit.nranks);
    int many = f->culprit.nranks > 1;
    char *med = dur_text(st->median_ns), *mx = dur_text(st->max_ns);
    const ta_trace *t = a->tr[f->culprit.trace];
    char *call = ta_call_sig(t, f->culprit.call), *site = ta_call_site_text(a, t, f->culprit.call);
    char *last = many ? xasprintf("the last %d to enter in %lld of %lld collectives", f->culprit.nranks,
                                  (long long)st->last, (long long)st->examined)
                      : xasprintf("the last to enter in %lld of %lld collectives", (long long)st->last,
                                  (long long)st->examined);
    char *which = many ? xasprintf("rank %d ", t->rank) : xstrdup("");
    char *also = xstrdup("");
    if (st->nalso) {
        free(also);
        also = xasprintf("; late on %d other communicator%s too (", st->nalso, st->nalso > 1 ? "s" : "");
        for (int i = 0; i < st->nalso; i++) {
            char *x = xasprintf("%s%s%s", also, i ? ", " : "", ta_comm_name(a, st->also[i]));
            free(also);
            also = x;
        }
        char *x = xasprintf("%s)", also);
        free(also);
        also = x;
    }
    char *iv = dur_text(st->interval_ns);
    char *share = st->interval_ns > 0 ? xasprintf(", %.0f%% of the %s between its collectives",
                                                  100.0 * (double)st->median_ns / (double)st->interval_ns, iv)
                                      : xstrdup("");
    f->message = xasprintf("%s %s enter%s the collectives of comm %s late: %s, a median of %s behind the "
                           "others%s (max %s, %sat %s #%lld at %s)%s%s",
                           many ? "ranks" : "rank", who, many ? "" : "s", ta_comm_name(a, f->g), last, med, share, mx,
                           which, call, (long long)f->seq, site, also,
                           st->clock == TC_WALL ? "; clocks of different hosts aligned by wall time, which may be "
                                                  "off by milliseconds" : "");
    if (many)
        f->hint = xstrdup("the other members wait for these ranks in every collective, so the job runs at their pace: "
                          "something they do before their collectives takes longer than on the others — a slow input "
                          "pipeline (data loading, decoding, augmentation), work only they do (logging, evaluation, "
                          "checkpoints), a busy or slower host (CPU contention, too few data-loader workers, a "
                          "throttled GPU); when they share a host, look at that host first");
    else
        f->hint = xstrdup("the other members wait for this rank in every collective, so the job runs at its pace: "
                          "something it does before its collectives takes longer than on the others — a slow input "
                          "pipeline (data loading, decoding, augmentation), work only it does (logging, evaluation, "
                          "checkpoints), a busy or slower host (CPU contention, too few data-loader workers, a "
                          "throttled GPU); profile its step and compare it with a fast rank's");
    free(who); free(med); free(mx); free(call); free(site); free(last); free(which); free(also); free(iv); free(share);
}

void ta_detect_straggler(ta_an *a, int look)
{
    if (look != TA_LOOK_FINDINGS) return;   /* last: nothing defers to it */
    /* larger communicators first: the same ranks late on a sub-communicator
     * are the same finding */
    int *order = xmalloc(sizeof(int) * (size_t)(a->ngc + 1));
    for (int g = 0; g < a->ngc; g++) order[g] = g;
    for (int i = 1; i < a->ngc; i++)      /* insertion sort, stable: by npos, descending */
        for (int j = i; j > 0 && a->gc[order[j]].npos > a->gc[order[j - 1]].npos; j--) {
            int x = order[j]; order[j] = order[j - 1]; order[j - 1] = x;
        }
    int first = a->nf;
    for (int i = 0; i < a->ngc; i++) {
        int g = order[i];
        ta_gcomm *gc = &a->gc[g];
        table tb;
        if (!table_build(a, g, &tb)) { table_free(&tb); continue; }
        int64_t interval = interval_mean(&tb);
        int64_t floor_ns = a->straggler_ns;
        if ((double)interval * a->straggler_frac > (double)floor_ns) floor_ns = llround((double)interval * a->straggler_frac);
        if (tb.clock_err > floor_ns) floor_ns = tb.clock_err;      /* what the clocks' alignment cannot support */
        int64_t wide = spread_summary(gc, &tb, floor_ns);
        result res;
        if (tb.nrows < MIN_COLLECTIVES || wide * 2 < tb.nrows) { table_free(&tb); continue; }
        table_sort(&tb);
        if (!find_late_set(&tb, floor_ns, &res)) { table_free(&tb); continue; }
        int *ranks = xmalloc(sizeof(int) * (size_t)res.k);
        for (int j = 0; j < res.k; j++) ranks[j] = a->tr[gc->member[res.places[j]]]->rank;
        ta_ints_sort(ranks, res.k);
        /* already reported on a larger communicator? */
        ta_finding *cover = NULL;
        for (int j = first; j < a->nf && !cover; j++) {
            int all = 1;
            for (int q = 0; q < res.k && all; q++) {
                int in = 0;
                for (int m = 0; m < a->f[j].culprit.nranks; m++) in |= a->f[j].culprit.ranks[m] == ranks[q];
                all = in;
            }
            if (all) cover = &a->f[j];
        }
        if (cover) {
            ta_straggler *st = cover->data;
            st->also = xrealloc(st->also, sizeof(int) * (size_t)(st->nalso + 1));
            st->also[st->nalso++] = g;
        } else {
            ta_finding *f = ta_finding_new(a, K_STRAGGLER);
            f->root = 0;
            f->g = g;
            uint32_t seq = tb.seq[res.max_row];
            f->seq = seq;
            int lt = gc->member[res.max_place], mt = gc->member[res.med_place];
            ta_side_set(&f->culprit, ranks, res.k, lt, ta_comm_call(&a->tr[lt]->comms[gc->local[res.max_place]], seq));
            f->culprit.stack = a->tr[lt]->calls[f->culprit.call].stack;
            f->culprit.pystack = a->tr[lt]->calls[f->culprit.call].pystack;
            int *others = xmalloc(sizeof(int) * (size_t)gc->npos), no = 0;
            for (int p = 0; p < gc->npos; p++) {
                int in = 0;
                for (int j = 0; j < res.k; j++) in |= res.places[j] == p;
                if (!in) others[no++] = a->tr[gc->member[p]]->rank;
            }
            ta_side_set(&f->other, others, no, mt, ta_comm_call(&a->tr[mt]->comms[gc->local[res.med_place]], seq));
            f->other.stack = a->tr[mt]->calls[f->other.call].stack;
            f->other.pystack = a->tr[mt]->calls[f->other.call].pystack;
            free(others);
            f->t = ta_wall(a->tr[lt], a->tr[lt]->calls[f->culprit.call].enter_ns);
            ta_straggler *st = xcalloc(1, sizeof *st);
            f->data = st;
            st->clock = tb.clock;
            st->examined = res.examined;
            st->last = res.last;
            st->median_ns = res.median;
            st->max_ns = res.max;
            st->jitter_ns = res.jitter;
            st->threshold_ns = res.threshold;
            st->interval_ns = interval;
            st->spread_ns = res.spread;
        }
        free(ranks);
        free(res.places);
        table_free(&tb);
    }
    for (int j = first; j < a->nf; j++) describe(a, &a->f[j]);
    free(order);
}

/* --json: how late, against what threshold, on which clock; the smaller communicators where they are late too */
void ta_json_straggler(ta_jw *w, ta_an *a, const ta_finding *f)
{
    const ta_straggler *st = f->data;
    if (!st) return;
    jw_int(w, "examined", st->examined);
    jw_int(w, "last", st->last);
    jw_key(w, "last_fraction");
    fprintf(w->o, "%.4f", st->examined ? (double)st->last / (double)st->examined : 0.0);
    jw_int(w, "lateness_median_ns", st->median_ns);
    jw_int(w, "lateness_max_ns", st->max_ns);
    jw_int(w, "jitter_ns", st->jitter_ns);
    jw_int(w, "threshold_ns", st->threshold_ns);
    jw_int(w, "interval_ns", st->interval_ns);
    jw_int(w, "spread_median_ns", st->spread_ns);
    jw_str(w, "clock", ta_clock_method_names[st->clock]);
    jw_key(w, "also_comms");
    jw_open(w, '[');
    for (int k = 0; k < st->nalso; k++) { jw_sep(w); jw_string(w->o, ta_comm_name(a, st->also[k])); }
    jw_close(w, ']');
}

/* text: the heading names no collective (all of them are late) */
void ta_text_straggler(ta_tx *x, const ta_finding *f) { ta_tx_head(x, f, ""); }

void ta_drop_straggler(void *data)
{
    ta_straggler *st = data;
    free(st->also);
    free(st);
}
