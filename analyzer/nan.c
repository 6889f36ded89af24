/* NaN/Inf: the first (communicator, seq) at which a checked buffer held a
 * NaN or an infinity, and where it came from.
 *
 * The shim checks, per rank, the input of every floating-point AllReduce,
 * ReduceScatter and Reduce before the collective and its output after it
 * (trace "checks"). A collective (comm, seq) is non-finite when any of its
 * members' checked buffers is. Once a NaN is in an all-reduce it is on every
 * member, and from there in everything they compute and reduce later: the
 * later non-finite collectives are consequences, and only the first one says
 * where the NaN was born.
 *
 * "First" is causal, not by clock: a collective is a point every member
 * passes, so (c1, s1) comes before (c2, s2) when some rank issued (c1, s1)
 * before (c2, s2), or through a chain of such steps (a send before its
 * receive counts as a step too). Among non-finite collectives that none
 * precedes (usually one), the first by wall-clock time of the first member
 * to enter it is reported; the others are independent first points, named
 * in the finding.
 *
 * Cause at that point: a member whose input was already non-finite brought
 * the NaN in (input; those ranks are the source: nothing non-finite came out
 * of a collective on them before). With every input checked and finite over
 * the element that went non-finite, the reduction made it (overflow: a sum
 * past the datatype's largest value). Any input not checked, pending, or
 * checked only in part where the output went bad makes overflow unproven:
 * cause unknown, the ranks whose input is unknown named, with the reason. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ta_align.h"
#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_seq.h"
#include "ta_site.h"
#include "ta_tx.h"

/* nan: one member of the communicator at the non-finite (comm, seq) */
typedef struct {
    int place;               /* place in the communicator */
    int rank;                /* global rank; -1: no trace */
    int trace;               /* -1: no trace */
    int64_t call;            /* -1: the rank never issued it, or (lost) its record is gone */
    int64_t in, out;         /* index into the trace's checks, -1 none */
    int source;              /* its input was non-finite */
    int earlier;             /* ... with no finite check kept before it (UR_EARLIER): not counted a source */
    int lost;                /* it issued it before its ring window (ring_lost > 0): call, checks unknown */
} ta_nanmember;

/* nan: a group of later non-finite collectives of one communicator */
typedef struct { int g; uint32_t from_seq; int64_t count; } ta_nanlater;

/* nan: a non-finite (comm, seq) analysed (the first one, or an independent one) */
enum { NC_INPUT, NC_OVERFLOW, NC_UNKNOWN };
static const char *const ta_nan_cause_names[3] = {"input", "overflow", "unknown"};
typedef struct ta_nanev {
    int g; uint32_t seq;
    int op, dtype, redop;
    int cause;               /* NC_* */
    char *reason;            /* NC_UNKNOWN: why; NULL */
    int *ranks; int nranks;  /* sources (input), all members (overflow), unchecked (unknown) */
    int *unchecked; int nunchecked;   /* traced members whose input is not known */
    char *unknown_text;      /* why those inputs are not known; NULL */
    ta_nanmember *mem; int nmem;
    int ref;                 /* index into mem: the member whose output is quoted (-1) */
    double t;
} ta_nanev;

typedef struct {
    ta_nanev ev;
    ta_nanlater *later; int nlater;
    int64_t later_count;     /* non-finite collectives causally after it */
    ta_nanev *indep; int nindep;   /* first non-finite points not after it */
    int64_t unchecked_before;      /* reductions before it on its members without a usable check */
} ta_nanfinding;

