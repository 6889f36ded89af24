/* Kind dead: a rank that died outside the hang. A process killed without
 * a final write (SIGKILL, the OOM killer, a node failure: its ring's last
 * word) or by a fatal signal of its own (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT) is always a finding. Where the hang analysis already explains
 * it (the rank is a culprit of a root finding, whose message says how it
 * ended and what it did last) or it was waiting in the hang (a victim),
 * there is nothing more to say; otherwise this finding names it: when it
 * died, by its own clock, and its last NCCL call. A request to stop from
 * outside (SIGTERM, SIGINT, SIGHUP: launchers and schedulers end jobs so)
 * is not a death of the rank's own; such ranks are listed as stopped after
 * the dead one when they were. A rank that exited (any exit path that
 * wrote its trace) is not dead. The kind's detector and writers. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "site/ta_site.h"
#include "ta_crash_out.h"
#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_tx.h"

/* ended by a stop request from outside (not a death of its own) */
static int stop_request(int sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP; }

static int died(const ta_trace *t)
{
    return t->end_state == END_KILLED || (t->end_state == END_SIGNAL && !stop_request(t->end_signal));
}

/* when t died, as wall time (its own clock put on the wall by its start
 * stamps): the ring's last sign of life for a kill, its final write for a
 * signal; < 0 unknown */
static double death_wall(const ta_trace *t)
{
    if (t->end_state == END_KILLED) return t->heartbeat_ns != TA_NULL64 ? ta_wall(t, t->heartbeat_ns) : -1;
    return t->write_time > 0 ? t->write_time : -1;
}

static double job_start(const ta_an *a)
{
    double s = -1;
    for (int i = 0; i < a->ntr; i++)
        if (a->tr[i]->start_time > 0 && (s < 0 || a->tr[i]->start_time < s)) s = a->tr[i]->start_time;
    return s;
}

static int culprit_of_root(const ta_an *a, int rank)
{
    for (int i = 0; i < a->nf; i++) {
        if (!a->f[i].root) continue;
        for (int k = 0; k < a->f[i].culprit.nranks; k++)
            if (a->f[i].culprit.ranks[k] == rank) return 1;
    }
    return 0;
}

