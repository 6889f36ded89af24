/* JSON writing (the --json document and the kinds' writers): values
 * with their keys, and the objects of a call, its site and stacks
 * (docs/analysis-format.md). */
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_jw.h"

/* a string as JSON: the true value (the model's strings are as the traces had them, ta_esc.h), with
 * '"', '\\', every control character, bidi control and line separator escaped (\n, \u001b,
 * \u202e: nothing reaches a terminal raw, a reader gets the exact value back) and each byte that is
 * not UTF-8 made U+FFFD (JSON is UTF-8: those bytes have no exact form) */
void jw_string(FILE *o, const char *s)
{
    if (!s) { fputs("null", o); return; }
    fputc('"', o);
    size_t left = strlen(s);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p == '"' || *p == '\\') { fputc('\\', o); fputc(*p, o); p++, left--; continue; }
        if (*p == '\n') { fputs("\\n", o); p++, left--; continue; }
        if (*p == '\t') { fputs("\\t", o); p++, left--; continue; }
        unsigned cp;
        int n = ta_utf8_cp(p, left, &cp);
        if (!n) { fputs("\\ufffd", o); p++, left--; continue; }
        if (ta_esc_hidden(cp)) fprintf(o, "\\u%04x", cp);
        else fwrite(p, 1, (size_t)n, o);
        p += n, left -= (size_t)n;
    }
    fputc('"', o);
}
void jw_sep(ta_jw *w)
{
    if (!w->first[w->depth]) fputc(',', w->o);
    w->first[w->depth] = 0;
}
void jw_key(ta_jw *w, const char *k) { jw_sep(w); jw_string(w->o, k); fputc(':', w->o); }
void jw_open(ta_jw *w, char c) { fputc(c, w->o); w->first[++w->depth] = 1; }
void jw_close(ta_jw *w, char c) { fputc(c, w->o); w->depth--; }
void jw_str(ta_jw *w, const char *k, const char *v) { jw_key(w, k); jw_string(w->o, v); }
void jw_int(ta_jw *w, const char *k, long long v) { jw_key(w, k); fprintf(w->o, "%lld", v); }
void jw_intn(ta_jw *w, const char *k, long long v, int isnull) { jw_key(w, k); if (isnull) fputs("null", w->o); else fprintf(w->o, "%lld", v); }
void jw_bool(ta_jw *w, const char *k, int v) { jw_key(w, k); fputs(v ? "true" : "false", w->o); }
void jw_ints(ta_jw *w, const char *k, const int *v, int n)
{
    jw_key(w, k);
    fputc('[', w->o);
    for (int i = 0; i < n; i++) fprintf(w->o, "%s%d", i ? "," : "", v[i]);
    fputc(']', w->o);
}

void jw_stack(ta_jw *w, ta_an *a, const ta_trace *t, int stack, const char *k)
{
    jw_key(w, k);
    fputc('[', w->o);
    if (t && stack >= 0 && stack < t->nstacks) {
        const ta_stack *s = &t->stacks[stack];
        int n = a->full_stacks ? s->nframes : (s->nframes < 8 ? s->nframes : 8);
        for (int i = 0; i < n; i++) {
            char *f = ta_symbolize_frame(a, &s->frames[i], i == 0);
            if (i) fputc(',', w->o);
            jw_string(w->o, f);
            free(f);
        }
    }
    fputc(']', w->o);
}

