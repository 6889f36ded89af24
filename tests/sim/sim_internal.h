/* Internal interfaces of libtrsim.so, the simulated CUDA runtime + NCCL.
 *
 * Everything here is hidden (the library is built with -fvisibility=hidden);
 * only the CUDA/NCCL API functions marked TRSIM_API are exported. */
#ifndef TRSIM_SIM_INTERNAL_H
#define TRSIM_SIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

#define TRSIM_API __attribute__((visibility("default")))

/* ---- errors (rt_errors.c) ------------------------------------------------ */

/* Records err as the calling thread's last error (unless cudaSuccess) and
 * returns it, so API functions can `return trsim_error(e);`. */
cudaError_t trsim_error(cudaError_t err);
/* The sticky error injected by TRSIM_INJECT_ERROR (rt_errors.c), cudaSuccess
 * while there is none; stream_sync: the caller is a cudaStreamSynchronize
 * (counted: the N-th sets it). */
cudaError_t trsim_sticky_error(int stream_sync);

/* Prints one line "trsim: ..." on stderr. */
void trsim_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- devices (rt_device.c) ----------------------------------------------- */

#define TRSIM_MAX_DEVICES 16
/* The CUDA version the simulated driver and runtime report: the toolkit's
 * headers', but at least 13.2 (what PyTorch 2.15's wheels, built for CUDA
 * 13.2, were built for: a driver older than the application's runtime is
 * refused by frameworks). */
#define TRSIM_CUDA_VERSION (CUDART_VERSION > 13020 ? CUDART_VERSION : 13020)

int trsim_device_count(void);      /* TRSIM_DEVICE_COUNT, default 8 */
int trsim_current_device(void);    /* the calling thread's current device */
size_t trsim_device_capacity(void);/* TRSIM_DEVICE_MEM, default 80 GiB */

/* ---- memory (rt_memory.c) ------------------------------------------------ */

typedef enum {
    TRSIM_MEM_DEVICE = 1,   /* cudaMalloc & co: counts against device capacity */
    TRSIM_MEM_HOST = 2,     /* cudaMallocHost / cudaHostAlloc: pinned host memory */
    TRSIM_MEM_MANAGED = 3,  /* cudaMallocManaged: counts against device capacity */
} trsim_mem_kind;

typedef struct {
    void *base;
    size_t size;            /* size the application asked for */
    int device;
    trsim_mem_kind kind;
    unsigned flags;         /* cudaHostAlloc flags, cudaMemAttach flags */
} trsim_alloc_info;

/* Allocates size bytes of kind on device (ignored for host memory).
 * Device and managed memory fail with cudaErrorMemoryAllocation past the
 * device's capacity. Does not set the last error. */
cudaError_t trsim_mem_alloc(void **ptr, size_t size, int device,
                            trsim_mem_kind kind, unsigned flags);
/* Frees an allocation of the given kind; cudaErrorInvalidValue when ptr is
 * not the base of a live allocation of that kind. Does not set the last error. */
cudaError_t trsim_mem_free(void *ptr, trsim_mem_kind kind);
/* Finds the live allocation containing p (interior pointers too).
 * Returns 1 and fills *out when found, 0 otherwise. */
int trsim_mem_lookup(const void *p, trsim_alloc_info *out);
/* Bytes of device+managed memory live on device. */
size_t trsim_mem_used(int device);
/* cudaMemGetInfo / cuMemGetInfo for the current device: free and total
 * bytes; cudaErrorInvalidValue for a NULL pointer. Does not set the last error. */
cudaError_t trsim_mem_get_info(size_t *free_bytes, size_t *total_bytes);

/* ---- streams and events (rt_stream.c) ------------------------------------ */

typedef struct trsim_stream trsim_stream;
typedef struct trsim_task trsim_task;

typedef enum {
    TRSIM_TASK_DONE = 0,    /* finished: the stream moves on */
    TRSIM_TASK_AGAIN = 1,   /* not finished: run() will be called again */
} trsim_task_state;

