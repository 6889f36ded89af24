/* Divergences older than the ring windows, from the communicators'
 * fingerprints (docs/analysis-format.md, "Fingerprints").
 *
 * Each rank keeps, per communicator, a rolling hash of the signature of
 * every collective since init, checkpointed at regular seqs (the interval
 * doubles, older checkpoints thinned, as the count grows). Two members with
 * equal hashes at checkpoint A and different ones at B issued different
 * collectives somewhere in (A, B]. Only seqs both sides hold are compared:
 * ranks at different seqs may have thinned differently. When that range is
 * older than some member's ring window, the per-call comparison cannot see
 * it and this is the only trace of the divergence: a finding with the
 * window of seqs and the ranks grouped by hash (the smallest group first,
 * the likely culprit). When the per-call comparison sees it, the
 * fingerprints only agree with it: nothing more is said. */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "model/ta_model.h"
#include "ta_finding.h"

/* hash of comm k at seq s: a checkpoint, or the last seq fingerprinted */
static int value_at(const ta_comm *k, uint64_t s, uint64_t *h)
{
    int lo = 0, hi = k->nckp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (k->ckp[mid].seq == s) { *h = k->ckp[mid].hash; return 1; }
        if (k->ckp[mid].seq < s) lo = mid + 1;
        else hi = mid - 1;
    }
    if (s && k->fp_seq == s) { *h = k->fp_hash; return 1; }
    return 0;
}

static int cmpu64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

typedef struct { int t; const ta_comm *k; uint64_t h; int grp; } fpmem;

/* a finding of this communicator, or the per-call comparison, already
 * covers a divergence in (after, upto] */
static int covered(const ta_an *a, int g, int nfirst, uint64_t after, uint64_t upto)
{
    const ta_gcomm *n = &a->gc[g];
    for (uint32_t i = ta_gseq_lower(n, after + 1); i < n->nseqs && ta_gseq_at(n, i) <= upto; i++)
        if (n->sigbad[i]) return 1;
    for (int i = 0; i < nfirst; i++) {
        const ta_finding *f = &a->f[i];
        if (f->g == g && f->seq > (int64_t)after && f->seq <= (int64_t)upto) return 1;
        if (f->stop_g == g && f->stop_seq > (int64_t)after && f->stop_seq <= (int64_t)upto) return 1;
    }
    return 0;
}

static char *hex(uint64_t h) { return xasprintf("0x%016llx", (unsigned long long)h); }

