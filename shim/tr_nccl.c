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
 * number it would get. */
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "tr_complete.h"
#include "tr_nancheck.h"
#include "tr_nccl_int.h"

#define TR_TLS __thread __attribute__((tls_model("initial-exec")))

enum { OP_ALLREDUCE, OP_BROADCAST, OP_BCAST, OP_REDUCE, OP_ALLGATHER, OP_REDUCESCATTER, OP_ALLTOALL,
       OP_GATHER, OP_SCATTER, OP_SEND, OP_RECV, OP_GROUPSTART, OP_GROUPEND };
_Static_assert((int)OP_GROUPEND == (int)TRR_OP_GROUPEND && (int)OP_SEND == (int)TRR_OP_SEND, "ring ops are the JSON ops");
static const char *const op_names[] = {"AllReduce", "Broadcast", "Bcast", "Reduce", "AllGather",
                                       "ReduceScatter", "AlltoAll", "Gather", "Scatter", "Send", "Recv",
                                       "GroupStart", "GroupEnd"};
static const char *const dtype_names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                                          "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
static const char *const redop_names[] = {"sum", "prod", "max", "min", "avg"};

#define NONE TRR_NONE    /* no reduction op / root / peer */
enum { CAPT_NO = TRR_CAPT_NO, CAPT_YES = TRR_CAPT_YES, CAPT_UNKNOWN = TRR_CAPT_UNKNOWN };

static atomic_uint g_groups;          /* outermost groups numbered */
/* the window of records the last tr_nccl_write_json wrote (writer thread only) */
static uint64_t g_win_first, g_win_next;

static TR_TLS int t_gdepth;           /* this thread's group nesting */
static TR_TLS uint32_t t_gnum;        /* its current outermost group */

#define MAX_DEV 64
static _Atomic uint64_t g_last[MAX_DEV + 1];   /* (comm index + 1) << 40 | seq; [0]: any device */
#define SEQ_MASK ((1ull << 40) - 1)

uint32_t tr_group_current(void) { return t_gdepth > 0 ? t_gnum : 0; }
uint64_t tr_nccl_dropped(void) { return g_win_first; }

void tr_nccl_window(uint64_t *first, uint64_t *next)
{
    *first = g_win_first;
    *next = g_win_next;
}

/* The return fields of record ri, unless the ring went round while the
 * call ran and the slot holds a newer record now. */
static void rec_return(trr_record *r, uint64_t ri, uint64_t seq, ncclResult_t rc)
{
    if (__atomic_load_n(&r->stamp, __ATOMIC_ACQUIRE) != ri + 1) return;
    __atomic_store_n(&r->seq, seq, __ATOMIC_RELAXED);
    r->rc = (int32_t)rc;
    r->exit_ns = tr_now_ns();
    __atomic_store_n(&r->state, TRR_REC_RETURNED, __ATOMIC_RELEASE);
}

/* ---- CUDA queries that leave the application's error state alone ------------- */

typedef cudaError_t (*err_fn)(void);

int tr_cuda_device(void)
{
    typedef cudaError_t (*getdev_fn)(int *);
    TR_REAL_OPT(peek, err_fn, "cudaPeekAtLastError", TR_LIB_CUDART);
    TR_REAL_OPT(getdev, getdev_fn, "cudaGetDevice", TR_LIB_CUDART);
    TR_REAL_OPT(getlast, err_fn, "cudaGetLastError", TR_LIB_CUDART);
    if (!peek || !getdev || peek() != cudaSuccess) return -1;
    int d = -1;
    if (getdev(&d) != cudaSuccess) {
        if (getlast) getlast();      /* the error was ours: back to the clean state */
        return -1;
    }
    return d;
}

