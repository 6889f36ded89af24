/* --html FILE: one self-contained page (no network: inline CSS and SVG,
 * no script, a Content-Security-Policy that allows nothing else): the
 * diagnosis (the text document, escaped), a timeline of the calls around
 * the root cause, one row per rank (the ranks of the root cause and a
 * sample of the others, at most HT_ROWS), the culprit's call, the other
 * side's and the calls ranks are stuck in highlighted, and the peak memory
 * of each rank as bars (HT_BARS at most: ranks grouped beyond). Every
 * string that comes from a trace is escaped. docs/analysis-format.md. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings/ta_finding.h"
#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_out.h"

#define HT_ROWS 32           /* timeline rows (ranks) at most... */
#define HT_INVOLVED 24       /* ... of them the ranks of the root cause, at most */
#define HT_BOXES 400         /* calls drawn per row at most */
#define HT_AROUND 6          /* the anchor rank's calls either side of the root cause's: the window */
#define HT_BARS 64           /* memory bars at most (ranks grouped beyond) */
#define HT_BAR_PITCH(n) ((n) <= 8 ? 24 : (n) <= 32 ? 18 : 14)   /* a bar's row: the chart is n of them tall */
#define HT_BAR_L 120         /* the bars' label column (their ranks) */
#define HT_BAR_R 90          /* ... and the room right of the widest bar (its value) */
#define HT_W 1200            /* SVG width */
#define HT_SPAN_MAX (INT64_C(1) << 50)   /* the widest window: 13 days */
#define HT_LABEL 170         /* the timeline's label column */
#define HT_CHAR_W 6.4        /* a label's character at 10px sans-serif: a generous average (DejaVu Sans, a wide
                                face: 5.7 in "AllReduce #12", 6.4 for a digit) */
#define HT_LABEL_PAD 3.0     /* ... and its margin either side */

char *ta_text_capture(ta_an *a)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m) return NULL;
    ta_out_text(a, m);
    if (fclose(m) != 0) { free(buf); return NULL; }
    return buf;
}

/* ---- escaping (ta_esc.h): text and attribute values alike, one line each; the report's text (already
 * escaped as text) keeps its lines ---- */
