/* --timeline FILE: the job as a Chrome/Perfetto trace-event JSON document
 * (the "JSON Object Format", opens in ui.perfetto.dev and chrome://tracing;
 * docs/analysis-format.md): one process per rank (pid = rank), a track of
 * its host calls (each NCCL call from enter to exit) and one of its GPU
 * work (enqueue to completion, when the trace tracked it), collectives
 * linked across ranks by flow arrows, the root cause and the calls ranks
 * are stuck in marked. Times in microseconds on one axis: each rank's
 * monotonic times on the job's one clock (clocks.c).
 * Bounded for big jobs: calls per rank (the last ones and those around a
 * root cause) and flow events in all.
 * Also what --html shares with it (ta_out.h): the wall clock of a trace,
 * its last sign of life, the calls ranks are stuck in. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "findings/ta_finding.h"
#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_out.h"

#define TL_CALL_BUDGET 500000    /* host-call events in all, shared out among the ranks... */
#define TL_CALLS_MIN 200         /* ... each rank's last ones: at least */
#define TL_CALLS_MAX 20000       /* ... and at most */
#define TL_AROUND 64             /* and the calls either side of a root cause's time, on every rank */
#define TL_INITS_MAX 1024        /* communicator inits per rank */
#define TL_FLOW_LAST 16          /* the last collectives of each communicator linked by flows... */
#define TL_FLOW_AROUND 4         /* ... and those either side of a root cause's or stuck point's seq */
#define TL_FLOW_POINTS 200000    /* flow events in all: the last TL_FLOW_LAST shrinks to fit */
#define TL_CONSEQ_MAX 64         /* consequences (stuck points) of a root cause whose flows are drawn */

/* ---- shared with --html ------------------------------------------------------- */
static int64_t sat_add(int64_t x, int64_t y)
{
    int64_t r;
    if (__builtin_add_overflow(x, y, &r)) return y > 0 ? INT64_MAX : INT64_MIN;
    return r;
}
static int64_t sat_sub(int64_t x, int64_t y)
{
    int64_t r;
    if (__builtin_sub_overflow(x, y, &r)) return y < 0 ? INT64_MAX : INT64_MIN;
    return r;
}
/* seconds of wall time as nanoseconds; INT64_MIN when it is not one (a crafted trace) */
static int64_t wall_s_ns(double s) { return s >= 0 && s <= 9.0e9 ? llround(s * 1e9) : INT64_MIN; }

int64_t ta_tl_wall_ns(const ta_trace *t, int64_t ns)
{
    if (t->clk_set) return sat_add(ns, t->clk_off_ns);     /* the job's one clock (clocks.c) */
    int64_t r = wall_s_ns(t->clock_real);
    return sat_add(ns, sat_sub(r == INT64_MIN ? 0 : r, t->clock_mono));
}

int64_t ta_tl_last_ns(const ta_trace *t)
{
    int64_t last = wall_s_ns(t->write_time);
    if (t->from_ring && t->heartbeat_ns != TA_NULL64 && t->heartbeat_ns > 0) {
        int64_t hb = ta_tl_wall_ns(t, t->heartbeat_ns);
        if (hb > last) last = hb;
    }
    return last;
}

int64_t *ta_tl_stuck(ta_an *a)
{
    int64_t *r = xmalloc(sizeof(int64_t) * (size_t)(a->ntr + 1));
    int any = 0;
    for (int t = 0; t < a->ntr; t++) { r[t] = -1; any |= a->stuck && a->stuck[t]; }
    if (!any) return r;
    uint8_t **st = a->never_done;     /* the completion simulation's answer (simulate.c) */
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        if (a->stuck[t]) {
            for (int64_t i = 0; i < tr->ncalls && r[t] < 0; i++)
                if (st[t][i] == 1) r[t] = i;
            for (int64_t i = tr->ncalls - 1; i >= 0 && r[t] < 0; i--)
                if (ta_call_waiting(tr, &tr->calls[i])) r[t] = i;
            for (int k = 0; k < tr->ncomms && r[t] < 0; k++)
                if (tr->comms[k].init_exit == TA_NULL64 && tr->comms[k].g >= 0) r[t] = -2 - k;
        }
    }
    return r;
}

/* ---- the document ----------------------------------------------------------------- */
typedef struct { int64_t lo, hi; } span;           /* calls [lo, hi) */
typedef struct { int32_t stack, py; char *s; } sitec;
typedef struct {
    span *sp; int nsp;       /* the calls written, ascending, apart */
    int64_t nw;              /* how many */
    int64_t *hend;           /* [nw]: the end of each one's host slice as written (fitted: nest_fit) */
    int64_t last;            /* last sign of life (wall ns), INT64_MIN */
    int ninit;               /* inits written (the first ones) */
    uint8_t *lane;           /* [256]: the GPU lane (thread 2 + lane) of each stream, 255 none; NULL: none */
    int nlanes;
} rk;

