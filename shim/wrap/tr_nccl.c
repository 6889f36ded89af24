/* NCCL call records: the collective, send/recv and group wrappers, their
 * records in the ring file, sequence numbers, communicator fingerprints, and
 * the "calls" part of a trace.
 *
 * A record is taken from the ring (tr_ring.h) when the call enters (one
 * atomic add, so records are in entry order and appends from many threads
 * never lock), committed once its entry fields are written, and completed
 * when the call returns: a call that never returns stays visible with exit
 * null, in the JSON trace and in the ring file a killed process leaves.
 * The ring keeps the newest TRSHIM_RING records; older ones are overwritten.
 * Sequence numbers are taken when the call returns ncclSuccess or
 * ncclInProgress; a failed call gets 0. Until it returns, a record shows the
 * number it would get.
 *
 * wrap/ (tr_core.h's folders): the top of the shim, which no other file calls
 * (the lifecycle and memory wrappers are referenced by the check below). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "tr_record.h"
#include "tr_stacks.h"
#include "tr_core.h"
#include "tr_init.h"
#include "tr_nancheck.h"

#define TR_TLS __thread __attribute__((tls_model("initial-exec")))

/* Every WRAP row of the vocabulary (trshim/nccl_calls.h) must be defined by
 * the shim (here, tr_lifecycle.c or tr_memory.c): referencing each one makes
 * a missing wrapper a link error (the shim links with -z defs and without
 * libnccl). */
#define REF_WRAP(name) (void (*)(void)) & name,
#define REF_PASS(name)
#define REF_ROW(name, op, kind, since, action) REF_##action(name)
__attribute__((used)) static void (*const wrapped_functions[])(void) = {TR_NCCL_FUNCS(REF_ROW)};

/* The return fields of record ri, unless the ring went round while the
 * call ran and the slot holds a newer record now. */
static void rec_return(trr_record *r, uint64_t ri, uint64_t seq, ncclResult_t rc)
{
    if (__atomic_load_n(&r->stamp, __ATOMIC_ACQUIRE) != ri + 1) return;
    __atomic_store_n(&r->seq, seq, __ATOMIC_RELAXED);
    /* atomic: the writer thread may be reading the record (tr_ring_read) */
    __atomic_store_n(&r->rc, (int32_t)rc, __ATOMIC_RELAXED);
    __atomic_store_n(&r->exit_ns, tr_now_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&r->state, TRR_REC_RETURNED, __ATOMIC_RELEASE);
}

/* ---- one call -------------------------------------------------------------------- */

typedef struct {
    trr_record *r;                 /* NULL: no ring */
    uint64_t ri;                   /* index of r */
    tr_comm *c;
    int32_t ci;
    ncclComm_t h;
    int op, peer;
    int dir;                       /* TR_P2P_* of a per-peer call, -1 for a collective */
    uint64_t n;                    /* how many it counts for its peer (WaitSignal: opCnt) */
    int32_t dtype, redop, device;
    int capturing;                 /* CAPT_*, asked only when there is a record */
    uint64_t count;
    uint64_t capture_id;           /* capturing: CUDA's id of the capture (0: unknown) */
    trr_graph_call tpl;            /* capturing: the call as its graph keeps it */
    int32_t st, pst;               /* where it was called (a failed call's error: tr_crash.c) */
} call_ctx;

/* A call on a capturing stream runs at each launch of its graph, not now:
 * it takes no number; its graph keeps it (tr_graphs.h) and each launch
 * numbers it (tr_graph_api.c). */
