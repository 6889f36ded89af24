/* CUDA graphs in a ring file (include/trshim/ring_format.h: TRR_BLOB_GRAPH,
 * GraphLaunch records): read and checked here for ring.c, which counts and
 * notes what is damaged, and for ring_trace.c, which gives each trace of the
 * ring its graphs. graphs.c replaces the launches by the calls they replay,
 * for rings and JSON traces alike. Every value is hostile until checked: a
 * graph blob that breaks a rule is dropped whole (its launches then replay
 * nothing known), never half used. */
#include <stdlib.h>
#include <string.h>

#include "ring_int.h"

#define GRAPHS_MAX 65536      /* graphs of a process: the shim records at most that many */

static uint8_t conv_dtype(int32_t d)
{
    if (d == TRR_NONE) return DT_NONE;
    return d >= 0 && d < DT_INVALID - 1 ? (uint8_t)(d + 1) : DT_INVALID;
}

/* as a record's redop: -1 when it is none of them */
static int conv_redop(int32_t r)
{
    if (r == TRR_NONE) return RO_NONE;
    if (r >= 0 && r < 5) return r + 1;
    return r >= 5 ? RO_PREMULSUM : -1;    /* ncclRedOpCreatePreMulSum handles */
}

/* one captured call: 0 when it breaks a rule */
static int conv_gcall(const rd *r, const trr_graph_call *k, ta_gcall *o)
{
    memset(o, 0, sizeof *o);
    o->cfg = -1;
    int lane = k->op < TRR_OP_N ? ta_lane_of(k->op) : -1;
    int redop = conv_redop(k->redop);
    /* the lane is the operation's own (a collective on its communicator, a
     * message in its direction): another one would number other calls */
    if (lane < 0 || k->lane != lane || redop < 0) return 0;
    if (k->root != TRR_NONE && k->root < 0) return 0;
    if (lane != TRR_LANE_COLL && k->root == TRR_NONE) return 0;     /* a message without its peer */
    if (k->count > (uint64_t)INT64_MAX || k->comm < -1) return 0;
    /* numbers per replay: a wait's signals (opCnt), one for any other call */
    if (k->n < 1 || k->n > 0x7fffffff || (lane != TRR_LANE_WAIT && k->n != 1)) return 0;
    o->op = k->op;
    o->lane = (uint8_t)lane;
    o->dtype = conv_dtype(k->dtype);
    o->redop = (uint8_t)redop;
    o->rp = k->root == TRR_NONE || !(lane != TRR_LANE_COLL || ta_op_rooted(k->op)) ? -1 : k->root;
    o->count = (int64_t)k->count;
    o->n = k->n;
    /* a slot without a usable communicator: the call is not this ring's to
     * replay (as the records made on it) */
    o->comm = k->comm >= 0 && k->comm < r->nslots && r->slots[k->comm].ok ? k->comm : -1;
    o->stack = k->stack;          /* checked once every blob is read (ring_graphs_finish) */
    o->pystack = k->pystack;
    if (ta_op_is_coll(k->op) && (k->extra & TRR_EXTRA_CONFIG)) {
        o->xf |= XF_CONFIG;
        o->cfg = (int32_t)(k->extra & 0x7fffffff);   /* the config blob's index + 1 until checked */
    } else if (ta_op_is_onesided(k->op)) {
        o->xf |= XF_SIGNAL;
        o->sig_idx = (int64_t)(k->extra & 0xffffffffu);
        o->sig_ctx = (int32_t)(uint32_t)(k->extra >> 32);
    }
    return 1;
}

int ring_graph_blob(rd *r, const uint8_t *q, uint32_t n)
{
    trr_graph h;
    if (!q || n < sizeof h) return 0;
    memcpy(&h, q, sizeof h);
    if (h.index >= GRAPHS_MAX || h.ncalls > TRR_GRAPH_MAX_CALLS ||
        (uint64_t)h.ncalls * sizeof(trr_graph_call) > n - sizeof h || h.base < -1 || h.base >= GRAPHS_MAX)
        return 0;
    if ((int)h.index < r->ngraphs && r->graphs[h.index].valid) return 1;   /* the first one of an index counts */
    ta_gcall *calls = xcalloc((size_t)h.ncalls + 1, sizeof *calls);
    for (uint32_t k = 0; k < h.ncalls; k++) {
        trr_graph_call c;
        memcpy(&c, q + sizeof h + (size_t)k * sizeof c, sizeof c);
        if (!conv_gcall(r, &c, &calls[k])) {
            free(calls);
            return 0;
        }
    }
    if ((int)h.index >= r->ngraphs) {
        int nn = (int)h.index + 1;
        r->graphs = xrealloc(r->graphs, sizeof *r->graphs * (size_t)nn);
        for (int i = r->ngraphs; i < nn; i++) r->graphs[i] = (ta_graph){.stack = -1, .pystack = -1, .end_stack = -1,
                                                                         .end_pystack = -1, .base = -1, .gid = -1};
        r->ngraphs = nn;
    }
    r->graphs[h.index] = (ta_graph){.valid = 1, .stack = h.stack, .pystack = h.pystack, .end_stack = h.end_stack,
                                    .end_pystack = h.end_pystack, .base = h.base, .dropped = h.dropped,
                                    .calls = calls, .ncalls = (int)h.ncalls, .gid = -1};
    return 1;
}

