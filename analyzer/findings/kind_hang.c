/* The kinds only the hang analysis (rootcause.c) finds: missing (a rank
 * that never issued the call the others wait in), init (an initialisation
 * some members never joined), signal (a WaitSignal whose signal never
 * came), no_trace (ranks without a trace; made here, called by the hang
 * analysis). Their writers. */
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_tx.h"

/* the ranks whose trace file is cut short (truncated, empty): one, "its trace is truncated at 1880
 * bytes" (all: every rank without a trace is one) or "the trace of rank 3 is truncated at 1880
 * bytes"; several, "their traces are truncated: rank 3's at 1880 bytes, rank 5's empty" or "the
 * traces of ranks 3, 5 are truncated: ..." (4 named at most) */
static char *cut_text(const ta_an *a, int all)
{
    int n = 0, *r = xmalloc(sizeof(int) * ((size_t)a->nmissing + 1));
    for (int i = 0; i < a->nmissing; i++)
        if (a->missing_cut[i] >= 0 && !(a->missing_wfail && a->missing_wfail[i] >= 0)) r[n++] = a->missing_ranks[i];
    char *rt = ta_ranks_text(r, n), *s;
    if (n == 1) {
        int64_t b = 0;
        for (int i = 0; i < a->nmissing; i++)
            if (a->missing_ranks[i] == r[0]) b = a->notes[a->missing_cut[i]].cut;
        char *what = b > 0 ? xasprintf("is truncated at %lld bytes", (long long)b) : xstrdup("is empty (0 bytes)");
        s = all ? xasprintf("its trace %s", what) : xasprintf("the trace of rank %d %s", r[0], what);
        free(what);
    } else {
        s = all ? xstrdup("their traces are truncated: ") : xasprintf("the traces of ranks %s are truncated: ", rt);
        for (int i = 0, k = 0; i < a->nmissing && k < 4; i++) {
            if (a->missing_cut[i] < 0 || (a->missing_wfail && a->missing_wfail[i] >= 0)) continue;
            int64_t b = a->notes[a->missing_cut[i]].cut;
            char *one = b > 0 ? xasprintf("%srank %d's at %lld bytes", k ? ", " : "", a->missing_ranks[i], (long long)b)
                              : xasprintf("%srank %d's empty", k ? ", " : "", a->missing_ranks[i]);
            char *s2 = xasprintf("%s%s", s, one);
            free(s); free(one);
            s = s2;
            k++;
        }
        if (n > 4) {
            char *s2 = xasprintf("%s, ... and %d more", s, n - 4);
            free(s);
            s = s2;
        }
    }
    free(rt);
    free(r);
    return s;
}

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
        /* ranks whose trace write failed (the shim's marker) and ranks whose trace file is cut short are not
         * ranks killed before any write */
        int *wf = xmalloc(sizeof(int) * ((size_t)a->nmissing + 1)), nwf = 0, ncut = 0;
        const char *err = NULL;
        int one_err = 1;
        for (int i = 0; i < a->nmissing; i++) {
            int k = a->missing_wfail ? a->missing_wfail[i] : -1;
            if (k < 0) {
                ncut += a->missing_cut && a->missing_cut[i] >= 0;
                continue;
            }
            wf[nwf++] = a->missing_ranks[i];
            if (!err) err = a->wfail[k].error;
            else one_err &= !strcmp(err, a->wfail[k].error);
        }
        int all = !a->missing_unlisted;     /* every rank without a trace is listed */
        char *why = xstrdup("");
        if (nwf) {
            char *w = ta_ranks_text(wf, nwf);
            free(why);
            why = nwf == a->nmissing && all
                      ? xasprintf("%s trace write failed: %s", nwf > 1 ? "their" : "its", one_err ? err : "see the markers")
                      : xasprintf("the trace write of rank%s %s failed: %s", nwf > 1 ? "s" : "", w,
                                  one_err ? err : "see the markers");
            free(w);
        }
        if (ncut) {
            char *c = cut_text(a, ncut == a->nmissing && all);
            char *w2 = xasprintf("%s%s%s", why, nwf ? "; " : "", c);
            free(why); free(c);
            why = w2;
        }
        if (*why) {
            char *w2 = xasprintf(" (%s)", why);
            free(why);
            why = w2;
        }
        const char *usable = ncut ? "usable " : "";
        if (killed && bestg >= 0) {
            int64_t ci = -1;
            int rt = -1;
            for (int p = 0; p < a->gc[bestg].npos && ci < 0; p++)
                if (a->gc[bestg].member[p] >= 0) { rt = a->gc[bestg].member[p]; ci = ta_call_at(a, rt, bestg, bests); }
            f->other.trace = rt;
            f->other.call = ci;
            char *c = ci >= 0 ? ta_call_text_replay(a, a->tr[rt], ci) : xstrdup("their last collective");
            f->message = xasprintf("rank%s %s left no %strace%s; the other ranks were stopped by a signal and the last "
                                   "collective they issued on the communicator %s to is %s, which may be "
                                   "waiting for %s",
                                   a->nmissing > 1 ? "s" : "", m, usable, why,
                                   a->nmissing > 1 ? "they belong" : "it belongs", c, a->nmissing > 1 ? "them" : "it");
            free(c);
            f->root = 1;
        } else {
            f->message = xasprintf("rank%s %s of %d left no %strace%s", a->nmissing > 1 || a->missing_unlisted ? "s" : "",
                                   m, a->world, usable, why);
        }
        static const char killed_hint[] = "a rank without a trace was killed before the shim could write (SIGKILL, OOM "
                                          "killer, node failure) or did not run with the shim; look at its log and at "
                                          "the launcher's report";
        static const char wf_hint[] = "the shim could not write the trace (its marker trshim.*.write-failed says why): "
                                      "free space where the traces are written (TRSHIM_DIR) or point TRSHIM_DIR at a "
                                      "filesystem with room";
        static const char cut_hint[] = "the shim writes each trace whole under a temporary name and renames it in "
                                       "place, so a truncated trace was cut afterwards: by a copy that was interrupted "
                                       "or ran out of room (scp, rsync, a full disk where it was copied to) or by a damaged "
                                       "filesystem; copy it again from where the job wrote it (TRSHIM_DIR)";
        int other = a->nmissing - nwf - ncut + a->missing_unlisted;     /* ranks that left nothing */
        char *h = xstrdup("");
        if (nwf) { free(h); h = xstrdup(wf_hint); }
        if (ncut) {
            char *h2 = xasprintf("%s%s%s", h, nwf ? "; " : "", cut_hint);
            free(h); h = h2;
        }
        if (!*h) { free(h); h = xstrdup(killed_hint); }
        else if (other) {
            char *h2 = xasprintf("%s; the other ranks without a trace were killed before the shim could write (SIGKILL, "
                                 "OOM killer, node failure) or did not run with the shim: look at their logs and at the "
                                 "launcher's report", h);
            free(h); h = h2;
        }
        f->hint = h;
        free(wf);
        free(why);
        free(m);
    }
}

/* text: the culprit's last call, the call the others wait in */
void ta_text_missing(ta_tx *x, const ta_finding *f)
{
    ta_tx_head_sides(x, f, NULL);
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
    ta_tx_head_sides(x, f, at);
    free(at);
    int queued = f->subkind == SK_NOT_RUN;
    ta_tx_side(x, &f->culprit, queued ? " (the signal, queued)" : f->sig_sent > 0 ?
               " (its last signal to the waiter)" : " (last call)");
    ta_tx_side(x, &f->other, " (waiting in)");
}
