/* NaN/Inf (the nan kind: nan.c): its --json and its text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "nan_int.h"
#include "site/ta_site.h"
#include "ta_jw.h"
#include "ta_tx.h"

/* --json: one check of a buffer (null: none) */
static void check_json(ta_jw *w, const char *k, const ta_trace *t, int64_t ci)
{
    jw_key(w, k);
    if (!t || ci < 0) { fputs("null", w->o); return; }
    const ta_check cv = ta_check_at(t, ci), *c = &cv;
    jw_open(w, '{');
    jw_str(w, "status", ta_ck_status_names[c->status]);
    jw_int(w, "nan", c->nan);
    jw_int(w, "inf", c->inf);
    jw_intn(w, "first", c->first, c->first == TA_NULL64);
    jw_str(w, "first_kind", c->first_kind == 1 ? "nan" : c->first_kind == 2 ? "inf" : NULL);
    jw_int(w, "elems_checked", c->checked);
    jw_int(w, "elems", c->elems);
    jw_str(w, "reason", c->reason);
    jw_close(w, '}');
}

static int has_rank(const int *v, int n, int r)
{
    for (int i = 0; i < n; i++) if (v[i] == r) return 1;
    return 0;
}

static void nanev_json(ta_jw *w, ta_an *a, const ta_nanev *ev, int full)
{
    jw_str(w, "cause", ta_subkind_names[ta_nan_cause_subkinds[ev->cause]]);
    jw_str(w, "reason", ev->reason);
    jw_str(w, "op", ta_op_names[ev->op]);
    jw_str(w, "dtype", ev->dtype == DT_NONE ? NULL : ta_dtype_names[ev->dtype]);
    jw_str(w, "redop", ev->redop == RO_NONE ? NULL : ta_redop_names[ev->redop]);
    jw_dbl(w, "limit", ta_nan_limit(ev->dtype));
    jw_ints(w, "unchecked_inputs", ev->unchecked, ev->nunchecked);
    if (!full) return;
    jw_key(w, "members");
    jw_open(w, '[');
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        const ta_trace *t = m->trace >= 0 ? a->tr[m->trace] : NULL;
        jw_sep(w);
        jw_open(w, '{');
        jw_int(w, "place", m->place);
        jw_intn(w, "rank", m->rank, m->rank < 0);
        jw_bool(w, "source", m->source);
        jw_bool(w, "lost", m->lost);
        if (t && m->call >= 0 && has_rank(ev->ranks, ev->nranks, m->rank)) {
            jw_site(w, a, t, t->calls[m->call].stack, t->calls[m->call].pystack);
        } else {
            jw_str(w, "site", NULL);
            jw_str(w, "function", NULL);
            jw_str(w, "python_stack", NULL);
            jw_str(w, "native_site", NULL);
        }
        check_json(w, "input", t, m->in);
        check_json(w, "output", t, m->out);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* --json: the first non-finite collective (cause, members' checks), the later ones, the independent ones */
void ta_json_nan(ta_jw *w, ta_an *a, const ta_finding *f)
{
    const ta_nanfinding *nf = f->data;
    if (!nf) return;
    nanev_json(w, a, &nf->ev, 1);
    jw_int(w, "later_count", nf->later_count);
    jw_key(w, "later");
    jw_open(w, '[');
    for (int k = 0; k < nf->nlater; k++) {
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "comm", ta_comm_name(a, nf->later[k].g));
        jw_int(w, "from_seq", nf->later[k].from_seq);
        jw_int(w, "collectives", nf->later[k].count);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "independent");
    jw_open(w, '[');
    for (int k = 0; k < nf->nindep; k++) {
        const ta_nanev *e = &nf->indep[k];
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "comm", ta_comm_name(a, e->g));
        jw_int(w, "seq", e->seq);
        jw_ints(w, "ranks", e->ranks, e->nranks);
        nanev_json(w, a, e, 0);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_int(w, "unchecked_before", nf->unchecked_before);
}

/* text: the sources' inputs (or the quoted output), and the inputs not known */
void ta_text_nan(ta_tx *x, const ta_finding *f)
{
    ta_an *a = x->a;
    FILE *o = x->o;
    const char *ind = x->ind;
    int md = x->md;
    ta_tx_head(x, f, NULL);
    const ta_nanfinding *nf = f->data;
    if (!nf) return;
    const ta_nanev *ev = &nf->ev;
    int shown = 0;
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        if (m->trace < 0 || m->call < 0) continue;
        const ta_trace *t = a->tr[m->trace];
        int show = ev->cause == NC_INPUT ? m->source : p == ev->ref;
        if (!show) continue;
        if (shown++ >= 8) { fprintf(o, "%s%s...\n", ind, md ? "- " : ""); break; }
        const ta_check kv = ta_check_at(t, ev->cause == NC_INPUT ? m->in : m->out), *k = &kv;
        char *sig = ta_call_sig(t, m->call), *site = ta_call_site_text(a, t, m->call);
        char at[64] = "";
        if (k->first != TA_NULL64)
            snprintf(at, sizeof at, "first %s at element %lld, ", k->first_kind == 2 ? "Inf" : "NaN", (long long)k->first);
        if (md) {                /* the site: as code (ta_esc.h) */
            fprintf(o, "%s- rank %d: ", ind, m->rank);
            ta_esc_code(o, sig, strlen(sig), strlen(sig), 0);
            fputs(" at ", o);
            ta_esc_code(o, site, strlen(site), strlen(site), 0);
        } else {
            ta_esc_printf(o, "%srank %d: %s at %s", ind, m->rank, sig, site);
        }
        fprintf(o, "; %s: %s%lld NaN, %lld Inf in %lld elements checked\n", ev->cause == NC_INPUT ? "input" : "output",
                at, (long long)k->nan, (long long)k->inf, (long long)k->checked);
        free(sig); free(site);
    }
    if (ev->cause != NC_INPUT && ev->nunchecked) {
        char *r = ta_ranks_text(ev->unchecked, ev->nunchecked);
        fprintf(o, "%s%sinputs not known: rank%s %s\n", ind, md ? "- " : "", ev->nunchecked > 1 ? "s" : "", r);
        free(r);
    }
}
