/* Clock alignment: puts every rank's CLOCK_MONOTONIC times on one clock, the
 * wall clock of the reference ranks, and says how well each rank could be
 * placed (docs/analysis-format.md, "Clocks").
 *
 * A clock domain is a set of ranks whose monotonic times compare as they
 * are: one host, the same realtime - monotonic offset in their clock samples
 * (a rank in its own time namespace, as in a container, has another), and
 * nothing the collectives prove says otherwise. Between domains, what the
 * traces prove is causal: an all-to-all collective (AllReduce, AllGather,
 * ReduceScatter, AlltoAll) cannot complete on any member before its last
 * member entered it, and no member leaves a communicator's init before the
 * last one entered it. Each gives bounds on a domain's offset; within them
 * the offset is placed by, in order: the host's realtime clock when the
 * domain shares a host with the reference (a time namespace leaves realtime
 * alone); the collectives' completions (members see one complete at about
 * the same time: the shim's poll, about a millisecond); the inits' exits
 * (members leave together); the hosts' wall clocks. An estimate outside the
 * bounds is moved to the nearest bound and its uncertainty becomes the
 * bounds' width, so that nothing built on it (a straggler's lateness) can
 * claim more than the traces prove. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "ta_align.h"
#include "ta_clock.h"

#define TA_CLOCK_NAME_(id, name) name,
const char *const ta_clock_method_names[TC_N] = {TA_CLOCK_METHODS(TA_CLOCK_NAME_)};
#undef TA_CLOCK_NAME_

#define MS 1000000LL
#define DOMAIN_TOL_NS MS          /* realtime - monotonic of two ranks of one domain: read apart, NTP slew */
#define CAUSAL_TOL_NS MS          /* a violation smaller than this is noise (clock samples, rounding) */
#define POLL_NS MS                /* done_ns: at most about this after the completion */
#define SAMPLE_ERR_NS 1000        /* realtime and monotonic read one after the other */
#define MIN_DONE 4                /* completions enough to place a domain by them */
#define MAX_SAMPLES 4096          /* per domain: the median of these */
#define UNB_LO INT64_MIN
#define UNB_HI INT64_MAX

/* an all-to-all collective: completing needs every member's part */
static int op_all(int op)
{
    return op == OP_ALLREDUCE || op == OP_ALLGATHER || op == OP_REDUCESCATTER || op == OP_ALLTOALL;
}

/* Times and offsets of real clocks are far below TIME_LIMIT_NS (73 years of
 * nanoseconds); a crafted trace's beyond it are not used, so that sums of a
 * time and an offset, and differences of those, never overflow. */
#define TIME_LIMIT_NS (INT64_C(1) << 61)

static int64_t wall_off(const ta_trace *t)
{
    double w = t->clock_real * 1e9 - (double)t->clock_mono;
    if (!isfinite(w) || fabs(w) > (double)TIME_LIMIT_NS) return 0;
    return llround(w);
}

static int time_ok(int64_t x) { return x >= 0 && x <= TIME_LIMIT_NS; }

/* one member's part of a collective (or of an init): enter and completion, TA_NULL64 unknown */
typedef struct { int64_t enter, done; } part;

/* trace ti's part in seq index i of communicator g (0: none usable) */
static int coll_part(const ta_an *a, const ta_gcomm *gc, int p, uint32_t seq, part *out)
{
    int ti = gc->member[p];
    if (ti < 0) return 0;
    const ta_trace *t = a->tr[ti];
    int64_t ci = ta_comm_call(&t->comms[gc->local[p]], seq);
    if (ci < 0) return 0;
    const ta_call *c = &t->calls[ci];
    if (!op_all(c->op) || ta_rc_failed(c->rc) || !time_ok(c->enter_ns)) return 0;
    out->enter = c->enter_ns;
    out->done = c->gpu == GPU_DONE && time_ok(c->done_ns) ? c->done_ns : TA_NULL64;
    if (out->done != TA_NULL64 && out->done < out->enter) out->done = TA_NULL64;
    return 1;
}