/* a Python stack, every frame, innermost first (null: none) */
void jw_pystack(ta_jw *w, const ta_trace *t, int p, const char *k)
{
    jw_key(w, k);
    if (!ta_py_valid(t, p)) { fputs("null", w->o); return; }
    const ta_pystack *s = &t->pystacks[p];
    jw_open(w, '[');
    for (int i = 0; i < s->nframes; i++) {
        const ta_pycode *c = &t->pycodes[s->frames[i].code];
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "file", c->file);
        jw_str(w, "function", c->name);
        jw_intn(w, "line", s->frames[i].line, s->frames[i].line < 1);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* "site", "function" (the Python site when there is a Python stack),
 * "python_stack", "native_site" */
void jw_site(ta_jw *w, ta_an *a, const ta_trace *t, int stack, int pystack)
{
    char *site = ta_site_text(a, t, stack, pystack);
    jw_str(w, "site", site);
    free(site);
    jw_str(w, "function", ta_site_function(a, t, stack, pystack));
    jw_pystack(w, t, pystack, "python_stack");
    if (stack >= 0 && stack < t->nstacks && t->stacks[stack].nframes) {
        char *n = ta_native_site_text(a, t, stack);
        jw_str(w, "native_site", n);
        free(n);
    } else {
        jw_str(w, "native_site", NULL);
    }
}

void jw_call(ta_jw *w, ta_an *a, const char *k, const ta_side *s)
{
    jw_key(w, k);
    if (s->trace < 0 || s->call < 0) {
        if (s->trace >= 0 && (s->stack >= 0 || ta_py_valid(a->tr[s->trace], s->pystack))) {
            const ta_trace *t = a->tr[s->trace];
            jw_open(w, '{');
            jw_int(w, "rank", t->rank);
            jw_site(w, a, t, s->stack, s->pystack);
            jw_stack(w, a, t, s->stack, "stack");
            jw_close(w, '}');
        } else {
            fputs("null", w->o);
        }
        return;
    }
    const ta_trace *t = a->tr[s->trace];
    const ta_call *c = &t->calls[s->call];
    jw_open(w, '{');
    jw_int(w, "rank", t->rank);
    jw_str(w, "op", ta_op_names[c->op]);
    jw_str(w, "comm", c->comm >= 0 ? ta_comm_name(a, t->comms[c->comm].g) : NULL);
    jw_int(w, "seq", c->seq);
    jw_int(w, "count", c->count);
    jw_str(w, "dtype", c->dtype == DT_NONE ? NULL : ta_dtype_names[c->dtype]);
    jw_str(w, "redop", c->redop == RO_NONE ? NULL : ta_redop_names[c->redop]);
    jw_intn(w, "root", c->rp, !ta_op_rooted(c->op) || c->rp < 0);
    jw_intn(w, "peer", c->rp, !(ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) || c->rp < 0);
    /* the NCCL function it came through: the *Config twin of a collective, and its config */
    char ep[64];
    const char *cep = (c->xf & XF_CONFIG) ? ta_config_entry(c->op) : NULL;
    snprintf(ep, sizeof ep, "%s%s", cep ? "" : "nccl", cep ? cep : ta_op_names[c->op]);
    jw_str(w, "entry_point", ep);
    jw_key(w, "config");
    if (c->xf & XF_CONFIG) {
        const ta_collcfg *cf = ta_call_cfg(t, s->call);
        static const char *const states[4] = {"set", "null", "invalid", "unknown"};
        jw_open(w, '{');
        jw_str(w, "state", states[cf ? cf->state : CFG_UNKNOWN]);
        char *tx = ta_cfg_text(cf);
        jw_str(w, "text", tx);
        free(tx);
        if (cf && cf->state == CFG_SET) {
            if (cf->min_ctas != TA_CFG_UNSET) jw_int(w, "minCTAs", cf->min_ctas);
            if (cf->max_ctas != TA_CFG_UNSET) jw_int(w, "maxCTAs", cf->max_ctas);
            if (cf->nvls_ctas != TA_CFG_UNSET) jw_int(w, "nvlsCTAs", cf->nvls_ctas);
            if (cf->cga_cluster_size != TA_CFG_UNSET) jw_int(w, "cgaClusterSize", cf->cga_cluster_size);
            if (cf->alg) jw_str(w, "algSelection", cf->alg);
            if (cf->force_alg != TA_CFG_UNSET) jw_int(w, "forceAlgSelection", cf->force_alg);
            if (cf->cta_policy != TA_CFG_UNSET) jw_int(w, "CTAPolicy", cf->cta_policy);
            if (cf->user_tag) { jw_key(w, "userProfilerTag"); fprintf(w->o, "%llu", (unsigned long long)cf->user_tag); }
        }
        jw_close(w, '}');
    } else {
        fputs("null", w->o);
    }
    jw_key(w, "signal");
    const ta_callx *x = (c->xf & XF_SIGNAL) ? ta_callx_of(t, s->call) : NULL;
    if (x) {
        jw_open(w, '{');
        jw_int(w, "index", x->sig_idx);
        jw_int(w, "context", x->sig_ctx);
        jw_close(w, '}');
    } else {
        fputs("null", w->o);
    }
    jw_site(w, a, t, c->stack, c->pystack);
    jw_stack(w, a, t, c->stack, "stack");
    jw_replay(w, a, t, s->call);
    jw_close(w, '}');
}

/* a call replayed by a CUDA graph launch: "graph" {"index" (in the rank's
 * trace), "id" (the same on every rank and run), "name"}, "replay",
 * "node" (its place in the graph's calls), "capture_site", "launch_site";
 * null for an eager call */
void jw_replay(ta_jw *w, ta_an *a, const ta_trace *t, int64_t ci)
{
    const ta_callx *x = ci >= 0 && (t->calls[ci].xf & XF_REPLAY) ? ta_callx_of(t, ci) : NULL;
    jw_key(w, "graph");
    if (!x) {
        fputs("null", w->o);
        jw_intn(w, "replay", 0, 1);
        jw_str(w, "capture_site", NULL);
        jw_str(w, "launch_site", NULL);
        return;
    }
    int gid = ta_graph_gid(t, x->graph);
    char *id = ta_graph_id(a, gid);
    jw_open(w, '{');
    jw_int(w, "index", x->graph);
    jw_str(w, "id", id);
    jw_str(w, "name", gid >= 0 ? ta_graph_name(a, gid) : NULL);
    jw_int(w, "node", x->node);
    jw_close(w, '}');
    free(id);
    jw_int(w, "replay", x->replay);
    char *cs = ta_capture_site_text(a, t, x->graph), *ls = ta_launch_site_text(a, t, x);
    jw_str(w, "capture_site", cs);
    jw_str(w, "launch_site", ls);
    free(cs);
    free(ls);
}

/* call ci of trace t (-1: null) */
void jw_call_at(ta_jw *w, ta_an *a, const char *k, int t, int64_t ci)
{
    ta_side s = {.trace = ci >= 0 ? t : -1, .call = ci, .stack = -1, .pystack = -1};
    jw_call(w, a, k, &s);
}

/* a number, null when not positive */
void jw_dbl(ta_jw *w, const char *k, double v)
{
    jw_key(w, k);
    if (v > 0) fprintf(w->o, "%.17g", v);
    else fputs("null", w->o);
}

