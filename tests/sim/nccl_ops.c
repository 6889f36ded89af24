/* Simulated NCCL operations: collectives, send/recv and group calls.
 *
 * An operation is validated and numbered when it is called (NCCL matches
 * operations across ranks by call order), then runs on its stream's worker as
 * a non-blocking state machine. Each collective is a series of steps over the
 * communicator's segment (see nccl_internal.h); send/recv move chunks through
 * the pair's channel. A group becomes one task per stream that advances all
 * of its operations together, so send/recv pairs inside a group cannot
 * deadlock. An operation whose peers never arrive never finishes: its stream
 * stays pending, exactly like a hung NCCL kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"

enum op_kind {
    OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_ALLGATHER, OP_REDUCESCATTER,
    OP_ALLTOALL, OP_GATHER, OP_SCATTER, OP_SEND, OP_RECV,
};

static const char *const op_names[] = {
    "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
    "AlltoAll", "Gather", "Scatter", "Send", "Recv",
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
    int first = op->root >= 0 && op->kind >= OP_SEND ? op->root : 0;
    int last = op->root >= 0 && op->kind >= OP_SEND ? op->root : comm->nranks - 1;
    for (int q = first; q <= last; q++)
        if (trsim_shm_rank_dead(&comm->shm, q)) {
            trsim_comm_set_error(comm, ncclRemoteError,
                                 "rank %d: peer rank %d exited while %s #%llu waited for it",
                                 comm->rank, q, op_names[op->kind], (unsigned long long)op->seq);
            return;
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
                         : op->kind == OP_RECV ? recv_progress(op) : coll_progress(op);
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

static void group_destroy(trsim_task *task)
{
    group_task *g = (group_task *)task;
    for (int i = 0; i < g->nops; i++) free(g->ops[i]);
    free(g->ops);
    free(g);
}

static ncclResult_t launch(trsim_op **ops, int nops)
{
    group_task *g = calloc(1, sizeof *g);
    if (!g) return ncclSystemError;
    g->ops = ops;
    g->nops = nops;
    for (int i = 0; i < nops; i++) g->nfinished += ops[i]->finished;
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

static ncclResult_t enqueue(trsim_op proto, cudaStream_t stream)
{
    const char *name = op_names[proto.kind];
    struct ncclComm *comm = proto.comm;
    if (!trsim_comm_valid(comm)) return FAIL(ncclInvalidArgument, "%s: invalid communicator", name);
    if (!atomic_load(&comm->attached))
        return FAIL(ncclInvalidUsage, "%s: communicator not initialised yet", name);
    int err = atomic_load(&comm->async_error);
    if (err != ncclSuccess) return FAIL((ncclResult_t)err, "%s: communicator is in error %d", name, err);
    if (atomic_load(&comm->aborted)) return FAIL(ncclInvalidUsage, "%s: communicator was aborted", name);
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
    }
    if (proto.count > 0 && ((needs_send && !proto.sendbuff) || (needs_recv && !proto.recvbuff)))
        return FAIL(ncclInvalidArgument, "%s: NULL buffer with count %zu", name, proto.count);
    if (proto.kind < OP_SEND) {
        size_t per_step = comm->shm.coll_slot_bytes / ((size_t)proto.nblocks * proto.elsize);
        proto.chunk = per_step ? per_step : 1;
        proto.nsteps = (proto.block_count + proto.chunk - 1) / proto.chunk;
    }

    trsim_op *op = malloc(sizeof *op);
    if (!op) return ncclSystemError;
    *op = proto;
    pthread_mutex_lock(&comm->lock);
    if (op->kind < OP_SEND) {
        op->seq = ++comm->coll_seq;
        op->step_base = comm->next_step;
        comm->next_step += op->nsteps;
    } else if (op->bytes > 0) {
        /* Zero-byte send/recv are no-ops in NCCL: they match nothing. */
        op->seq = op->kind == OP_SEND ? ++comm->send_msgs[op->root] : ++comm->recv_msgs[op->root];
    }
    pthread_mutex_unlock(&comm->lock);
    if (op->kind >= OP_SEND && op->bytes == 0) op->finished = 1;
    if (!op->finished) atomic_fetch_add(&comm->inflight, 1);

    if (group.depth > 0) {
        if (!grow((void **)&group.ops, &group.cap, group.nops + 1, sizeof *group.ops)) {
            free(op);
            return ncclSystemError;
        }
        group.ops[group.nops++] = op;
        return ncclSuccess;
    }
    trsim_op **ops = malloc(sizeof *ops);
    if (!ops) { free(op); return ncclSystemError; }
    ops[0] = op;
    ncclResult_t r = launch(ops, 1);
    if (r != ncclSuccess) { free(ops); free(op); return r; }
    return comm->blocking ? ncclSuccess : ncclInProgress;
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

TRSIM_API ncclResult_t ncclGroupEnd(void)
{
    if (group.depth == 0) {
        trsim_set_last_error("ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--group.depth > 0) return ncclSuccess;
    ncclResult_t r = finish_deferred();
    int nonblocking = 0;
    if (group.error != ncclSuccess) {
        /* NCCL launches nothing of a group with an invalid call in it. */
        for (int i = 0; i < group.nops; i++) {
            if (!group.ops[i]->finished) op_finish(group.ops[i]);
            free(group.ops[i]);
        }
        group.nops = 0;
    }
    /* One task per stream, holding that stream's operations in call order. */
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
