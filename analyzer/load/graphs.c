/* CUDA graphs (docs/trace-format.md, "CUDA graphs"; docs/analysis-format.md,
 * "CUDA graph replays"). A captured NCCL call runs on every launch of its
 * graph with no host call of its own; the trace has, per launch, one
 * GraphLaunch entry per lane (a communicator's collectives, or the
 * messages to or from one peer) with the lane's first number. Here, once a
 * trace is read (a JSON trace or a ring, the same way), each launch's
 * entries are replaced by the calls it replays, in capture order, numbered
 * from their lane's first number, with the launch's times, completion and
 * return code: from then on alignment, the hang analysis, divergence,
 * mis-pairing, send/recv matching and the NaN analysis see them exactly as
 * eager calls. What a replayed call is besides (its graph, replay number,
 * place in the graph, the launch's site) is kept in its callx (XF_REPLAY).
 *
 * Then, once the job's traces are known, each graph is given a job-wide
 * identity: graphs captured at the same site with the same calls are one
 * graph on every rank ("G1", "G2"... in rank order). */
#include <stdlib.h>
#include <string.h>

#include "site/ta_site.h"
#include "ta_load.h"
#include "trshim/ring_format.h"

/* calls a trace may have once its launches are expanded: a crafted trace of
 * one graph of 4096 calls launched a million times must not cost 4 billion
 * calls, nor a few crafted records of a small file millions. The bound is
 * EXPAND_PER_RECORD calls per record the trace holds, within [EXPAND_MIN,
 * EXPAND_MAX]; past it, the oldest launches are treated as lost from the
 * ring (the fingerprints still cover them). */
#define EXPAND_MIN (1 << 18)
#define EXPAND_MAX (1 << 21)
#define EXPAND_PER_RECORD 256

/* a graph's lanes: distinct (communicator, lane, peer) in the order of its
 * calls, and where each call falls in its lane */
typedef struct { int32_t comm, lane, peer, id; } lkey;
typedef struct {
    int ready;
    lkey *keys; int nkeys;      /* sorted, for the launch entries' lookup */
    int32_t *node_lane;         /* per call: its lane, -1 (no communicator of this trace) */
    uint64_t *node_off;         /* per call: the numbers the calls before it take in its lane */
    uint64_t *total;            /* per lane: the numbers its listed calls take */
    int64_t *base;              /* per lane: the seq of its entry in the launch at hand */
    int64_t *entry;             /* per lane: that entry's call index */
    uint32_t *stamp;            /* per lane: the launch that set base and entry */
} glanes;

typedef struct {
    ta_trace *t;
    glanes *gl;                 /* per graph, built at its first launch */
    uint32_t launch;            /* the launch at hand (stamp) */
    int64_t xi;                 /* cursor into t->callx */
    int emit;                   /* pass 2: count what is noted */
    int64_t bad_graph, no_lane, mismatch;
    int bad_graph_ix;
} ex;

static int cmp_lkey(const void *p, const void *q)
{
    const lkey *x = p, *y = q;
    if (x->comm != y->comm) return x->comm < y->comm ? -1 : 1;
    if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
    return (x->peer > y->peer) - (x->peer < y->peer);
}

static void glanes_free(glanes *l)
{
    free(l->keys); free(l->node_lane); free(l->node_off); free(l->total);
    free(l->base); free(l->entry); free(l->stamp);
}

static glanes *lanes_of(ex *x, int gi)
{
    glanes *l = &x->gl[gi];
    if (l->ready) return l;
    const ta_graph *g = &x->t->graphs[gi];
    size_t n = (size_t)g->ncalls + 1;
    l->keys = xmalloc(sizeof *l->keys * n);
    l->node_lane = xmalloc(sizeof *l->node_lane * n);
    l->node_off = xmalloc(sizeof *l->node_off * n);
    l->total = xcalloc(n, sizeof *l->total);
    for (int k = 0; k < g->ncalls; k++) {
        const ta_gcall *c = &g->calls[k];
        l->node_lane[k] = -1;
        if (c->comm < 0) continue;
        lkey key = {c->comm, c->lane, c->lane == TRR_LANE_COLL ? -1 : c->rp, 0};
        int id = -1;
        for (int j = 0; j < l->nkeys && id < 0; j++)      /* a graph has few lanes */
            if (!cmp_lkey(&l->keys[j], &key)) id = j;
        if (id < 0) {
            id = l->nkeys;
            key.id = id;
            l->keys[l->nkeys++] = key;
        }
        l->node_lane[k] = id;
        l->node_off[k] = l->total[id];
        l->total[id] += c->n;
    }
    if (l->nkeys > 1) qsort(l->keys, (size_t)l->nkeys, sizeof *l->keys, cmp_lkey);
    l->base = xmalloc(sizeof *l->base * n);
    l->entry = xmalloc(sizeof *l->entry * n);
    l->stamp = xcalloc(n, sizeof *l->stamp);
    l->ready = 1;
    return l;
}

