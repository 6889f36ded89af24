/* When the calls of a finding are replays of a CUDA graph and the ranks
 * launched that graph a different number of times, the finding says so:
 * "rank 3 launched graph G1 (captured at train.py:88 in main) 41 times,
 * ranks 0-2 42 times; replay 42's AllReduce(...) #84 on comm 0x... (launched
 * at train.py:95 in main) waits for rank 3". A replay has no host call of
 * its own, so the count of launches is what tells a rank that left its loop
 * one step early from one that replayed something else. Also the job's
 * graphs in --json ("graphs"). */
#include <stdlib.h>
#include <string.h>

#include "site/ta_site.h"
#include "ta_finding.h"
#include "ta_jw.h"

/* trace t holds job-wide graph gid (0 launches or more); with site set, a
 * graph captured at the same place (another graph of that code) */
static int holds(const ta_an *a, const ta_trace *t, int gid, int site)
{
    for (int i = 0; i < t->ngraphs; i++) {
        int g = ta_graph_gid(t, i);
        if (g == gid || (site && g >= 0 && a->graphs[g].site == a->graphs[gid].site)) return 1;
    }
    return 0;
}

/* the launches of job-wide graph gid on trace t: the highest replay number
 * of its calls (the oldest launches may be gone from the ring: their
 * numbers are not) */
static int64_t launches(const ta_trace *t, int gid)
{
    int64_t n = 0;
    for (int64_t k = 0; k < t->ncallx; k++) {
        const ta_callx *x = &t->callx[k];
        if ((t->calls[x->call].xf & XF_REPLAY) && ta_graph_gid(t, x->graph) == gid && x->replay > n) n = x->replay;
    }
    return n;
}

static const ta_callx *replay_of(const ta_an *a, int t, int64_t ci)
{
    if (t < 0 || ci < 0) return NULL;
    const ta_trace *tr = a->tr[t];
    return ci < tr->ncalls && (tr->calls[ci].xf & XF_REPLAY) ? ta_callx_of(tr, ci) : NULL;
}

