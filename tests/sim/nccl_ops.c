/* Simulated NCCL collectives (plain and *Config) and send/recv: how they
 * are checked when called and how they progress once running.
 *
 * Each collective is a series of steps over the communicator's segment (see
 * nccl_internal.h); send/recv move chunks through the pair's channel. Both
 * are numbered, launched and run by nccl_group.c; the one-sided operations
 * are nccl_onesided.c's. */
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"

const char *const trsim_op_names[] = {
    "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
    "AlltoAll", "Gather", "Scatter", "Send", "Recv",
    "PutSignal", "Signal", "WaitSignal",
};

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
               "waiting forever like NCCL would", op->comm->rank, trsim_op_names[op->kind],
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

int trsim_op_progress(trsim_op *op)
{
    switch (op->kind) {
    case OP_SEND: return send_progress(op);
    case OP_RECV: return recv_progress(op);
    case OP_PUTSIGNAL: case OP_SIGNAL: case OP_WAITSIGNAL: return trsim_onesided_progress(op);
    default: return coll_progress(op);
    }
}

/* ---- the API ------------------------------------------------------------------------- */

ncclResult_t trsim_op_check_comm(struct ncclComm *comm, const char *name)
{
    if (!trsim_comm_valid(comm)) return OP_FAIL(ncclInvalidArgument, "%s: invalid communicator", name);
    if (!atomic_load(&comm->attached))
        return OP_FAIL(ncclInvalidUsage, "%s: communicator not initialised yet", name);
    int err = atomic_load(&comm->async_error);
    if (err != ncclSuccess) return OP_FAIL((ncclResult_t)err, "%s: communicator is in error %d", name, err);
    if (atomic_load(&comm->aborted)) return OP_FAIL(ncclInvalidUsage, "%s: communicator was aborted", name);
    if (atomic_load(&comm->suspended))
        return OP_FAIL(ncclInvalidUsage, "%s: communicator is suspended (ncclCommSuspend)", name);
    return ncclSuccess;
}

static ncclResult_t enqueue(trsim_op proto, cudaStream_t stream)
{
    const char *name = trsim_op_names[proto.kind];
    struct ncclComm *comm = proto.comm;
    ncclResult_t cr = trsim_op_check_comm(comm, name);
    if (cr != ncclSuccess) return cr;
    proto.elsize = trsim_dtype_size(proto.datatype);
    if (!proto.elsize) return OP_FAIL(ncclInvalidArgument, "%s: invalid datatype %d", name, proto.datatype);
    int reduces = proto.kind == OP_ALLREDUCE || proto.kind == OP_REDUCE || proto.kind == OP_REDUCESCATTER;
    if (reduces) {
        int opcode = proto.redop.op;
        ncclResult_t r = trsim_comm_redop(comm, opcode, proto.datatype, &proto.redop, &proto.dev_scalar);
        if (r != ncclSuccess)
            return OP_FAIL(r, "%s: invalid reduction op %d for datatype %d", name, opcode, proto.datatype);
    } else {
        proto.redop.op = 0;
    }
    int rooted = proto.kind == OP_BROADCAST || proto.kind == OP_REDUCE || proto.kind == OP_GATHER ||
                 proto.kind == OP_SCATTER || proto.kind == OP_SEND || proto.kind == OP_RECV;
    if (!rooted) proto.root = -1;
    else if (proto.root < 0 || proto.root >= comm->nranks)
        return OP_FAIL(ncclInvalidArgument, "%s: root/peer %d out of range 0..%d", name, proto.root, comm->nranks - 1);
    trsim_stream *s;
    if (trsim_stream_get(stream, &s) != cudaSuccess)
        return OP_FAIL(ncclInvalidArgument, "%s: invalid stream", name);
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
        return OP_FAIL(ncclInvalidArgument, "%s: NULL buffer with count %zu", name, proto.count);
    if (IS_COLL(proto.kind)) {
        size_t per_step = comm->shm.coll_slot_bytes / ((size_t)proto.nblocks * proto.elsize);
        proto.chunk = per_step ? per_step : 1;
        proto.nsteps = (proto.block_count + proto.chunk - 1) / proto.chunk;
    }
    if (IS_P2P(proto.kind) && proto.bytes == 0) proto.finished = 1;
    return trsim_op_submit(&proto);
}

