/* Alignment: the job's communicators (members by global rank, from the
 * traces), per-communicator per-sequence tables of collectives, send/recv
 * and signals matched per (communicator, sender, receiver) in order: the
 * tables the completion simulation (simulate.c) and the findings look up. A
 * trace whose ring lost its oldest records covers only a window: what lies
 * before it is unknown (issued, and passed), never missing. */
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
    for (int t = 0; a->never_done && t < a->ntr; t++) free(a->never_done[t]);
    free(a->never_done);
    a->never_done = NULL;
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
