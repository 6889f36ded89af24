/* The driver API's stream capture and graph functions, twins of the
 * runtime's (rt_capture.c, rt_graph.c), under every name and version a
 * libcuda exports for them. Handles are shared with the runtime (a CUstream
 * is a cudaStream_t, a CUgraph a cudaGraph_t, ...), and so are the error
 * numbers; unlike the runtime's, these leave the runtime's last error
 * alone. The entry-point lookups (rt_driver.c) hand them out by version:
 * the signatures of cuStreamBeginCapture, cuStreamGetCaptureInfo,
 * cuGraphInstantiate, cuGraphExecUpdate and cuStreamUpdateCaptureDependencies
 * changed over CUDA's releases, and a caller gets the one of the version it
 * asks for. */
#include <string.h>
#include <cuda.h>

#include "sim_internal.h"

_Static_assert(sizeof(CUgraphEdgeData) == sizeof(cudaGraphEdgeData), "edge data layouts differ");
_Static_assert(sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) == sizeof(cudaGraphInstantiateParams),
               "instantiate parameter layouts differ");
_Static_assert(sizeof(CUgraphExecUpdateResultInfo) == sizeof(cudaGraphExecUpdateResultInfo),
               "update result layouts differ");

/* cuda.h maps these names to their newest versions; the older ones are
 * exported under the plain names. */
#undef cuStreamBeginCapture
#undef cuStreamGetCaptureInfo
#undef cuGraphInstantiate
#undef cuGraphExecUpdate
#undef cuStreamUpdateCaptureDependencies

#define PTSZ(h) ((cudaStream_t)TRSIM_PTSZ((cudaStream_t)(h)))

static CUresult result(cudaError_t err)
{
    return (CUresult)err;       /* the runtime's errors share the driver's numbers */
}

/* Prototypes of the names cuda.h declares under other signatures only. */
TRSIM_API CUresult cuStreamBeginCapture(CUstream hStream);
TRSIM_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream);
TRSIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
TRSIM_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                                    const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                    CUstreamCaptureMode mode);
TRSIM_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
TRSIM_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
TRSIM_API CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out);
TRSIM_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out);
TRSIM_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                             cuuint64_t *id_out, CUgraph *graph_out,
                                             const CUgraphNode **dependencies_out, size_t *numDependencies_out);
TRSIM_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out, size_t *numDependencies_out);
TRSIM_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out,
                                                  const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out);
TRSIM_API CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                     size_t numDependencies, unsigned int flags);
TRSIM_API CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                          size_t numDependencies, unsigned int flags);
TRSIM_API CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                             const CUgraphEdgeData *dependencyData,
                                                             size_t numDependencies, unsigned int flags);
TRSIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                      char *logBuffer, size_t bufferSize);
TRSIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                         char *logBuffer, size_t bufferSize);
TRSIM_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                     CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams);
TRSIM_API CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                     CUgraphExecUpdateResult *updateResult_out);
TRSIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
TRSIM_API CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream);

/* ---- stream capture -------------------------------------------------------- */

static CUresult begin(cudaStream_t stream, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                      size_t ndeps, CUstreamCaptureMode mode, int to_graph)
{
    if (!trsim_driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (to_graph && !graph)
        return CUDA_ERROR_INVALID_VALUE;
    return result(trsim_capture_begin(stream, graph, deps, (const cudaGraphEdgeData *)edges, ndeps,
                                      (enum cudaStreamCaptureMode)mode));
}

/* CUDA 10.0's signature: no mode, the global one. */
TRSIM_API CUresult cuStreamBeginCapture(CUstream hStream)
{
    return begin((cudaStream_t)hStream, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}

TRSIM_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin(PTSZ(hStream), NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}

TRSIM_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin((cudaStream_t)hStream, NULL, NULL, NULL, 0, mode, 0);
}

TRSIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin(PTSZ(hStream), NULL, NULL, NULL, 0, mode, 0);
}

TRSIM_API CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                               const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                               CUstreamCaptureMode mode)
{
    return begin((cudaStream_t)hStream, hGraph, dependencies, dependencyData, numDependencies, mode, 1);
}

TRSIM_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                                    const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                    CUstreamCaptureMode mode)
{
    return begin(PTSZ(hStream), hGraph, dependencies, dependencyData, numDependencies, mode, 1);
}

TRSIM_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return result(trsim_capture_end((cudaStream_t)hStream, phGraph));
}

TRSIM_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return result(trsim_capture_end(PTSZ(hStream), phGraph));
}

static CUresult info(cudaStream_t stream, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    unsigned long long id_ull;
    cudaError_t err = trsim_capture_info(stream, (enum cudaStreamCaptureStatus *)status, id ? &id_ull : NULL, graph,
                                         deps, (const cudaGraphEdgeData **)edges, ndeps);
    if (err == cudaSuccess && id)
        *id = id_ull;
    return result(err);
}