static __attribute__((noinline)) void capture_begin(call_ctx *x, int32_t st, int32_t pst, const void *sb,
                                                    const void *rb, cudaStream_t s, uint64_t extra)
{
    if (tr_cuda_capture_id(s, &x->capture_id) < 0)
        tr_warn("graphs: the capture of a capturing stream could not be asked (no cuStreamGetCaptureInfo); "
                "launches of its graph do not number its NCCL calls");
    x->tpl = (trr_graph_call){.op = (uint8_t)x->op, .lane = (uint8_t)(x->dir >= 0 ? x->dir : TRR_LANE_COLL),
                              .comm = x->ci, .dtype = x->dtype, .redop = x->redop, .root = x->peer,
                              .stack = st, .pystack = pst, .count = x->count, .sendbuff = (uintptr_t)sb,
                              .recvbuff = (uintptr_t)rb, .stream = (uintptr_t)s, .n = x->n, .extra = extra};
}

/* Inlined into each wrapper, so that tr_stack_capture is called from it. */
static inline __attribute__((always_inline)) void call_begin(call_ctx *x, int op, ncclComm_t comm, size_t count,
                                                             ncclDataType_t dt, int redop, int root,
                                                             const void *sb, const void *rb, cudaStream_t s,
                                                             uint64_t extra)
{
    uint64_t t = tr_now_ns();
    int32_t st = tr_stack_capture();
    int32_t pst = tr_pystack_capture();
    x->st = st;
    x->pst = pst;
    x->op = op;
    x->h = comm;
    x->peer = root;
    x->dtype = (int32_t)dt;
    x->redop = redop;
    x->count = count;
    x->dir = op == OP_SEND ? TR_P2P_SEND : op == OP_RECV ? TR_P2P_RECV
           : op == OP_PUTSIGNAL || op == OP_SIGNAL ? TR_P2P_SIGNAL : op == OP_WAITSIGNAL ? TR_P2P_WAIT : -1;
    x->n = op == OP_WAITSIGNAL ? count : 1;
    x->ci = tr_comm_lookup(comm);
    x->c = tr_comm_at(x->ci);
    if (x->c && !atomic_load_explicit(&x->c->resolved, memory_order_relaxed)) tr_comm_resolve(x->c, comm);
    x->capturing = CAPT_NO;
    trr_record *r = x->r = tr_ring_alloc(&x->ri);
    if (!r) return;
    x->device = x->c ? atomic_load_explicit(&x->c->device, memory_order_relaxed) : tr_cuda_device();
    int capturing = tr_cuda_stream_capturing(s);
    x->capturing = capturing < 0 ? CAPT_UNKNOWN : capturing ? CAPT_YES : CAPT_NO;
    if (__builtin_expect(x->capturing == CAPT_YES, 0))
        capture_begin(x, st, pst, sb, rb, s, extra);
    r->op = (uint8_t)op;
    r->depth = (uint8_t)(tr_group_depth() < 255 ? tr_group_depth() : 255);
    r->comm = x->ci;
    r->dtype = (int32_t)dt;
    r->redop = redop;
    r->root = root;
    r->stack = st;
    r->tid = tr_tid();
    r->device = x->device;
    r->group = tr_group_current();
    r->pystack = pst;
    r->count = count;
    r->sendbuff = (uintptr_t)sb;
    r->recvbuff = (uintptr_t)rb;
    r->stream = (uintptr_t)s;
    r->capturing = (uint8_t)x->capturing;
    r->enter_ns = t;
    r->extra = extra;
    uint64_t seq = 0;
    if (x->c && x->capturing != CAPT_YES) {
        if (x->dir >= 0) seq = tr_comm_p2p(x->c, comm, root, x->dir, x->n, 0);
        else seq = atomic_load_explicit(&x->c->colls, memory_order_relaxed) + 1;
    }
    r->seq = seq;
    r->state = TRR_REC_ENTERED;
    tr_ring_commit(r, x->ri);
}

/* ---- the calls of this thread's outermost group -------------------------------- */

/* NCCL issues none of the calls of a group that ncclGroupSimulateEnd ends
 * (it only estimates their time): their numbers are given back, their
 * records get seq 0, and each communicator's fingerprint returns to its
 * state before the group. */
