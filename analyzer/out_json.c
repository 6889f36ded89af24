/* --json: the schema of docs/analysis-format.md. */
#include <stdlib.h>
#include <string.h>

#include "ta.h"

typedef struct { FILE *o; int first[64]; int depth; } jw;

/* length of the valid UTF-8 sequence at p, 0 if invalid */
static int utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80) return 1;
    int n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (!n) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;
    if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
    return n;
}

static void jstr(FILE *o, const char *s)
{
    if (!s) { fputs("null", o); return; }
    fputc('"', o);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p == '"' || *p == '\\') { fputc('\\', o); fputc(*p, o); p++; continue; }
        if (*p == '\n') { fputs("\\n", o); p++; continue; }
        if (*p == '\t') { fputs("\\t", o); p++; continue; }
        if (*p < 0x20) { fprintf(o, "\\u%04x", *p); p++; continue; }
        int n = utf8_len(p);
        if (!n) { fputs("\\ufffd", o); p++; continue; }
        fwrite(p, 1, (size_t)n, o);
        p += n;
    }
    fputc('"', o);
}
static void sep(jw *w)
{
    if (!w->first[w->depth]) fputc(',', w->o);
    w->first[w->depth] = 0;
}
static void key(jw *w, const char *k) { sep(w); jstr(w->o, k); fputc(':', w->o); }
static void open_(jw *w, char c) { fputc(c, w->o); w->first[++w->depth] = 1; }
static void close_(jw *w, char c) { fputc(c, w->o); w->depth--; }
static void kstr(jw *w, const char *k, const char *v) { key(w, k); jstr(w->o, v); }
static void kint(jw *w, const char *k, long long v) { key(w, k); fprintf(w->o, "%lld", v); }
static void kintn(jw *w, const char *k, long long v, int isnull) { key(w, k); if (isnull) fputs("null", w->o); else fprintf(w->o, "%lld", v); }
static void kbool(jw *w, const char *k, int v) { key(w, k); fputs(v ? "true" : "false", w->o); }
static void kints(jw *w, const char *k, const int *v, int n)
{
    key(w, k);
    fputc('[', w->o);
    for (int i = 0; i < n; i++) fprintf(w->o, "%s%d", i ? "," : "", v[i]);
    fputc(']', w->o);
}

static void comm_members(jw *w, ta_an *a, const char *k, int g)
{
    key(w, k);
    fputc('[', w->o);
    if (g >= 0)
        for (int p = 0; p < a->gc[g].npos; p++) {
            int m = a->gc[g].member[p];
            if (p) fputc(',', w->o);
            if (m >= 0) fprintf(w->o, "%d", a->tr[m]->rank);
            else fputs("null", w->o);
        }
    fputc(']', w->o);
}

static void stack_json(jw *w, ta_an *a, const ta_trace *t, int stack, const char *k)
{
    key(w, k);
    fputc('[', w->o);
    if (t && stack >= 0 && stack < t->nstacks) {
        const ta_stack *s = &t->stacks[stack];
        int n = a->full_stacks ? s->nframes : (s->nframes < 8 ? s->nframes : 8);
        for (int i = 0; i < n; i++) {
            char *f = ta_symbolize_frame(a, &s->frames[i], i == 0);
            if (i) fputc(',', w->o);
            jstr(w->o, f);
            free(f);
        }
    }
    fputc(']', w->o);
}

