/* Alignment: the job's communicators (members by global rank, from the
 * traces), per-communicator per-sequence tables of collectives, send/recv
 * matched per (communicator, sender, receiver) in order, and a simulation of
 * what could complete: NCCL matches the n-th collective of a communicator on
 * every member, a send with the receive of the same number, runs each
 * stream's operations in order and a group's operations together. What the
 * simulation cannot complete is what the job was stuck on. */
#include <stdlib.h>
#include <string.h>

#include "ta.h"

/* ---- communicator table ---- */
typedef struct { uint64_t *keys; int *vals; size_t cap; } idmap;

static int idmap_get(const idmap *m, uint64_t k)
{
    if (!m->cap) return -1;
    size_t i = ta_hash64(0, k) & (m->cap - 1);
    while (m->vals[i] >= 0) {
        if (m->keys[i] == k) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}
static void idmap_put(idmap *m, uint64_t k, int v, int count)
{
    if ((size_t)count * 2 + 2 >= m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 256;
        idmap n = {xmalloc(ncap * sizeof(uint64_t)), xmalloc(ncap * sizeof(int)), ncap};
        for (size_t i = 0; i < ncap; i++) n.vals[i] = -1;
        for (size_t i = 0; i < m->cap; i++)
            if (m->vals[i] >= 0) idmap_put(&n, m->keys[i], m->vals[i], 0);
        free(m->keys); free(m->vals);
        *m = n;
    }
    size_t i = ta_hash64(0, k) & (m->cap - 1);
    while (m->vals[i] >= 0 && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
}

int ta_sig_equal(const ta_call *x, const ta_call *y)
{
    if (ta_op_norm(x->op) != ta_op_norm(y->op) || x->count != y->count || x->dtype != y->dtype ||
        x->redop != y->redop)
        return 0;
    if (ta_op_rooted(x->op) && x->rp != y->rp) return 0;
    return 1;
}

/* p2p index per trace: sorted (comm, dir, peer, seq) -> call */
typedef struct { int32_t comm, peer; uint32_t seq; int32_t dir; int64_t call; } p2pkey;
static p2pkey **p2p_idx;
static int64_t *p2p_n;

static int cmp_p2p(const void *x, const void *y)
{
    const p2pkey *a = x, *b = y;
    if (a->comm != b->comm) return a->comm < b->comm ? -1 : 1;
    if (a->dir != b->dir) return a->dir < b->dir ? -1 : 1;
    if (a->peer != b->peer) return a->peer < b->peer ? -1 : 1;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return 0;
}

int64_t ta_p2p_find(const ta_an *a, int t, int lc, int peer, int dir_send, uint32_t seq)
{
    (void)a;
    if (lc < 0) return -1;
    p2pkey k = {lc, peer, seq, dir_send, 0};
    p2pkey *r = bsearch(&k, p2p_idx[t], (size_t)p2p_n[t], sizeof k, cmp_p2p);
    return r ? r->call : -1;
}

void ta_align(ta_an *a)
{
    idmap m = {0};
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        for (int i = 0; i < t->ncomms; i++) {
            ta_comm *c = &t->comms[i];
            int g = idmap_get(&m, c->id);
            if (g < 0) {
                g = a->ngc;
                a->gc = xrealloc(a->gc, sizeof *a->gc * (size_t)(a->ngc + 1));
                ta_gcomm *n = &a->gc[a->ngc++];
                memset(n, 0, sizeof *n);
                n->id = c->id;
                n->parent = c->parent;
                n->has_parent = c->has_parent;
                n->kind = ta_intern(c->kind);
                n->size = c->size;
                n->family = c->family;
                idmap_put(&m, c->id, g, a->ngc);
            }
            ta_gcomm *n = &a->gc[g];
            if (n->size < 0 && c->size >= 0) n->size = c->size;
            int need = c->rank + 1;
            if (n->size > need) need = n->size;
            if (need > n->npos) {
                n->member = xrealloc(n->member, sizeof(int) * (size_t)need);
                n->local = xrealloc(n->local, sizeof(int) * (size_t)need);
                for (int p = n->npos; p < need; p++) n->member[p] = n->local[p] = -1;
                n->npos = need;
            }
            if (n->member[c->rank] >= 0 && n->member[c->rank] != ti) {
                ta_note_add(a, t->file, 0, "rank %d claims place %d of communicator 0x%016llx, already taken by rank %d; ignored",
                            t->rank, c->rank, (unsigned long long)c->id, a->tr[n->member[c->rank]]->rank);
                continue;
            }
            if (n->member[c->rank] == ti) {
                ta_note_add(a, t->file, 0, "communicator 0x%016llx appears twice in this trace; the first is used",
                            (unsigned long long)c->id);
                continue;
            }
            n->member[c->rank] = ti;
            n->local[c->rank] = i;
            c->g = g;
        }
    }
    free(m.keys); free(m.vals);

    /* per (trace, comm) collectives by seq; p2p index */
    p2p_idx = xcalloc((size_t)a->ntr, sizeof *p2p_idx);
    p2p_n = xcalloc((size_t)a->ntr, sizeof *p2p_n);
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        int64_t np2p = 0;
        for (int64_t i = 0; i < t->ncalls; i++) {
            const ta_call *c = &t->calls[i];
            if (c->seq == 0 || c->comm < 0) continue;
            if (ta_op_is_coll(c->op)) {
                ta_comm *k = &t->comms[c->comm];
                if (c->seq > k->nseq) k->nseq = c->seq;
            } else if (ta_op_is_p2p(c->op)) {
                np2p++;
            }
        }
        int dup = 0;
        for (int i = 0; i < t->ncomms; i++) {
            ta_comm *k = &t->comms[i];
            k->byseq = xmalloc(sizeof(int32_t) * (k->nseq ? k->nseq : 1));
            for (uint32_t s = 0; s < k->nseq; s++) k->byseq[s] = -1;
        }
        p2p_idx[ti] = xmalloc(sizeof(p2pkey) * (size_t)(np2p ? np2p : 1));
        for (int64_t i = 0; i < t->ncalls; i++) {
            const ta_call *c = &t->calls[i];
            if (c->seq == 0 || c->comm < 0) continue;
            if (ta_op_is_coll(c->op)) {
                ta_comm *k = &t->comms[c->comm];
                if (k->byseq[c->seq - 1] >= 0) dup++;
                else k->byseq[c->seq - 1] = (int32_t)i;
            } else if (ta_op_is_p2p(c->op)) {
                p2p_idx[ti][p2p_n[ti]++] = (p2pkey){c->comm, c->rp, c->seq, c->op == OP_SEND, i};
            }
        }
        qsort(p2p_idx[ti], (size_t)p2p_n[ti], sizeof(p2pkey), cmp_p2p);
        for (int64_t i = 1; i < p2p_n[ti]; i++)
            if (!cmp_p2p(&p2p_idx[ti][i - 1], &p2p_idx[ti][i])) dup++;
        if (dup) ta_note_add(a, t->file, 0, "%d call(s) repeat a sequence number already used; the first is used", dup);
    }

    /* members' calls at each seq agree? */
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        for (int p = 0; p < n->npos; p++)
            if (n->member[p] >= 0) {
                uint32_t s = a->tr[n->member[p]]->comms[n->local[p]].nseq;
                if (s > n->maxseq) n->maxseq = s;
            }
        n->sigbad = xcalloc(n->maxseq + 1, 1);
        for (uint32_t s = 0; s < n->maxseq; s++) {
            const ta_call *ref = NULL;
            for (int p = 0; p < n->npos; p++) {
                if (n->member[p] < 0) continue;
                const ta_trace *t = a->tr[n->member[p]];
                const ta_comm *k = &t->comms[n->local[p]];
                if (s >= k->nseq || k->byseq[s] < 0) continue;
                const ta_call *c = &t->calls[k->byseq[s]];
                if (!ref) ref = c;
                else if (!ta_sig_equal(ref, c)) { n->sigbad[s] = 1; break; }
            }
        }
    }
}