static int init_part(const ta_an *a, const ta_gcomm *gc, int p, part *out)
{
    int ti = gc->member[p];
    if (ti < 0) return 0;
    const ta_comm *k = &a->tr[ti]->comms[gc->local[p]];
    if (!time_ok(k->init_enter) || !time_ok(k->init_exit) || k->init_exit < k->init_enter) return 0;
    if (k->init_rc != TA_NULL64 && k->init_rc != 0 && k->init_rc != 7) return 0;
    out->enter = k->init_enter;
    out->done = k->init_exit;
    return 1;
}

/* Visits every usable row (each collective not in disagreement, each init)
 * of every communicator with at least two members: fn(ctx, parts, traces, n, is_init). */
typedef void (*row_fn)(void *ctx, const part *pt, const int *tr, int n, int is_init);

static void each_row(const ta_an *a, row_fn fn, void *ctx)
{
    int cap = 0;
    part *pt = NULL;
    int *tr = NULL;
    for (int g = 0; g < a->ngc; g++) {
        const ta_gcomm *gc = &a->gc[g];
        if (gc->npos < 2) continue;
        if (gc->npos > cap) {
            cap = gc->npos;
            pt = xrealloc(pt, sizeof *pt * (size_t)cap);
            tr = xrealloc(tr, sizeof *tr * (size_t)cap);
        }
        int n = 0;
        for (int p = 0; p < gc->npos; p++)
            if (init_part(a, gc, p, &pt[n])) tr[n++] = gc->member[p];
        if (n >= 2) fn(ctx, pt, tr, n, 1);
        for (uint32_t i = 0; i < gc->nseqs; i++) {
            if (gc->sigbad[i]) continue;
            uint32_t seq = ta_gseq_at(gc, i);
            n = 0;
            for (int p = 0; p < gc->npos; p++)
                if (coll_part(a, gc, p, seq, &pt[n])) tr[n++] = gc->member[p];
            if (n >= 2) fn(ctx, pt, tr, n, 0);
        }
    }
    free(pt);
    free(tr);
}

/* ---- domains by clock sample, then split where the collectives disagree ---- */
typedef struct { const char *host; int64_t woff; int rank, t; } dkey;

static int cmp_dkey(const void *x, const void *y)
{
    const dkey *p = x, *q = y;
    int c = strcmp(p->host, q->host);
    if (c) return c;
    if (p->woff != q->woff) return (p->woff > q->woff) - (p->woff < q->woff);
    return (p->rank > q->rank) - (p->rank < q->rank);
}

/* per trace: rows seen with others of its domain, and rows where it broke causality against their median */
typedef struct { const int *dom; int64_t *rows, *bad; int64_t *scratch; } split_ctx;

static void split_row(void *vc, const part *pt, const int *tr, int n, int is_init)
{
    split_ctx *s = vc;
    (void)is_init;
    /* members per domain: a row's members are few domains; check each member against the
     * median of the other members of its own domain */
    for (int i = 0; i < n; i++) {
        int d = s->dom[tr[i]], m = 0;
        for (int j = 0; j < n; j++)
            if (j != i && s->dom[tr[j]] == d && pt[j].done != TA_NULL64) s->scratch[m++] = pt[j].done;
        if (!m) continue;
        int64_t med_done = ta_median64(s->scratch, m);
        m = 0;
        for (int j = 0; j < n; j++)
            if (j != i && s->dom[tr[j]] == d) s->scratch[m++] = pt[j].enter;
        int64_t med_enter = ta_median64(s->scratch, m);
        s->rows[tr[i]]++;
        if (pt[i].enter > med_done + CAUSAL_TOL_NS || (pt[i].done != TA_NULL64 && pt[i].done < med_enter - CAUSAL_TOL_NS))
            s->bad[tr[i]]++;
    }
}

