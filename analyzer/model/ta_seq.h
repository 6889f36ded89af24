/* Per-seq tables, looked up (seq.c): a communicator's call at seq s on a
 * trace (ta_comm: byseq or sparse), and the index of seq s in the job-wide
 * tables of a communicator (ta_gcomm: sigbad, the replay's, nan.c's,
 * straggler.c's). align.c builds them.
 * (A part of model/'s boundary header, ta_model.h, which includes it.) */
#ifndef TA_SEQ_H
#define TA_SEQ_H

#include "ta_model.h"

/* comm k's call at seq s (-1 none); the index of seq s in g's tables (-1:
 * no member kept it); the seq at index i; the first index whose seq is >=
 * s (nseqs: none); the members' calls at s disagree */
int64_t ta_comm_call_sparse(const ta_comm *k, uint32_t s);
int64_t ta_gseq_sparse(const ta_gcomm *n, uint32_t s);
uint32_t ta_gseq_lower(const ta_gcomm *n, uint64_t s);
static inline int64_t ta_comm_call(const ta_comm *k, uint32_t s)
{
    if (!s || s < k->seq0 || s > k->nseq) return -1;
    return k->byseq ? k->byseq[s - k->seq0] : ta_comm_call_sparse(k, s);
}
static inline int64_t ta_gseq(const ta_gcomm *n, uint32_t s)
{
    if (!n->nseqs || s < n->minseq || s > n->maxseq) return -1;
    return n->seqv ? ta_gseq_sparse(n, s) : (int64_t)(s - n->minseq);
}
static inline uint32_t ta_gseq_at(const ta_gcomm *n, uint32_t i) { return n->seqv ? n->seqv[i] : n->minseq + i; }
static inline int ta_sigbad(const ta_gcomm *n, int64_t s)
{
    int64_t i = s > 0 && s <= UINT32_MAX ? ta_gseq(n, (uint32_t)s) : -1;
    return i >= 0 && n->sigbad[i];
}
/* trace t's collective seq of global comm g, -1 */
int64_t ta_call_at(const ta_an *a, int t, int g, uint32_t seq);

#endif
