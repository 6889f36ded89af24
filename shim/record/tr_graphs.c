/* CUDA graphs that hold NCCL calls: see tr_graphs.h.
 *
 * Captures and graph API calls are rare (a framework captures a few dozen
 * graphs at start-up), so one mutex guards the tables; a launch takes it
 * once to find its executable graph and count the replay. Graphs are never
 * freed: an executable graph keeps replaying its graph after the
 * cudaGraph_t was destroyed, and a process captures few of them (at most
 * MAX_GRAPHS are recorded, then one "trshim:" line). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tr_graphs.h"
#include "tr_ring.h"

_Static_assert((int)TR_P2P_SEND == (int)TRR_LANE_SEND && (int)TR_P2P_RECV == (int)TRR_LANE_RECV &&
                   (int)TR_P2P_SIGNAL == (int)TRR_LANE_SIGNAL && (int)TR_P2P_WAIT == (int)TRR_LANE_WAIT,
               "a per-peer lane is the direction its calls are numbered in");

#define MAX_GRAPHS 65536
#define MAX_CAPTURES 256

typedef struct {
    uint64_t id;                   /* 0: free */
    uint64_t stream;
    int32_t stack, pystack, base;
    uint32_t n, cap, dropped;
    trr_graph_call *calls;
    ncclComm_t *handles;
} capture;

/* handle -> value, open addressing; key 0 empty, TOMB a removed entry */
#define TOMB UINTPTR_MAX
typedef struct { uintptr_t key; uint32_t graph; uint64_t replays; } slot;
typedef struct { slot *s; size_t cap, used; } table;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static capture g_caps[MAX_CAPTURES];
/* fixed, so that the writer reads it without the lock (a trace write may
 * interrupt a thread holding it); untouched pages cost nothing */
static tr_graph *g_graphs[MAX_GRAPHS];
static _Atomic uint32_t g_ngraphs;     /* published (release) after the graph is complete */
static table g_by_graph, g_by_exec;
static atomic_int g_any;               /* an executable graph with NCCL calls was ever made */

static size_t hash(uintptr_t k) { return (size_t)((k >> 4) * 0x9e3779b97f4a7c15ull); }

static slot *t_find(table *t, uintptr_t key)
{
    if (!t->cap || !key || key == TOMB) return NULL;
    for (size_t i = hash(key) & (t->cap - 1), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
        if (t->s[i].key == key) return &t->s[i];
        if (!t->s[i].key) return NULL;
    }
    return NULL;
}

/* The entry of key, made (zeroed) when missing; NULL without memory. */
static slot *t_put(table *t, uintptr_t key)
{
    slot *e = t_find(t, key);
    if (e || !key || key == TOMB) return e;
    if ((t->used + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        slot *s = calloc(cap, sizeof *s);
        if (!s) return NULL;
        table nt = {s, cap, 0};
        for (size_t i = 0; i < t->cap; i++)
            if (t->s[i].key && t->s[i].key != TOMB) {
                slot *d = &s[hash(t->s[i].key) & (cap - 1)];
                while (d->key) d = d == &s[cap - 1] ? s : d + 1;
                *d = t->s[i];
                nt.used++;
            }
        free(t->s);
        *t = nt;
    }
    size_t i = hash(key) & (t->cap - 1);
    while (t->s[i].key && t->s[i].key != TOMB) i = (i + 1) & (t->cap - 1);
    if (!t->s[i].key) t->used++;
    t->s[i] = (slot){.key = key};
    return &t->s[i];
}

static void t_del(table *t, uintptr_t key)
{
    slot *e = t_find(t, key);
    if (e) *e = (slot){.key = TOMB};
}

/* ---- captures ------------------------------------------------------------------------- */

static capture *cap_find(uint64_t id)
{
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (g_caps[i].id == id) return &g_caps[i];
    return NULL;
}

static capture *cap_new(uint64_t id)
{
    capture *c = cap_find(0);
    if (!c) {
        tr_warn("graphs: more than %d captures at once; the NCCL calls of the others are not attached to "
                "their graphs", MAX_CAPTURES);
        return NULL;
    }
    *c = (capture){.id = id, .stack = -1, .pystack = -1, .base = -1};
    return c;
}

static void cap_free(capture *c)
{
    free(c->calls);
    free(c->handles);
    *c = (capture){0};
}

static int cap_append(capture *c, const trr_graph_call *call, ncclComm_t h)
{
    if (c->n >= TRR_GRAPH_MAX_CALLS) return 0;
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 16;
        trr_graph_call *calls = realloc(c->calls, cap * sizeof *calls);
        if (calls) c->calls = calls;
        ncclComm_t *hs = calls ? realloc(c->handles, cap * sizeof *hs) : NULL;
        if (hs) c->handles = hs;
        if (!calls || !hs) return 0;
        c->cap = cap;
    }
    c->calls[c->n] = *call;
    c->handles[c->n++] = h;
    return 1;
}