typedef struct {
    uint64_t ri;                   /* its record, UINT64_MAX: none */
    tr_comm *c;
    int dir, peer;
    uint64_t n;
    uint64_t colls, fp_seq, fp_hash;   /* the communicator's ring slot before this collective */
    uint32_t fp_step;
} group_entry;
static TR_TLS group_entry *t_gcalls;
static TR_TLS int t_ngcalls, t_capgcalls;

static void group_note(const call_ctx *x)
{
    if (t_ngcalls == t_capgcalls) {
        int cap = t_capgcalls ? 2 * t_capgcalls : 64;
        group_entry *g = realloc(t_gcalls, (size_t)cap * sizeof *g);
        if (!g) {
            tr_warn("no memory to remember a group's calls: a simulated group (ncclGroupSimulateEnd) may "
                    "leave sequence numbers off by its calls");
            return;
        }
        t_gcalls = g;
        t_capgcalls = cap;
    }
    group_entry *e = &t_gcalls[t_ngcalls++];
    *e = (group_entry){.ri = x->r ? x->ri : UINT64_MAX, .c = x->c, .dir = x->dir, .peer = x->peer, .n = x->n};
    trr_comm *k = x->c->ring;
    if (x->dir < 0 && k) {
        e->colls = k->colls;
        e->fp_seq = k->fp_seq;
        e->fp_hash = k->fp_hash;
        e->fp_step = k->fp_step;
    }
}

/* The fingerprint of c as it was before entry e's collective. Checkpoints
 * past that point are dropped; when the array was compacted meanwhile (the
 * step doubled) some older ones are gone too, which only leaves fewer
 * points to compare. Stored in tr_comm_fp_note's order (see there). */
static void fp_restore(trr_comm *k, const group_entry *e)
{
    uint32_t n = __atomic_load_n(&k->ncheckpoints, __ATOMIC_RELAXED), m = 0;
    while (m < n && m < TRR_COMM_CHECKPOINTS && k->checkpoints[m].seq <= e->fp_seq) m++;
    __atomic_store_n(&k->ncheckpoints, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&k->fp_step, e->fp_step, __ATOMIC_RELEASE);
    __atomic_store_n(&k->ncheckpoints, m, __ATOMIC_RELEASE);
    __atomic_store_n(&k->fp_seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&k->fp_hash, e->fp_hash, __ATOMIC_RELEASE);
    __atomic_store_n(&k->fp_seq, e->fp_seq, __ATOMIC_RELEASE);
    __atomic_store_n(&k->colls, e->colls, __ATOMIC_RELEASE);
}

static void group_give_back(void)
{
    for (int i = t_ngcalls - 1; i >= 0; i--) {
        const group_entry *e = &t_gcalls[i];
        if (e->dir >= 0) {
            tr_comm_p2p(e->c, NULL, e->peer, e->dir, (uint64_t)0 - e->n, 1);
        } else {
            atomic_fetch_sub(&e->c->colls, 1);
            if (e->c->ring) fp_restore(e->c->ring, e);
        }
        trr_record *r = e->ri != UINT64_MAX ? tr_ring_get(e->ri) : NULL;
        if (r) __atomic_store_n(&r->seq, 0, __ATOMIC_RELEASE);
    }
    t_ngcalls = 0;
}

static void group_forget(void)
{
    t_ngcalls = 0;
    if (t_capgcalls > 4096) {          /* a huge group once: give the memory back */
        free(t_gcalls);
        t_gcalls = NULL;
        t_capgcalls = 0;
    }
}

/* A call that returned an error (ncclSystemError, ncclRemoteError...): the
 * rank's first NCCL error, if it is (tr_crash.c) */
static __attribute__((noinline, cold)) void call_error(const call_ctx *x, ncclResult_t rc)
{
    char api[48];
    snprintf(api, sizeof api, "nccl%s", x->op >= 0 && x->op < TR_OP_N ? tr_op_names[x->op] : "?");
    tr_crash_error(TRR_ERR_NCCL, (int)rc, NULL, api, x->st, x->pst, x->ci);
}