static void esc(FILE *o, const char *s) { ta_esc_puts(o, s, TA_ESC_HTML); }
static void escf(FILE *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void escf(FILE *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    esc(o, s);
    free(s);
}

static const char *op_name(int op) { return op >= 0 && op < OP_N ? ta_op_names[op] : "?"; }
static int64_t peak_of(const ta_trace *t)
{
    int64_t pk = -1;
    for (int k = 0; k < t->nmdev; k++) if (t->mdev[k].peak > pk) pk = t->mdev[k].peak;
    return pk;
}
/* a time span as text: "12.3 ms", "4.0 s", "850 us" */
static void span_text(char *b, size_t n, int64_t ns)
{
    double v = (double)ns;
    if (v >= 1e9) snprintf(b, n, "%.3g s", v / 1e9);
    else if (v >= 1e6) snprintf(b, n, "%.3g ms", v / 1e6);
    else if (v >= 1e3) snprintf(b, n, "%.3g us", v / 1e3);
    else snprintf(b, n, "%lld ns", (long long)ns);
}

/* hi - lo (hi >= lo) without overflow: INT64_MAX at most */
static int64_t span(int64_t lo, int64_t hi)
{
    uint64_t d = (uint64_t)hi - (uint64_t)lo;
    return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
}
/* where time s falls in [lo, hi], 0..1 (outside: below 0, above 1) */
static double frac(int64_t s, int64_t lo, int64_t hi)
{
    double d = (double)span(lo, hi);
    if (s >= lo) return (double)span(lo, s) / d;
    return -(double)span(s, lo) / d;
}

/* ---- the diagnosis ---- */
static const ta_finding *first_root(const ta_an *a)
{
    for (int i = 0; i < a->nf; i++)
        if (a->f[i].root) return &a->f[i];
    return NULL;
}

static void diagnosis(ta_an *a, FILE *o)
{
    fputs("<section id=\"diagnosis\"><h2>Diagnosis</h2>\n", o);
    int nroot = 0;
    for (int i = 0; i < a->nf; i++) {
        const ta_finding *f = &a->f[i];
        if (!f->root) continue;
        char *r = ta_ranks_text(f->culprit.ranks, f->culprit.nranks);
        fputs("<div class=\"root-cause\" data-ranks=\"", o);
        esc(o, r);
        fputs("\"><p class=\"head\">ROOT CAUSE", o);
        if (nroot++) fprintf(o, " (%d)", nroot);
        fputs(": ", o);
        escf(o, "%s%s%s", ta_kind_names[f->kind], f->subkind ? " / " : "", ta_subkind_names[f->subkind]);
        if (f->culprit.nranks) escf(o, ", rank%s %s", f->culprit.nranks > 1 ? "s" : "", r);
        if (f->g >= 0) escf(o, ", comm %s", ta_comm_name(a, f->g));
        if (f->g >= 0 && f->seq > 0) escf(o, ", collective #%lld", (long long)f->seq);
        fputs("</p>\n<p class=\"msg\">", o);
        esc(o, f->message);
        fputs("</p>\n", o);
        if (f->hint) { fputs("<p class=\"fix\">fix: ", o); esc(o, f->hint); fputs("</p>\n", o); }
        fputs("</div>\n", o);
        free(r);
    }
    if (!nroot)
        fprintf(o, "<div class=\"verdict\">%s</div>\n",
                a->nf ? "Nothing hung or failed." : "No problem found: every collective and send/recv matched.");
    fputs("<p class=\"note\"><a href=\"#report\">The full report</a> is below the charts.</p></section>\n", o);
}

static void report(FILE *o, const char *text)
{
    fputs("<section id=\"report\"><h2>The full report (as tranalyze prints it)</h2>\n<pre id=\"diagnosis-text\">", o);
    if (text) ta_esc_puts(o, text, TA_ESC_HTML | TA_ESC_DOC);
    else fputs("(the text report could not be made)", o);
    fputs("</pre></section>\n", o);
}

/* ---- the timeline ---- */
typedef struct {
    int t;                   /* trace */
    int why;                 /* 2 culprit, 1 involved, 0 sample */
} row;
static int cmp_row(const void *p, const void *q)
{
    const row *x = p, *y = q;
    return (x->t > y->t) - (x->t < y->t);
}

static void call_end(const ta_trace *t, const ta_call *c, int64_t last, int64_t *s, int64_t *e)
{
    *s = ta_tl_wall_ns(t, c->enter_ns);
    *e = c->exit_ns != TA_NULL64 ? ta_tl_wall_ns(t, c->exit_ns) : last;
    if (*e < *s) *e = *s;
}

/* a call's box in a timeline row, for its label */
typedef struct { double x0, x1; int op; uint32_t seq; } box;

/* the width a label of n characters takes at the page's 10px sans-serif, with a margin either side
 * (tests/analyzer/check_visual.py places labels by the same rule) */
static double label_w(size_t n) { return (double)n * HT_CHAR_W + 2 * HT_LABEL_PAD; }

/* each box's label, "AllReduce #12" (its operation and number), left to right: inside the box when it
 * fits there, else beside it (to its right) when the room up to the next box (the row's end: xmax) takes
 * it and no earlier label is there; else "#12" the same way; else none (the title has it) */
static void box_labels(FILE *o, const box *b, int n, int y, double xmax)
{
    double free_x = 0;            /* where the last label or box drawn ends */
    for (int k = 0; k < n; k++) {
        char full[64], brief[24];
        snprintf(full, sizeof full, b[k].seq ? "%s #%u" : "%s", op_name(b[k].op), b[k].seq);
        snprintf(brief, sizeof brief, "#%u", b[k].seq);
        double next = k + 1 < n ? b[k + 1].x0 : xmax, x = 0;
        const char *text = NULL, *cls = "";
        for (int pass = 0; pass < 2 && !text; pass++) {
            const char *t = pass ? brief : full;
            if (pass && !b[k].seq) break;
            double w = label_w(strlen(t));
            /* (at 1e-6: the page's numbers have one decimal, a tie is room) */
            if (b[k].x1 - b[k].x0 >= w - 1e-6 && b[k].x0 >= free_x - 1e-6) { text = t; x = b[k].x0 + HT_LABEL_PAD; }
            else if (b[k].x1 >= free_x - 1e-6 && b[k].x1 + w <= next + 1e-6) {
                text = t;
                x = b[k].x1 + HT_LABEL_PAD;
                cls = " beside";
            }
        }
        if (b[k].x1 > free_x) free_x = b[k].x1;
        if (!text) continue;
        if (*cls && x - HT_LABEL_PAD + label_w(strlen(text)) > free_x) free_x = x - HT_LABEL_PAD + label_w(strlen(text));
        fprintf(o, "<text class=\"boxlabel%s\" data-op=\"%s\" data-seq=\"%u\" x=\"%.1f\" y=\"%d\">", cls,
                op_name(b[k].op), b[k].seq, x, y + 14);
        esc(o, text);
        fputs("</text>\n", o);
    }
}

static void timeline(ta_an *a, FILE *o, const int64_t *stuck)
{
    const ta_finding *f0 = first_root(a);
    fprintf(o, "<section id=\"timeline\"><h2>%s</h2>\n", f0 ? "Calls around the root cause" : "The last calls of each rank");
    if (!a->ntr) { fputs("<p class=\"note\">No trace.</p></section>\n", o); return; }
    /* the anchor: the root cause's call on its culprit, else the first call a rank is stuck in; else
     * (tail) the last calls of every rank shown */
    int at = -1, tail = 0;
    int64_t aci = -1, atime = INT64_MIN;
    if (f0 && f0->culprit.trace >= 0) {
        at = f0->culprit.trace;
        aci = ta_tl_root_call(a, f0, at);
        if (aci < 0 && f0->t > 0 && f0->t <= 9.0e9) atime = llround(f0->t * 1e9);
    }
    if (at < 0) {
        for (int t = 0; t < a->ntr; t++)
            if (stuck[t] >= 0) { at = t; aci = stuck[t]; break; }
    }
    if (at < 0) { at = 0; tail = 1; }
    const ta_trace *T = a->tr[at];
    /* the rows */
    row *rows = xmalloc(sizeof(row) * (size_t)(a->ntr + 1));
    uint8_t *taken = xcalloc((size_t)a->ntr + 1, 1);
    int nrows = 0;
    if (f0) {
        for (int i = 0; i < a->nf; i++) {
            const ta_finding *f = &a->f[i];
            if (!f->root) continue;
            for (int k = 0; k < f->culprit.nranks && nrows < HT_INVOLVED; k++) {
                int t = ta_trace_of_rank(a, f->culprit.ranks[k]);
                if (t >= 0 && !taken[t]) { taken[t] = 1; rows[nrows++] = (row){t, 2}; }
            }
        }
        for (int k = 0; k < f0->other.nranks && nrows < HT_INVOLVED; k++) {
            int t = ta_trace_of_rank(a, f0->other.ranks[k]);
            if (t >= 0 && !taken[t]) { taken[t] = 1; rows[nrows++] = (row){t, 1}; }
        }
        for (int p = 0; p < f0->nmem && nrows < HT_INVOLVED; p++) {
            int t = f0->mem[p].trace;
            if (t >= 0 && t < a->ntr && !taken[t]) { taken[t] = 1; rows[nrows++] = (row){t, 1}; }
        }
    }
    int nin = nrows, left = a->ntr - nin;
    int room = HT_ROWS - nrows;
    if (room > 0 && left > 0) {      /* a sample of the others, evenly spread over the ranks */
        int want = left < room ? left : room, seen = 0, got = 0;
        for (int t = 0; t < a->ntr && got < want; t++) {
            if (taken[t]) continue;
            if ((int64_t)seen * want / left == got || left - seen == want - got) {
                taken[t] = 1;
                rows[nrows++] = (row){t, 0};
                got++;
            }
            seen++;
        }
    }
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    if (tail) {
        for (int r = 0; r < nrows; r++) {
            const ta_trace *tr = a->tr[rows[r].t];
            int64_t last = ta_tl_last_ns(tr), s, e;
            for (int64_t i = tr->ncalls - 1, k = 0; i >= 0 && k <= HT_AROUND; i--) {
                if (ta_op_is_group(tr->calls[i].op)) continue;
                call_end(tr, &tr->calls[i], last, &s, &e);
                if (s < lo) lo = s;
                if (!k++ && (tr->calls[i].exit_ns != TA_NULL64 ? e : s) > hi) hi = tr->calls[i].exit_ns != TA_NULL64 ? e : s;
            }
        }
        if (lo == INT64_MAX || hi < lo) lo = hi = 0;
    } else {
        if (aci < 0 && T->ncalls) {
            aci = atime != INT64_MIN ? ta_tl_call_at_time(T, atime) : T->ncalls - 1;
            if (aci >= T->ncalls) aci = T->ncalls - 1;
        }
        int64_t tlast = ta_tl_last_ns(T);
        if (aci >= 0) {
            int64_t i0 = aci > HT_AROUND ? aci - HT_AROUND : 0;
            int64_t i1 = aci + HT_AROUND < T->ncalls ? aci + HT_AROUND : T->ncalls - 1;
            int64_t s, e;
            lo = ta_tl_wall_ns(T, T->calls[i0].enter_ns);
            call_end(T, &T->calls[i1], tlast, &s, &e);
            hi = T->calls[i1].exit_ns != TA_NULL64 ? e : s;
            call_end(T, &T->calls[aci], tlast, &s, &e);
            if (T->calls[aci].exit_ns != TA_NULL64 && e > hi) hi = e;
        } else {
            lo = atime != INT64_MIN ? atime - 1000000 : 0;
            hi = lo + 2000000;
        }
    }
    /* (times of a crafted trace: no window wider than HT_SPAN_MAX, no overflow) */
    if (hi < lo) hi = lo;
    if (span(lo, hi) > HT_SPAN_MAX) {
        if (hi > INT64_MIN + HT_SPAN_MAX) lo = hi - HT_SPAN_MAX;
        else { lo = INT64_MIN; hi = INT64_MIN + HT_SPAN_MAX; }
    }
    if (span(lo, hi) < 1000) {
        if (lo < INT64_MAX - 1000) hi = lo + 1000;
        else { lo = INT64_MAX - 1000; hi = INT64_MAX; }
    }
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_row);
    /* the calls stuck in, within reach: the window stretches to show them (5 times its width at most) */
    int64_t w0 = span(lo, hi), ahead = span(lo, INT64_MAX), reach = lo + (w0 > ahead / 5 ? ahead : 5 * w0);
    for (int r = 0; r < nrows; r++) {
        int64_t sc = stuck[rows[r].t];
        if (sc < 0) continue;
        int64_t s = ta_tl_wall_ns(a->tr[rows[r].t], a->tr[rows[r].t]->calls[sc].enter_ns);
        if (s > hi && s <= reach) hi = s < INT64_MAX - w0 / 10 ? s + w0 / 10 : INT64_MAX;
    }
    int64_t pad = span(lo, hi) / 25;
    lo = lo > INT64_MIN + pad ? lo - pad : INT64_MIN;
    hi = hi < INT64_MAX - pad ? hi + pad : INT64_MAX;
    double W = HT_W - HT_LABEL - 20;
    int RH = 24, top = 34, H = top + nrows * RH + 12;
    char b1[32], b2[32];
    span_text(b1, sizeof b1, span(lo, hi));
    fprintf(o, "<p class=\"note\">%d of %d ranks", nrows, a->ntr);
    if (nrows < a->ntr) fprintf(o, " (%s a sample of the others)", nin ? "the ranks of the root cause and" : "");
    fprintf(o, "; a window of %s %s", b1, tail ? "at the end of each rank's calls" : "around ");
    if (!tail && aci >= 0) {
        char *ct = ta_call_text_replay(a, T, aci);
        escf(o, "rank %d's %s", T->rank, ct);
        free(ct);
    } else if (!tail) {
        escf(o, "rank %d's root cause", T->rank);
    }
    fputs(". Each call is labelled with its operation and number (beside it when the box is too narrow, none "
          "where its neighbours leave no room); hover a call for its details.</p>\n", o);
    fprintf(o, "<svg id=\"timeline-chart\" class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n",
            HT_W, H, HT_W, H);
    fputs("<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#f2a33a\"/></pattern></defs>\n", o);
    /* axis */
    for (int k = 0; k <= 5; k++) {
        double x = HT_LABEL + W * k / 5;
        span_text(b2, sizeof b2, span(lo, hi) / 5 * k);
        fprintf(o, "<line class=\"tick\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                "<text class=\"axis\" x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">%s%s</text>\n",
                x, top - 8, x, H - 8, x, top - 14, k == 0 ? "start" : k == 5 ? "end" : "middle", k ? "+" : "",
                k ? b2 : "0");
    }
    unsigned drawn_kind = 0;         /* the legend's entries, by bit */
    box *boxes = xmalloc(sizeof *boxes * HT_BOXES);
    for (int r = 0; r < nrows; r++) {
        int t = rows[r].t;
        const ta_trace *tr = a->tr[t];
        int y = top + r * RH;
        int64_t last = ta_tl_last_ns(tr);
        const char *cls = rows[r].why == 2 ? " culprit" : (a->stuck && a->stuck[t]) ? " waiting" : "";
        fprintf(o, "<g class=\"row%s\" data-rank=\"%d\">\n", cls, tr->rank);
        fprintf(o, "<rect class=\"lane\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", HT_LABEL, y, W, RH - 4);
        fprintf(o, "<text class=\"label\" x=\"4\" y=\"%d\">", y + 14);
        escf(o, "rank %d", tr->rank);
        if (rows[r].why == 2) fputs(" \xe2\x97\x80 root", o);
        fputs("<title>", o);
        char *e = ta_end_text(a, tr);
        escf(o, "rank %d on %s, pid %lld: %s", tr->rank, tr->host ? tr->host : "?", (long long)tr->pid, e);
        free(e);
        int64_t sc = stuck[t];
        if (sc >= 0) {
            char *ct = ta_call_text_replay(a, tr, sc);
            escf(o, "; stuck in %s", ct);
            free(ct);
        }
        fputs("</title></text>\n", o);
        /* the calls that overlap the window */
        int64_t i = ta_tl_call_at_time(tr, lo);
        for (int back = 0; i > 0 && back < 64; back++) {      /* a long call that began before it */
            int64_t s, e2;
            call_end(tr, &tr->calls[i - 1], last, &s, &e2);
            if (e2 < lo && tr->calls[i - 1].gpu != GPU_PENDING) break;
            i--;
        }
        int drawn = 0;
        int64_t rc_ci = -1;
        for (int k = 0; k < a->nf; k++)
            if (a->f[k].root) {
                for (int q = 0; q < a->f[k].culprit.nranks; q++)
                    if (a->f[k].culprit.ranks[q] == tr->rank) rc_ci = ta_tl_root_call(a, &a->f[k], t);
                if (rc_ci >= 0) break;
            }
        int64_t other_ci = f0 && f0->other.trace == t ? f0->other.call : -1;
        for (; i < tr->ncalls && drawn < HT_BOXES; i++) {
            const ta_call *c = &tr->calls[i];
            if (ta_op_is_group(c->op)) continue;
            int64_t s, e2;
            call_end(tr, c, last, &s, &e2);
            if (s > hi) break;
            int pending = c->gpu == GPU_PENDING || c->exit_ns == TA_NULL64;
            if (e2 < lo && !pending) continue;
            double x0 = HT_LABEL + W * frac(s, lo, hi);
            double x1 = HT_LABEL + W * frac(e2, lo, hi);
            if (x0 < HT_LABEL) x0 = HT_LABEL;
            if (x1 > HT_LABEL + W) x1 = HT_LABEL + W;
            if (x1 - x0 < 2) x1 = x0 + 2;
            x0 = round(x0 * 10) / 10;     /* as the page has them: labels are placed by these numbers */
            x1 = round(x1 * 10) / 10;
            char k2[64] = "";
            if (i == rc_ci) strcat(k2, " rootcall"), drawn_kind |= 1;
            if (i == sc) strcat(k2, " stuck"), drawn_kind |= 4;
            if (i == other_ci) strcat(k2, " otherside"), drawn_kind |= 2;
            if (pending) drawn_kind |= 8;
            const char *kind = ta_op_is_coll(c->op) ? "coll" : ta_op_is_p2p(c->op) ? "p2p" : "other";
            drawn_kind |= ta_op_is_coll(c->op) ? 16 : ta_op_is_p2p(c->op) ? 32 : 0;
            if (pending) {               /* waiting: from its return (or entry) to the window's end */
                double xw = x1;
                fprintf(o, "<rect class=\"pending\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", xw, y + 6,
                        HT_LABEL + W - xw > 0 ? HT_LABEL + W - xw : 0, RH - 16);
            }
            fprintf(o, "<rect class=\"call %s%s\" data-seq=\"%u\" data-op=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
                    "height=\"%d\"><title>", kind, k2, c->seq, op_name(c->op), x0, y + 2, x1 - x0, RH - 8);
            char *ct = ta_call_text(a, tr, i);
            char *site = ta_call_site_text(a, tr, i);
            char d[32];
            span_text(d, sizeof d, span(s, e2));
            escf(o, "rank %d: %s at %s; %s%s", tr->rank, ct, site, d,
                 c->exit_ns == TA_NULL64 ? " (had not returned)" : "");
            if (c->gpu == GPU_PENDING) escf(o, "; not complete on the GPU for %.1f s", ta_pending_s(tr, c));
            if (i == rc_ci) fputs(" \xe2\x80\x94 ROOT CAUSE", o);
            if (i == sc) fputs(" \xe2\x80\x94 stuck here", o);
            if (i == other_ci) fputs(" \xe2\x80\x94 the other side", o);
            free(ct); free(site);
            fputs("</title></rect>\n", o);
            boxes[drawn] = (box){x0, x1, c->op, c->seq};
            drawn++;
        }
        box_labels(o, boxes, drawn, y, HT_LABEL + W);
        fputs("</g>\n", o);
    }
    fputs("</svg>\n", o);
    /* the legend: what was drawn */
    static const char *const leg[6][2] = {
        {"rootcall", "the root cause's call"}, {"otherside", "what the others issued there"},
        {"stuck", "stuck here (the first call a rank waits in)"}, {"pending", "still waiting at the trace's last write"},
        {"coll", "collective"}, {"p2p", "send/receive"}};
    fputs("<p class=\"legend\">", o);
    for (int k = 0; k < 6; k++)
        if (drawn_kind & (1u << k)) fprintf(o, "<span class=\"sw %s\"></span>%s ", leg[k][0], leg[k][1]);
    fputs("</p>\n", o);
    if (nrows < a->ntr)
        fprintf(o, "<p class=\"note\" id=\"timeline-more\">%d more rank%s not shown (--timeline has them all).</p>\n",
                a->ntr - nrows, a->ntr - nrows > 1 ? "s" : "");
    free(boxes);
    free(rows);
    free(taken);
    fputs("</section>\n", o);
}