void tr_graph_capture_begun(uint64_t capture_id, cudaStream_t s, int32_t stack, int32_t pystack, uintptr_t base)
{
    if (!capture_id) return;
    pthread_mutex_lock(&g_mu);
    capture *c = cap_find(capture_id);
    if (c) cap_free(c);              /* an id CUDA ended without our seeing it */
    c = cap_new(capture_id);
    if (c) {
        c->stream = (uint64_t)(uintptr_t)s;
        c->stack = stack;
        c->pystack = pystack;
        slot *g = t_find(&g_by_graph, base);
        if (g) {
            /* the graph's calls come first: its launches replay them too */
            const tr_graph *b = g_graphs[g->graph];
            c->base = (int32_t)b->head.index;
            for (uint32_t i = 0; i < b->head.ncalls; i++) cap_append(c, &b->calls[i], b->handles[i]);
            c->dropped = b->head.dropped;
        }
    }
    pthread_mutex_unlock(&g_mu);
}

void tr_graph_capture_call(uint64_t capture_id, const trr_graph_call *call, ncclComm_t h)
{
    if (!capture_id) return;
    pthread_mutex_lock(&g_mu);
    capture *c = cap_find(capture_id);
    if (!c) c = cap_new(capture_id);   /* a capture begun where the shim did not see it */
    if (c && !cap_append(c, call, h)) c->dropped++;
    pthread_mutex_unlock(&g_mu);
}

/* ---- graphs --------------------------------------------------------------------------- */

static int make_lanes(tr_graph *g)
{
    g->lanes = calloc(g->head.ncalls ? g->head.ncalls : 1, sizeof *g->lanes);
    uint32_t *idx = calloc(g->head.ncalls ? g->head.ncalls : 1, sizeof *idx);
    if (!g->lanes || !idx) {
        free(idx);
        return 0;
    }
    /* the collective lanes' indexes share one array, in lane order */
    uint32_t used = 0;
    for (uint32_t i = 0; i < g->head.ncalls; i++) {
        const trr_graph_call *k = &g->calls[i];
        if (k->comm < 0) continue;
        int32_t peer = k->lane == TRR_LANE_COLL ? NONE : k->root;
        tr_graph_lane *l = NULL;
        for (uint32_t j = 0; j < g->nlanes && !l; j++)
            if (g->lanes[j].comm == k->comm && g->lanes[j].lane == k->lane && g->lanes[j].peer == peer)
                l = &g->lanes[j];
        if (!l) {
            l = &g->lanes[g->nlanes++];
            *l = (tr_graph_lane){.comm = k->comm, .handle = g->handles[i], .lane = k->lane, .peer = peer};
        }
        l->total += k->n;
        if (k->lane == TRR_LANE_COLL) l->ncolls++;
    }
    for (uint32_t j = 0; j < g->nlanes; j++) {
        tr_graph_lane *l = &g->lanes[j];
        if (l->lane != TRR_LANE_COLL) continue;
        l->colls = idx + used;
        uint32_t m = 0;
        for (uint32_t i = 0; i < g->head.ncalls; i++)
            if (g->calls[i].comm == l->comm && g->calls[i].lane == TRR_LANE_COLL) l->colls[m++] = i;
        used += m;
    }
    if (!used) free(idx);
    return 1;
}