static void call_end(call_ctx *x, ncclResult_t rc)
{
    uint64_t seq = 0;
    if (__builtin_expect(rc != ncclSuccess && rc != ncclInProgress, 0)) call_error(x, rc);
    if (x->capturing == CAPT_YES) {
        if (x->c && (rc == ncclSuccess || rc == ncclInProgress)) tr_graph_capture_call(x->capture_id, &x->tpl, x->h);
    } else if (x->c && (rc == ncclSuccess || rc == ncclInProgress)) {
        if (tr_group_depth() > 0) group_note(x);
        if (x->dir >= 0) {
            seq = tr_comm_p2p(x->c, x->h, x->peer, x->dir, x->n, 1);
        } else {
            seq = atomic_fetch_add(&x->c->colls, 1) + 1;
            tr_comm_note_last(x->c, x->ci, seq);
            tr_comm_fp_note(x->c, seq, x->op, x->dtype, x->redop, x->peer, x->count);
        }
    }
    if (x->r) rec_return(x->r, x->ri, seq, rc);
}

/* Completion on the GPU (tr_complete.c): an event after the call, or
 * remembered for the outermost GroupEnd. */
static inline void call_complete(const call_ctx *x, cudaStream_t s, ncclResult_t rc)
{
    if (!x->r) return;
    int capturing = x->capturing == CAPT_YES ? 1 : x->capturing == CAPT_NO ? 0 : -1;
    if (tr_group_depth() > 0) tr_complete_group_call(x->ri, s, capturing);
    else tr_complete_after(x->ri, s, capturing, rc);
}

/* ---- NaN/Inf checks (tr_nancheck.c) -------------------------------------------------- */

static __attribute__((noinline)) void nan_fill(tr_nan_call *nc, const call_ctx *x, int nop, size_t count,
                                               ncclDataType_t dt, int root, const void *sb, const void *rb,
                                               cudaStream_t s)
{
    tr_comm *c = x->c;
    *nc = (tr_nan_call){.rec = x->ri, .op = nop, .dtype = (int)dt, .count = count, .sendbuff = sb,
                        .recvbuff = rb, .root = root, .comm = x->h, .comm_index = x->ci,
                        .nranks = c ? atomic_load(&c->size) : -1, .rank = c ? atomic_load(&c->rank) : -1,
                        .device = x->device, .blocking = c ? c->blocking : 1, .stream = s,
                        .capturing = x->capturing == CAPT_YES ? 1 : x->capturing == CAPT_NO ? 0 : -1};
}

/* Before the real AllReduce, ReduceScatter or Reduce of a floating type:
 * the input check (inside a group: remembered for the outermost GroupEnd).
 * Returns 0 when the call gets no checks, else 1 (2: inside a group). */
static inline __attribute__((always_inline)) int nan_begin(tr_nan_call *nc, const call_ctx *x, int op,
                                                           size_t count, ncclDataType_t dt, int root,
                                                           const void *sb, const void *rb, cudaStream_t s)
{
    int nop = op == OP_ALLREDUCE       ? TR_NAN_OP_ALLREDUCE
              : op == OP_REDUCESCATTER ? TR_NAN_OP_REDUCESCATTER
              : op == OP_REDUCE        ? TR_NAN_OP_REDUCE
                                       : -1;
    if (nop < 0 || !x->r || !tr_nan_wanted((int)dt)) return 0;
    nan_fill(nc, x, nop, count, dt, root, sb, rb, s);
    int in_group = tr_group_depth() > 0;
    tr_nan_before(nc, in_group);
    return 1 + in_group;
}

/* ---- wrappers -------------------------------------------------------------------- */

