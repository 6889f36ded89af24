/* Simulated NCCL operations: collectives (plain and *Config), send/recv,
 * one-sided puts, signals and waits, and group calls.
 *
 * An operation is validated when it is called and numbered when it is
 * launched: at once outside a group, at the outermost ncclGroupEnd inside
 * one, in call order either way (NCCL matches operations across ranks by call
 * order; a group dropped by ncclGroupSimulateEnd or failed by an invalid
 * call numbers nothing). It then runs on its stream's worker as a
 * non-blocking state machine. Each collective is a series of steps over the
 * communicator's segment (see nccl_internal.h); send/recv move chunks through
 * the pair's channel; a put copies into the peer's window (mapped in this
 * process, nccl_win.c) and then counts a signal in the segment, which a wait
 * watches. A group becomes one task per stream that advances all of its
 * operations together, so send/recv pairs inside a group cannot deadlock. An
 * operation whose peers never arrive never finishes: its stream stays
 * pending, exactly like a hung NCCL kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl_internal.h"

enum op_kind {
    OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_ALLGATHER, OP_REDUCESCATTER,
    OP_ALLTOALL, OP_GATHER, OP_SCATTER, OP_SEND, OP_RECV,
    OP_PUTSIGNAL, OP_SIGNAL, OP_WAITSIGNAL,
};

static const char *const op_names[] = {
    "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
    "AlltoAll", "Gather", "Scatter", "Send", "Recv",
    "PutSignal", "Signal", "WaitSignal",
};

#define IS_COLL(kind) ((kind) < OP_SEND)
#define IS_P2P(kind) ((kind) == OP_SEND || (kind) == OP_RECV)

/* One descriptor of a ncclWaitSignal: count more signals from peer on slot,
 * that is until the peer's counter reaches target. */
struct wait_desc {
    int peer, slot;
    uint64_t count, target;
};

typedef struct {
    enum op_kind kind;
    struct ncclComm *comm;
    trsim_stream *stream;
    const unsigned char *sendbuff;
    unsigned char *recvbuff;
    size_t count;              /* the count argument as the caller gave it */
    int datatype;
    size_t elsize;
    trsim_redop redop;
    const void *dev_scalar;    /* PreMulSum scalar read when the op runs */
    int root;                  /* root, or peer for send/recv; -1 if none */
    uint64_t seq;              /* collective number, or message number per peer */
    /* collectives: the contribution is nblocks blocks of block_count
     * elements; each step carries `chunk` elements of every block */
    int nblocks;
    int contributes;
    size_t block_count, chunk;
    uint64_t step_base, nsteps, steps_done;
    int posted;                /* this step's contribution is published */
    int peers_ready;           /* peers 0..peers_ready-1 seen ready for this phase */
    /* send/recv */
    size_t bytes, bytes_done;
    int awaiting_ack;
    /* one-sided (root is the peer of a put or signal) */
    int slot;                  /* ctx * TRSIM_RMA_SIGS + sigIdx */
    unsigned char *put_dst;    /* where the put lands: the peer's window, mapped here */
    struct ncclWindow_vidmem *win;  /* held until the op is freed */
    int ndesc;
    struct wait_desc *descs;
    /* ncclCollConfig_t's launchCompletionEvent, recorded when launched */
    cudaEvent_t launch_event;
    /* bookkeeping */
    int finished, warned;
    double started, last_liveness_check;
} trsim_op;

typedef struct {
    trsim_task task;
    int nops, nfinished;
    trsim_op **ops;
} group_task;

/* ---- per-thread group state ---------------------------------------------- */

static _Thread_local struct {
    int depth;
    ncclResult_t error;
    trsim_op **ops;
    int nops, cap;
    struct ncclComm **inits;
    int ninits, inits_cap;
    struct trsim_split **splits;
    int nsplits, splits_cap;
} group;

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 1;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return 0;
    *arr = p;
    *cap = ncap;
    return 1;
}

int trsim_group_depth(void) { return group.depth; }

void trsim_group_defer_init(struct ncclComm *comm)
{
    if (grow((void **)&group.inits, &group.inits_cap, group.ninits + 1, sizeof *group.inits))
        group.inits[group.ninits++] = comm;
    else if (group.error == ncclSuccess)
        group.error = ncclSystemError;
}

void trsim_group_defer_split(struct trsim_split *job)
{
    if (grow((void **)&group.splits, &group.splits_cap, group.nsplits + 1, sizeof *group.splits))
        group.splits[group.nsplits++] = job;
    else if (group.error == ncclSuccess)
        group.error = ncclSystemError;
}

/* ---- collectives: one step at a time ---------------------------------------- */

static void op_signature(const trsim_op *op, uint64_t step, uint64_t sig[4])
{
    sig[0] = step;
    sig[1] = (uint64_t)op->kind | (uint64_t)op->datatype << 8 | (uint64_t)op->redop.op << 16 |
             (uint64_t)op->redop.premul << 24;
    sig[2] = op->count;
    sig[3] = (uint64_t)(int64_t)op->root;
}

static void mismatch_warning(trsim_op *op, int peer)
{
    /* Polled while the mismatch lasts: look at the environment only once. */
    if (op->warned) return;
    op->warned = 1;
    if (!getenv("TRSIM_DEBUG")) return;
    trsim_warn("rank %d: %s #%llu does not match what rank %d issued at the same point; "
               "waiting forever like NCCL would", op->comm->rank, op_names[op->kind],
               (unsigned long long)op->seq, peer);
}

