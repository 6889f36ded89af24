/* The completion simulation (align.c's tables as input): what could
 * complete, as NCCL would, of what each trace issued. NCCL matches the n-th
 * collective of a communicator on every member, a send with the receive of
 * the same number, runs each stream's operations in order and a group's
 * operations together; what cannot complete is what the job was stuck on.
 * Completion facts come first: an operation the GPU completed (gpu done) is
 * complete whatever the replay would infer. Run once per analysis (main.c):
 * its answer, a->never_done, serves the root cause and the timeline. */
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "ta_align.h"

/* The state of one trace's calls and units (an operation, or the calls of
 * one group launched together), each in one small struct: a collective
 * completes with one visit to each member, and at thousands of members the
 * lines each visit touches, not the instructions, are the cost. */
typedef struct {
    int32_t unit;         /* unit index, -1 */
    uint8_t done;
} scall;
typedef struct {
    int32_t first;        /* first op in ops[] */
    int32_t nops, pending;
    int32_t next;         /* next unit on the same stream, -1 */
    uint8_t stream, active;
} sunit;
typedef struct {
    scall *call;          /* per call */
    sunit *u;             /* per unit */
    int32_t *ops;         /* op call indices grouped by unit (a trace holds fewer than 2^31 calls) */
    int32_t nunits;
    int32_t head[256];
} simtr;

typedef struct { int t, u; } ev;
typedef struct { int t; int64_t ci; } obsref;

/* one simulation's state (nothing at file scope: an analysis is one call) */
typedef struct {
    ta_an *a;
    simtr *S;                /* per trace */
    ev *q; size_t qn, qcap, qh;      /* units activated, not yet processed: q[qh..qn) */
    int32_t **arrived;       /* per gcomm, per seq (index ta_gseq) */
    int *present;            /* per gcomm: members with traces */
    obsref *ow; size_t own, owcap;   /* completion facts to apply */
    int *obs_noted;          /* per gcomm: a note was given */
    uint8_t **obs_coll;      /* per gcomm, per seq (ta_gseq): its members' parts already marked */
} sim;

/* The queue holds what is activated but not yet processed (about a unit per
 * rank and stream): once its processed head is most of it, the rest moves
 * to the front, so it does not grow with the job's calls. */
static void push(sim *x, int t, int u)
{
    if (x->qn == x->qcap && x->qh > x->qn / 2) {
        memmove(x->q, x->q + x->qh, sizeof *x->q * (x->qn - x->qh));
        x->qn -= x->qh;
        x->qh = 0;
    }
    if (x->qn == x->qcap) { x->qcap = x->qcap ? x->qcap * 2 : 4096; x->q = xrealloc(x->q, sizeof *x->q * x->qcap); }
    x->q[x->qn++] = (ev){t, u};
}

static void unit_op_done(sim *x, int t, int64_t ci)
{
    simtr *s = &x->S[t];
    if (s->call[ci].done) return;
    s->call[ci].done = 1;
    int u = s->call[ci].unit;
    if (--s->u[u].pending == 0) {
        int st = s->u[u].stream;
        s->head[st] = s->u[u].next;
        if (s->u[u].next >= 0) push(x, t, s->u[u].next);
    }
}

