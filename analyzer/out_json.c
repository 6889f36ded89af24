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

/* a Python stack, every frame, innermost first (null: none) */
static void pystack_json(jw *w, const ta_trace *t, int p, const char *k)
{
    key(w, k);
    if (!ta_py_valid(t, p)) { fputs("null", w->o); return; }
    const ta_pystack *s = &t->pystacks[p];
    open_(w, '[');
    for (int i = 0; i < s->nframes; i++) {
        const ta_pycode *c = &t->pycodes[s->frames[i].code];
        sep(w);
        open_(w, '{');
        kstr(w, "file", c->file);
        kstr(w, "function", c->name);
        kintn(w, "line", s->frames[i].line, s->frames[i].line < 1);
        close_(w, '}');
    }
    close_(w, ']');
}

/* "site", "function" (the Python site when there is a Python stack),
 * "python_stack", "native_site" */
static void site_json(jw *w, ta_an *a, const ta_trace *t, int stack, int pystack)
{
    char *site = ta_site_text(a, t, stack, pystack);
    kstr(w, "site", site);
    free(site);
    kstr(w, "function", ta_site_function(a, t, stack, pystack));
    pystack_json(w, t, pystack, "python_stack");
    if (stack >= 0 && stack < t->nstacks && t->stacks[stack].nframes) {
        char *n = ta_native_site_text(a, t, stack);
        kstr(w, "native_site", n);
        free(n);
    } else {
        kstr(w, "native_site", NULL);
    }
}