static int64_t ta_check_find(const ta_trace *t, int64_t call, int buffer)
{
    int64_t lo = 0, hi = t->nchecks - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        const ta_ckc *c = &t->checks[mid];
        if (c->call == call && c->buffer == buffer) return mid;
        if (c->call < call || (c->call == call && c->buffer < buffer)) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static ta_check ta_check_at(const ta_trace *t, int64_t k)
{
    const ta_ckc *c = &t->checks[k];
    ta_check r;
    memset(&r, 0, sizeof r);
    r.call = c->call;
    r.buffer = c->buffer;
    r.status = c->status;
    r.first_kind = c->first_kind;
    if (c->det == TA_CK_NODET) {
        r.first = TA_NULL64;
        r.checked = r.elems = c->elems;
    } else {
        const ta_ckdet *d = &t->ckdet[c->det];
        r.nan = d->nan;
        r.inf = d->inf;
        r.first = d->first;
        r.checked = d->checked;
        r.elems = d->elems;
        r.reason = d->reason;
    }
    return r;
}

static int dt_float(int dt)
{
    return dt == DT_FLOAT16 || dt == DT_FLOAT32 || dt == DT_FLOAT64 || dt == DT_BFLOAT16 || dt == DT_FP8E4M3 ||
           dt == DT_FP8E5M2;
}

static double ta_nan_limit(int dt)
{
    switch (dt) {
    case DT_FLOAT16: return 65504.0;
    case DT_BFLOAT16: return 3.3895313892515355e38;
    case DT_FLOAT32: return 3.4028234663852886e38;
    case DT_FLOAT64: return 1.7976931348623157e308;
    case DT_FP8E4M3: return 448.0;
    case DT_FP8E5M2: return 57344.0;
    default: return 0;
    }
}

static const char *ta_nan_limit_text(int dt)
{
    switch (dt) {
    case DT_FLOAT16: return "65504";
    case DT_BFLOAT16: return "~3.39e38";
    case DT_FLOAT32: return "~3.4e38";
    case DT_FLOAT64: return "~1.8e308";
    case DT_FP8E4M3: return "448";
    case DT_FP8E5M2: return "57344";
    default: return "?";
    }
}

/* a call the shim checks: a floating-point reduction, numbered */
static int checkable(const ta_trace *t, const ta_call *c)
{
    return (c->op == OP_ALLREDUCE || c->op == OP_REDUCESCATTER || c->op == OP_REDUCE) && dt_float(c->dtype) &&
           c->seq > 0 && c->comm >= 0 && t->comms[c->comm].g >= 0;
}
static int has_output(const ta_trace *t, const ta_call *c)
{
    return c->op != OP_REDUCE || t->comms[c->comm].rank == c->rp;
}
static int known(const ta_trace *t, int64_t k)
{
    return k >= 0 && (t->checks[k].status == CK_CLEAN || t->checks[k].status == CK_NONFINITE);
}

/* ---- causal order ----------------------------------------------------------
 * reach[g]: the least seq of communicator g that comes after the start
 * point (every later seq of g does too); pos[t]: the first call of trace t
 * that comes after it (every later call of t does too). A worklist lowers
 * them until nothing changes; each trace's calls are scanned once. */
typedef struct {
    uint32_t *reach;
    int64_t *pos, *scanned;
    int *tq, ntq; uint8_t *tin;
    int *gq, ngq; uint8_t *gin;
} reachw;

static void lower_pos(reachw *w, int t, int64_t i)
{
    if (i >= w->pos[t]) return;
    w->pos[t] = i;
    if (!w->tin[t]) { w->tin[t] = 1; w->tq[w->ntq++] = t; }
}
static void lower_reach(reachw *w, int g, uint32_t s)
{
    if (s >= w->reach[g]) return;
    w->reach[g] = s;
    if (!w->gin[g]) { w->gin[g] = 1; w->gq[w->ngq++] = g; }
}

/* reach[] (ngc entries) of the point (g0, s0) */
static void reach_from(ta_an *a, int g0, uint32_t s0, uint32_t *reach)
{
    reachw w;
    w.reach = reach;
    w.pos = xmalloc(sizeof(int64_t) * (size_t)(a->ntr + 1));
    w.scanned = xmalloc(sizeof(int64_t) * (size_t)(a->ntr + 1));
    w.tq = xmalloc(sizeof(int) * (size_t)(a->ntr + 1));
    w.tin = xcalloc((size_t)a->ntr + 1, 1);
    w.gq = xmalloc(sizeof(int) * (size_t)(a->ngc + 1));
    w.gin = xcalloc((size_t)a->ngc + 1, 1);
    w.ntq = w.ngq = 0;
    for (int g = 0; g < a->ngc; g++) reach[g] = UINT32_MAX;
    for (int t = 0; t < a->ntr; t++) { w.pos[t] = INT64_MAX; w.scanned[t] = a->tr[t]->ncalls; }
    lower_reach(&w, g0, s0);
    while (w.ngq || w.ntq) {
        while (w.ngq) {
            int g = w.gq[--w.ngq];
            w.gin[g] = 0;
            const ta_gcomm *n = &a->gc[g];
            uint32_t i0 = ta_gseq_lower(n, w.reach[g]);
            for (int p = 0; p < n->npos; p++) {
                int m = n->member[p];
                if (m < 0) continue;
                const ta_comm *k = &a->tr[m]->comms[n->local[p]];
                /* m's first collective of g from reach on */
                for (uint32_t i = i0; i < n->nseqs && ta_gseq_at(n, i) <= k->nseq; i++) {
                    int64_t ci = ta_comm_call(k, ta_gseq_at(n, i));
                    if (ci >= 0) { lower_pos(&w, m, ci); break; }
                }
            }
        }
        while (w.ntq) {
            int t = w.tq[--w.ntq];
            w.tin[t] = 0;
            const ta_trace *tr = a->tr[t];
            for (int64_t i = w.pos[t]; i < w.scanned[t]; i++) {
                const ta_call *c = &tr->calls[i];
                if (c->seq == 0 || c->comm < 0) continue;
                int g = tr->comms[c->comm].g;
                if (g < 0) continue;
                if (ta_op_is_coll(c->op)) {
                    lower_reach(&w, g, c->seq);
                } else if (c->op == OP_SEND && c->rp >= 0 && c->rp < a->gc[g].npos) {
                    int m = a->gc[g].member[c->rp];
                    if (m < 0) continue;
                    int64_t rc = ta_p2p_find(a, m, a->gc[g].local[c->rp], tr->comms[c->comm].rank, 0, c->seq);
                    if (rc >= 0) lower_pos(&w, m, rc);
                }
            }
            if (w.pos[t] < w.scanned[t]) w.scanned[t] = w.pos[t];
        }
    }
    free(w.pos); free(w.scanned); free(w.tq); free(w.tin); free(w.gq); free(w.gin);
}

/* ---- one non-finite point ------------------------------------------------- */
enum { UR_NOTRACE, UR_NEVER, UR_LOST, UR_EARLIER, UR_OFF, UR_ABSENT, UR_UNREADABLE, UR_OUTPUT_MODE, UR_NOCHECK,
       UR_NOT_CHECKED, UR_PENDING, UR_PARTIAL, UR_N };

typedef struct {
    int *r[UR_N]; int n[UR_N];
    const char *why_not_checked;   /* the first reason of not_checked */
    int64_t partial_upto;          /* the least elems_checked among partial ones */
} unk_t;

static void unk_add(unk_t *u, int cls, int v)
{
    u->r[cls] = xrealloc(u->r[cls], sizeof(int) * (size_t)(u->n[cls] + 1));
    u->r[cls][u->n[cls]++] = v;
}

static char *ranks_phrase(const int *r, int n, const char *one, const char *many)
{
    int *v = xmalloc(sizeof(int) * (size_t)(n + 1));
    memcpy(v, r, sizeof(int) * (size_t)n);
    ta_ints_sort(v, n);
    char *t = ta_ranks_text(v, n);
    char *s = xasprintf("%s %s", n > 1 ? many : one, t);
    free(t); free(v);
    return s;
}

static char *join(char *a, const char *sep, char *b)
{
    if (!a) return b;
    if (!b) return a;
    char *s = xasprintf("%s%s%s", a, sep, b);
    free(a); free(b);
    return s;
}

/* the reason text of an unknown input, NULL when every input is known */
static char *unk_text(const unk_t *u)
{
    char *s = NULL;
    for (int c = 0; c < UR_N; c++) {
        if (!u->n[c]) continue;
        char *who, *part;
        int pl = u->n[c] > 1;
        if (c == UR_NOTRACE) {
            who = ranks_phrase(u->r[c], u->n[c], "place", "places");
            part = xasprintf("%s of the communicator left no trace", who);
        } else {
            who = ranks_phrase(u->r[c], u->n[c], "rank", "ranks");
            const char *in = pl ? "the inputs of" : "the input of", *was = pl ? "were" : "was";
            switch (c) {
            case UR_NEVER: part = xasprintf("%s never issued it", who); break;
            case UR_LOST:     /* issued (seqs are consecutive), then overwritten in its ring */
                part = pl ? xasprintf("the calls of %s lie outside their ring windows (calls lost)", who)
                          : xasprintf("%s's call lies outside its ring window (calls lost)", who);
                break;
            case UR_EARLIER:  /* a non-finite input, and no finite check kept before it */
                part = xasprintf("%s %s %s already non-finite with no finite check kept before it in %s window (the "
                                 "NaN/Inf may come from a call older than the calls kept)", in, who, was,
                                 pl ? "their" : "its");
                break;
            case UR_OFF: part = xasprintf("NaN/Inf checks were off on %s (TRSHIM_NANCHECK=off)", who); break;
            case UR_ABSENT:
                part = xasprintf("the trace%s of %s %s no NaN/Inf checks (an older trshim, or only a ring file)",
                                 pl ? "s" : "", who, pl ? "have" : "has");
                break;
            case UR_UNREADABLE: part = xasprintf("the checks of %s could not be read", who); break;
            case UR_OUTPUT_MODE: part = xasprintf("inputs are not checked on %s (TRSHIM_NANCHECK=output)", who); break;
            case UR_NOCHECK: part = xasprintf("no check of %s %s was recorded", in, who); break;
            case UR_NOT_CHECKED:
                part = xasprintf("%s %s %s not checked (%s)", in, who, was,
                                 u->why_not_checked ? u->why_not_checked : "no reason given");
                break;
            case UR_PENDING:
                part = xasprintf("the input check%s of %s had no result when the trace was written (pending)",
                                 pl ? "s" : "", who);
                break;
            default:
                part = xasprintf("%s %s %s checked only up to element %lld, short of the element that went "
                                 "non-finite (TRSHIM_NANCHECK_MAX_MB)", in, who, was, (long long)u->partial_upto);
                break;
            }
        }
        free(who);
        s = join(s, "; ", part);
    }
    return s;
}

/* A rank's non-finite input is born in its own computation when its data
 * were finite before: always so for a whole trace (it issued nothing older
 * unchecked); for a trace whose oldest calls are gone (a ring window, the
 * call budget), only when a finite check was kept before it. */
static int finite_before(const ta_trace *t, int64_t ck)
{
    if (t->ring_lost <= 0) return 1;
    for (int64_t k = 0; k < ck; k++)
        if (t->checks[k].status == CK_CLEAN) return 1;
    return 0;
}

static void analyse_event(ta_an *a, int g, uint32_t seq, ta_nanev *ev)
{
    const ta_gcomm *n = &a->gc[g];
    memset(ev, 0, sizeof *ev);
    ev->g = g;
    ev->seq = seq;
    ev->ref = -1;
    ev->op = -1;
    ev->nmem = n->npos;
    ev->mem = xcalloc((size_t)n->npos + 1, sizeof *ev->mem);
    int have_t = 0;
    for (int p = 0; p < n->npos; p++) {
        ta_nanmember *m = &ev->mem[p];
        m->place = p;
        m->trace = n->member[p];
        m->rank = m->trace >= 0 ? a->tr[m->trace]->rank : -1;
        m->call = m->in = m->out = -1;
        if (m->trace < 0) continue;
        const ta_trace *t = a->tr[m->trace];
        m->call = ta_call_at(a, m->trace, g, seq);
        if (m->call < 0) { m->lost = ta_coll_lost(a, m->trace, g, seq); continue; }
        const ta_call *c = &t->calls[m->call];
        if (ev->op < 0) { ev->op = c->op; ev->dtype = c->dtype; ev->redop = c->redop; }
        double w = ta_wall(t, c->enter_ns);
        if (!have_t || w < ev->t) { ev->t = w; have_t = 1; }
        if (t->nan_usable) {
            m->in = ta_check_find(t, m->call, BUF_INPUT);
            m->out = ta_check_find(t, m->call, BUF_OUTPUT);
        }
        if (m->in >= 0 && t->checks[m->in].status == CK_NONFINITE) m->source = finite_before(t, m->in) ? 1 : -1;
        if (ev->ref < 0 && m->out >= 0 && t->checks[m->out].status == CK_NONFINITE) ev->ref = p;
    }
    if (ev->op < 0) { ev->op = OP_ALLREDUCE; ev->dtype = DT_NONE; ev->redop = RO_NONE; }
    /* inputs whose state is unknown, and why */
    unk_t u;
    memset(&u, 0, sizeof u);
    u.partial_upto = INT64_MAX;
    const ta_check *rc = NULL;
    ta_check rcv;
    if (ev->ref >= 0) {
        rcv = ta_check_at(a->tr[ev->mem[ev->ref].trace], ev->mem[ev->ref].out);
        rc = &rcv;
    }
    int *ur = xmalloc(sizeof(int) * (size_t)(n->npos + 1)), nur = 0;
    for (int p = 0; p < n->npos; p++) {
        ta_nanmember *m = &ev->mem[p];
        if (m->trace < 0) { unk_add(&u, UR_NOTRACE, p); continue; }
        const ta_trace *t = a->tr[m->trace];
        int cls = -1;
        if (m->call < 0) cls = m->lost ? UR_LOST : UR_NEVER;
        else if (m->source < 0) cls = UR_EARLIER;
        else if (!t->nan_usable)
            cls = t->nan_mode == NM_OFF ? UR_OFF : t->nan_mode == NM_ABSENT ? UR_ABSENT : UR_UNREADABLE;
        else if (m->in < 0) cls = t->nan_mode == NM_OUTPUT ? UR_OUTPUT_MODE : UR_NOCHECK;
        else {
            const ta_check kv = ta_check_at(t, m->in), *k = &kv;
            if (k->status == CK_NOT_CHECKED) {
                cls = UR_NOT_CHECKED;
                if (!u.why_not_checked) u.why_not_checked = k->reason;
            } else if (k->status == CK_PENDING) {
                cls = UR_PENDING;
            } else if (k->status == CK_CLEAN && k->checked < k->elems) {
                /* the element of this input that went into the bad output element */
                int64_t need;
                if (!rc || rc->first == TA_NULL64) need = k->elems - 1;
                else if (ev->op == OP_REDUCESCATTER) need = (int64_t)ev->ref * t->calls[m->call].count + rc->first;
                else need = rc->first;
                if (need >= k->checked) {
                    cls = UR_PARTIAL;
                    if (k->checked < u.partial_upto) u.partial_upto = k->checked;
                }
            }
        }
        if (cls >= 0) { unk_add(&u, cls, m->rank); ur[nur++] = m->rank; }
    }
    ta_ints_sort(ur, nur);
    ev->unchecked = ur;
    ev->nunchecked = nur;
    ev->unknown_text = unk_text(&u);
    int unknown_inputs = 0;
    for (int c = 0; c < UR_N; c++) { unknown_inputs += u.n[c]; free(u.r[c]); }

    /* cause and culprits */
    int *r = xmalloc(sizeof(int) * (size_t)(n->npos + 1)), nr = 0;
    enum { SEL_SOURCES, SEL_UNCHECKED, SEL_ALL, SEL_BAD_OUTPUT } sel = SEL_ALL;
    for (int p = 0; p < n->npos; p++) {
        if (ev->mem[p].source < 0) ev->mem[p].source = 0, ev->mem[p].earlier = 1;   /* unknown (UR_EARLIER) */
        nr += ev->mem[p].source;
    }
    if (nr) {
        ev->cause = NC_INPUT;
        sel = SEL_SOURCES;
    } else if (unknown_inputs) {
        ev->cause = NC_UNKNOWN;
        ev->reason = xstrdup(ev->unknown_text);
        sel = nur ? SEL_UNCHECKED : SEL_ALL;
    } else if (ev->ref < 0) {
        ev->cause = NC_UNKNOWN;
        ev->reason = xstrdup("the collective is marked non-finite but none of its inputs or outputs is: the checks "
                             "disagree");
    } else if (ev->redop == RO_MAX || ev->redop == RO_MIN) {
        ev->cause = NC_UNKNOWN;
        ev->reason = xasprintf("every input was finite, and a %s of finite values cannot be NaN or infinite: a buffer "
                               "was written outside the collective (by work on another stream, or after it on a "
                               "non-blocking communicator)", ta_redop_names[ev->redop]);
        sel = SEL_BAD_OUTPUT;
    } else {
        ev->cause = NC_OVERFLOW;
        /* an all-reduce gives every member the same values: a member whose
         * whole output was finite contradicts an overflow */
        if (ev->op == OP_ALLREDUCE)
            for (int p = 0; p < n->npos && ev->cause == NC_OVERFLOW; p++) {
                ta_nanmember *m = &ev->mem[p];
                if (m->out < 0) continue;
                const ta_check k = ta_check_at(a->tr[m->trace], m->out);
                if (k.status == CK_CLEAN && k.checked >= k.elems) {
                    ev->cause = NC_UNKNOWN;
                    ev->reason = xasprintf("every input was finite, but the outputs differ (rank %d's was finite, "
                                           "rank %d's was not): a buffer was written outside the collective (by work "
                                           "on another stream, or after it on a non-blocking communicator)",
                                           m->rank, ev->mem[ev->ref].rank);
                    sel = SEL_BAD_OUTPUT;
                }
            }
    }
    nr = 0;
    for (int p = 0; p < n->npos; p++) {
        const ta_nanmember *m = &ev->mem[p];
        if (m->trace < 0) continue;
        int take = sel == SEL_ALL;
        if (sel == SEL_SOURCES) take = m->source;
        if (sel == SEL_BAD_OUTPUT) take = m->out >= 0 && a->tr[m->trace]->checks[m->out].status == CK_NONFINITE;
        if (take) r[nr++] = m->rank;
    }
    if (sel == SEL_UNCHECKED) {
        nr = nur;
        memcpy(r, ur, sizeof(int) * (size_t)nur);
    }
    ta_ints_sort(r, nr);
    ev->ranks = r;
    ev->nranks = nr;
}

/* "NaN at element 123 (1 NaN, 0 Inf of 4096 checked)" */
static char *check_text(const ta_check *k)
{
    char *at = k->first != TA_NULL64 ? xasprintf("%s at element %lld", k->first_kind == 2 ? "Inf" : "NaN",
                                                  (long long)k->first)
                                      : xstrdup("NaN or Inf");
    char *s = xasprintf("%s (%lld NaN, %lld Inf in %lld element%s checked)", at, (long long)k->nan, (long long)k->inf,
                        (long long)k->checked, k->checked == 1 ? "" : "s");
    free(at);
    return s;
}

/* "AllReduce #7 (4096 x float32, sum) on comm 0x..." */
static char *event_text(ta_an *a, const ta_nanev *ev)
{
    char extra[48] = "";
    if (ev->redop != RO_NONE) snprintf(extra, sizeof extra, ", %s", ta_redop_names[ev->redop]);
    int64_t count = -1;
    for (int p = 0; p < ev->nmem && count < 0; p++)
        if (ev->mem[p].call >= 0) count = a->tr[ev->mem[p].trace]->calls[ev->mem[p].call].count;
    return xasprintf("%s #%u (%lld x %s%s) on comm %s", ta_op_names[ev->op], ev->seq, (long long)count,
                     ta_dtype_names[ev->dtype], extra, ta_comm_name(a, ev->g));
}

static char *describe_event(ta_an *a, const ta_nanev *ev, char **hint)
{
    char *what = event_text(a, ev);
    char *msg = NULL;
    if (ev->cause != NC_INPUT && ev->ref >= 0) {
        const ta_nanmember *m = &ev->mem[ev->ref];
        const ta_trace *t = a->tr[m->trace];
        char *site = ta_call_site_text(a, t, m->call);
        char *w2 = xasprintf("%s at %s", what, site);
        free(what); free(site);
        what = w2;
    }
    ta_check rcv;
    const ta_check *rc = NULL;
    if (ev->ref >= 0) {
        rcv = ta_check_at(a->tr[ev->mem[ev->ref].trace], ev->mem[ev->ref].out);
        rc = &rcv;
    }
    if (ev->cause == NC_INPUT) {
        char *parts = NULL;
        int ns = 0;
        for (int p = 0; p < ev->nmem; p++) {
            const ta_nanmember *m = &ev->mem[p];
            if (!m->source) continue;
            const ta_trace *t = a->tr[m->trace];
            ta_check kv = ta_check_at(t, m->in);
            char *c = check_text(&kv), *site = ta_call_site_text(a, t, m->call);
            parts = join(parts, "; ", ns < 8 ? xasprintf("rank %d at %s: %s", m->rank, site, c) : NULL);
            free(c); free(site);
            ns++;
        }
        if (ev->nranks == 1) {
            const ta_nanmember *m = NULL;
            for (int p = 0; p < ev->nmem; p++) if (ev->mem[p].source) m = &ev->mem[p];
            const ta_trace *t = a->tr[m->trace];
            ta_check kv = ta_check_at(t, m->in);
            char *c = check_text(&kv), *site = ta_call_site_text(a, t, m->call);
            msg = xasprintf("rank %d's input to %s at %s already held %s: bad data or a bug in that rank's "
                            "forward/backward before the collective", m->rank, what, site, c);
            free(c); free(site);
        } else {
            char *rs = ta_ranks_text(ev->ranks, ev->nranks);
            msg = xasprintf("the inputs of ranks %s to %s already held NaN or Inf (%s%s): bad data or a bug in those "
                            "ranks' forward/backward before the collective", rs, what, parts ? parts : "",
                            ns > 8 ? "; ..." : "");
            free(rs);
        }
        free(parts);
        char *tail;
        if (ev->unknown_text) tail = xasprintf("; of the other inputs, the checked ones were finite (%s)", ev->unknown_text);
        else if (ev->nranks < ev->nmem) tail = xstrdup("; the other ranks' inputs were finite");
        else tail = xstrdup("");
        char *m2 = xasprintf("%s%s", msg, tail);
        free(msg); free(tail);
        msg = m2;
        if (hint) {
            char *rs = ta_ranks_text(ev->ranks, ev->nranks);
            *hint = xasprintf("find what made rank%s %s's values non-finite before this call: its input batch (a "
                              "corrupt sample, an out-of-range token id), its loss and backward at this step "
                              "(torch.autograd.detect_anomaly, checks after each layer); skip or clean the bad data, "
                              "or fix the operation that produced it", ev->nranks > 1 ? "s" : "", rs);
            free(rs);
        }
    } else if (ev->cause == NC_OVERFLOW) {
        char *c = rc ? check_text(rc) : xstrdup("NaN or Inf");
        msg = xasprintf("every rank's input to %s was finite, but the output held %s: the reduction overflowed "
                        "%s, whose largest finite value is %s", what, c, ta_dtype_names[ev->dtype],
                        ta_nan_limit_text(ev->dtype));
        free(c);
        if (hint) {
            if (ev->dtype == DT_FLOAT16)
                *hint = xstrdup("the reduced values exceed float16's range (65504): train in bfloat16 (range ~3.39e38) "
                                "or use a smaller loss scale (dynamic loss scaling backs off on overflow); averaging "
                                "(ncclAvg, or dividing by the number of ranks before the sum) also keeps the sum in "
                                "range");
            else if (ev->dtype == DT_FP8E4M3 || ev->dtype == DT_FP8E5M2)
                *hint = xasprintf("the reduced values exceed %s's range (%s): scale the values before the reduction "
                                  "(per-tensor scaling), reduce in bfloat16, or use a smaller loss scale",
                                  ta_dtype_names[ev->dtype], ta_nan_limit_text(ev->dtype));
            else
                *hint = xasprintf("values past %s's range (%s) are exploding gradients: use a smaller loss scale "
                                  "or learning rate, clip gradients, or reduce in a wider type",
                                  ta_dtype_names[ev->dtype], ta_nan_limit_text(ev->dtype));
        }
    } else {
        char *c = rc ? check_text(rc) : xstrdup("NaN or Inf");
        msg = xasprintf("%s held %s, but whether an input brought it or the reduction overflowed (largest finite "
                        "%s: %s) cannot be told: %s", what, c, ta_dtype_names[ev->dtype],
                        ta_nan_limit_text(ev->dtype), ev->reason ? ev->reason : "?");
        free(c);
        if (hint) {
            char *rs = ta_ranks_text(ev->ranks, ev->nranks);
            int lost = 0, unloaded = 0;     /* inputs gone with the oldest records: a ring too small, the budget */
            for (int p = 0; p < ev->nmem; p++) {
                const ta_nanmember *m = &ev->mem[p];
                lost |= m->lost || m->earlier;
                unloaded |= (m->lost || m->earlier) && a->tr[m->trace]->unloaded > 0;
            }
            *hint = xasprintf("look at the values of rank%s %s at this step; to have the analyzer tell, run with "
                              "TRSHIM_NANCHECK=all (the default) and enough TRSHIM_NANCHECK_POOL_MB / "
                              "TRSHIM_NANCHECK_MAX_MB for every input to be checked%s", ev->nranks > 1 ? "s" : "", rs,
                              unloaded ? ", and tranalyze --max-calls 0 (every call loaded: the call budget left the "
                                         "older calls out)"
                              : lost ? ", and a larger TRSHIM_RING (records kept per rank) for every call to be kept"
                                     : "");
            free(rs);
        }
    }
    free(what);
    return msg;
}

/* ---- the finding ---------------------------------------------------------- */
typedef struct { int g; uint32_t seq; double t; uint32_t *reach; } cand_t;

static int cmp_cand(const void *x, const void *y)
{
    const cand_t *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->g != b->g) return a->g < b->g ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

#define MAX_CAND 16

void ta_detect_nan(ta_an *a, int look)
{
    if (look != TA_LOOK_FINDINGS) return;   /* after the divergences: they do not defer to it */
    /* which ranks have checks */
    int nwith = 0, nusable = 0;
    int *off = xmalloc(sizeof(int) * (size_t)(a->ntr + 1)), noff = 0;
    int *absent = xmalloc(sizeof(int) * (size_t)(a->ntr + 1)), nabsent = 0;
    int *ringonly = xmalloc(sizeof(int) * (size_t)(a->ntr + 1)), nringonly = 0;
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        /* a trace read from a ring file alone (killed before any JSON write) has no checks */
        if (tr->nan_mode == NM_ABSENT && tr->from_ring) { ringonly[nringonly++] = tr->rank; continue; }
        if (tr->nan_mode == NM_ABSENT) { absent[nabsent++] = tr->rank; continue; }
        nwith++;
        if (tr->nan_mode == NM_OFF) off[noff++] = tr->rank;
        nusable += tr->nan_usable;
    }
    if (!nwith) goto out;      /* traces without NaN checks (an older trshim) */
    if (!nusable) {
        if (noff == nwith)
            ta_note_add(a, NULL, 0, "NaN/Inf checks were off (TRSHIM_NANCHECK=off): no NaN/Inf analysis");
        else
            ta_note_add(a, NULL, 0, "no NaN/Inf checks could be read: no NaN/Inf analysis");
        goto out;
    }
    if (noff) {
        char *r = ta_ranks_text(off, noff);
        ta_note_add(a, NULL, 0, "NaN/Inf checks were off (TRSHIM_NANCHECK=off) on rank%s %s: their buffers are unknown",
                    noff > 1 ? "s" : "", r);
        free(r);
    }
    if (nabsent) {
        char *r = ta_ranks_text(absent, nabsent);
        ta_note_add(a, NULL, 0, "the trace%s of rank%s %s %s no NaN/Inf checks (an older trshim?): their buffers are "
                    "unknown", nabsent > 1 ? "s" : "", nabsent > 1 ? "s" : "", r, nabsent > 1 ? "have" : "has");
        free(r);
    }
    if (nringonly) {
        char *r = ta_ranks_text(ringonly, nringonly);
        ta_note_add(a, NULL, 0, "rank%s %s left only a ring file (killed before any JSON write), which holds no NaN/Inf "
                    "checks: %s buffers are unknown", nringonly > 1 ? "s" : "", r, nringonly > 1 ? "their" : "its");
        free(r);
    }

    /* non-finite (comm, seq): bit 0 of mk[g][ta_gseq(seq)] */
    uint8_t **mk = xcalloc((size_t)a->ngc + 1, sizeof *mk);
    for (int g = 0; g < a->ngc; g++) mk[g] = xcalloc((size_t)a->gc[g].nseqs + 1, 1);
    int64_t nmarked = 0;
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        for (int64_t k = 0; k < tr->nchecks; k++) {
            const ta_ckc *ck = &tr->checks[k];
            if (ck->status != CK_NONFINITE) continue;
            const ta_call *c = &tr->calls[ck->call];
            if (!checkable(tr, c)) continue;
            int g = tr->comms[c->comm].g;
            int64_t si = ta_gseq(&a->gc[g], c->seq);
            if (si < 0) continue;
            if (!(mk[g][si] & 1)) nmarked++;
            mk[g][si] |= 1;
        }
    }
    if (!nmarked) {
        for (int g = 0; g < a->ngc; g++) free(mk[g]);
        free(mk);
        goto out;
    }

    /* candidates: each rank's first non-finite collective in its own order;
     * a first point (one nothing non-finite precedes) is one for each of its
     * members */
    cand_t *cand = xmalloc(sizeof *cand * (size_t)(a->ntr + 1));
    int ncand = 0;
    for (int t = 0; t < a->ntr; t++) {
        const ta_trace *tr = a->tr[t];
        for (int64_t i = 0; i < tr->ncalls; i++) {
            const ta_call *c = &tr->calls[i];
            if (!ta_op_is_coll(c->op) || c->seq == 0 || c->comm < 0) continue;
            int g = tr->comms[c->comm].g;
            int64_t si = g >= 0 ? ta_gseq(&a->gc[g], c->seq) : -1;
            if (si < 0 || !(mk[g][si] & 1)) continue;
            int dup = 0;
            for (int k = 0; k < ncand && !dup; k++) dup = cand[k].g == g && cand[k].seq == c->seq;
            if (!dup) cand[ncand++] = (cand_t){g, c->seq, 0, NULL};
            break;
        }
    }
    for (int k = 0; k < ncand; k++) {
        double best = 0;
        int have = 0;
        const ta_gcomm *n = &a->gc[cand[k].g];
        for (int p = 0; p < n->npos; p++) {
            if (n->member[p] < 0) continue;
            int64_t ci = ta_call_at(a, n->member[p], cand[k].g, cand[k].seq);
            if (ci < 0) continue;
            double w = ta_wall(a->tr[n->member[p]], a->tr[n->member[p]]->calls[ci].enter_ns);
            if (!have || w < best) { best = w; have = 1; }
        }
        cand[k].t = best;
    }
    if (ncand > 1) qsort(cand, (size_t)ncand, sizeof *cand, cmp_cand);
    int nc = ncand < MAX_CAND ? ncand : MAX_CAND;     /* ordered causally; the rest by time */
    for (int k = 0; k < nc; k++) {
        cand[k].reach = xmalloc(sizeof(uint32_t) * (size_t)(a->ngc + 1));
        reach_from(a, cand[k].g, cand[k].seq, cand[k].reach);
    }
    /* minimal: no other candidate comes before it */
    int *minimal = xcalloc((size_t)ncand + 1, sizeof(int));
    for (int k = 0; k < ncand; k++) {
        int before = 0;
        for (int j = 0; j < nc && !before; j++)
            if (j != k && cand[j].reach[cand[k].g] <= cand[k].seq) before = 1;
        minimal[k] = !before;
    }
    int first = -1;
    for (int k = 0; k < nc && first < 0; k++) if (minimal[k]) first = k;
    if (first < 0) first = 0;        /* a cycle (the ranks' orders disagree): the earliest by time */
    if (!cand[first].reach) {
        cand[first].reach = xmalloc(sizeof(uint32_t) * (size_t)(a->ngc + 1));
        reach_from(a, cand[first].g, cand[first].seq, cand[first].reach);
    }
    const uint32_t *rf = cand[first].reach;

    ta_finding *f = ta_finding_new(a, K_NAN);
    ta_nanfinding *nf = xcalloc(1, sizeof *nf);
    f->data = nf;
    analyse_event(a, cand[first].g, cand[first].seq, &nf->ev);
    ta_nanev *ev = &nf->ev;
    f->root_ranks = ev->cause == NC_INPUT;   /* the root cause: the ranks it was born on */
    f->g = ev->g;
    f->seq = ev->seq;
    f->t = ev->t;
    snprintf(f->subkind, sizeof f->subkind, "%s", ta_nan_cause_names[ev->cause]);
    /* the sides: culprits and the others of the communicator */
    int ct = -1, ot = -1;
    int64_t cc = -1, oc = -1;
    int *oth = xmalloc(sizeof(int) * (size_t)(ev->nmem + 1)), no = 0;
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        if (m->trace < 0) continue;
        int in = 0;
        for (int k = 0; k < ev->nranks; k++) in |= ev->ranks[k] == m->rank;
        if (in) { if (ct < 0 && m->call >= 0) { ct = m->trace; cc = m->call; } }
        else {
            oth[no++] = m->rank;
            if (ot < 0 && m->call >= 0) { ot = m->trace; oc = m->call; }
        }
    }
    ta_side_set(&f->culprit, ev->ranks, ev->nranks, ct, cc);
    ta_side_set(&f->other, oth, no, ot, oc);
    free(oth);
    if (ct >= 0) f->culprit.stack = a->tr[ct]->calls[cc].stack, f->culprit.pystack = a->tr[ct]->calls[cc].pystack;
    if (ot >= 0) f->other.stack = a->tr[ot]->calls[oc].stack, f->other.pystack = a->tr[ot]->calls[oc].pystack;
    f->message = describe_event(a, ev, &f->hint);

    /* later non-finite collectives: causally after the first */
    for (int g = 0; g < a->ngc; g++) {
        if (rf[g] == UINT32_MAX) continue;
        int64_t cnt = 0;
        uint32_t from = 0;
        const ta_gcomm *n = &a->gc[g];
        for (uint32_t i = ta_gseq_lower(n, rf[g]); i < n->nseqs; i++) {
            uint32_t s = ta_gseq_at(n, i);
            if (!(mk[g][i] & 1) || (g == ev->g && s == ev->seq)) continue;
            if (!cnt) from = s;
            cnt++;
        }
        if (!cnt) continue;
        nf->later = xrealloc(nf->later, sizeof *nf->later * (size_t)(nf->nlater + 1));
        nf->later[nf->nlater++] = (ta_nanlater){g, from, cnt};
        nf->later_count += cnt;
    }
    /* independent first points: not after the first, nor after another
     * candidate (beyond MAX_CAND: not after any of the first MAX_CAND) */
    for (int k = 0; k < ncand; k++) {
        if (k == first || rf[cand[k].g] <= cand[k].seq) continue;
        if (!minimal[k]) continue;
        nf->indep = xrealloc(nf->indep, sizeof *nf->indep * (size_t)(nf->nindep + 1));
        analyse_event(a, cand[k].g, cand[k].seq, &nf->indep[nf->nindep++]);
    }
    /* earlier reductions of the first point's members that were not seen */
    for (int g = 0; g < a->ngc; g++) memset(mk[g], 0, (size_t)a->gc[g].nseqs + 1);
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        if (m->trace < 0 || m->call < 0) continue;
        const ta_trace *t = a->tr[m->trace];
        if (!t->nan_usable) continue;
        int64_t j = 0;
        for (int64_t i = 0; i < m->call; i++) {
            const ta_call *c = &t->calls[i];
            while (j < t->nchecks && t->checks[j].call < i) j++;
            if (!checkable(t, c)) continue;
            int64_t in = -1, out = -1;
            for (int64_t q = j; q < t->nchecks && t->checks[q].call == i; q++)
                if (t->checks[q].buffer == BUF_INPUT) in = q;
                else out = q;
            int unseen = (t->nan_mode != NM_OUTPUT && !known(t, in)) || (has_output(t, c) && !known(t, out));
            if (!unseen) continue;
            int g = t->comms[c->comm].g;
            int64_t si = ta_gseq(&a->gc[g], c->seq);
            if (si >= 0 && !(mk[g][si] & 2)) { mk[g][si] |= 2; nf->unchecked_before++; }
        }
    }
    if (nf->later_count || nf->nindep || nf->unchecked_before) {
        char *extra = NULL;
        if (nf->later_count) {
            char *l = NULL;
            for (int k = 0; k < nf->nlater && k < 4; k++)
                l = join(l, ", ", xasprintf("comm %s from #%u: %lld", ta_comm_name(a, nf->later[k].g),
                                            nf->later[k].from_seq, (long long)nf->later[k].count));
            extra = xasprintf("%lld later non-finite collective%s from it (%s%s)", (long long)nf->later_count,
                              nf->later_count > 1 ? "s follow" : " follows", l, nf->nlater > 4 ? ", ..." : "");
            free(l);
        }
        for (int k = 0; k < nf->nindep && k < 4; k++) {
            const ta_nanev *e = &nf->indep[k];
            char *rs = ta_ranks_text(e->ranks, e->nranks);
            extra = join(extra, "; ",
                         xasprintf("independently of it, %s #%u on comm %s turned non-finite too (cause %s, rank%s %s)",
                                   ta_op_names[e->op], e->seq, ta_comm_name(a, e->g), ta_nan_cause_names[e->cause],
                                   e->nranks > 1 ? "s" : "", rs));
            free(rs);
        }
        if (nf->unchecked_before)
            extra = join(extra, "; ",
                         xasprintf("%lld earlier reduction%s of these ranks %s not checked: the NaN may be older",
                                   (long long)nf->unchecked_before, nf->unchecked_before > 1 ? "s" : "",
                                   nf->unchecked_before > 1 ? "were" : "was"));
        char *m = xasprintf("%s. %c%s", f->message, extra[0] >= 'a' && extra[0] <= 'z' ? extra[0] - 32 : extra[0],
                            extra + 1);
        free(f->message); free(extra);
        f->message = m;
    }

    for (int g = 0; g < a->ngc; g++) free(mk[g]);
    free(mk);
    for (int k = 0; k < ncand; k++) free(cand[k].reach);
    free(cand); free(minimal);