static void graph_free(tr_graph *g)
{
    if (!g) return;
    for (uint32_t j = 0; j < g->nlanes; j++)
        if (g->lanes[j].lane == TRR_LANE_COLL) {
            free(g->lanes[j].colls);   /* the first collective lane holds the shared array */
            break;
        }
    free(g->lanes);
    free(g->calls);
    free(g->handles);
    free(g);
}

void tr_graph_capture_ended(uint64_t capture_id, int ok, uintptr_t graph, int32_t stack, int32_t pystack)
{
    if (!capture_id) return;
    pthread_mutex_lock(&g_mu);
    capture *c = cap_find(capture_id);
    if (!c) goto out;
    if (!ok || !graph || !c->n) goto done;
    if (g_ngraphs >= MAX_GRAPHS) {
        tr_warn("graphs: more than %d captured graphs hold NCCL calls; launches of the others are not "
                "recorded", MAX_GRAPHS);
        goto done;
    }
    tr_graph *g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->head = (trr_graph){.index = g_ngraphs, .ncalls = c->n, .capture_id = capture_id, .stream = c->stream,
                          .graph = graph, .stack = c->stack, .pystack = c->pystack, .end_stack = stack,
                          .end_pystack = pystack, .dropped = c->dropped, .base = c->base};
    g->calls = c->calls;
    g->handles = c->handles;
    c->calls = NULL;
    c->handles = NULL;
    if (!make_lanes(g)) {
        graph_free(g);
        goto nomem;
    }
    slot *e = t_put(&g_by_graph, graph);
    if (!e) {
        graph_free(g);
        goto nomem;
    }
    e->graph = g->head.index;
    tr_ring_add_blob(TRR_BLOB_GRAPH, &g->head, sizeof g->head, g->calls, g->head.ncalls * sizeof *g->calls);
    g_graphs[g_ngraphs] = g;
    atomic_store_explicit(&g_ngraphs, g_ngraphs + 1, memory_order_release);
    goto done;
nomem:
    tr_warn("graphs: no memory for a captured graph; its launches are not recorded");
done:
    cap_free(c);
out:
    pthread_mutex_unlock(&g_mu);
}

/* ---- executable graphs ----------------------------------------------------------------- */

void tr_graph_exec_set(uintptr_t exec, uintptr_t graph, int instantiated)
{
    if (!exec) return;
    pthread_mutex_lock(&g_mu);
    slot *g = t_find(&g_by_graph, graph);
    if (!g) {
        /* no NCCL call in it: an executable graph made before under this handle is gone,
         * and an updated one now replays nothing we know */
        t_del(&g_by_exec, exec);
    } else {
        slot *e = instantiated ? t_put(&g_by_exec, exec) : t_find(&g_by_exec, exec);
        if (!e && !instantiated) e = t_put(&g_by_exec, exec);   /* updated from a graph without calls */
        if (e) {
            if (instantiated) e->replays = 0;
            e->graph = g->graph;
            atomic_store_explicit(&g_any, 1, memory_order_release);
        } else {
            tr_warn("graphs: no memory to follow an executable graph; its launches are not recorded");
        }
    }
    pthread_mutex_unlock(&g_mu);
}

void tr_graph_exec_forget(uintptr_t exec)
{
    if (!atomic_load_explicit(&g_any, memory_order_acquire)) return;
    pthread_mutex_lock(&g_mu);
    t_del(&g_by_exec, exec);
    pthread_mutex_unlock(&g_mu);
}

void tr_graph_forget(uintptr_t graph)
{
    pthread_mutex_lock(&g_mu);
    t_del(&g_by_graph, graph);
    pthread_mutex_unlock(&g_mu);
}