static void call_json(jw *w, ta_an *a, const char *k, const ta_side *s)
{
    key(w, k);
    if (s->trace < 0 || s->call < 0) {
        if (s->trace >= 0 && (s->stack >= 0 || ta_py_valid(a->tr[s->trace], s->pystack))) {
            const ta_trace *t = a->tr[s->trace];
            open_(w, '{');
            kint(w, "rank", t->rank);
            site_json(w, a, t, s->stack, s->pystack);
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
    kintn(w, "peer", c->rp, !(ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) || c->rp < 0);
    /* the NCCL function it came through: the *Config twin of a collective, and its config */
    char ep[64];
    const char *cep = (c->xf & XF_CONFIG) ? ta_config_entry(c->op) : NULL;
    snprintf(ep, sizeof ep, "%s%s", cep ? "" : "nccl", cep ? cep : ta_op_names[c->op]);
    kstr(w, "entry_point", ep);
    key(w, "config");
    if (c->xf & XF_CONFIG) {
        const ta_collcfg *cf = ta_call_cfg(t, s->call);
        static const char *const states[4] = {"set", "null", "invalid", "unknown"};
        open_(w, '{');
        kstr(w, "state", states[cf ? cf->state : CFG_UNKNOWN]);
        char *tx = ta_cfg_text(cf);
        kstr(w, "text", tx);
        free(tx);
        if (cf && cf->state == CFG_SET) {
            if (cf->min_ctas != TA_CFG_UNSET) kint(w, "minCTAs", cf->min_ctas);
            if (cf->max_ctas != TA_CFG_UNSET) kint(w, "maxCTAs", cf->max_ctas);
            if (cf->nvls_ctas != TA_CFG_UNSET) kint(w, "nvlsCTAs", cf->nvls_ctas);
            if (cf->cga_cluster_size != TA_CFG_UNSET) kint(w, "cgaClusterSize", cf->cga_cluster_size);
            if (cf->alg) kstr(w, "algSelection", cf->alg);
            if (cf->force_alg != TA_CFG_UNSET) kint(w, "forceAlgSelection", cf->force_alg);
            if (cf->cta_policy != TA_CFG_UNSET) kint(w, "CTAPolicy", cf->cta_policy);
            if (cf->user_tag) { key(w, "userProfilerTag"); fprintf(w->o, "%llu", (unsigned long long)cf->user_tag); }
        }
        close_(w, '}');
    } else {
        fputs("null", w->o);
    }
    key(w, "signal");
    const ta_callx *x = (c->xf & XF_SIGNAL) ? ta_callx_of(t, s->call) : NULL;
    if (x) {
        open_(w, '{');
        kint(w, "index", x->sig_idx);
        kint(w, "context", x->sig_ctx);
        close_(w, '}');
    } else {
        fputs("null", w->o);
    }
    site_json(w, a, t, c->stack, c->pystack);
    stack_json(w, a, t, c->stack, "stack");
    close_(w, '}');
}

/* call ci of trace t (-1: null) */
static void call_json_at(jw *w, ta_an *a, const char *k, int t, int64_t ci)
{
    ta_side s = {.trace = ci >= 0 ? t : -1, .call = ci, .stack = -1, .pystack = -1};
    call_json(w, a, k, &s);
}

/* skipped_call: the culprit's call before the gap; the culprit's own call at
 * (comm, seq) that NCCL paired with the others' of another step */
static void skipped_json(jw *w, ta_an *a, const ta_finding *f)
{
    call_json_at(w, a, "gap_before", f->culprit.trace, f->gap_before);
    key(w, "mispaired");
    if (f->mis_call < 0) { fputs("null", w->o); return; }
    open_(w, '{');
    call_json_at(w, a, "call", f->culprit.trace, f->mis_call);
    call_json_at(w, a, "after", f->culprit.trace, f->mis_prev);
    call_json_at(w, a, "others_after", f->other.trace, f->mis_peer_prev);
    close_(w, '}');
}

static void kdbl(jw *w, const char *k, double v)
{
    key(w, k);
    if (v > 0) fprintf(w->o, "%.17g", v);
    else fputs("null", w->o);
}

static void check_json(jw *w, const char *k, const ta_trace *t, int64_t ci)
{
    key(w, k);
    if (!t || ci < 0) { fputs("null", w->o); return; }
    const ta_check cv = ta_check_at(t, ci), *c = &cv;
    open_(w, '{');
    kstr(w, "status", ta_ck_status_names[c->status]);
    kint(w, "nan", c->nan);
    kint(w, "inf", c->inf);
    kintn(w, "first", c->first, c->first == TA_NULL64);
    kstr(w, "first_kind", c->first_kind == 1 ? "nan" : c->first_kind == 2 ? "inf" : NULL);
    kint(w, "elems_checked", c->checked);
    kint(w, "elems", c->elems);
    kstr(w, "reason", c->reason);
    close_(w, '}');
}

static int has_rank(const int *v, int n, int r)
{
    for (int i = 0; i < n; i++) if (v[i] == r) return 1;
    return 0;
}

static void nanev_json(jw *w, ta_an *a, const ta_nanev *ev, int full)
{
    kstr(w, "cause", ta_nan_cause_names[ev->cause]);
    kstr(w, "reason", ev->reason);
    kstr(w, "op", ta_op_names[ev->op]);
    kstr(w, "dtype", ev->dtype == DT_NONE ? NULL : ta_dtype_names[ev->dtype]);
    kstr(w, "redop", ev->redop == RO_NONE ? NULL : ta_redop_names[ev->redop]);
    kdbl(w, "limit", ta_nan_limit(ev->dtype));
    kints(w, "unchecked_inputs", ev->unchecked, ev->nunchecked);
    if (!full) return;
    key(w, "members");
    open_(w, '[');
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        const ta_trace *t = m->trace >= 0 ? a->tr[m->trace] : NULL;
        sep(w);
        open_(w, '{');
        kint(w, "place", m->place);
        kintn(w, "rank", m->rank, m->rank < 0);
        kbool(w, "source", m->source);
        kbool(w, "lost", m->lost);
        if (t && m->call >= 0 && has_rank(ev->ranks, ev->nranks, m->rank)) {
            site_json(w, a, t, t->calls[m->call].stack, t->calls[m->call].pystack);
        } else {
            kstr(w, "site", NULL);
            kstr(w, "function", NULL);
            kstr(w, "python_stack", NULL);
            kstr(w, "native_site", NULL);
        }
        check_json(w, "input", t, m->in);
        check_json(w, "output", t, m->out);
        close_(w, '}');
    }
    close_(w, ']');
}

/* a hang's stuck collective: each member's state there (members.c) */
static void stuck_json(jw *w, ta_an *a, const ta_finding *f)
{
    key(w, "stuck_at");
    if (!f->nmem) { fputs("null", w->o); return; }
    open_(w, '{');
    kstr(w, "comm", ta_comm_name(a, f->at_g));
    kint(w, "seq", f->at_seq);
    key(w, "members");
    open_(w, '[');
    for (int p = 0; p < f->nmem; p++) {
        const ta_member *m = &f->mem[p];
        const ta_call *c = m->call >= 0 ? &a->tr[m->trace]->calls[m->call] : NULL;
        static const char *const gpu[4] = {NULL, "pending", "done", "error"};
        sep(w);
        open_(w, '{');
        kint(w, "place", m->place);
        kintn(w, "rank", m->rank, m->rank < 0);
        kstr(w, "state", ta_mstate_names[m->state]);
        key(w, "pending_s");
        if (m->pending_s >= 0) fprintf(w->o, "%.3f", m->pending_s);
        else fputs("null", w->o);
        kstr(w, "op", c ? ta_op_names[c->op] : NULL);
        kstr(w, "gpu", c && c->gpu < 4 ? gpu[c->gpu] : NULL);
        key(w, "returned");
        if (c) fputs(c->exit_ns != TA_NULL64 ? "true" : "false", w->o);
        else fputs("null", w->o);
        kbool(w, "lost", m->lost);
        close_(w, '}');
    }
    close_(w, ']');
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
    kint(&w, "ranks_without_trace_unlisted", a->missing_unlisted);
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

    /* warnings about the job's environment (not its input, not findings) */
    key(&w, "warnings");
    open_(&w, '[');
    for (int i = 0; i < a->nwarns; i++) {
        const ta_warning *x = &a->warns[i];
        sep(&w);
        open_(&w, '{');
        kstr(&w, "kind", x->kind);
        kstr(&w, "message", x->text);
        kstr(&w, "library", x->library);
        kintn(&w, "version", x->version, x->version <= 0);
        key(&w, "functions");
        open_(&w, '[');
        for (int k = 0; k < x->nfunctions; k++) { sep(&w); jstr(o, x->functions[k]); }
        close_(&w, ']');
        kint(&w, "functions_not_listed", x->functions_more);
        kints(&w, "ranks", x->ranks, x->nranks);
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
        stuck_json(&w, a, f);
        if (f->kind == K_DIVERGENCE && !strcmp(f->subkind, "skipped_call")) skipped_json(&w, a, f);
        if (f->kind == K_SIGNAL) {      /* the wait's signal number, and what the sender sent to the waiter */
            key(&w, "signal");
            open_(&w, '{');
            kint(&w, "waited", f->seq);
            kintn(&w, "sent", f->sig_sent, f->sig_sent < 0);
            close_(&w, '}');
        }
        if (f->win_upto > 0) {
            key(&w, "seq_window");
            fprintf(o, "[%lld,%lld]", (long long)f->win_after, (long long)f->win_upto);
            key(&w, "fingerprints");
            open_(&w, '[');
            for (int k = 0; k < f->nfpg; k++) {
                sep(&w);
                open_(&w, '{');
                kints(&w, "ranks", f->fpg[k].ranks, f->fpg[k].nranks);
                char h[24];
                snprintf(h, sizeof h, "0x%016llx", (unsigned long long)f->fpg[k].hash);
                kstr(&w, "hash", h);
                close_(&w, '}');
            }
            close_(&w, ']');
            kbool(&w, "tie", f->fp_tie);
        }
        if (f->kind == K_NAN && f->nan) {
            const ta_nanfinding *nf = f->nan;
            nanev_json(&w, a, &nf->ev, 1);
            kint(&w, "later_count", nf->later_count);
            key(&w, "later");
            open_(&w, '[');
            for (int k = 0; k < nf->nlater; k++) {
                sep(&w);
                open_(&w, '{');
                kstr(&w, "comm", ta_comm_name(a, nf->later[k].g));
                kint(&w, "from_seq", nf->later[k].from_seq);
                kint(&w, "collectives", nf->later[k].count);
                close_(&w, '}');
            }
            close_(&w, ']');
            key(&w, "independent");
            open_(&w, '[');
            for (int k = 0; k < nf->nindep; k++) {
                const ta_nanev *e = &nf->indep[k];
                sep(&w);
                open_(&w, '{');
                kstr(&w, "comm", ta_comm_name(a, e->g));
                kint(&w, "seq", e->seq);
                kints(&w, "ranks", e->ranks, e->nranks);
                nanev_json(&w, a, e, 0);
                close_(&w, '}');
            }
            close_(&w, ']');
            kint(&w, "unchecked_before", nf->unchecked_before);
        }
        if (f->kind == K_STRAGGLER && f->strag) {
            const ta_straggler *st = f->strag;
            kint(&w, "examined", st->examined);
            kint(&w, "last", st->last);
            key(&w, "last_fraction");
            fprintf(o, "%.4f", st->examined ? (double)st->last / (double)st->examined : 0.0);
            kint(&w, "lateness_median_ns", st->median_ns);
            kint(&w, "lateness_max_ns", st->max_ns);
            kint(&w, "jitter_ns", st->jitter_ns);
            kint(&w, "threshold_ns", st->threshold_ns);
            kint(&w, "interval_ns", st->interval_ns);
            kint(&w, "spread_median_ns", st->spread_ns);
            kstr(&w, "clock", ta_strag_clock_names[st->clock]);
            key(&w, "also_comms");
            open_(&w, '[');
            for (int k = 0; k < st->nalso; k++) { sep(&w); jstr(o, ta_comm_name(a, st->also[k])); }
            close_(&w, ']');
        }
        if (f->kind == K_OOM || f->kind == K_IMBALANCE) {
            if (f->kind == K_OOM) {
                kint(&w, "bytes", f->bytes);
                kint(&w, "live_bytes", f->live);
            }
            kint(&w, "peak_bytes", f->peak);
            if (f->kind == K_IMBALANCE) kint(&w, "median_peak_bytes", f->median);
            const ta_trace *ct = f->culprit.trace >= 0 ? a->tr[f->culprit.trace] : NULL;
            stack_json(&w, a, ct, f->stack2, "peak_stack");
            pystack_json(&w, ct, f->pystack2, "peak_python_stack");
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
        /* the ring: where the calls were read from, and how many were lost */
        key(&w, "ring");
        if (t->from_ring || t->ring_file || t->ring_capacity > 0) {
            open_(&w, '{');
            kstr(&w, "file", t->ring_file);
            kbool(&w, "from_ring", t->from_ring);
            kint(&w, "lost", t->ring_lost);
            close_(&w, '}');
        } else {
            fputs("null", o);
        }
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
        key(&w, "python");           /* the trace's "python" (null: an older shim) */
        if (t->py_state) {
            open_(&w, '{');
            kstr(&w, "state", t->py_state);
            kstr(&w, "version", t->py_version);
            kstr(&w, "detail", t->py_detail);
            int np = 0;
            for (int k = 0; k < t->npystacks; k++) np += t->pystacks[k].nframes > 0;
            kint(&w, "stacks", np);
            close_(&w, '}');
        } else {
            fputs("null", o);
        }
        key(&w, "nccl");             /* the trace's "nccl" (null: not known) */
        if (t->has_nccl) {
            open_(&w, '{');
            kintn(&w, "version", t->nccl_version, t->nccl_version <= 0);
            kstr(&w, "library", t->nccl_lib);
            kintn(&w, "exports", t->nccl_exports, t->nccl_exports < 0);
            key(&w, "unknown_functions");
            open_(&w, '[');
            for (int k = 0; k < t->nnccl_unknown; k++) { sep(&w); jstr(o, t->nccl_unknown[k]); }
            close_(&w, ']');
            close_(&w, '}');
        } else {
            fputs("null", o);
        }
        key(&w, "nancheck");
        if (t->nan_mode == NM_ABSENT) {
            fputs("null", o);
        } else {
            int64_t cnt[4] = {0, 0, 0, 0};
            for (int64_t k = 0; k < t->nchecks; k++) cnt[t->checks[k].status]++;
            open_(&w, '{');
            kstr(&w, "mode", ta_nm_names[t->nan_mode]);
            kstr(&w, "engine", t->nan_engine);
            kstr(&w, "gpu_unused", t->nan_gpu_unused);
            kint(&w, "checks", t->nchecks);
            kint(&w, "nonfinite", cnt[CK_NONFINITE]);
            kint(&w, "not_checked", cnt[CK_NOT_CHECKED]);
            kint(&w, "pending", cnt[CK_PENDING]);
            kint(&w, "dropped", t->nan_dropped);
            close_(&w, '}');
        }
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
        char *txt = ta_missing_text(a, i);
        kstr(&w, "text", txt);
        free(txt);
        close_(&w, '}');
        key(&w, "peak_bytes"); fputs("null", o);
        key(&w, "nancheck"); fputs("null", o);
        int k = a->missing_wfail ? a->missing_wfail[i] : -1;
        if (k >= 0) {              /* the shim's marker: its trace write failed */
            const ta_wfail *m = &a->wfail[k];
            key(&w, "write_failed");
            open_(&w, '{');
            kstr(&w, "file", m->file);
            kstr(&w, "error", m->error);
            kintn(&w, "errno", m->err, !m->err);
            kintn(&w, "bytes", m->bytes, m->bytes < 0);
            kstr(&w, "host", m->host);
            kintn(&w, "pid", m->pid, m->pid < 0);
            close_(&w, '}');
        }
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
        /* members whose trace says it is suspended (ncclCommSuspend, not resumed) */
        key(&w, "suspended_ranks");
        fputc('[', o);
        for (int p = 0, k = 0; p < n->npos; p++) {
            int m = n->member[p];
            if (m < 0 || !a->tr[m]->comms[n->local[p]].suspended) continue;
            fprintf(o, "%s%d", k++ ? "," : "", a->tr[m]->rank);
        }
        fputc(']', o);
        kint(&w, "collectives", n->maxseq);
        key(&w, "entry_spread");
        if (n->spread_n) {
            open_(&w, '{');
            kint(&w, "collectives", n->spread_n);
            kint(&w, "median_ns", n->spread_median_ns);
            kint(&w, "max_ns", n->spread_max_ns);
            kint(&w, "max_seq", n->spread_max_seq);
            kstr(&w, "clock", ta_strag_clock_names[n->spread_clock]);
            close_(&w, '}');
        } else {
            fputs("null", o);
        }
        close_(&w, '}');
    }
    close_(&w, ']');
    close_(&w, '}');
    fputc('\n', o);
}
