/* How the job ended when its communicators were aborted (ncclCommAbort:
 * PyTorch's watchdog after its timeout): one sentence for text and
 * Markdown, an object for --json. Said only when the abort released
 * operations (aborted.c): a clean job that aborts at its end says nothing. */
#include <stdlib.h>
#include <string.h>

#include "ta_crash_out.h"
#include "ta_jw.h"

typedef struct {
    int *ranks, n;        /* ranks whose abort released operations */
    int64_t released;
    int64_t after;        /* calls entered after the abort, left out */
    double first_wall;    /* the first of those aborts (Unix time) */
    const ta_trace *first; /* its trace */
    double waited_s;      /* from the oldest released operation's enqueue to that abort, -1 unknown */
} abort_sum;

static int summarize(const ta_an *a, abort_sum *s)
{
    memset(s, 0, sizeof *s);
    s->waited_s = -1;
    s->ranks = xmalloc(sizeof(int) * (size_t)(a->ntr + 1));
    for (int i = 0; i < a->ntr; i++) {
        const ta_trace *t = a->tr[i];
        if (!t->aborted_ops || t->abort_enter == TA_NULL64) continue;
        double w = ta_wall(t, t->abort_enter);
        if (!s->n || w < s->first_wall) {
            s->first_wall = w;
            s->first = t;
        }
        s->ranks[s->n++] = t->rank;
        s->released += t->aborted_ops;
        s->after += t->after_abort;
        if (t->aborted_oldest != TA_NULL64) {
            double d = (double)(t->abort_enter - t->aborted_oldest) / 1e9;
            if (d > s->waited_s) s->waited_s = d;
        }
    }
    if (!s->n) free(s->ranks);
    return s->n;
}

char *ta_abort_text(const ta_an *a)
{
    abort_sum s;
    if (!summarize(a, &s)) return NULL;
    char wall[48], when[52] = "";
    ta_wall_text(s.first, s.first->abort_enter, wall, sizeof wall);
    if (wall[0]) snprintf(when, sizeof when, " at%s", wall);
    char waited[64] = "";
    if (s.waited_s >= 0) snprintf(waited, sizeof waited, ", %.1f s after the oldest of them was enqueued", s.waited_s);
    char after[96] = "";
    if (s.after)
        snprintf(after, sizeof after, "; the %lld call%s issued after the abort %s left out", (long long)s.after,
                 s.after > 1 ? "s" : "", s.after > 1 ? "are" : "is");
    char *r = ta_ranks_text(s.ranks, s.n);
    char *out = xasprintf("the job was ended by ncclCommAbort (what PyTorch's watchdog does when a collective "
                          "times out): rank%s %s aborted %s communicators%s%s; the %lld operation%s the abort "
                          "released had not completed and %s counted as still waiting%s",
                          s.n > 1 ? "s" : "", r, s.n > 1 ? "their" : "its", when, waited, (long long)s.released,
                          s.released > 1 ? "s" : "", s.released > 1 ? "are" : "is", after);
    free(r);
    free(s.ranks);
    return out;
}

void ta_abort_json(ta_jw *w, const ta_an *a)
{
    abort_sum s;
    jw_key(w, "aborted");
    if (!summarize(a, &s)) {
        fputs("null", w->o);
        return;
    }
    jw_open(w, '{');
    jw_ints(w, "ranks", s.ranks, s.n);
    jw_dbl(w, "time", s.first_wall);
    jw_int(w, "released", s.released);
    jw_int(w, "after_abort", s.after);
    jw_dbl(w, "waited_s", s.waited_s);
    char *text = ta_abort_text(a);
    jw_str(w, "message", text);
    free(text);
    jw_close(w, '}');
    free(s.ranks);
}