static void coll_output(trsim_op *op, size_t off, size_t len)
{
    const trsim_shm *shm = &op->comm->shm;
    int n = op->comm->nranks, me = op->comm->rank;
    size_t es = op->elsize, chunk_bytes = op->chunk * es;
    const void *srcs[TRSIM_MAX_RANKS];
    switch (op->kind) {
    case OP_ALLREDUCE:
    case OP_REDUCE:
    case OP_REDUCESCATTER: {
        if (op->kind == OP_REDUCE && me != op->root) return;
        size_t block = op->kind == OP_REDUCESCATTER ? (size_t)me : 0;
        for (int q = 0; q < n; q++) srcs[q] = trsim_shm_coll_slot(shm, q) + block * chunk_bytes;
        trsim_reduce(op->recvbuff + off * es, srcs, n, len, op->datatype, op->redop);
        return;
    }
    case OP_BROADCAST:
        memcpy(op->recvbuff + off * es, trsim_shm_coll_slot(shm, op->root), len * es);
        return;
    case OP_SCATTER:
        memcpy(op->recvbuff + off * es, trsim_shm_coll_slot(shm, op->root) + (size_t)me * chunk_bytes,
               len * es);
        return;
    case OP_GATHER:
        if (me != op->root) return;
        /* fall through */
    case OP_ALLGATHER:
    case OP_ALLTOALL: {
        size_t block = op->kind == OP_ALLTOALL ? (size_t)me : 0;
        for (int q = 0; q < n; q++)
            memcpy(op->recvbuff + ((size_t)q * op->count + off) * es,
                   trsim_shm_coll_slot(shm, q) + block * chunk_bytes, len * es);
        return;
    }
    default:
        return;
    }
}

static int coll_progress(trsim_op *op)
{
    struct ncclComm *comm = op->comm;
    trsim_shm *shm = &comm->shm;
    int n = comm->nranks, me = comm->rank;
    trsim_shm_rank *mine = &shm->ranks[me];
    while (op->steps_done < op->nsteps) {
        uint64_t t = op->step_base + op->steps_done + 1;
        size_t off = (size_t)op->steps_done * op->chunk;
        size_t len = op->block_count - off < op->chunk ? op->block_count - off : op->chunk;
        uint64_t sig[4];
        op_signature(op, t, sig);
        if (!op->posted) {
            /* My slot still holds step t-1 until every peer has read it. A
             * peer's counter only grows, so those seen ready stay ready. */
            for (; op->peers_ready < n; op->peers_ready++)
                if (atomic_load_explicit(&shm->ranks[op->peers_ready].consumed, memory_order_acquire) < t - 1)
                    return 0;
            if (op->steps_done == 0 && op->dev_scalar)
                op->redop.scalar = trsim_scalar_value(op->dev_scalar, op->datatype);
            if (op->contributes) {
                unsigned char *slot = trsim_shm_coll_slot(shm, me);
                for (int b = 0; b < op->nblocks; b++)
                    memcpy(slot + (size_t)b * op->chunk * op->elsize,
                           op->sendbuff + ((size_t)b * op->block_count + off) * op->elsize, len * op->elsize);
            }
            memcpy(mine->sig, sig, sizeof sig);
            atomic_store_explicit(&mine->posted, t, memory_order_release);
            trsim_shm_ring(shm);
            op->posted = 1;
            op->peers_ready = 0;
        }
        /* A peer that posted step t cannot post again (nor change its
         * signature) before this rank consumed t: one check per peer. */
        for (; op->peers_ready < n; op->peers_ready++) {
            int q = op->peers_ready;
            if (atomic_load_explicit(&shm->ranks[q].posted, memory_order_acquire) < t) return 0;
            if (memcmp(shm->ranks[q].sig, sig, sizeof sig) != 0) {
                mismatch_warning(op, q);
                return 0;
            }
        }
        coll_output(op, off, len);
        atomic_store_explicit(&mine->consumed, t, memory_order_release);
        trsim_shm_ring(shm);
        op->posted = 0;
        op->peers_ready = 0;
        op->steps_done++;
    }
    return 1;
}

/* ---- send/recv ------------------------------------------------------------------ */

static int send_progress(trsim_op *op)
{
    struct ncclComm *comm = op->comm;
    trsim_shm *shm = &comm->shm;
    int peer = op->root;
    /* Messages to one peer leave in call order. */
    if (atomic_load(&comm->send_turn[peer]) != op->seq - 1) return 0;
    trsim_shm_chan *ch = trsim_shm_chan_at(shm, comm->rank, peer);
    unsigned char *slot = trsim_shm_p2p_slot(shm, comm->rank, peer);
    for (;;) {
        uint64_t sent = atomic_load_explicit(&ch->sent, memory_order_relaxed);
        if (atomic_load_explicit(&ch->acked, memory_order_acquire) != sent) return 0;
        if (op->awaiting_ack || op->bytes_done == op->bytes) break;
        size_t len = op->bytes - op->bytes_done;
        if (len > shm->p2p_slot_bytes) len = shm->p2p_slot_bytes;
        memcpy(slot, op->sendbuff + op->bytes_done, len);
        ch->msg = op->seq;
        ch->msg_bytes = op->bytes;
        ch->chunk_bytes = len;
        op->bytes_done += len;
        op->awaiting_ack = op->bytes_done == op->bytes;
        atomic_store_explicit(&ch->sent, sent + 1, memory_order_release);
        trsim_shm_ring(shm);
    }
    /* Like NCCL, a send completes only once the receiver has taken it. */
    atomic_fetch_add(&comm->send_turn[peer], 1);
    return 1;
}