/* ---- collectives, plain and *Config ------------------------------------------------ */

/* config NULL is the plain call; otherwise its header must be NCCL's: size
 * at least the 2.31 struct's (the first with this type) and the magic.
 * Nothing of it changes what the simulator computes, except that a
 * launchCompletionEvent is recorded when the collective is launched. */
static ncclResult_t coll_config(const ncclCollConfig_t *config, const char *name, trsim_op *proto)
{
    if (!config) return ncclSuccess;
    size_t v23100 = offsetof(ncclCollConfig_t, launchCompletionEvent);
    if (config->size < v23100)
        return OP_FAIL(ncclInvalidArgument, "%sConfig: ncclCollConfig_t size %zu too small (expected >= %zu)", name,
                       config->size, v23100);
    if (config->magic != NCCL_API_MAGIC)
        return OP_FAIL(ncclInvalidArgument, "%sConfig: ncclCollConfig_t magic mismatch (got 0x%x, expected 0x%x)",
                       name, config->magic, NCCL_API_MAGIC);
    if (config->size >= offsetof(ncclCollConfig_t, launchCompletionEvent) + sizeof config->launchCompletionEvent)
        proto->launch_event = config->launchCompletionEvent;
    return ncclSuccess;
}

static ncclResult_t enqueue_config(trsim_op proto, cudaStream_t stream, const ncclCollConfig_t *config)
{
    ncclResult_t r = coll_config(config, trsim_op_names[proto.kind], &proto);
    return r != ncclSuccess ? r : enqueue(proto, stream);
}

/* Defines the collective name and NCCL 2.31's nameConfig, which takes the
 * same arguments and a config last; params are the arguments before comm and
 * stream, fields what they set of the operation. */
#define COLLECTIVE(name, op_kind, params, fields)                                                          \
    TRSIM_API ncclResult_t name(UNPAREN params, ncclComm_t comm, cudaStream_t stream)                       \
    {                                                                                                      \
        return enqueue_config((trsim_op){.kind = op_kind, .comm = comm, UNPAREN fields}, stream, NULL);     \
    }                                                                                                      \
    TRSIM_API ncclResult_t name##Config(UNPAREN params, ncclComm_t comm, cudaStream_t stream,              \
                                        const ncclCollConfig_t *config)                                    \
    {                                                                                                      \
        return enqueue_config((trsim_op){.kind = op_kind, .comm = comm, UNPAREN fields}, stream, config);   \
    }
#define UNPAREN(...) __VA_ARGS__

COLLECTIVE(ncclAllReduce, OP_ALLREDUCE,
           (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op),
           (.sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .datatype = datatype, .redop.op = op))
COLLECTIVE(ncclBroadcast, OP_BROADCAST,
           (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root),
           (.sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .datatype = datatype, .root = root))
COLLECTIVE(ncclReduce, OP_REDUCE,
           (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root),
           (.sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .datatype = datatype, .redop.op = op,
            .root = root))
COLLECTIVE(ncclAllGather, OP_ALLGATHER,
           (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype),
           (.sendbuff = sendbuff, .recvbuff = recvbuff, .count = sendcount, .datatype = datatype))
COLLECTIVE(ncclReduceScatter, OP_REDUCESCATTER,
           (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op),
           (.sendbuff = sendbuff, .recvbuff = recvbuff, .count = recvcount, .datatype = datatype, .redop.op = op))
COLLECTIVE(ncclAlltoAll, OP_ALLTOALL,
           (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype),
           (.sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .datatype = datatype))
COLLECTIVE(ncclGather, OP_GATHER,
           (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root),
           (.sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .datatype = datatype, .root = root))
COLLECTIVE(ncclScatter, OP_SCATTER,
           (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root),
           (.sendbuff = sendbuff, .recvbuff = recvbuff, .count = count, .datatype = datatype, .root = root))

TRSIM_API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream)
{
    /* Through the exported symbol, as real NCCL does, so an interposer sees
     * one ncclBroadcast inside this call. */
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

/* ---- send/recv ---------------------------------------------------------------------- */

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