void ta_detect_dead(ta_an *a, int look)
{
    if (look != TA_LOOK_FINDINGS) return;
    int hung = 0;
    for (int i = 0; i < a->nf && !hung; i++) hung = a->f[i].root;
    /* a victim of the hang waits in it; where nothing hung, a rank seen inside a call the others
     * completed (killed before its poller looked) waited for nothing */
    int *dead = xmalloc(sizeof(int) * ((size_t)a->ntr + 1)), nd = 0;
    for (int t = 0; t < a->ntr; t++)
        if (died(a->tr[t]) && !(hung && a->stuck && a->stuck[t]) && !culprit_of_root(a, a->tr[t]->rank)) dead[nd++] = t;
    if (!nd) {
        free(dead);
        return;
    }
    /* the first to die; the others dead as well, and those stopped from outside after it */
    int first = dead[0];
    for (int k = 1; k < nd; k++) {
        double w = death_wall(a->tr[dead[k]]), w0 = death_wall(a->tr[first]);
        if (w >= 0 && (w0 < 0 || w < w0)) first = dead[k];
    }
    const ta_trace *t = a->tr[first];
    double at = death_wall(t), start = job_start(a);
    int *cr = xmalloc(sizeof(int) * ((size_t)nd + 1)), ncr = 0;
    int *stopped = xmalloc(sizeof(int) * ((size_t)a->ntr + 1)), nst = 0;
    int *exited = xmalloc(sizeof(int) * ((size_t)a->ntr + 1)), nex = 0;
    cr[ncr++] = t->rank;
    for (int k = 0; k < nd; k++)
        if (dead[k] != first) cr[ncr++] = a->tr[dead[k]]->rank;
    for (int i = 0; i < a->ntr; i++) {
        const ta_trace *u = a->tr[i];
        if (u->end_state == END_SIGNAL && stop_request(u->end_signal) && !(hung && a->stuck && a->stuck[i]))
            stopped[nst++] = u->rank;
        else if (u->end_state == END_EXITED)
            exited[nex++] = u->rank;
    }
    ta_ints_sort(cr + 1, ncr - 1);
    char *also = ncr > 1 ? ta_ranks_text(cr + 1, ncr - 1) : NULL;   /* before the culprits are sorted */
    ta_ints_sort(cr, ncr);
    ta_finding *f = ta_finding_new(a, K_DEAD);
    int64_t lc = -1;
    ta_last_call(t, &lc);
    ta_side_set(&f->culprit, cr, ncr, first, lc);
    int *o = xmalloc(sizeof(int) * ((size_t)a->ntr + 1)), no = 0;
    for (int i = 0; i < a->ntr; i++) {
        int is_dead = 0;
        for (int k = 0; k < ncr && !is_dead; k++) is_dead = cr[k] == a->tr[i]->rank;
        if (!is_dead) o[no++] = a->tr[i]->rank;
    }
    ta_side_set(&f->other, o, no, -1, -1);
    free(o);
    if (lc >= 0) {
        const ta_call *c = &t->calls[lc];
        f->g = c->comm >= 0 ? t->comms[c->comm].g : -1;
        f->seq = f->g >= 0 && c->seq ? (int64_t)c->seq : -1;
        f->culprit.stack = c->stack;
        f->culprit.pystack = c->pystack;
    }
    f->t = at;
    f->root_ranks = 1;       /* as the root cause of a job where nothing hung: its ranks in the rank table */
    /* how it died, when, doing what */
    char *how = ta_crash_text(a, t);      /* crash.c: where it crashed, NULL */
    if (!how) how = ta_end_text(a, t);
    char *when = at >= 0 && start > 0 ? xasprintf(", %.1f s after the job started (%s, by its own clock)", at - start,
                                                  t->end_state == END_KILLED ? "its last sign of life"
                                                                             : "its final write")
                                      : xstrdup("");
    char *last;
    if (lc >= 0) {
        char *c = ta_call_text(a, t, lc), *s = ta_call_site_text(a, t, lc);
        last = xasprintf("its last NCCL call was %s at %s%s", c, s,
                         t->calls[lc].exit_ns == TA_NULL64 ? ", which had not returned" : ", and it had returned");
        free(c); free(s);
    } else {
        last = xstrdup("it made no NCCL call");
    }
    char *more = also ? xasprintf("; rank%s %s died as well", ncr > 2 ? "s" : "", also) : xstrdup("");
    free(also);
    char *after;
    if (hung) {
        after = xstrdup("; the hang above does not wait for it");
    } else if (nst) {
        char *r = ta_ranks_text(stopped, nst);
        after = xasprintf("; nothing waited for it: rank%s %s %s stopped from outside afterwards%s", nst > 1 ? "s" : "",
                          r, nst > 1 ? "were" : "was", nex ? ", the others exited" : "");
        free(r);
    } else if (nex) {
        after = xasprintf("; nothing waited for it: the other rank%s exited", nex > 1 ? "s" : "");
    } else {
        after = xstrdup("");
    }
    f->message = xasprintf("rank %d died outside any collective the others waited in%s: %s, %s%s%s", t->rank, when, how,
                           last, more, after);
    f->hint = xstrdup("a rank that dies while the others finish leaves its work undone (a lost checkpoint shard, "
                      "an evaluation that never ran): see why it died (the kernel log for the OOM killer: "
                      "dmesg | grep -i 'killed process'; the launcher's or scheduler's log), and make the job "
                      "fail when a rank dies (torchrun's --max-restarts, a health check)");
    free(how); free(when); free(last); free(more); free(after);
    free(cr); free(stopped); free(exited); free(dead);
}

/* --json: how and when it died */
void ta_json_dead(ta_jw *w, ta_an *a, const ta_finding *f)
{
    const ta_trace *t = f->culprit.trace >= 0 ? a->tr[f->culprit.trace] : NULL;
    jw_key(w, "died");
    if (!t) {
        fputs("null", w->o);
        return;
    }
    double at = death_wall(t), start = job_start(a);
    jw_open(w, '{');
    jw_str(w, "state", t->end_state == END_KILLED ? "killed" : "signal");
    jw_intn(w, "signal", t->end_signal, t->end_state != END_SIGNAL || t->end_signal <= 0);
    jw_str(w, "signal_name", t->end_state == END_SIGNAL ? ta_signame(t->end_signal) : NULL);
    jw_key(w, "after_start_s");
    if (at >= 0 && start > 0) fprintf(w->o, "%.3f", at - start);
    else fputs("null", w->o);
    jw_str(w, "clock", t->end_state == END_KILLED ? "last_sign_of_life" : "final_write");
    jw_bool(w, "in_call", t->end_in_call);
    jw_close(w, '}');
}

/* text: its last call */
void ta_text_dead(ta_tx *x, const ta_finding *f)
{
    ta_tx_head(x, f, "");
    ta_tx_side(x, &f->culprit, " (last call)");
}