static int recv_progress(trsim_op *op)
{
    struct ncclComm *comm = op->comm;
    trsim_shm *shm = &comm->shm;
    int peer = op->root;
    if (atomic_load(&comm->recv_turn[peer]) != op->seq - 1) return 0;
    trsim_shm_chan *ch = trsim_shm_chan_at(shm, peer, comm->rank);
    const unsigned char *slot = trsim_shm_p2p_slot(shm, peer, comm->rank);
    while (op->bytes_done < op->bytes) {
        uint64_t acked = atomic_load_explicit(&ch->acked, memory_order_relaxed);
        if (atomic_load_explicit(&ch->sent, memory_order_acquire) == acked) return 0;
        if (ch->msg != op->seq || ch->msg_bytes != op->bytes) {
            /* The peer sent something of another size: NCCL would wait for
             * bytes that never come. */
            mismatch_warning(op, peer);
            return 0;
        }
        size_t len = ch->chunk_bytes;
        if (len > op->bytes - op->bytes_done) len = op->bytes - op->bytes_done;
        memcpy(op->recvbuff + op->bytes_done, slot, len);
        op->bytes_done += len;
        atomic_store_explicit(&ch->acked, acked + 1, memory_order_release);
        trsim_shm_ring(shm);
    }
    atomic_fetch_add(&comm->recv_turn[peer], 1);
    return 1;
}

/* ---- one-sided ------------------------------------------------------------------ */

/* A put writes straight into the peer's window, then counts one signal for
 * it (release: a waiter that sees the count sees the data); a signal only
 * counts. Neither waits for the peer, as NCCL's do not. */
static int rma_send_progress(trsim_op *op)
{
    struct ncclComm *comm = op->comm;
    if (op->kind == OP_PUTSIGNAL && op->bytes) memmove(op->put_dst, op->sendbuff, op->bytes);
    atomic_fetch_add_explicit(trsim_shm_signal(&comm->shm, op->root, comm->rank, op->slot), 1,
                              memory_order_release);
    trsim_shm_ring(&comm->shm);
    return 1;
}

static int wait_progress(trsim_op *op)
{
    struct ncclComm *comm = op->comm;
    for (int i = 0; i < op->ndesc; i++) {
        const struct wait_desc *d = &op->descs[i];
        if (atomic_load_explicit(trsim_shm_signal(&comm->shm, comm->rank, d->peer, d->slot),
                                 memory_order_acquire) < d->target)
            return 0;
    }
    return 1;
}

/* ---- running a group on a stream ---------------------------------------------- */

static void op_finish(trsim_op *op)
{
    op->finished = 1;
    atomic_fetch_sub(&op->comm->inflight, 1);
    trsim_shm_ring(&op->comm->shm);
}

/* Hung operations are never finished (a GPU kernel waits forever), but a
 * dead peer is reported through ncclCommGetAsyncError, and TRSIM_TIMEOUT_SEC
 * can turn the wait into an error for tests that ask for it. */
static void check_stalled(trsim_op *op, double now)
{
    struct ncclComm *comm = op->comm;
    double timeout = trsim_timeout_sec();
    if (timeout > 0 && now - op->started > timeout) {
        trsim_comm_set_error(comm, ncclSystemError,
                             "rank %d: %s #%llu did not complete within TRSIM_TIMEOUT_SEC=%g",
                             comm->rank, op_names[op->kind], (unsigned long long)op->seq, timeout);
        op_finish(op);
        return;
    }
    if (now - op->last_liveness_check < 0.5) return;
    op->last_liveness_check = now;
    int first = op->root >= 0 && !IS_COLL(op->kind) ? op->root : 0;
    int last = op->root >= 0 && !IS_COLL(op->kind) ? op->root : comm->nranks - 1;
    for (int q = first; q <= last; q++) {
        int dead = 0;
        if (op->kind != OP_WAITSIGNAL) {
            dead = trsim_shm_rank_dead(&comm->shm, q);
        } else {
            /* a wait depends on the peers of its descriptors only */
            for (int i = 0; i < op->ndesc && !dead; i++)
                dead = op->descs[i].peer == q && trsim_shm_rank_dead(&comm->shm, q);
        }
        if (dead) {
            trsim_comm_set_error(comm, ncclRemoteError,
                                 "rank %d: peer rank %d exited while %s #%llu waited for it",
                                 comm->rank, q, op_names[op->kind], (unsigned long long)op->seq);
            return;
        }
    }
}

static trsim_task_state group_run(trsim_task *task)
{
    group_task *g = (group_task *)task;
    for (;;) {
        trsim_op *waiting = NULL;
        uint32_t seen = 0;
        int progressed = 0;
        for (int i = 0; i < g->nops; i++) {
            trsim_op *op = g->ops[i];
            if (op->finished) continue;
            if (!waiting) {
                waiting = op;
                seen = atomic_load(&op->comm->shm.hdr->doorbell);
            }
            if (op->started == 0) op->started = trsim_now();
            if (atomic_load(&op->comm->aborted)) {
                op_finish(op);   /* ncclCommAbort kills the kernel */
            } else {
                int done = op->kind == OP_SEND ? send_progress(op)
                         : op->kind == OP_RECV ? recv_progress(op)
                         : op->kind == OP_PUTSIGNAL || op->kind == OP_SIGNAL ? rma_send_progress(op)
                         : op->kind == OP_WAITSIGNAL ? wait_progress(op) : coll_progress(op);
                if (!done) continue;
                op_finish(op);
            }
            g->nfinished++;
            progressed = 1;
        }
        if (g->nfinished == g->nops) return TRSIM_TASK_DONE;
        if (progressed) continue;
        double now = trsim_now();
        for (int i = 0; i < g->nops; i++)
            if (!g->ops[i]->finished) {
                check_stalled(g->ops[i], now);
                if (g->ops[i]->finished) g->nfinished++;
            }
        if (g->nfinished == g->nops) return TRSIM_TASK_DONE;
        /* Several communicators may be involved: sleep on one doorbell but
         * only briefly, so the others' progress is seen soon. */
        trsim_shm_wait(&waiting->comm->shm, seen, g->nops > 1 ? 1000000L : 50000000L);
        return TRSIM_TASK_AGAIN;
    }
}

