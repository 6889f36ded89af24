/* Root cause: who waits for whom, across communicators.
 *
 * The completion simulation (align.c) leaves, per rank, the operations that
 * never completed. Each one at the head of its stream is a "stuck point":
 * a collective (comm, seq) waits for the members that never issued seq or
 * are blocked on something earlier; a send/recv waits for its peer; an init
 * waits for the ranks that never entered it. Ranks that wait for nobody
 * (exited, killed while idle, never got there) are the roots. A stuck point
 * that waits for a root, or whose members disagree (divergence), is a root
 * finding; every other stuck point is listed as a consequence of the root
 * finding it leads to. A cycle of waits with no root (order inversion,
 * pipeline whose stages disagree) is broken at its send/recv (or signal
 * waited for) that was never issued, else at its earliest collective. A
 * WaitSignal that never completes waits for the rank that was to send its
 * signal (SP_SIG, a `signal` finding).
 *
 * A root finding then moves to the earliest point of divergence of its
 * culprit (diverge.c); where the job stopped is kept as stop_comm/stop_seq.
 * What its message says of each side (the culprits' end, the members that
 * issued a missing collective, those behind): hang_sides.c. */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_finding.h"
#include "ta_hang.h"

enum { SP_COLL, SP_P2P, SP_INIT, SP_SIG };   /* SP_SIG: a WaitSignal (snd: the sender's place, rcv: the waiter's) */
enum { SP_OPEN = -1, SP_LEFT_OUT = -2 };   /* spoint.finding, else an index into a->f */

typedef struct {
    int type, g;
    uint32_t seq;
    int snd, rcv;             /* p2p: positions */
    int *wt; int nwt;         /* waiting traces */
    int *wf; int nwf;         /* waited-for traces */
    int *never; int nnever;   /* among wf: never issued it */
    int mismatch, root, finding;
    double t;
    int rep_t; int64_t rep_c;
} spoint;

typedef struct { spoint *v; int n; } points;   /* the stuck points of one analysis */

static void iadd(int **v, int *n, int x)
{
    for (int i = 0; i < *n; i++) if ((*v)[i] == x) return;
    *v = xrealloc(*v, sizeof(int) * (size_t)(*n + 1));
    (*v)[(*n)++] = x;
}
static int ihas(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++) if (v[i] == x) return 1;
    return 0;
}

static int find_point(points *ps, int type, int g, uint32_t seq, int snd, int rcv)
{
    for (int i = ps->n - 1; i >= 0; i--)
        if (ps->v[i].type == type && ps->v[i].g == g && ps->v[i].seq == seq && ps->v[i].snd == snd && ps->v[i].rcv == rcv) return i;
    ps->v = xrealloc(ps->v, sizeof *ps->v * (size_t)(ps->n + 1));
    memset(&ps->v[ps->n], 0, sizeof *ps->v);
    ps->v[ps->n] = (spoint){.type = type, .g = g, .seq = seq, .snd = snd, .rcv = rcv, .finding = SP_OPEN, .rep_t = -1, .rep_c = -1};
    return ps->n++;
}

/* the site of call ci is used by trace t anywhere? */
static int site_used(ta_an *a, int t0, int64_t ci, int t)
{
    const ta_trace *x = a->tr[t0], *y = a->tr[t];
    int s = x->calls[ci].stack, p = x->calls[ci].pystack;
    if (s < 0 && !ta_py_valid(x, p)) return 1;
    int last = -2, lastp = -2;
    for (int64_t i = 0; i < y->ncalls; i++) {
        int ys = y->calls[i].stack, yp = y->calls[i].pystack;
        if ((ys == last && yp == lastp) || (ys < 0 && !ta_py_valid(y, yp))) continue;
        last = ys;
        lastp = yp;
        if (ta_site_equal(a, x, s, p, y, ys, yp)) return 1;
    }
    return 0;
}

static void ranks_of(ta_an *a, const int *tv, int n, int **out)
{
    *out = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) (*out)[i] = a->tr[tv[i]]->rank;
}

static int sinkish(const int *stuck, int t) { return !stuck[t]; }

/* trace t has g suspended (ncclCommSuspend, not resumed) and was still running at its last write */
static int suspended_alive(const ta_an *a, int t, int g)
{
    const ta_trace *x = a->tr[t];
    return ta_comm_suspended(x, ta_comm_local(x, g)) && (x->end_state == END_SNAPSHOT || x->end_state == END_HANG);
}

/* "; the communicator is suspended on them ..." when every trace of cul has g suspended, else NULL */
static char *suspended_text(const ta_an *a, const int *cul, int n, int g)
{
    int all = n > 0;
    for (int k = 0; k < n && all; k++) all = ta_comm_suspended(a->tr[cul[k]], ta_comm_local(a->tr[cul[k]], g));
    if (!all) return NULL;
    return xasprintf("; the communicator is suspended on %s (ncclCommSuspend without a resume since): %s never resumed it",
                     n > 1 ? "them" : "it", n > 1 ? "they" : "it");
}


/* A stuck send/recv that waits for a consequence's culprit, but is the same
 * failure as root finding f on another pair (a pipeline stage of several
 * ranks whose every rank skipped the same send: each of its peers waits in
 * the same receive, from the same line): its culprit and waiting rank join
 * f's sides instead of making a consequence. 1 when joined. */
