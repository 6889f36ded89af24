/* Alignment: the job's communicators (members by global rank, from the
 * traces), per-communicator per-sequence tables of collectives, send/recv
 * matched per (communicator, sender, receiver) in order, and a simulation of
 * what could complete: NCCL matches the n-th collective of a communicator on
 * every member, a send with the receive of the same number, runs each
 * stream's operations in order and a group's operations together. What the
 * simulation cannot complete is what the job was stuck on. Completion facts
 * come first: an operation the GPU completed (gpu done) is complete whatever
 * the replay would infer. A trace whose ring lost its oldest records covers
 * only a window: what lies before it is unknown (issued, and passed), never
 * missing. */
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "ta_align.h"

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

/* p2p index per trace: sorted (comm, dir, peer, seq) -> call; dir 0 recv, 1
 * send, 2 signal sent (PutSignal/Signal: peer the target), 3 WaitSignal
 * (peer the sender) */
typedef struct ta_p2pkey { int32_t comm, peer; uint32_t seq; int32_t dir; int64_t call; } p2pkey;

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
    p2pkey *r = a->p2p_n[t] > 0 ? bsearch(&k, a->p2p_idx[t], (size_t)a->p2p_n[t], sizeof k, cmp_p2p) : NULL;
    return r ? r->call : -1;
}

int64_t ta_sig_find_from(const ta_an *a, int t, int lc, int peer, uint32_t seq, uint32_t *got)
{
    (void)a;
    if (lc < 0) return -1;
    p2pkey k = {lc, peer, seq, 2, 0};
    size_t lo = 0, hi = (size_t)a->p2p_n[t];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp_p2p(&a->p2p_idx[t][mid], &k) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo >= (size_t)a->p2p_n[t]) return -1;
    const p2pkey *r = &a->p2p_idx[t][lo];
    if (r->comm != lc || r->dir != 2 || r->peer != peer) return -1;
    if (got) *got = r->seq;
    return r->call;
}

int64_t ta_sig_last(const ta_an *a, int t, int lc, int peer, uint32_t *seq)
{
    (void)a;
    /* the entry before the upper bound of (lc, signal sent, peer, UINT32_MAX) */
    if (lc < 0) return -1;
    p2pkey k = {lc, peer, UINT32_MAX, 2, 0};
    size_t lo = 0, hi = (size_t)a->p2p_n[t];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp_p2p(&a->p2p_idx[t][mid], &k) <= 0) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return -1;
    const p2pkey *r = &a->p2p_idx[t][lo - 1];
    if (r->comm != lc || r->dir != 2 || r->peer != peer) return -1;
    *seq = r->seq;
    return r->call;
}

int ta_sig_sent(const ta_an *a, int st, int lc, int to, uint32_t seq, double wall)
{
    if (ta_sig_find_from(a, st, lc, to, seq, NULL) >= 0) return 1;
    return ta_p2p_lost(a, st, lc, to, 2, seq, wall);
}

/* ---- ring windows ----
 * A trace that lost records (ring_lost > 0) keeps its newest calls only. A
 * collective of comm lc numbered below the first one kept was issued (seqs
 * are consecutive) but is gone; with no collective of lc kept, everything it
 * numbered (colls, or the fingerprint's last seq) is gone. */
uint32_t ta_window_start(const ta_trace *t, int lc)
{
    if (t->ring_lost <= 0 || lc < 0 || lc >= t->ncomms) return 1;
    const ta_comm *k = &t->comms[lc];
    if (k->first_seq) return k->first_seq;
    uint64_t issued = k->colls > 0 ? (uint64_t)k->colls : 0;
    if (k->fp_seq > issued) issued = k->fp_seq;
    return issued >= UINT32_MAX ? UINT32_MAX : (uint32_t)issued + 1;
}

int ta_coll_lost(const ta_an *a, int t, int g, uint32_t seq)
{
    const ta_trace *tr = a->tr[t];
    int lc = ta_comm_local(tr, g);
    /* the folder filled (kind_lost.c): a collective it numbered but kept no record of was never in the file */
    if (tr->lost_folder > 0 && lc >= 0 && (int64_t)seq <= tr->comms[lc].colls) return 1;
    if (tr->ring_lost <= 0) return 0;
    return seq < ta_window_start(tr, lc);
}