static void op_free(trsim_op *op)
{
    if (!op) return;
    free(op->descs);
    trsim_window_release(op->win);
    free(op);
}

static void group_destroy(trsim_task *task)
{
    group_task *g = (group_task *)task;
    for (int i = 0; i < g->nops; i++) op_free(g->ops[i]);
    free(g->ops);
    free(g);
}

/* Gives an operation its place in the call order of its communicator:
 * collectives their number and steps, messages their number per peer, waits
 * the signal counts they wait for. Done when the operation is launched. */
static void op_number(trsim_op *op)
{
    struct ncclComm *comm = op->comm;
    pthread_mutex_lock(&comm->lock);
    if (IS_COLL(op->kind)) {
        op->seq = ++comm->coll_seq;
        op->step_base = comm->next_step;
        comm->next_step += op->nsteps;
    } else if (IS_P2P(op->kind) && op->bytes > 0) {
        /* Zero-byte send/recv are no-ops in NCCL: they match nothing. */
        op->seq = op->kind == OP_SEND ? ++comm->send_msgs[op->root] : ++comm->recv_msgs[op->root];
    } else if (op->kind == OP_WAITSIGNAL) {
        op->seq = ++comm->waits;
        for (int i = 0; i < op->ndesc; i++) {
            struct wait_desc *d = &op->descs[i];
            uint64_t *expected = &comm->sig_expected[(size_t)d->peer * TRSIM_RMA_SLOTS + d->slot];
            *expected += d->count;
            d->target = *expected;
        }
    }
    pthread_mutex_unlock(&comm->lock);
}

/* Queues ops (numbered, all on one stream) as one task. */
static ncclResult_t launch(trsim_op **ops, int nops)
{
    group_task *g = calloc(1, sizeof *g);
    if (!g) return ncclSystemError;
    g->ops = ops;
    g->nops = nops;
    for (int i = 0; i < nops; i++) {
        g->nfinished += ops[i]->finished;
        /* recorded before the launch, as NCCL does with CUDA < 12.3 */
        if (ops[i]->launch_event) trsim_event_record(ops[i]->launch_event, ops[i]->stream);
    }
    g->task.run = group_run;
    g->task.destroy = group_destroy;
    trsim_stream_submit(ops[0]->stream, &g->task);
    return ncclSuccess;
}

/* ---- the API ------------------------------------------------------------------------- */

/* An invalid call inside a group also fails the group's ncclGroupEnd. */
static ncclResult_t group_fail(ncclResult_t r)
{
    if (group.depth > 0 && group.error == ncclSuccess) group.error = r;
    return r;
}

#define FAIL(r, ...) (trsim_set_last_error(__VA_ARGS__), group_fail(r))

/* The communicator can take an operation now. */
static ncclResult_t check_comm(struct ncclComm *comm, const char *name)
{
    if (!trsim_comm_valid(comm)) return FAIL(ncclInvalidArgument, "%s: invalid communicator", name);
    if (!atomic_load(&comm->attached))
        return FAIL(ncclInvalidUsage, "%s: communicator not initialised yet", name);
    int err = atomic_load(&comm->async_error);
    if (err != ncclSuccess) return FAIL((ncclResult_t)err, "%s: communicator is in error %d", name, err);
    if (atomic_load(&comm->aborted)) return FAIL(ncclInvalidUsage, "%s: communicator was aborted", name);
    if (atomic_load(&comm->suspended))
        return FAIL(ncclInvalidUsage, "%s: communicator is suspended (ncclCommSuspend)", name);
    return ncclSuccess;
}

/* Takes a validated operation: into the group, or launched at once. */
static ncclResult_t submit(const trsim_op *proto)
{
    struct ncclComm *comm = proto->comm;
    trsim_op *op = malloc(sizeof *op);
    if (!op) return ncclSystemError;
    *op = *proto;
    if (!op->finished) atomic_fetch_add(&comm->inflight, 1);
    if (group.depth > 0) {
        if (!grow((void **)&group.ops, &group.cap, group.nops + 1, sizeof *group.ops)) {
            if (!op->finished) atomic_fetch_sub(&comm->inflight, 1);
            free(op);
            return group_fail(ncclSystemError);
        }
        group.ops[group.nops++] = op;
        return ncclSuccess;
    }
    trsim_op **ops = malloc(sizeof *ops);
    if (!ops) {
        if (!op->finished) atomic_fetch_sub(&comm->inflight, 1);
        free(op);
        return ncclSystemError;
    }
    ops[0] = op;
    op_number(op);
    ncclResult_t r = launch(ops, 1);
    if (r != ncclSuccess) {
        if (!op->finished) atomic_fetch_sub(&comm->inflight, 1);
        free(ops);
        free(op);
        return r;
    }
    return comm->blocking ? ncclSuccess : ncclInProgress;
}