/* Slices of one thread must nest (the viewers drop or misplace those that
 * overlap partly): a slice is cut to end with the innermost slice still
 * open when it starts (calls of several threads of a process, in one track) */
#define NEST_DEPTH 64
typedef struct { int64_t end[NEST_DEPTH]; int n; } nest;
static int64_t nest_fit(nest *k, int64_t s, int64_t e)
{
    while (k->n && k->end[k->n - 1] <= s) k->n--;
    if (k->n && e > k->end[k->n - 1]) e = k->end[k->n - 1];
    if (k->n < NEST_DEPTH) k->end[k->n++] = e;
    return e;
}
typedef struct {
    ta_an *a;
    ta_jw w;
    rk *r;
    int64_t base;            /* wall ns of ts 0 */
    int64_t *stuck;          /* ta_tl_stuck */
    sitec *sc; uint32_t sccap, scn;   /* call sites of the trace being written (as JSON strings) */
    char *opj[OP_N], *dtj[DT_N], *roj[RO_N], **commj;   /* names as JSON strings, made once */
} tl;

/* the hot path (half a million events): keys that need no escaping written as they are, and the
 * strings every event repeats rendered by jw_string once */
static void kq(ta_jw *w, const char *k)
{
    jw_sep(w);
    fputc('"', w->o);
    fputs(k, w->o);
    fputs("\":", w->o);
}
static char *jstr(const char *s)
{
    char *b = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&b, &n);
    if (!m) return xstrdup("null");
    jw_string(m, s);
    if (fclose(m) != 0) { free(b); return xstrdup("null"); }
    return b;
}
static const char *op_json(tl *x, int op)
{
    if (op < 0 || op >= OP_N) return "\"?\"";
    if (!x->opj[op]) x->opj[op] = jstr(ta_op_names[op]);
    return x->opj[op];
}
static const char *comm_json(tl *x, int g)
{
    if (g < 0 || g >= x->a->ngc) return "\"?\"";
    if (!x->commj[g]) x->commj[g] = jstr(ta_comm_name(x->a, g));
    return x->commj[g];
}

static void put_us(FILE *o, int64_t ns)
{
    uint64_t m = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
    fprintf(o, "%s%llu.%03llu", ns < 0 ? "-" : "", (unsigned long long)(m / 1000), (unsigned long long)(m % 1000));
}

static const char *op_name(int op) { return op >= 0 && op < OP_N ? ta_op_names[op] : "?"; }

/* a call's slice on the host track, wall ns: enter to exit (not returned: to the last sign of life) */
static void call_slice(const ta_trace *t, const ta_call *c, int64_t last, int64_t *s, int64_t *e)
{
    *s = ta_tl_wall_ns(t, c->enter_ns);
    *e = c->exit_ns != TA_NULL64 ? ta_tl_wall_ns(t, c->exit_ns) : last;
    if (*e < *s) *e = *s;
}

/* the call site text of (stack, Python stack) on the trace being written, as a JSON string, cached */
static const char *site_of(tl *x, const ta_trace *t, int stack, int py)
{
    if (!ta_py_valid(t, py)) py = -1;
    if (stack < 0 || stack >= t->nstacks) stack = -1;
    if (2 * (x->scn + 1) > x->sccap) {
        uint32_t ncap = x->sccap ? x->sccap * 2 : 64;
        sitec *n = xcalloc(ncap, sizeof *n);
        for (uint32_t i = 0; i < x->sccap; i++) {
            if (!x->sc[i].s) continue;
            uint32_t h = (uint32_t)ta_hash64((uint64_t)(uint32_t)x->sc[i].stack, (uint64_t)(uint32_t)x->sc[i].py);
            for (h &= ncap - 1; n[h].s; h = (h + 1) & (ncap - 1)) {}
            n[h] = x->sc[i];
        }
        free(x->sc);
        x->sc = n;
        x->sccap = ncap;
    }
    uint32_t h = (uint32_t)ta_hash64((uint64_t)(uint32_t)stack, (uint64_t)(uint32_t)py) & (x->sccap - 1);
    for (; x->sc[h].s; h = (h + 1) & (x->sccap - 1))
        if (x->sc[h].stack == stack && x->sc[h].py == py) return x->sc[h].s;
    char *txt = ta_site_text(x->a, t, stack, py);
    x->sc[h] = (sitec){stack, py, jstr(txt)};
    free(txt);
    x->scn++;
    return x->sc[h].s;
}
static void sites_done(tl *x)
{
    for (uint32_t i = 0; i < x->sccap; i++) free(x->sc[i].s);
    free(x->sc);
    x->sc = NULL;
    x->sccap = x->scn = 0;
}