/* ---- memory ---- */
static void memory(ta_an *a, FILE *o)
{
    fputs("<section id=\"memory\"><h2>Peak memory per rank</h2>\n", o);
    int n = a->ntr, nb = n > HT_BARS ? HT_BARS : n, any = 0;
    int64_t max = 0;
    uint8_t *hot = xcalloc((size_t)n + 1, 1);        /* ranks named by a memory finding */
    for (int i = 0; i < a->nf; i++)
        if (a->f[i].kind == K_OOM || a->f[i].kind == K_IMBALANCE)
            for (int k = 0; k < a->f[i].culprit.nranks; k++) {
                int t = ta_trace_of_rank(a, a->f[i].culprit.ranks[k]);
                if (t >= 0) hot[t] = 1;
            }
    for (int t = 0; t < n; t++) {
        int64_t p = peak_of(a->tr[t]);
        if (p >= 0) any = 1;
        if (p > max) max = p;
    }
    if (!any) {
        fputs("<p class=\"note\">The traces hold no memory data.</p></section>\n", o);
        free(hot);
        return;
    }
    if (nb < n)
        fprintf(o, "<p class=\"note\">%d ranks in %d bars: each the highest peak of a run of consecutive ranks.</p>\n",
                n, nb);
    /* one bar a row: the chart as tall as its bars (the pitch shrinks as they grow in number) */
    char *mx = ta_human(max);
    int pitch = HT_BAR_PITCH(nb), top = 8, bottom = 30, L = HT_BAR_L, H = nb * pitch;
    double W = HT_W - L - HT_BAR_R;
    fprintf(o, "<svg id=\"memory-chart\" class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n",
            HT_W, top + H + bottom, HT_W, top + H + bottom);
    fprintf(o, "<line class=\"tick\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
            "<line class=\"tick\" x1=\"%d\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", L, top, L, top + H, L, top + H, L + W, top + H);
    fprintf(o, "<text class=\"axis\" x=\"%d\" y=\"%d\" text-anchor=\"start\">0</text>"
            "<text class=\"axis\" x=\"%.1f\" y=\"%d\" text-anchor=\"end\">%s</text>"
            "<text class=\"axis\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">peak device memory</text>\n",
            L, top + H + 14, L + W, top + H + 14, mx, L + W / 2, top + H + 26);
    free(mx);
    for (int b = 0; b < nb; b++) {
        int t0 = (int)((int64_t)b * n / nb), t1 = (int)((int64_t)(b + 1) * n / nb);
        int64_t v = -1;
        int h = 0, tmax = t0;
        for (int t = t0; t < t1; t++) {
            int64_t p = peak_of(a->tr[t]);
            if (p > v) { v = p; tmax = t; }
            h |= hot[t];
        }
        double bw = v > 0 && max > 0 ? W * (double)v / (double)max : 0;
        int y = top + b * pitch;
        char *hv = ta_human(v), rk[40];
        if (t1 - t0 > 1) snprintf(rk, sizeof rk, "%d-%d", a->tr[t0]->rank, a->tr[t1 - 1]->rank);
        else snprintf(rk, sizeof rk, "%d", a->tr[t0]->rank);
        fprintf(o, "<text class=\"axis\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%s %s</text>", L - 6,
                y + pitch / 2 + 4, t1 - t0 > 1 ? "ranks" : "rank", rk);
        fprintf(o, "<rect class=\"bar%s%s\" data-ranks=\"%s\" data-bytes=\"%lld\" x=\"%d\" y=\"%d\" width=\"%.1f\" "
                "height=\"%d\"><title>", h ? " hot" : "", v < 0 ? " nodata" : "", rk, (long long)v, L, y + 2, bw,
                pitch - 4);
        if (t1 - t0 > 1) escf(o, "ranks %s: highest peak %s (rank %d)", rk, hv, a->tr[tmax]->rank);
        else escf(o, "rank %s: peak %s", rk, v < 0 ? "not known" : hv);
        fputs("</title></rect>", o);
        fprintf(o, "<text class=\"axis value\" x=\"%.1f\" y=\"%d\">%s</text>\n", L + bw + 4, y + pitch / 2 + 4,
                v < 0 ? "not known" : hv);
        free(hv);
    }
    fputs("</svg>\n</section>\n", o);
    free(hot);
}

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#1b1f24;background:#fff}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 8px;border-bottom:1px solid #ddd}"
    ".summary,.note,.legend{color:#555}"
    ".root-cause{border-left:5px solid #c62828;background:#fdecea;padding:6px 12px;margin:8px 0}"
    ".root-cause .head{font-weight:bold;color:#b71c1c;margin:4px 0}.root-cause p{margin:4px 0}"
    ".verdict{border-left:5px solid #2e7d32;background:#e8f5e9;padding:8px 12px}"
    "pre{background:#f6f8fa;padding:10px;overflow:auto;font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap}"
    ".chart{display:block;max-width:100%;height:auto;font:11px sans-serif}"
    ".lane{fill:#f6f8fa}.label{font:12px sans-serif;fill:#1b1f24}.row.culprit .label{fill:#b71c1c;font-weight:bold}"
    ".axis{fill:#555;font:11px sans-serif}.tick{stroke:#ccc}"
    ".call{stroke:#fff;stroke-width:.5}.call.coll{fill:#4f7fbf}.call.p2p{fill:#7fb17f}.call.other{fill:#999}"
    ".call.stuck{fill:#f2a33a;stroke:#e65100;stroke-width:2.5}.call.otherside{fill:#7b4fbf}"
    ".call.rootcall{fill:#d32f2f;stroke:#5d0000;stroke-width:2.5}"
    ".pending{fill:url(#hatch);opacity:.7}.boxlabel{fill:#fff;font:10px sans-serif;pointer-events:none}"
    ".boxlabel.beside{fill:#1b1f24}"
    ".bar{fill:#4f7fbf}.bar.hot{fill:#d32f2f}"
    ".sw{display:inline-block;width:14px;height:10px;margin:0 4px 0 12px;vertical-align:middle}"
    ".sw.rootcall{background:#d32f2f}.sw.otherside{background:#7b4fbf}.sw.stuck{background:#f2a33a}"
    ".sw.pending{background:repeating-linear-gradient(45deg,#f2a33a 0 3px,#fff 3px 6px)}"
    ".sw.coll{background:#4f7fbf}.sw.p2p{background:#7fb17f}"
    "footer{margin-top:24px;color:#888;font-size:12px}";