static ncclResult_t enqueue(trsim_op proto, cudaStream_t stream)
{
    const char *name = op_names[proto.kind];
    struct ncclComm *comm = proto.comm;
    ncclResult_t cr = check_comm(comm, name);
    if (cr != ncclSuccess) return cr;
    proto.elsize = trsim_dtype_size(proto.datatype);
    if (!proto.elsize) return FAIL(ncclInvalidArgument, "%s: invalid datatype %d", name, proto.datatype);
    int reduces = proto.kind == OP_ALLREDUCE || proto.kind == OP_REDUCE || proto.kind == OP_REDUCESCATTER;
    if (reduces) {
        int opcode = proto.redop.op;
        ncclResult_t r = trsim_comm_redop(comm, opcode, proto.datatype, &proto.redop, &proto.dev_scalar);
        if (r != ncclSuccess) return FAIL(r, "%s: invalid reduction op %d for datatype %d", name, opcode, proto.datatype);
    } else {
        proto.redop.op = 0;
    }
    int rooted = proto.kind == OP_BROADCAST || proto.kind == OP_REDUCE || proto.kind == OP_GATHER ||
                 proto.kind == OP_SCATTER || proto.kind == OP_SEND || proto.kind == OP_RECV;
    if (!rooted) proto.root = -1;
    else if (proto.root < 0 || proto.root >= comm->nranks)
        return FAIL(ncclInvalidArgument, "%s: root/peer %d out of range 0..%d", name, proto.root, comm->nranks - 1);
    trsim_stream *s;
    if (trsim_stream_get(stream, &s) != cudaSuccess)
        return FAIL(ncclInvalidArgument, "%s: invalid stream", name);
    proto.stream = s;

    int n = comm->nranks, me = comm->rank;
    int needs_send = 1, needs_recv = 1;
    switch (proto.kind) {
    case OP_ALLREDUCE: case OP_ALLGATHER: case OP_GATHER:
        proto.nblocks = 1; proto.block_count = proto.count; proto.contributes = 1;
        needs_recv = proto.kind != OP_GATHER || me == proto.root;
        break;
    case OP_REDUCE:
        proto.nblocks = 1; proto.block_count = proto.count; proto.contributes = 1;
        needs_recv = me == proto.root;
        break;
    case OP_BROADCAST:
        proto.nblocks = 1; proto.block_count = proto.count; proto.contributes = me == proto.root;
        needs_send = me == proto.root;
        break;
    case OP_REDUCESCATTER: case OP_ALLTOALL:
        proto.nblocks = n; proto.block_count = proto.count; proto.contributes = 1;
        break;
    case OP_SCATTER:
        proto.nblocks = n; proto.block_count = proto.count; proto.contributes = me == proto.root;
        needs_send = me == proto.root;
        break;
    case OP_SEND: needs_recv = 0; proto.bytes = proto.count * proto.elsize; break;
    case OP_RECV: needs_send = 0; proto.bytes = proto.count * proto.elsize; break;
    case OP_PUTSIGNAL: case OP_SIGNAL: case OP_WAITSIGNAL: break;   /* enqueue_signal, ncclWaitSignal */
    }
    if (proto.count > 0 && ((needs_send && !proto.sendbuff) || (needs_recv && !proto.recvbuff)))
        return FAIL(ncclInvalidArgument, "%s: NULL buffer with count %zu", name, proto.count);
    if (IS_COLL(proto.kind)) {
        size_t per_step = comm->shm.coll_slot_bytes / ((size_t)proto.nblocks * proto.elsize);
        proto.chunk = per_step ? per_step : 1;
        proto.nsteps = (proto.block_count + proto.chunk - 1) / proto.chunk;
    }
    if (IS_P2P(proto.kind) && proto.bytes == 0) proto.finished = 1;
    return submit(&proto);
}

TRSIM_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_ALLREDUCE, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                              .count = count, .datatype = datatype, .redop.op = op}, stream);
}

TRSIM_API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_BROADCAST, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                              .count = count, .datatype = datatype, .root = root}, stream);
}

TRSIM_API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream)
{
    /* Through the exported symbol, as real NCCL does, so an interposer sees
     * one ncclBroadcast inside this call. */
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

TRSIM_API ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                  ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_REDUCE, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                              .count = count, .datatype = datatype, .redop.op = op, .root = root}, stream);
}

TRSIM_API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_ALLGATHER, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                              .count = sendcount, .datatype = datatype}, stream);
}

TRSIM_API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_REDUCESCATTER, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                              .count = recvcount, .datatype = datatype, .redop.op = op}, stream);
}

TRSIM_API ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_ALLTOALL, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                              .count = count, .datatype = datatype}, stream);
}

TRSIM_API ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_GATHER, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                              .count = count, .datatype = datatype, .root = root}, stream);
}

TRSIM_API ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_SCATTER, .comm = comm, .sendbuff = sendbuff, .recvbuff = recvbuff,
                              .count = count, .datatype = datatype, .root = root}, stream);
}

TRSIM_API ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_SEND, .comm = comm, .sendbuff = sendbuff,
                              .count = count, .datatype = datatype, .root = peer}, stream);
}

TRSIM_API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream)
{
    return enqueue((trsim_op){.kind = OP_RECV, .comm = comm, .recvbuff = recvbuff,
                              .count = count, .datatype = datatype, .root = peer}, stream);
}

/* ---- the *Config collectives ----------------------------------------------------- */

/* config NULL is the plain call; otherwise its header must be NCCL's: size
 * at least the 2.31 struct's (the first with this type) and the magic.
 * Nothing of it changes what the simulator computes, except that a
 * launchCompletionEvent is recorded when the collective is launched. */
static ncclResult_t coll_config(const ncclCollConfig_t *config, const char *name, trsim_op *proto)
{
    if (!config) return ncclSuccess;
    size_t v23100 = offsetof(ncclCollConfig_t, launchCompletionEvent);
    if (config->size < v23100)
        return FAIL(ncclInvalidArgument, "%sConfig: ncclCollConfig_t size %zu too small (expected >= %zu)", name,
                    config->size, v23100);
    if (config->magic != NCCL_API_MAGIC)
        return FAIL(ncclInvalidArgument, "%sConfig: ncclCollConfig_t magic mismatch (got 0x%x, expected 0x%x)",
                    name, config->magic, NCCL_API_MAGIC);
    if (config->size >= offsetof(ncclCollConfig_t, launchCompletionEvent) + sizeof config->launchCompletionEvent)
        proto->launch_event = config->launchCompletionEvent;
    return ncclSuccess;
}