static void call_json(jw *w, ta_an *a, const char *k, const ta_side *s)
{
    key(w, k);
    if (s->trace < 0 || s->call < 0) {
        if (s->trace >= 0 && s->stack >= 0) {
            const ta_trace *t = a->tr[s->trace];
            open_(w, '{');
            kint(w, "rank", t->rank);
            char *site = ta_site_text(a, t, s->stack);
            kstr(w, "site", site);
            free(site);
            kstr(w, "function", ta_site_function(a, t, s->stack));
            stack_json(w, a, t, s->stack, "stack");
            close_(w, '}');
        } else {
            fputs("null", w->o);
        }
        return;
    }
    const ta_trace *t = a->tr[s->trace];
    const ta_call *c = &t->calls[s->call];
    open_(w, '{');
    kint(w, "rank", t->rank);
    kstr(w, "op", ta_op_names[c->op]);
    kstr(w, "comm", c->comm >= 0 ? ta_comm_name(a, t->comms[c->comm].g) : NULL);
    kint(w, "seq", c->seq);
    kint(w, "count", c->count);
    kstr(w, "dtype", c->dtype == DT_NONE ? NULL : ta_dtype_names[c->dtype]);
    kstr(w, "redop", c->redop == RO_NONE ? NULL : ta_redop_names[c->redop]);
    kintn(w, "root", c->rp, !ta_op_rooted(c->op) || c->rp < 0);
    kintn(w, "peer", c->rp, !ta_op_is_p2p(c->op) || c->rp < 0);
    char *site = ta_site_text(a, t, c->stack);
    kstr(w, "site", site);
    free(site);
    kstr(w, "function", ta_site_function(a, t, c->stack));
    stack_json(w, a, t, c->stack, "stack");
    close_(w, '}');
}