static void activate(sim *x, int t, int u)
{
    ta_an *a = x->a;
    simtr *s = &x->S[t];
    if (s->u[u].active) return;
    s->u[u].active = 1;
    ta_trace *tr = a->tr[t];
    for (int k = 0; k < s->u[u].nops; k++) {
        int64_t ci = s->ops[s->u[u].first + k];
        if (s->call[ci].done) continue;
        const ta_call *c = &tr->calls[ci];
        int g = tr->comms[c->comm].g;
        if (g < 0) continue;
        ta_gcomm *n = &a->gc[g];
        if (ta_op_is_coll(c->op)) {
            int64_t si = ta_gseq(n, c->seq);
            if (si >= 0 && ++x->arrived[g][si] == x->present[g] && !n->sigbad[si]) {
                for (int p = 0; p < n->npos; p++) {
                    if (n->member[p] < 0) continue;
                    /* a member whose window lost it x->arrived long ago */
                    int64_t mci = ta_comm_call(&a->tr[n->member[p]]->comms[n->local[p]], c->seq);
                    if (mci >= 0) unit_op_done(x, n->member[p], mci);
                }
            }
        } else if (ta_op_is_onesided(c->op)) {
            int peer = c->rp, me = tr->comms[c->comm].rank;
            int pt = peer >= 0 && peer < n->npos ? n->member[peer] : -1;
            if (ta_op_sends(c->op)) {
                /* one-sided: sent once its stream reaches it; the target's wait for
                 * exactly this signal completes with it (an earlier one was waited for
                 * by an earlier wait, in order) */
                unit_op_done(x, t, ci);
                int64_t wc = pt >= 0 ? ta_p2p_find(a, pt, n->local[peer], me, 3, c->seq) : -1;
                if (wc >= 0 && x->S[pt].call[wc].unit >= 0 && x->S[pt].u[x->S[pt].call[wc].unit].active) unit_op_done(x, pt, wc);
                continue;
            }
            /* a wait: complete once the sender's signal #seq (or a later one) was sent; a
             * sender without a trace is assumed to send it (as for send/recv) */
            if (c->count <= 0 || pt < 0) { unit_op_done(x, t, ci); continue; }
            int64_t sc = ta_sig_find_from(a, pt, n->local[peer], me, c->seq, NULL);
            if (sc >= 0 ? x->S[pt].call[sc].done : ta_p2p_lost(a, pt, n->local[peer], me, 2, c->seq, ta_wall(tr, c->enter_ns)))
                unit_op_done(x, t, ci);
        } else {
            int peer = c->rp;
            if (peer < 0 || peer >= n->npos || n->member[peer] < 0) { unit_op_done(x, t, ci); continue; }
            int pt = n->member[peer];
            int64_t pc = ta_p2p_find(a, pt, n->local[peer], tr->comms[c->comm].rank, c->op == OP_RECV, c->seq);
            if (pc < 0) {
                /* the peer's half is older than its ring window: it was issued and matched */
                if (ta_p2p_lost(a, pt, n->local[peer], tr->comms[c->comm].rank, c->op == OP_RECV, c->seq,
                                ta_wall(tr, c->enter_ns)))
                    unit_op_done(x, t, ci);
                continue;
            }
            simtr *ps = &x->S[pt];
            if (ps->call[pc].unit < 0 || !ps->u[ps->call[pc].unit].active || ps->call[pc].done) continue;
            const ta_call *o = &a->tr[pt]->calls[pc];
            if (c->count * ta_dtype_size(c->dtype) != o->count * ta_dtype_size(o->dtype)) continue;
            unit_op_done(x, t, ci);
            unit_op_done(x, pt, pc);
        }
    }
}

/* ---- completion facts ----
 * An operation the GPU completed (gpu done) is complete; so is everything
 * before it on its stream (a stream runs in order) and its other side: every
 * member's part of a collective, the peer's half of a send/recv (they finish
 * together). Applied before the replay, which then only infers the rest.
 * Where the replay could not have completed it (members disagree, a member
 * never issued it), the observation is trusted and a note says so. */

static void obs_push(sim *x, int t, int64_t ci)
{
    simtr *s = &x->S[t];
    if (ci < 0 || s->call[ci].unit < 0 || s->call[ci].done) return;
    s->call[ci].done = 1;
    s->u[s->call[ci].unit].pending--;
    if (x->own == x->owcap) { x->owcap = x->owcap ? x->owcap * 2 : 1024; x->ow = xrealloc(x->ow, sizeof *x->ow * x->owcap); }
    x->ow[x->own++] = (obsref){t, ci};
}

static void obs_note(sim *x, int t, int64_t ci, int g, const char *why)
{
    ta_an *a = x->a;
    if (x->obs_noted[g]++) return;
    char *c = ta_call_text(a, a->tr[t], ci);
    ta_note_add(a, NULL, 0, "%s completed on the GPU (rank %d's trace) although %s; the observation is trusted: "
                "it is not where the job hung", c, a->tr[t]->rank, why);
    free(c);
}