TRSIM_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return info((cudaStream_t)hStream, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

TRSIM_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return info(PTSZ(hStream), captureStatus, NULL, NULL, NULL, NULL, NULL);
}

/* CUDA 10.1's signature: status and id. */
TRSIM_API CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out)
{
    return info((cudaStream_t)hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

TRSIM_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out)
{
    return info(PTSZ(hStream), captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

/* CUDA 11.3's: also the graph and the dependencies. */
TRSIM_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                             cuuint64_t *id_out, CUgraph *graph_out,
                                             const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    return info((cudaStream_t)hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                numDependencies_out);
}

TRSIM_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    return info(PTSZ(hStream), captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out);
}

/* CUDA 12.3's: also the edge data. */
TRSIM_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                             cuuint64_t *id_out, CUgraph *graph_out,
                                             const CUgraphNode **dependencies_out,
                                             const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return info((cudaStream_t)hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                numDependencies_out);
}

TRSIM_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out,
                                                  const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return info(PTSZ(hStream), captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                numDependencies_out);
}

TRSIM_API CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                     size_t numDependencies, unsigned int flags)
{
    return result(trsim_capture_update((cudaStream_t)hStream, dependencies, NULL, numDependencies, flags));
}

TRSIM_API CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                          size_t numDependencies, unsigned int flags)
{
    return result(trsim_capture_update(PTSZ(hStream), dependencies, NULL, numDependencies, flags));
}

TRSIM_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                                        const CUgraphEdgeData *dependencyData,
                                                        size_t numDependencies, unsigned int flags)
{
    return result(trsim_capture_update((cudaStream_t)hStream, dependencies,
                                       (const cudaGraphEdgeData *)dependencyData, numDependencies, flags));
}

TRSIM_API CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                             const CUgraphEdgeData *dependencyData,
                                                             size_t numDependencies, unsigned int flags)
{
    return result(trsim_capture_update(PTSZ(hStream), dependencies, (const cudaGraphEdgeData *)dependencyData,
                                       numDependencies, flags));
}

TRSIM_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    return result(trsim_capture_mode_exchange((enum cudaStreamCaptureMode *)mode));
}

/* ---- graphs --------------------------------------------------------------- */

TRSIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    if (!trsim_driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return result(trsim_graph_new(phGraph));
}

TRSIM_API CUresult cuGraphDestroy(CUgraph hGraph)
{
    return result(trsim_graph_destroy(hGraph));
}

TRSIM_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    return result(trsim_graph_get_nodes(hGraph, nodes, numNodes));
}

/* CUDA 10's and 11's signature: the error node and a log, no flags. */
TRSIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                      char *logBuffer, size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = '\0';
    return result(trsim_graph_instantiate(phGraphExec, hGraph, 0));
}

TRSIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                         char *logBuffer, size_t bufferSize)
{
    return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

TRSIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    return result(trsim_graph_instantiate(phGraphExec, hGraph, flags));
}

TRSIM_API CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return result(trsim_graph_instantiate_params(phGraphExec, hGraph, (cudaGraphInstantiateParams *)instantiateParams));
}

TRSIM_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                     CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    if (instantiateParams && (instantiateParams->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
        instantiateParams->hUploadStream = (CUstream)PTSZ(instantiateParams->hUploadStream);
    return cuGraphInstantiateWithParams(phGraphExec, hGraph, instantiateParams);
}

TRSIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    return result(trsim_graph_exec_destroy(hGraphExec));
}

TRSIM_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return result(trsim_graph_launch(hGraphExec, (cudaStream_t)hStream));
}

TRSIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return result(trsim_graph_launch(hGraphExec, PTSZ(hStream)));
}

TRSIM_API CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    return result(trsim_graph_upload(hGraphExec, (cudaStream_t)hStream));
}

TRSIM_API CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return result(trsim_graph_upload(hGraphExec, PTSZ(hStream)));
}

/* CUDA 10.2's signature: the error node and the result apart. */
TRSIM_API CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                     CUgraphExecUpdateResult *updateResult_out)
{
    cudaGraphExecUpdateResultInfo info;
    if (!hErrorNode_out || !updateResult_out)
        return CUDA_ERROR_INVALID_VALUE;
    cudaError_t err = trsim_graph_exec_update(hGraphExec, hGraph, &info);
    *hErrorNode_out = info.errorNode;
    *updateResult_out = (CUgraphExecUpdateResult)info.result;
    return result(err);
}

TRSIM_API CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
    return result(trsim_graph_exec_update(hGraphExec, hGraph, (cudaGraphExecUpdateResultInfo *)resultInfo));
}

/* ---- entry points ----------------------------------------------------------- */

/* The table takes the addresses through local aliases, so that a
 * preloaded library defining the same names is never handed out (as in
 * rt_driver.c). */
