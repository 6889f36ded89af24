/* A JSON trace's "graphs" (docs/trace-format.md, "CUDA graphs"): the
 * graphs whose capture recorded NCCL calls, indexed by the GraphLaunch
 * entries' "graph". Optional (older traces lack it) and never fatal: a
 * "graphs" that is not an array of at most GRAPHS_MAX entries is named and
 * not used; an entry that breaks a rule is dropped whole (one note counting
 * them, the first named): the launches of a graph not used replay calls
 * that are not known (graphs.c says so). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "load_int.h"
#include "trshim/ring_format.h"

#define GRAPHS_MAX 65536          /* the shim records at most that many */

/* an integer JSON value in [lo, hi] */
static int int_in(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= lo && v->valuedouble <= hi;
}

/* a stack or Python stack index of a graph: below n, else -1 (unknown) */
static int site_index(const cJSON *o, const char *name, int n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && int_in(v, 0, (double)n - 1) ? (int)v->valuedouble : -1;
}

/* one captured call: NULL, or why the graph is not used */
static const char *conv_gcall(const cJSON *e, const ta_trace *t, ta_gcall *o)
{
    memset(o, 0, sizeof *o);
    o->cfg = -1;
    if (!cJSON_IsObject(e)) return "is not an object";
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(e, "op"), *ln = cJSON_GetObjectItemCaseSensitive(e, "lane");
    int opn = cJSON_IsString(op) ? ta_op_parse(op->valuestring) : -1;
    int lane = opn >= 0 ? ta_lane_of(opn) : -1;
    if (lane < 0) return "op is not a collective, send, receive, signal or wait";
    /* the lane is the operation's own (a collective on its communicator, a
     * message in its direction): another would number other calls */
    if (!cJSON_IsString(ln) || ta_lane_parse(ln->valuestring) != lane) return "lane is not the one of its op";
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "comm");
    if (!int_in(v, -1, (double)t->ncomms - 1)) return "comm is not an index into comms or -1";
    o->comm = (int32_t)v->valuedouble;       /* -1: another device's communicator */
    v = cJSON_GetObjectItemCaseSensitive(e, "count");
    if (!int_in(v, 0, 9.2e18)) return "count is not a non-negative integer";
    o->count = (int64_t)v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(e, "n");
    /* numbers per replay: a wait's signals (opCnt), one for any other call */
    if (!int_in(v, 1, 0x7fffffff) || (lane != TRR_LANE_WAIT && v->valuedouble != 1))
        return "n is not the numbers the call takes in its lane";
    o->n = (uint64_t)v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    int dt = DT_NONE;
    if (v && !cJSON_IsNull(v) && (!cJSON_IsString(v) || (dt = ta_dtype_parse(v->valuestring)) < 0))
        return "dtype is not a known datatype or null";
    v = cJSON_GetObjectItemCaseSensitive(e, "redop");
    int ro = RO_NONE;
    if (v && !cJSON_IsNull(v) && (!cJSON_IsString(v) || (ro = ta_redop_parse(v->valuestring)) < 0))
        return "redop is not a known reduction or null";
    const char *rp_name = lane == TRR_LANE_COLL ? "root" : "peer";
    v = cJSON_GetObjectItemCaseSensitive(e, rp_name);
    o->rp = -1;
    if (v && !cJSON_IsNull(v)) {
        if (!int_in(v, 0, 0x7fffffff)) return lane == TRR_LANE_COLL ? "root is not a rank or null" : "peer is not a rank";
        if (lane != TRR_LANE_COLL || ta_op_rooted(opn)) o->rp = (int32_t)v->valuedouble;
    }
    if (lane != TRR_LANE_COLL && o->rp < 0) return "a send, receive, signal or wait has no peer";
    o->op = (uint8_t)opn;
    o->lane = (uint8_t)lane;
    o->dtype = (uint8_t)dt;
    o->redop = (uint8_t)ro;
    o->stack = site_index(e, "stack", t->nstacks);
    o->pystack = site_index(e, "pystack", t->npystacks);
    if (o->pystack >= 0 && !t->pystacks[o->pystack].nframes) o->pystack = -1;   /* a damaged stack */
    return NULL;
}

/* one entry of "graphs": NULL, or why it is not used */
static const char *conv_graph(const cJSON *e, const ta_trace *t, int ngraphs, ta_graph *g)
{
    if (!cJSON_IsObject(e)) return " is not an object";
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(e, "calls");
    if (!cJSON_IsArray(calls)) return ".calls is not an array";
    int n = cJSON_GetArraySize(calls);
    if (n > TRR_GRAPH_MAX_CALLS) return ".calls has more entries than a graph lists (4096)";
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "dropped"), *b = cJSON_GetObjectItemCaseSensitive(e, "base");
    if (d && !cJSON_IsNull(d) && !int_in(d, 0, 4294967295.0)) return ".dropped is not a count";
    if (b && !cJSON_IsNull(b) && !int_in(b, -1, (double)GRAPHS_MAX)) return ".base is not a graph index or -1";
    g->calls = xcalloc((size_t)n + 1, sizeof *g->calls);
    int k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        static __thread char why[96];
        const char *w = conv_gcall(c, t, &g->calls[k]);
        if (w) {
            snprintf(why, sizeof why, ".calls[%d] %s", k, w);
            free(g->calls);
            g->calls = NULL;
            return why;
        }
    }
    g->ncalls = n;
    g->dropped = d && cJSON_IsNumber(d) ? (int64_t)d->valuedouble : 0;
    g->base = b && cJSON_IsNumber(b) && b->valuedouble < ngraphs ? (int)b->valuedouble : -1;
    g->stack = site_index(e, "stack", t->nstacks);
    g->end_stack = site_index(e, "end_stack", t->nstacks);
    g->pystack = site_index(e, "pystack", t->npystacks);
    g->end_pystack = site_index(e, "end_pystack", t->npystacks);
    if (g->pystack >= 0 && !t->pystacks[g->pystack].nframes) g->pystack = -1;
    if (g->end_pystack >= 0 && !t->pystacks[g->end_pystack].nframes) g->end_pystack = -1;
    g->valid = 1;
    return NULL;
}

void conv_graphs(pctx *x, const cJSON *root, ta_trace *t)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "graphs");
    if (!o || cJSON_IsNull(o)) return;
    int n = cJSON_IsArray(o) ? cJSON_GetArraySize(o) : -1;
    if (n < 0 || n > GRAPHS_MAX) {
        ta_note_add(x->a, x->file, 0, "field graphs is %s: the calls its CUDA graph launches replay are not known",
                    n < 0 ? "not an array" : "longer than the 65536 graphs a process records");
        return;
    }
    t->graphs = xcalloc((size_t)n + 1, sizeof *t->graphs);
    t->ngraphs = n;
    int i = 0, bad = 0;
    char first[160] = "";
    for (const cJSON *e = o->child; e; e = e->next, i++) {
        ta_graph *g = &t->graphs[i];
        *g = (ta_graph){.stack = -1, .pystack = -1, .end_stack = -1, .end_pystack = -1, .base = -1, .gid = -1};
        const char *why = conv_graph(e, t, n, g);
        if (why && !bad++) snprintf(first, sizeof first, "graphs[%d]%s", i, why);
    }
    if (bad)
        ta_note_add(x->a, x->file, 0, "%d damaged CUDA graph(s) in graphs ignored (first: %s): the calls their "
                    "launches replay are not known", bad, first);
}
