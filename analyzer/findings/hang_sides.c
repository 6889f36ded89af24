/* The sides of the hang analysis's root findings (ta_hang.h): the culprits'
 * end and last call, a missing finding's others, and the members that had
 * not issued its collective either. Every claim about a member comes from
 * the calls its trace holds, the same calls the finding's stuck_at block
 * (members.c) and the rank table's last seq are made of: a rank said to
 * have issued a collective has a call at that seq. */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_crash_out.h"
#include "ta_hang.h"

void ta_hang_end_info(ta_an *a, ta_finding *f, const int *cul_t, int ncul)
{
    char *extra = xstrdup("");
    for (int k = 0; k < ncul && k < 4; k++) {
        ta_trace *t = a->tr[cul_t[k]];
        char *cr = ta_crash_text(a, t);      /* crash.c: where it crashed, NULL */
        char *e0 = cr ? cr : ta_pyexc_text(a, t);   /* crash.c: the uncaught Python exception, NULL */
        if (!e0) e0 = ta_end_text(a, t);
        char *es = ta_errors_suffix(a, t);
        char *e = xasprintf("%s%s", e0, es);
        free(e0); free(es);
        int64_t lc;
        char *last;
        if (ta_last_call(t, &lc)) {
            char *c = ta_call_text(a, t, lc), *s = ta_call_site_text(a, t, lc);
            const ta_call *lcall = &t->calls[lc];
            /* a culprit may itself be waiting inside its last call: say so */
            int w = ta_call_waiting(t, lcall);
            char *in = w && lcall->gpu == GPU_PENDING ? xasprintf(", enqueued on the GPU and not complete %.1f s later",
                                                                  ta_pending_s(t, lcall))
                       : w ? xstrdup(", which had not returned") : xstrdup("");
            last = xasprintf("its last call was %s at %s%s", c, s, in);
            free(c); free(s); free(in);
        } else {
            last = xstrdup("it made no NCCL call");
        }
        char *n = xasprintf("%s; rank %d %s%s, %s", extra, t->rank, t->end_state == END_SIGNAL && !cr ? "was " : "", e, last);
        free(extra); free(e); free(last);
        extra = n;
    }
    char *pe = ta_peer_errors_text(a, cul_t, ncul);     /* crash.c: the others' NCCL errors */
    char *m = xasprintf("%s%s%s", f->message, extra, pe);
    free(f->message); free(extra); free(pe);
    f->message = m;
}

static int has(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++) if (v[i] == x) return 1;
    return 0;
}

void ta_hang_missing_others(ta_an *a, ta_finding *f, int rep_t, int64_t rep_c)
{
    const ta_gcomm *n = &a->gc[f->g];
    int *o = xmalloc(sizeof(int) * (size_t)(n->npos + 1)), no = 0, first_t = -1;
    int64_t first_c = -1;
    for (int p = 0; p < n->npos; p++) {
        int m = n->member[p];
        int64_t ci = m >= 0 && !has(f->culprit.ranks, f->culprit.nranks, a->tr[m]->rank)
                         ? ta_call_at(a, m, f->g, (uint32_t)f->seq) : -1;
        if (ci < 0) continue;
        if (first_t < 0) first_t = m, first_c = ci;
        o[no++] = a->tr[m]->rank;
    }
    /* the representative call is one of theirs (the earliest waiter's; else the first of them) */
    if (rep_t < 0 || has(f->culprit.ranks, f->culprit.nranks, a->tr[rep_t]->rank) ||
        ta_call_at(a, rep_t, f->g, (uint32_t)f->seq) < 0)
        rep_t = first_t, rep_c = first_c;
    ta_side_set(&f->other, o, no, rep_t, rep_c);
    free(o);
}

char *ta_hang_behind_text(ta_an *a, const ta_finding *f)
{
    if (f->g < 0 || f->g >= a->ngc || f->seq < 0) return NULL;
    const ta_gcomm *n = &a->gc[f->g];
    int *r = xmalloc(sizeof(int) * (size_t)(n->npos + 1)), nr = 0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int p = 0; p < n->npos; p++) {
        int m = n->member[p];
        if (m < 0) continue;
        const ta_trace *t = a->tr[m];
        if (has(f->culprit.ranks, f->culprit.nranks, t->rank) || ta_call_at(a, m, f->g, (uint32_t)f->seq) >= 0) continue;
        /* older than its ring window: it issued it and went on */
        if (ta_coll_lost(a, m, f->g, (uint32_t)f->seq)) continue;
        r[nr++] = t->rank;
        int lc = ta_comm_local(t, f->g);
        uint32_t s = lc >= 0 ? t->comms[lc].nseq : 0;
        if (s < lo) lo = s;
        if (s > hi) hi = s;
    }
    /* none of them issued a collective there yet: no last one to give */
    char *out = NULL;
    if (nr) {
        ta_ints_sort(r, nr);
        char *rt = ta_ranks_text(r, nr);
        char *seqs = !hi ? xstrdup("") : lo == hi ? xasprintf(" (%s last collective on this communicator: #%u)",
                                                              nr > 1 ? "their" : "its", lo)
                                 : xasprintf(" (their last collectives on this communicator: #%u-#%u)", lo, hi);
        out = xasprintf("; rank%s %s had not issued it either: %s in an earlier call%s", nr > 1 ? "s" : "", rt,
                        nr > 1 ? "each waits" : "it waits", seqs);
        free(rt); free(seqs);
    }
    free(r);
    return out;
}
