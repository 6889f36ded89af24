/* Send/recv (kind p2p): a send or receive whose peer never issued its
 * half, found by the hang analysis (rootcause.c); and here, matched pairs
 * of different count or datatype that did not hang. The kind's writers. */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "ta_finding.h"
#include "ta_tx.h"

/* Matched send/recv pairs whose count or datatype differ although the pair
 * did not hang (same number of bytes): the first such pair of each
 * (communicator, sender, receiver). Pairs already reported are skipped. */
void ta_detect_p2p(ta_an *a, int look)
{
    if (look != TA_LOOK_CALLS) return;
    int nfirst = a->nf;
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        int *seen_peer = NULL;
        int nseen = 0;
        for (int64_t i = 0; i < t->ncalls; i++) {
            const ta_call *c = &t->calls[i];
            if (c->op != OP_SEND || c->seq == 0 || c->comm < 0 || t->comms[c->comm].g < 0) continue;
            const ta_gcomm *n = &a->gc[t->comms[c->comm].g];
            if (c->rp < 0 || c->rp >= n->npos || n->member[c->rp] < 0) continue;
            int pt = n->member[c->rp];
            int64_t pc = ta_p2p_find(a, pt, n->local[c->rp], t->comms[c->comm].rank, 0, c->seq);
            if (pc < 0) continue;
            const ta_call *r = &a->tr[pt]->calls[pc];
            if (r->count == c->count && r->dtype == c->dtype) continue;
            int key = t->comms[c->comm].g * 65536 + c->rp, dup = 0;
            for (int k = 0; k < nseen; k++) dup |= seen_peer[k] == key;
            if (dup) continue;
            seen_peer = xrealloc(seen_peer, sizeof(int) * (size_t)(nseen + 1));
            seen_peer[nseen++] = key;
            int g = t->comms[c->comm].g;
            for (int k = 0; k < nfirst; k++)
                if (a->f[k].kind == K_P2P && a->f[k].g == g && a->f[k].seq == c->seq) dup = 1;
            if (dup) continue;
            ta_finding *f = ta_finding_new(a, K_P2P);
            f->subkind = SK_SIZE_MISMATCH;
            f->g = g;
            f->seq = c->seq;
            int r1 = t->rank, r2 = a->tr[pt]->rank;
            ta_side_set(&f->culprit, &r1, 1, ti, i);
            ta_side_set(&f->other, &r2, 1, pt, pc);
            f->t = ta_wall(t, c->enter_ns);
            ta_finding_describe(a, f);
        }
        free(seen_peer);
    }
}

/* text: "send/recv #seq" in the heading; the culprit's call and the others' (a missing
 * half: the culprit's last call, the call the others wait in) */
void ta_text_p2p(ta_tx *x, const ta_finding *f)
{
    char *at = xasprintf("send/recv #%lld", (long long)f->seq);
    ta_tx_head_sides(x, f, at);
    free(at);
    int miss = f->subkind != SK_SIZE_MISMATCH;
    ta_tx_side(x, &f->culprit, miss ? " (last call)" : "");
    ta_tx_side(x, &f->other, miss ? " (waiting in)" : "");
}