/* the position of call ci among the calls written, -1: not written */
static int64_t written_at(const rk *r, int64_t ci)
{
    int64_t pos = 0;
    for (int k = 0; k < r->nsp; k++) {
        if (ci >= r->sp[k].lo && ci < r->sp[k].hi) return pos + ci - r->sp[k].lo;
        pos += r->sp[k].hi - r->sp[k].lo;
    }
    return -1;
}

static int cmp_span(const void *p, const void *q)
{
    const span *x = p, *y = q;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

int64_t ta_tl_call_at_time(const ta_trace *t, int64_t w)
{
    int64_t lo = 0, hi = t->ncalls;
    while (lo < hi) {
        int64_t m = lo + (hi - lo) / 2;
        if (ta_tl_wall_ns(t, t->calls[m].enter_ns) < w) lo = m + 1;
        else hi = m;
    }
    return lo;
}

int64_t ta_tl_root_call(ta_an *a, const ta_finding *f, int t)
{
    if (t == f->culprit.trace && f->culprit.call >= 0) return f->culprit.call;
    int64_t ci = -1;
    if (f->kind == K_MISSING) ta_last_call(a->tr[t], &ci);
    else if (f->g >= 0 && f->seq > 0 && f->seq <= UINT32_MAX) ci = ta_call_at(a, t, f->g, (uint32_t)f->seq);
    return ci;
}
static int64_t root_time(ta_an *a, const ta_finding *f, int t)
{
    int64_t ci = ta_tl_root_call(a, f, t);
    if (ci >= 0) return ta_tl_wall_ns(a->tr[t], a->tr[t]->calls[ci].enter_ns);
    return f->t > 0 ? wall_s_ns(f->t) : INT64_MIN;
}

/* which calls of each rank are written */
static void choose_calls(tl *x, const int64_t *anchors, int nanchors)
{
    ta_an *a = x->a;
    int64_t cap = TL_CALL_BUDGET / (a->ntr ? a->ntr : 1);
    if (cap < TL_CALLS_MIN) cap = TL_CALLS_MIN;
    if (cap > TL_CALLS_MAX) cap = TL_CALLS_MAX;
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        rk *r = &x->r[t];
        r->sp = xmalloc(sizeof(span) * (size_t)(nanchors + 3));
        r->nsp = 0;
        if (!tr->ncalls) continue;
        r->sp[r->nsp++] = (span){tr->ncalls > cap ? tr->ncalls - cap : 0, tr->ncalls};
        for (int k = 0; k < nanchors; k++) {
            int64_t i = ta_tl_call_at_time(tr, anchors[k]);
            r->sp[r->nsp++] = (span){i > TL_AROUND ? i - TL_AROUND : 0,
                                     i + TL_AROUND < tr->ncalls ? i + TL_AROUND : tr->ncalls};
        }
        if (x->stuck[t] >= 0) {
            int64_t i = x->stuck[t];
            r->sp[r->nsp++] = (span){i > 8 ? i - 8 : 0, i + 8 < tr->ncalls ? i + 8 : tr->ncalls};
        }
        qsort(r->sp, (size_t)r->nsp, sizeof *r->sp, cmp_span);
        int n = 0;
        for (int k = 0; k < r->nsp; k++) {
            if (r->sp[k].lo >= r->sp[k].hi) continue;
            if (n && r->sp[k].lo <= r->sp[n - 1].hi) {
                if (r->sp[k].hi > r->sp[n - 1].hi) r->sp[n - 1].hi = r->sp[k].hi;
            } else {
                r->sp[n++] = r->sp[k];
            }
        }
        r->nsp = n;
    }
}

/* ---- events ---- */
/* an event's common members; name: text, or jname: already a JSON string */
static void ev_begin2(tl *x, const char *name, const char *jname, const char *ph, int pid, int tid, int64_t wall)
{
    ta_jw *w = &x->w;
    jw_sep(w);
    jw_open(w, '{');
    if (jname) { kq(w, "name"); fputs(jname, w->o); }
    else jw_str(w, "name", name);
    kq(w, "ph");
    fprintf(w->o, "\"%s\"", ph);
    kq(w, "pid");
    fprintf(w->o, "%d", pid);
    kq(w, "tid");
    fprintf(w->o, "%d", tid);
    kq(w, "ts");
    put_us(w->o, wall == INT64_MIN ? 0 : sat_sub(wall, x->base));
}
static void ev_begin(tl *x, const char *name, const char *ph, int pid, int tid, int64_t wall)
{
    ev_begin2(x, name, NULL, ph, pid, tid, wall);
}
static void ev_dur(tl *x, int64_t s, int64_t e)
{
    kq(&x->w, "dur");
    put_us(x->w.o, e > s ? sat_sub(e, s) : 0);
}