/* name, op code, parameters, arguments, then what call_begin records */
#define CALL_WRAPPER(name, opc, params, args, count, dt, redop, root, sb, rb, extra)    \
    TR_API ncclResult_t name params                                                    \
    {                                                                                  \
        typedef ncclResult_t(*fn_t) params;                                            \
        TR_REAL(real, fn_t, #name, TR_LIB_NCCL);                                       \
        if (!real) NO_REAL(#name);                                                     \
        if (!tr_enter()) {                                                             \
            ncclResult_t r0 = real args;                                               \
            tr_leave();                                                                \
            return r0;                                                                 \
        }                                                                              \
        call_ctx x;                                                                    \
        call_begin(&x, opc, comm, count, dt, redop, root, sb, rb, stream, extra);      \
        tr_nan_call nc;                                                                \
        int chk = nan_begin(&nc, &x, opc, count, dt, root, sb, rb, stream);            \
        ncclResult_t r = real args;                                                    \
        call_end(&x, r);                                                               \
        call_complete(&x, stream, r);                                                  \
        if (chk) tr_nan_after(&nc, chk == 2, r);                                       \
        tr_leave();                                                                    \
        return r;                                                                      \
    }

/* A collective through its plain entry point and its *Config twin (NCCL
 * 2.31): the same operation and sequence numbers; the twin's record says
 * it came through *Config and which config it passed. */
#define PLAIN 0
#define CONFIG (TRR_EXTRA_CONFIG | tr_config_note(config))
#define COLL_CONFIG_ARG , const ncclCollConfig_t *config

#define ALLREDUCE_P(cfg) (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, \
                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream cfg)
#define ALLREDUCE_A(...) (sendbuff, recvbuff, count, datatype, op, comm, stream __VA_ARGS__)
CALL_WRAPPER(ncclAllReduce, OP_ALLREDUCE, ALLREDUCE_P(), ALLREDUCE_A(), count, datatype, (int)op, NONE, sendbuff,
             recvbuff, PLAIN)
CALL_WRAPPER(ncclAllReduceConfig, OP_ALLREDUCE, ALLREDUCE_P(COLL_CONFIG_ARG), ALLREDUCE_A(, config), count,
             datatype, (int)op, NONE, sendbuff, recvbuff, CONFIG)

#define BROADCAST_P(cfg) (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, \
                          ncclComm_t comm, cudaStream_t stream cfg)
#define BROADCAST_A(...) (sendbuff, recvbuff, count, datatype, root, comm, stream __VA_ARGS__)
CALL_WRAPPER(ncclBroadcast, OP_BROADCAST, BROADCAST_P(), BROADCAST_A(), count, datatype, NONE, root, sendbuff,
             recvbuff, PLAIN)
CALL_WRAPPER(ncclBroadcastConfig, OP_BROADCAST, BROADCAST_P(COLL_CONFIG_ARG), BROADCAST_A(, config), count,
             datatype, NONE, root, sendbuff, recvbuff, CONFIG)
CALL_WRAPPER(ncclBcast, OP_BCAST,
             (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream),
             (buff, count, datatype, root, comm, stream), count, datatype, NONE, root, buff, buff, PLAIN)

#define REDUCE_P(cfg) (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, \
                       ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream cfg)
#define REDUCE_A(...) (sendbuff, recvbuff, count, datatype, op, root, comm, stream __VA_ARGS__)
CALL_WRAPPER(ncclReduce, OP_REDUCE, REDUCE_P(), REDUCE_A(), count, datatype, (int)op, root, sendbuff, recvbuff,
             PLAIN)
CALL_WRAPPER(ncclReduceConfig, OP_REDUCE, REDUCE_P(COLL_CONFIG_ARG), REDUCE_A(, config), count, datatype, (int)op,
             root, sendbuff, recvbuff, CONFIG)

#define ALLGATHER_P(cfg) (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, \
                          ncclComm_t comm, cudaStream_t stream cfg)
