/* The call budget (issue 17; docs/analysis-format.md, "Memory: the call
 * budget"): what the analysis holds grows with the number of ranks, not
 * with the records per rank.
 *
 * The diagnosis needs every rank's summary (communicators, their last seqs
 * and fingerprints, the end state, memory peaks), which is small and always
 * loaded, and the calls near the end of the job, where a hang is: the
 * stuck collectives and the calls that led to them. The calls before are
 * needed only for a divergence or a NaN that started there, and the
 * fingerprints already find a divergence outside the calls held (as they
 * do for a ring that overwrote its oldest records).
 *
 * So each trace keeps at most its share of --max-calls (the budget divided
 * by the input files, never fewer than TA_BUDGET_FLOOR): its newest calls,
 * as a ring window would. The older ones are treated exactly like calls a
 * ring lost (ring_lost counts them too; `unloaded` tells them apart): they
 * were issued, what they were is unknown. The cut is made as soon as a file
 * is read (by the loading thread), so the peak is the budget plus the files
 * being read, and once more after CUDA graph launches are expanded.
 *
 * The first call of a trace that had a non-finite NaN/Inf check, and the
 * first that returned an error, are kept when the window can be widened to
 * them within TA_BUDGET_WIDEN times the share: where a NaN began is what the
 * nan analysis must see. So is, on a second reading (main.c), the first
 * call after a divergence the fingerprints placed before the windows. */
#include <stdlib.h>
#include <string.h>

#include "ta_load.h"

#define TA_BUDGET_WIDEN 4
#define TA_BUDGET_MARGIN 16     /* calls kept before such a call (the calls that led to it) */

int64_t ta_budget_share(int64_t max_calls, int nfiles)
{
    if (max_calls <= 0) return 0;
    int64_t share = max_calls / (nfiles > 0 ? nfiles : 1);
    return share < TA_BUDGET_FLOOR ? TA_BUDGET_FLOOR : share;
}

/* a call a second reading asks for: of an anchor's communicator, numbered after its seq */
static int anchored(const ta_an *a, const ta_trace *t, const ta_call *c)
{
    if (c->comm < 0 || c->comm >= t->ncomms || !ta_op_is_coll(c->op)) return 0;
    for (int k = 0; k < a->nanchors; k++)
        if (t->comms[c->comm].id == a->anchors[k].comm && c->seq > a->anchors[k].after) return 1;
    return 0;
}

/* the first call to keep: the newest `share`, widened back to a point that matters */
static int64_t window_start(const ta_an *a, const ta_trace *t, int64_t share)
{
    int64_t from = t->ncalls - share, widest = t->ncalls - share * TA_BUDGET_WIDEN;
    if (widest < 0) widest = 0;
    int64_t point = -1;
    for (int64_t k = 0; k < t->nchecks; k++)      /* sorted by call */
        if (t->checks[k].status == CK_NONFINITE) { point = t->checks[k].call; break; }
    for (int64_t i = 0; i < from && (point < 0 || i < point); i++)
        if (ta_rc_failed(t->calls[i].rc) || (a->nanchors && anchored(a, t, &t->calls[i]))) { point = i; break; }
    if (point >= 0 && point < from) {
        int64_t w = point > TA_BUDGET_MARGIN ? point - TA_BUDGET_MARGIN : 0;
        if (w >= widest) from = w;
    }
    return from;
}

void ta_budget_trim(const ta_an *a, ta_trace *t, int64_t share)
{
    if (share <= 0 || t->ncalls <= share) return;
    int64_t from = window_start(a, t, share), keep = t->ncalls - from;
    if (from <= 0) return;
    memmove(t->calls, t->calls + from, sizeof *t->calls * (size_t)keep);
    t->calls = xrealloc(t->calls, sizeof *t->calls * (size_t)(keep + 1));   /* the pages given back */
    if (t->call_raw) {
        memmove(t->call_raw, t->call_raw + from, sizeof *t->call_raw * (size_t)keep);
        t->call_raw = xrealloc(t->call_raw, sizeof *t->call_raw * (size_t)(keep + 1));
    }
    int64_t w = 0;
    for (int64_t k = 0; k < t->ncallx; k++)
        if (t->callx[k].call >= from) {
            t->callx[w] = t->callx[k];
            t->callx[w++].call -= from;
        }
    t->ncallx = w;
    w = 0;
    for (int64_t k = 0; k < t->nchecks; k++)
        if ((int64_t)t->checks[k].call >= from) {
            t->checks[w] = t->checks[k];
            t->checks[w++].call = (uint32_t)((int64_t)t->checks[k].call - from);
        }
    t->nchecks = w;
    t->ncalls = keep;
    ta_first_seqs(t);
    t->ring_lost += from;
    t->unloaded += from;
}

void ta_budget_note(ta_an *a, int64_t share)
{
    int n = 0;
    int64_t calls = 0, most = 0;
    for (int i = 0; i < a->ntr; i++)
        if (a->tr[i]->unloaded) {
            n++;
            calls += a->tr[i]->unloaded;
            if (a->tr[i]->unloaded + a->tr[i]->ncalls > most) most = a->tr[i]->unloaded + a->tr[i]->ncalls;
        }
    if (!n) return;
    if (a->nanchors)
        ta_note_add(a, NULL, 0, "read twice: the fingerprints placed a divergence before the calls the call budget "
                    "kept, so each trace was read again with its window widened back to it (up to %d times its share)",
                    TA_BUDGET_WIDEN);
    ta_note_add(a, NULL, 0, "%d of %d traces hold more calls than the call budget gives each (--max-calls: %lld "
                "per trace, up to %lld in one): their oldest %lld call(s) in all were not loaded and are treated as "
                "calls lost from a ring window (a divergence among them is found by the communicators' "
                "fingerprints, without the calls); --max-calls 0 loads every call", n, a->ntr, (long long)share,
                (long long)most, (long long)calls);
}