static void meta(tl *x, const char *what, int pid, int tid, const char *key, const char *sval, long long ival)
{
    ta_jw *w = &x->w;
    jw_sep(w);
    jw_open(w, '{');
    jw_str(w, "name", what);
    jw_str(w, "ph", "M");
    jw_int(w, "pid", pid);
    jw_int(w, "tid", tid);
    jw_int(w, "ts", 0);
    jw_key(w, "args");
    jw_open(w, '{');
    if (sval) jw_str(w, key, sval);
    else jw_int(w, key, ival);
    jw_close(w, '}');
    jw_close(w, '}');
}

static void call_args(tl *x, const ta_trace *t, int64_t ci)
{
    ta_jw *w = &x->w;
    const ta_call *c = &t->calls[ci];
    kq(w, "args");
    jw_open(w, '{');
    kq(w, "seq");
    fprintf(w->o, "%u", c->seq);
    if (c->comm >= 0 && c->comm < t->ncomms) { kq(w, "comm"); fputs(comm_json(x, t->comms[c->comm].g), w->o); }
    if (!ta_op_is_group(c->op)) { kq(w, "count"); fprintf(w->o, "%lld", (long long)c->count); }
    if (c->dtype != DT_NONE && c->dtype < DT_N) {
        if (!x->dtj[c->dtype]) x->dtj[c->dtype] = jstr(ta_dtype_names[c->dtype]);
        kq(w, "dtype");
        fputs(x->dtj[c->dtype], w->o);
    }
    if (c->redop != RO_NONE && c->redop < RO_N) {
        if (!x->roj[c->redop]) x->roj[c->redop] = jstr(ta_redop_names[c->redop]);
        kq(w, "redop");
        fputs(x->roj[c->redop], w->o);
    }
    if (ta_op_rooted(c->op) && c->rp >= 0) jw_int(w, "root", c->rp);
    if ((ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) && c->rp >= 0) jw_int(w, "peer", c->rp);
    if (c->group) jw_int(w, "group", c->group);
    if (c->exit_ns == TA_NULL64) jw_bool(w, "returned", 0);
    if (c->rc != INT16_MIN && c->rc != 0) jw_int(w, "rc", c->rc);
    if (c->xf & XF_CONFIG) jw_str(w, "entry_point", ta_config_entry(c->op));
    kq(w, "site");
    fputs(site_of(x, t, c->stack, c->pystack), w->o);
    const ta_callx *rx = (c->xf & XF_REPLAY) ? ta_callx_of(t, ci) : NULL;
    if (rx && rx->graph >= 0 && rx->graph < t->ngraphs) {      /* replayed by a CUDA graph launch */
        const ta_graph *g = &t->graphs[rx->graph];
        jw_str(w, "graph", ta_graph_name(x->a, ta_graph_gid(t, rx->graph)));
        jw_int(w, "replay", rx->replay);
        kq(w, "captured_at");
        fputs(site_of(x, t, g->stack, g->pystack), w->o);
        kq(w, "launched_at");
        fputs(site_of(x, t, rx->lstack, rx->lpystack), w->o);
    }
    jw_close(w, '}');
}

typedef struct { int64_t s; int k; } initref;
static int cmp_initref(const void *p, const void *q)
{
    const initref *x = p, *y = q;
    if (x->s != y->s) return (x->s > y->s) - (x->s < y->s);
    return (x->k > y->k) - (x->k < y->k);
}

static void write_init(tl *x, const ta_trace *tr, int pid, int k, int64_t s, int64_t e)
{
    ta_jw *w = &x->w;
    const ta_comm *cm = &tr->comms[k];
    char nm[48];
    snprintf(nm, sizeof nm, "CommInit (%s)", cm->kind);
    ev_begin(x, nm, "X", pid, 1, s);
    ev_dur(x, s, e);
    kq(w, "args");
    jw_open(w, '{');
    kq(w, "comm");
    fputs(comm_json(x, cm->g), w->o);
    jw_intn(w, "size", cm->size, cm->size < 0);
    jw_int(w, "rank_in_comm", cm->rank);
    if (cm->init_exit == TA_NULL64) jw_bool(w, "returned", 0);
    kq(w, "site");
    fputs(site_of(x, tr, cm->init_stack, cm->init_pystack), w->o);
    jw_close(w, '}');
    jw_close(w, '}');
}

/* a call's GPU work on its stream's lane: from its enqueue (the call's return), or from when the
 * work before it on that stream completed if later (a stream runs its work in order: the slices
 * of a lane never overlap), to done_ns, or to the last sign of life while pending */
