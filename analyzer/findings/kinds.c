/* The table of finding kinds (ta_kinds.h), the detectors run in its order,
 * the findings ordered by it, root causes first, and freed by it (each
 * kind's data by its drop). */
#include <stdlib.h>

#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_tx.h"

#define TA_KIND_ROW_(id, name_, rank_, flags_, detect_, json_, text_, drop_) \
    [K_##id] = {.rank = rank_, .flags = flags_, .detect = detect_, .json = json_, .text = text_, .drop = drop_},
const ta_kind ta_kinds[K_N] = {TA_KINDS(TA_KIND_ROW_)};
#undef TA_KIND_ROW_

void ta_kinds_detect(ta_an *a, void (*done)(const char *what))
{
    for (int look = 0; look < TA_LOOKS; look++)
        for (int k = 0; k < K_N; k++) {
            if (!ta_kinds[k].detect) continue;
            ta_kinds[k].detect(a, look);
            if (done) done(ta_kind_names[k]);
        }
}

/* place of f in the ordering: 0 a TA_KF_ROOT_RANK finding of a root rank of
 * the hang, 1 a root cause of the hang, else its kind's rank */
static int rank_of(const ta_an *a, const ta_finding *f)
{
    const ta_kind *k = &ta_kinds[f->kind];
    if (k->flags & TA_KF_ROOT_RANK)
        for (int t = 0; t < a->ntr; t++)
            if (a->root[t] && a->tr[t]->rank == f->culprit.ranks[0]) return 0;
    if (f->root) return 1;
    return k->rank;
}

void ta_kinds_rank(ta_an *a)
{
    /* by rank, stable */
    int *rk = xmalloc(sizeof(int) * (size_t)(a->nf + 1)), maxrank = 1;
    for (int i = 0; i < a->nf; i++) {
        rk[i] = rank_of(a, &a->f[i]);
        if (rk[i] > maxrank) maxrank = rk[i];
    }
    ta_finding *sorted = xmalloc(sizeof *sorted * (size_t)(a->nf + 1));
    int n = 0, anyroot = 0;
    for (int r = 0; r <= maxrank; r++)
        for (int i = 0; i < a->nf; i++)
            if (rk[i] == r) {
                sorted[n] = a->f[i];
                if (r == 0) sorted[n].root = 1;
                anyroot |= sorted[n++].root;
            }
    free(rk);
    free(a->f);
    a->f = sorted;
    /* nothing hung: the first finding is the root cause, unless its kind never is
     * (a straggler: slow, not broken; the job has no root cause then) */
    if (!anyroot && a->nf && !(ta_kinds[a->f[0].kind].flags & TA_KF_NEVER_ROOT)) {
        a->f[0].root = 1;
        /* its culprits in the rank table (a NaN born on some ranks' inputs: those ranks) */
        if (a->f[0].root_ranks)
            for (int k = 0; k < a->f[0].culprit.nranks; k++)
                for (int t = 0; t < a->ntr; t++)
                    if (a->tr[t]->rank == a->f[0].culprit.ranks[k]) a->root[t] = 1;
    }
}

/* ---- freeing: a finding's common parts, then its kind's data (the table's drop) ---- */
static void side_free(ta_side *s)
{
    free(s->ranks);
    free(s->what);
}

void ta_finding_free(ta_finding *f)
{
    side_free(&f->culprit);
    side_free(&f->other);
    free(f->message);
    free(f->hint);
    for (int k = 0; k < f->ncons; k++) { free(f->cons[k].what); free(f->cons[k].waiting); free(f->cons[k].waitfor); }
    free(f->cons);
    free(f->mem);
    for (int k = 0; k < f->nfpg; k++) free(f->fpg[k].ranks);
    free(f->fpg);
    if (f->glaunch) {
        for (int k = 0; k < f->glaunch->ngroups; k++) free(f->glaunch->groups[k].ranks);
        free(f->glaunch->groups);
        free(f->glaunch);
    }
    if (f->data && f->kind >= 0 && f->kind < K_N && ta_kinds[f->kind].drop) ta_kinds[f->kind].drop(f->data);
    else free(f->data);
}

void ta_findings_free(ta_an *a)
{
    for (int i = 0; i < a->nf; i++) ta_finding_free(&a->f[i]);
    free(a->f);
    a->f = NULL;
    a->nf = 0;
    free(a->stuck);
    free(a->root);
    a->stuck = a->root = NULL;
    for (int i = 0; i < a->nwarns; i++) {
        ta_warning *w = &a->warns[i];
        free(w->kind); free(w->text); free(w->library); free(w->functions); free(w->ranks);
    }
    free(a->warns);
    a->warns = NULL;
    a->nwarns = 0;
}