static ncclResult_t enqueue_config(trsim_op proto, cudaStream_t stream, const ncclCollConfig_t *config)
{
    ncclResult_t r = coll_config(config, op_names[proto.kind], &proto);
    return r != ncclSuccess ? r : enqueue(proto, stream);
}

TRSIM_API ncclResult_t ncclAllReduceConfig(const void *sendbuff, void *recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream, const ncclCollConfig_t *config)
{
    return enqueue_config((trsim_op){.kind = OP_ALLREDUCE, .comm = comm, .sendbuff = sendbuff,
                                     .recvbuff = recvbuff, .count = count, .datatype = datatype,
                                     .redop.op = op}, stream, config);
}

TRSIM_API ncclResult_t ncclBroadcastConfig(const void *sendbuff, void *recvbuff, size_t count,
                                           ncclDataType_t datatype, int root, ncclComm_t comm,
                                           cudaStream_t stream, const ncclCollConfig_t *config)
{
    return enqueue_config((trsim_op){.kind = OP_BROADCAST, .comm = comm, .sendbuff = sendbuff,
                                     .recvbuff = recvbuff, .count = count, .datatype = datatype, .root = root},
                          stream, config);
}

TRSIM_API ncclResult_t ncclReduceConfig(const void *sendbuff, void *recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                                        cudaStream_t stream, const ncclCollConfig_t *config)
{
    return enqueue_config((trsim_op){.kind = OP_REDUCE, .comm = comm, .sendbuff = sendbuff,
                                     .recvbuff = recvbuff, .count = count, .datatype = datatype,
                                     .redop.op = op, .root = root}, stream, config);
}

TRSIM_API ncclResult_t ncclAllGatherConfig(const void *sendbuff, void *recvbuff, size_t sendcount,
                                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                           const ncclCollConfig_t *config)
{
    return enqueue_config((trsim_op){.kind = OP_ALLGATHER, .comm = comm, .sendbuff = sendbuff,
                                     .recvbuff = recvbuff, .count = sendcount, .datatype = datatype},
                          stream, config);
}

TRSIM_API ncclResult_t ncclReduceScatterConfig(const void *sendbuff, void *recvbuff, size_t recvcount,
                                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                               cudaStream_t stream, const ncclCollConfig_t *config)
{
    return enqueue_config((trsim_op){.kind = OP_REDUCESCATTER, .comm = comm, .sendbuff = sendbuff,
                                     .recvbuff = recvbuff, .count = recvcount, .datatype = datatype,
                                     .redop.op = op}, stream, config);
}

TRSIM_API ncclResult_t ncclAlltoAllConfig(const void *sendbuff, void *recvbuff, size_t count,
                                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                          const ncclCollConfig_t *config)
{
    return enqueue_config((trsim_op){.kind = OP_ALLTOALL, .comm = comm, .sendbuff = sendbuff,
                                     .recvbuff = recvbuff, .count = count, .datatype = datatype},
                          stream, config);
}

TRSIM_API ncclResult_t ncclGatherConfig(const void *sendbuff, void *recvbuff, size_t count,
                                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                                        const ncclCollConfig_t *config)
{
    return enqueue_config((trsim_op){.kind = OP_GATHER, .comm = comm, .sendbuff = sendbuff,
                                     .recvbuff = recvbuff, .count = count, .datatype = datatype, .root = root},
                          stream, config);
}

TRSIM_API ncclResult_t ncclScatterConfig(const void *sendbuff, void *recvbuff, size_t count,
                                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                                         const ncclCollConfig_t *config)
{
    return enqueue_config((trsim_op){.kind = OP_SCATTER, .comm = comm, .sendbuff = sendbuff,
                                     .recvbuff = recvbuff, .count = count, .datatype = datatype, .root = root},
                          stream, config);
}

/* ---- one-sided ------------------------------------------------------------------------ */

static ncclResult_t check_slot(const char *name, int sigIdx, int ctx, int *slot)
{
    if (sigIdx < 0 || sigIdx >= TRSIM_RMA_SIGS)
        return FAIL(ncclInvalidArgument, "%s: signal index %d out of range 0..%d", name, sigIdx, TRSIM_RMA_SIGS - 1);
    if (ctx < 0 || ctx >= TRSIM_RMA_CTXS)
        return FAIL(ncclInvalidArgument, "%s: context %d out of range 0..%d", name, ctx, TRSIM_RMA_CTXS - 1);
    *slot = ctx * TRSIM_RMA_SIGS + sigIdx;
    return ncclSuccess;
}

/* NCCL's one-sided operations need its RMA machinery, which the first
 * window registered with NCCL_WIN_COLL_SYMMETRIC sets up (or
 * NCCL_RMA_EAGER_INIT=1, at once). */
static ncclResult_t check_rma_ready(struct ncclComm *comm, const char *name)
{
    if (atomic_load(&comm->rma_ready)) return ncclSuccess;
    const char *eager = getenv("NCCL_RMA_EAGER_INIT");
    if (eager && (!strcmp(eager, "1") || !strcasecmp(eager, "T") || !strcasecmp(eager, "TRUE")))
        return ncclSuccess;
    return FAIL(ncclInvalidUsage, "%s called before RMA is initialized. Register a symmetric window first, or set "
                "NCCL_RMA_EAGER_INIT=1 to initialize RMA at communicator creation.", name);
}