/* ---- completion simulation ---- */
typedef struct {
    int32_t *unit;        /* per call: unit index, -1 */
    int32_t *ufirst;      /* per unit: first op in ops[] */
    int32_t *unops;
    int32_t *upending;
    uint8_t *ustream;
    uint8_t *uactive;
    int32_t *unext;       /* next unit on the same stream */
    int64_t *ops;         /* op call indices grouped by unit */
    int32_t nunits;
    int32_t head[256];
    uint8_t *done;        /* per call */
} simtr;

typedef struct { int t, u; } ev;
static ev *q;
static size_t qn, qcap, qh;
static simtr *S;
static int32_t **arrived;   /* per gcomm, per seq */
static int *present;        /* per gcomm: members with traces */

static void push(int t, int u)
{
    if (qn == qcap) { qcap = qcap ? qcap * 2 : 4096; q = xrealloc(q, sizeof *q * qcap); }
    q[qn++] = (ev){t, u};
}

static void unit_op_done(int t, int64_t ci)
{
    simtr *s = &S[t];
    if (s->done[ci]) return;
    s->done[ci] = 1;
    int u = s->unit[ci];
    if (--s->upending[u] == 0) {
        int st = s->ustream[u];
        s->head[st] = s->unext[u];
        if (s->unext[u] >= 0) push(t, s->unext[u]);
    }
}