/* ---- placing domains against those already placed ---- */
typedef struct {
    int64_t lo, hi;            /* bounds on the domain's offset */
    int64_t *done; int64_t ndone;    /* completion estimates */
    int64_t *init; int64_t ninit;    /* init-exit estimates */
} acc;

typedef struct {
    const ta_an *a;
    const int *dom;            /* per trace */
    const uint8_t *placed;     /* per domain */
    const int64_t *off;        /* per domain, when placed */
    acc *ac;                   /* per domain */
    int nd;
    /* per row, per domain: min/max of enter and done */
    int64_t *mn_e, *mx_e, *mn_d, *mx_d;
    int *touched; int ntouched; uint8_t *seen;
} place_ctx;

static void push_sample(int64_t **v, int64_t *n, int64_t x)
{
    if (*n >= MAX_SAMPLES) return;
    if (!*v) *v = xmalloc(sizeof(int64_t) * MAX_SAMPLES);
    (*v)[(*n)++] = x;
}

static void place_row(void *vc, const part *pt, const int *tr, int n, int is_init)
{
    place_ctx *c = vc;
    c->ntouched = 0;
    /* the placed domains together (times on the common clock), each unplaced domain alone */
    int64_t a_mx_e = INT64_MIN, a_mn_d = INT64_MAX, a_mx_d = INT64_MIN;
    for (int i = 0; i < n; i++) {
        int d = c->dom[tr[i]];
        if (c->placed[d]) {
            int64_t e = pt[i].enter + c->off[d];
            if (e > a_mx_e) a_mx_e = e;
            if (pt[i].done != TA_NULL64) {
                int64_t x = pt[i].done + c->off[d];
                if (x < a_mn_d) a_mn_d = x;
                if (x > a_mx_d) a_mx_d = x;
            }
            continue;
        }
        if (!c->seen[d]) {
            c->seen[d] = 1;
            c->touched[c->ntouched++] = d;
            c->mn_e[d] = c->mx_e[d] = pt[i].enter;
            c->mn_d[d] = INT64_MAX; c->mx_d[d] = INT64_MIN;
        }
        if (pt[i].enter < c->mn_e[d]) c->mn_e[d] = pt[i].enter;
        if (pt[i].enter > c->mx_e[d]) c->mx_e[d] = pt[i].enter;
        if (pt[i].done != TA_NULL64) {
            if (pt[i].done < c->mn_d[d]) c->mn_d[d] = pt[i].done;
            if (pt[i].done > c->mx_d[d]) c->mx_d[d] = pt[i].done;
        }
    }
    for (int k = 0; k < c->ntouched; k++) {
        int d = c->touched[k];
        c->seen[d] = 0;
        if (a_mx_e == INT64_MIN) continue;            /* no placed member in this row */
        acc *x = &c->ac[d];
        /* done(placed) + off(placed) >= enter(d) + off(d), and done(d) + off(d) >= enter(placed) */
        if (a_mn_d != INT64_MAX && a_mn_d - c->mx_e[d] < x->hi) x->hi = a_mn_d - c->mx_e[d];
        if (c->mn_d[d] != INT64_MAX && a_mx_e - c->mn_d[d] > x->lo) x->lo = a_mx_e - c->mn_d[d];
        if (a_mn_d == INT64_MAX || c->mn_d[d] == INT64_MAX) continue;
        /* the middle of each side's completions lined up */
        int64_t mid_a = a_mn_d + (a_mx_d - a_mn_d) / 2, mid_d = c->mn_d[d] + (c->mx_d[d] - c->mn_d[d]) / 2;
        if (is_init) push_sample(&x->init, &x->ninit, mid_a - mid_d);
        else push_sample(&x->done, &x->ndone, mid_a - mid_d);
    }
}

static int64_t mad(int64_t *v, int64_t n, int64_t med)
{
    int64_t *dv = xmalloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) dv[i] = llabs(v[i] - med);
    int64_t m = ta_median64(dv, n);
    free(dv);
    return m;
}

