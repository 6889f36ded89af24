/* Memory (kinds oom and memory_imbalance): a rank's failed device
 * allocation, and a rank whose peak is far above the others' median;
 * their detectors and writers. */
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_tx.h"

/* bytes for a message ("1.5 GiB") */
static char *human(int64_t b)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int k = 0;
    while (v >= 1024 && k < 4) { v /= 1024; k++; }
    return k ? xasprintf("%.1f %s", v, u[k]) : xasprintf("%lld B", (long long)b);
}

static int64_t rank_peak(const ta_trace *t, int *dev_out)
{
    int64_t best = -1;
    for (int i = 0; i < t->nmdev; i++)
        if (t->mdev[i].peak > best) { best = t->mdev[i].peak; if (dev_out) *dev_out = i; }
    return best;
}

static int cmp64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The last collective the rank issued before time t_ns (-1 none). */
static int64_t call_before(const ta_trace *t, int64_t t_ns)
{
    int64_t lo = 0, hi = t->ncalls - 1, best = -1;
    while (lo <= hi) {       /* calls are in entry order */
        int64_t mid = (lo + hi) / 2;
        if (t->calls[mid].enter_ns <= t_ns) { best = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    while (best >= 0 && !(ta_op_is_coll(t->calls[best].op) || ta_op_is_p2p(t->calls[best].op))) best--;
    return best;
}

/* out of memory: the first failure of each rank that had one (the first out-of-memory one) */
void ta_detect_oom(ta_an *a, int look)
{
    if (look != TA_LOOK_CALLS) return;
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        if (!t->nmfail) continue;
        /* the first out-of-memory failure, else the first failure */
        const ta_memfail *m = &t->mfail[0];
        for (int k = 0; k < t->nmfail; k++)
            if (strstr(t->mfail[k].error, "Memory") || strstr(t->mfail[k].error, "MEMORY") ||
                t->mfail[k].error_code == 2) { m = &t->mfail[k]; break; }
        ta_finding *f = ta_finding_new(a, K_OOM);
        int r = t->rank;
        ta_side_set(&f->culprit, &r, 1, ti, -1);
        f->culprit.stack = m->stack;
        f->culprit.pystack = m->pystack;
        f->bytes = m->bytes;
        f->live = m->live;
        int dv = -1;
        f->peak = rank_peak(t, &dv);
        if (dv >= 0) {
            f->stack2 = t->mdev[dv].peak_stack;
            f->pystack2 = t->mdev[dv].peak_pystack;
            f->peak_ns = t->mdev[dv].peak_ns;
        }
        f->t = ta_wall(t, m->t_ns);
        int64_t ci = call_before(t, m->t_ns);
        if (ci >= 0) {
            const ta_call *c = &t->calls[ci];
            f->g = t->comms[c->comm].g;
            f->seq = c->seq;
        }
        /* the other ranks of the job */
        int *o = xmalloc(sizeof(int) * (size_t)a->ntr);
        int no = 0;
        for (int k = 0; k < a->ntr; k++) if (k != ti) o[no++] = a->tr[k]->rank;
        ta_side_set(&f->other, o, no, -1, -1);
        free(o);
        char *req = human(m->bytes), *live = human(m->live), *pk = human(f->peak > 0 ? f->peak : 0);
        char *after = NULL;
        if (ci >= 0) {
            char *c = ta_call_text(a, t, ci);
            after = xasprintf("; the last NCCL call before it was %s", c);
            free(c);
        }
        char *site = ta_site_text(a, t, m->stack, m->pystack);
        char *when = xstrdup("");
        if (dv >= 0 && t->mdev[dv].has_peak_after) {
            free(when);
            when = xasprintf(", reached after collective #%lld of comm 0x%016llx", (long long)t->mdev[dv].peak_after_seq,
                             (unsigned long long)t->mdev[dv].peak_after_comm);
        }
        f->message = xasprintf("rank %d ran out of device memory: %s(%lld bytes = %s) failed at %s while %s were held "
                               "(peak %s%s)%s",
                               r, m->api, (long long)m->bytes, req, site, live, pk, when, after ? after : "");
        free(when);
        f->hint = xstrdup("see what holds the memory at the peak stack; reduce the batch or sequence length, shard "
                          "optimizer state (ZeRO), enable activation checkpointing, or free caches before this point");
        free(req); free(live); free(pk); free(after); free(site);
    }
}

/* imbalance: peak above the median of the others by more than the threshold */
void ta_detect_imbalance(ta_an *a, int look)
{
    if (look != TA_LOOK_CALLS) return;
    int n = 0;
    for (int ti = 0; ti < a->ntr; ti++) n += rank_peak(a->tr[ti], NULL) > 0;
    if (n < 2) return;
    /* every peak sorted once; the median of the others is read around this
     * rank's own value (n log n: 16,384 ranks sorting all others was 9 s) */
    int64_t *v = xmalloc(sizeof(int64_t) * (size_t)a->ntr);
    int k = 0;
    for (int ti = 0; ti < a->ntr; ti++) {
        int64_t p = rank_peak(a->tr[ti], NULL);
        if (p > 0) v[k++] = p;
    }
    qsort(v, (size_t)k, sizeof *v, cmp64);
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        int dv = -1;
        int64_t pk = rank_peak(t, &dv);
        if (pk <= 0) continue;
        int lo = 0, hi = k - 1;       /* one place holding pk: the others are v without it */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (v[mid] < pk) lo = mid + 1;
            else hi = mid;
        }
        int m = k - 1;
        int i1 = m % 2 ? m / 2 : m / 2 - 1, i2 = m / 2;
        int64_t a1 = v[i1 < lo ? i1 : i1 + 1], a2 = v[i2 < lo ? i2 : i2 + 1];
        int64_t med = m % 2 ? a2 : (a1 + a2) / 2;
        if ((double)pk <= (double)med * (1.0 + a->imbalance) || pk - med < a->imbalance_min) continue;
        ta_finding *f = ta_finding_new(a, K_IMBALANCE);
        int r = t->rank;
        ta_side_set(&f->culprit, &r, 1, ti, -1);
        f->culprit.stack = f->stack2 = t->mdev[dv].peak_stack;
        f->culprit.pystack = f->pystack2 = t->mdev[dv].peak_pystack;
        f->peak = pk;
        f->median = med;
        f->peak_ns = t->mdev[dv].peak_ns;
        f->t = ta_wall(t, f->peak_ns == TA_NULL64 ? 0 : f->peak_ns);
        if (t->mdev[dv].has_peak_after) {
            for (int g = 0; g < a->ngc; g++)
                if (a->gc[g].id == t->mdev[dv].peak_after_comm) { f->g = g; f->seq = t->mdev[dv].peak_after_seq; }
        }
        int *o = xmalloc(sizeof(int) * (size_t)a->ntr);
        int no = 0;
        for (int j = 0; j < a->ntr; j++) if (j != ti && rank_peak(a->tr[j], NULL) > 0) o[no++] = a->tr[j]->rank;
        ta_side_set(&f->other, o, no, -1, -1);
        free(o);
        char *p = human(pk), *md = human(med), *site = ta_site_text(a, t, f->stack2, f->pystack2);
        f->message = xasprintf("rank %d peaks at %s of device memory, %.0f%% above the median of the other ranks (%s); "
                               "its peak was reached at %s",
                               r, p, 100.0 * ((double)pk / (double)(med ? med : 1) - 1.0), md, site);
        f->hint = xstrdup("look at what this rank allocates that the others do not (uneven partitioning, state kept "
                          "only on this rank, a gather onto one rank); balance it or give this rank less");
        free(p); free(md); free(site);
    }
    free(v);
}


