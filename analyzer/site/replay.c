/* How a call replayed by a CUDA graph launch is named wherever a call is
 * shown: its own call site is where it was captured (the line that issued
 * the collective inside the captured code), and it says which replay of
 * which graph it is, where that graph's capture began and where the launch
 * was made (graphs.c made the replays and named the graphs job-wide). */
#include <stdlib.h>
#include <string.h>

#include "ta_site.h"

int ta_graph_gid(const ta_trace *t, int gi)
{
    return t && gi >= 0 && gi < t->ngraphs && t->graphs[gi].valid ? t->graphs[gi].gid : -1;
}

const char *ta_graph_name(const ta_an *a, int gid)
{
    static __thread char buf[8][24];
    static __thread int k;
    char *b = buf[k++ & 7];
    if (gid < 0 || gid >= a->ngraphs) snprintf(b, 24, "G?");
    else snprintf(b, 24, "G%d", gid + 1);
    return b;
}

char *ta_graph_id(const ta_an *a, int gid)
{
    if (gid < 0 || gid >= a->ngraphs) return NULL;
    return xasprintf("0x%016llx", (unsigned long long)a->graphs[gid].key);
}

/* a site that may be unknown (the shim saw a capture only from its first call) */
static char *site_or(ta_an *a, const ta_trace *t, int stack, int py, const char *unknown)
{
    if (stack < 0 && !ta_py_valid(t, py)) return xstrdup(unknown);
    return ta_site_text(a, t, stack, py);
}

char *ta_capture_site_text(ta_an *a, const ta_trace *t, int gi)
{
    if (gi < 0 || gi >= t->ngraphs) return xstrdup("an unknown place");
    const ta_graph *g = &t->graphs[gi];
    if (g->stack < 0 && !ta_py_valid(t, g->pystack) && (g->end_stack >= 0 || ta_py_valid(t, g->end_pystack))) {
        char *e = ta_site_text(a, t, g->end_stack, g->end_pystack);
        char *r = xasprintf("an unknown place (it ended at %s)", e);
        free(e);
        return r;
    }
    return site_or(a, t, g->stack, g->pystack, "an unknown place");
}

char *ta_launch_site_text(ta_an *a, const ta_trace *t, const ta_callx *x)
{
    return site_or(a, t, x->lstack, x->lpystack, "an unknown place");
}

char *ta_replay_text(ta_an *a, const ta_trace *t, int64_t ci)
{
    if (ci < 0 || ci >= t->ncalls || !(t->calls[ci].xf & XF_REPLAY)) return NULL;
    const ta_callx *x = ta_callx_of(t, ci);
    if (!x) return NULL;
    char *cap = ta_capture_site_text(a, t, x->graph), *lau = ta_launch_site_text(a, t, x);
    char *r = xasprintf("replay %lld of graph %s, captured at %s, launched at %s", (long long)x->replay,
                        ta_graph_name(a, ta_graph_gid(t, x->graph)), cap, lau);
    free(cap);
    free(lau);
    return r;
}

char *ta_call_site_text(ta_an *a, const ta_trace *t, int64_t ci)
{
    char *s = ta_site_text(a, t, t->calls[ci].stack, t->calls[ci].pystack);
    char *rp = ta_replay_text(a, t, ci);
    if (!rp) return s;
    char *r = xasprintf("%s (%s)", s, rp);
    free(s);
    free(rp);
    return r;
}

char *ta_call_text_replay(ta_an *a, const ta_trace *t, int64_t ci)
{
    char *c = ta_call_text(a, t, ci), *rp = ta_replay_text(a, t, ci);
    if (!rp) return c;
    char *r = xasprintf("%s (%s)", c, rp);
    free(c);
    free(rp);
    return r;
}
