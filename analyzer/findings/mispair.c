/* Silent mis-pairing: a rank whose collectives on a communicator are
 * shifted against its peers' although nothing hung (a data loader that
 * gives one rank no micro-batch in one step and two in a later one; a rank
 * that skips a gradient AllReduce and makes it up later). Every call has
 * the same arguments as its peers', so NCCL pairs them and the job goes
 * on, reducing data of different steps together. The only trace of it is
 * the order of the rank's calls across its communicators.
 *
 * Ranks are comparable when they belong to the same communicator families
 * and issued the same number of collectives on each (pipeline stages that
 * do different work per step are not compared with each other). Among
 * comparable ranks, those whose whole order of calls (family, operation,
 * arguments) differs from the order most of them share are compared with
 * those (diverge.c); a shift that NCCL paired with a call of another step
 * (a skipped call made up later, or an extra call that a missing one made
 * up for) is a divergence finding at its first shifted sequence number.
 * When the comparable ranks do not mostly agree on one order (collectives
 * issued from several threads in a timing-dependent order), nothing is
 * reported. */
#include <stdlib.h>
#include <string.h>

#include "ta_finding.h"

#define MISPAIR_CANDIDATES_MAX 64
#define MISPAIR_PEERS_MAX 16

typedef struct {
    int t;
    uint64_t mask, counts, order;   /* families, collectives per family, order of calls (hashes) */
} shape;

static int cmp_shape(const void *x, const void *y)
{
    const shape *a = x, *b = y;
    if (a->mask != b->mask) return a->mask < b->mask ? -1 : 1;
    if (a->counts != b->counts) return a->counts < b->counts ? -1 : 1;
    if (a->order != b->order) return a->order < b->order ? -1 : 1;
    return (a->t > b->t) - (a->t < b->t);
}

static void shape_of(const ta_trace *tr, int t, shape *s)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    int nf = tr->ncomms;
    int64_t *per = xcalloc((size_t)nf + 1, sizeof(int64_t));
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < nf; i++)
        if (tr->comms[i].nseq) s->mask |= ta_fam_bit(tr->comms[i].family);
    for (int64_t i = 0; i < tr->ncalls; i++) {
        const ta_call *c = &tr->calls[i];
        if (!ta_op_is_coll(c->op) || !c->seq || c->comm < 0) continue;
        int fam = tr->comms[c->comm].family;
        if (fam >= 0 && fam < nf) per[fam]++;
        h = ta_hash64(h, (uint64_t)fam);
        h = ta_hash64(h, (uint64_t)ta_op_norm(c->op) | (uint64_t)c->dtype << 8 | (uint64_t)c->redop << 16 |
                             (uint64_t)(ta_op_rooted(c->op) ? (uint32_t)c->rp : 0) << 24);
        h = ta_hash64(h, (uint64_t)c->count);
    }
    uint64_t ch = 0x51afd7ed558ccd6dull;
    for (int f = 0; f < nf; f++) ch = ta_hash64(ta_hash64(ch, (uint64_t)f), (uint64_t)per[f]);
    s->counts = ch;
    s->order = h;
    free(per);
}

/* a rank already named as a culprit of a finding */
static int named(const ta_an *a, int rank)
{
    for (int i = 0; i < a->nf; i++)
        for (int k = 0; k < a->f[i].culprit.nranks; k++)
            if (a->f[i].culprit.ranks[k] == rank) return 1;
    return 0;
}

void ta_findings_mispair(ta_an *a)
{
    if (a->ntr < 3) return;
    shape *sv = xmalloc(sizeof *sv * (size_t)a->ntr);
    for (int t = 0; t < a->ntr; t++) shape_of(a->tr[t], t, &sv[t]);
    if (a->ntr > 1) qsort(sv, (size_t)a->ntr, sizeof *sv, cmp_shape);
    int *peers = xmalloc(sizeof(int) * MISPAIR_PEERS_MAX);
    int ncand = 0;
    for (int i = 0, j; i < a->ntr && ncand < MISPAIR_CANDIDATES_MAX; i = j) {
        /* sv[i..j): comparable ranks, sorted by order */
        for (j = i; j < a->ntr && sv[j].mask == sv[i].mask && sv[j].counts == sv[i].counts; j++) {}
        int n = j - i, best = i, bestn = 0;
        for (int k = i, l; k < j; k = l) {
            for (l = k; l < j && sv[l].order == sv[k].order; l++) {}
            if (l - k > bestn) { bestn = l - k; best = k; }
        }
        /* most of them, at least three, share one order; the rest differ */
        if (bestn == n || bestn < 3 || 3 * bestn < 2 * n) continue;
        int np = 0;
        for (int k = best; k < best + bestn && np < MISPAIR_PEERS_MAX; k++) peers[np++] = sv[k].t;
        for (int k = i; k < j && ncand < MISPAIR_CANDIDATES_MAX; k++) {
            if (sv[k].order == sv[best].order) continue;
            int r = sv[k].t;
            if (named(a, a->tr[r]->rank)) continue;
            ncand++;
            ta_finding f;
            ta_finding_init(&f, K_DIVERGENCE);
            int rank = a->tr[r]->rank;
            ta_side_set(&f.culprit, &rank, 1, r, -1);
            /* a shift NCCL paired with another step's call, nothing else:
             * an order of independent communicators that differs once is
             * not a mis-pairing */
            int keep = ta_move_earlier(a, &f, r, peers, np, -1) &&
                       ((f.subkind == SK_SKIPPED_CALL && f.mis_call >= 0) || f.subkind == SK_EXTRA_CALL);
            if (!keep) {
                free(f.culprit.ranks); free(f.other.ranks);
                continue;
            }
            ta_finding_describe(a, &f);
            ta_finding_add(a, &f);
        }
    }
    ta_diverge_done(a);
    free(sv); free(peers);
}