int ta_out_html(ta_an *a, const char *path, const char *text)
{
    char *tmp;
    FILE *o = ta_file_create(path, &tmp);
    if (!o) { ta_esc_printf(stderr, "tranalyze: --html %s: %s\n", path, strerror(errno)); return -1; }
    setvbuf(o, NULL, _IOFBF, 1 << 16);
    int64_t *stuck = ta_tl_stuck(a);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
          "<meta name=\"viewport\" content=\"width=device-width\">\n<title>tranalyze: job ", o);
    esc(o, a->job);
    fprintf(o, "</title>\n<style>%s</style></head>\n<body>\n<header><h1>tranalyze: job ", css);
    esc(o, a->job);
    fprintf(o, "</h1><p class=\"summary\">%d of %d ranks traced (%d file%s)", a->ntr, a->world, a->nfiles,
            a->nfiles == 1 ? "" : "s");
    if (a->nother_jobs) {
        fprintf(o, "; the folder holds %d jobs; %s; the other%s: ", a->njobs, ta_job_choice(a),
                a->nother_jobs > 1 ? "s" : "");
        for (int i = 0; i < a->nother_jobs && i < 8; i++) escf(o, "%s%s", i ? ", " : "", a->other_jobs[i]);
        if (a->nother_jobs > 8) fprintf(o, ", ... and %d more", a->nother_jobs - 8);
        if (!a->job_wanted) fprintf(o, " (--job ID analyses %s)", a->nother_jobs > 1 ? "another" : "it");
    }
    fputs("</p></header>\n", o);
    diagnosis(a, o);
    timeline(a, o, stuck);
    memory(a, o);
    report(o, text);
    fputs("<footer>tranalyze " TA_VERSION ": this page needs nothing but itself (no network, no script).</footer>\n"
          "</body></html>\n", o);
    free(stuck);
    int bad = ta_file_commit(o, path, tmp) != 0;
    if (bad) ta_esc_printf(stderr, "tranalyze: --html %s: could not be written whole: %s\n", path, strerror(errno));
    return bad ? -1 : 0;
}
