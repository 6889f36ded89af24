/* NaN/Inf: the first (communicator, seq) at which a checked buffer held a
 * NaN or an infinity, and where it came from.
 *
 * The shim checks, per rank, the input of every floating-point AllReduce,
 * ReduceScatter and Reduce before the collective and its output after it
 * (trace "checks"). A collective (comm, seq) is non-finite when any of its
 * members' checked buffers is. Once a NaN is in an all-reduce it is on every
 * member, and from there in everything they compute and reduce later: the
 * later non-finite collectives are consequences, and only the first one says
 * where the NaN was born.
 *
 * "First" is causal, not by clock: a collective is a point every member
 * passes, so (c1, s1) comes before (c2, s2) when some rank issued (c1, s1)
 * before (c2, s2), or through a chain of such steps (a send before its
 * receive counts as a step too). Among non-finite collectives that none
 * precedes (usually one), the first by wall-clock time of the first member
 * to enter it is reported; the others are independent first points, named
 * in the finding.
 *
 * Cause at that point: a member whose input was already non-finite brought
 * the NaN in (input; those ranks are the source: nothing non-finite came out
 * of a collective on them before). With every input checked and finite over
 * the element that went non-finite, the reduction made it (overflow: a sum
 * past the datatype's largest value). Any input not checked, pending, or
 * checked only in part where the output went bad makes overflow unproven:
 * cause unknown, the ranks whose input is unknown named, with the reason. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "nan_int.h"
#include "site/ta_site.h"

/* a call the shim checks: a floating-point reduction, numbered */
static int checkable(const ta_trace *t, const ta_call *c)
{
    return (c->op == OP_ALLREDUCE || c->op == OP_REDUCESCATTER || c->op == OP_REDUCE) && ta_dtype_is_float(c->dtype) &&
           c->seq > 0 && c->comm >= 0 && t->comms[c->comm].g >= 0;
}
static int has_output(const ta_trace *t, const ta_call *c)
{
    return c->op != OP_REDUCE || t->comms[c->comm].rank == c->rp;
}
static int known(const ta_trace *t, int64_t k)
{
    return k >= 0 && (t->checks[k].status == CK_CLEAN || t->checks[k].status == CK_NONFINITE);
}

/* ---- causal order ----------------------------------------------------------
 * reach[g]: the least seq of communicator g that comes after the start
 * point (every later seq of g does too); pos[t]: the first call of trace t
 * that comes after it (every later call of t does too). A worklist lowers
 * them until nothing changes; each trace's calls are scanned once. */
typedef struct {
    uint32_t *reach;
    int64_t *pos, *scanned;
    int *tq, ntq; uint8_t *tin;
    int *gq, ngq; uint8_t *gin;
} reachw;

static void lower_pos(reachw *w, int t, int64_t i)
{
    if (i >= w->pos[t]) return;
    w->pos[t] = i;
    if (!w->tin[t]) { w->tin[t] = 1; w->tq[w->ntq++] = t; }
}
static void lower_reach(reachw *w, int g, uint32_t s)
{
    if (s >= w->reach[g]) return;
    w->reach[g] = s;
    if (!w->gin[g]) { w->gin[g] = 1; w->gq[w->ngq++] = g; }
}