static void write_gpu(tl *x, const ta_trace *tr, const rk *r, int pid, int64_t ci, int64_t *busy)
{
    ta_jw *w = &x->w;
    const ta_call *c = &tr->calls[ci];
    int lane = r->lane[c->stream];
    int64_t enq = ta_tl_wall_ns(tr, c->exit_ns);
    char nm[48];
    if (c->gpu == GPU_ERROR) {
        snprintf(nm, sizeof nm, "GPU error: %s", op_name(c->op));
        ev_begin(x, nm, "i", pid, 2 + lane, enq);
        jw_str(w, "s", "t");
    } else {
        int64_t gs = enq > busy[lane] ? enq : busy[lane];
        int64_t ge = c->gpu == GPU_DONE && c->done_ns != TA_NULL64 ? ta_tl_wall_ns(tr, c->done_ns) : r->last;
        if (ge < gs) ge = gs;
        busy[lane] = ge;
        snprintf(nm, sizeof nm, "%s%s", op_name(c->op), c->gpu == GPU_PENDING ? " (pending)" : "");
        ev_begin2(x, nm, c->gpu == GPU_PENDING ? NULL : op_json(x, c->op), "X", pid, 2 + lane, gs);
        ev_dur(x, gs, ge);
    }
    kq(w, "args");
    jw_open(w, '{');
    kq(w, "seq");
    fprintf(w->o, "%u", c->seq);
    if (c->comm >= 0 && c->comm < tr->ncomms) { kq(w, "comm"); fputs(comm_json(x, tr->comms[c->comm].g), w->o); }
    jw_str(w, "state", c->gpu == GPU_DONE ? "done" : c->gpu == GPU_PENDING ? "pending" : "error");
    kq(w, "enqueued");
    put_us(w->o, sat_sub(enq, x->base));
    if (c->gpu == GPU_PENDING) {
        kq(w, "pending_s");
        fprintf(w->o, "%.3f", ta_pending_s(tr, c));
    }
    jw_close(w, '}');
    jw_close(w, '}');
}

static void write_rank(tl *x, int t)
{
    ta_an *a = x->a;
    const ta_trace *tr = a->tr[t];
    rk *r = &x->r[t];
    ta_jw *w = &x->w;
    int pid = tr->rank;
    /* the host track: communicator inits and calls, by start time, each fitted into those open */
    initref *ir = xmalloc(sizeof *ir * (size_t)(r->ninit + 1));
    int ni = 0;
    for (int k = 0; k < r->ninit; k++)
        if (tr->comms[k].init_enter != TA_NULL64) ir[ni++] = (initref){ta_tl_wall_ns(tr, tr->comms[k].init_enter), k};
    qsort(ir, (size_t)ni, sizeof *ir, cmp_initref);
    r->hend = xmalloc(sizeof(int64_t) * (size_t)(r->nw + 1));
    nest hn = {.n = 0};
    int64_t busy[256];
    for (int k = 0; k < 256; k++) busy[k] = INT64_MIN;
    int ii = 0, sk = 0;
    int64_t ci = r->nsp ? r->sp[0].lo : 0, pos = 0;
    for (;;) {
        int have_call = sk < r->nsp;
        int64_t cs = 0, ce = 0;
        if (have_call) call_slice(tr, &tr->calls[ci], r->last, &cs, &ce);
        if (ii < ni && (!have_call || ir[ii].s <= cs)) {
            const ta_comm *cm = &tr->comms[ir[ii].k];
            int64_t s = ir[ii].s, e = cm->init_exit != TA_NULL64 ? ta_tl_wall_ns(tr, cm->init_exit) : r->last;
            if (e < s) e = s;
            write_init(x, tr, pid, ir[ii].k, s, nest_fit(&hn, s, e));
            ii++;
            continue;
        }
        if (!have_call) break;
        const ta_call *c = &tr->calls[ci];
        ce = nest_fit(&hn, cs, ce);
        r->hend[pos++] = ce;
        ev_begin2(x, NULL, op_json(x, c->op), "X", pid, 1, cs);
        ev_dur(x, cs, ce);
        call_args(x, tr, ci);
        jw_close(w, '}');
        if (r->lane && c->gpu != GPU_UNTRACKED && c->exit_ns != TA_NULL64) write_gpu(x, tr, r, pid, ci, busy);
        if (++ci >= r->sp[sk].hi && ++sk < r->nsp) ci = r->sp[sk].lo;
    }
    free(ir);
    /* where it is stuck */
    int64_t sc = x->stuck[t];
    if (sc >= 0 || sc <= -2) {
        char *what, *state;
        int64_t at;
        if (sc >= 0) {
            const ta_call *c = &tr->calls[sc];
            what = ta_call_text_replay(a, tr, sc);
            at = ta_tl_wall_ns(tr, c->enter_ns);
            if (c->exit_ns == TA_NULL64 && c->gpu != GPU_DONE) state = xstrdup("inside the call: it had not returned");
            else if (c->gpu == GPU_PENDING)
                state = xasprintf("issued, not complete on the GPU for %.1f s", ta_pending_s(tr, c));
            else state = xstrdup("issued, never completed: its peers never matched it (replay)");
        } else {
            const ta_comm *cm = &tr->comms[-2 - sc];
            what = xasprintf("%s of comm %s", cm->kind, ta_comm_name(a, cm->g));
            at = ta_tl_wall_ns(tr, cm->init_enter);
            state = xstrdup("inside the communicator's init: it had not returned");
        }
        char *nm = xasprintf("stuck here: %s", what);
        ev_begin(x, nm, "i", pid, 1, at);
        jw_str(w, "s", "t");
        jw_key(w, "args");
        jw_open(w, '{');
        jw_str(w, "state", state);
        if (sc >= 0) {
            kq(w, "site");
            fputs(site_of(x, tr, tr->calls[sc].stack, tr->calls[sc].pystack), w->o);
            char *rp = ta_replay_text(a, tr, sc);
            if (rp) jw_str(w, "replay", rp);
            free(rp);
        }
        jw_close(w, '}');
        jw_close(w, '}');
        free(nm); free(what); free(state);
    }
    /* the trace's end */
    if (r->last != INT64_MIN) {
        char *e = ta_end_text(a, tr);
        char *nm = xasprintf("trace written: %s", e);
        ev_begin(x, nm, "i", pid, 1, r->last);
        jw_str(w, "s", "p");
        jw_close(w, '}');
        free(nm); free(e);
    }
    sites_done(x);
}