/* A unit of work executed, in order, by a stream's worker thread.
 * run() must not block forever: when it has to wait for something outside
 * the process (peers of a collective) it waits a bounded time (a few ms at
 * most) and returns TRSIM_TASK_AGAIN; the worker calls it again. A task that
 * never completes keeps its stream pending forever, like a hung GPU kernel.
 * destroy() (may be NULL) is called once on the worker after run() returned
 * DONE, or when the process is torn down never. */
struct trsim_task {
    trsim_task_state (*run)(trsim_task *task);
    void (*destroy)(trsim_task *task);
    /* Graphs (rt_graph.c): a task queued on a capturing stream becomes a
     * node template of the capture's graph and never runs; each launch of
     * the graph calls clone(template, s) in node order, on the launching
     * thread, which queues on s (trsim_stream_submit_after) fresh work doing
     * what the template describes. NULL: the task cannot be captured (the
     * capture is invalidated, loudly). A template is destroyed (destroy())
     * once no graph or executable graph holds it. */
    cudaError_t (*clone)(trsim_task *tmpl, trsim_stream *s);
    /* private to rt_stream.c */
    trsim_task *next_;
    uint64_t ticket_;
    int ndeps_;
    struct { trsim_stream *stream; uint64_t ticket; } deps_[2];
    void *internal_;
};

/* Resolves an application stream handle (0, cudaStreamLegacy,
 * cudaStreamPerThread or a created stream) on the current device.
 * cudaErrorInvalidResourceHandle for a destroyed or unknown stream. */
cudaError_t trsim_stream_get(cudaStream_t handle, trsim_stream **out);
int trsim_stream_device(const trsim_stream *s);
/* cudaEventRecord(event, s) for the simulator's own use (ncclCollConfig_t's
 * launchCompletionEvent); does not set the last error. */
cudaError_t trsim_event_record(cudaEvent_t event, trsim_stream *s);
/* Blocks until everything queued on s so far has completed. */
void trsim_stream_wait_idle(trsim_stream *s);

/* Convenience: queue fn(arg) on s (trsim_stream_enqueue: captured as a
 * node of type while s captures). A call that owns its arg (free_arg) cannot
 * be captured; trsim_stream_call_copy owns a copy of size bytes of arg, and
 * each launch of a graph holding it gets its own copy. */
cudaError_t trsim_stream_call(trsim_stream *s, void (*fn)(void *arg), void *arg,
                              void (*free_arg)(void *arg), enum cudaGraphNodeType type);
cudaError_t trsim_stream_call_copy(trsim_stream *s, void (*fn)(void *arg), const void *arg,
                                   size_t size, enum cudaGraphNodeType type);
int trsim_stream_is_legacy(const trsim_stream *s);
int trsim_stream_is_blocking(const trsim_stream *s);   /* not cudaStreamNonBlocking */

/* ---- stream capture (rt_capture.c) ----------------------------------------- */

/* Queues task on s (trsim_stream_submit_after), or, while s captures, adds
 * it to the capture's graph as a node of type that depends on what s's
 * next node depends on; the task then never runs. Takes ownership: on an
 * error (the legacy stream used while a blocking stream of its device
 * captures, an invalidated capture, a task without clone) the task is
 * destroyed and the capture rules' CUDA error returned. */
cudaError_t trsim_stream_enqueue(trsim_stream *s, trsim_task *task, enum cudaGraphNodeType type);
/* Whether s takes part in a capture (active or invalidated). Cheap when
 * nothing captures. */
int trsim_stream_capturing(trsim_stream *s);

enum trsim_capture_use {
    TRSIM_CAPTURE_ENQUEUE,  /* queues work on s */
    TRSIM_CAPTURE_SYNC,     /* waits for or queries s: refused while s captures */
    TRSIM_CAPTURE_PEEK,     /* asks for s's capture state: invalidates nothing */
};
/* The capture rules for a use of s, before the call does anything:
 * cudaErrorStreamCaptureImplicit for the legacy stream while a blocking
 * stream of its device captures, cudaErrorStreamCaptureInvalidated on a
 * stream whose capture was invalidated, cudaErrorStreamCaptureUnsupported
 * for a SYNC of a capturing stream; the captures concerned are invalidated
 * (except for PEEK). cudaSuccess otherwise. */