/* Send/recv: the lowest seq kept for (comm, direction, peer) bounds the
 * window; with none kept, the operation is gone when the other side's call
 * (at wall time `wall`) is older than the trace's oldest kept call (clocks of
 * different hosts: the ring keeps far more than their skew). */
int ta_p2p_lost(const ta_an *a, int t, int lc, int peer, int dir_send, uint32_t seq, double wall)
{
    const ta_trace *tr = a->tr[t];
    if (tr->ring_lost <= 0 || lc < 0) return 0;
    p2pkey k = {lc, peer, 0, dir_send, 0};
    size_t lo = 0, hi = (size_t)a->p2p_n[t];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp_p2p(&a->p2p_idx[t][mid], &k) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < (size_t)a->p2p_n[t]) {
        const p2pkey *r = &a->p2p_idx[t][lo];
        if (r->comm == lc && r->dir == dir_send && r->peer == peer) return seq < r->seq;
    }
    return !tr->ncalls || wall < ta_wall(tr, tr->calls[0].enter_ns);
}

/* ---- per-seq tables ----
 * A trace whose ring kept calls #10,000,000-#10,000,300 of a communicator
 * needs 301 entries, not 10 million: tables start at the lowest seq kept.
 * Kept seqs are consecutive but for calls lost to a torn record or a
 * repeat; a table is dense (O(1) lookups) unless the seqs are so scattered
 * (a damaged or crafted trace: #1 and #2^31-1) that it would cost more than
 * twice the calls plus a margin; then a sorted list, searched. */
#define SEQ_SLACK 4096

static int dense_enough(uint64_t span, uint64_t kept) { return span <= 2 * kept + SEQ_SLACK; }

static void byseq_alloc(ta_comm *k)
{
    if (!k->nkept) return;
    uint64_t span = (uint64_t)k->nseq - k->seq0 + 1;
    if (dense_enough(span, k->nkept)) {
        k->byseq = xmalloc(sizeof(int32_t) * (size_t)span);
        for (uint64_t s = 0; s < span; s++) k->byseq[s] = -1;
    } else {
        k->sparse = xmalloc(sizeof *k->sparse * (size_t)k->nkept);
        k->nsparse = 0;
    }
}

static int cmp_seqcall(const void *x, const void *y)
{
    const struct ta_seqcall *a = x, *b = y;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return (a->call > b->call) - (a->call < b->call);
}