/* ncclPutSignal and ncclSignal: the peer need not take part. A put's
 * target is the peer's part of the window registration peerWin (this
 * rank's handle of it); its source must lie in a symmetric window
 * (NCCL_WIN_COLL_SYMMETRIC) of comm, as NCCL requires. */
static ncclResult_t enqueue_signal(trsim_op proto, cudaStream_t stream, ncclWindow_t peerWin, size_t peerWinOffset,
                                   int sigIdx, int ctx, unsigned int flags)
{
    const char *name = op_names[proto.kind];
    struct ncclComm *comm = proto.comm;
    ncclResult_t r = check_comm(comm, name);
    if (r != ncclSuccess) return r;
    if (flags != 0) return FAIL(ncclInvalidArgument, "%s: flags %u is invalid (must be 0)", name, flags);
    if ((r = check_slot(name, sigIdx, ctx, &proto.slot)) != ncclSuccess) return r;
    if (proto.kind == OP_SIGNAL && (r = check_rma_ready(comm, name)) != ncclSuccess) return r;
    if (proto.root < 0 || proto.root >= comm->nranks)
        return FAIL(ncclInvalidArgument, "%s: peer %d out of range 0..%d", name, proto.root, comm->nranks - 1);
    if (proto.kind == OP_PUTSIGNAL) {
        proto.elsize = trsim_dtype_size(proto.datatype);
        if (!proto.elsize) return FAIL(ncclInvalidArgument, "%s: invalid datatype %d", name, proto.datatype);
        proto.bytes = proto.count * proto.elsize;
        if (!trsim_window_valid(comm, peerWin))
            return FAIL(ncclInvalidArgument, "%s: peerWin is not a window registered on this communicator", name);
        size_t room = peerWin->peer_size[proto.root];
        if (peerWinOffset > room || proto.bytes > room - peerWinOffset)
            return FAIL(ncclInvalidArgument, "%s: %zu bytes at offset %zu do not fit rank %d's window of %zu bytes",
                        name, proto.bytes, peerWinOffset, proto.root, room);
        if (!proto.sendbuff) return FAIL(ncclInvalidArgument, "%s: localbuff is NULL", name);
        struct ncclWindow_vidmem *src = trsim_window_find(comm, proto.sendbuff, proto.bytes);
        if (!src || !(src->flags & NCCL_WIN_COLL_SYMMETRIC))
            return FAIL(ncclInvalidArgument, "%s: localbuff %p is not in a valid symmetric window (one registered "
                        "on this communicator with NCCL_WIN_COLL_SYMMETRIC)", name, (const void *)proto.sendbuff);
        proto.put_dst = peerWin->peer_base[proto.root] + peerWinOffset;
    }
    trsim_stream *s;
    if (trsim_stream_get(stream, &s) != cudaSuccess) return FAIL(ncclInvalidArgument, "%s: invalid stream", name);
    proto.stream = s;
    if (proto.kind == OP_PUTSIGNAL) {
        proto.win = peerWin;
        trsim_window_hold(peerWin);
    }
    r = submit(&proto);
    if (r != ncclSuccess && r != ncclInProgress) trsim_window_release(proto.win);  /* submit keeps it on success */
    return r;
}

TRSIM_API ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                                     ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                     unsigned int flags, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue_signal((trsim_op){.kind = OP_PUTSIGNAL, .comm = comm, .sendbuff = localbuff, .count = count,
                                     .datatype = datatype, .root = peer},
                          stream, peerWin, peerWinOffset, sigIdx, ctx, flags);
}

TRSIM_API ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                  cudaStream_t stream)
{
    return enqueue_signal((trsim_op){.kind = OP_SIGNAL, .comm = comm, .datatype = ncclInt8, .root = peer},
                          stream, NULL, 0, sigIdx, ctx, flags);
}

/* Waits, on the stream, until every descriptor's peer has delivered opCnt
 * more signals on its (sigIdx, ctx) than the earlier waits of this rank
 * took. A signal that never comes keeps the stream pending forever. */
TRSIM_API ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                                      cudaStream_t stream)
{
    const char *name = "WaitSignal";
    ncclResult_t r = check_comm(comm, name);
    if (r != ncclSuccess) return r;
    if (nDesc <= 0 || !signalDescs)
        return FAIL(ncclInvalidArgument, "%s: %d descriptors at %p", name, nDesc, (void *)signalDescs);
    if ((r = check_rma_ready(comm, name)) != ncclSuccess) return r;
    trsim_op proto = {.kind = OP_WAITSIGNAL, .comm = comm, .datatype = ncclInt8, .root = -1, .ndesc = nDesc};
    struct wait_desc *descs = calloc((size_t)nDesc, sizeof *descs);
    if (!descs) return ncclSystemError;
    for (int i = 0; i < nDesc; i++) {
        const ncclWaitSignalDesc_t *d = &signalDescs[i];
        if (d->peer < 0 || d->peer >= comm->nranks || d->opCnt <= 0) {
            free(descs);
            return FAIL(ncclInvalidArgument, "%s: descriptor %d: peer %d (of %d), opCnt %d", name, i, d->peer,
                        comm->nranks, d->opCnt);
        }
        if ((r = check_slot(name, d->sigIdx, d->ctx, &descs[i].slot)) != ncclSuccess) {
            free(descs);
            return r;
        }
        descs[i].peer = d->peer;
        descs[i].count = (uint64_t)d->opCnt;
    }
    trsim_stream *s;
    if (trsim_stream_get(stream, &s) != cudaSuccess) {
        free(descs);
        return FAIL(ncclInvalidArgument, "%s: invalid stream", name);
    }
    proto.stream = s;
    proto.descs = descs;
    r = submit(&proto);
    if (r != ncclSuccess && r != ncclInProgress) free(descs);   /* submit keeps it only on success */
    return r;
}