cudaError_t trsim_capture_check(trsim_stream *s, enum trsim_capture_use use);
/* A potentially unsafe call (cudaMalloc, cudaFree, synchronous copies,
 * cudaDeviceSynchronize ...) about device by the calling thread:
 * cudaErrorStreamCaptureUnsupported, invalidating the captures that make
 * it unsafe under the thread's capture mode (cudaThreadExchangeStreamCaptureMode),
 * else cudaSuccess. */
cudaError_t trsim_capture_unsafe(int device);
/* Refuses an operation on s while s captures: invalidates s's capture and
 * returns err (cudaErrorStreamCaptureInvalidated when it was already
 * invalidated); prints one trsim: line naming what when what is not NULL
 * (a limit of the simulator rather than a rule of CUDA). */
cudaError_t trsim_capture_refuse(trsim_stream *s, cudaError_t err, const char *what);
/* The stream's structure is about to be retired (destroyed, or a thread's
 * per-thread stream at exit): it leaves its capture; the origin stream's
 * capture ends, discarded. */
void trsim_capture_stream_gone(trsim_stream *s);

/* An event recorded on a capturing stream holds a mark: the nodes the
 * stream's next node would depend on. trsim_capture_mark_new returns NULL
 * when s does not capture (*err cudaSuccess) or its capture is invalidated
 * (*err). */
typedef struct trsim_capture_mark trsim_capture_mark;
trsim_capture_mark *trsim_capture_mark_new(trsim_stream *s, cudaError_t *err);
void trsim_capture_mark_free(trsim_capture_mark *mark);
/* cudaStreamWaitEvent(s, an event recorded at mark): s joins the mark's
 * capture, or, capturing it already, also depends on the mark's nodes. */
cudaError_t trsim_capture_wait_mark(trsim_stream *s, const trsim_capture_mark *mark);
/* An event recorded at mark was queried or waited for: invalidates the
 * capture while it lasts; returns cudaErrorCapturedEvent. */
cudaError_t trsim_capture_mark_misuse(const trsim_capture_mark *mark);

/* The runtime's capture functions without touching the last error (the
 * driver's twins, rt_driver_graph.c, share them). trsim_capture_begin with
 * graph NULL makes a new graph (cudaStreamBeginCapture). */