/* sorts a sparse list, keeping the first call of a repeated seq; returns the repeats */
static int sparse_sort(ta_comm *k)
{
    if (k->byseq || !k->sparse) return 0;
    if (k->nsparse > 1) qsort(k->sparse, k->nsparse, sizeof *k->sparse, cmp_seqcall);
    uint32_t w = 0;
    for (uint32_t i = 0; i < k->nsparse; i++)
        if (!w || k->sparse[w - 1].seq != k->sparse[i].seq) k->sparse[w++] = k->sparse[i];
    int dup = (int)(k->nsparse - w);
    k->nsparse = w;
    return dup;
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* the seqs of g's tables: those its members kept */
static void gseq_build(const ta_an *a, ta_gcomm *n)
{
    uint64_t kept = 0;
    n->minseq = n->maxseq = 0;
    for (int p = 0; p < n->npos; p++) {
        if (n->member[p] < 0) continue;
        const ta_comm *k = &a->tr[n->member[p]]->comms[n->local[p]];
        if (!k->nkept) continue;
        if (!n->minseq || k->seq0 < n->minseq) n->minseq = k->seq0;
        if (k->nseq > n->maxseq) n->maxseq = k->nseq;
        kept += k->nkept;
    }
    n->nseqs = 0;
    n->seqv = NULL;
    if (!kept) return;
    uint64_t span = (uint64_t)n->maxseq - n->minseq + 1;
    if (dense_enough(span, kept)) { n->nseqs = (uint32_t)span; return; }
    uint32_t *v = xmalloc(sizeof(uint32_t) * (size_t)kept);
    size_t nv = 0;
    for (int p = 0; p < n->npos; p++) {
        if (n->member[p] < 0) continue;
        const ta_comm *k = &a->tr[n->member[p]]->comms[n->local[p]];
        if (k->byseq) {
            for (uint64_t s = k->seq0; s <= k->nseq; s++)
                if (k->byseq[s - k->seq0] >= 0) v[nv++] = (uint32_t)s;
        } else {
            for (uint32_t i = 0; i < k->nsparse; i++) v[nv++] = k->sparse[i].seq;
        }
    }
    if (nv > 1) qsort(v, nv, sizeof *v, cmp_u32);
    size_t w = 0;
    for (size_t i = 0; i < nv; i++)
        if (!w || v[w - 1] != v[i]) v[w++] = v[i];
    n->seqv = v;
    n->nseqs = (uint32_t)w;
}

/* ncclCommGrow: the existing members' grown communicator has an id derived
 * from the parent (the same on all of them), the new members' (who joined
 * through the uniqueId) is the uniqueId's hash; the existing root recorded
 * that hash (grow.uid). A Grow communicator without a parent whose uid an
 * existing root recorded is that communicator: it takes the existing
 * members' id (and parent). */
static void grow_join(ta_an *a)
{
    idmap roots = {0};
    uint64_t *parent = NULL;
    int nroots = 0;
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        for (int i = 0; i < t->ncomms; i++) {
            const ta_comm *c = &t->comms[i];
            if (strcmp(c->kind, "Grow") || !c->has_parent || !c->grow_uid) continue;
            int k = idmap_get(&roots, c->grow_uid);
            if (k >= 0) {
                if (parent[3 * k] != c->id)
                    ta_note_add(a, t->file, 0, "the grow of communicator 0x%016llx records the uniqueId 0x%016llx that "
                                "another grow (communicator 0x%016llx) recorded too; the first is used",
                                (unsigned long long)c->id, (unsigned long long)c->grow_uid,
                                (unsigned long long)parent[3 * k]);
                continue;
            }
            parent = xrealloc(parent, sizeof *parent * (size_t)(3 * nroots + 3));
            parent[3 * nroots] = c->id;
            parent[3 * nroots + 1] = c->parent;
            parent[3 * nroots + 2] = (uint64_t)c->family;
            idmap_put(&roots, c->grow_uid, nroots, nroots + 1);
            nroots++;
        }
    }
    for (int ti = 0; ti < a->ntr && nroots; ti++) {
        ta_trace *t = a->tr[ti];
        for (int i = 0; i < t->ncomms; i++) {
            ta_comm *c = &t->comms[i];
            if (strcmp(c->kind, "Grow") || c->has_parent || !c->grow_uid) continue;
            int k = idmap_get(&roots, c->grow_uid);
            if (k < 0) continue;
            int dup = 0;      /* already a member of it under the existing id: not joined twice */
            for (int j = 0; j < t->ncomms && !dup; j++) dup = j != i && t->comms[j].id == parent[3 * k];
            if (dup) continue;
            c->id = parent[3 * k];
            c->parent = parent[3 * k + 1];
            c->has_parent = 1;
            /* families are positions in a rank's list of communicators: a new member's list starts
             * with the grown one, which the existing members made later; its communicators from
             * there on take the existing members' positions */
            int off = (int)parent[3 * k + 2] - c->family;
            for (int j = i; j < t->ncomms && off > 0; j++) t->comms[j].family += off;
        }
    }
    free(roots.keys); free(roots.vals);
    free(parent);
}

void ta_align_free(ta_an *a)
{
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        free(n->member); free(n->local); free(n->seqv); free(n->sigbad);
    }
    free(a->gc);
    a->gc = NULL;
    a->ngc = 0;
    for (int t = 0; a->p2p_idx && t < a->ntr; t++) free(a->p2p_idx[t]);
    free(a->p2p_idx); free(a->p2p_n);
    a->p2p_idx = NULL;
    a->p2p_n = NULL;
}

