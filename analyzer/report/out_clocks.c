/* --json's "clocks": how each clock domain was put on the job's one clock
 * (clocks.c), for tools that compare times across ranks. */
#include <stdint.h>
#include <stdlib.h>

#include "align/ta_align.h"
#include "findings/ta_finding.h"
#include "ta_out.h"

static void bound(ta_jw *w, const char *k, int64_t v, int64_t unbounded)
{
    jw_intn(w, k, v, v == unbounded);
}

void ta_json_clocks(ta_jw *w, const ta_an *a)
{
    const ta_clocks *ck = a->clk;
    jw_key(w, "clocks");
    if (!ck || !ck->nd) { fputs("null", w->o); return; }
    const ta_clock_domain *R = &ck->d[ck->ref];
    jw_open(w, '{');
    jw_int(w, "reference_rank", a->tr[R->tr[0]]->rank);
    jw_intn(w, "max_err_ns", ck->max_err_ns, ck->max_err_ns < 0);
    jw_key(w, "domains");
    jw_open(w, '[');
    for (int d = 0; d < ck->nd; d++) {
        const ta_clock_domain *D = &ck->d[d];
        int *ranks = xmalloc(sizeof(int) * (size_t)D->ntr);
        for (int k = 0; k < D->ntr; k++) ranks[k] = a->tr[D->tr[k]]->rank;
        jw_sep(w);
        jw_open(w, '{');
        jw_ints(w, "ranks", ranks, D->ntr);
        free(ranks);
        jw_str(w, "host", D->host);
        jw_str(w, "method", d == ck->ref ? "reference" : ta_clock_method_names[D->method]);
        /* its CLOCK_MONOTONIC minus the reference's at one instant */
        jw_int(w, "monotonic_offset_ns", R->off_ns - D->off_ns);
        jw_intn(w, "err_ns", D->err_ns, D->err_ns < 0);
        bound(w, "causal_lo_ns", D->lo_ns, INT64_MIN);
        bound(w, "causal_hi_ns", D->hi_ns, INT64_MAX);
        jw_int(w, "wall_skew_ns", D->wall_skew_ns);
        jw_bool(w, "wall_refuted", D->wall_refuted);
        jw_bool(w, "split", D->split);
        jw_int(w, "samples", D->samples);
        jw_int(w, "drift_ns", D->drift_ns);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}