cudaError_t trsim_capture_begin(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                const cudaGraphEdgeData *edges, size_t ndeps, enum cudaStreamCaptureMode mode);
cudaError_t trsim_capture_end(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t trsim_capture_info(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
                               unsigned long long *id_out, cudaGraph_t *graph_out,
                               const cudaGraphNode_t **dependencies_out, const cudaGraphEdgeData **edgeData_out,
                               size_t *numDependencies_out);
cudaError_t trsim_capture_update(cudaStream_t stream, cudaGraphNode_t *dependencies,
                                 const cudaGraphEdgeData *dependencyData, size_t numDependencies, unsigned int flags);
cudaError_t trsim_capture_mode_exchange(enum cudaStreamCaptureMode *mode);

/* ---- graphs (rt_graph.c) --------------------------------------------------- */

/* The runtime's graph functions without touching the last error. */
cudaError_t trsim_graph_destroy(cudaGraph_t graph);
cudaError_t trsim_graph_get_nodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes);
cudaError_t trsim_graph_instantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags);
cudaError_t trsim_graph_instantiate_params(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams *instantiateParams);
cudaError_t trsim_graph_launch(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t trsim_graph_upload(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t trsim_graph_exec_update(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                    cudaGraphExecUpdateResultInfo *resultInfo);
cudaError_t trsim_graph_exec_destroy(cudaGraphExec_t graphExec);

/* A new empty graph (cudaGraphCreate's). */
cudaError_t trsim_graph_new(cudaGraph_t *out);
/* Whether graph is a live graph, and node one of its nodes. */
int trsim_graph_valid(cudaGraph_t graph);
int trsim_graph_has_node(cudaGraph_t graph, cudaGraphNode_t node);
/* Appends to graph a node of type whose template is task (NULL: an empty
 * node), depending on deps; NULL when out of memory (task not taken). */
cudaGraphNode_t trsim_graph_add(cudaGraph_t graph, enum cudaGraphNodeType type, trsim_task *task,
                                cudaGraphNode_t const *deps, size_t ndeps);
size_t trsim_graph_size(cudaGraph_t graph);
/* Destroys graph's nodes from index n on (a capture into an existing graph
 * that failed), or the whole graph (n SIZE_MAX). */
void trsim_graph_drop(cudaGraph_t graph, size_t n);
/* A node of graph from index first on from which none of ends can be
 * reached (work a capture did not join back), NULL when there is none. */
cudaGraphNode_t trsim_graph_unjoined(cudaGraph_t graph, size_t first, cudaGraphNode_t const *ends,
                                     size_t nends);
/* Captures into graph in progress (cudaGraphDestroy refuses it meanwhile). */
void trsim_graph_capture_ref(cudaGraph_t graph, int delta);

/* User objects (rt_userobj.c): count more references (0: only checks the
 * object is alive), count fewer (the destructor runs on an internal thread
 * after the last). cudaErrorInvalidValue for a dead object, or releasing
 * none or more than there are. */
cudaError_t trsim_user_object_retain(cudaUserObject_t object, unsigned count);
cudaError_t trsim_user_object_release(cudaUserObject_t object, unsigned count);
/* Waits (a second at most) for the destructors of released user objects
 * queued so far to have run (cudaDeviceSynchronize). */
void trsim_user_objects_settle(void);

/* ---- additions shared by the runtime's own files (rt_*.c) ---------------- */

/* Blocks until all work queued so far on every stream of device completed. */
void trsim_device_wait_idle(int device);

/* Queues task at the end of s, applying the legacy default stream's
 * ordering rules (but not stream capture's: trsim_stream_enqueue), and the
 * task also waits for the task with ticket dep_ticket on dep (when dep is
 * not NULL). The calling thread never waits. Takes ownership. Returns the
 * task's ticket on s: tickets of a stream count up from 1, in queue order. */
uint64_t trsim_stream_submit_after(trsim_stream *s, trsim_task *task,
                                   trsim_stream *dep, uint64_t dep_ticket);
/* The ticket of the last task queued on s (0: none yet). */
uint64_t trsim_stream_last_ticket(trsim_stream *s);
/* Whether the task with ticket on s completed. */
int trsim_stream_ticket_done(trsim_stream *s, uint64_t ticket);
/* Blocks until the task with ticket on s completed. */
void trsim_stream_wait_ticket(trsim_stream *s, uint64_t ticket);
/* trsim_stream structures are never freed (only reused), so a (stream,
 * ticket) pair stays valid to wait on after the stream was destroyed. */

/* Handle tables: opaque application handles (cudaStream_t, cudaEvent_t)
 * that stay detectably invalid after their object was destroyed. kind
 * (1..15) is part of every handle, so a handle of one table never resolves
 * in another. */
typedef struct trsim_handles trsim_handles;
trsim_handles *trsim_handles_new(unsigned kind);
uintptr_t trsim_handle_add(trsim_handles *t, void *obj);  /* 0: no memory */
void *trsim_handle_get(trsim_handles *t, uintptr_t handle); /* NULL: invalid */
void *trsim_handle_remove(trsim_handles *t, uintptr_t handle);

/* Device capacity accounting, shared with the driver API's cuMemCreate.
 * trsim_mem_reserve returns 0, or -1 (nothing reserved) past capacity. */
int trsim_mem_reserve(int device, size_t bytes);
void trsim_mem_unreserve(int device, size_t bytes);

/* Memory pools (rt_pool.c). trsim_mem_alloc_pool allocates device memory
 * counted in pool's statistics; rt_memory.c reports each allocation (add 1)
 * and free (add 0) of pool memory to trsim_pool_account (pool NULL: none). */
cudaError_t trsim_mem_alloc_pool(void **ptr, size_t size, int device, cudaMemPool_t pool);
void trsim_pool_account(cudaMemPool_t pool, size_t size, int add);

/* ncclMemAlloc's memory: device memory in a mapping of its own (page-aligned,
 * sharing no page with other data), as NCCL's cuMem allocations are, so that
 * it can become a window (nccl_win.c). */
cudaError_t trsim_mem_alloc_mapped(void **ptr, size_t size, int device);
/* Whether [p, p+size) lies inside one live device or managed allocation
 * that has a mapping of its own; fills *out (may be NULL) when it does. */
int trsim_mem_own_mapping(const void *p, size_t size, trsim_alloc_info *out);
/* rt_memory.c tells nccl_win.c that a mapping of its own [base, base+len)
 * is about to be unmapped (freed), so no window stays attached to it. */
void trsim_window_memory_freed(void *base, size_t len);

/* Memory ranges the runtime did not allocate itself (cuMemMap mappings):
 * trsim_mem_lookup finds them, trsim_mem_free refuses them, and they do not
 * count as used (their physical memory was counted when it was created). */
cudaError_t trsim_mem_add_mapping(void *base, size_t size, int device);
cudaError_t trsim_mem_remove_mapping(void *base);

/* Device attributes (cudaDeviceAttr values, which the driver's
 * CUdevice_attribute shares). Does not set the last error. */
cudaError_t trsim_device_attribute(int *value, int attr, int device);
/* Marks the driver API initialized: using the runtime initializes it. */
void trsim_driver_mark_initialized(void);
int trsim_driver_ready(void);      /* cuInit or the runtime happened */

/* rt_driver_extra.c: driver entries handed out by the entry-point lookups
 * only (CUcontext, CUstream and CUdeviceptr from cuda.h) */
#ifdef __cuda_cuda_h__
CUresult trsim_cuCtxGetCurrent(CUcontext *pctx);
CUresult trsim_cuCtxSetCurrent(CUcontext ctx);
CUresult trsim_cuCtxPushCurrent(CUcontext ctx);
CUresult trsim_cuCtxPopCurrent(CUcontext *pctx);
CUresult trsim_cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream stream);
CUresult trsim_cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags);
CUresult trsim_cuLogsRegisterCallback(CUlogsCallback cb, void *userData, CUlogsCallbackHandle *handle);
CUresult trsim_cuLogsUnregisterCallback(CUlogsCallbackHandle handle);
#endif
/* Entry-point lookups (rt_driver.c) also hand out the driver's capture and
 * graph functions (rt_driver_graph.c), in the newest version not newer than
 * cudaVersion, the per-thread default stream's form when per_thread: 1 and
 * *fn when found, 0 when symbol is none of them, -1 when it is but only for
 * later versions (*fn NULL). */