static int parallel_p2p(ta_an *a, ta_finding *f, const spoint *sp)
{
    if (f->kind != K_P2P || !f->root || sp->type != SP_P2P || sp->mismatch || !sp->nnever || sp->g != f->g ||
        (int64_t)sp->seq != f->seq || f->other.trace < 0 || f->other.call < 0 || sp->rep_t < 0 || sp->rep_c < 0)
        return 0;
    const ta_gcomm *n = &a->gc[sp->g];
    int st = n->member[sp->snd], rt = n->member[sp->rcv];
    int waiting_is_recv = ihas(sp->wt, sp->nwt, rt);
    if (f->subkind != (waiting_is_recv ? SK_RECV_WITHOUT_SEND : SK_SEND_WITHOUT_RECV)) return 0;
    int cu = waiting_is_recv ? st : rt, ot = waiting_is_recv ? rt : st;
    if (ot != sp->rep_t) return 0;
    const ta_trace *x = a->tr[ot], *y = a->tr[f->other.trace];
    const ta_call *c = &x->calls[sp->rep_c], *d = &y->calls[f->other.call];
    if (!ta_sig_equal(c, d) || !ta_site_equal(a, x, c->stack, c->pystack, y, d->stack, d->pystack)) return 0;
    int rc = a->tr[cu]->rank, ro = x->rank;
    if (ihas(f->culprit.ranks, f->culprit.nranks, rc) || ihas(f->other.ranks, f->other.nranks, ro)) return 0;
    int nc = f->culprit.nranks, no = f->other.nranks;
    int *cr = xmalloc(sizeof(int) * (size_t)(nc + 1)), *orr = xmalloc(sizeof(int) * (size_t)(no + 1));
    memcpy(cr, f->culprit.ranks, sizeof(int) * (size_t)nc);
    memcpy(orr, f->other.ranks, sizeof(int) * (size_t)no);
    cr[nc++] = rc;
    orr[no++] = ro;
    ta_side_set(&f->culprit, cr, nc, f->culprit.trace, f->culprit.call);
    ta_side_set(&f->other, orr, no, f->other.trace, f->other.call);
    int *cul_t = xmalloc(sizeof(int) * (size_t)(nc + 1)), ncul = 0;
    for (int k = 0; k < f->culprit.nranks; k++)
        for (int t = 0; t < a->ntr; t++)
            if (a->tr[t]->rank == f->culprit.ranks[k]) cul_t[ncul++] = t;
    ta_finding_describe(a, f);
    ta_hang_end_info(a, f, cul_t, ncul);
    free(cr); free(orr); free(cul_t);
    return 1;
}

/* majority rule with the documented tie rule; returns culprit traces */
static int partition_mismatch(ta_an *a, spoint *sp, int *cul, int *rep_ref_t, int64_t *rep_ref_c)
{
    const ta_gcomm *n = &a->gc[sp->g];
    int np = n->npos;
    int *grp = xmalloc(sizeof(int) * (size_t)np), ng = 0, *cnt = xcalloc((size_t)np, sizeof(int));
    int *rt = xmalloc(sizeof(int) * (size_t)np);
    int64_t *rc = xmalloc(sizeof(int64_t) * (size_t)np);
    int *lowest = xmalloc(sizeof(int) * (size_t)np);
    for (int p = 0; p < np; p++) {
        grp[p] = -1;
        if (n->member[p] < 0) continue;
        int64_t ci = ta_call_at(a, n->member[p], sp->g, sp->seq);
        if (ci < 0) continue;
        int j;
        for (j = 0; j < ng; j++)
            if (ta_sig_equal(&a->tr[rt[j]]->calls[rc[j]], &a->tr[n->member[p]]->calls[ci])) break;
        if (j == ng) { rt[ng] = n->member[p]; rc[ng] = ci; lowest[ng] = a->tr[n->member[p]]->rank; ng++; }
        if (a->tr[n->member[p]]->rank < lowest[j]) lowest[j] = a->tr[n->member[p]]->rank;
        grp[p] = j;
        cnt[j]++;
    }
    /* reference: the largest group; tie: a group whose call site the other
     * tied groups also use is preferred as reference over one whose site is
     * foreign to them; then the group without the lowest rank */
    int ref = 0;
    for (int j = 1; j < ng; j++) {
        if (cnt[j] > cnt[ref]) { ref = j; continue; }
        if (cnt[j] < cnt[ref]) continue;
        int jf = !site_used(a, rt[j], rc[j], rt[ref]);     /* j's site foreign to ref's rank */
        int rf = !site_used(a, rt[ref], rc[ref], rt[j]);
        if (rf && !jf) { ref = j; continue; }
        if (jf && !rf) continue;
        if (lowest[ref] < lowest[j]) ref = j;
    }
    int nc = 0;
    for (int p = 0; p < np; p++)
        if (grp[p] >= 0 && grp[p] != ref) cul[nc++] = n->member[p];
    *rep_ref_t = rt[ref];
    *rep_ref_c = rc[ref];
    free(grp); free(cnt); free(rt); free(rc); free(lowest);
    return nc;
}