static int64_t sat_add(int64_t x, int64_t y)
{
    if (y > 0 && x > INT64_MAX - y) return INT64_MAX;
    if (y < 0 && x < INT64_MIN - y) return INT64_MIN;
    return x + y;
}

/* Places domain d from its accumulated bounds and samples. */
static void place(ta_clock_domain *D, acc *x, int64_t woff, int same_host_as_ref, int64_t base_err)
{
    int64_t lo = x->lo, hi = x->hi, est, err;
    int bounded = lo != UNB_LO || hi != UNB_HI;
    int wall_ok = (lo == UNB_LO || woff >= sat_add(lo, -CAUSAL_TOL_NS)) && (hi == UNB_HI || woff <= sat_add(hi, CAUSAL_TOL_NS));
    D->wall_refuted = !wall_ok;
    if (same_host_as_ref && wall_ok) {
        D->method = TC_REALTIME; est = woff; err = SAMPLE_ERR_NS + D->drift_ns;
        D->samples = x->ndone + x->ninit;
    } else if (x->ndone >= MIN_DONE) {
        D->method = TC_COMPLETION; D->samples = x->ndone;
        est = ta_median64(x->done, x->ndone);
        err = POLL_NS + mad(x->done, x->ndone, est);
    } else if (x->ninit) {
        D->method = TC_INIT; D->samples = x->ninit;
        est = ta_median64(x->init, x->ninit);
        err = (x->init[x->ninit - 1] - x->init[0]) / 2;     /* sorted by the median */
    } else if (bounded && wall_ok) {
        D->method = TC_WALL; est = woff; D->samples = 0;
        err = 0;
        if (lo != UNB_LO && sat_add(woff, -lo) > err) err = sat_add(woff, -lo);
        if (hi != UNB_HI && sat_add(hi, -woff) > err) err = sat_add(hi, -woff);
        if (lo == UNB_LO || hi == UNB_HI) err = -1;
    } else {
        D->method = TC_UNCHECKED; est = woff; err = -1; D->samples = 0;
    }
    if (lo != UNB_LO && hi != UNB_HI && lo > hi + CAUSAL_TOL_NS) {
        err = -1;                              /* no offset satisfies every bound: the traces disagree */
    } else if (lo != UNB_LO && est < lo) {
        est = lo;
        if (err >= 0) err = hi != UNB_HI ? sat_add(hi, -lo) : -1;
    } else if (hi != UNB_HI && est > hi) {
        est = hi;
        if (err >= 0) err = lo != UNB_LO ? sat_add(hi, -lo) : -1;
    }
    if (err >= 0 && base_err >= 0) err = sat_add(err, base_err);
    else err = -1;
    /* a crafted trace's: kept where sums with its times cannot overflow */
    if (est > TIME_LIMIT_NS) est = TIME_LIMIT_NS;
    if (est < -TIME_LIMIT_NS) est = -TIME_LIMIT_NS;
    D->off_ns = est;
    D->err_ns = err;
    D->lo_ns = lo == UNB_LO ? INT64_MIN : lo - est;
    D->hi_ns = hi == UNB_HI ? INT64_MAX : hi - est;
    D->wall_skew_ns = woff - est;
}

