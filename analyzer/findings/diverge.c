/* The earliest point of divergence (root cause, second step): where a
 * stuck point's culprit first left the common path of its peers.
 *
 * The culprit's own order of collectives, across all its communicators, is
 * compared with its peers'; the first call where it differs (another
 * operation or communicator, or another line of code that shifts the rest)
 * is reported, and where the job stopped is kept as stop_comm/stop_seq.
 * Apart from rootcause.c because it looks at whole call histories, not at
 * the stuck points: its only state is the per-trace token cache below. */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_finding.h"

static int ihas(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++) if (v[i] == x) return 1;
    return 0;
}

/* ---- tokens: a rank's collectives in its own order ----
 * Two ranks are compared on the communicator families they both belong to
 * (a rank of a DP group and a rank outside it see different sequences
 * otherwise); peers with the same families as the culprit are preferred. */
static const int64_t *tokens(ta_an *a, int t, int64_t *n)
{
    if (!a->coll_idx) {     /* first use in this analysis: freed by ta_diverge_done */
        a->coll_idx = xcalloc((size_t)a->ntr + 1, sizeof *a->coll_idx);
        a->coll_n = xcalloc((size_t)a->ntr + 1, sizeof *a->coll_n);
    }
    if (!a->coll_idx[t]) {
        ta_trace *tr = a->tr[t];
        a->coll_idx[t] = xmalloc(sizeof(int64_t) * (size_t)(tr->ncalls + 1));
        int64_t k = 0;
        for (int64_t i = 0; i < tr->ncalls; i++) {
            const ta_call *c = &tr->calls[i];
            if (ta_op_is_coll(c->op) && c->seq > 0 && c->comm >= 0) a->coll_idx[t][k++] = i;
        }
        a->coll_n[t] = k;
    }
    *n = a->coll_n[t];
    return a->coll_idx[t];
}


static uint64_t fam_mask(ta_an *a, int t)
{
    uint64_t m = 0;
    const ta_trace *tr = a->tr[t];
    /* a communicator any member issued collectives on, not only this rank:
     * a rank that went on to a communicator its peers never reached (they
     * wait elsewhere) differs from them there; a group of the family that
     * nobody used (another pair than the peers') is no difference */
    for (int i = 0; i < tr->ncomms; i++)
        if (tr->comms[i].nseq || (tr->comms[i].g >= 0 && a->gc[tr->comms[i].g].nseqs))
            m |= ta_fam_bit(tr->comms[i].family);
    return m;
}

typedef struct { int t; int64_t *v; int64_t n; } seqv;

/* the lowest seq of family fam that trace t's ring window still holds (1: all) */
static uint32_t fam_window(const ta_trace *t, int fam)
{
    if (t->ring_lost <= 0) return 1;
    for (int i = 0; i < t->ncomms; i++)
        if (t->comms[i].family == fam) return ta_window_start(t, i);
    return 1;
}

/* t's tokens on the families of mask, from where both t's and the other
 * trace's ring windows hold each family (calls older than either window
 * cannot be compared: one side is gone) */
static seqv filtered(ta_an *a, int t, int other, uint64_t mask)
{
    int64_t n;
    const int64_t *all = tokens(a, t, &n);
    seqv s = {t, xmalloc(sizeof(int64_t) * (size_t)(n + 1)), 0};
    const ta_trace *tr = a->tr[t], *ot = a->tr[other];
    int windowed = tr->ring_lost > 0 || ot->ring_lost > 0;
    for (int64_t i = 0; i < n; i++) {
        const ta_call *c = &tr->calls[all[i]];
        int fam = tr->comms[c->comm].family;
        if (!(ta_fam_bit(fam) & mask)) continue;
        if (windowed) {
            uint32_t w1 = fam_window(tr, fam), w2 = fam_window(ot, fam);
            if (c->seq < (w1 > w2 ? w1 : w2)) continue;
        }
        s.v[s.n++] = all[i];
    }
    return s;
}

static int tok_eq(ta_an *a, int ta_, int64_t ca, int tb, int64_t cb, int site)
{
    const ta_trace *x = a->tr[ta_], *y = a->tr[tb];
    const ta_call *c = &x->calls[ca], *d = &y->calls[cb];
    if (x->comms[c->comm].family != y->comms[d->comm].family) return 0;
    if (!ta_sig_equal(c, d)) return 0;
    return !site || ta_site_equal(a, x, c->stack, c->pystack, y, d->stack, d->pystack);
}

/* length of the run where R[i+dr+j] == Q[i+dp+j] (site-aware, or the
 * signatures alone), up to w */