static ta_finding *root_finding(ta_an *a, spoint *sp, const int *stuck)
{
    ta_finding *f = NULL;
    int *cr;
    if (sp->type == SP_COLL && sp->mismatch) {
        int *cul = xmalloc(sizeof(int) * (size_t)(a->gc[sp->g].npos + 1));
        int rt; int64_t rc;
        int nc = partition_mismatch(a, sp, cul, &rt, &rc);
        f = ta_finding_new(a, K_DIVERGENCE);
        f->subkind = SK_DIFFERENT_CALL;
        f->g = sp->g;
        f->seq = sp->seq;
        ranks_of(a, cul, nc, &cr);
        ta_side_set(&f->culprit, cr, nc, cul[0], ta_call_at(a, cul[0], sp->g, sp->seq));
        free(cr);
        ta_others_of(a, f, sp->g, cul, nc, rt, rc);
        f->t = sp->t;
        /* the earliest divergence of the first culprit against the others */
        int *peers = xmalloc(sizeof(int) * (size_t)(a->gc[sp->g].npos + 1)), npe = 0;
        for (int p = 0; p < a->gc[sp->g].npos; p++) {
            int m = a->gc[sp->g].member[p];
            if (m >= 0 && !ihas(cul, nc, m)) peers[npe++] = m;
        }
        int sg = f->g; int64_t ss = f->seq;
        ta_move_earlier(a, f, cul[0], peers, npe, sp->g);
        if (f->g == sg && f->seq == ss) f->stop_g = -1, f->stop_seq = -1;
        ta_finding_describe(a, f);
        free(peers); free(cul);
    } else if (sp->type == SP_COLL) {
        int *N = xmalloc(sizeof(int) * (size_t)(sp->nwf + 1)), nn = 0;
        for (int k = 0; k < sp->nwf; k++)
            if (sinkish(stuck, sp->wf[k]) || sp->root == 2) N[nn++] = sp->wf[k];
        if (!nn) { for (int k = 0; k < sp->nwf; k++) N[nn++] = sp->wf[k]; }
        /* one-sided: the waiting ranks' call comes from a line the others never use (unless the
         * others have the communicator suspended: then that is why) */
        char *susp = suspended_text(a, N, nn, sp->g);
        int foreign = sp->nwt <= nn && !susp;
        free(susp);
        for (int k = 0; k < sp->nwt && k < 8 && foreign; k++) {   /* representatives of each side */
            int64_t ci = ta_call_at(a, sp->wt[k], sp->g, sp->seq);
            for (int j = 0; j < nn && j < 8 && foreign; j++)
                if (ci < 0 || site_used(a, sp->wt[k], ci, N[j])) foreign = 0;
        }
        if (foreign) {
            f = ta_finding_new(a, K_DIVERGENCE);
            f->subkind = SK_ONE_SIDED;
            f->g = sp->g;
            f->seq = sp->seq;
            ranks_of(a, sp->wt, sp->nwt, &cr);
            ta_side_set(&f->culprit, cr, sp->nwt, sp->rep_t, sp->rep_c);
            free(cr);
            ranks_of(a, N, nn, &cr);
            int lastt = N[0];
            int64_t lc = -1;
            ta_last_call(a->tr[lastt], &lc);
            ta_side_set(&f->other, cr, nn, -1, -1);
            free(cr);
            f->t = sp->t;
            ta_finding_describe(a, f);
            ta_hang_end_info(a, f, N, nn);
        } else {
            f = ta_finding_new(a, K_MISSING);
            f->g = sp->g;
            f->seq = sp->seq;
            ranks_of(a, N, nn, &cr);
            int64_t last = -1;
            ta_last_call(a->tr[N[0]], &last);
            ta_side_set(&f->culprit, cr, nn, N[0], last);
            free(cr);
            ta_others_of(a, f, sp->g, N, nn, sp->rep_t, sp->rep_c);
            f->t = sp->t;
            /* the earliest divergence: first of the smaller side against
             * the other (an extra call on a few ranks), then of the ranks
             * that never issued the collective against those waiting in it */
            if (sp->nwt < nn) {
                if (ta_diverges(a, sp->wt[0], N, nn)) {
                    ranks_of(a, sp->wt, sp->nwt, &cr);
                    ta_side_set(&f->culprit, cr, sp->nwt, sp->wt[0], -1);
                    free(cr);
                    ta_move_earlier(a, f, sp->wt[0], N, nn, sp->g);
                }
            }
            if (f->kind == K_MISSING) ta_move_earlier(a, f, N[0], sp->wt, sp->nwt, sp->g);
            /* the others: the members that issued it (hang_sides.c), never one that did not */
            if (f->kind == K_MISSING) ta_hang_missing_others(a, f, sp->rep_t, sp->rep_c);
            ta_finding_describe(a, f);
            char *behind = f->kind == K_MISSING ? ta_hang_behind_text(a, f) : NULL;
            if (behind) {
                char *m = xasprintf("%s%s", f->message, behind);
                free(f->message);
                f->message = m;
                free(behind);
            }
            char *su = f->kind == K_MISSING ? suspended_text(a, N, nn, sp->g) : NULL;
            if (su) {
                f->subkind = SK_SUSPENDED;
                char *m = xasprintf("%s%s", f->message, su);
                free(f->message);
                f->message = m;
                free(su);
            }
            if (f->kind == K_MISSING) ta_hang_end_info(a, f, N, nn);
        }
        free(N);
    } else if (sp->type == SP_SIG) {
        /* a WaitSignal whose signal never came: the sender is the culprit */
        f = ta_finding_new(a, K_SIGNAL);
        f->g = sp->g;
        f->seq = sp->seq;
        const ta_gcomm *n = &a->gc[sp->g];
        int st = n->member[sp->snd], wt = sp->rep_t;
        int r1 = a->tr[st]->rank, r2 = a->tr[wt]->rank;
        uint32_t last_seq = 0;
        int64_t last = ta_sig_last(a, st, n->local[sp->snd], sp->rcv, &last_seq);
        f->subkind = sp->nnever ? SK_NEVER_SENT : SK_NOT_RUN;
        f->sig_sent = last >= 0 ? (int64_t)last_seq : a->tr[st]->ring_lost > 0 ? -1 : 0;
        if (!sp->nnever)       /* it issued the signal, which is queued behind something of its own */
            last = ta_sig_find_from(a, st, n->local[sp->snd], sp->rcv, sp->seq, NULL);
        if (last < 0) ta_last_call(a->tr[st], &last);
        ta_side_set(&f->culprit, &r1, 1, st, last);
        ta_side_set(&f->other, &r2, 1, wt, sp->rep_c);
        f->t = sp->t;
        ta_finding_describe(a, f);
        ta_hang_end_info(a, f, &st, 1);
    } else if (sp->type == SP_P2P) {
        f = ta_finding_new(a, K_P2P);
        f->g = sp->g;
        f->seq = sp->seq;
        const ta_gcomm *n = &a->gc[sp->g];
        int st = n->member[sp->snd], rt = n->member[sp->rcv];
        if (sp->mismatch) {
            f->subkind = SK_SIZE_MISMATCH;
            int r1 = a->tr[st]->rank, r2 = a->tr[rt]->rank;
            ta_side_set(&f->culprit, &r1, 1, st, ta_p2p_find(a, st, n->local[sp->snd], sp->rcv, 1, sp->seq));
            ta_side_set(&f->other, &r2, 1, rt, ta_p2p_find(a, rt, n->local[sp->rcv], sp->snd, 0, sp->seq));
        } else {
            int waiting_is_recv = ihas(sp->wt, sp->nwt, rt);
            f->subkind = waiting_is_recv ? SK_RECV_WITHOUT_SEND : SK_SEND_WITHOUT_RECV;
            int cu = waiting_is_recv ? st : rt, ot = waiting_is_recv ? rt : st;
            int r1 = a->tr[cu]->rank, r2 = a->tr[ot]->rank;
            int64_t last = -1;
            ta_last_call(a->tr[cu], &last);
            ta_side_set(&f->culprit, &r1, 1, cu, last);
            ta_side_set(&f->other, &r2, 1, ot, sp->rep_c);
            ta_finding_describe(a, f);
            ta_hang_end_info(a, f, &cu, 1);
            f->t = sp->t;
            return f;
        }
        f->t = sp->t;
        ta_finding_describe(a, f);
    } else {
        f = ta_finding_new(a, K_INIT);
        f->g = sp->g;
        f->seq = 0;
        if (!sp->nwf && a->nmissing) {
            /* the ranks that never entered may be those that left no trace */
            ta_side_set(&f->culprit, a->missing_ranks, a->nmissing, -1, -1);
            ranks_of(a, sp->wt, sp->nwt, &cr);
            ta_side_set(&f->other, cr, sp->nwt, sp->wt[0], -1);
            free(cr);
            char *c = ta_ranks_text(f->culprit.ranks, f->culprit.nranks);
            char *o = ta_ranks_text(f->other.ranks, f->other.nranks);
            f->message = xasprintf("rank%s %s are inside the initialisation of communicator %s (%s) and never "
                                   "returned; rank%s %s left no trace and never entered it as far as the traces show",
                                   f->other.nranks > 1 ? "s" : "", o, ta_comm_name(a, sp->g), a->gc[sp->g].kind,
                                   f->culprit.nranks > 1 ? "s" : "", c);
            f->hint = xstrdup("ranks that never reach init are stuck before it (the unique-id exchange: wrong "
                              "MASTER_ADDR or port, firewall, wrong network interface NCCL_SOCKET_IFNAME) or "
                              "crashed before the shim wrote anything; look at their logs");
            free(c); free(o);
            f->t = sp->t;
            return f;
        }
        const int *cu = sp->nwf ? sp->wf : sp->wt;
        int ncu = sp->nwf ? sp->nwf : sp->nwt;
        ranks_of(a, cu, ncu, &cr);
        ta_side_set(&f->culprit, cr, ncu, cu[0], -1);
        free(cr);
        if (sp->nwf) {
            ranks_of(a, sp->wt, sp->nwt, &cr);
            ta_side_set(&f->other, cr, sp->nwt, sp->wt[0], -1);
            free(cr);
        } else {
            ta_side_set(&f->other, NULL, 0, -1, -1);
        }
        char *c = ta_ranks_text(f->culprit.ranks, f->culprit.nranks);
        char *o = ta_ranks_text(f->other.ranks, f->other.nranks);
        const ta_trace *w = a->tr[sp->wt[0]];
        int lc = ta_comm_local(w, sp->g);
        char *site = ta_site_text(a, w, lc >= 0 ? w->comms[lc].init_stack : -1, lc >= 0 ? w->comms[lc].init_pystack : -1);
        if (sp->nwf)
            f->message = xasprintf("rank%s %s never entered the initialisation of communicator %s (%s) that rank%s %s "
                                   "are inside, at %s",
                                   f->culprit.nranks > 1 ? "s" : "", c, ta_comm_name(a, sp->g), a->gc[sp->g].kind,
                                   f->other.nranks > 1 ? "s" : "", o, site);
        else
            f->message = xasprintf("rank%s %s never returned from the initialisation of communicator %s (%s) at %s; "
                                   "no other rank of the job is known to be missing from it",
                                   f->culprit.nranks > 1 ? "s" : "", c, ta_comm_name(a, sp->g), a->gc[sp->g].kind, site);
        f->culprit.stack = lc >= 0 ? w->comms[lc].init_stack : -1;
        f->culprit.pystack = lc >= 0 ? w->comms[lc].init_pystack : -1;
        f->hint = xstrdup("ranks that never reach init are stuck before it (the unique-id exchange: wrong MASTER_ADDR "
                          "or port, firewall, wrong network interface NCCL_SOCKET_IFNAME) or crashed; ranks that never "
                          "return wait for those, or were given a different unique id or number of ranks");
        free(c); free(o); free(site);
        if (sp->nwf) ta_hang_end_info(a, f, sp->wf, sp->nwf);
        f->t = sp->t;
    }
    return f;
}

