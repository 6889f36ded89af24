/* Operations a communicator's abort released (load layer). ncclCommAbort
 * (PyTorch's watchdog calls it when a collective times out) makes a hung
 * operation's kernels exit, so its completion event fires although the
 * operation never completed. The shim records those as "aborted" (gpu
 * TRR_GPU_ABORTED: seen pending after the abort began); a trace of an
 * older shim has them "done" at or after its communicator's Abort began,
 * which is the same rule applied to what it has. Either way they are
 * pending here: the job gets the root cause it would have without the
 * abort.
 *
 * The abort also lets the rank's own threads go on: a host call that waited
 * for a released operation (a synchronize) returns, and the rank issues
 * calls it would never have reached (PyTorch waits some seconds before it
 * aborts the process). Those calls, entered after the rank's first abort
 * that released something, are left out when the process then died (a
 * signal, a kill): the job as it was when the abort came. A process that
 * went on and exited (it recovered) keeps them. */
#include <string.h>

#include "ta_load.h"

static int abort_end(const ta_comm *m)
{
    return (!strcmp(m->end_kind, "Abort") || !strcmp(m->end_kind, "Revoke")) && m->end_enter != TA_NULL64;
}

/* The calls from the first one entered after the abort began to the end
 * are cut (calls are in the order they were entered). */
static void after_abort_cut(ta_trace *t)
{
    int64_t keep = t->ncalls;
    while (keep > 0 && t->calls[keep - 1].enter_ns != TA_NULL64 && t->calls[keep - 1].enter_ns >= t->abort_enter)
        keep--;
    if (keep == t->ncalls) return;
    t->after_abort = t->ncalls - keep;
    int64_t w = 0;
    for (int64_t k = 0; k < t->ncallx; k++)
        if (t->callx[k].call < keep) t->callx[w++] = t->callx[k];
    t->ncallx = w;
    w = 0;
    for (int64_t k = 0; k < t->nchecks; k++)
        if ((int64_t)t->checks[k].call < keep) t->checks[w++] = t->checks[k];
    t->nchecks = w;
    t->ncalls = keep;
    ta_first_seqs(t);
}

void ta_aborts_resolve(ta_trace *t)
{
    t->aborted_ops = 0;
    t->abort_enter = t->aborted_oldest = TA_NULL64;
    t->after_abort = 0;
    for (int i = 0; i < t->ncomms; i++)
        if (abort_end(&t->comms[i]) && (t->abort_enter == TA_NULL64 || t->comms[i].end_enter < t->abort_enter))
            t->abort_enter = t->comms[i].end_enter;
    for (int64_t i = 0; i < t->ncalls; i++) {
        ta_call *c = &t->calls[i];
        const ta_comm *m = c->comm >= 0 && c->comm < t->ncomms ? &t->comms[c->comm] : NULL;
        int released = c->gpu == GPU_ABORTED ||
                       (c->gpu == GPU_DONE && m && abort_end(m) && c->done_ns != TA_NULL64 && c->done_ns >= m->end_enter);
        if (!released) continue;
        c->gpu = GPU_PENDING;
        c->done_ns = TA_NULL64;
        t->aborted_ops++;
        int64_t q = c->exit_ns != TA_NULL64 ? c->exit_ns : c->enter_ns;
        if (t->aborted_oldest == TA_NULL64 || q < t->aborted_oldest) t->aborted_oldest = q;
    }
    /* (released without an abort of a communicator: an async error, a fatal signal: nothing to cut after) */
    if (t->aborted_ops && t->abort_enter != TA_NULL64 && (t->end_state == END_SIGNAL || t->end_state == END_KILLED))
        after_abort_cut(t);
}
