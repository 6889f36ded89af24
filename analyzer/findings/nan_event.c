/* NaN/Inf, one non-finite point (the nan kind: nan.c): the members of a
 * non-finite (comm, seq), their checks, the cause (input, overflow,
 * unknown and why) and its description. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "nan_int.h"
#include "site/ta_site.h"

const int ta_nan_cause_subkinds[3] = {SK_INPUT, SK_OVERFLOW, SK_UNKNOWN};

int64_t ta_check_find(const ta_trace *t, int64_t call, int buffer)
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

ta_check ta_check_at(const ta_trace *t, int64_t k)
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


double ta_nan_limit(int dt)
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

const char *ta_nan_limit_text(int dt)
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

char *ta_nan_join(char *a, const char *sep, char *b)
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
        s = ta_nan_join(s, "; ", part);
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

void ta_nan_event(ta_an *a, int g, uint32_t seq, ta_nanev *ev)
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

char *ta_nan_describe(ta_an *a, const ta_nanev *ev, char **hint)
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
            parts = ta_nan_join(parts, "; ", ns < 8 ? xasprintf("rank %d at %s: %s", m->rank, site, c) : NULL);
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