/* A cycle of waits has no rank that waits for nobody: every rank in it
 * issued something its peers never reach. Where the walk enters the cycle
 * says nothing about who caused it (a rank that skipped a data-parallel
 * AllReduce mid-training waits in a later world AllReduce that its
 * data-parallel peers, waiting for it, never reach: both sides "never
 * issued" something). The evidence is each candidate's order of calls
 * against its peers' (diverge.c): the rank that skipped, or broke out of a
 * loop early, differs from most of its peers somewhere before the hang;
 * its victims match their peers up to where they wait.
 *
 * A candidate is a culprit when at least two peers were compared and most
 * of them agree on where it differs ("strong"): every strong candidate
 * becomes a culprit of the point it never issued (two ranks that skipped
 * on different communicators are two findings, the earlier divergence
 * first). Without a strong one, a candidate that alone has evidence is the
 * culprit. Returns 1 when points were made roots, 0 when the evidence
 * decides nothing (then the rule below breaks the cycle). */
#define CYCLE_CANDIDATES_MAX 64
typedef struct { int done, support, compared; double t; } evidence;   /* per trace, computed once */

static int cycle_roots(ta_an *a, points *ps, evidence *ev)
{
    int *near = xmalloc(sizeof(int) * (size_t)(a->ntr + 1));
    int *seen = xcalloc((size_t)a->ntr + 1, sizeof(int));
    struct cand { int k, c, strong; double t; } *cv = xmalloc(sizeof *cv * CYCLE_CANDIDATES_MAX);
    int nc = 0, nstrong = 0, top = -1, top_support = 0, top_tie = 0;
    for (int k = 0; k < ps->n && nc < CYCLE_CANDIDATES_MAX; k++) {
        const spoint *sp = &ps->v[k];
        if (sp->finding != SP_OPEN || sp->type != SP_COLL) continue;
        for (int j = 0; j < sp->nnever && nc < CYCLE_CANDIDATES_MAX; j++) {
            int c = sp->never[j];
            if (seen[c]) continue;
            seen[c] = 1;
            if (!ev[c].done) {
                /* the traces nearest c first: ranks of the same pipeline stage are neighbours */
                int nn = 0;
                for (int d = 1; nn < a->ntr - 1; d++) {
                    if (c - d >= 0) near[nn++] = c - d;
                    if (c + d < a->ntr) near[nn++] = c + d;
                }
                ev[c].support = ta_divergence_evidence(a, c, near, nn, &ev[c].compared, &ev[c].t);
                ev[c].done = 1;
            }
            int support = ev[c].support, compared = ev[c].compared;
            double t = ev[c].t;
            if (!support) continue;
            int strong = support >= 2 && support * 2 > compared;
            nstrong += strong;
            if (support > top_support) { top = nc; top_support = support; top_tie = 0; }
            else if (support == top_support) top_tie = 1;
            cv[nc++] = (struct cand){k, c, strong, t};
        }
    }
    int made = 0;
    for (int i = 0; i < nc; i++) {
        if (nstrong ? !cv[i].strong : (i != top || top_tie)) continue;
        spoint *sp = &ps->v[cv[i].k];
        if (sp->root != 2) {      /* its culprits: the candidates of this point */
            sp->root = 2;
            sp->nwf = 0;
            sp->t = cv[i].t;
        }
        iadd(&sp->wf, &sp->nwf, cv[i].c);
        if (cv[i].t < sp->t) sp->t = cv[i].t;     /* roots are made earliest first */
        made = 1;
    }
    free(near); free(seen); free(cv);
    return made;
}