static void observe(sim *x, int32_t (*cursor)[256])
{
    ta_an *a = x->a;
    x->own = 0;
    x->obs_noted = xcalloc((size_t)a->ngc + 1, sizeof *x->obs_noted);
    x->obs_coll = xcalloc((size_t)a->ngc + 1, sizeof *x->obs_coll);
    for (int t = 0; t < a->ntr; t++)
        for (int64_t i = 0; i < a->tr[t]->ncalls; i++)
            if (a->tr[t]->calls[i].gpu == GPU_DONE) obs_push(x, t, i);
    for (size_t w = 0; w < x->own; w++) {
        int t = x->ow[w].t;
        int64_t ci = x->ow[w].ci;
        simtr *s = &x->S[t];
        ta_trace *tr = a->tr[t];
        int u = s->call[ci].unit, st = s->u[u].stream;
        /* everything before it on its stream: units are numbered in issue order */
        while (cursor[t][st] >= 0 && cursor[t][st] < u) {
            int v = cursor[t][st];
            for (int k = 0; k < s->u[v].nops; k++) obs_push(x, t, s->ops[s->u[v].first + k]);
            cursor[t][st] = s->u[v].next;
        }
        const ta_call *c = &tr->calls[ci];
        int g = tr->comms[c->comm].g;
        ta_gcomm *n = &a->gc[g];
        if (ta_op_is_coll(c->op)) {
            int64_t si = ta_gseq(n, c->seq);
            if (si < 0) continue;
            if (!x->obs_coll[g]) x->obs_coll[g] = xcalloc((size_t)n->nseqs + 1, 1);
            if (x->obs_coll[g][si]) continue;        /* once per collective, not per member */
            x->obs_coll[g][si] = 1;
            if (n->sigbad[si]) obs_note(x, t, ci, g, "the members' calls differ");
            for (int p = 0; p < n->npos; p++) {
                int m = n->member[p];
                if (m < 0) continue;
                int64_t mci = ta_comm_call(&a->tr[m]->comms[n->local[p]], c->seq);
                if (mci >= 0) {
                    obs_push(x, m, mci);
                } else if (!ta_coll_lost(a, m, g, c->seq)) {
                    char *why = xasprintf("rank %d has no record of it", a->tr[m]->rank);
                    obs_note(x, t, ci, g, why);
                    free(why);
                }
            }
        } else if (ta_op_is_onesided(c->op)) {
            continue;        /* a signal or a wait observed done: itself only */
        } else {
            int peer = c->rp;
            if (peer < 0 || peer >= n->npos || n->member[peer] < 0) continue;
            int pt = n->member[peer], me = tr->comms[c->comm].rank;
            int64_t pc = ta_p2p_find(a, pt, n->local[peer], me, c->op == OP_RECV, c->seq);
            if (pc >= 0) {
                const ta_call *o = &a->tr[pt]->calls[pc];
                if (c->count * ta_dtype_size(c->dtype) != o->count * ta_dtype_size(o->dtype))
                    obs_note(x, t, ci, g, "the send and the receive differ in size");
                obs_push(x, pt, pc);
            } else if (!ta_p2p_lost(a, pt, n->local[peer], me, c->op == OP_RECV, c->seq, ta_wall(tr, c->enter_ns))) {
                char *why = xasprintf("rank %d has no record of its other half", a->tr[pt]->rank);
                obs_note(x, t, ci, g, why);
                free(why);
            }
        }
    }
    free(x->ow);
    free(x->obs_noted);
    for (int g = 0; g < a->ngc; g++) free(x->obs_coll[g]);
    free(x->obs_coll);
}