static void describe(ta_an *a, ta_finding *f, const fpmem *m, const int *late, int nlate)
{
    char *range = f->win_after > 0 ? xasprintf("#%lld and #%lld", (long long)f->win_after + 1, (long long)f->win_upto)
                                    : xasprintf("its initialisation and #%lld", (long long)f->win_upto);
    char *span = xasprintf("#%lld-#%lld", (long long)f->win_after + 1, (long long)f->win_upto);
    int *lr = xmalloc(sizeof(int) * (size_t)(nlate + 1));
    uint32_t wmin = UINT32_MAX;
    int unloaded = 0;     /* a window is the call budget's, not (only) a ring's: the calls are in the files */
    for (int i = 0; i < nlate; i++) {
        lr[i] = a->tr[m[late[i]].t]->rank;
        unloaded |= a->tr[m[late[i]].t]->unloaded > 0;
        uint32_t w = ta_window_start(a->tr[m[late[i]].t], (int)(m[late[i]].k - a->tr[m[late[i]].t]->comms));
        if (w < wmin) wmin = w;
    }
    ta_ints_sort(lr, nlate);
    char *lt = ta_ranks_text(lr, nlate);
    char *groups = xstrdup("");
    for (int j = 0; j < f->nfpg; j++) {
        char *r = ta_ranks_text(f->fpg[j].ranks, f->fpg[j].nranks), *h = hex(f->fpg[j].hash);
        char *n = xasprintf("%s%s rank%s %s %s", groups, j ? (j == f->nfpg - 1 ? " and" : ",") : "",
                            f->fpg[j].nranks > 1 ? "s" : "", r, h);
        free(groups); free(r); free(h);
        groups = n;
    }
    char *cr = ta_ranks_text(f->culprit.ranks, f->culprit.nranks);
    char *agree = f->win_after > 0 ? xasprintf("at #%lld all of them agreed", (long long)f->win_after)
                                   : xstrdup("no earlier checkpoint is held by all of them");
    char *tie = f->fp_tie ? xasprintf("; the smallest groups are of equal size, so the culprit is not clear: "
                                      "rank%s %s %s named first because %s the lowest rank",
                                      f->culprit.nranks > 1 ? "s" : "", cr, f->culprit.nranks > 1 ? "are" : "is",
                                      f->culprit.nranks > 1 ? "they include" : "it is")
                          : xstrdup("");
    f->message = xasprintf("the collectives of communicator %s diverged between %s, before the oldest call kept in "
                           "the trace of rank%s %s (%s window from #%u on): the fingerprints at checkpoint #%lld "
                           "are%s; %s%s. %s",
                           ta_comm_name(a, f->g), range, nlate > 1 ? "s" : "", lt, unloaded ? "loaded" : "ring", wmin,
                           (long long)f->win_upto, groups, agree, tie,
                           unloaded ? "The calls themselves were not loaded (the call budget, --max-calls)"
                                    : "The calls themselves are gone from the ring");
    f->hint = xasprintf("rank%s %s issued a different collective (operation, count, datatype, reduction or root), or "
                        "one more or fewer, somewhere in %s: look for a rank-specific branch or uneven data there; %s",
                        f->culprit.nranks > 1 ? "s" : "", cr, span,
                        unloaded ? "run tranalyze with --max-calls 0 (every call) or a larger budget to see the calls "
                                   "themselves"
                                 : "raise TRSHIM_RING (records kept per rank, default 131072) so that the calls "
                                   "themselves stay in the trace");
    free(range); free(span); free(lr); free(lt); free(groups); free(cr); free(agree); free(tie);
}