static int stream_capturing(cudaStream_t s)
{
    typedef cudaError_t (*cap_fn)(cudaStream_t, enum cudaStreamCaptureStatus *);
    TR_REAL_OPT(peek, err_fn, "cudaPeekAtLastError", TR_LIB_CUDART);
    TR_REAL_OPT(iscap, cap_fn, "cudaStreamIsCapturing", TR_LIB_CUDART);
    TR_REAL_OPT(getlast, err_fn, "cudaGetLastError", TR_LIB_CUDART);
    if (!peek || !iscap || peek() != cudaSuccess) return CAPT_UNKNOWN;
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (iscap(s, &st) != cudaSuccess) {
        if (getlast) getlast();
        return CAPT_UNKNOWN;
    }
    return st == cudaStreamCaptureStatusNone ? CAPT_NO : CAPT_YES;
}

/* ---- one call -------------------------------------------------------------------- */

typedef struct {
    trr_record *r;                 /* NULL: no ring */
    uint64_t ri;                   /* index of r */
    tr_comm *c;
    int32_t ci;
    ncclComm_t h;
    int op, peer;
    int32_t dtype, redop, device;
    int capturing;                 /* CAPT_*, asked only when there is a record */
    uint64_t count;
} call_ctx;

/* Inlined into each wrapper, so that tr_stack_capture is called from it. */
static inline __attribute__((always_inline)) void call_begin(call_ctx *x, int op, ncclComm_t comm, size_t count,
                                                             ncclDataType_t dt, int redop, int root,
                                                             const void *sb, const void *rb, cudaStream_t s)
{
    uint64_t t = tr_now_ns();
    int32_t st = tr_stack_capture();
    int32_t pst = tr_pystack_capture();
    x->op = op;
    x->h = comm;
    x->peer = root;
    x->dtype = (int32_t)dt;
    x->redop = redop;
    x->count = count;
    x->ci = tr_comm_lookup(comm);
    x->c = tr_comm_at(x->ci);
    if (x->c && !atomic_load_explicit(&x->c->resolved, memory_order_relaxed)) tr_comm_resolve(x->c, comm);
    trr_record *r = x->r = tr_ring_alloc(&x->ri);
    if (!r) return;
    x->device = x->c ? atomic_load_explicit(&x->c->device, memory_order_relaxed) : tr_cuda_device();
    x->capturing = stream_capturing(s);
    r->op = (uint8_t)op;
    r->depth = (uint8_t)(t_gdepth < 255 ? t_gdepth : 255);
    r->comm = x->ci;
    r->dtype = (int32_t)dt;
    r->redop = redop;
    r->root = root;
    r->stack = st;
    r->tid = tr_tid();
    r->device = x->device;
    r->group = t_gdepth > 0 ? t_gnum : 0;
    r->pystack = pst;
    r->count = count;
    r->sendbuff = (uintptr_t)sb;
    r->recvbuff = (uintptr_t)rb;
    r->stream = (uintptr_t)s;
    r->capturing = (uint8_t)x->capturing;
    r->enter_ns = t;
    uint64_t seq = 0;
    if (x->c) {
        if (op == OP_SEND || op == OP_RECV) seq = tr_comm_p2p(x->c, comm, root, op == OP_RECV, 0);
        else seq = atomic_load_explicit(&x->c->colls, memory_order_relaxed) + 1;
    }
    r->seq = seq;
    r->state = TRR_REC_ENTERED;
    tr_ring_commit(r, x->ri);
}

static void note_last(tr_comm *c, int32_t ci, uint64_t seq)
{
    uint64_t v = ((uint64_t)(ci + 1) << 40) | (seq & SEQ_MASK);
    int d = atomic_load_explicit(&c->device, memory_order_relaxed);
    atomic_store_explicit(&g_last[0], v, memory_order_release);
    if (d >= 0 && d < MAX_DEV) atomic_store_explicit(&g_last[d + 1], v, memory_order_release);
}

/* splitmix64's finalizer (the fingerprint's mixing function) */
static inline uint64_t fp_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Collective number s of communicator c enters its fingerprint (see
 * docs/trace-format.md, "Fingerprints"): a few multiplies per collective,
 * stored into its ring slot, which only this call's thread writes (NCCL
 * calls on one communicator are serialized by the application). Each
 * store is ordered so that a process killed at any instant leaves either
 * the old or the new value: fp_seq is 0 while fp_hash changes, and the
 * checkpoint count is 0 while checkpoints move. */