/* the root causes, on each culprit rank */
static void write_roots(tl *x)
{
    ta_an *a = x->a;
    ta_jw *w = &x->w;
    for (int i = 0; i < a->nf; i++) {
        const ta_finding *f = &a->f[i];
        if (!f->root) continue;
        for (int k = 0; k < f->culprit.nranks; k++) {
            int t = ta_trace_of_rank(a, f->culprit.ranks[k]);
            if (t < 0) continue;
            int64_t at = root_time(a, f, t), ci = ta_tl_root_call(a, f, t);
            if (at == INT64_MIN) continue;
            char *nm = xasprintf("ROOT CAUSE: %s%s%s", ta_kind_names[f->kind], f->subkind ? " / " : "", ta_subkind_names[f->subkind]);
            ev_begin(x, nm, "i", a->tr[t]->rank, 1, at);
            jw_str(w, "s", "p");
            jw_key(w, "args");
            jw_open(w, '{');
            jw_str(w, "message", f->message);
            jw_str(w, "fix", f->hint);
            if (ci >= 0) {
                char *ct = ta_call_text(a, a->tr[t], ci);
                jw_str(w, "call", ct);
                free(ct);
                kq(w, "site");
                fputs(site_of(x, a->tr[t], a->tr[t]->calls[ci].stack, a->tr[t]->calls[ci].pystack), w->o);
                char *rp = ta_replay_text(a, a->tr[t], ci);      /* a CUDA graph's replay: which, where */
                if (rp) jw_str(w, "replay", rp);
                free(rp);
            }
            jw_close(w, '}');
            jw_close(w, '}');
            free(nm);
            sites_done(x);
        }
    }
}

/* ---- flows: a communicator's collective across its members ---- */
typedef struct { int64_t ts; int pid; } fpoint;
static int cmp_fpoint(const void *p, const void *q)
{
    const fpoint *x = p, *y = q;
    if (x->ts != y->ts) return (x->ts > y->ts) - (x->ts < y->ts);
    return (x->pid > y->pid) - (x->pid < y->pid);
}
static int cmp_u32(const void *p, const void *q)
{
    uint32_t x = *(const uint32_t *)p, y = *(const uint32_t *)q;
    return (x > y) - (x < y);
}
static void add_around(uint32_t **v, int *n, int *cap, int64_t seq)
{
    for (int64_t s = seq - TL_FLOW_AROUND; s <= seq + TL_FLOW_AROUND; s++) {
        if (s < 1 || s > UINT32_MAX) continue;
        if (*n == *cap) { *cap = *cap ? *cap * 2 : 64; *v = xrealloc(*v, sizeof(uint32_t) * (size_t)*cap); }
        (*v)[(*n)++] = (uint32_t)s;
    }
}

