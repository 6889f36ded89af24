/* What each member of a communicator did at the collective a hang stopped
 * on: issued it and is blocked inside it, never issued it, completed it, or
 * unknown (no trace; older than the rank's ring window; a GPU error).
 *
 * Facts first: a call the GPU completed (gpu done) is completed; one the GPU
 * had not completed at the trace's last sign of life (gpu pending), or whose
 * host call had not returned, is blocked inside, with how long it had been
 * pending. Without completion data (an older shim, a capturing stream) a
 * member that issued the collective and that the replay left waiting in it
 * is blocked inside too, without a duration. A member with no record of the
 * seq never issued it, unless the seq is older than what its ring still
 * holds (then unknown: it issued it long ago). */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "model/ta_model.h"
#include "ta_finding.h"

const char *const ta_mstate_names[MS_N] = {"blocked_inside", "never_issued", "completed", "unknown", "suspended"};

int ta_call_waiting(const ta_trace *t, const ta_call *c)
{
    if (!(ta_op_is_coll(c->op) || ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) || c->seq == 0) return 0;
    /* a communicator suspended since: NCCL suspends it idle, and nobody looks at its events any more */
    if (c->comm >= 0 && ta_comm_suspended(t, c->comm)) return 0;
    return c->gpu == GPU_PENDING || (c->exit_ns == TA_NULL64 && c->gpu != GPU_DONE);
}

/* enqueued when the host call returned (the shim records its event then); the
 * trace's last sign of life is its write, or the ring's heartbeat when the
 * calls come from the ring of a process that died without a write */
double ta_pending_s(const ta_trace *t, const ta_call *c)
{
    int64_t enq = c->exit_ns != TA_NULL64 ? c->exit_ns : c->enter_ns;
    double last = t->write_time;
    if (t->from_ring && t->heartbeat_ns != TA_NULL64 && t->heartbeat_ns > 0) {
        double hb = ta_wall(t, t->heartbeat_ns);
        if (hb > last) last = hb;
    }
    double d = last - ta_wall(t, enq);
    return d > 0 ? d : 0;
}

void ta_members_at(ta_an *a, ta_finding *f, int g, uint32_t seq, uint8_t **stuck_calls)
{
    if (g < 0 || g >= a->ngc || seq == 0) return;
    const ta_gcomm *n = &a->gc[g];
    free(f->mem);
    f->mem = xcalloc((size_t)n->npos + 1, sizeof *f->mem);
    f->nmem = n->npos;
    f->at_g = g;
    f->at_seq = seq;
    for (int p = 0; p < n->npos; p++) {
        ta_member *m = &f->mem[p];
        m->place = p;
        m->trace = n->member[p];
        m->rank = m->trace >= 0 ? a->tr[m->trace]->rank : -1;
        m->call = -1;
        m->pending_s = -1;
        m->state = MS_UNKNOWN;
        if (m->trace < 0) continue;
        const ta_trace *t = a->tr[m->trace];
        int64_t ci = ta_call_at(a, m->trace, g, seq);
        int susp = ta_comm_suspended(t, n->local[p]);
        if (ci < 0) {
            m->lost = ta_coll_lost(a, m->trace, g, seq);
            m->state = m->lost ? MS_UNKNOWN : susp ? MS_SUSPENDED : MS_NEVER_ISSUED;
            continue;
        }
        m->call = ci;
        const ta_call *c = &t->calls[ci];
        int pending = c->gpu == GPU_PENDING && !susp;     /* (see ta_call_waiting) */
        if (c->gpu == GPU_DONE) {
            m->state = MS_COMPLETED;
        } else if (c->gpu == GPU_ERROR) {
            m->state = MS_UNKNOWN;
        } else if (pending || ta_call_waiting(t, c) || (stuck_calls && stuck_calls[m->trace][ci])) {
            m->state = MS_BLOCKED_INSIDE;
            if (pending) m->pending_s = ta_pending_s(t, c);
        } else {
            m->state = MS_COMPLETED;      /* the replay completed it */
        }
    }
}