static int32_t stack_ok(const rd *r, int32_t s) { return s >= 0 && s < r->nstacks ? s : -1; }
static int32_t pystack_ok(const rd *r, int32_t p)
{
    return p >= 0 && p < r->npystacks && r->pystacks[p].nframes ? p : -1;
}

void ring_graphs_finish(rd *r)
{
    for (int i = 0; i < r->ngraphs; i++) {
        ta_graph *g = &r->graphs[i];
        if (!g->valid) continue;
        g->stack = stack_ok(r, g->stack);
        g->pystack = pystack_ok(r, g->pystack);
        g->end_stack = stack_ok(r, g->end_stack);
        g->end_pystack = pystack_ok(r, g->end_pystack);
        if (g->base >= r->ngraphs || (g->base >= 0 && !r->graphs[g->base].valid)) g->base = -1;
        for (int k = 0; k < g->ncalls; k++) {
            ta_gcall *c = &g->calls[k];
            c->stack = stack_ok(r, c->stack);
            c->pystack = pystack_ok(r, c->pystack);
            if (c->xf & XF_CONFIG) {
                int32_t ix = c->cfg - 1;
                c->cfg = c->cfg > 0 && ix < r->ncfgs && r->cfgs[ix].state != CFG_UNKNOWN ? ix : -1;
            }
        }
    }
}

const char *ring_launch_fields(const rd *r, const trr_record *x, rcall *o)
{
    (void)r;
    ta_call *c = &o->c;
    /* the record's fields mean other things for a launch: redop is the lane,
     * root its peer, count the replay number, recvbuff the numbers it takes,
     * extra the graph */
    if (o->slot < 0) return "a GraphLaunch has no communicator";
    if (x->redop < 0 || x->redop >= TRR_LANE_N) return "its lane is not known";
    int lane = x->redop;
    if (lane != TRR_LANE_COLL && (x->root == TRR_NONE || x->root < 0)) return "a GraphLaunch of a per-peer lane has no peer";
    if (x->count < 1 || x->count > (uint64_t)INT64_MAX) return "its replay number is out of range";
    if (x->recvbuff > 0x7fffffff || x->seq + x->recvbuff > 0x80000000ull) return "its numbers (seq, count) are out of range";
    if (x->extra > 0x7fffffff) return "its graph index is out of range";
    c->count = (int64_t)x->recvbuff;
    c->dtype = DT_NONE;
    c->redop = RO_NONE;
    c->rp = lane == TRR_LANE_COLL ? -1 : x->root;
    c->xf |= XF_LAUNCH;
    o->x.graph = (int32_t)x->extra;
    o->x.replay = (int64_t)x->count;
    o->x.node = lane;
    o->x.cfg = o->x.lstack = o->x.lpystack = -1;
    return NULL;
}

static ta_gcall *calls_copy(const ta_graph *g)
{
    ta_gcall *c = xmalloc(sizeof *c * ((size_t)g->ncalls + 1));
    if (g->ncalls) memcpy(c, g->calls, sizeof *c * (size_t)g->ncalls);
    return c;
}

void ring_graphs_view(const rd *r, ta_trace *t, const int *local)
{
    t->ngraphs = r->ngraphs;
    t->graphs = xcalloc((size_t)r->ngraphs + 1, sizeof *t->graphs);
    for (int i = 0; i < r->ngraphs; i++) {
        const ta_graph *g = &r->graphs[i];
        t->graphs[i] = *g;
        t->graphs[i].calls = NULL;
        if (!g->valid) continue;
        t->graphs[i].calls = calls_copy(g);
        /* a call on a communicator of another device's view: that view's */
        for (int k = 0; k < g->ncalls; k++) {
            int s = g->calls[k].comm;
            t->graphs[i].calls[k].comm = s >= 0 && s < r->nslots ? local[s] : -1;
        }
    }
}

void ring_graphs_merge(ta_trace *j, ta_trace *rt)
{
    int n = j->ngraphs > rt->ngraphs ? j->ngraphs : rt->ngraphs;
    ta_graph *g = xcalloc((size_t)n + 1, sizeof *g);
    for (int i = 0; i < n; i++) {
        if (i < rt->ngraphs && rt->graphs[i].valid) {
            g[i] = rt->graphs[i];
            rt->graphs[i].calls = NULL;
        } else if (i < j->ngraphs && j->graphs[i].valid) {
            /* the ring lacks it (its blob area was full): the JSON's, on the
             * ring's communicators */
            g[i] = j->graphs[i];
            j->graphs[i].calls = NULL;
            for (int k = 0; k < g[i].ncalls; k++) {
                ta_gcall *c = &g[i].calls[k];
                int to = -1;
                for (int m = 0; c->comm >= 0 && c->comm < j->ncomms && m < rt->ncomms && to < 0; m++)
                    if (rt->comms[m].id == j->comms[c->comm].id) to = m;
                c->comm = to;
            }
        } else {
            g[i] = (ta_graph){.stack = -1, .pystack = -1, .end_stack = -1, .end_pystack = -1, .base = -1, .gid = -1};
        }
    }
    ta_graphs_free(j->graphs, j->ngraphs);
    ta_graphs_free(rt->graphs, rt->ngraphs);
    rt->graphs = NULL;
    rt->ngraphs = 0;
    j->graphs = g;
    j->ngraphs = n;
}