void ta_simulate(ta_an *a)
{
    sim sx = {.a = a}, *x = &sx;
    x->S = xcalloc((size_t)a->ntr, sizeof *x->S);
    x->arrived = xcalloc((size_t)a->ngc + 1, sizeof *x->arrived);
    x->present = xcalloc((size_t)a->ngc + 1, sizeof *x->present);
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        x->arrived[g] = xcalloc((size_t)n->nseqs + 1, sizeof(int32_t));
        for (int p = 0; p < n->npos; p++) {
            if (n->member[p] < 0) continue;
            x->present[g]++;
            /* seqs older than the member's ring window: it issued them */
            uint32_t w = ta_window_start(a->tr[n->member[p]], n->local[p]);
            for (uint32_t i = 0; i < n->nseqs && ta_gseq_at(n, i) < w; i++) x->arrived[g][i]++;
        }
    }
    for (int t = 0; t < a->ntr; t++) {
        ta_trace *tr = a->tr[t];
        simtr *s = &x->S[t];
        s->call = xcalloc((size_t)tr->ncalls + 1, sizeof *s->call);
        s->ops = xmalloc(sizeof *s->ops * (size_t)(tr->ncalls + 1));
        int64_t nops = 0;
        int32_t cap = 64;
        s->u = xcalloc((size_t)cap, sizeof *s->u);
        uint32_t cur_group = 0;
        int32_t cur_unit = -1;
        int64_t prev = -1;
        for (int64_t i = 0; i < tr->ncalls; i++) {
            const ta_call *c = &tr->calls[i];
            s->call[i].unit = -1;
            if (!(ta_op_is_coll(c->op) || ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) || c->seq == 0 ||
                c->comm < 0 || tr->comms[c->comm].g < 0)
                continue;
            /* a collective whose seq was a repeat is not in byseq: skip it */
            if (ta_op_is_coll(c->op) && ta_comm_call(&tr->comms[c->comm], c->seq) != i) continue;
            /* the records of one ncclWaitSignal (one per descriptor: the same entry) are one operation */
            int same_wait = c->op == OP_WAITSIGNAL && prev >= 0 && tr->calls[prev].op == OP_WAITSIGNAL &&
                            tr->calls[prev].enter_ns == c->enter_ns && s->call[prev].unit == cur_unit && cur_unit >= 0;
            prev = i;
            if (!same_wait && !(c->group && c->group == cur_group && cur_unit >= 0)) {
                if (s->nunits == cap) {
                    cap *= 2;
                    s->u = xrealloc(s->u, sizeof *s->u * (size_t)cap);
                }
                cur_unit = s->nunits++;
                s->u[cur_unit] = (sunit){.first = (int32_t)nops, .stream = c->stream, .next = -1};
                cur_group = c->group;
            }
            s->ops[nops++] = (int32_t)i;
            s->u[cur_unit].nops++;
            s->call[i].unit = cur_unit;
        }
        for (int k = 0; k < 256; k++) s->head[k] = -1;
        int32_t last[256];
        for (int k = 0; k < 256; k++) last[k] = -1;
        for (int32_t u = 0; u < s->nunits; u++) {
            s->u[u].pending = s->u[u].nops;
            s->u[u].next = -1;
            int st = s->u[u].stream;
            if (last[st] < 0) s->head[st] = u;
            else s->u[last[st]].next = u;
            last[st] = u;
        }
    }
    int32_t (*cursor)[256] = xmalloc(sizeof *cursor * (size_t)(a->ntr + 1));
    for (int t = 0; t < a->ntr; t++) memcpy(cursor[t], x->S[t].head, sizeof cursor[t]);
    observe(x, cursor);
    free(cursor);
    for (int t = 0; t < a->ntr; t++) {
        simtr *s = &x->S[t];
        for (int k = 0; k < 256; k++) {
            while (s->head[k] >= 0 && s->u[s->head[k]].pending == 0) s->head[k] = s->u[s->head[k]].next;
            if (s->head[k] >= 0) push(x, t, s->head[k]);
        }
    }
    while (x->qh < x->qn) {
        ev e = x->q[x->qh++];
        activate(x, e.t, e.u);
    }
    /* result: 1 stuck at the head of its stream, 2 queued behind */
    uint8_t **res = xcalloc((size_t)a->ntr, sizeof *res);
    for (int t = 0; t < a->ntr; t++) {
        simtr *s = &x->S[t];
        ta_trace *tr = a->tr[t];
        res[t] = xcalloc((size_t)tr->ncalls + 1, 1);
        for (int64_t i = 0; i < tr->ncalls; i++) {
            int u = s->call[i].unit;
            if (u < 0 || s->call[i].done) continue;
            res[t][i] = s->u[u].active ? 1 : 2;
        }
        free(s->call); free(s->u); free(s->ops);
    }
    for (int g = 0; g < a->ngc; g++) free(x->arrived[g]);
    free(x->arrived); free(x->present); free(x->S); free(x->q);
    a->never_done = res;
}