const tr_graph *tr_graph_launching(uintptr_t exec, uint64_t *replay)
{
    if (!atomic_load_explicit(&g_any, memory_order_acquire)) return NULL;
    const tr_graph *g = NULL;
    pthread_mutex_lock(&g_mu);
    slot *e = t_find(&g_by_exec, exec);
    if (e) {
        *replay = ++e->replays;
        g = g_graphs[e->graph];
    }
    pthread_mutex_unlock(&g_mu);
    return g;
}

/* ---- JSON ----------------------------------------------------------------------------- */

/* one captured call as a JSON object (a few hundred bytes at most) */
static char *put_graph_call(char *p, const trr_graph_call *c, int32_t comm)
{
    int per_peer = c->lane != TRR_LANE_COLL;
    p = trj_put_lit(p, "{\"op\":");
    p = trj_put_str(p, c->op < TR_OP_N ? tr_op_names[c->op] : "invalid");
    p = trj_put_lit(p, ",\"comm\":");
    p = trj_put_i64(p, comm);
    p = trj_put_lit(p, ",\"count\":");
    p = trj_put_u64(p, c->count);
    p = trj_put_lit(p, ",\"dtype\":");
    p = tr_put_dtype(p, c->dtype);
    p = trj_put_lit(p, ",\"redop\":");
    p = tr_put_redop(p, c->redop);
    p = trj_put_lit(p, ",\"root\":");
    p = per_peer || c->root == NONE ? trj_put_lit(p, "null") : trj_put_i64(p, c->root);
    p = trj_put_lit(p, ",\"peer\":");
    p = !per_peer ? trj_put_lit(p, "null") : trj_put_i64(p, c->root);
    p = trj_put_lit(p, ",\"sendbuff\":");
    p = trj_put_hex(p, c->sendbuff);
    p = trj_put_lit(p, ",\"recvbuff\":");
    p = trj_put_hex(p, c->recvbuff);
    p = trj_put_lit(p, ",\"stream\":");
    p = trj_put_hex(p, c->stream);
    p = trj_put_lit(p, ",\"stack\":");
    p = trj_put_i64(p, c->stack);
    p = trj_put_lit(p, ",\"pystack\":");
    p = trj_put_i64(p, c->pystack);
    p = trj_put_lit(p, ",\"lane\":");
    p = trj_put_str(p, c->lane < TRR_LANE_N ? trr_lane_names[c->lane] : "invalid");
    p = trj_put_lit(p, ",\"n\":");
    p = trj_put_u64(p, c->n);
    return trj_put_lit(p, "}");
}

void tr_graph_write_json(tr_json *j, const int32_t *map, int n)
{
    uint32_t ng = atomic_load_explicit(&g_ngraphs, memory_order_acquire);
    if (!ng) return;
    char buf[640];
    trj_array_begin(j, "graphs");
    for (uint32_t i = 0; i < ng; i++) {
        const tr_graph *g = g_graphs[i];
        trj_object_begin(j, NULL);
        trj_uint(j, "capture_id", g->head.capture_id);
        trj_hex(j, "graph", g->head.graph);
        trj_hex(j, "stream", g->head.stream);
        trj_int(j, "stack", g->head.stack);
        trj_int(j, "pystack", g->head.pystack);
        trj_int(j, "end_stack", g->head.end_stack);
        trj_int(j, "end_pystack", g->head.end_pystack);
        trj_int(j, "base", g->head.base);
        trj_uint(j, "dropped", g->head.dropped);
        trj_array_begin(j, "calls");
        for (uint32_t k = 0; k < g->head.ncalls; k++) {
            const trr_graph_call *c = &g->calls[k];
            char *p = put_graph_call(buf, c, c->comm >= 0 && c->comm < n && map ? map[c->comm] : -1);
            trj_raw_row(j, buf, (size_t)(p - buf));
        }
        trj_array_end(j);
        trj_object_end(j);
    }
    trj_array_end(j);
}