static void scan_comm(ta_an *a, int g, int nfirst)
{
    const ta_gcomm *n = &a->gc[g];
    /* sized by the members with traces, not by the places (a crafted size) */
    int present = 0;
    for (int p = 0; p < n->npos; p++) present += n->member[p] >= 0;
    fpmem *m = xmalloc(sizeof *m * (size_t)(present + 1));
    int nm = 0;
    size_t nseqs = 0;
    for (int p = 0; p < n->npos; p++) {
        if (n->member[p] < 0) continue;
        const ta_comm *k = &a->tr[n->member[p]]->comms[n->local[p]];
        if (!k->nckp && !k->fp_seq) continue;
        m[nm++] = (fpmem){n->member[p], k, 0, -1};
        nseqs += (size_t)k->nckp + 1;
    }
    uint64_t *seqs = NULL;
    int *late = NULL;
    if (nm < 2) goto done;
    seqs = xmalloc(sizeof *seqs * nseqs);
    size_t ns = 0;
    for (int i = 0; i < nm; i++) {
        for (int c = 0; c < m[i].k->nckp; c++) seqs[ns++] = m[i].k->ckp[c].seq;
        if (m[i].k->fp_seq) seqs[ns++] = m[i].k->fp_seq;
    }
    if (ns > 1) qsort(seqs, ns, sizeof *seqs, cmpu64);
    size_t nu = 0;
    for (size_t i = 0; i < ns; i++)
        if (!nu || seqs[nu - 1] != seqs[i]) seqs[nu++] = seqs[i];
    /* B: the first seq held by two or more members whose hashes differ */
    size_t bi = nu;
    for (size_t i = 0; i < nu && bi == nu; i++) {
        int have = 0, differ = 0;
        uint64_t first = 0, h;
        for (int j = 0; j < nm; j++) {
            if (!value_at(m[j].k, seqs[i], &h)) continue;
            if (!have++) first = h;
            else if (h != first) differ = 1;
        }
        if (have >= 2 && differ) bi = i;
    }
    if (bi == nu) goto done;
    uint64_t B = seqs[bi], A = 0;
    /* those compared at B; A: the last earlier seq all of them hold (they agree there, else it would be B) */
    int np = 0;
    for (int j = 0; j < nm; j++)
        if (value_at(m[j].k, B, &m[j].h)) m[np++] = m[j];
    for (size_t i = bi; i-- > 0 && !A;) {
        int all = 1;
        uint64_t h;
        for (int j = 0; j < np && all; j++) all = value_at(m[j].k, seqs[i], &h);
        if (all) A = seqs[i];
    }
    /* seen by the per-call comparison only if every member still holds (A, B] */
    late = xmalloc(sizeof(int) * (size_t)(np + 1));
    int nlate = 0;
    for (int j = 0; j < np; j++)
        if (ta_window_start(a->tr[m[j].t], (int)(m[j].k - a->tr[m[j].t]->comms)) > A + 1) late[nlate++] = j;
    if (!nlate || covered(a, g, nfirst, A, B)) goto done;

    /* groups by hash; the smallest first (ties: the one with the lowest rank) */
    ta_finding *f = ta_finding_new(a, K_DIVERGENCE);
    f->subkind = SK_BEFORE_WINDOW;
    f->g = g;
    f->seq = -1;
    f->win_after = (int64_t)A;
    f->win_upto = (int64_t)B;
    f->fpg = xcalloc((size_t)np, sizeof *f->fpg);
    int *low = xmalloc(sizeof(int) * (size_t)np);
    for (int j = 0; j < np; j++) {
        int q;
        for (q = 0; q < f->nfpg; q++) if (f->fpg[q].hash == m[j].h) break;
        if (q == f->nfpg) {
            f->fpg[f->nfpg].hash = m[j].h;
            f->fpg[f->nfpg].ranks = xmalloc(sizeof(int) * (size_t)np);
            low[f->nfpg++] = a->tr[m[j].t]->rank;
        }
        ta_fpgroup *gr = &f->fpg[q];
        gr->ranks[gr->nranks++] = a->tr[m[j].t]->rank;
        if (a->tr[m[j].t]->rank < low[q]) low[q] = a->tr[m[j].t]->rank;
        m[j].grp = q;
    }
    for (int i = 1; i < f->nfpg; i++)        /* insertion sort: size, then lowest rank */
        for (int j = i; j > 0; j--) {
            ta_fpgroup *x = &f->fpg[j - 1], *y = &f->fpg[j];
            if (x->nranks < y->nranks || (x->nranks == y->nranks && low[j - 1] < low[j])) break;
            ta_fpgroup tg = *x; *x = *y; *y = tg;
            int tl = low[j - 1]; low[j - 1] = low[j]; low[j] = tl;
        }
    for (int q = 0; q < f->nfpg; q++) ta_ints_sort(f->fpg[q].ranks, f->fpg[q].nranks);
    f->fp_tie = f->nfpg >= 2 && f->fpg[0].nranks == f->fpg[1].nranks;
    int ct = -1;
    int *ot = xmalloc(sizeof(int) * (size_t)np), no = 0;
    for (int j = 0; j < np; j++) {
        if (f->fpg[0].hash == m[j].h) { if (ct < 0 || a->tr[m[j].t]->rank < a->tr[ct]->rank) ct = m[j].t; }
        else ot[no++] = a->tr[m[j].t]->rank;
    }
    ta_side_set(&f->culprit, f->fpg[0].ranks, f->fpg[0].nranks, ct, -1);
    ta_side_set(&f->other, ot, no, -1, -1);
    f->t = 0;
    describe(a, f, m, late, nlate);
    free(low); free(ot);
done:
    free(m); free(seqs); free(late);
}

void ta_findings_fingerprint(ta_an *a)
{
    int nfirst = a->nf;
    for (int g = 0; g < a->ngc; g++) scan_comm(a, g, nfirst);
}