static void fp_note(tr_comm *c, uint64_t s, const call_ctx *x)
{
    trr_comm *k = c->ring;
    if (!k) return;
    uint64_t op = x->op == OP_BCAST ? OP_BROADCAST : (uint64_t)x->op;
    uint64_t redop_class = x->redop == NONE ? 6 : x->redop >= 0 && x->redop < 5 ? (uint64_t)x->redop : 5;
    uint64_t root = x->peer == NONE ? 0 : (uint64_t)(uint32_t)(x->peer + 1);
    uint64_t sig = op | (uint64_t)(uint32_t)x->dtype << 8 | redop_class << 16 | root << 32;
    uint64_t h = fp_mix(k->fp_hash ^ fp_mix(sig ^ fp_mix(x->count)));
    __atomic_store_n(&k->fp_seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&k->fp_hash, h, __ATOMIC_RELEASE);
    __atomic_store_n(&k->fp_seq, s, __ATOMIC_RELEASE);
    __atomic_store_n(&k->colls, s, __ATOMIC_RELEASE);
    uint32_t step = k->fp_step;
    if (s & (step - 1)) return;
    uint32_t n = k->ncheckpoints;
    if (n >= TRR_COMM_CHECKPOINTS) {
        /* full: keep every second one (those at multiples of 2 * step) */
        __atomic_store_n(&k->ncheckpoints, 0, __ATOMIC_RELEASE);
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++)
            if ((k->checkpoints[i].seq & (2 * (uint64_t)step - 1)) == 0) k->checkpoints[m++] = k->checkpoints[i];
        step *= 2;
        __atomic_store_n(&k->fp_step, step, __ATOMIC_RELEASE);
        n = m;
        __atomic_store_n(&k->ncheckpoints, n, __ATOMIC_RELEASE);
        if (s & (step - 1)) return;
    }
    k->checkpoints[n].seq = s;
    k->checkpoints[n].hash = h;
    __atomic_store_n(&k->ncheckpoints, n + 1, __ATOMIC_RELEASE);
}

static void call_end(call_ctx *x, ncclResult_t rc)
{
    uint64_t seq = 0;
    if (x->c && (rc == ncclSuccess || rc == ncclInProgress)) {
        if (x->op == OP_SEND || x->op == OP_RECV) {
            seq = tr_comm_p2p(x->c, x->h, x->peer, x->op == OP_RECV, 1);
        } else {
            seq = atomic_fetch_add(&x->c->colls, 1) + 1;
            note_last(x->c, x->ci, seq);
            fp_note(x->c, seq, x);
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
    if (t_gdepth > 0) tr_complete_group_call(x->ri, s, capturing);
    else tr_complete_after(x->ri, s, capturing, rc);
}

int tr_nccl_last_collective(int device, uint64_t *comm_id, uint64_t *seq)
{
    int slot = device >= 0 && device < MAX_DEV ? device + 1 : 0;
    uint64_t v = atomic_load_explicit(&g_last[slot], memory_order_acquire);
    tr_comm *c = v ? tr_comm_at((int32_t)(v >> 40) - 1) : NULL;
    if (!c) return 0;
    *comm_id = c->id;
    *seq = v & SEQ_MASK;
    return 1;
}

int tr_nccl_version(void)
{
    typedef ncclResult_t (*ver_fn)(int *);
    TR_REAL_OPT(getver, ver_fn, "ncclGetVersion", TR_LIB_NCCL);
    int v = 0;
    if (!getver || getver(&v) != ncclSuccess) return 0;
    return v;
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
    int in_group = t_gdepth > 0;
    tr_nan_before(nc, in_group);
    return 1 + in_group;
}

/* ---- wrappers -------------------------------------------------------------------- */

/* name, op code, parameters, arguments, then what call_begin records */
#define CALL_WRAPPER(name, opc, params, args, count, dt, redop, root, sb, rb)           \
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
        call_begin(&x, opc, comm, count, dt, redop, root, sb, rb, stream);             \
        tr_nan_call nc;                                                                \
        int chk = nan_begin(&nc, &x, opc, count, dt, root, sb, rb, stream);            \
        ncclResult_t r = real args;                                                    \
        call_end(&x, r);                                                               \
        call_complete(&x, stream, r);                                                  \
        if (chk) tr_nan_after(&nc, chk == 2, r);                                       \
        tr_leave();                                                                    \
        return r;                                                                      \
    }

CALL_WRAPPER(ncclAllReduce, OP_ALLREDUCE,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, op, comm, stream), count, datatype, (int)op, NONE, sendbuff,
             recvbuff)