/* the callx of call i (an XF_LAUNCH entry); calls are visited in order */
static const ta_callx *cx_at(ex *x, int64_t i)
{
    const ta_trace *t = x->t;
    while (x->xi < t->ncallx && t->callx[x->xi].call < i) x->xi++;
    return x->xi < t->ncallx && t->callx[x->xi].call == i ? &t->callx[x->xi] : NULL;
}

static int is_launch(const ta_trace *t, int64_t i) { return (t->calls[i].xf & XF_LAUNCH) != 0; }

/* The launch whose first entry is call i: its entries are the consecutive
 * GraphLaunch entries of the same graph, replay and entry time, up to a
 * lane that repeats (a second launch right after the first). Sets each
 * lane's base and entry for it; returns one past its last entry, and in *gi
 * its graph (-1: not known). */
static int64_t launch_at(ex *x, int64_t i, int *gi)
{
    ta_trace *t = x->t;
    const ta_callx *c0 = cx_at(x, i);
    int g = c0 ? c0->graph : -1;
    int known = g >= 0 && g < t->ngraphs && t->graphs[g].valid;
    glanes *l = known ? lanes_of(x, g) : NULL;
    x->launch++;
    int64_t j = i;
    for (; j < t->ncalls && is_launch(t, j); j++) {
        const ta_callx *cx = cx_at(x, j);
        if (!cx) break;
        if (j > i && (cx->graph != c0->graph || cx->replay != c0->replay || t->calls[j].enter_ns != t->calls[i].enter_ns))
            break;
        if (!l) continue;
        const ta_call *c = &t->calls[j];
        lkey key = {c->comm, cx->node, cx->node == TRR_LANE_COLL ? -1 : c->rp, 0};
        const lkey *k = bsearch(&key, l->keys, (size_t)l->nkeys, sizeof key, cmp_lkey);
        if (!k) {                  /* a lane the graph does not use */
            x->mismatch += x->emit;
            continue;
        }
        if (l->stamp[k->id] == x->launch) break;     /* the lane again: the next launch */
        l->stamp[k->id] = x->launch;
        l->base[k->id] = c->seq;
        l->entry[k->id] = j;
        /* the numbers the entry takes, against the graph's listed calls
         * (fewer listed: the graph dropped some, their numbers still taken) */
        if (x->emit && (l->total[k->id] > (uint64_t)c->count ||
                        (l->total[k->id] < (uint64_t)c->count && !t->graphs[g].dropped)))
            x->mismatch++;
    }
    if (j == i) j = i + 1;         /* (an entry without its callx: skipped alone) */
    if (!known && x->emit) {
        if (!x->bad_graph++) x->bad_graph_ix = g;
    }
    *gi = known ? g : -1;
    return j;
}

/* the calls launch (graph gi, its lanes set by launch_at) replays; with out
 * set, written there (and their callx into xo), else only counted */