void ta_clocks_align(ta_an *a)
{
    int n = a->ntr;
    ta_clocks *ck = xcalloc(1, sizeof *ck);
    a->clk = ck;
    if (!n) return;
    int64_t *woff = xmalloc(sizeof(int64_t) * (size_t)n), *drift = xcalloc((size_t)n, sizeof(int64_t));
    int *dom = xmalloc(sizeof(int) * (size_t)n);
    dkey *ord = xmalloc(sizeof *ord * (size_t)n);
    for (int i = 0; i < n; i++) {
        const ta_trace *t = a->tr[i];
        woff[i] = wall_off(t);
        if (t->has_clock_w) {
            ta_trace w = *t;
            w.clock_real = t->clock_real_w; w.clock_mono = t->clock_mono_w;
            drift[i] = llabs(wall_off(&w) - woff[i]);
        }
        ord[i] = (dkey){t->host ? t->host : "", woff[i], t->rank, i};
    }
    qsort(ord, (size_t)n, sizeof *ord, cmp_dkey);
    int nd = 0;
    for (int i = 0, first = 0; i < n; i++) {
        if (i && (strcmp(ord[i].host, ord[first].host) || ord[i].woff - ord[first].woff > DOMAIN_TOL_NS)) {
            nd++;
            first = i;
        }
        dom[ord[i].t] = nd;
    }
    nd++;
    /* a rank whose monotonic clock breaks causality against its domain's others: a clock of its own */
    split_ctx sc = {dom, xcalloc((size_t)n, sizeof(int64_t)), xcalloc((size_t)n, sizeof(int64_t)),
                    xmalloc(sizeof(int64_t) * (size_t)(a->ngc ? n : 1))};
    each_row(a, split_row, &sc);
    uint8_t *split = xcalloc((size_t)n, 1);
    for (int i = 0; i < n; i++)
        if (sc.rows[i] >= 2 && 2 * sc.bad[i] > sc.rows[i]) { dom[i] = nd++; split[i] = 1; }
    free(sc.rows); free(sc.bad); free(sc.scratch);
    /* domains numbered by their lowest rank (a->tr is by rank): the first trace seen opens one */
    int *renum = xmalloc(sizeof(int) * (size_t)nd);
    for (int d = 0; d < nd; d++) renum[d] = -1;
    int used = 0;
    for (int i = 0; i < n; i++)
        if (renum[dom[i]] < 0) renum[dom[i]] = used++;
    for (int i = 0; i < n; i++) dom[i] = renum[dom[i]];
    free(renum);
    nd = used;         /* a domain all of whose members were split out is gone */

    ck->nd = nd;
    ck->d = xcalloc((size_t)nd, sizeof *ck->d);
    for (int i = 0; i < n; i++) {            /* traces in rank order (a->tr is by rank) */
        ta_clock_domain *D = &ck->d[dom[i]];
        if (!D->ntr) D->host = a->tr[i]->host;
        D->tr = xrealloc(D->tr, sizeof(int) * (size_t)(D->ntr + 1));
        D->tr[D->ntr++] = i;
        if (drift[i] > D->drift_ns) D->drift_ns = drift[i];
        if (split[i]) D->split = 1;
    }
    /* the reference: the domain holding the most ranks, the lowest rank on a tie */
    int ref = 0;
    for (int d = 1; d < nd; d++)
        if (ck->d[d].ntr > ck->d[ref].ntr ||
            (ck->d[d].ntr == ck->d[ref].ntr && a->tr[ck->d[d].tr[0]]->rank < a->tr[ck->d[ref].tr[0]]->rank)) ref = d;
    ck->ref = ref;
    uint8_t *placed = xcalloc((size_t)nd, 1);
    int64_t *off = xcalloc((size_t)nd, sizeof(int64_t));
    ta_clock_domain *R = &ck->d[ref];
    R->method = TC_REFERENCE;
    R->off_ns = off[ref] = woff[R->tr[0]];
    R->lo_ns = INT64_MIN; R->hi_ns = INT64_MAX;
    placed[ref] = 1;
    int64_t placed_err = 0;              /* the worst uncertainty among the placed: what a placement against them inherits */
    acc *ac = xcalloc((size_t)nd, sizeof *ac);
    place_ctx pc = {a, dom, placed, off, ac, nd,
                    xmalloc(sizeof(int64_t) * (size_t)nd), xmalloc(sizeof(int64_t) * (size_t)nd),
                    xmalloc(sizeof(int64_t) * (size_t)nd), xmalloc(sizeof(int64_t) * (size_t)nd),
                    xmalloc(sizeof(int) * (size_t)nd), 0, xcalloc((size_t)nd, 1)};
    for (int left = nd - 1; left > 0;) {
        for (int d = 0; d < nd; d++) {
            free(ac[d].done); free(ac[d].init);
            ac[d] = (acc){UNB_LO, UNB_HI, NULL, 0, NULL, 0};
        }
        each_row(a, place_row, &pc);
        int progress = 0;
        int64_t round_err = placed_err;
        for (int d = 0; d < nd; d++) {
            if (placed[d] || (ac[d].lo == UNB_LO && ac[d].hi == UNB_HI && !ac[d].ndone && !ac[d].ninit)) continue;
            ta_clock_domain *D = &ck->d[d];
            place(D, &ac[d], woff[D->tr[0]], !strcmp(D->host ? D->host : "", R->host ? R->host : ""), placed_err);
            off[d] = D->off_ns;
            placed[d] = 1;
            left--;
            progress = 1;
            if (D->err_ns < 0 || round_err < 0) round_err = -1;
            else if (D->err_ns > round_err) round_err = D->err_ns;
        }
        placed_err = round_err;
        if (!progress) break;
    }
    for (int d = 0; d < nd; d++) {       /* nothing shared with the placed ranks: their own wall clocks */
        if (placed[d]) continue;
        ta_clock_domain *D = &ck->d[d];
        D->method = !strcmp(D->host ? D->host : "", R->host ? R->host : "") ? TC_REALTIME : TC_UNCHECKED;
        D->off_ns = woff[D->tr[0]];
        D->err_ns = D->method == TC_REALTIME ? SAMPLE_ERR_NS + D->drift_ns : -1;
        D->lo_ns = INT64_MIN; D->hi_ns = INT64_MAX;
    }
    ck->max_err_ns = 0;
    for (int d = 0; d < nd; d++) {
        ta_clock_domain *D = &ck->d[d];
        if (D->err_ns < 0) ck->max_err_ns = -1;
        else if (ck->max_err_ns >= 0 && D->err_ns > ck->max_err_ns) ck->max_err_ns = D->err_ns;
        for (int k = 0; k < D->ntr; k++) {
            ta_trace *t = a->tr[D->tr[k]];
            t->clk_off_ns = D->off_ns;
            t->clk_dom = d;
            t->clk_set = 1;
        }
    }
    for (int d = 0; d < nd; d++) { free(ac[d].done); free(ac[d].init); }
    free(ac);
    free(pc.mn_e); free(pc.mx_e); free(pc.mn_d); free(pc.mx_d); free(pc.touched); free(pc.seen);
    free(placed); free(off); free(split);
    free(woff); free(drift); free(ord); free(dom);
}