void ta_align(ta_an *a)
{
    grow_join(a);
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
            if (n->size < 0 && c->grow_ranks > 0) n->size = c->grow_ranks;     /* a grown communicator: all of it */
            if (!n->has_parent && c->has_parent) { n->parent = c->parent; n->has_parent = 1; }
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
    a->p2p_idx = xcalloc((size_t)a->ntr, sizeof *a->p2p_idx);
    a->p2p_n = xcalloc((size_t)a->ntr, sizeof *a->p2p_n);
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        int64_t np2p = 0;
        for (int64_t i = 0; i < t->ncalls; i++) {
            const ta_call *c = &t->calls[i];
            if (c->seq == 0 || c->comm < 0) continue;
            if (ta_op_is_coll(c->op)) {
                ta_comm *k = &t->comms[c->comm];
                if (c->seq > k->nseq) k->nseq = c->seq;
                if (!k->seq0 || c->seq < k->seq0) k->seq0 = c->seq;
                k->nkept++;
            } else if (ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) {
                np2p++;
            }
        }
        for (int i = 0; i < t->ncomms; i++) {   /* the loader may have set it; else the lowest kept */
            if (!t->comms[i].first_seq) t->comms[i].first_seq = t->comms[i].seq0;
            byseq_alloc(&t->comms[i]);
        }
        int dup = 0;
        a->p2p_idx[ti] = xmalloc(sizeof(p2pkey) * (size_t)(np2p ? np2p : 1));
        for (int64_t i = 0; i < t->ncalls; i++) {
            const ta_call *c = &t->calls[i];
            if (c->seq == 0 || c->comm < 0) continue;
            if (ta_op_is_coll(c->op)) {
                ta_comm *k = &t->comms[c->comm];
                if (!k->byseq) k->sparse[k->nsparse++] = (struct ta_seqcall){c->seq, (int32_t)i};
                else if (k->byseq[c->seq - k->seq0] >= 0) dup++;
                else k->byseq[c->seq - k->seq0] = (int32_t)i;
            } else if (ta_op_is_p2p(c->op)) {
                a->p2p_idx[ti][a->p2p_n[ti]++] = (p2pkey){c->comm, c->rp, c->seq, c->op == OP_SEND, i};
            } else if (ta_op_is_onesided(c->op) && (ta_op_sends(c->op) || c->count > 0)) {
                /* (a wait for no signal waits for nothing) */
                a->p2p_idx[ti][a->p2p_n[ti]++] = (p2pkey){c->comm, c->rp, c->seq, ta_op_sends(c->op) ? 2 : 3, i};
            }
        }
        for (int i = 0; i < t->ncomms; i++) dup += sparse_sort(&t->comms[i]);
        if (a->p2p_n[ti] > 1) qsort(a->p2p_idx[ti], (size_t)a->p2p_n[ti], sizeof(p2pkey), cmp_p2p);
        for (int64_t i = 1; i < a->p2p_n[ti]; i++)
            if (!cmp_p2p(&a->p2p_idx[ti][i - 1], &a->p2p_idx[ti][i])) dup++;
        if (dup) ta_note_add(a, t->file, 0, "%d call(s) repeat a sequence number already used; the first is used", dup);
    }

    /* members' calls at each seq agree? */
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        gseq_build(a, n);
        n->sigbad = xcalloc((size_t)n->nseqs + 1, 1);
        for (uint32_t i = 0; i < n->nseqs; i++) {
            uint32_t s = ta_gseq_at(n, i);
            const ta_call *ref = NULL;
            for (int p = 0; p < n->npos; p++) {
                if (n->member[p] < 0) continue;
                const ta_trace *t = a->tr[n->member[p]];
                int64_t ci = ta_comm_call(&t->comms[n->local[p]], s);
                if (ci < 0) continue;
                const ta_call *c = &t->calls[ci];
                if (!ref) ref = c;
                else if (!ta_sig_equal(ref, c)) { n->sigbad[i] = 1; break; }
            }
        }
    }
}

/* ---- completion simulation ---- */
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
static ev *q;
static size_t qn, qcap, qh;
static simtr *S;
static int32_t **arrived;   /* per gcomm, per seq (index ta_gseq) */
static int *present;        /* per gcomm: members with traces */

/* The queue holds what is activated but not yet processed (about a unit per
 * rank and stream): once its processed head is most of it, the rest moves
 * to the front, so it does not grow with the job's calls. */
static void push(int t, int u)
{
    if (qn == qcap && qh > qn / 2) {
        memmove(q, q + qh, sizeof *q * (qn - qh));
        qn -= qh;
        qh = 0;
    }
    if (qn == qcap) { qcap = qcap ? qcap * 2 : 4096; q = xrealloc(q, sizeof *q * qcap); }
    q[qn++] = (ev){t, u};
}

static void unit_op_done(int t, int64_t ci)
{
    simtr *s = &S[t];
    if (s->call[ci].done) return;
    s->call[ci].done = 1;
    int u = s->call[ci].unit;
    if (--s->u[u].pending == 0) {
        int st = s->u[u].stream;
        s->head[st] = s->u[u].next;
        if (s->u[u].next >= 0) push(t, s->u[u].next);
    }
}