typedef struct { ta_call *calls; ta_callx *callx; int64_t ncalls, ncallx; uint32_t group; } outv;
static int64_t replay(ex *x, int gi, int64_t first, outv *o)
{
    ta_trace *t = x->t;
    const ta_graph *g = &t->graphs[gi];
    glanes *l = &x->gl[gi];
    const ta_call *L = &t->calls[first];
    const ta_callx *lx = o ? ta_callx_of(t, first) : NULL;
    /* a failed launch numbers nothing (its rc is the cudaError_t: 0 success) */
    int failed = L->rc != INT16_MIN && L->rc != 0;
    int64_t n = 0;
    int in_run = 0;
    for (int k = 0; k < g->ncalls; k++) {
        const ta_gcall *gc = &g->calls[k];
        int id = l->node_lane[k];
        if (id < 0) continue;                          /* another device's communicator */
        if (l->stamp[id] != x->launch) {
            /* its lane has no entry: not known (at the window's start, lost with the ring's oldest records) */
            x->no_lane += x->emit && !(first == 0 && t->ring_lost > 0);
            continue;
        }
        n++;
        if (!o) continue;
        const ta_call *E = &t->calls[l->entry[id]];
        int64_t seq = 0;
        if (!failed && l->base[id] > 0) {
            seq = l->base[id] + (int64_t)l->node_off[k] + (int64_t)gc->n - 1;
            if (seq > 0x7fffffff) { x->mismatch++; seq = 0; }
        }
        /* sends and receives issued together (a graph's p2p is captured in
         * groups: NCCL runs the group's operations as one) */
        int p2p = ta_op_is_p2p(gc->op);
        if (p2p && !in_run) o->group++;
        in_run = p2p;
        ta_call *c = &o->calls[o->ncalls];
        memset(c, 0, sizeof *c);
        c->op = gc->op;
        c->comm = gc->comm;
        c->seq = (uint32_t)seq;
        c->count = gc->count;
        c->dtype = gc->dtype;
        c->redop = gc->redop;
        c->rp = gc->rp;
        c->stack = gc->stack;
        c->pystack = gc->pystack;
        c->enter_ns = L->enter_ns;
        c->exit_ns = L->exit_ns;
        c->done_ns = L->done_ns;
        c->gpu = L->gpu;
        c->rc = L->rc;
        c->stream = E->stream;
        c->group = p2p ? o->group : 0;
        c->xf = (uint8_t)(XF_REPLAY | (gc->xf & (XF_CONFIG | XF_SIGNAL)));
        ta_callx *cx = &o->callx[o->ncallx++];
        memset(cx, 0, sizeof *cx);
        cx->call = o->ncalls++;
        cx->cfg = gc->cfg;
        cx->sig_idx = gc->sig_idx;
        cx->sig_ctx = gc->sig_ctx;
        cx->replay = lx ? lx->replay : 0;
        cx->graph = gi;
        cx->node = k;
        cx->lstack = L->stack;
        cx->lpystack = L->pystack;
    }
    return n;
}