void ta_clocks_free(ta_an *a)
{
    if (!a->clk) return;
    for (int d = 0; d < a->clk->nd; d++) free(a->clk->d[d].tr);
    free(a->clk->d);
    free(a->clk);
    a->clk = NULL;
}

int64_t ta_clock_err(const ta_an *a, int x, int y)
{
    if (!a->clk || !a->clk->nd) return 0;
    const ta_trace *p = a->tr[x], *q = a->tr[y];
    if (!p->clk_set || !q->clk_set) return -1;
    if (p->clk_dom == q->clk_dom) return 0;
    int64_t ex = a->clk->d[p->clk_dom].err_ns, ey = a->clk->d[q->clk_dom].err_ns;
    return ex < 0 || ey < 0 ? -1 : ex + ey;
}

/* "3600 s", "250 ms", "1.2 ms", "850 us" */
static void dur_text(int64_t ns, char *b, size_t cap)
{
    double v = fabs((double)ns);
    if (v >= 10e9) snprintf(b, cap, "%.0f s", v / 1e9);
    else if (v >= 1e9) snprintf(b, cap, "%.3g s", v / 1e9);
    else if (v >= 10e6) snprintf(b, cap, "%.0f ms", v / 1e6);
    else if (v >= 1e6) snprintf(b, cap, "%.2g ms", v / 1e6);
    else if (v >= 1e3) snprintf(b, cap, "%.0f us", v / 1e3);
    else snprintf(b, cap, "%.0f ns", v);
}