out:
    free(off); free(absent); free(ringonly);
}

/* --json: one check of a buffer (null: none) */
static void check_json(ta_jw *w, const char *k, const ta_trace *t, int64_t ci)
{
    jw_key(w, k);
    if (!t || ci < 0) { fputs("null", w->o); return; }
    const ta_check cv = ta_check_at(t, ci), *c = &cv;
    jw_open(w, '{');
    jw_str(w, "status", ta_ck_status_names[c->status]);
    jw_int(w, "nan", c->nan);
    jw_int(w, "inf", c->inf);
    jw_intn(w, "first", c->first, c->first == TA_NULL64);
    jw_str(w, "first_kind", c->first_kind == 1 ? "nan" : c->first_kind == 2 ? "inf" : NULL);
    jw_int(w, "elems_checked", c->checked);
    jw_int(w, "elems", c->elems);
    jw_str(w, "reason", c->reason);
    jw_close(w, '}');
}

static int has_rank(const int *v, int n, int r)
{
    for (int i = 0; i < n; i++) if (v[i] == r) return 1;
    return 0;
}

static void nanev_json(ta_jw *w, ta_an *a, const ta_nanev *ev, int full)
{
    jw_str(w, "cause", ta_nan_cause_names[ev->cause]);
    jw_str(w, "reason", ev->reason);
    jw_str(w, "op", ta_op_names[ev->op]);
    jw_str(w, "dtype", ev->dtype == DT_NONE ? NULL : ta_dtype_names[ev->dtype]);
    jw_str(w, "redop", ev->redop == RO_NONE ? NULL : ta_redop_names[ev->redop]);
    jw_dbl(w, "limit", ta_nan_limit(ev->dtype));
    jw_ints(w, "unchecked_inputs", ev->unchecked, ev->nunchecked);
    if (!full) return;
    jw_key(w, "members");
    jw_open(w, '[');
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        const ta_trace *t = m->trace >= 0 ? a->tr[m->trace] : NULL;
        jw_sep(w);
        jw_open(w, '{');
        jw_int(w, "place", m->place);
        jw_intn(w, "rank", m->rank, m->rank < 0);
        jw_bool(w, "source", m->source);
        jw_bool(w, "lost", m->lost);
        if (t && m->call >= 0 && has_rank(ev->ranks, ev->nranks, m->rank)) {
            jw_site(w, a, t, t->calls[m->call].stack, t->calls[m->call].pystack);
        } else {
            jw_str(w, "site", NULL);
            jw_str(w, "function", NULL);
            jw_str(w, "python_stack", NULL);
            jw_str(w, "native_site", NULL);
        }
        check_json(w, "input", t, m->in);
        check_json(w, "output", t, m->out);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* --json: the first non-finite collective (cause, members' checks), the later ones, the independent ones */
void ta_json_nan(ta_jw *w, ta_an *a, const ta_finding *f)
{
    const ta_nanfinding *nf = f->data;
    if (!nf) return;
    nanev_json(w, a, &nf->ev, 1);
    jw_int(w, "later_count", nf->later_count);
    jw_key(w, "later");
    jw_open(w, '[');
    for (int k = 0; k < nf->nlater; k++) {
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "comm", ta_comm_name(a, nf->later[k].g));
        jw_int(w, "from_seq", nf->later[k].from_seq);
        jw_int(w, "collectives", nf->later[k].count);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "independent");
    jw_open(w, '[');
    for (int k = 0; k < nf->nindep; k++) {
        const ta_nanev *e = &nf->indep[k];
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "comm", ta_comm_name(a, e->g));
        jw_int(w, "seq", e->seq);
        jw_ints(w, "ranks", e->ranks, e->nranks);
        nanev_json(w, a, e, 0);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_int(w, "unchecked_before", nf->unchecked_before);
}

/* text: the sources' inputs (or the quoted output), and the inputs not known */
void ta_text_nan(ta_tx *x, const ta_finding *f)
{
    ta_an *a = x->a;
    FILE *o = x->o;
    const char *ind = x->ind;
    int md = x->md;
    ta_tx_head(x, f, NULL);
    const ta_nanfinding *nf = f->data;
    if (!nf) return;
    const ta_nanev *ev = &nf->ev;
    int shown = 0;
    for (int p = 0; p < ev->nmem; p++) {
        const ta_nanmember *m = &ev->mem[p];
        if (m->trace < 0 || m->call < 0) continue;
        const ta_trace *t = a->tr[m->trace];
        int show = ev->cause == NC_INPUT ? m->source : p == ev->ref;
        if (!show) continue;
        if (shown++ >= 8) { fprintf(o, "%s%s...\n", ind, md ? "- " : ""); break; }
        const ta_check kv = ta_check_at(t, ev->cause == NC_INPUT ? m->in : m->out), *k = &kv;
        char *sig = ta_call_sig(t, m->call), *site = ta_call_site_text(a, t, m->call);
        char at[64] = "";
        if (k->first != TA_NULL64)
            snprintf(at, sizeof at, "first %s at element %lld, ", k->first_kind == 2 ? "Inf" : "NaN", (long long)k->first);
        fprintf(o, md ? "%s- rank %d: `%s` at `%s`; %s: %s%lld NaN, %lld Inf in %lld elements checked\n"
                      : "%srank %d: %s at %s; %s: %s%lld NaN, %lld Inf in %lld elements checked\n",
                ind, m->rank, sig, site, ev->cause == NC_INPUT ? "input" : "output", at, (long long)k->nan,
                (long long)k->inf, (long long)k->checked);
        free(sig); free(site);
    }
    if (ev->cause != NC_INPUT && ev->nunchecked) {
        char *r = ta_ranks_text(ev->unchecked, ev->nunchecked);
        fprintf(o, "%s%sinputs not known: rank%s %s\n", ind, md ? "- " : "", ev->nunchecked > 1 ? "s" : "", r);
        free(r);
    }
}