CALL_WRAPPER(ncclBroadcast, OP_BROADCAST,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), count, datatype, NONE, root, sendbuff,
             recvbuff)
CALL_WRAPPER(ncclBcast, OP_BCAST,
             (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream),
             (buff, count, datatype, root, comm, stream), count, datatype, NONE, root, buff, buff)
CALL_WRAPPER(ncclReduce, OP_REDUCE,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
              int root, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, op, root, comm, stream), count, datatype, (int)op, root,
             sendbuff, recvbuff)
CALL_WRAPPER(ncclAllGather, OP_ALLGATHER,
             (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
              cudaStream_t stream),
             (sendbuff, recvbuff, sendcount, datatype, comm, stream), sendcount, datatype, NONE, NONE, sendbuff,
             recvbuff)
CALL_WRAPPER(ncclReduceScatter, OP_REDUCESCATTER,
             (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, recvcount, datatype, op, comm, stream), recvcount, datatype, (int)op, NONE,
             sendbuff, recvbuff)
CALL_WRAPPER(ncclAlltoAll, OP_ALLTOALL,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
              cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, comm, stream), count, datatype, NONE, NONE, sendbuff, recvbuff)
CALL_WRAPPER(ncclGather, OP_GATHER,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), count, datatype, NONE, root, sendbuff,
             recvbuff)
CALL_WRAPPER(ncclScatter, OP_SCATTER,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), count, datatype, NONE, root, sendbuff,
             recvbuff)
CALL_WRAPPER(ncclSend, OP_SEND,
             (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream),
             (sendbuff, count, datatype, peer, comm, stream), count, datatype, NONE, peer, sendbuff, NULL)
CALL_WRAPPER(ncclRecv, OP_RECV,
             (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream),
             (recvbuff, count, datatype, peer, comm, stream), count, datatype, NONE, peer, NULL, recvbuff)

/* GroupStart / GroupEnd: records with the group's number and depth. */
static inline __attribute__((always_inline)) trr_record *group_begin(int op, uint64_t *ri)
{
    uint64_t t = tr_now_ns();
    int32_t st = tr_stack_capture();
    int32_t pst = tr_pystack_capture();
    if (op == OP_GROUPSTART) {
        if (t_gdepth == 0) t_gnum = atomic_fetch_add(&g_groups, 1) + 1;
        t_gdepth++;
    }
    trr_record *r = tr_ring_alloc(ri);
    if (!r) return NULL;
    r->op = (uint8_t)op;
    r->depth = (uint8_t)(t_gdepth < 255 ? t_gdepth : 255);
    r->comm = -1;
    r->dtype = r->redop = r->root = NONE;
    r->stack = st;
    r->tid = tr_tid();
    r->device = tr_cuda_device();
    r->group = t_gdepth > 0 ? t_gnum : 0;
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
    uint64_t ri;
    trr_record *rec = group_begin(OP_GROUPEND, &ri);
    int outermost = t_gdepth == 1;
    if (outermost) tr_nan_group_end_before();   /* input checks of the group's calls */
    ncclResult_t r = real();
    if (t_gdepth > 0 && --t_gdepth == 0) {
        tr_comm_group_ended(r);
        t_gnum = 0;
    }
    if (outermost) {
        tr_complete_group_end(r);                /* completion events of the group's calls */
        tr_nan_group_end_after(r);               /* their output checks */
    }
    if (rec) rec_return(rec, ri, 0, r);
    tr_leave();
    return r;
}