static const char *const method_text[TC_N] = {
    [TC_REFERENCE] = "", [TC_REALTIME] = "by the host's realtime clock",
    [TC_COMPLETION] = "by the completions of the collectives they share", [TC_INIT] = "by their communicators' inits",
    [TC_WALL] = "by the hosts' wall clocks, as far as the collectives allow", [TC_UNCHECKED] = "by the hosts' wall clocks"};

#define LISTED_DOMAINS 4

char *ta_clocks_text(const ta_an *a)
{
    const ta_clocks *ck = a->clk;
    if (!ck || ck->nd < 2) return NULL;
    const ta_clock_domain *R = &ck->d[ck->ref];
    char *ranks = NULL, *out = NULL, d1[32], d2[32];
    int *rk = xmalloc(sizeof(int) * (size_t)a->ntr);
    for (int k = 0; k < R->ntr; k++) rk[k] = a->tr[R->tr[k]]->rank;
    ranks = ta_ranks_text(rk, R->ntr);
    out = xasprintf("clocks: %d clock domains; times are on the clock of rank%s %s (%s)", ck->nd,
                    R->ntr > 1 ? "s" : "", ranks, R->host ? R->host : "?");
    free(ranks);
    int listed = 0;
    for (int d = 0; d < ck->nd; d++) {
        const ta_clock_domain *D = &ck->d[d];
        if (d == ck->ref) continue;
        if (listed++ == LISTED_DOMAINS) {
            char *o = xasprintf("%s; %d more domains", out, ck->nd - 1 - LISTED_DOMAINS);
            free(out);
            out = o;
            break;
        }
        for (int k = 0; k < D->ntr; k++) rk[k] = a->tr[D->tr[k]]->rank;
        ranks = ta_ranks_text(rk, D->ntr);
        int same_host = !strcmp(D->host ? D->host : "", R->host ? R->host : "");
        char *why;
        int64_t mono = R->off_ns - D->off_ns;    /* its CLOCK_MONOTONIC minus the reference's, at one instant */
        dur_text(mono, d1, sizeof d1);
        if (D->split) why = xasprintf("whose CLOCK_MONOTONIC the collectives show is not its host's (%s %s: a faked clock?)",
                                      d1, mono >= 0 ? "ahead" : "behind");
        else if (same_host) why = xasprintf("with a CLOCK_MONOTONIC %s %s of the reference's (a time namespace, as in a "
                                           "container, or a faked clock)", d1, mono >= 0 ? "ahead" : "behind");
        else why = xasprintf("on %s", D->host ? D->host : "?");
        char within[80];
        if (D->err_ns < 0) snprintf(within, sizeof within, " (not checked: no collective in common)");
        else if (D->method == TC_INIT && D->samples < 2)
            snprintf(within, sizeof within, ", as well as they leave an init together");
        else { dur_text(D->err_ns, d2, sizeof d2); snprintf(within, sizeof within, ", to within %s", d2); }
        char *o = xasprintf("%s; rank%s %s %s: placed %s%s", out, D->ntr > 1 ? "s" : "", ranks, why,
                            method_text[D->method], within);
        free(out); free(why); free(ranks);
        out = o;
        if (D->wall_refuted) {
            dur_text(D->wall_skew_ns, d1, sizeof d1);
            o = xasprintf("%s (its wall clock, %s %s, is ruled out by what the collectives prove)", out, d1,
                          D->wall_skew_ns >= 0 ? "ahead" : "behind");
            free(out);
            out = o;
        }
    }
    free(rk);
    return out;
}
