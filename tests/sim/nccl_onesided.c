/* Simulated NCCL one-sided operations (NCCL 2.29+): ncclPutSignal,
 * ncclSignal and ncclWaitSignal. A put copies into the peer's window
 * (mapped in this process, nccl_win.c) and then counts a signal in the
 * segment, which a wait watches; they are numbered and run like every
 * operation (nccl_group.c). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl_internal.h"

/* ---- progress ----------------------------------------------------------------------- */

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
        const struct trsim_wait_desc *d = &op->descs[i];
        if (atomic_load_explicit(trsim_shm_signal(&comm->shm, comm->rank, d->peer, d->slot),
                                 memory_order_acquire) < d->target)
            return 0;
    }
    return 1;
}

int trsim_onesided_progress(trsim_op *op)
{
    return op->kind == OP_WAITSIGNAL ? wait_progress(op) : rma_send_progress(op);
}

/* ---- the API -------------------------------------------------------------------------- */

static ncclResult_t check_slot(const char *name, int sigIdx, int ctx, int *slot)
{
    if (sigIdx < 0 || sigIdx >= TRSIM_RMA_SIGS)
        return OP_FAIL(ncclInvalidArgument, "%s: signal index %d out of range 0..%d", name, sigIdx, TRSIM_RMA_SIGS - 1);
    if (ctx < 0 || ctx >= TRSIM_RMA_CTXS)
        return OP_FAIL(ncclInvalidArgument, "%s: context %d out of range 0..%d", name, ctx, TRSIM_RMA_CTXS - 1);
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
    return OP_FAIL(ncclInvalidUsage, "%s called before RMA is initialized. Register a symmetric window first, or set "
                   "NCCL_RMA_EAGER_INIT=1 to initialize RMA at communicator creation.", name);
}

/* ncclPutSignal and ncclSignal: the peer need not take part. A put's
 * target is the peer's part of the window registration peerWin (this
 * rank's handle of it); its source must lie in a symmetric window
 * (NCCL_WIN_COLL_SYMMETRIC) of comm, as NCCL requires. */
static ncclResult_t enqueue_signal(trsim_op proto, cudaStream_t stream, ncclWindow_t peerWin, size_t peerWinOffset,
                                   int sigIdx, int ctx, unsigned int flags)
{
    const char *name = trsim_op_names[proto.kind];
    struct ncclComm *comm = proto.comm;
    ncclResult_t r = trsim_op_check_comm(comm, name);
    if (r != ncclSuccess) return r;
    if (flags != 0) return OP_FAIL(ncclInvalidArgument, "%s: flags %u is invalid (must be 0)", name, flags);
    if ((r = check_slot(name, sigIdx, ctx, &proto.slot)) != ncclSuccess) return r;
    if (proto.kind == OP_SIGNAL && (r = check_rma_ready(comm, name)) != ncclSuccess) return r;
    if (proto.root < 0 || proto.root >= comm->nranks)
        return OP_FAIL(ncclInvalidArgument, "%s: peer %d out of range 0..%d", name, proto.root, comm->nranks - 1);
    if (proto.kind == OP_PUTSIGNAL) {
        proto.elsize = trsim_dtype_size(proto.datatype);
        if (!proto.elsize) return OP_FAIL(ncclInvalidArgument, "%s: invalid datatype %d", name, proto.datatype);
        proto.bytes = proto.count * proto.elsize;
        if (!trsim_window_valid(comm, peerWin))
            return OP_FAIL(ncclInvalidArgument, "%s: peerWin is not a window registered on this communicator", name);
        size_t room = peerWin->peer_size[proto.root];
        if (peerWinOffset > room || proto.bytes > room - peerWinOffset)
            return OP_FAIL(ncclInvalidArgument, "%s: %zu bytes at offset %zu do not fit rank %d's window of %zu bytes",
                           name, proto.bytes, peerWinOffset, proto.root, room);
        if (!proto.sendbuff) return OP_FAIL(ncclInvalidArgument, "%s: localbuff is NULL", name);
        struct ncclWindow_vidmem *src = trsim_window_find(comm, proto.sendbuff, proto.bytes);
        if (!src || !(src->flags & NCCL_WIN_COLL_SYMMETRIC))
            return OP_FAIL(ncclInvalidArgument, "%s: localbuff %p is not in a valid symmetric window (one registered "
                           "on this communicator with NCCL_WIN_COLL_SYMMETRIC)", name, (const void *)proto.sendbuff);
        proto.put_dst = peerWin->peer_base[proto.root] + peerWinOffset;
    }
    trsim_stream *s;
    if (trsim_stream_get(stream, &s) != cudaSuccess) return OP_FAIL(ncclInvalidArgument, "%s: invalid stream", name);
    proto.stream = s;
    if (proto.kind == OP_PUTSIGNAL) {
        proto.win = peerWin;
        trsim_window_hold(peerWin);
    }
    r = trsim_op_submit(&proto);
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
    ncclResult_t r = trsim_op_check_comm(comm, name);
    if (r != ncclSuccess) return r;
    if (nDesc <= 0 || !signalDescs)
        return OP_FAIL(ncclInvalidArgument, "%s: %d descriptors at %p", name, nDesc, (void *)signalDescs);
    if ((r = check_rma_ready(comm, name)) != ncclSuccess) return r;
    trsim_op proto = {.kind = OP_WAITSIGNAL, .comm = comm, .datatype = ncclInt8, .root = -1, .ndesc = nDesc};
    struct trsim_wait_desc *descs = calloc((size_t)nDesc, sizeof *descs);
    if (!descs) return ncclSystemError;
    for (int i = 0; i < nDesc; i++) {
        const ncclWaitSignalDesc_t *d = &signalDescs[i];
        if (d->peer < 0 || d->peer >= comm->nranks || d->opCnt <= 0) {
            free(descs);
            return OP_FAIL(ncclInvalidArgument, "%s: descriptor %d: peer %d (of %d), opCnt %d", name, i, d->peer,
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
        return OP_FAIL(ncclInvalidArgument, "%s: invalid stream", name);
    }
    proto.stream = s;
    proto.descs = descs;
    r = trsim_op_submit(&proto);
    if (r != ncclSuccess && r != ncclInProgress) free(descs);   /* submit keeps it only on success */
    return r;
}