static void activate(ta_an *a, int t, int u)
{
    simtr *s = &S[t];
    if (s->uactive[u]) return;
    s->uactive[u] = 1;
    ta_trace *tr = a->tr[t];
    for (int k = 0; k < s->unops[u]; k++) {
        int64_t ci = s->ops[s->ufirst[u] + k];
        if (s->done[ci]) continue;
        const ta_call *c = &tr->calls[ci];
        int g = tr->comms[c->comm].g;
        if (g < 0) continue;
        ta_gcomm *n = &a->gc[g];
        if (ta_op_is_coll(c->op)) {
            if (++arrived[g][c->seq - 1] == present[g] && !n->sigbad[c->seq - 1]) {
                for (int p = 0; p < n->npos; p++) {
                    if (n->member[p] < 0) continue;
                    const ta_comm *mc = &a->tr[n->member[p]]->comms[n->local[p]];
                    unit_op_done(n->member[p], mc->byseq[c->seq - 1]);
                }
            }
        } else {
            int peer = c->rp;
            if (peer < 0 || peer >= n->npos || n->member[peer] < 0) { unit_op_done(t, ci); continue; }
            int pt = n->member[peer];
            int64_t pc = ta_p2p_find(a, pt, n->local[peer], tr->comms[c->comm].rank, c->op == OP_RECV, c->seq);
            if (pc < 0) continue;
            simtr *ps = &S[pt];
            if (ps->unit[pc] < 0 || !ps->uactive[ps->unit[pc]] || ps->done[pc]) continue;
            const ta_call *o = &a->tr[pt]->calls[pc];
            if (c->count * ta_dtype_size(c->dtype) != o->count * ta_dtype_size(o->dtype)) continue;
            unit_op_done(t, ci);
            unit_op_done(pt, pc);
        }
    }
}

