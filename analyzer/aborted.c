/* Operations a communicator's abort released (load layer). ncclCommAbort
 * (PyTorch's watchdog calls it when a collective times out) makes a hung
 * operation's kernels exit, so its completion event fires although the
 * operation never completed. The shim records those as "aborted" (gpu
 * TRR_GPU_ABORTED: seen pending after the abort began); a trace of an
 * older shim has them "done" at or after its communicator's Abort began,
 * which is the same rule applied to what it has. Either way they are
 * pending here: the job gets the root cause it would have without the
 * abort. */
#include <string.h>

#include "ta_load.h"

static int abort_end(const ta_comm *m)
{
    return (!strcmp(m->end_kind, "Abort") || !strcmp(m->end_kind, "Revoke")) && m->end_enter != TA_NULL64;
}

void ta_aborts_resolve(ta_trace *t)
{
    t->aborted_ops = 0;
    t->abort_enter = t->aborted_oldest = TA_NULL64;
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
}