static int run_of(ta_an *a, const seqv *R, const seqv *Q, int64_t i, int dr, int dp, int w, int site)
{
    int j = 0;
    while (j < w && i + dr + j < R->n && i + dp + j < Q->n &&
           tok_eq(a, R->t, R->v[i + dr + j], Q->t, Q->v[i + dp + j], site))
        j++;
    return j;
}

static int run(ta_an *a, const seqv *R, const seqv *Q, int64_t i, int dr, int dp, int w)
{
    return run_of(a, R, Q, i, dr, dp, w, 1);
}

#define SHIFT_RUN 8      /* calls that must agree after a shift */
#define SHIFT_MAX 4      /* calls an extra or skipped stretch may hold */

/* 1: R has an extra call at i; 2: R skipped Q's call at i; 0 neither */
static int shift_kind(ta_an *a, const seqv *R, const seqv *Q, int64_t i)
{
    int64_t ax = R->n - i - 1 < Q->n - i ? R->n - i - 1 : Q->n - i;
    int64_t as = R->n - i < Q->n - i - 1 ? R->n - i : Q->n - i - 1;
    int avail_x = (int)(ax > SHIFT_RUN ? SHIFT_RUN : ax), avail_s = (int)(as > SHIFT_RUN ? SHIFT_RUN : as);
    int ex = avail_x > 0 ? run(a, R, Q, i, 1, 0, avail_x) : 0;
    int sk = avail_s > 0 ? run(a, R, Q, i, 0, 1, avail_s) : 0;
    int ex_ok = avail_x > 0 && ex == avail_x, sk_ok = avail_s > 0 && sk == avail_s;
    if (ex_ok && sk_ok) return ex >= sk ? 1 : 2;
    if (ex_ok) return 1;
    if (sk_ok) return 2;
    /* a stretch of 2..SHIFT_MAX calls (a checkpoint's barrier and gather):
     * the two agree again for a whole SHIFT_RUN after it, and the whole
     * streams differ by just that many calls (a swap of calls, which leaves
     * the counts equal, is no shift) */
    int64_t diff = R->n - Q->n;
    for (int k = 2; k <= SHIFT_MAX; k++) {
        if (diff == k && i + k + SHIFT_RUN <= R->n && i + SHIFT_RUN <= Q->n && run(a, R, Q, i, k, 0, SHIFT_RUN) == SHIFT_RUN)
            return 1;
        if (diff == -k && i + SHIFT_RUN <= R->n && i + k + SHIFT_RUN <= Q->n && run(a, R, Q, i, 0, k, SHIFT_RUN) == SHIFT_RUN)
            return 2;
    }
    /* nothing after i on either side to show the shift (the job hung
     * there): a run of identical calls that one side left a call early (a
     * skipped gradient all-reduce of the same line and size every time:
     * what that side issued in place of the run's next call is a skip) */
    if (i > 0 && avail_x <= 0 && avail_s <= 0) {
        int q_runs = tok_eq(a, Q->t, Q->v[i], Q->t, Q->v[i - 1], 1), r_runs = tok_eq(a, R->t, R->v[i], R->t, R->v[i - 1], 1);
        if (q_runs && !r_runs) return 2;
        if (r_runs && !q_runs) return 1;
    }
    return 0;
}

/* first accepted divergence of R against Q, an index into both, -1 none */
static int64_t first_div(ta_an *a, const seqv *R, const seqv *Q)
{
    int64_t n = R->n < Q->n ? R->n : Q->n;
    for (int64_t i = 0; i < n; i++) {
        if (tok_eq(a, R->t, R->v[i], Q->t, Q->v[i], 1)) continue;
        if (!tok_eq(a, R->t, R->v[i], Q->t, Q->v[i], 0)) return i;   /* another op, comm, count... */
        if (shift_kind(a, R, Q, i)) return i;                        /* another line that shifts the rest */
        /* another line of code for the same call: legal when the two stay in
         * step after it (a rank-specific branch issuing the same collectives);
         * when their calls differ right after, NCCL paired two calls of
         * different places that only looked alike (a checkpoint's barrier
         * with a loss all-reduce): the divergence is here */
        int64_t left = n - i - 1;
        int w = (int)(left > SHIFT_RUN ? SHIFT_RUN : left);
        if (w > 0 && run_of(a, R, Q, i + 1, 0, 0, w, 0) < w) return i;
    }
    return -1;
}

typedef struct {
    int found, shift, peer;
    int64_t rc, pc;
    int support, compared;   /* peers that agree on where r diverged, of those compared */
} refine_t;

/* in_step: only peers in step with r at first count (their first
 * difference, if any, lies past the first IN_STEP_CALLS calls compared):
 * a rank of another pipeline stage follows another program from its first
 * call and says nothing about where r left the common path. Then at most
 * IN_STEP_EXAMINED peers are examined. */
