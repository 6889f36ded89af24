/* The kinds only the hang analysis (rootcause.c) finds: missing (a rank
 * that never issued the call the others wait in), init (an initialisation
 * some members never joined), signal (a WaitSignal whose signal never
 * came), no_trace (ranks without a trace; made here, called by the hang
 * analysis). Their writers. */
#include <stdlib.h>
#include <string.h>

#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_seq.h"
#include "ta_site.h"
#include "ta_tx.h"

/* Ranks below the world size without a trace: a root cause when the others
 * were stopped by a signal (they may be waiting for them). */
void ta_findings_no_trace(ta_an *a)
{
    /* ranks without a trace */
    if (a->nmissing) {
        ta_finding *f = ta_finding_new(a, K_NO_TRACE);
        ta_side_set(&f->culprit, a->missing_ranks, a->nmissing, -1, -1);
        int *o = xmalloc(sizeof(int) * (size_t)(a->ntr + 1));
        int killed = 0;
        for (int t = 0; t < a->ntr; t++) {
            o[t] = a->tr[t]->rank;
            killed += a->tr[t]->end_state != END_EXITED;
        }
        ta_side_set(&f->other, o, a->ntr, -1, -1);
        free(o);
        /* the communicator with an empty place where the others stopped */
        int bestg = -1;
        uint32_t bests = 0;
        for (int g = 0; g < a->ngc; g++) {
            int empty = 0;
            for (int p = 0; p < a->gc[g].npos; p++) empty += a->gc[g].member[p] < 0;
            if (!empty) continue;
            if (bestg < 0 || a->gc[g].npos > a->gc[bestg].npos) { bestg = g; bests = a->gc[g].maxseq; }
        }
        f->g = bestg;
        f->seq = bestg >= 0 ? (int64_t)bests : -1;
        char *m = ta_ranks_text(a->missing_ranks, a->nmissing);
        if (a->missing_unlisted) {
            char *m2 = xasprintf("%s and %d more", m, a->missing_unlisted);
            free(m);
            m = m2;
        }
        /* ranks whose trace write failed (the shim's marker) are not ranks killed before any write */
        int *wf = xmalloc(sizeof(int) * ((size_t)a->nmissing + 1)), nwf = 0;
        const char *err = NULL;
        int one_err = 1;
        for (int i = 0; i < a->nmissing; i++) {
            int k = a->missing_wfail ? a->missing_wfail[i] : -1;
            if (k < 0) continue;
            wf[nwf++] = a->missing_ranks[i];
            if (!err) err = a->wfail[k].error;
            else one_err &= !strcmp(err, a->wfail[k].error);
        }
        char *why = xstrdup("");
        if (nwf) {
            char *w = ta_ranks_text(wf, nwf);
            free(why);
            why = nwf == a->nmissing && !a->missing_unlisted
                      ? xasprintf(" (%s trace write failed: %s)", nwf > 1 ? "their" : "its", one_err ? err : "see the markers")
                      : xasprintf(" (the trace write of rank%s %s failed: %s)", nwf > 1 ? "s" : "", w,
                                  one_err ? err : "see the markers");
            free(w);
        }
        if (killed && bestg >= 0) {
            int64_t ci = -1;
            int rt = -1;
            for (int p = 0; p < a->gc[bestg].npos && ci < 0; p++)
                if (a->gc[bestg].member[p] >= 0) { rt = a->gc[bestg].member[p]; ci = ta_call_at(a, rt, bestg, bests); }
            f->other.trace = rt;
            f->other.call = ci;
            char *c = ci >= 0 ? ta_call_text_replay(a, a->tr[rt], ci) : xstrdup("their last collective");
            f->message = xasprintf("rank%s %s left no trace%s; the other ranks were stopped by a signal and the last "
                                   "collective they issued on the communicator %s to is %s, which may be "
                                   "waiting for %s",
                                   a->nmissing > 1 ? "s" : "", m, why, a->nmissing > 1 ? "they belong" : "it belongs", c,
                                   a->nmissing > 1 ? "them" : "it");
            free(c);
            f->root = 1;
        } else {
            f->message = xasprintf("rank%s %s of %d left no trace%s", a->nmissing > 1 || a->missing_unlisted ? "s" : "",
                                   m, a->world, why);
        }
        static const char killed_hint[] = "a rank without a trace was killed before the shim could write (SIGKILL, OOM "
                                          "killer, node failure) or did not run with the shim; look at its log and at "
                                          "the launcher's report";
        static const char wf_hint[] = "the shim could not write the trace (its marker trshim.*.write-failed says why): "
                                      "free space where the traces are written (TRSHIM_DIR) or point TRSHIM_DIR at a "
                                      "filesystem with room";
        if (!nwf) f->hint = xstrdup(killed_hint);
        else if (nwf == a->nmissing && !a->missing_unlisted) f->hint = xasprintf("%s", wf_hint);
        else f->hint = xasprintf("%s; the other ranks without a trace were killed before the shim could write (SIGKILL, "
                                 "OOM killer, node failure) or did not run with the shim: look at their logs and at the "
                                 "launcher's report", wf_hint);
        free(wf);
        free(why);
        free(m);
    }
}

/* text: the culprit's last call, the call the others wait in */
void ta_text_missing(ta_tx *x, const ta_finding *f)
{
    ta_tx_head(x, f, NULL);
    ta_tx_side(x, &f->culprit, " (last call)");
    ta_tx_side(x, &f->other, " (waiting in)");
}

void ta_text_init(ta_tx *x, const ta_finding *f) { ta_tx_head(x, f, "initialisation"); }

/* --json: the wait's signal number, and what the sender sent to the waiter */
void ta_json_signal(ta_jw *w, ta_an *a, const ta_finding *f)
{
    (void)a;
    jw_key(w, "signal");
    jw_open(w, '{');
    jw_int(w, "waited", f->seq);
    jw_intn(w, "sent", f->sig_sent, f->sig_sent < 0);
    jw_close(w, '}');
}

/* text: "signal #seq" in the heading; the sender's signal (or last call), the waiter's wait */
void ta_text_signal(ta_tx *x, const ta_finding *f)
{
    char *at = xasprintf("signal #%lld", (long long)f->seq);
    ta_tx_head(x, f, at);
    free(at);
    int queued = !strcmp(f->subkind, "not_run");
    ta_tx_side(x, &f->culprit, queued ? " (the signal, queued)" : f->sig_sent > 0 ?
               " (its last signal to the waiter)" : " (last call)");
    ta_tx_side(x, &f->other, " (waiting in)");
}