#define ALLGATHER_A(...) (sendbuff, recvbuff, sendcount, datatype, comm, stream __VA_ARGS__)
CALL_WRAPPER(ncclAllGather, OP_ALLGATHER, ALLGATHER_P(), ALLGATHER_A(), sendcount, datatype, NONE, NONE, sendbuff,
             recvbuff, PLAIN)
CALL_WRAPPER(ncclAllGatherConfig, OP_ALLGATHER, ALLGATHER_P(COLL_CONFIG_ARG), ALLGATHER_A(, config), sendcount,
             datatype, NONE, NONE, sendbuff, recvbuff, CONFIG)

#define REDUCESCATTER_P(cfg) (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, \
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream cfg)
#define REDUCESCATTER_A(...) (sendbuff, recvbuff, recvcount, datatype, op, comm, stream __VA_ARGS__)
CALL_WRAPPER(ncclReduceScatter, OP_REDUCESCATTER, REDUCESCATTER_P(), REDUCESCATTER_A(), recvcount, datatype,
             (int)op, NONE, sendbuff, recvbuff, PLAIN)
CALL_WRAPPER(ncclReduceScatterConfig, OP_REDUCESCATTER, REDUCESCATTER_P(COLL_CONFIG_ARG), REDUCESCATTER_A(, config),
             recvcount, datatype, (int)op, NONE, sendbuff, recvbuff, CONFIG)

#define ALLTOALL_P(cfg) (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, \
                         ncclComm_t comm, cudaStream_t stream cfg)
#define ALLTOALL_A(...) (sendbuff, recvbuff, count, datatype, comm, stream __VA_ARGS__)
CALL_WRAPPER(ncclAlltoAll, OP_ALLTOALL, ALLTOALL_P(), ALLTOALL_A(), count, datatype, NONE, NONE, sendbuff, recvbuff,
             PLAIN)
CALL_WRAPPER(ncclAlltoAllConfig, OP_ALLTOALL, ALLTOALL_P(COLL_CONFIG_ARG), ALLTOALL_A(, config), count, datatype,
             NONE, NONE, sendbuff, recvbuff, CONFIG)

/* Gather and Scatter have Broadcast's parameters */
CALL_WRAPPER(ncclGather, OP_GATHER, BROADCAST_P(), BROADCAST_A(), count, datatype, NONE, root, sendbuff, recvbuff,
             PLAIN)
CALL_WRAPPER(ncclGatherConfig, OP_GATHER, BROADCAST_P(COLL_CONFIG_ARG), BROADCAST_A(, config), count, datatype, NONE,
             root, sendbuff, recvbuff, CONFIG)
CALL_WRAPPER(ncclScatter, OP_SCATTER, BROADCAST_P(), BROADCAST_A(), count, datatype, NONE, root, sendbuff, recvbuff,
             PLAIN)
CALL_WRAPPER(ncclScatterConfig, OP_SCATTER, BROADCAST_P(COLL_CONFIG_ARG), BROADCAST_A(, config), count, datatype,
             NONE, root, sendbuff, recvbuff, CONFIG)

CALL_WRAPPER(ncclSend, OP_SEND,
             (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream),
             (sendbuff, count, datatype, peer, comm, stream), count, datatype, NONE, peer, sendbuff, NULL, PLAIN)
CALL_WRAPPER(ncclRecv, OP_RECV,
             (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream),
             (recvbuff, count, datatype, peer, comm, stream), count, datatype, NONE, peer, NULL, recvbuff, PLAIN)

/* One-sided (NCCL 2.29): signals numbered per (communicator, peer) like
 * sends; the signal's index and context in record.extra. */
#define SIGNAL_EXTRA ((uint64_t)(uint32_t)sigIdx | (uint64_t)(uint32_t)ctx << 32)
CALL_WRAPPER(ncclPutSignal, OP_PUTSIGNAL,
             (const void *localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
              size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream),
             (localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, comm, stream), count,
             datatype, NONE, peer, localbuff, NULL, SIGNAL_EXTRA)