int trsim_graph_entry_find(const char *symbol, int cudaVersion, int per_thread, void **fn);

/* the entries a simulated device does not have: each fails with
 * CUDA_ERROR_NOT_SUPPORTED and one trsim: line (X(name) per entry) */
#define TRSIM_DRIVER_UNSUPPORTED(X)                                                                  \
    X(cuCtxFromGreenCtx) X(cuDevResourceGenerateDesc) X(cuDevSmResourceSplitByCount)                \
    X(cuDeviceGetDevResource) X(cuGreenCtxCreate) X(cuGreenCtxDestroy) X(cuGreenCtxStreamCreate)    \
    X(cuMulticastAddDevice)                                                                          \
    X(cuMulticastBindMem) X(cuMulticastCreate) X(cuMulticastUnbind)
#define TRSIM_UNSUPPORTED_DECL(name) int trsim_unsupported_##name(void);
TRSIM_DRIVER_UNSUPPORTED(TRSIM_UNSUPPORTED_DECL)

/* Programs built with per-thread default streams (nvcc --default-stream
 * per-thread, or CUDA_API_PER_THREAD_DEFAULT_STREAM) call the _ptsz / _ptds
 * variants of the stream-taking functions, where stream 0 means the calling
 * thread's default stream. */
#define TRSIM_PTSZ(stream) ((stream) ? (stream) : cudaStreamPerThread)

#endif