/* reach[] (ngc entries) of the point (g0, s0) */
static void reach_from(ta_an *a, int g0, uint32_t s0, uint32_t *reach)
{
    reachw w;
    w.reach = reach;
    w.pos = xmalloc(sizeof(int64_t) * (size_t)(a->ntr + 1));
    w.scanned = xmalloc(sizeof(int64_t) * (size_t)(a->ntr + 1));
    w.tq = xmalloc(sizeof(int) * (size_t)(a->ntr + 1));
    w.tin = xcalloc((size_t)a->ntr + 1, 1);
    w.gq = xmalloc(sizeof(int) * (size_t)(a->ngc + 1));
    w.gin = xcalloc((size_t)a->ngc + 1, 1);
    w.ntq = w.ngq = 0;
    for (int g = 0; g < a->ngc; g++) reach[g] = UINT32_MAX;
    for (int t = 0; t < a->ntr; t++) { w.pos[t] = INT64_MAX; w.scanned[t] = a->tr[t]->ncalls; }
    lower_reach(&w, g0, s0);
    while (w.ngq || w.ntq) {
        while (w.ngq) {
            int g = w.gq[--w.ngq];
            w.gin[g] = 0;
            const ta_gcomm *n = &a->gc[g];
            uint32_t i0 = ta_gseq_lower(n, w.reach[g]);
            for (int p = 0; p < n->npos; p++) {
                int m = n->member[p];
                if (m < 0) continue;
                const ta_comm *k = &a->tr[m]->comms[n->local[p]];
                /* m's first collective of g from reach on */
                for (uint32_t i = i0; i < n->nseqs && ta_gseq_at(n, i) <= k->nseq; i++) {
                    int64_t ci = ta_comm_call(k, ta_gseq_at(n, i));
                    if (ci >= 0) { lower_pos(&w, m, ci); break; }
                }
            }
        }
        while (w.ntq) {
            int t = w.tq[--w.ntq];
            w.tin[t] = 0;
            const ta_trace *tr = a->tr[t];
            for (int64_t i = w.pos[t]; i < w.scanned[t]; i++) {
                const ta_call *c = &tr->calls[i];
                if (c->seq == 0 || c->comm < 0) continue;
                int g = tr->comms[c->comm].g;
                if (g < 0) continue;
                if (ta_op_is_coll(c->op)) {
                    lower_reach(&w, g, c->seq);
                } else if (c->op == OP_SEND && c->rp >= 0 && c->rp < a->gc[g].npos) {
                    int m = a->gc[g].member[c->rp];
                    if (m < 0) continue;
                    int64_t rc = ta_p2p_find(a, m, a->gc[g].local[c->rp], tr->comms[c->comm].rank, 0, c->seq);
                    if (rc >= 0) lower_pos(&w, m, rc);
                }
            }
            if (w.pos[t] < w.scanned[t]) w.scanned[t] = w.pos[t];
        }
    }
    free(w.pos); free(w.scanned); free(w.tq); free(w.tin); free(w.gq); free(w.gin);
}

/* ---- the finding ---------------------------------------------------------- */
typedef struct { int g; uint32_t seq; double t; uint32_t *reach; } cand_t;

static int cmp_cand(const void *x, const void *y)
{
    const cand_t *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->g != b->g) return a->g < b->g ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

#define MAX_CAND 16