#define IN_STEP_CALLS 8
#define IN_STEP_EXAMINED 64
static refine_t refine_peers(ta_an *a, int r, const int *peers, int npeers, int in_step)
{
    refine_t res = {0, 0, -1, -1, -1, 0, 0};
    uint64_t mr = fam_mask(a, r);
    int same = 0;
    for (int k = 0; k < npeers; k++) same += peers[k] != r && fam_mask(a, peers[k]) == mr;
    int64_t iv[16];
    int pv[16], n = 0, examined = 0;
    for (int k = 0; k < npeers && n < 16 && (!in_step || examined < IN_STEP_EXAMINED); k++) {
        if (peers[k] == r || (same && fam_mask(a, peers[k]) != mr)) continue;
        uint64_t m = mr & fam_mask(a, peers[k]);
        seqv R = filtered(a, r, peers[k], m), Q = filtered(a, peers[k], r, m);
        int64_t d = first_div(a, &R, &Q);
        free(R.v); free(Q.v);
        examined++;
        if (in_step && d >= 0 && d < IN_STEP_CALLS) continue;
        pv[n] = peers[k];
        iv[n++] = d;
    }
    if (!n) return res;
    int best = -1, bestc = 0;
    for (int k = 0; k < n; k++) {
        int c = 0;
        for (int j = 0; j < n; j++) c += iv[j] == iv[k];
        if (c > bestc || (c == bestc && iv[k] >= 0 && (iv[best] < 0 || iv[k] < iv[best]))) { best = k; bestc = c; }
    }
    res.compared = n;
    if (iv[best] < 0) return res;
    res.support = bestc;
    uint64_t m = mr & fam_mask(a, pv[best]);
    seqv R = filtered(a, r, pv[best], m), Q = filtered(a, pv[best], r, m);
    res.found = 1;
    res.peer = pv[best];
    res.shift = shift_kind(a, &R, &Q, iv[best]);
    res.rc = R.v[iv[best]];
    res.pc = Q.v[iv[best]];
    free(R.v); free(Q.v);
    return res;
}

static refine_t refine(ta_an *a, int r, const int *peers, int npeers)
{
    return refine_peers(a, r, peers, npeers, 0);
}


/* the other side: members of g that are not culprits */
void ta_others_of(ta_an *a, ta_finding *f, int g, const int *cul_t, int ncul, int rep_t, int64_t rep_c)
{
    int *o = xmalloc(sizeof(int) * (size_t)(a->ntr + 1)), no = 0;
    if (g >= 0) {
        const ta_gcomm *n = &a->gc[g];
        for (int p = 0; p < n->npos; p++)
            if (n->member[p] >= 0 && !ihas(cul_t, ncul, n->member[p])) o[no++] = a->tr[n->member[p]]->rank;
    }
    ta_side_set(&f->other, o, no, rep_t, rep_c);
    free(o);
}


/* the collective before call ci of trace t (on another family than fam, -1:
 * any), -1 none */
static int64_t coll_before(const ta_trace *t, int64_t ci, int fam)
{
    for (int64_t i = ci - 1; i >= 0; i--) {
        const ta_call *c = &t->calls[i];
        if (!ta_op_is_coll(c->op) || !c->seq || c->comm < 0) continue;
        if (fam < 0 || t->comms[c->comm].family != fam) return i;
    }
    return -1;
}

/* A skipped call (g, seq) of culprit trace r, whose next call was rc (the
 * peer's at the gap: pc): r's call before the gap, and, when r issued
 * (g, seq) itself later with the peer's arguments, that call: NCCL matched
 * it with the peers' (g, seq) of an earlier step. Where each side's (g, seq)
 * stands among its calls on other communicators shows the shift. */
static void skipped_context(ta_an *a, ta_finding *f, int r, int64_t rc, int g, uint32_t seq, int peer, int64_t pc)
{
    const ta_trace *rt = a->tr[r], *pt = a->tr[peer];
    f->gap_before = coll_before(rt, rc, -1);
    int64_t mine = ta_call_at(a, r, g, seq);
    if (mine < 0 || mine <= rc || !ta_sig_equal(&rt->calls[mine], &pt->calls[pc])) return;
    int fam = rt->comms[rt->calls[mine].comm].family;
    f->mis_call = mine;
    f->mis_prev = coll_before(rt, mine, fam);
    f->mis_peer_prev = coll_before(pt, pc, pt->comms[pt->calls[pc].comm].family);
}