static int64_t write_flows(tl *x, int *last_n)
{
    ta_an *a = x->a;
    ta_jw *w = &x->w;
    /* the last N of each communicator, N shrunk so that the points fit */
    int64_t total = 0;
    for (int g = 0; g < a->ngc; g++) {
        int present = 0;
        for (int p = 0; p < a->gc[g].npos; p++) present += a->gc[g].member[p] >= 0;
        if (present > 1) total += (int64_t)present * (a->gc[g].nseqs < TL_FLOW_LAST ? a->gc[g].nseqs : TL_FLOW_LAST);
    }
    int64_t n_last = TL_FLOW_LAST;
    if (total > TL_FLOW_POINTS) n_last = TL_FLOW_LAST * (int64_t)TL_FLOW_POINTS / total;
    if (n_last < 1) n_last = 1;
    *last_n = (int)n_last;
    int64_t id = 0;
    uint32_t *seqs = NULL;
    int cap = 0;
    fpoint *pt = NULL;
    int ptcap = 0;
    for (int g = 0; g < a->ngc; g++) {
        const ta_gcomm *n = &a->gc[g];
        if (!n->nseqs) continue;
        int ns = 0;
        for (uint32_t i = n->nseqs > n_last ? n->nseqs - (uint32_t)n_last : 0; i < n->nseqs; i++) {
            if (ns == cap) { cap = cap ? cap * 2 : 64; seqs = xrealloc(seqs, sizeof(uint32_t) * (size_t)cap); }
            seqs[ns++] = ta_gseq_at(n, i);
        }
        for (int i = 0; i < a->nf; i++) {
            const ta_finding *f = &a->f[i];
            if (!f->root) continue;
            if (f->g == g) add_around(&seqs, &ns, &cap, f->seq);
            if (f->nmem && f->at_g == g) add_around(&seqs, &ns, &cap, f->at_seq);
            for (int k = 0; k < f->ncons && k < TL_CONSEQ_MAX; k++)
                if (f->cons[k].g == g && ta_op_is_coll(f->cons[k].op)) add_around(&seqs, &ns, &cap, f->cons[k].seq);
        }
        qsort(seqs, (size_t)ns, sizeof *seqs, cmp_u32);
        if (ptcap < n->npos) { ptcap = n->npos; pt = xrealloc(pt, sizeof *pt * (size_t)ptcap); }
        for (int i = 0; i < ns; i++) {
            if (i && seqs[i] == seqs[i - 1]) continue;
            int np = 0, op = -1;
            for (int p = 0; p < n->npos; p++) {
                int m = n->member[p];
                if (m < 0) continue;
                const ta_trace *tr = a->tr[m];
                int64_t ci = ta_comm_call(&tr->comms[n->local[p]], seqs[i]), wp;
                if (ci < 0 || (wp = written_at(&x->r[m], ci)) < 0) continue;
                int64_t s, e;
                call_slice(tr, &tr->calls[ci], x->r[m].last, &s, &e);
                e = x->r[m].hend[wp];       /* the slice as written */
                pt[np++] = (fpoint){s + (int64_t)(((uint64_t)e - (uint64_t)s) / 2), tr->rank};   /* inside the slice */
                if (op < 0) op = tr->calls[ci].op;
            }
            if (np < 2) continue;
            qsort(pt, (size_t)np, sizeof *pt, cmp_fpoint);
            id++;
            char nm[64];
            snprintf(nm, sizeof nm, "%s #%u", op_name(op), seqs[i]);
            for (int k = 0; k < np; k++) {
                ev_begin(x, nm, k == 0 ? "s" : k == np - 1 ? "f" : "t", pt[k].pid, 1, pt[k].ts);
                jw_str(w, "cat", "collective");
                jw_int(w, "id", id);
                if (k == np - 1) jw_str(w, "bp", "e");
                if (k == 0) {
                    jw_key(w, "args");
                    jw_open(w, '{');
                    jw_str(w, "comm", ta_comm_name(a, g));
                    jw_int(w, "seq", seqs[i]);
                    jw_int(w, "ranks", np);
                    jw_close(w, '}');
                }
                jw_close(w, '}');
            }
        }
    }
    free(seqs);
    free(pt);
    return id;
}

