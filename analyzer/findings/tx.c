/* Text and Markdown writing (ta_tx.h): what out_text.c and the kinds'
 * text writers share. */
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_tx.h"

char *ta_human(int64_t b)
{
    if (b < 0) return xstrdup("-");
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int k = 0;
    while (v >= 1024 && k < 4) { v /= 1024; k++; }
    return k ? xasprintf("%.1f %s", v, u[k]) : xasprintf("%lld B", (long long)b);
}

static char *where(ta_an *a, const ta_finding *f, const char *at)
{
    if (f->g < 0) return xstrdup("");
    int n = 0, *r = xmalloc(sizeof(int) * (size_t)(a->gc[f->g].npos + 1));
    for (int p = 0; p < a->gc[f->g].npos; p++)
        if (a->gc[f->g].member[p] >= 0) r[n++] = a->tr[a->gc[f->g].member[p]]->rank;
    ta_ints_sort(r, n);
    char *rt = ta_ranks_text(r, n);
    free(r);
    int empty = 0;
    for (int p = 0; p < a->gc[f->g].npos; p++) empty += a->gc[f->g].member[p] < 0;
    /* "ranks 0-2", "rank 0; 3 places without a trace": the count of empty
     * places never reads as one more rank */
    char *m = xasprintf("%s%s%s", n ? (n > 1 ? "ranks " : "rank ") : "", rt, n && empty ? "; " : "");
    free(rt);
    if (empty) {
        char *m2 = xasprintf("%s%d place%s without a trace", m, empty, empty > 1 ? "s" : "");
        free(m);
        m = m2;
    }
    char *s;
    if (!at) s = xasprintf(" on comm %s (%s), collective #%lld", ta_comm_name(a, f->g), m, (long long)f->seq);
    else s = xasprintf(" on comm %s (%s)%s%s", ta_comm_name(a, f->g), m, *at ? ", " : "", at);
    free(m);
    return s;
}

/* the message with each side's call named briefly where a side line follows (ta_tx_side: the call and
 * its site): "AllReduce(1 x float32, sum) #4 on comm 0x.. at log_metrics (train.py:12)" becomes
 * "AllReduce(1 x float32, sum) #4" (its communicator kept when it is not the finding's) */
static char *brief_message(ta_an *a, const ta_finding *f)
{
    char *m = xstrdup(f->message ? f->message : "");
    const ta_side *sides[2] = {&f->culprit, &f->other};
    for (int k = 0; k < 2; k++) {
        const ta_side *sd = sides[k];
        if (!sd->nranks || sd->trace < 0 || sd->call < 0) continue;
        const ta_trace *t = a->tr[sd->trace];
        const ta_call *c = &t->calls[sd->call];
        char *ct = ta_call_text(a, t, sd->call), *site = ta_call_site_text(a, t, sd->call);
        char *full = xasprintf("%s at %s", ct, site);
        char *sig = ta_call_sig(t, sd->call);
        int same = c->comm >= 0 && c->comm < t->ncomms && t->comms[c->comm].g == f->g;
        char *brief = same ? xasprintf("%s #%u", sig, c->seq) : xstrdup(ct);
        size_t fl = strlen(full), bl = strlen(brief);
        for (char *p = strstr(m, full); p; p = strstr(p + bl, full)) {
            size_t at = (size_t)(p - m), ml = strlen(m);
            char *n = xmalloc(ml - fl + bl + 1);
            memcpy(n, m, at);
            memcpy(n + at, brief, bl);
            memcpy(n + at + bl, p + fl, ml - at - fl + 1);
            free(m);
            m = n;
            p = m + at;
        }
        free(ct); free(site); free(full); free(sig); free(brief);
    }
    return m;
}

static void head(ta_tx *x, const ta_finding *f, const char *at, const char *message);

void ta_tx_head(ta_tx *x, const ta_finding *f, const char *at) { head(x, f, at, f->message); }

void ta_tx_head_sides(ta_tx *x, const ta_finding *f, const char *at)
{
    char *m = brief_message(x->a, f);
    head(x, f, at, m);
    free(m);
}

static void head(ta_tx *x, const ta_finding *f, const char *at, const char *message)
{
    FILE *o = x->o;
    int md = x->md, top = x->top;
    const char *name = ta_kind_names[f->kind];
    char *w = where(x->a, f, at);
    if (md) fprintf(o, "%s **%s%s%s**%s\n\n", top ? "####" : "-", name, f->subkind ? " / " : "",
                    ta_subkind_names[f->subkind], w);
    else if (top) {
        if (top > 1) fprintf(o, "ROOT CAUSE (%d): ", top);
        else fprintf(o, "ROOT CAUSE: ");
        fprintf(o, "%s%s%s%s\n", name, f->subkind ? " / " : "", ta_subkind_names[f->subkind], w);
    } else fprintf(o, "- %s%s%s%s\n", name, f->subkind ? " / " : "", ta_subkind_names[f->subkind], w);
    fputs(x->ind, o);       /* the message: its strings as the traces had them (ta_esc.h) */
    ta_esc_puts(o, message ? message : "", md ? TA_ESC_MD : TA_ESC_TEXT);
    fputc('\n', o);
    if (md) fputc('\n', o);
    free(w);
}

void ta_tx_side(ta_tx *x, const ta_side *s, const char *label)
{
    ta_an *a = x->a;
    FILE *o = x->o;
    const char *indent = x->ind;
    int md = x->md;
    if (!s->nranks || s->trace < 0) return;
    const ta_trace *t = a->tr[s->trace];
    int stack = s->stack, py = s->pystack;
    if (s->call >= 0) stack = t->calls[s->call].stack, py = t->calls[s->call].pystack;
    if (stack < 0 && !ta_py_valid(t, py) && s->call < 0) return;
    char *r = ta_ranks_text(s->ranks, s->nranks);
    /* a replayed call says which replay of which graph it is */
    char *site = s->call >= 0 ? ta_call_site_text(a, t, s->call) : ta_site_text(a, t, stack, py);
    char *sig = s->call >= 0 ? ta_call_sig(t, s->call) : xstrdup("");
    if (md) {
        fprintf(o, "%s- rank%s %s%s: ", indent, s->nranks > 1 ? "s" : "", r, label);
        if (*sig) ta_esc_code(o, sig, strlen(sig), strlen(sig), 0);
        else fputs("``", o);
        fputs(" at ", o);
        ta_esc_code(o, site, strlen(site), strlen(site), 0);
        fputc('\n', o);
    } else {
        ta_esc_printf(o, "%srank%s %s%s: %s at %s\n", indent, s->nranks > 1 ? "s" : "", r, label, sig, site);
    }
    free(r); free(site); free(sig);
}

