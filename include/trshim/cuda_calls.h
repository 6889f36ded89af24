/* The CUDA functions the shim wraps: one table, read by the export list
 * (shim/trshim.map.in), the entry-point lookups (shim/wrap/tr_entry.c) and,
 * through tests/common/vocab.py, the tests (the shim exports exactly these
 * CUDA functions: suite shim, shim-exports). A row without its wrapper
 * (shim/wrap/tr_memory.c, tr_graph_api.c, tr_entry.c) fails that test.
 * Preprocessor only: trshim.map.in includes it.
 *
 * X(name, library: RT the runtime or DRV the driver, what it is about:
 *   MEMORY, GRAPH, SYNC (a stream's or the device's synchronisation),
 *   LOOKUP (an entry-point lookup)) */
#ifndef TRSHIM_CUDA_CALLS_H
#define TRSHIM_CUDA_CALLS_H

#define TR_CUDA_FUNCS(X)                                                    \
    X(cudaMalloc, RT, MEMORY)                                               \
    X(cudaFree, RT, MEMORY)                                                 \
    X(cudaMallocAsync, RT, MEMORY)                                          \
    X(cudaMallocFromPoolAsync, RT, MEMORY)                                  \
    X(cudaFreeAsync, RT, MEMORY)                                            \
    X(cudaMallocAsync_ptsz, RT, MEMORY)                                     \
    X(cudaMallocFromPoolAsync_ptsz, RT, MEMORY)                             \
    X(cudaFreeAsync_ptsz, RT, MEMORY)                                       \
    X(cudaMallocManaged, RT, MEMORY)                                        \
    X(cudaMallocPitch, RT, MEMORY)                                          \
    X(cudaMallocHost, RT, MEMORY)                                           \
    X(cudaHostAlloc, RT, MEMORY)                                            \
    X(cudaFreeHost, RT, MEMORY)                                             \
    X(cuMemAlloc_v2, DRV, MEMORY)                                           \
    X(cuMemFree_v2, DRV, MEMORY)                                            \
    X(cuMemCreate, DRV, MEMORY)                                             \
    X(cuMemRelease, DRV, MEMORY)                                            \
    X(cudaStreamBeginCapture, RT, GRAPH)                                    \
    X(cudaStreamBeginCapture_ptsz, RT, GRAPH)                               \
    X(cudaStreamBeginCaptureToGraph, RT, GRAPH)                             \
    X(cudaStreamBeginCaptureToGraph_ptsz, RT, GRAPH)                        \
    X(cudaStreamEndCapture, RT, GRAPH)                                      \
    X(cudaStreamEndCapture_ptsz, RT, GRAPH)                                 \
    X(cudaGraphInstantiate, RT, GRAPH)                                      \
    X(cudaGraphInstantiateWithFlags, RT, GRAPH)                             \
    X(cudaGraphInstantiateWithParams, RT, GRAPH)                            \
    X(cudaGraphInstantiateWithParams_ptsz, RT, GRAPH)                       \
    X(cudaGraphExecUpdate, RT, GRAPH)                                       \
    X(cudaGraphDestroy, RT, GRAPH)                                          \
    X(cudaGraphExecDestroy, RT, GRAPH)                                      \
    X(cudaGraphLaunch, RT, GRAPH)                                           \
    X(cudaGraphLaunch_ptsz, RT, GRAPH)                                      \
    X(cudaStreamSynchronize, RT, SYNC)                                      \
    X(cudaStreamSynchronize_ptsz, RT, SYNC)                                 \
    X(cudaDeviceSynchronize, RT, SYNC)                                      \
    X(cuStreamBeginCapture, DRV, GRAPH)                                     \
    X(cuStreamBeginCapture_ptsz, DRV, GRAPH)                                \
    X(cuStreamBeginCapture_v2, DRV, GRAPH)                                  \
    X(cuStreamBeginCapture_v2_ptsz, DRV, GRAPH)                             \
    X(cuStreamBeginCaptureToGraph, DRV, GRAPH)                              \
    X(cuStreamBeginCaptureToGraph_ptsz, DRV, GRAPH)                         \
    X(cuStreamEndCapture, DRV, GRAPH)                                       \
    X(cuStreamEndCapture_ptsz, DRV, GRAPH)                                  \
    X(cuGraphInstantiate, DRV, GRAPH)                                       \
    X(cuGraphInstantiate_v2, DRV, GRAPH)                                    \
    X(cuGraphInstantiateWithFlags, DRV, GRAPH)                              \
    X(cuGraphInstantiateWithParams, DRV, GRAPH)                             \
    X(cuGraphInstantiateWithParams_ptsz, DRV, GRAPH)                        \
    X(cuGraphExecUpdate, DRV, GRAPH)                                        \
    X(cuGraphExecUpdate_v2, DRV, GRAPH)                                     \
    X(cuGraphDestroy, DRV, GRAPH)                                           \
    X(cuGraphExecDestroy, DRV, GRAPH)                                       \
    X(cuGraphLaunch, DRV, GRAPH)                                            \
    X(cuGraphLaunch_ptsz, DRV, GRAPH)                                       \
    X(cuGetProcAddress, DRV, LOOKUP)                                        \
    X(cuGetProcAddress_v2, DRV, LOOKUP)                                     \
    X(cudaGetDriverEntryPoint, RT, LOOKUP)                                  \
    X(cudaGetDriverEntryPoint_ptsz, RT, LOOKUP)                             \
    X(cudaGetDriverEntryPointByVersion, RT, LOOKUP)                         \
    X(cudaGetDriverEntryPointByVersion_ptsz, RT, LOOKUP)

/* What a driver entry-point lookup of symbol returns from CUDA version
 * since on (as cuda.h documents it), for the wrapped driver functions:
 * X(symbol, since, the function). A version below every row of a symbol
 * is one the shim does not wrap (tr_entry.c). */
#define TR_CUDA_LOOKUPS(X)                                                  \
    X(cuMemAlloc, 3020, cuMemAlloc_v2)                                      \
    X(cuMemFree, 3020, cuMemFree_v2)                                        \
    X(cuMemCreate, 10020, cuMemCreate)                                      \
    X(cuMemRelease, 10020, cuMemRelease)                                    \
    X(cuStreamBeginCapture, 10000, cuStreamBeginCapture)                    \
    X(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2)                 \
    X(cuStreamBeginCaptureToGraph, 12030, cuStreamBeginCaptureToGraph)      \
    X(cuStreamEndCapture, 10000, cuStreamEndCapture)                        \
    X(cuGraphInstantiate, 10000, cuGraphInstantiate)                        \
    X(cuGraphInstantiate, 11000, cuGraphInstantiate_v2)                     \
    X(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags)               \
    X(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags)      \
    X(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams)    \
    X(cuGraphExecUpdate, 10020, cuGraphExecUpdate)                          \
    X(cuGraphExecUpdate, 12000, cuGraphExecUpdate_v2)                       \
    X(cuGraphLaunch, 10000, cuGraphLaunch)                                  \
    X(cuGraphDestroy, 10000, cuGraphDestroy)                                \
    X(cuGraphExecDestroy, 10000, cuGraphExecDestroy)                        \
    X(cuGetProcAddress, 11030, cuGetProcAddress)                            \
    X(cuGetProcAddress, 12000, cuGetProcAddress_v2)

#endif