void ta_out_json(ta_an *a, FILE *o)
{
    jw w = {o, {1}, 0};
    open_(&w, '{');
    kstr(&w, "tool", "tranalyze");
    kstr(&w, "version", TA_VERSION);
    kint(&w, "schema", 1);
    kstr(&w, "status", !a->ntr ? "error" : a->nf ? "findings" : "clean");
    key(&w, "job");
    open_(&w, '{');
    kstr(&w, "id", a->job);
    kstr(&w, "source", a->ntr ? a->tr[0]->job_source : NULL);
    kint(&w, "world_size", a->world);
    kint(&w, "traces", a->ntr);
    kint(&w, "files", a->nfiles);
    kints(&w, "ranks_without_trace", a->missing_ranks, a->nmissing);
    key(&w, "other_jobs");
    open_(&w, '[');
    for (int i = 0; i < a->nother_jobs; i++) { sep(&w); jstr(o, a->other_jobs[i]); }
    close_(&w, ']');
    close_(&w, '}');

    key(&w, "inputs");
    open_(&w, '[');
    for (int i = 0; i < a->nnotes; i++) {
        sep(&w);
        open_(&w, '{');
        kstr(&w, "file", a->notes[i].file);
        kstr(&w, "problem", a->notes[i].text);
        kbool(&w, "skipped", a->notes[i].fatal);
        close_(&w, '}');
    }
    close_(&w, ']');

    key(&w, "findings");
    open_(&w, '[');
    for (int i = 0; i < a->nf; i++) {
        ta_finding *f = &a->f[i];
        sep(&w);
        open_(&w, '{');
        kstr(&w, "kind", ta_kind_names[f->kind]);
        kstr(&w, "subkind", f->subkind[0] ? f->subkind : NULL);
        kbool(&w, "root_cause", f->root);
        kstr(&w, "comm", f->g >= 0 ? ta_comm_name(a, f->g) : NULL);
        comm_members(&w, a, "comm_ranks", f->g);
        kintn(&w, "seq", f->seq, f->seq < 0);
        kints(&w, "ranks", f->culprit.ranks, f->culprit.nranks);
        kints(&w, "others", f->other.ranks, f->other.nranks);
        kstr(&w, "message", f->message);
        kstr(&w, "hint", f->hint);
        call_json(&w, a, "call", &f->culprit);
        call_json(&w, a, "others_call", &f->other);
        key(&w, "stopped_at");
        if (f->stop_g >= 0) {
            open_(&w, '{');
            kstr(&w, "comm", ta_comm_name(a, f->stop_g));
            kint(&w, "seq", f->stop_seq);
            close_(&w, '}');
        } else {
            fputs("null", o);
        }
        if (f->kind == K_OOM || f->kind == K_IMBALANCE) {
            if (f->kind == K_OOM) {
                kint(&w, "bytes", f->bytes);
                kint(&w, "live_bytes", f->live);
            }
            kint(&w, "peak_bytes", f->peak);
            if (f->kind == K_IMBALANCE) kint(&w, "median_peak_bytes", f->median);
            stack_json(&w, a, f->culprit.trace >= 0 ? a->tr[f->culprit.trace] : NULL, f->stack2, "peak_stack");
        }
        key(&w, "consequences");
        open_(&w, '[');
        for (int k = 0; k < f->ncons; k++) {
            ta_conseq *c = &f->cons[k];
            sep(&w);
            open_(&w, '{');
            kstr(&w, "comm", ta_comm_name(a, c->g));
            kint(&w, "seq", c->seq);
            kstr(&w, "op", c->op >= 0 ? ta_op_names[c->op] : NULL);
            kstr(&w, "call", c->what);
            kints(&w, "waiting", c->waiting, c->nwaiting);
            kints(&w, "waiting_for", c->waitfor, c->nwaitfor);
            close_(&w, '}');
        }
        close_(&w, ']');
        close_(&w, '}');
    }
    close_(&w, ']');

    key(&w, "ranks");
    open_(&w, '[');
    for (int i = 0; i < a->ntr; i++) {
        ta_trace *t = a->tr[i];
        sep(&w);
        open_(&w, '{');
        kint(&w, "rank", t->rank);
        kstr(&w, "host", t->host);
        kint(&w, "pid", t->pid);
        kintn(&w, "device", t->device, t->device < 0);
        kstr(&w, "file", t->file);
        key(&w, "ended");
        open_(&w, '{');
        kstr(&w, "state", ta_end_names[t->end_state]);
        kintn(&w, "signal", t->end_signal, t->end_signal < 0);
        kstr(&w, "signal_name", t->end_signal > 0 ? ta_signame(t->end_signal) : NULL);
        kbool(&w, "in_call", t->end_in_call);
        char *et = ta_end_text(a, t);
        kstr(&w, "text", et);
        free(et);
        close_(&w, '}');
        kbool(&w, "waiting", a->stuck ? a->stuck[i] : 0);
        kbool(&w, "root_cause", a->root ? a->root[i] : 0);
        kint(&w, "calls", t->ncalls);
        kint(&w, "dropped", t->dropped);
        key(&w, "last_seq");
        open_(&w, '{');
        for (int k = 0; k < t->ncomms; k++) {
            key(&w, ta_comm_name(a, t->comms[k].g));
            fprintf(o, "%u", t->comms[k].nseq);
        }
        close_(&w, '}');
        int64_t pk = -1;
        for (int k = 0; k < t->nmdev; k++) if (t->mdev[k].peak > pk) pk = t->mdev[k].peak;
        kintn(&w, "peak_bytes", pk, pk < 0);
        kint(&w, "alloc_failures", t->nmfail);
        close_(&w, '}');
    }
    for (int i = 0; i < a->nmissing; i++) {
        sep(&w);
        open_(&w, '{');
        kint(&w, "rank", a->missing_ranks[i]);
        kstr(&w, "host", NULL);
        key(&w, "pid"); fputs("null", o);
        key(&w, "ended");
        open_(&w, '{');
        kstr(&w, "state", "no_trace");
        kstr(&w, "text", "no trace");
        close_(&w, '}');
        key(&w, "peak_bytes"); fputs("null", o);
        close_(&w, '}');
    }
    close_(&w, ']');

    key(&w, "comms");
    open_(&w, '[');
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        sep(&w);
        open_(&w, '{');
        kstr(&w, "id", ta_comm_name(a, g));
        kstr(&w, "kind", n->kind);
        key(&w, "parent");
        if (n->has_parent) fprintf(o, "\"0x%016llx\"", (unsigned long long)n->parent);
        else fputs("null", o);
        kintn(&w, "size", n->size, n->size < 0);
        comm_members(&w, a, "ranks", g);
        kint(&w, "collectives", n->maxseq);
        close_(&w, '}');
    }
    close_(&w, ']');
    close_(&w, '}');
    fputc('\n', o);
}