void ta_graphs_expand(ta_an *a, ta_trace *t)
{
    int64_t nl = 0;
    uint32_t maxgroup = 0;
    for (int64_t i = 0; i < t->ncalls; i++) {
        nl += is_launch(t, i);
        if (t->calls[i].group > maxgroup) maxgroup = t->calls[i].group;
    }
    if (!nl) return;
    ex x = {.t = t};
    x.gl = xcalloc((size_t)t->ngraphs + 1, sizeof *x.gl);
    /* pass 1: what each call becomes (a launch: at its first entry), and
     * where the kept part starts when that is too much */
    int64_t *outn = xcalloc((size_t)t->ncalls + 1, sizeof *outn), total = 0;
    uint8_t *start = xcalloc((size_t)t->ncalls + 1, 1);
    for (int64_t i = 0; i < t->ncalls;) {
        start[i] = 1;
        if (!is_launch(t, i)) { outn[i++] = 1; total++; continue; }
        int gi;
        int64_t j = launch_at(&x, i, &gi);
        outn[i] = gi >= 0 ? replay(&x, gi, i, NULL) : 0;
        total += outn[i];
        i = j;
    }
    int64_t cut = 0;
    int64_t cap = t->ncalls < EXPAND_MAX / EXPAND_PER_RECORD ? t->ncalls * EXPAND_PER_RECORD : EXPAND_MAX;
    if (cap < EXPAND_MIN) cap = EXPAND_MIN;
    if (total > cap) {
        int64_t acc = 0;
        cut = t->ncalls;
        while (cut > 0 && acc + outn[cut - 1] <= cap) acc += outn[--cut];
        while (cut < t->ncalls && !start[cut]) cut++;
        total = acc;
        ta_note_add(a, t->file, 0, "its CUDA graph launches replay more calls than tranalyze expands for one rank "
                    "of %lld records (%lld): its oldest %lld record(s) are treated as lost from its ring window",
                    (long long)t->ncalls, (long long)cap, (long long)cut);
        t->ring_lost += cut;
        t->dropped += cut;
    }
    /* pass 2: the calls, their callx and checks renumbered */
    outv o = {xmalloc(sizeof *o.calls * ((size_t)total + 1)),
              xmalloc(sizeof *o.callx * ((size_t)total + (size_t)t->ncallx + 1)), 0, 0, maxgroup};
    int64_t *map = xmalloc(sizeof *map * ((size_t)t->ncalls + 1));
    int64_t *raw = xmalloc(sizeof *raw * ((size_t)total + 1));
    x.emit = 1;
    x.xi = 0;
    for (int64_t i = 0; i < cut; i++) map[i] = -1;
    for (int64_t i = cut; i < t->ncalls;) {
        int64_t r = t->call_raw ? t->call_raw[i] : i;
        if (!is_launch(t, i)) {
            map[i] = o.ncalls;
            const ta_callx *cx = t->calls[i].xf ? cx_at(&x, i) : NULL;
            if (cx) {
                o.callx[o.ncallx] = *cx;
                o.callx[o.ncallx++].call = o.ncalls;
            }
            raw[o.ncalls] = r;
            o.calls[o.ncalls++] = t->calls[i++];
            continue;
        }
        int gi;
        int64_t j = launch_at(&x, i, &gi), before = o.ncalls;
        if (gi >= 0) replay(&x, gi, i, &o);
        for (int64_t k = before; k < o.ncalls; k++) raw[k] = r;
        for (int64_t k = i; k < j; k++) map[k] = -1;
        i = j;
    }
    /* checks: of collectives only (never of a launch entry), in call order */
    int64_t w = 0;
    for (int64_t k = 0; k < t->nchecks; k++) {
        int64_t ci = map[t->checks[k].call];
        if (ci < 0) continue;
        t->checks[w] = t->checks[k];
        t->checks[w++].call = (uint32_t)ci;
    }
    t->nchecks = w;
    free(t->calls); free(t->callx); free(t->call_raw);
    t->calls = o.calls; t->ncalls = o.ncalls;
    t->callx = o.callx; t->ncallx = o.ncallx;
    t->call_raw = raw;
    /* each communicator's lowest collective kept, replays included */
    ta_first_seqs(t);
    if (x.bad_graph)
        ta_note_add(a, t->file, 0, "%lld CUDA graph launch(es) name a graph the trace does not hold (absent or "
                    "damaged; first: graph %d): the calls they replay are not known", (long long)x.bad_graph,
                    x.bad_graph_ix);
    if (x.no_lane)
        ta_note_add(a, t->file, 0, "%lld replayed call(s) have no GraphLaunch entry for their lane in their "
                    "launch: they are not known", (long long)x.no_lane);
    if (x.mismatch)
        ta_note_add(a, t->file, 0, "%lld GraphLaunch entr(ies) do not match their graph (a lane it does not use, "
                    "or another number of calls): the calls are numbered as the graph lists them", (long long)x.mismatch);
    for (int i = 0; i < t->ngraphs; i++) if (x.gl[i].ready) glanes_free(&x.gl[i]);
    free(x.gl);
    free(outn);
    free(start);
    free(map);
}

/* ---- identity across ranks ---- */

static uint64_t str_h(uint64_t h, const char *s) { return ta_hash64(h, s ? ta_hash_bytes(s, strlen(s)) : 0); }

/* a call site, as the same text on every rank gives the same value (and the
 * same on every run): the Python frames compared for a site, else the
 * innermost native frame (module file name and offset, else its symbol) */
static uint64_t site_key(const ta_an *a, const ta_trace *t, int stack, int py)
{
    if (ta_py_valid(t, py)) {
        const ta_pystack *s = &t->pystacks[py];
        uint64_t h = 1;
        for (int k = 0; k < s->nframes; k++) {
            const ta_pycode *c = &t->pycodes[s->frames[k].code];
            if (s->nuser && c->folded) continue;
            h = str_h(str_h(h, c->base), c->name);
            h = ta_hash64(h, (uint32_t)s->frames[k].line);
        }
        return h;
    }
    if (stack >= 0 && stack < t->nstacks && t->stacks[stack].nframes) {
        const ta_frame *f = &t->stacks[stack].frames[0];
        if (f->module >= 0 && f->module < a->nmods) {
            const char *p = a->mods[f->module].path, *b = p ? strrchr(p, '/') : NULL;
            return ta_hash64(str_h(2, b ? b + 1 : p), f->offset);
        }
        if (f->symbol) return ta_hash64(str_h(3, f->symbol), (uint64_t)f->symbol_offset);
        return ta_hash64(4, f->offset);
    }
    return 5;
}