static void peak_stacks_json(ta_jw *w, ta_an *a, const ta_finding *f)
{
    const ta_trace *ct = f->culprit.trace >= 0 ? a->tr[f->culprit.trace] : NULL;
    jw_stack(w, a, ct, f->stack2, "peak_stack");
    jw_pystack(w, ct, f->pystack2, "peak_python_stack");
}

/* --json: the failed request and the peak (oom), the peak against the median (memory_imbalance) */
void ta_json_oom(ta_jw *w, ta_an *a, const ta_finding *f)
{
    jw_int(w, "bytes", f->bytes);
    jw_int(w, "live_bytes", f->live);
    jw_int(w, "peak_bytes", f->peak);
    peak_stacks_json(w, a, f);
}

void ta_json_imbalance(ta_jw *w, ta_an *a, const ta_finding *f)
{
    jw_int(w, "peak_bytes", f->peak);
    jw_int(w, "median_peak_bytes", f->median);
    peak_stacks_json(w, a, f);
}

/* text: where the peak was reached */
void ta_text_memory(ta_tx *x, const ta_finding *f)
{
    ta_an *a = x->a;
    ta_tx_head(x, f, NULL);
    char *p = ta_human(f->peak);
    char *site = f->culprit.trace >= 0 ? ta_site_text(a, a->tr[f->culprit.trace], f->stack2, f->pystack2) : xstrdup("?");
    ta_esc_fmt(x->o, x->md ? TA_ESC_MD : TA_ESC_TEXT, "%speak %s at %s\n", x->ind, p, site);   /* (ta_esc.h) */
    free(p); free(site);
}