void ta_simulate(ta_an *a, uint8_t ***out)
{
    S = xcalloc((size_t)a->ntr, sizeof *S);
    arrived = xcalloc((size_t)a->ngc + 1, sizeof *arrived);
    present = xcalloc((size_t)a->ngc + 1, sizeof *present);
    for (int g = 0; g < a->ngc; g++) {
        arrived[g] = xcalloc(a->gc[g].maxseq + 1, sizeof(int32_t));
        for (int p = 0; p < a->gc[g].npos; p++) present[g] += a->gc[g].member[p] >= 0;
    }
    for (int t = 0; t < a->ntr; t++) {
        ta_trace *tr = a->tr[t];
        simtr *s = &S[t];
        s->unit = xmalloc(sizeof(int32_t) * (size_t)(tr->ncalls + 1));
        s->done = xcalloc((size_t)tr->ncalls + 1, 1);
        s->ops = xmalloc(sizeof(int64_t) * (size_t)(tr->ncalls + 1));
        int64_t nops = 0;
        int32_t cap = 64;
        s->ufirst = xmalloc(sizeof(int32_t) * (size_t)cap);
        s->unops = xmalloc(sizeof(int32_t) * (size_t)cap);
        s->ustream = xmalloc((size_t)cap);
        uint32_t cur_group = 0;
        int32_t cur_unit = -1;
        for (int64_t i = 0; i < tr->ncalls; i++) {
            const ta_call *c = &tr->calls[i];
            s->unit[i] = -1;
            if (!(ta_op_is_coll(c->op) || ta_op_is_p2p(c->op)) || c->seq == 0 || c->comm < 0 ||
                tr->comms[c->comm].g < 0)
                continue;
            /* a collective whose seq was a repeat is not in byseq: skip it */
            if (ta_op_is_coll(c->op) && tr->comms[c->comm].byseq[c->seq - 1] != i) continue;
            if (!(c->group && c->group == cur_group && cur_unit >= 0)) {
                if (s->nunits == cap) {
                    cap *= 2;
                    s->ufirst = xrealloc(s->ufirst, sizeof(int32_t) * (size_t)cap);
                    s->unops = xrealloc(s->unops, sizeof(int32_t) * (size_t)cap);
                    s->ustream = xrealloc(s->ustream, (size_t)cap);
                }
                cur_unit = s->nunits++;
                s->ufirst[cur_unit] = (int32_t)nops;
                s->unops[cur_unit] = 0;
                s->ustream[cur_unit] = c->stream;
                cur_group = c->group;
            }
            s->ops[nops++] = i;
            s->unops[cur_unit]++;
            s->unit[i] = cur_unit;
        }
        s->upending = xmalloc(sizeof(int32_t) * (size_t)(s->nunits + 1));
        s->uactive = xcalloc((size_t)s->nunits + 1, 1);
        s->unext = xmalloc(sizeof(int32_t) * (size_t)(s->nunits + 1));
        for (int k = 0; k < 256; k++) s->head[k] = -1;
        int32_t last[256];
        for (int k = 0; k < 256; k++) last[k] = -1;
        for (int32_t u = 0; u < s->nunits; u++) {
            s->upending[u] = s->unops[u];
            s->unext[u] = -1;
            int st = s->ustream[u];
            if (last[st] < 0) s->head[st] = u;
            else s->unext[last[st]] = u;
            last[st] = u;
        }
        for (int k = 0; k < 256; k++)
            if (s->head[k] >= 0) push(t, s->head[k]);
    }
    while (qh < qn) {
        ev e = q[qh++];
        activate(a, e.t, e.u);
    }
    /* result: 1 stuck at the head of its stream, 2 queued behind */
    uint8_t **res = xcalloc((size_t)a->ntr, sizeof *res);
    for (int t = 0; t < a->ntr; t++) {
        simtr *s = &S[t];
        ta_trace *tr = a->tr[t];
        res[t] = xcalloc((size_t)tr->ncalls + 1, 1);
        for (int64_t i = 0; i < tr->ncalls; i++) {
            int u = s->unit[i];
            if (u < 0 || s->done[i]) continue;
            res[t][i] = s->uactive[u] ? 1 : 2;
        }
        free(s->unit); free(s->done); free(s->ops); free(s->ufirst); free(s->unops);
        free(s->ustream); free(s->upending); free(s->uactive); free(s->unext);
    }
    for (int g = 0; g < a->ngc; g++) free(arrived[g]);
    free(arrived); free(present); free(S); free(q);
    q = NULL; qn = qcap = qh = 0;
    *out = res;
}