void ta_detect_nan(ta_an *a, int look)
{
    if (look != TA_LOOK_FINDINGS) return;   /* after the divergences: they do not defer to it */
    /* which ranks have checks */
    int nwith = 0, nusable = 0;
    int *off = xmalloc(sizeof(int) * (size_t)(a->ntr + 1)), noff = 0;
    int *absent = xmalloc(sizeof(int) * (size_t)(a->ntr + 1)), nabsent = 0;
    int *ringonly = xmalloc(sizeof(int) * (size_t)(a->ntr + 1)), nringonly = 0;
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        /* a trace read from a ring file alone (killed before any JSON write) has no checks */
        if (tr->nan_mode == NM_ABSENT && tr->from_ring) { ringonly[nringonly++] = tr->rank; continue; }
        if (tr->nan_mode == NM_ABSENT) { absent[nabsent++] = tr->rank; continue; }
        nwith++;
        if (tr->nan_mode == NM_OFF) off[noff++] = tr->rank;
        nusable += tr->nan_usable;
    }
    if (!nwith) goto out;      /* traces without NaN checks (an older trshim) */
    if (!nusable) {
        if (noff == nwith)
            ta_note_add(a, NULL, 0, "NaN/Inf checks were off (TRSHIM_NANCHECK=off): no NaN/Inf analysis");
        else
            ta_note_add(a, NULL, 0, "no NaN/Inf checks could be read: no NaN/Inf analysis");
        goto out;
    }
    if (noff) {
        char *r = ta_ranks_text(off, noff);
        ta_note_add(a, NULL, 0, "NaN/Inf checks were off (TRSHIM_NANCHECK=off) on rank%s %s: their buffers are unknown",
                    noff > 1 ? "s" : "", r);
        free(r);
    }
    if (nabsent) {
        char *r = ta_ranks_text(absent, nabsent);
        ta_note_add(a, NULL, 0, "the trace%s of rank%s %s %s no NaN/Inf checks (an older trshim?): their buffers are "
                    "unknown", nabsent > 1 ? "s" : "", nabsent > 1 ? "s" : "", r, nabsent > 1 ? "have" : "has");
        free(r);
    }
    if (nringonly) {
        char *r = ta_ranks_text(ringonly, nringonly);
        ta_note_add(a, NULL, 0, "rank%s %s left only a ring file (killed before any JSON write), which holds no NaN/Inf "
                    "checks: %s buffers are unknown", nringonly > 1 ? "s" : "", r, nringonly > 1 ? "their" : "its");
        free(r);
    }

    /* non-finite (comm, seq): bit 0 of mk[g][ta_gseq(seq)] */
    uint8_t **mk = xcalloc((size_t)a->ngc + 1, sizeof *mk);
    for (int g = 0; g < a->ngc; g++) mk[g] = xcalloc((size_t)a->gc[g].nseqs + 1, 1);
    int64_t nmarked = 0;
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        for (int64_t k = 0; k < tr->nchecks; k++) {
            const ta_ckc *ck = &tr->checks[k];
            if (ck->status != CK_NONFINITE) continue;
            const ta_call *c = &tr->calls[ck->call];
            if (!checkable(tr, c)) continue;
            int g = tr->comms[c->comm].g;
            int64_t si = ta_gseq(&a->gc[g], c->seq);
            if (si < 0) continue;
            if (!(mk[g][si] & 1)) nmarked++;
            mk[g][si] |= 1;
        }
    }
    if (!nmarked) {
        for (int g = 0; g < a->ngc; g++) free(mk[g]);
        free(mk);
        goto out;
    }

    /* candidates: each rank's first non-finite collective in its own order;
     * a first point (one nothing non-finite precedes) is one for each of its
     * members */
    cand_t *cand = xmalloc(sizeof *cand * (size_t)(a->ntr + 1));
    int ncand = 0;
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        for (int64_t i = 0; i < tr->ncalls; i++) {
            const ta_call *c = &tr->calls[i];
            if (!ta_op_is_coll(c->op) || c->seq == 0 || c->comm < 0) continue;
            int g = tr->comms[c->comm].g;
            int64_t si = g >= 0 ? ta_gseq(&a->gc[g], c->seq) : -1;
            if (si < 0 || !(mk[g][si] & 1)) continue;
            int dup = 0;
            for (int k = 0; k < ncand && !dup; k++) dup = cand[k].g == g && cand[k].seq == c->seq;
            if (!dup) cand[ncand++] = (cand_t){g, c->seq, 0, NULL};
            break;
        }
    }
    for (int k = 0; k < ncand; k++) {
        double best = 0;
        int have = 0;
        const ta_gcomm *n = &a->gc[cand[k].g];
        for (int p = 0; p < n->npos; p++) {
            if (n->member[p] < 0) continue;
            int64_t ci = ta_call_at(a, n->member[p], cand[k].g, cand[k].seq);
            if (ci < 0) continue;
            double w = ta_wall(a->tr[n->member[p]], a->tr[n->member[p]]->calls[ci].enter_ns);
            if (!have || w < best) { best = w; have = 1; }
        }
        cand[k].t = best;
    }
    if (ncand > 1) qsort(cand, (size_t)ncand, sizeof *cand, cmp_cand);
    int nc = ncand < MAX_CAND ? ncand : MAX_CAND;     /* ordered causally; the rest by time */
    for (int k = 0; k < nc; k++) {
        cand[k].reach = xmalloc(sizeof(uint32_t) * (size_t)(a->ngc + 1));
        reach_from(a, cand[k].g, cand[k].seq, cand[k].reach);
    }
    /* minimal: no other candidate comes before it */
    int *minimal = xcalloc((size_t)ncand + 1, sizeof(int));
    for (int k = 0; k < ncand; k++) {
        int before = 0;
        for (int j = 0; j < nc && !before; j++)
            if (j != k && cand[j].reach[cand[k].g] <= cand[k].seq) before = 1;
        minimal[k] = !before;
    }
    int first = -1;
    for (int k = 0; k < nc && first < 0; k++) if (minimal[k]) first = k;
    if (first < 0) first = 0;        /* a cycle (the ranks' orders disagree): the earliest by time */
    if (!cand[first].reach) {
        cand[first].reach = xmalloc(sizeof(uint32_t) * (size_t)(a->ngc + 1));
        reach_from(a, cand[first].g, cand[first].seq, cand[first].reach);
    }
    const uint32_t *rf = cand[first].reach;

    ta_finding *f = ta_finding_new(a, K_NAN);
    ta_nanfinding *nf = xcalloc(1, sizeof *nf);
    f->data = nf;
    ta_nan_event(a, cand[first].g, cand[first].seq, &nf->ev);
    ta_nanev *ev = &nf->ev;
    f->root_ranks = ev->cause == NC_INPUT;   /* the root cause: the ranks it was born on */
    f->g = ev->g;
    f->seq = ev->seq;
    f->t = ev->t;
    f->subkind = ta_nan_cause_subkinds[ev->cause];
    /* the sides: culprits and the others of the communicator */
    int ct = -1, ot = -1;
    int64_t cc = -1, oc = -1;
    int *oth = xmalloc(sizeof(int) * (size_t)(ev->nmem + 1)), no = 0;
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        if (m->trace < 0) continue;
        int in = 0;
        for (int k = 0; k < ev->nranks; k++) in |= ev->ranks[k] == m->rank;
        if (in) { if (ct < 0 && m->call >= 0) { ct = m->trace; cc = m->call; } }
        else {
            oth[no++] = m->rank;
            if (ot < 0 && m->call >= 0) { ot = m->trace; oc = m->call; }
        }
    }
    ta_side_set(&f->culprit, ev->ranks, ev->nranks, ct, cc);
    ta_side_set(&f->other, oth, no, ot, oc);
    free(oth);
    if (ct >= 0) f->culprit.stack = a->tr[ct]->calls[cc].stack, f->culprit.pystack = a->tr[ct]->calls[cc].pystack;
    if (ot >= 0) f->other.stack = a->tr[ot]->calls[oc].stack, f->other.pystack = a->tr[ot]->calls[oc].pystack;
    f->message = ta_nan_describe(a, ev, &f->hint);

    /* later non-finite collectives: causally after the first */
    for (int g = 0; g < a->ngc; g++) {
        if (rf[g] == UINT32_MAX) continue;
        int64_t cnt = 0;
        uint32_t from = 0;
        const ta_gcomm *n = &a->gc[g];
        for (uint32_t i = ta_gseq_lower(n, rf[g]); i < n->nseqs; i++) {
            uint32_t s = ta_gseq_at(n, i);
            if (!(mk[g][i] & 1) || (g == ev->g && s == ev->seq)) continue;
            if (!cnt) from = s;
            cnt++;
        }
        if (!cnt) continue;
        nf->later = xrealloc(nf->later, sizeof *nf->later * (size_t)(nf->nlater + 1));
        nf->later[nf->nlater++] = (ta_nanlater){g, from, cnt};
        nf->later_count += cnt;
    }
    /* independent first points: not after the first, nor after another
     * candidate (beyond MAX_CAND: not after any of the first MAX_CAND) */
    for (int k = 0; k < ncand; k++) {
        if (k == first || rf[cand[k].g] <= cand[k].seq) continue;
        if (!minimal[k]) continue;
        nf->indep = xrealloc(nf->indep, sizeof *nf->indep * (size_t)(nf->nindep + 1));
        ta_nan_event(a, cand[k].g, cand[k].seq, &nf->indep[nf->nindep++]);
    }
    /* earlier reductions of the first point's members that were not seen */
    for (int g = 0; g < a->ngc; g++) memset(mk[g], 0, (size_t)a->gc[g].nseqs + 1);
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        if (m->trace < 0 || m->call < 0) continue;
        const ta_trace *t = a->tr[m->trace];
        if (!t->nan_usable) continue;
        int64_t j = 0;
        for (int64_t i = 0; i < m->call; i++) {
            const ta_call *c = &t->calls[i];
            while (j < t->nchecks && t->checks[j].call < i) j++;
            if (!checkable(t, c)) continue;
            int64_t in = -1, out = -1;
            for (int64_t q = j; q < t->nchecks && t->checks[q].call == i; q++)
                if (t->checks[q].buffer == BUF_INPUT) in = q;
                else out = q;
            int unseen = (t->nan_mode != NM_OUTPUT && !known(t, in)) || (has_output(t, c) && !known(t, out));
            if (!unseen) continue;
            int g = t->comms[c->comm].g;
            int64_t si = ta_gseq(&a->gc[g], c->seq);
            if (si >= 0 && !(mk[g][si] & 2)) { mk[g][si] |= 2; nf->unchecked_before++; }
        }
    }
    if (nf->later_count || nf->nindep || nf->unchecked_before) {
        char *extra = NULL;
        if (nf->later_count) {
            char *l = NULL;
            for (int k = 0; k < nf->nlater && k < 4; k++)
                l = ta_nan_join(l, ", ", xasprintf("comm %s from #%u: %lld", ta_comm_name(a, nf->later[k].g),
                                            nf->later[k].from_seq, (long long)nf->later[k].count));
            extra = xasprintf("%lld later non-finite collective%s from it (%s%s)", (long long)nf->later_count,
                              nf->later_count > 1 ? "s follow" : " follows", l, nf->nlater > 4 ? ", ..." : "");
            free(l);
        }
        for (int k = 0; k < nf->nindep && k < 4; k++) {
            const ta_nanev *e = &nf->indep[k];
            char *rs = ta_ranks_text(e->ranks, e->nranks);
            extra = ta_nan_join(extra, "; ",
                         xasprintf("independently of it, %s #%u on comm %s turned non-finite too (cause %s, rank%s %s)",
                                   ta_op_names[e->op], e->seq, ta_comm_name(a, e->g), ta_subkind_names[ta_nan_cause_subkinds[e->cause]],
                                   e->nranks > 1 ? "s" : "", rs));
            free(rs);
        }
        if (nf->unchecked_before)
            extra = ta_nan_join(extra, "; ",
                         xasprintf("%lld earlier reduction%s of these ranks %s not checked: the NaN may be older",
                                   (long long)nf->unchecked_before, nf->unchecked_before > 1 ? "s" : "",
                                   nf->unchecked_before > 1 ? "were" : "was"));
        char *m = xasprintf("%s. %c%s", f->message, extra[0] >= 'a' && extra[0] <= 'z' ? extra[0] - 32 : extra[0],
                            extra + 1);
        free(f->message); free(extra);
        f->message = m;
    }

    for (int g = 0; g < a->ngc; g++) free(mk[g]);
    free(mk);
    for (int k = 0; k < ncand; k++) free(cand[k].reach);
    free(cand); free(minimal);
out:
    free(off); free(absent); free(ringonly);
}

static void nanev_free(ta_nanev *ev)
{
    free(ev->reason);
    free(ev->ranks);
    free(ev->unchecked);
    free(ev->unknown_text);
    free(ev->mem);
}

void ta_drop_nan(void *data)
{
    ta_nanfinding *nf = data;
    nanev_free(&nf->ev);
    free(nf->later);
    for (int i = 0; i < nf->nindep; i++) nanev_free(&nf->indep[i]);
    free(nf->indep);
    free(nf);
}
