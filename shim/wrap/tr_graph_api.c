/* The CUDA graph API, runtime and driver: captures (begin, begin into a
 * graph, end), executable graphs (instantiate, update, destroy) and
 * launches. Each wrapper calls the real function and returns exactly what
 * it returned; on success it tells tr_graphs.c, and a launch of an
 * executable graph holding captured NCCL calls is recorded as GraphLaunch
 * records that number its calls as the replay issues them
 * (docs/trace-format.md, "CUDA graphs").
 *
 * Parameters the shim does not read are forwarded as they came, and a
 * few functions whose parameters changed across CUDA versions under one
 * name (cudaGraphInstantiate and cudaGraphExecUpdate, 11 vs 12; the
 * driver's unversioned cuStreamBeginCapture, cuGraphInstantiate and
 * cuGraphExecUpdate) forward the longest list: a callee with fewer
 * parameters never reads the others (x86-64 and AArch64 calling
 * conventions), and the ones the shim reads come first in every version.
 *
 * The wrappers' C names are trw_<name>, their symbols <name> (asm labels):
 * cuda.h renames several of these names to their newest version by macro
 * and declares them with other parameter types.
 *
 * wrap/ (tr_core.h's folders). */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "tr_record.h"
#include "tr_core.h"
#include "tr_init.h"
#include "tr_stacks.h"

typedef void *P;   /* a parameter forwarded unread */

#define MISSING(name, err)                                                      \
    do {                                                                        \
        tr_warn("graphs: no real " name " found");                              \
        return err;                                                             \
    } while (0)
#define RT_LIB TR_LIB_CUDART, cudaErrorInitializationError
#define DRV_LIB TR_LIB_CUDA, CUDA_ERROR_NOT_INITIALIZED