/* expected members of an init that some ranks are stuck inside */
static void init_expected(ta_an *a, spoint *sp, const int *stuck)
{
    (void)stuck;
    const ta_trace *w = a->tr[sp->wt[0]];
    int lc = ta_comm_local(w, sp->g);
    const ta_comm *c = &w->comms[lc];
    if (!strcmp(c->kind, "Grow")) {
        /* a grow: the members of the parent take part (the new members: as the traces show) */
        uint64_t parent = c->parent;
        int known = c->has_parent;
        for (int t = 0; t < a->ntr && !known; t++)
            for (int i = 0; i < a->tr[t]->ncomms && !known; i++)
                if (a->tr[t]->comms[i].id == c->id && a->tr[t]->comms[i].has_parent) {
                    parent = a->tr[t]->comms[i].parent;
                    known = 1;
                }
        for (int t = 0; t < a->ntr && known; t++) {
            const ta_trace *x = a->tr[t];
            int inparent = 0, found = 0;
            for (int i = 0; i < x->ncomms; i++) {
                inparent |= x->comms[i].id == parent;
                found |= x->comms[i].id == c->id;
            }
            if (inparent && !found) { iadd(&sp->wf, &sp->nwf, t); iadd(&sp->never, &sp->nnever, t); }
        }
    } else if (c->has_parent) {
        /* a split: every member of the parent takes part */
        int ord = 0;
        for (int i = 0; i < lc; i++) ord += w->comms[i].has_parent && w->comms[i].parent == c->parent;
        for (int t = 0; t < a->ntr; t++) {
            const ta_trace *x = a->tr[t];
            int inparent = 0, o = 0, found = 0;
            for (int i = 0; i < x->ncomms; i++) {
                if (x->comms[i].id == c->parent) inparent = 1;
                if (x->comms[i].has_parent && x->comms[i].parent == c->parent) { if (o == ord) found = 1; o++; }
            }
            if (inparent && !found) { iadd(&sp->wf, &sp->nwf, t); iadd(&sp->never, &sp->nnever, t); }
        }
    } else {
        /* a communicator from a unique id: the job's ranks that have no
         * root communicator at this ordinal */
        int ord = 0;
        for (int i = 0; i < lc; i++) ord += !w->comms[i].has_parent;
        for (int t = 0; t < a->ntr; t++) {
            if (ihas(sp->wt, sp->nwt, t)) continue;
            const ta_trace *x = a->tr[t];
            int o = 0, found = 0;
            for (int i = 0; i < x->ncomms; i++)
                if (!x->comms[i].has_parent) { if (o == ord && x->comms[i].id == c->id) found = 1; o++; }
            if (!found) { iadd(&sp->wf, &sp->nwf, t); iadd(&sp->never, &sp->nnever, t); }
        }
    }
}