TRSIM_API ncclResult_t ncclGroupStart(void)
{
    if (group.depth == 0) group.error = ncclSuccess;
    group.depth++;
    return ncclSuccess;
}

static void *split_thread_main(void *arg)
{
    trsim_split_run(arg);
    return NULL;
}

/* Deferred splits run side by side (one thread may split several
 * communicators of one job); then deferred inits are waited for. */
static ncclResult_t finish_deferred(void)
{
    ncclResult_t r = ncclSuccess;
    if (group.nsplits > 0) {
        pthread_t *threads = calloc((size_t)group.nsplits, sizeof *threads);
        int *started = calloc((size_t)group.nsplits, sizeof *started);
        for (int i = 0; i < group.nsplits; i++)
            started[i] = threads && started &&
                         pthread_create(&threads[i], NULL, split_thread_main, group.splits[i]) == 0;
        for (int i = 0; i < group.nsplits; i++) {
            if (started && started[i]) pthread_join(threads[i], NULL);
            else trsim_split_run(group.splits[i]);
            ncclResult_t w = trsim_split_free(group.splits[i]);
            if (w != ncclSuccess && r == ncclSuccess) r = w;
        }
        free(threads);
        free(started);
        group.nsplits = 0;
    }
    for (int i = 0; i < group.ninits; i++) {
        ncclResult_t w = trsim_comm_wait_init(group.inits[i]);
        if (w != ncclSuccess && r == ncclSuccess) r = w;
    }
    group.ninits = 0;
    return r;
}

/* A rough cost model for ncclGroupSimulateEnd, in microseconds as NCCL's
 * estimatedTime: a ring's latency per step plus the bytes each rank moves
 * at 20 GB/s. */
static double op_estimate_us(const trsim_op *op)
{
    double n = op->comm->nranks, bytes = (double)op->count * (double)op->elsize, steps = n - 1, moved = bytes;
    switch (op->kind) {
    case OP_ALLREDUCE: steps = 2 * (n - 1); moved = 2 * bytes * (n - 1) / n; break;
    case OP_ALLGATHER: case OP_ALLTOALL: case OP_GATHER: case OP_SCATTER: case OP_REDUCESCATTER:
        moved = bytes * (n - 1); break;
    case OP_BROADCAST: case OP_REDUCE: break;
    case OP_SEND: case OP_RECV: case OP_PUTSIGNAL: steps = 1; moved = (double)op->bytes; break;
    default: steps = 1; moved = 0; break;
    }
    return 5.0 + 2.0 * steps + moved / 20e3;
}

/* ncclGroupEnd, or ncclGroupSimulateEnd with sim: the group's operations
 * are dropped (nothing launched, nothing numbered: the peers see nothing),
 * its inits and splits still complete, and sim->estimatedTime gets the
 * estimate (when its size covers it). */
static ncclResult_t group_end(ncclSimInfo_t *sim)
{
    if (group.depth == 0) {
        trsim_set_last_error("ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--group.depth > 0) return ncclSuccess;
    if (sim && group.error == ncclSuccess &&
        (sim->size < offsetof(ncclSimInfo_t, magic) + sizeof sim->magic || sim->magic != 0x74685283)) {
        trsim_set_last_error("ncclSimInfo_t argument not initialized via NCCL_SIM_INFO_INITIALIZER");
        group.error = ncclInvalidArgument;
    }
    ncclResult_t r = finish_deferred();
    int nonblocking = 0;
    if (group.error != ncclSuccess || sim) {
        /* NCCL launches nothing of a group with an invalid call in it, nor
         * of a simulated one. */
        double us = 0;
        for (int i = 0; i < group.nops; i++) {
            us += op_estimate_us(group.ops[i]);
            if (!group.ops[i]->finished) op_finish(group.ops[i]);
            op_free(group.ops[i]);
        }
        if (sim && group.error == ncclSuccess && group.nops > 0 &&
            sim->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof sim->estimatedTime)
            sim->estimatedTime = (float)us;
        group.nops = 0;
    }
    /* Numbered in call order, then one task per stream, holding that
     * stream's operations in call order. */
    for (int i = 0; i < group.nops; i++) op_number(group.ops[i]);
    int remaining = group.nops;
    while (remaining > 0) {
        trsim_stream *s = NULL;
        int n = 0;
        for (int i = 0; i < group.nops; i++) {
            if (!group.ops[i]) continue;
            if (!s) s = group.ops[i]->stream;
            if (group.ops[i]->stream == s) n++;
        }
        trsim_op **ops = malloc((size_t)n * sizeof *ops);
        if (!ops) { r = ncclSystemError; break; }
        n = 0;
        for (int i = 0; i < group.nops; i++)
            if (group.ops[i] && group.ops[i]->stream == s) {
                ops[n++] = group.ops[i];
                nonblocking |= !group.ops[i]->comm->blocking;
                group.ops[i] = NULL;
            }
        remaining -= n;
        if (launch(ops, n) != ncclSuccess) { free(ops); r = ncclSystemError; break; }
    }
    group.nops = 0;
    if (group.error != ncclSuccess) r = group.error;
    group.error = ncclSuccess;
    if (r == ncclSuccess && nonblocking) r = ncclInProgress;
    return r;
}

TRSIM_API ncclResult_t ncclGroupEnd(void)
{
    return group_end(NULL);
}

/* With a NULL simInfo, NCCL's ncclGroupSimulateEnd launches the group like
 * ncclGroupEnd; so does the simulator. */
TRSIM_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    return group_end(simInfo);
}