int ta_out_timeline(ta_an *a, const char *path)
{
    char *tmp;
    FILE *o = ta_file_create(path, &tmp);
    if (!o) { ta_esc_printf(stderr, "tranalyze: --timeline %s: %s\n", path, strerror(errno)); return -1; }
    setvbuf(o, NULL, _IOFBF, 1 << 20);
    tl x = {.a = a, .w = {o, {1}, 0}};
    x.r = xcalloc((size_t)a->ntr + 1, sizeof *x.r);
    x.commj = xcalloc((size_t)a->ngc + 1, sizeof *x.commj);
    x.stuck = ta_tl_stuck(a);
    /* the root causes' times: the calls around them are written on every rank */
    int nanch = 0;
    int64_t *anch = xmalloc(sizeof(int64_t) * (size_t)(a->nf + 1));
    for (int i = 0; i < a->nf && nanch < 8; i++) {
        const ta_finding *f = &a->f[i];
        if (!f->root || f->culprit.trace < 0) continue;
        int64_t at = root_time(a, f, f->culprit.trace);
        if (at != INT64_MIN) anch[nanch++] = at;
    }
    choose_calls(&x, anch, nanch);
    /* ts 0: the earliest thing written */
    int64_t base = INT64_MAX, ncalls = 0, nall = 0;
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        rk *r = &x.r[t];
        r->last = ta_tl_last_ns(tr);
        r->ninit = tr->ncomms < TL_INITS_MAX ? tr->ncomms : TL_INITS_MAX;
        for (int k = 0; k < r->ninit; k++)
            if (tr->comms[k].init_enter != TA_NULL64) {
                int64_t s = ta_tl_wall_ns(tr, tr->comms[k].init_enter);
                if (s < base) base = s;
            }
        for (int k = 0; k < r->nsp; k++) {
            int64_t s = ta_tl_wall_ns(tr, tr->calls[r->sp[k].lo].enter_ns);
            if (s < base) base = s;
            r->nw += r->sp[k].hi - r->sp[k].lo;
        }
        nall += tr->ncalls;
        ncalls += r->nw;
    }
    for (int k = 0; k < nanch; k++)
        if (anch[k] < base) base = anch[k];
    x.base = base == INT64_MAX ? 0 : base;

    ta_jw *w = &x.w;
    jw_open(w, '{');
    jw_str(w, "displayTimeUnit", "ms");
    jw_key(w, "traceEvents");
    jw_open(w, '[');
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        char *pn = xasprintf("rank %d (%s, pid %lld)", tr->rank, tr->host ? tr->host : "?", (long long)tr->pid);
        meta(&x, "process_name", tr->rank, 1, "name", pn, 0);
        free(pn);
        meta(&x, "process_sort_index", tr->rank, 1, "sort_index", NULL, tr->rank);
        if (a->root && a->root[t]) meta(&x, "process_labels", tr->rank, 1, "labels", "root cause", 0);
        else if (a->stuck && a->stuck[t]) meta(&x, "process_labels", tr->rank, 1, "labels", "waiting", 0);
        meta(&x, "thread_name", tr->rank, 1, "name", "host calls", 0);
        meta(&x, "thread_sort_index", tr->rank, 1, "sort_index", NULL, 1);
        rk *r = &x.r[t];
        for (int k = 0; k < r->nsp; k++)      /* GPU lanes: a stream each, in the order first used */
            for (int64_t ci = r->sp[k].lo; ci < r->sp[k].hi; ci++) {
                const ta_call *c = &tr->calls[ci];
                if (c->gpu == GPU_UNTRACKED || c->exit_ns == TA_NULL64) continue;
                if (!r->lane) r->lane = memset(xmalloc(256), 255, 256);
                if (r->lane[c->stream] == 255) r->lane[c->stream] = (uint8_t)r->nlanes++;
            }
        for (int l = 0; l < r->nlanes; l++) {
            char tn[32];
            if (l) snprintf(tn, sizeof tn, "GPU, stream %d", l + 1);
            meta(&x, "thread_name", tr->rank, 2 + l, "name", l ? tn : "GPU", 0);
            meta(&x, "thread_sort_index", tr->rank, 2 + l, "sort_index", NULL, 2 + l);
        }
    }
    for (int t = 0; t < a->ntr; t++) write_rank(&x, t);
    write_roots(&x);
    int last_n = 0;
    int64_t nflows = write_flows(&x, &last_n);
    jw_close(w, ']');
    jw_key(w, "otherData");
    jw_open(w, '{');
    jw_str(w, "tool", "tranalyze");
    jw_str(w, "version", TA_VERSION);
    jw_str(w, "job", a->job);
    jw_int(w, "time_base_unix_ns", x.base);
    jw_str(w, "clock", "each rank's CLOCK_MONOTONIC times on the job's one clock, the reference ranks' wall clock "
                      "(tranalyze --json: clocks)");
    jw_int(w, "ranks", a->ntr);
    jw_int(w, "calls", ncalls);
    jw_int(w, "calls_omitted", nall - ncalls);
    jw_int(w, "flows", nflows);
    jw_int(w, "flow_last_per_comm", last_n);
    jw_int(w, "flow_around_root", TL_FLOW_AROUND);
    jw_close(w, '}');
    jw_close(w, '}');
    fputc('\n', o);
    int bad = ta_file_commit(o, path, tmp) != 0;
    if (bad) ta_esc_printf(stderr, "tranalyze: --timeline %s: could not be written whole: %s\n", path, strerror(errno));
    for (int t = 0; t < a->ntr; t++) { free(x.r[t].sp); free(x.r[t].hend); free(x.r[t].lane); }
    free(x.r);
    free(x.stuck);
    for (int g = 0; g < a->ngc; g++) free(x.commj[g]);
    free(x.commj);
    for (int k = 0; k < OP_N; k++) free(x.opj[k]);
    for (int k = 0; k < DT_N; k++) free(x.dtj[k]);
    for (int k = 0; k < RO_N; k++) free(x.roj[k]);
    free(anch);
    return bad ? -1 : 0;
}