#define LOCAL(fn) extern __typeof__(fn) local_##fn __attribute__((alias(#fn), visibility("hidden")));
LOCAL(cuStreamBeginCapture) LOCAL(cuStreamBeginCapture_ptsz) LOCAL(cuStreamBeginCapture_v2)
LOCAL(cuStreamBeginCapture_v2_ptsz) LOCAL(cuStreamBeginCaptureToGraph) LOCAL(cuStreamBeginCaptureToGraph_ptsz)
LOCAL(cuStreamEndCapture) LOCAL(cuStreamEndCapture_ptsz) LOCAL(cuStreamIsCapturing) LOCAL(cuStreamIsCapturing_ptsz)
LOCAL(cuStreamGetCaptureInfo) LOCAL(cuStreamGetCaptureInfo_ptsz) LOCAL(cuStreamGetCaptureInfo_v2)
LOCAL(cuStreamGetCaptureInfo_v2_ptsz) LOCAL(cuStreamGetCaptureInfo_v3) LOCAL(cuStreamGetCaptureInfo_v3_ptsz)
LOCAL(cuStreamUpdateCaptureDependencies) LOCAL(cuStreamUpdateCaptureDependencies_ptsz)
LOCAL(cuStreamUpdateCaptureDependencies_v2) LOCAL(cuStreamUpdateCaptureDependencies_v2_ptsz)
LOCAL(cuThreadExchangeStreamCaptureMode) LOCAL(cuGraphCreate) LOCAL(cuGraphDestroy) LOCAL(cuGraphGetNodes)
LOCAL(cuGraphInstantiate) LOCAL(cuGraphInstantiate_v2) LOCAL(cuGraphInstantiateWithFlags)
LOCAL(cuGraphInstantiateWithParams) LOCAL(cuGraphInstantiateWithParams_ptsz) LOCAL(cuGraphExecDestroy)
LOCAL(cuGraphLaunch) LOCAL(cuGraphLaunch_ptsz) LOCAL(cuGraphUpload) LOCAL(cuGraphUpload_ptsz)
LOCAL(cuGraphExecUpdate) LOCAL(cuGraphExecUpdate_v2)

/* by name, the function for cudaVersion >= since, and for per-thread
 * default streams (NULL: the same) */
static const struct entry { const char *name; void *fn, *fn_ptsz; int since; } entries[] = {
#define ENTRY(name, fn, since) {name, (void *)local_##fn, (void *)local_##fn##_ptsz, since},
#define ENTRY1(name, fn, since) {name, (void *)local_##fn, NULL, since},
    ENTRY("cuStreamBeginCapture", cuStreamBeginCapture, 10000)
    ENTRY("cuStreamBeginCapture", cuStreamBeginCapture_v2, 10010)
    ENTRY("cuStreamBeginCaptureToGraph", cuStreamBeginCaptureToGraph, 12030)
    ENTRY("cuStreamEndCapture", cuStreamEndCapture, 10000)
    ENTRY("cuStreamIsCapturing", cuStreamIsCapturing, 10000)
    ENTRY("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo, 10010)
    ENTRY("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo_v2, 11030)
    ENTRY("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo_v3, 12030)
    ENTRY("cuStreamUpdateCaptureDependencies", cuStreamUpdateCaptureDependencies, 11030)
    ENTRY("cuStreamUpdateCaptureDependencies", cuStreamUpdateCaptureDependencies_v2, 12030)
    ENTRY1("cuThreadExchangeStreamCaptureMode", cuThreadExchangeStreamCaptureMode, 10010)
    ENTRY1("cuGraphCreate", cuGraphCreate, 10000)
    ENTRY1("cuGraphDestroy", cuGraphDestroy, 10000)
    ENTRY1("cuGraphGetNodes", cuGraphGetNodes, 10000)
    ENTRY1("cuGraphInstantiate", cuGraphInstantiate, 10000)
    ENTRY1("cuGraphInstantiate", cuGraphInstantiate_v2, 11000)
    ENTRY1("cuGraphInstantiate", cuGraphInstantiateWithFlags, 12000)
    ENTRY1("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags, 11040)
    ENTRY("cuGraphInstantiateWithParams", cuGraphInstantiateWithParams, 12000)
    ENTRY1("cuGraphExecDestroy", cuGraphExecDestroy, 10000)
    ENTRY("cuGraphLaunch", cuGraphLaunch, 10000)
    ENTRY("cuGraphUpload", cuGraphUpload, 11010)
    ENTRY1("cuGraphExecUpdate", cuGraphExecUpdate, 10020)
    ENTRY1("cuGraphExecUpdate", cuGraphExecUpdate_v2, 12000)
};

int trsim_graph_entry_find(const char *symbol, int cudaVersion, int per_thread, void **fn)
{
    const struct entry *best = NULL;
    int named = 0;
    *fn = NULL;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if (strcmp(entries[i].name, symbol) != 0)
            continue;
        named = 1;
        if (entries[i].since <= cudaVersion && (!best || entries[i].since > best->since))
            best = &entries[i];
    }
    if (!best)
        return named ? -1 : 0;
    *fn = per_thread && best->fn_ptsz ? best->fn_ptsz : best->fn;
    return 1;
}