/* ---- "calls" of one rank ------------------------------------------------------------ */

static char *put_str(char *p, const char *s)
{
    *p++ = '"';
    while (*s) *p++ = *s++;
    *p++ = '"';
    return p;
}

static char *put_lit(char *p, const char *s)
{
    while (*s) *p++ = *s++;
    return p;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do tmp[n++] = (char)('0' + v % 10); while ((v /= 10));
    while (n) *p++ = tmp[--n];
    return p;
}

static char *put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

static char *put_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    int n = 0;
    do tmp[n++] = digits[v & 15]; while ((v >>= 4));
    p = put_lit(p, "\"0x");
    while (n) *p++ = tmp[--n];
    *p++ = '"';
    return p;
}

/* One call as the array call_fields names. */
static char *put_call(char *p, const trr_record *r, int32_t comm)
{
    int grp = r->op >= OP_GROUPSTART;
    int returned = r->state == TRR_REC_RETURNED;
    *p++ = '[';
    p = put_str(p, op_names[r->op]);
    *p++ = ',';
    p = put_i64(p, comm);
    *p++ = ',';
    p = put_u64(p, r->seq);
    *p++ = ',';
    p = put_u64(p, r->count);
    *p++ = ',';
    if (grp) p = put_lit(p, "null");
    else if (r->dtype >= 0 && r->dtype < (int)(sizeof dtype_names / sizeof dtype_names[0]))
        p = put_str(p, dtype_names[r->dtype]);
    else {
        p = put_lit(p, "\"invalid(");
        p = put_i64(p, r->dtype);
        p = put_lit(p, ")\"");
    }
    *p++ = ',';
    if (r->redop == NONE) p = put_lit(p, "null");
    else if (r->redop >= 0 && r->redop < ncclNumOps) p = put_str(p, redop_names[r->redop]);
    else {
        p = put_lit(p, r->redop > 0 ? "\"premulsum(" : "\"invalid(");
        p = put_i64(p, r->redop);
        p = put_lit(p, ")\"");
    }
    int peer = r->op == OP_SEND || r->op == OP_RECV;
    *p++ = ',';
    if (r->root == NONE || peer) p = put_lit(p, "null");
    else p = put_i64(p, r->root);
    *p++ = ',';
    if (r->root == NONE || !peer) p = put_lit(p, "null");
    else p = put_i64(p, r->root);
    *p++ = ',';
    if (grp) p = put_lit(p, "null,null,null,null");
    else {
        p = r->op == OP_RECV ? put_lit(p, "null") : put_hex(p, r->sendbuff);
        *p++ = ',';
        p = r->op == OP_SEND ? put_lit(p, "null") : put_hex(p, r->recvbuff);
        *p++ = ',';
        p = put_hex(p, r->stream);
        *p++ = ',';
        p = put_lit(p, r->capturing == CAPT_YES ? "true" : r->capturing == CAPT_NO ? "false" : "null");
    }
    *p++ = ',';
    p = put_u64(p, r->group);
    *p++ = ',';
    p = put_u64(p, r->depth);
    *p++ = ',';
    p = put_u64(p, r->enter_ns);
    *p++ = ',';
    if (returned) p = put_u64(p, r->exit_ns);
    else p = put_lit(p, "null");
    *p++ = ',';
    p = put_i64(p, r->tid);
    *p++ = ',';
    if (returned) p = put_i64(p, r->rc);
    else p = put_lit(p, "null");
    *p++ = ',';
    p = put_i64(p, r->stack);
    *p++ = ',';
    if (r->gpu == TRR_GPU_DONE) p = put_u64(p, r->done_ns);
    else p = put_lit(p, "null");
    *p++ = ',';
    p = put_lit(p, r->gpu == TRR_GPU_PENDING ? "\"pending\""
                   : r->gpu == TRR_GPU_DONE  ? "\"done\""
                   : r->gpu == TRR_GPU_ERROR ? "\"error\""
                                             : "null");
    *p++ = ',';
    p = put_i64(p, r->pystack);
    *p++ = ']';
    return p;
}

