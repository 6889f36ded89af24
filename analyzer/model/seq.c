/* Per-seq tables, looked up (ta_seq.h); align.c builds them: a table
 * starts at the lowest seq kept, dense unless the seqs kept are too
 * scattered, then a sorted list searched here. */
#include "ta_seq.h"

int64_t ta_comm_call_sparse(const ta_comm *k, uint32_t s)
{
    uint32_t lo = 0, hi = k->nsparse;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (k->sparse[mid].seq < s) lo = mid + 1;
        else hi = mid;
    }
    return lo < k->nsparse && k->sparse[lo].seq == s ? k->sparse[lo].call : -1;
}

uint32_t ta_gseq_lower(const ta_gcomm *n, uint64_t s)
{
    if (s <= n->minseq) return 0;
    if (s > n->maxseq) return n->nseqs;
    if (!n->seqv) return (uint32_t)(s - n->minseq);
    uint32_t lo = 0, hi = n->nseqs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (n->seqv[mid] < s) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int64_t ta_gseq_sparse(const ta_gcomm *n, uint32_t s)
{
    uint32_t i = ta_gseq_lower(n, s);
    return i < n->nseqs && n->seqv[i] == s ? (int64_t)i : -1;
}

int64_t ta_call_at(const ta_an *a, int t, int g, uint32_t seq)
{
    int lc = ta_comm_local(a->tr[t], g);
    if (lc < 0) return -1;
    return ta_comm_call(&a->tr[t]->comms[lc], seq);
}