void ta_rootcause(ta_an *a)
{
    uint8_t **ST = a->never_done;     /* the completion simulation's answer (simulate.c) */
    points ps = {0};
    int *stuck = xcalloc((size_t)a->ntr + 1, sizeof(int));

    /* stuck points */
    for (int t = 0; t < a->ntr; t++) {
        ta_trace *tr = a->tr[t];
        for (int64_t i = 0; i < tr->ncalls; i++) {
            if (ST[t][i] != 1) continue;
            const ta_call *c = &tr->calls[i];
            int g = tr->comms[c->comm].g;
            int k;
            if (ta_op_is_coll(c->op)) {
                k = find_point(&ps, SP_COLL, g, c->seq, -1, -1);
            } else if (ta_op_is_onesided(c->op)) {
                k = find_point(&ps, SP_SIG, g, c->seq, c->rp, tr->comms[c->comm].rank);
            } else {
                int me = tr->comms[c->comm].rank;
                k = c->op == OP_SEND ? find_point(&ps, SP_P2P, g, c->seq, me, c->rp)
                                     : find_point(&ps, SP_P2P, g, c->seq, c->rp, me);
            }
            iadd(&ps.v[k].wt, &ps.v[k].nwt, t);
            double w = ta_wall(tr, c->enter_ns);
            if (ps.v[k].rep_t < 0 || w < ps.v[k].t) { ps.v[k].t = w; ps.v[k].rep_t = t; ps.v[k].rep_c = i; }
            stuck[t] = 1;
        }
        for (int i = 0; i < tr->ncomms; i++) {
            const ta_comm *c = &tr->comms[i];
            if (c->init_exit != TA_NULL64 || c->g < 0) continue;
            int k = find_point(&ps, SP_INIT, c->g, 0, -1, -1);
            iadd(&ps.v[k].wt, &ps.v[k].nwt, t);
            double w = ta_wall(tr, c->init_enter);
            if (ps.v[k].rep_t < 0 || w < ps.v[k].t) { ps.v[k].t = w; ps.v[k].rep_t = t; ps.v[k].rep_c = -1; }
            stuck[t] = 1;
        }
    }
    /* a rank observed inside an operation (the GPU had not completed it, or
     * the host call had not returned) waits, even where the replay would
     * have completed it: it is never a rank that "waits for nobody" */
    for (int t = 0; t < a->ntr; t++)
        for (int64_t i = a->tr[t]->ncalls - 1; i >= 0 && !stuck[t]; i--)
            if (ta_call_waiting(a->tr[t], &a->tr[t]->calls[i])) stuck[t] = 1;
    /* whom each point waits for */
    for (int k = 0; k < ps.n; k++) {
        spoint *sp = &ps.v[k];
        const ta_gcomm *n = &a->gc[sp->g];
        if (sp->type == SP_COLL) {
            for (int p = 0; p < n->npos; p++) {
                int m = n->member[p];
                if (m < 0 || ihas(sp->wt, sp->nwt, m)) continue;
                /* older than m's ring window: m issued it and went on, nobody waits for m here */
                if (ta_call_at(a, m, sp->g, sp->seq) < 0 && ta_coll_lost(a, m, sp->g, sp->seq)) continue;
                iadd(&sp->wf, &sp->nwf, m);
                if (ta_call_at(a, m, sp->g, sp->seq) < 0) iadd(&sp->never, &sp->nnever, m);
            }
            if (!sp->nwf && ta_sigbad(n, sp->seq)) sp->mismatch = 1;
        } else if (sp->type == SP_SIG) {
            /* the waiter waits for the sender; "never": it holds no signal #seq (or later) to the waiter */
            if (sp->snd < 0 || sp->snd >= n->npos || sp->rcv < 0 || sp->rcv >= n->npos) continue;
            int st = n->member[sp->snd];
            if (st < 0) continue;
            iadd(&sp->wf, &sp->nwf, st);
            if (!ta_sig_sent(a, st, n->local[sp->snd], sp->rcv, sp->seq, sp->t)) iadd(&sp->never, &sp->nnever, st);
        } else if (sp->type == SP_P2P) {
            if (sp->snd < 0 || sp->snd >= n->npos || sp->rcv < 0 || sp->rcv >= n->npos) continue;
            int st = n->member[sp->snd], rt = n->member[sp->rcv];
            if (st >= 0 && rt >= 0 && ihas(sp->wt, sp->nwt, st) && ihas(sp->wt, sp->nwt, rt)) {
                sp->mismatch = 1;
            } else {
                int other = ihas(sp->wt, sp->nwt, st) ? rt : st;
                if (other >= 0) {
                    iadd(&sp->wf, &sp->nwf, other);
                    int64_t pc = ta_p2p_find(a, other, n->local[other == st ? sp->snd : sp->rcv],
                                             other == st ? sp->rcv : sp->snd, other == st, sp->seq);
                    if (pc < 0) iadd(&sp->never, &sp->nnever, other);
                }
            }
        } else {
            init_expected(a, sp, stuck);
        }
    }
    /* A collective every member issued alike, or a send/recv without a
     * waited-for side, waits for nobody and disagrees on nothing: the replay
     * cannot leave one stuck unless the traces contradict each other (they
     * are checked at load; this is the last line). It has no culprit to
     * name: it is noted and left out, never a finding of its own. */
    for (int k = 0; k < ps.n; k++) {
        spoint *sp = &ps.v[k];
        if (sp->type != SP_COLL || !sp->nwf || sp->mismatch) continue;
        /* waits only for ranks that have the communicator suspended and were still running: they
         * had not resumed it yet, which is no hang (a rollout phase); not a finding, a note */
        int alive = 1;
        for (int j = 0; j < sp->nwf && alive; j++) alive = suspended_alive(a, sp->wf[j], sp->g);
        if (!alive) continue;
        sp->finding = SP_LEFT_OUT;
        int *r = NULL;
        ranks_of(a, sp->wf, sp->nwf, &r);
        ta_ints_sort(r, sp->nwf);
        char *rt = ta_ranks_text(r, sp->nwf);
        char *w = sp->rep_t >= 0 && sp->rep_c >= 0 ? ta_call_text_replay(a, a->tr[sp->rep_t], sp->rep_c)
                                                   : xasprintf("seq %u on comm %s", sp->seq, ta_comm_name(a, sp->g));
        ta_note_add(a, NULL, 0, "%s waits for rank%s %s, which %s the communicator suspended (ncclCommSuspend) and "
                    "%s still running at %s last write: %s not resumed it yet; not a hang as far as the traces show",
                    w, sp->nwf > 1 ? "s" : "", rt, sp->nwf > 1 ? "have" : "has", sp->nwf > 1 ? "were" : "was",
                    sp->nwf > 1 ? "their" : "its", sp->nwf > 1 ? "they had" : "it had");
        free(w); free(rt); free(r);
    }
    for (int k = 0; k < ps.n; k++) {
        spoint *sp = &ps.v[k];
        if (sp->type == SP_INIT || sp->nwf || sp->mismatch || sp->finding != SP_OPEN) continue;
        sp->finding = SP_LEFT_OUT;
        char *w = sp->rep_t >= 0 && sp->rep_c >= 0 ? ta_call_text_replay(a, a->tr[sp->rep_t], sp->rep_c)
                                                   : xasprintf("seq %u on comm %s", sp->seq, ta_comm_name(a, sp->g));
        ta_note_add(a, NULL, 0, "%s never completed in the replay although no member is missing from it and their "
                    "calls agree: the traces contradict each other there; it is not analysed", w);
        free(w);
    }
    /* root points: mismatches, and waits on ranks that wait for nobody */
    for (int k = 0; k < ps.n; k++) {
        spoint *sp = &ps.v[k];
        if (sp->finding == SP_LEFT_OUT) continue;
        if (sp->mismatch) { sp->root = 1; continue; }
        if (sp->type == SP_INIT && !sp->nwf) { sp->root = 1; continue; }
        for (int j = 0; j < sp->nwf; j++)
            if (!stuck[sp->wf[j]]) sp->root = 1;
    }
    int *res = xmalloc(sizeof(int) * (size_t)(a->ntr + 1));   /* per trace: finding it leads to */
    for (int t = 0; t < a->ntr; t++) res[t] = -1;
    int *order = xmalloc(sizeof(int) * (size_t)(ps.n + 1)), nord = 0;   /* points, in resolution order */
    int first_root_f = a->nf;
    evidence *ev = xcalloc((size_t)a->ntr + 1, sizeof *ev);
    for (;;) {
        /* root points, earliest first */
        for (;;) {
            int best = -1;
            for (int k = 0; k < ps.n; k++)
                if (ps.v[k].root && ps.v[k].finding == SP_OPEN && (best < 0 || ps.v[k].t < ps.v[best].t)) best = k;
            if (best < 0) break;
            ta_finding *f = root_finding(a, &ps.v[best], stuck);
            f->root = 1;
            /* who issued the stuck collective and waits inside it, who never did */
            if (ps.v[best].type == SP_COLL) ta_members_at(a, f, ps.v[best].g, ps.v[best].seq, ST);
            ps.v[best].finding = (int)(f - a->f);
            for (int j = 0; j < ps.v[best].nwt; j++)
                if (res[ps.v[best].wt[j]] < 0) res[ps.v[best].wt[j]] = ps.v[best].finding;
        }
        /* consequences: points waiting for ranks that lead to a finding */
        int changed = 1;
        while (changed) {
            changed = 0;
            for (int k = 0; k < ps.n; k++) {
                spoint *sp = &ps.v[k];
                if (sp->finding != SP_OPEN) continue;
                int fi = -1;
                for (int j = 0; j < sp->nwf && fi < 0; j++) fi = res[sp->wf[j]];
                if (fi < 0) continue;
                sp->finding = fi;
                order[nord++] = k;
                for (int j = 0; j < sp->nwt; j++)
                    if (res[sp->wt[j]] < 0) res[sp->wt[j]] = fi;
                changed = 1;
            }
        }
        /* a cycle of waits: decided by evidence, else broken by rule */
        if (cycle_roots(a, &ps, ev)) continue;
        int best = -1;
        for (int k = 0; k < ps.n; k++) {
            spoint *sp = &ps.v[k];
            if (sp->finding != SP_OPEN) continue;
            int pri = (sp->type == SP_P2P || sp->type == SP_SIG) && sp->nnever ? 0 : sp->nnever ? 1 : 2;
            if (best < 0) { best = k; continue; }
            int bp = (ps.v[best].type == SP_P2P || ps.v[best].type == SP_SIG) && ps.v[best].nnever ? 0 : ps.v[best].nnever ? 1 : 2;
            if (pri < bp || (pri == bp && sp->t < ps.v[best].t)) best = k;
        }
        if (best < 0) break;
        ps.v[best].root = 2;
        if (ps.v[best].nnever) {     /* culprits: those that never issued it */
            free(ps.v[best].wf);
            ps.v[best].wf = xmalloc(sizeof(int) * (size_t)ps.v[best].nnever);
            memcpy(ps.v[best].wf, ps.v[best].never, sizeof(int) * (size_t)ps.v[best].nnever);
            ps.v[best].nwf = ps.v[best].nnever;
        }
    }
    /* consequences onto their root findings */
    for (int o = 0; o < nord; o++) {
        spoint *sp = &ps.v[order[o]];
        ta_finding *f = &a->f[sp->finding];
        if (parallel_p2p(a, f, sp)) continue;
        f->cons = xrealloc(f->cons, sizeof *f->cons * (size_t)(f->ncons + 1));
        ta_conseq *c = &f->cons[f->ncons++];
        memset(c, 0, sizeof *c);
        c->g = sp->g;
        c->seq = sp->seq;
        c->op = -1;
        if (sp->rep_t >= 0 && sp->rep_c >= 0) {
            c->op = a->tr[sp->rep_t]->calls[sp->rep_c].op;
            c->what = ta_call_text_replay(a, a->tr[sp->rep_t], sp->rep_c);
        } else if (sp->type == SP_INIT) {
            c->what = xasprintf("init of communicator %s", ta_comm_name(a, sp->g));
        }
        ranks_of(a, sp->wt, sp->nwt, &c->waiting);
        c->nwaiting = sp->nwt;
        ta_ints_sort(c->waiting, c->nwaiting);
        ranks_of(a, sp->wf, sp->nwf, &c->waitfor);
        c->nwaitfor = sp->nwf;
        ta_ints_sort(c->waitfor, c->nwaitfor);
    }
    /* one root finding per culprit set: later "missing" waits on the same
     * ranks become consequences of the first */
    for (int i = first_root_f; i < a->nf; i++) {
        ta_finding *f = &a->f[i];
        if (!f->root || f->kind < 0) continue;
        for (int j = i + 1; j < a->nf; j++) {
            ta_finding *h = &a->f[j];
            if (!h->root || h->kind != K_MISSING || h->culprit.nranks != f->culprit.nranks ||
                memcmp(h->culprit.ranks, f->culprit.ranks, sizeof(int) * (size_t)f->culprit.nranks))
                continue;
            f->cons = xrealloc(f->cons, sizeof *f->cons * (size_t)(f->ncons + h->ncons + 1));
            ta_conseq *c = &f->cons[f->ncons++];
            memset(c, 0, sizeof *c);
            c->g = h->g;
            c->seq = (uint32_t)h->seq;
            c->op = -1;
            if (h->other.trace >= 0 && h->other.call >= 0) {
                c->op = a->tr[h->other.trace]->calls[h->other.call].op;
                c->what = ta_call_text_replay(a, a->tr[h->other.trace], h->other.call);
            }
            c->waiting = xmalloc(sizeof(int) * (size_t)(h->other.nranks + 1));
            memcpy(c->waiting, h->other.ranks, sizeof(int) * (size_t)h->other.nranks);
            c->nwaiting = h->other.nranks;
            c->waitfor = xmalloc(sizeof(int) * (size_t)(h->culprit.nranks + 1));
            memcpy(c->waitfor, h->culprit.ranks, sizeof(int) * (size_t)h->culprit.nranks);
            c->nwaitfor = h->culprit.nranks;
            for (int q = 0; q < h->ncons; q++) f->cons[f->ncons++] = h->cons[q];
            h->ncons = 0;
            h->kind = -1;     /* removed below */
        }
    }
    int w = 0;
    for (int i = 0; i < a->nf; i++)
        if (a->f[i].kind >= 0) a->f[w++] = a->f[i];
        else ta_finding_free(&a->f[i]);   /* (its consequences moved: ncons 0) */
    a->nf = w;

    a->stuck = stuck;
    a->root = xcalloc((size_t)a->ntr + 1, sizeof(int));
    for (int i = 0; i < a->nf; i++)
        if (a->f[i].root)
            for (int k = 0; k < a->f[i].culprit.nranks; k++)
                for (int t = 0; t < a->ntr; t++)
                    if (a->tr[t]->rank == a->f[i].culprit.ranks[k]) a->root[t] = 1;

    ta_findings_no_trace(a);
    ta_diverge_done(a);
    free(res); free(order); free(ev);
    for (int k = 0; k < ps.n; k++) { free(ps.v[k].wt); free(ps.v[k].wf); free(ps.v[k].never); }
    free(ps.v);
}