#define TR_ARG1(a, b) a
#define TR_ARG2(a, b) b
/* real: the function the wrapper forwards to; its absence fails the call */
#define REAL_OR_FAIL(ret, params, name, lib_err)                                       \
    typedef ret(*fn_t) params;                                                         \
    TR_REAL(real, fn_t, #name, TR_ARG1 lib_err);                                       \
    if (!real) MISSING(#name, TR_ARG2 lib_err)

/* ---- captures --------------------------------------------------------------------------- */

static __attribute__((noinline)) void capture_begun(cudaStream_t s, int32_t st, int32_t pst, uintptr_t base)
{
    uint64_t id = 0;
    if (tr_cuda_capture_id(s, &id) == 1) tr_graph_capture_begun(id, s, st, pst, base);
}

/* BeginCapture / BeginCaptureToGraph: rc 0 is success in both APIs */
#define BEGIN_WRAPPER(ret, name, lib_err, params, args, stream, base)                  \
    TR_API ret trw_##name params __asm__(#name);                                       \
    TR_API ret trw_##name params                                                       \
    {                                                                                  \
        REAL_OR_FAIL(ret, params, name, lib_err);                                      \
        int rec = tr_enter();                                                          \
        ret r = real args;                                                             \
        if (rec && r == 0) {                                                           \
            int32_t st = tr_stack_capture();                                           \
            capture_begun((cudaStream_t)(stream), st, tr_pystack_capture(), (uintptr_t)(base)); \
        }                                                                              \
        tr_leave();                                                                    \
        return r;                                                                      \
    }

BEGIN_WRAPPER(cudaError_t, cudaStreamBeginCapture, (RT_LIB), (cudaStream_t s, enum cudaStreamCaptureMode mode),
              (s, mode), s, 0)
BEGIN_WRAPPER(cudaError_t, cudaStreamBeginCapture_ptsz, (RT_LIB),
              (cudaStream_t s, enum cudaStreamCaptureMode mode), (s, mode), s, 0)
BEGIN_WRAPPER(cudaError_t, cudaStreamBeginCaptureToGraph, (RT_LIB),
              (cudaStream_t s, cudaGraph_t g, P deps, P edata, size_t n, enum cudaStreamCaptureMode mode),
              (s, g, deps, edata, n, mode), s, g)
BEGIN_WRAPPER(cudaError_t, cudaStreamBeginCaptureToGraph_ptsz, (RT_LIB),
              (cudaStream_t s, cudaGraph_t g, P deps, P edata, size_t n, enum cudaStreamCaptureMode mode),
              (s, g, deps, edata, n, mode), s, g)
/* the driver's first cuStreamBeginCapture took no mode (CUDA 10.0) */
BEGIN_WRAPPER(CUresult, cuStreamBeginCapture, (DRV_LIB), (CUstream s, int mode), (s, mode), s, 0)
BEGIN_WRAPPER(CUresult, cuStreamBeginCapture_ptsz, (DRV_LIB), (CUstream s, int mode), (s, mode), s, 0)
BEGIN_WRAPPER(CUresult, cuStreamBeginCapture_v2, (DRV_LIB), (CUstream s, CUstreamCaptureMode mode), (s, mode), s, 0)
BEGIN_WRAPPER(CUresult, cuStreamBeginCapture_v2_ptsz, (DRV_LIB), (CUstream s, CUstreamCaptureMode mode), (s, mode),
              s, 0)
BEGIN_WRAPPER(CUresult, cuStreamBeginCaptureToGraph, (DRV_LIB),
              (CUstream s, CUgraph g, P deps, P edata, size_t n, CUstreamCaptureMode mode),
              (s, g, deps, edata, n, mode), s, g)
BEGIN_WRAPPER(CUresult, cuStreamBeginCaptureToGraph_ptsz, (DRV_LIB),
              (CUstream s, CUgraph g, P deps, P edata, size_t n, CUstreamCaptureMode mode),
              (s, g, deps, edata, n, mode), s, g)

/* EndCapture: the capture's id is asked before it ends (after, the stream has none) */
#define END_WRAPPER(ret, name, lib_err, gtype)                                         \
    TR_API ret trw_##name(cudaStream_t s, gtype *pg) __asm__(#name);                   \
    TR_API ret trw_##name(cudaStream_t s, gtype *pg)                                   \
    {                                                                                  \
        REAL_OR_FAIL(ret, (cudaStream_t, gtype *), name, lib_err);                     \
        int rec = tr_enter();                                                          \
        uint64_t id = 0;                                                               \
        if (rec && tr_cuda_capture_id(s, &id) != 1) id = 0;                            \
        ret r = real(s, pg);                                                           \
        if (id) {                                                                      \
            int32_t st = tr_stack_capture();                                           \
            tr_graph_capture_ended(id, r == 0 && pg, pg && r == 0 ? (uintptr_t)*pg : 0, st, \
                                   tr_pystack_capture());                              \
        }                                                                              \
        tr_leave();                                                                    \
        return r;                                                                      \
    }

END_WRAPPER(cudaError_t, cudaStreamEndCapture, (RT_LIB), cudaGraph_t)
END_WRAPPER(cudaError_t, cudaStreamEndCapture_ptsz, (RT_LIB), cudaGraph_t)
END_WRAPPER(CUresult, cuStreamEndCapture, (DRV_LIB), CUgraph)
END_WRAPPER(CUresult, cuStreamEndCapture_ptsz, (DRV_LIB), CUgraph)

/* ---- executable graphs ------------------------------------------------------------------ */

/* Instantiate (instantiated 1) or update (0): exec and graph come first in every version */
#define EXEC_WRAPPER(ret, name, lib_err, params, args, exec, graph, instantiated)      \
    TR_API ret trw_##name params __asm__(#name);                                       \
    TR_API ret trw_##name params                                                       \
    {                                                                                  \
        REAL_OR_FAIL(ret, params, name, lib_err);                                      \
        int rec = tr_enter();                                                          \
        ret r = real args;                                                             \
        if (rec && r == 0) tr_graph_exec_set((uintptr_t)(exec), (uintptr_t)(graph), instantiated); \
        tr_leave();                                                                    \
        return r;                                                                      \
    }

/* CUDA 11: (pExec, graph, pErrorNode, pLogBuffer, bufferSize); 12 and later: (pExec, graph, flags) */
EXEC_WRAPPER(cudaError_t, cudaGraphInstantiate, (RT_LIB), (cudaGraphExec_t *pe, cudaGraph_t g, P a, P b, P c),
             (pe, g, a, b, c), pe ? *pe : NULL, g, 1)
EXEC_WRAPPER(cudaError_t, cudaGraphInstantiateWithFlags, (RT_LIB),
             (cudaGraphExec_t *pe, cudaGraph_t g, unsigned long long flags), (pe, g, flags), pe ? *pe : NULL, g, 1)
EXEC_WRAPPER(cudaError_t, cudaGraphInstantiateWithParams, (RT_LIB), (cudaGraphExec_t *pe, cudaGraph_t g, P params),
             (pe, g, params), pe ? *pe : NULL, g, 1)
EXEC_WRAPPER(cudaError_t, cudaGraphInstantiateWithParams_ptsz, (RT_LIB),
             (cudaGraphExec_t *pe, cudaGraph_t g, P params), (pe, g, params), pe ? *pe : NULL, g, 1)
/* CUDA 11: (exec, graph, hErrorNode_out, updateResult_out); 12 and later: (exec, graph, resultInfo) */
EXEC_WRAPPER(cudaError_t, cudaGraphExecUpdate, (RT_LIB), (cudaGraphExec_t e, cudaGraph_t g, P a, P b),
             (e, g, a, b), e, g, 0)
EXEC_WRAPPER(CUresult, cuGraphInstantiate, (DRV_LIB), (CUgraphExec *pe, CUgraph g, P a, P b, P c),
             (pe, g, a, b, c), pe ? *pe : NULL, g, 1)
EXEC_WRAPPER(CUresult, cuGraphInstantiate_v2, (DRV_LIB), (CUgraphExec *pe, CUgraph g, P a, P b, P c),
             (pe, g, a, b, c), pe ? *pe : NULL, g, 1)
EXEC_WRAPPER(CUresult, cuGraphInstantiateWithFlags, (DRV_LIB), (CUgraphExec *pe, CUgraph g, unsigned long long f),
             (pe, g, f), pe ? *pe : NULL, g, 1)
EXEC_WRAPPER(CUresult, cuGraphInstantiateWithParams, (DRV_LIB), (CUgraphExec *pe, CUgraph g, P params),
             (pe, g, params), pe ? *pe : NULL, g, 1)
EXEC_WRAPPER(CUresult, cuGraphInstantiateWithParams_ptsz, (DRV_LIB), (CUgraphExec *pe, CUgraph g, P params),
             (pe, g, params), pe ? *pe : NULL, g, 1)
EXEC_WRAPPER(CUresult, cuGraphExecUpdate, (DRV_LIB), (CUgraphExec e, CUgraph g, P a, P b), (e, g, a, b), e, g, 0)
EXEC_WRAPPER(CUresult, cuGraphExecUpdate_v2, (DRV_LIB), (CUgraphExec e, CUgraph g, P info), (e, g, info), e, g, 0)

/* Destroy: forgotten before the real call, which may hand the handle out again at once */
#define DESTROY_WRAPPER(ret, name, lib_err, type, forget)                              \
    TR_API ret trw_##name(type h) __asm__(#name);                                      \
    TR_API ret trw_##name(type h)                                                      \
    {                                                                                  \
        REAL_OR_FAIL(ret, (type), name, lib_err);                                      \
        if (tr_enter()) forget((uintptr_t)h);                                          \
        ret r = real(h);                                                               \
        tr_leave();                                                                    \
        return r;                                                                      \
    }

DESTROY_WRAPPER(cudaError_t, cudaGraphDestroy, (RT_LIB), cudaGraph_t, tr_graph_forget)
DESTROY_WRAPPER(cudaError_t, cudaGraphExecDestroy, (RT_LIB), cudaGraphExec_t, tr_graph_exec_forget)
DESTROY_WRAPPER(CUresult, cuGraphDestroy, (DRV_LIB), CUgraph, tr_graph_forget)
DESTROY_WRAPPER(CUresult, cuGraphExecDestroy, (DRV_LIB), CUgraphExec, tr_graph_exec_forget)

/* ---- launches ---------------------------------------------------------------------------- */

typedef struct {
    const tr_graph *g;
    uint64_t replay, t;
    int32_t st, pst;
} launch_ctx;

/* Numbers lane l of g for this replay: its first number, 0 when it has no
 * communicator (a record without one) */
static uint64_t lane_take(const tr_graph *g, const tr_graph_lane *l)
{
    tr_comm *c = tr_comm_at(l->comm);
    if (!c) return 0;
    if (l->lane != TRR_LANE_COLL) {
        uint64_t last = tr_comm_p2p(c, l->handle, l->peer, l->lane, l->total, 1);
        return last ? last - l->total + 1 : 0;
    }
    uint64_t first = 0, s = 0;
    for (uint32_t k = 0; k < l->ncolls; k++) {
        const trr_graph_call *gc = &g->calls[l->colls[k]];
        s = atomic_fetch_add(&c->colls, 1) + 1;
        if (!first) first = s;
        tr_comm_fp_note(c, s, gc->op, gc->dtype, gc->redop, gc->root, gc->count);
    }
    if (s) tr_comm_note_last(c, l->comm, s);
    return first;
}

static __attribute__((noinline)) void launch_end(const launch_ctx *L, uintptr_t exec, cudaStream_t s, int rc)
{
    uint64_t now = tr_now_ns();
    int tid = tr_tid();
    for (uint32_t i = 0; i < L->g->nlanes; i++) {
        const tr_graph_lane *l = &L->g->lanes[i];
        uint64_t seq = rc == 0 ? lane_take(L->g, l) : 0;
        uint64_t ri;
        trr_record *r = tr_ring_alloc(&ri);
        if (!r) continue;
        tr_comm *c = tr_comm_at(l->comm);
        r->op = OP_GRAPHLAUNCH;
        r->comm = l->comm;
        r->dtype = NONE;
        r->redop = l->lane;
        r->root = l->peer;
        r->stack = L->st;
        r->pystack = L->pst;
        r->tid = tid;
        r->device = c ? atomic_load_explicit(&c->device, memory_order_relaxed) : -1;
        r->capturing = CAPT_NO;
        r->seq = seq;
        r->count = L->replay;
        r->extra = L->g->head.index;
        r->sendbuff = exec;
        r->recvbuff = l->total;
        r->stream = (uintptr_t)s;
        r->enter_ns = L->t;
        r->exit_ns = now;
        r->rc = rc;
        r->state = TRR_REC_RETURNED;
        tr_ring_commit(r, ri);
        tr_complete_after(ri, s, 0, rc == 0 ? ncclSuccess : ncclInternalError);
    }
}

#define LAUNCH_WRAPPER(ret, name, lib_err, etype, stype)                               \
    TR_API ret trw_##name(etype e, stype s) __asm__(#name);                            \
    TR_API ret trw_##name(etype e, stype s)                                            \
    {                                                                                  \
        REAL_OR_FAIL(ret, (etype, stype), name, lib_err);                              \
        launch_ctx L = {0};                                                            \
        if (tr_enter()) L.g = tr_graph_launching((uintptr_t)e, &L.replay);             \
        /* a launch captured into another graph runs when that one does */             \
        if (L.g && tr_cuda_stream_capturing((cudaStream_t)s) == 1) L.g = NULL;         \
        if (L.g) {                                                                     \
            L.t = tr_now_ns();                                                         \
            L.st = tr_stack_capture();                                                 \
            L.pst = tr_pystack_capture();                                              \
        }                                                                              \
        ret r = real(e, s);                                                            \
        if (L.g) launch_end(&L, (uintptr_t)e, (cudaStream_t)s, (int)r);                \
        tr_leave();                                                                    \
        return r;                                                                      \
    }

LAUNCH_WRAPPER(cudaError_t, cudaGraphLaunch, (RT_LIB), cudaGraphExec_t, cudaStream_t)
LAUNCH_WRAPPER(cudaError_t, cudaGraphLaunch_ptsz, (RT_LIB), cudaGraphExec_t, cudaStream_t)
LAUNCH_WRAPPER(CUresult, cuGraphLaunch, (DRV_LIB), CUgraphExec, CUstream)
LAUNCH_WRAPPER(CUresult, cuGraphLaunch_ptsz, (DRV_LIB), CUgraphExec, CUstream)