/* the capture site and the signature of the calls: communicator family,
 * operation, arguments, lane; a peer relative to the rank (a ring's
 * exchange is the same graph on every rank) */
static uint64_t capture_key(const ta_an *a, const ta_trace *t, const ta_graph *g)
{
    int s = g->stack, p = g->pystack;
    if (s < 0 && !ta_py_valid(t, p)) s = g->end_stack, p = g->end_pystack;
    return site_key(a, t, s, p);
}

static uint64_t graph_key(const ta_an *a, const ta_trace *t, const ta_graph *g)
{
    uint64_t h = capture_key(a, t, g);
    for (int k = 0; k < g->ncalls; k++) {
        const ta_gcall *c = &g->calls[k];
        if (c->comm < 0 || c->comm >= t->ncomms) continue;
        const ta_comm *m = &t->comms[c->comm];
        int64_t rp = c->rp;
        if (c->lane != TRR_LANE_COLL && m->size > 0 && rp >= 0) rp = ((rp - m->rank) % m->size + m->size) % m->size;
        h = ta_hash64(h, (uint64_t)m->family);
        h = ta_hash64(h, (uint64_t)ta_op_norm(c->op) | (uint64_t)c->dtype << 8 | (uint64_t)c->redop << 16 |
                             (uint64_t)c->lane << 24);
        h = ta_hash64(h, (uint64_t)c->count);
        h = ta_hash64(h, (uint64_t)rp);
        h = ta_hash64(h, c->n);
    }
    return h;
}

typedef struct { uint64_t key; int t, i; } gref;
static int cmp_gref(const void *p, const void *q)
{
    const gref *x = p, *y = q;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}
static int cmp_first(const void *p, const void *q)
{
    const ta_jgraph *x = p, *y = q;
    if (x->trace != y->trace) return x->trace < y->trace ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

void ta_graphs_identify(ta_an *a)
{
    int64_t n = 0;
    for (int ti = 0; ti < a->ntr; ti++)
        for (int i = 0; i < a->tr[ti]->ngraphs; i++) n += a->tr[ti]->graphs[i].valid;
    if (!n) return;
    gref *v = xmalloc(sizeof *v * (size_t)n);
    int64_t k = 0;
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        for (int i = 0; i < t->ngraphs; i++) {
            t->graphs[i].gid = -1;
            if (t->graphs[i].valid) v[k++] = (gref){graph_key(a, t, &t->graphs[i]), ti, i};
        }
    }
    qsort(v, (size_t)n, sizeof *v, cmp_gref);
    /* one per key: its first holder (traces are in rank order) */
    a->graphs = xmalloc(sizeof *a->graphs * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        if (!i || v[i].key != v[i - 1].key)
            a->graphs[a->ngraphs++] = (ta_jgraph){v[i].key, capture_key(a, a->tr[v[i].t], &a->tr[v[i].t]->graphs[v[i].i]),
                                                  v[i].t, v[i].i};
    /* named in rank order: G1 is rank 0's first graph */
    qsort(a->graphs, (size_t)a->ngraphs, sizeof *a->graphs, cmp_first);
    gref *byk = xmalloc(sizeof *byk * ((size_t)a->ngraphs + 1));
    for (int i = 0; i < a->ngraphs; i++) byk[i] = (gref){a->graphs[i].key, i, 0};
    qsort(byk, (size_t)a->ngraphs, sizeof *byk, cmp_gref);
    for (int64_t i = 0; i < n; i++) {
        gref key = {v[i].key, 0, 0};
        int lo = 0, hi = a->ngraphs - 1;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (byk[mid].key < key.key) lo = mid + 1;
            else hi = mid;
        }
        a->tr[v[i].t]->graphs[v[i].i].gid = byk[lo].t;
    }
    free(byk);
    free(v);
}