static void activate(ta_an *a, int t, int u)
{
    simtr *s = &S[t];
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
            if (si >= 0 && ++arrived[g][si] == present[g] && !n->sigbad[si]) {
                for (int p = 0; p < n->npos; p++) {
                    if (n->member[p] < 0) continue;
                    /* a member whose window lost it arrived long ago */
                    int64_t mci = ta_comm_call(&a->tr[n->member[p]]->comms[n->local[p]], c->seq);
                    if (mci >= 0) unit_op_done(n->member[p], mci);
                }
            }
        } else if (ta_op_is_onesided(c->op)) {
            int peer = c->rp, me = tr->comms[c->comm].rank;
            int pt = peer >= 0 && peer < n->npos ? n->member[peer] : -1;
            if (ta_op_sends(c->op)) {
                /* one-sided: sent once its stream reaches it; the target's wait for
                 * exactly this signal completes with it (an earlier one was waited for
                 * by an earlier wait, in order) */
                unit_op_done(t, ci);
                int64_t wc = pt >= 0 ? ta_p2p_find(a, pt, n->local[peer], me, 3, c->seq) : -1;
                if (wc >= 0 && S[pt].call[wc].unit >= 0 && S[pt].u[S[pt].call[wc].unit].active) unit_op_done(pt, wc);
                continue;
            }
            /* a wait: complete once the sender's signal #seq (or a later one) was sent; a
             * sender without a trace is assumed to send it (as for send/recv) */
            if (c->count <= 0 || pt < 0) { unit_op_done(t, ci); continue; }
            int64_t sc = ta_sig_find_from(a, pt, n->local[peer], me, c->seq, NULL);
            if (sc >= 0 ? S[pt].call[sc].done : ta_p2p_lost(a, pt, n->local[peer], me, 2, c->seq, ta_wall(tr, c->enter_ns)))
                unit_op_done(t, ci);
        } else {
            int peer = c->rp;
            if (peer < 0 || peer >= n->npos || n->member[peer] < 0) { unit_op_done(t, ci); continue; }
            int pt = n->member[peer];
            int64_t pc = ta_p2p_find(a, pt, n->local[peer], tr->comms[c->comm].rank, c->op == OP_RECV, c->seq);
            if (pc < 0) {
                /* the peer's half is older than its ring window: it was issued and matched */
                if (ta_p2p_lost(a, pt, n->local[peer], tr->comms[c->comm].rank, c->op == OP_RECV, c->seq,
                                ta_wall(tr, c->enter_ns)))
                    unit_op_done(t, ci);
                continue;
            }
            simtr *ps = &S[pt];
            if (ps->call[pc].unit < 0 || !ps->u[ps->call[pc].unit].active || ps->call[pc].done) continue;
            const ta_call *o = &a->tr[pt]->calls[pc];
            if (c->count * ta_dtype_size(c->dtype) != o->count * ta_dtype_size(o->dtype)) continue;
            unit_op_done(t, ci);
            unit_op_done(pt, pc);
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
typedef struct { int t; int64_t ci; } obsref;
static obsref *ow;
static size_t own, owcap;
static int *obs_noted;      /* per gcomm: a note was given */
static uint8_t **obs_coll;  /* per gcomm, per seq (ta_gseq): its members' parts already marked */

static void obs_push(int t, int64_t ci)
{
    simtr *s = &S[t];
    if (ci < 0 || s->call[ci].unit < 0 || s->call[ci].done) return;
    s->call[ci].done = 1;
    s->u[s->call[ci].unit].pending--;
    if (own == owcap) { owcap = owcap ? owcap * 2 : 1024; ow = xrealloc(ow, sizeof *ow * owcap); }
    ow[own++] = (obsref){t, ci};
}

static void obs_note(ta_an *a, int t, int64_t ci, int g, const char *why)
{
    if (obs_noted[g]++) return;
    char *c = ta_call_text(a, a->tr[t], ci);
    ta_note_add(a, NULL, 0, "%s completed on the GPU (rank %d's trace) although %s; the observation is trusted: "
                "it is not where the job hung", c, a->tr[t]->rank, why);
    free(c);
}

static void observe(ta_an *a, int32_t (*cursor)[256])
{
    own = 0;
    obs_noted = xcalloc((size_t)a->ngc + 1, sizeof *obs_noted);
    obs_coll = xcalloc((size_t)a->ngc + 1, sizeof *obs_coll);
    for (int t = 0; t < a->ntr; t++)
        for (int64_t i = 0; i < a->tr[t]->ncalls; i++)
            if (a->tr[t]->calls[i].gpu == GPU_DONE) obs_push(t, i);
    for (size_t w = 0; w < own; w++) {
        int t = ow[w].t;
        int64_t ci = ow[w].ci;
        simtr *s = &S[t];
        ta_trace *tr = a->tr[t];
        int u = s->call[ci].unit, st = s->u[u].stream;
        /* everything before it on its stream: units are numbered in issue order */
        while (cursor[t][st] >= 0 && cursor[t][st] < u) {
            int v = cursor[t][st];
            for (int k = 0; k < s->u[v].nops; k++) obs_push(t, s->ops[s->u[v].first + k]);
            cursor[t][st] = s->u[v].next;
        }
        const ta_call *c = &tr->calls[ci];
        int g = tr->comms[c->comm].g;
        ta_gcomm *n = &a->gc[g];
        if (ta_op_is_coll(c->op)) {
            int64_t si = ta_gseq(n, c->seq);
            if (si < 0) continue;
            if (!obs_coll[g]) obs_coll[g] = xcalloc((size_t)n->nseqs + 1, 1);
            if (obs_coll[g][si]) continue;        /* once per collective, not per member */
            obs_coll[g][si] = 1;
            if (n->sigbad[si]) obs_note(a, t, ci, g, "the members' calls differ");
            for (int p = 0; p < n->npos; p++) {
                int m = n->member[p];
                if (m < 0) continue;
                int64_t mci = ta_comm_call(&a->tr[m]->comms[n->local[p]], c->seq);
                if (mci >= 0) {
                    obs_push(m, mci);
                } else if (!ta_coll_lost(a, m, g, c->seq)) {
                    char *why = xasprintf("rank %d has no record of it", a->tr[m]->rank);
                    obs_note(a, t, ci, g, why);
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
                    obs_note(a, t, ci, g, "the send and the receive differ in size");
                obs_push(pt, pc);
            } else if (!ta_p2p_lost(a, pt, n->local[peer], me, c->op == OP_RECV, c->seq, ta_wall(tr, c->enter_ns))) {
                char *why = xasprintf("rank %d has no record of its other half", a->tr[pt]->rank);
                obs_note(a, t, ci, g, why);
                free(why);
            }
        }
    }
    free(ow); ow = NULL; own = owcap = 0;
    free(obs_noted); obs_noted = NULL;
    for (int g = 0; g < a->ngc; g++) free(obs_coll[g]);
    free(obs_coll); obs_coll = NULL;
}

void ta_simulate(ta_an *a, uint8_t ***out)
{
    S = xcalloc((size_t)a->ntr, sizeof *S);
    arrived = xcalloc((size_t)a->ngc + 1, sizeof *arrived);
    present = xcalloc((size_t)a->ngc + 1, sizeof *present);
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        arrived[g] = xcalloc((size_t)n->nseqs + 1, sizeof(int32_t));
        for (int p = 0; p < n->npos; p++) {
            if (n->member[p] < 0) continue;
            present[g]++;
            /* seqs older than the member's ring window: it issued them */
            uint32_t w = ta_window_start(a->tr[n->member[p]], n->local[p]);
            for (uint32_t i = 0; i < n->nseqs && ta_gseq_at(n, i) < w; i++) arrived[g][i]++;
        }
    }
    for (int t = 0; t < a->ntr; t++) {
        ta_trace *tr = a->tr[t];
        simtr *s = &S[t];
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
    for (int t = 0; t < a->ntr; t++) memcpy(cursor[t], S[t].head, sizeof cursor[t]);
    observe(a, cursor);
    free(cursor);
    for (int t = 0; t < a->ntr; t++) {
        simtr *s = &S[t];
        for (int k = 0; k < 256; k++) {
            while (s->head[k] >= 0 && s->u[s->head[k]].pending == 0) s->head[k] = s->u[s->head[k]].next;
            if (s->head[k] >= 0) push(t, s->head[k]);
        }
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
            int u = s->call[i].unit;
            if (u < 0 || s->call[i].done) continue;
            res[t][i] = s->u[u].active ? 1 : 2;
        }
        free(s->call); free(s->u); free(s->ops);
    }
    for (int g = 0; g < a->ngc; g++) free(arrived[g]);
    free(arrived); free(present); free(S); free(q);
    q = NULL; qn = qcap = qh = 0;
    *out = res;
}