CALL_WRAPPER(ncclSignal, OP_SIGNAL,
             (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream),
             (peer, sigIdx, ctx, flags, comm, stream), 0, (ncclDataType_t)NONE, NONE, peer, NULL, NULL, SIGNAL_EXTRA)

/* WaitSignal: one record per descriptor (the peer, opCnt signals, the
 * number reached), the first WAIT_RECORDS of them; the rest are counted. */
#define WAIT_RECORDS 16
static inline __attribute__((always_inline)) uint64_t desc_extra(const ncclWaitSignalDesc_t *d)
{
    return (uint64_t)(uint32_t)d->sigIdx | (uint64_t)(uint32_t)d->ctx << 32;
}

TR_API ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                                   cudaStream_t stream)
{
    typedef ncclResult_t (*fn_t)(int, ncclWaitSignalDesc_t *, ncclComm_t, cudaStream_t);
    TR_REAL(real, fn_t, "ncclWaitSignal", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclWaitSignal");
    if (!tr_enter() || nDesc <= 0 || !signalDescs) {
        ncclResult_t r0 = real(nDesc, signalDescs, comm, stream);
        tr_leave();
        return r0;
    }
    call_ctx x[WAIT_RECORDS];
    int n = nDesc < WAIT_RECORDS ? nDesc : WAIT_RECORDS;
    /* copied first: the application may reuse the array once the call returned */
    ncclWaitSignalDesc_t d[WAIT_RECORDS];
    for (int i = 0; i < n; i++) {
        d[i] = signalDescs[i];
        call_begin(&x[i], OP_WAITSIGNAL, comm, d[i].opCnt > 0 ? (size_t)d[i].opCnt : 0, (ncclDataType_t)NONE, NONE,
                   d[i].peer, NULL, NULL, stream, desc_extra(&d[i]));
    }
    ncclResult_t r = real(nDesc, signalDescs, comm, stream);
    for (int i = 0; i < n; i++) {
        call_end(&x[i], r);
        call_complete(&x[i], stream, r);
    }
    /* descriptors without a record still count for their peers */
    tr_comm *c = n && x[0].capturing != CAPT_YES ? x[0].c : NULL;
    for (int i = n; c && i < nDesc && (r == ncclSuccess || r == ncclInProgress); i++)
        if (signalDescs[i].opCnt > 0)
            tr_comm_p2p(c, comm, signalDescs[i].peer, TR_P2P_WAIT, (uint64_t)signalDescs[i].opCnt, 1);
    tr_leave();
    return r;
}

/* GroupStart / GroupEnd: records with the group's number and depth. */
static inline __attribute__((always_inline)) trr_record *group_begin(int op, uint64_t *ri)
{
    uint64_t t = tr_now_ns();
    int32_t st = tr_stack_capture();
    int32_t pst = tr_pystack_capture();
    if (op == OP_GROUPSTART) tr_group_start();
    trr_record *r = tr_ring_alloc(ri);
    if (!r) return NULL;
    r->op = (uint8_t)op;
    r->depth = (uint8_t)(tr_group_depth() < 255 ? tr_group_depth() : 255);
    r->comm = -1;
    r->dtype = r->redop = r->root = NONE;
    r->stack = st;
    r->tid = tr_tid();
    r->device = tr_cuda_device();
    r->group = tr_group_current();
    r->pystack = pst;
    r->capturing = CAPT_UNKNOWN;
    r->enter_ns = t;
    r->state = TRR_REC_ENTERED;
    tr_ring_commit(r, *ri);
    return r;
}

TR_API ncclResult_t ncclGroupStart(void)
{
    typedef ncclResult_t (*fn_t)(void);
    TR_REAL(real, fn_t, "ncclGroupStart", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclGroupStart");
    if (!tr_enter()) {
        ncclResult_t r0 = real();
        tr_leave();
        return r0;
    }
    uint64_t ri;
    trr_record *rec = group_begin(OP_GROUPSTART, &ri);
    ncclResult_t r = real();
    if (rec) rec_return(rec, ri, 0, r);
    tr_leave();
    return r;
}

/* The end of a group: ncclGroupEnd (simulate = 0) or ncclGroupSimulateEnd
 * (1: the calls of the outermost group are not issued, see group_give_back). */
static inline __attribute__((always_inline)) ncclResult_t group_end(int simulate, ncclResult_t (*real_end)(void),
                                                                    ncclResult_t (*real_sim)(ncclSimInfo_t *),
                                                                    ncclSimInfo_t *info)
{
    uint64_t ri;
    trr_record *rec = group_begin(simulate ? OP_GROUPSIMULATEEND : OP_GROUPEND, &ri);
    int outermost = tr_group_depth() == 1;
    if (outermost && !simulate) tr_nan_group_end_before();   /* input checks of the group's calls */
    ncclResult_t r = simulate ? real_sim(info) : real_end();
    tr_group_ended(r);
    if (outermost) {
        /* completion events and output checks of the group's calls; none for calls never issued */
        tr_complete_group_end(simulate ? ncclInvalidUsage : r);
        tr_nan_group_end_after(simulate ? ncclInvalidUsage : r);
        if (simulate) group_give_back();
        else group_forget();
    }
    if (rec) rec_return(rec, ri, 0, r);
    if (__builtin_expect(r != ncclSuccess && r != ncclInProgress, 0))
        tr_crash_error(TRR_ERR_NCCL, (int)r, NULL, simulate ? "ncclGroupSimulateEnd" : "ncclGroupEnd",
                       rec ? rec->stack : -1, rec ? rec->pystack : -1, -1);
    return r;
}

TR_API ncclResult_t ncclGroupEnd(void)
{
    typedef ncclResult_t (*fn_t)(void);
    TR_REAL(real, fn_t, "ncclGroupEnd", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclGroupEnd");
    if (!tr_enter()) {
        ncclResult_t r0 = real();
        tr_leave();
        return r0;
    }
    ncclResult_t r = group_end(0, real, NULL, NULL);
    tr_leave();
    return r;
}

TR_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    typedef ncclResult_t (*fn_t)(ncclSimInfo_t *);
    TR_REAL(real, fn_t, "ncclGroupSimulateEnd", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclGroupSimulateEnd");
    if (!tr_enter()) {
        ncclResult_t r0 = real(simInfo);
        tr_leave();
        return r0;
    }
    ncclResult_t r = group_end(1, NULL, real, simInfo);
    tr_leave();
    return r;
}

/* ncclCommGetAsyncError: called through unchanged (a watchdog polls it:
 * one comparison added); an error it reports for the communicator
 * (ncclRemoteError after a peer died, ncclSystemError...) is the rank's
 * first NCCL error, if it is, with where it was asked (tr_crash.c) */
/* inlined: tr_stack_capture is called from the wrapper */
static inline __attribute__((always_inline)) void async_error(ncclComm_t comm, ncclResult_t e)
{
    if (tr_enter()) {
        int32_t st = tr_stack_capture();
        int32_t pst = tr_pystack_capture();
        int32_t ci = tr_comm_lookup(comm);
        tr_crash_error(TRR_ERR_NCCL, (int)e, NULL, "ncclCommGetAsyncError", st, pst, ci);
        tr_complete_aborting(ci);      /* a communicator in error completes nothing more */
    }
    tr_leave();
}

TR_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t, ncclResult_t *);
    TR_REAL(real, fn_t, "ncclCommGetAsyncError", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommGetAsyncError");
    ncclResult_t r = real(comm, asyncError);
    if (__builtin_expect(r == ncclSuccess && asyncError && *asyncError != ncclSuccess && *asyncError != ncclInProgress,
                         0)) {
        int saved = errno;
        async_error(comm, *asyncError);
        errno = saved;
    }
    return r;
}