/* Moves a finding with culprit trace r to its earliest divergence, if any. */
int ta_move_earlier(ta_an *a, ta_finding *f, int r, const int *peers, int npeers, int g_stop)
{
    refine_t rf = refine(a, r, peers, npeers);
    if (!rf.found) return 0;
    int64_t rc = rf.rc, pc = rf.pc;
    ta_trace *rt = a->tr[r], *pt = a->tr[rf.peer];
    const ta_call *rcall = &rt->calls[rc], *pcall = &pt->calls[pc];
    int rfam = rt->comms[rcall->comm].family, pfam = pt->comms[pcall->comm].family;
    int rg = rt->comms[rcall->comm].g;
    int stop_fam = -1;
    int lc = g_stop >= 0 ? ta_comm_local(rt, g_stop) : -1;
    if (lc >= 0) stop_fam = rt->comms[lc].family;
    /* the peer's call, on r's communicator of the same family */
    int pg = pt->comms[pcall->comm].g;
    if (ta_comm_local(rt, pg) < 0)
        for (int i = 0; i < rt->ncomms; i++)
            if (rt->comms[i].family == pfam) pg = rt->comms[i].g;
    int g;
    uint32_t seq;
    int sk;
    if (rf.shift == 1) {
        g = rg; seq = rcall->seq;
        sk = SK_EXTRA_CALL;
    } else if (rf.shift == 2) {
        g = pg; seq = pcall->seq;
        sk = SK_SKIPPED_CALL;
    } else if (rfam != pfam && ta_call_at(a, r, pg, pcall->seq) < 0 && ta_comm_local(rt, pg) >= 0) {
        /* r went on to another communicator and never issued the peers'
         * call (a loop left one iteration early): a skipped call */
        g = pg; seq = pcall->seq;
        sk = SK_SKIPPED_CALL;
    } else if (rfam != pfam) {
        /* another communicator at this point: report the call r put off */
        if (rfam == stop_fam && pfam != stop_fam) { g = rg; seq = rcall->seq; }
        else { g = pg; seq = pcall->seq; }
        sk = SK_ORDER;
    } else {
        g = rg; seq = rcall->seq;
        sk = SK_DIFFERENT_CALL;
    }
    /* a communicator not in the job's table (a rank's claim of a place refused at alignment): no move */
    if (g < 0 || g >= a->ngc) return 0;
    f->subkind = sk;
    if (f->stop_g < 0) { f->stop_g = f->g; f->stop_seq = f->seq; }
    f->kind = K_DIVERGENCE;
    f->g = g;
    f->seq = seq;
    if (f->stop_g == g && f->stop_seq == (int64_t)seq) f->stop_g = -1, f->stop_seq = -1;
    int *cul = xmalloc(sizeof(int) * (size_t)(f->culprit.nranks + 1));
    int *cult = xmalloc(sizeof(int) * (size_t)(f->culprit.nranks + 1));
    int nc = 0;
    for (int k = 0; k < f->culprit.nranks; k++) {
        cul[nc] = f->culprit.ranks[k];
        cult[nc] = -1;
        for (int t = 0; t < a->ntr; t++) if (a->tr[t]->rank == cul[nc]) cult[nc] = t;
        nc++;
    }
    /* the others' call: a member of g's when the peer compared is not one
     * (a rank of another group of the same family) */
    int rep = rf.peer;
    int64_t repc = pc;
    if (ta_comm_local(pt, g) < 0) {
        const ta_gcomm *n = &a->gc[g];
        for (int p = 0; p < n->npos; p++) {
            int m = n->member[p];
            int64_t mc = m >= 0 && !ihas(cult, nc, m) ? ta_call_at(a, m, g, seq) : -1;
            if (mc >= 0) { rep = m; repc = mc; break; }
        }
    }
    ta_side_set(&f->culprit, cul, nc, r, rc);
    ta_others_of(a, f, g, cult, nc, rep, repc);
    f->t = ta_wall(rt, rcall->enter_ns);
    f->gap_before = f->mis_call = f->mis_prev = f->mis_peer_prev = -1;
    if (f->subkind == SK_SKIPPED_CALL) skipped_context(a, f, r, rc, g, seq, rep, repc);
    free(cul); free(cult);
    return 1;
}

int ta_diverges(ta_an *a, int r, const int *peers, int npeers)
{
    return refine(a, r, peers, npeers).found;
}

int ta_divergence_evidence(ta_an *a, int r, const int *peers, int npeers, int *compared, double *t)
{
    refine_t rf = refine_peers(a, r, peers, npeers, 1);
    *compared = rf.compared;
    *t = rf.found ? ta_wall(a->tr[r], a->tr[r]->calls[rf.rc].enter_ns) : 0;
    return rf.found ? rf.support : 0;
}

void ta_diverge_done(ta_an *a)
{
    if (a->coll_idx)
        for (int t = 0; t < a->ntr; t++) free(a->coll_idx[t]);
    free(a->coll_idx); free(a->coll_n);
    a->coll_idx = NULL;
    a->coll_n = NULL;
}