typedef struct { int rank; int64_t n; } rc_t;
static int cmp_rc(const void *p, const void *q)
{
    const rc_t *x = p, *y = q;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;    /* the most launches first */
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int is_culprit(const ta_finding *f, int rank)
{
    for (int k = 0; k < f->culprit.nranks; k++)
        if (f->culprit.ranks[k] == rank) return 1;
    return 0;
}

static void summarize(ta_an *a, ta_finding *f)
{
    /* the replayed call: the waiting side's, else the culprit's, else a member's at the stuck collective */
    int side = 0, t = f->other.trace;
    int64_t ci = f->other.call;
    const ta_callx *x = replay_of(a, t, ci);
    if (!x) {
        side = 1;
        t = f->culprit.trace;
        ci = f->culprit.call;
        x = replay_of(a, t, ci);
    }
    for (int p = 0; p < f->nmem && !x; p++) {
        side = is_culprit(f, f->mem[p].rank);
        t = f->mem[p].trace;
        ci = f->mem[p].call;
        x = replay_of(a, t, ci);
    }
    if (!x) return;
    const ta_trace *tr = a->tr[t];
    int gid = ta_graph_gid(tr, x->graph);
    if (gid < 0) return;
    /* the members of the finding's communicator (every rank without one)
     * that hold the graph, and the culprits that never captured that code
     * as a graph (not pipeline stages whose graphs differ by design) */
    int n = 0;
    rc_t *v = xmalloc(sizeof *v * ((size_t)a->ntr + 1));
    for (int p = 0, np = f->g >= 0 ? a->gc[f->g].npos : a->ntr; p < np && n < a->ntr; p++) {
        int m = f->g >= 0 ? a->gc[f->g].member[p] : p;
        if (m < 0) continue;
        const ta_trace *u = a->tr[m];
        if (holds(a, u, gid, 0) || (is_culprit(f, u->rank) && !holds(a, u, gid, 1)))
            v[n++] = (rc_t){u->rank, launches(u, gid)};
    }
    int differ = 0, none = 0;
    for (int k = 0; k < n; k++) {
        differ |= v[k].n != v[0].n;
        none |= v[k].n == 0;
    }
    /* a culprit that replays another graph there: the sides name both graphs already */
    const ta_callx *cx = replay_of(a, f->culprit.trace, f->culprit.call);
    if (!differ || (none && cx && ta_graph_gid(a->tr[f->culprit.trace], cx->graph) != gid)) {
        free(v);
        return;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_rc);
    /* groups of equal counts, the culprits' first (they usually launched fewer) */
    ta_glaunch *gl = xcalloc(1, sizeof *gl);
    gl->gid = gid;
    gl->trace = t;
    gl->call = ci;
    gl->side = side;
    gl->groups = xcalloc((size_t)n + 1, sizeof *gl->groups);
    for (int k = 0; k < n;) {
        int j = k;
        while (j < n && v[j].n == v[k].n) j++;
        ta_glgroup *g = &gl->groups[gl->ngroups++];
        g->count = v[k].n;
        g->ranks = xmalloc(sizeof(int) * (size_t)(j - k));
        for (int q = k; q < j; q++) g->ranks[g->n++] = v[q].rank;
        ta_ints_sort(g->ranks, g->n);
        k = j;
    }
    for (int k = 0; k < gl->ngroups; k++) {
        int cul = 0;
        for (int q = 0; q < gl->groups[k].n; q++) cul |= is_culprit(f, gl->groups[k].ranks[q]);
        if (cul && k) {
            ta_glgroup g0 = gl->groups[k];
            memmove(&gl->groups[1], &gl->groups[0], sizeof *gl->groups * (size_t)k);
            gl->groups[0] = g0;
            break;
        }
    }
    free(v);
    f->glaunch = gl;
    /* the sentence */
    char *cap = ta_capture_site_text(a, tr, x->graph), *lau = ta_launch_site_text(a, tr, x);
    char *call = ta_call_text(a, tr, ci);
    char *s = xstrdup("");
    for (int k = 0; k < gl->ngroups; k++) {
        const ta_glgroup *g = &gl->groups[k];
        const char *rs = g->n > 1 ? "ranks" : "rank";
        char *r = ta_ranks_text(g->ranks, g->n);
        char *cnt = !g->count ? xstrdup("never") : g->count == 1 ? xstrdup("once")
                                                                 : xasprintf("%lld times", (long long)g->count);
        char *ns;
        if (!k && g->count)
            ns = xasprintf("%s %s launched graph %s (captured at %s) %s", rs, r, ta_graph_name(a, gid), cap, cnt);
        else if (!k)
            ns = xasprintf("%s %s never launched graph %s (captured at %s)", rs, r, ta_graph_name(a, gid), cap);
        else
            ns = xasprintf("%s, %s %s %s", s, rs, r, cnt);
        free(s);
        s = ns;
        free(r);
        free(cnt);
    }
    char *cr = ta_ranks_text(f->culprit.ranks, f->culprit.nranks);
    char *tail;
    if (!side)
        tail = xasprintf("; replay %lld's %s (launched at %s) waits for %s %s", (long long)x->replay, call, lau,
                         f->culprit.nranks > 1 ? "ranks" : "rank", cr);
    else
        tail = xasprintf("; %s %s's replay %lld issued %s there (launched at %s)", f->culprit.nranks > 1 ? "ranks" : "rank",
                         cr, (long long)x->replay, call, lau);
    char *m = xasprintf("%s%s%s%s", f->message ? f->message : "", f->message && f->message[0] ? "; " : "", s, tail);
    free(f->message);
    f->message = m;
    free(s); free(tail); free(cr); free(call); free(cap); free(lau);
}

void ta_graph_launches(ta_an *a)
{
    if (!a->ngraphs) return;
    for (int i = 0; i < a->nf; i++) summarize(a, &a->f[i]);
}

void ta_graph_launches_json(ta_jw *w, ta_an *a, const ta_finding *f)
{
    jw_key(w, "graph_launches");
    const ta_glaunch *gl = f->glaunch;
    if (!gl) { fputs("null", w->o); return; }
    const ta_trace *t = a->tr[gl->trace];
    const ta_callx *x = ta_callx_of(t, gl->call);
    jw_open(w, '{');
    jw_str(w, "graph", ta_graph_name(a, gl->gid));
    char *id = ta_graph_id(a, gl->gid), *cap = ta_capture_site_text(a, t, x ? x->graph : -1);
    jw_str(w, "graph_id", id);
    jw_str(w, "capture_site", cap);
    free(id);
    free(cap);
    jw_int(w, "replay", x ? x->replay : 0);
    jw_int(w, "rank", t->rank);
    jw_key(w, "launches");
    jw_open(w, '[');
    for (int k = 0; k < gl->ngroups; k++) {
        jw_sep(w);
        jw_open(w, '{');
        jw_ints(w, "ranks", gl->groups[k].ranks, gl->groups[k].n);
        jw_int(w, "count", gl->groups[k].count);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

void ta_graphs_json(ta_jw *w, ta_an *a)
{
    jw_key(w, "graphs");
    jw_open(w, '[');
    int *r = xmalloc(sizeof(int) * ((size_t)a->ntr + 1));
    for (int gid = 0; gid < a->ngraphs; gid++) {
        const ta_jgraph *g = &a->graphs[gid];
        const ta_trace *t = a->tr[g->trace];
        int n = 0;
        for (int k = 0; k < a->ntr; k++) {
            int has = 0;
            for (int i = 0; i < a->tr[k]->ngraphs && !has; i++) has = ta_graph_gid(a->tr[k], i) == gid;
            if (has) r[n++] = a->tr[k]->rank;
        }
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "name", ta_graph_name(a, gid));
        char *id = ta_graph_id(a, gid), *cap = ta_capture_site_text(a, t, g->index);
        jw_str(w, "id", id);
        jw_str(w, "capture_site", cap);
        free(id);
        free(cap);
        jw_int(w, "calls", t->graphs[g->index].ncalls);
        jw_ints(w, "ranks", r, n);
        jw_close(w, '}');
    }
    free(r);
    jw_close(w, ']');
}