static const char *const call_fields[] = {"op", "comm", "seq", "count", "dtype", "redop", "root", "peer",
                                          "sendbuff", "recvbuff", "stream", "capturing", "group", "depth",
                                          "enter_ns", "exit_ns", "thread", "rc", "stack", "done_ns", "gpu",
                                          "pystack"};

/* Whether record r belongs to the rank of view. Group calls follow the
 * calls and communicators made inside the group; an empty group, the device
 * current when it started. */
static int rec_in_view(const trr_record *r, const tr_rank_view *view, const int32_t *map, int ncomm,
                       const uint8_t *gm, uint32_t ng)
{
    if (view->device < 0) return 1;
    if (r->comm >= 0 && r->comm < ncomm) return map[r->comm] >= 0;
    if (r->op >= OP_GROUPSTART && r->group && r->group <= ng && (gm[r->group] & 1)) return gm[r->group] >> 1;
    return r->device == view->device;
}

int tr_nccl_write_json(tr_json *j, const tr_rank_view *view, tr_nan_snap *checks)
{
    /* the ring's window as it is now: older records are overwritten; a
     * record overwritten while this runs is skipped (tr_ring_read) */
    uint64_t next = tr_ring_head(), cap = tr_ring_capacity();
    uint64_t first = next > cap ? next - cap : 0;
    g_win_first = first;
    g_win_next = next;
    trr_record rec;
    uint32_t ng = atomic_load(&g_groups);
    int ncomm = tr_comm_count();
    int32_t *map = calloc((size_t)ncomm + 1, sizeof *map);
    uint8_t *gm = view->device >= 0 ? calloc((size_t)ng + 1, 1) : NULL;
    int busy = 0;
    if (!map || (view->device >= 0 && !gm)) {
        /* no memory: an empty but valid trace */
        trj_array_begin(j, "comms");
        trj_array_end(j);
        free(map);
        free(gm);
        map = NULL;
        gm = NULL;
        ncomm = 0;
    } else {
        busy = tr_comm_write_json(j, view, map, ncomm);
    }
    if (gm) {
        for (int i = 0; i < ncomm; i++) {
            tr_comm *c = tr_comm_at(i);
            if (c && c->group && c->group <= ng) gm[c->group] |= 1 | (map[i] >= 0 ? 2 : 0);
        }
        for (uint64_t i = first; i < next; i++) {
            if (!tr_ring_read(i, &rec)) continue;
            const trr_record *r = &rec;
            if (r->op < OP_GROUPSTART && r->group && r->group <= ng)
                gm[r->group] |= 1 | (r->comm >= 0 && r->comm < ncomm && map[r->comm] >= 0 ? 2 : 0);
        }
    }
    trj_array_begin(j, "call_fields");
    for (size_t i = 0; i < sizeof call_fields / sizeof call_fields[0]; i++) trj_str(j, NULL, call_fields[i]);
    trj_array_end(j);

    trj_array_begin(j, "calls");
    int first_call = 1;
    char buf[640];
    uint64_t pos = 0;
    for (uint64_t i = first; i < next && map; i++) {
        if (!tr_ring_read(i, &rec)) continue;   /* not committed yet, or overwritten */
        const trr_record *r = &rec;
        if (!rec_in_view(r, view, map, ncomm, gm, ng)) continue;
        int32_t comm = r->comm >= 0 && r->comm < ncomm ? map[r->comm] : -1;
        char *p = buf;
        if (!first_call) *p++ = ',';
        first_call = 0;
        p = put_call(p, r, comm);
        fwrite(buf, 1, (size_t)(p - buf), j->f);
        tr_nan_place(checks, i, pos++);
        if (r->state != TRR_REC_RETURNED) busy = 1;
    }
    if (!first_call) j->has_items[j->depth] = 1;
    trj_array_end(j);
    free(map);
    free(gm);
    return busy;
}
