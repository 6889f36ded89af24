/* Every optional CUDA runtime and driver function the shim calls besides
 * the ones it wraps (tr_cuda.c), in one place, as NCCL's cudawrap.cc keeps
 * its driver table: found at run time (the runtime or the driver may be
 * loaded later, or not at all; nothing links against CUDA), and asked in
 * ways that leave the application's CUDA error state exactly as it was:
 * peek first (an error of the application's pending: ask nothing), ask,
 * and when our call failed, clear exactly the error it left
 * (cudaGetLastError). Driver calls have no part in the runtime's error
 * state. base/: uses tr_core.h and tr_real only. Part of base/'s
 * boundary: included through tr_core.h. */
#ifndef TR_CUDA_H
#define TR_CUDA_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

/* ---- the wrappers' questions (peek, ask, clear only our error) --------------
 * Each function is looked up on its own; a missing one is looked up again
 * only every 1024th time, so asking costs nothing per call. */

/* The calling thread's current device; -1 when it cannot be asked (no
 * runtime, an error of the application's pending, the call failed). */
int tr_cuda_device(void);
/* Whether stream s is capturing a graph: 1 yes, 0 no, -1 unknown (same
 * rules). */
int tr_cuda_stream_capturing(cudaStream_t s);
/* The id of the capture sequence stream s takes part in (CUDA's, the same
 * for every stream joined to it): 1 with *id set, 0 when s is not actively
 * capturing, -1 when it cannot be asked (no driver). */
int tr_cuda_capture_id(cudaStream_t s, uint64_t *id);

/* Asked only where they cannot fail or leave no error (tr_memory.c: right
 * after the runtime or driver served the thread, see there). */
/* cudaGetDevice as it is; -1 when it fails or there is no runtime. Inline
 * (every allocation counted asks it): the function found, shared with the
 * other questions here, or tr_cuda_getdev_miss's lookup. */
typedef cudaError_t (*tr_cuda_getdev_t)(int *);
extern _Atomic(tr_cuda_getdev_t) tr_cuda_getdev __attribute__((visibility("hidden")));
tr_cuda_getdev_t tr_cuda_getdev_miss(void);
static inline int tr_cuda_device_known(void)
{
    tr_cuda_getdev_t f = atomic_load_explicit(&tr_cuda_getdev, memory_order_acquire);
    if (__builtin_expect(!f, 0)) f = tr_cuda_getdev_miss();
    int d = -1;
    if (!f || f(&d) != cudaSuccess) return -1;
    return d;
}
/* The device of the current context: the runtime's current device when
 * the runtime is loaded (it is the current context's), else the driver's
 * (cuCtxGetDevice); -1 unknown. */
int tr_cuda_context_device(void);
/* cudaStreamGetDevice, cudaPointerGetAttributes, the driver's
 * cuMemGetInfo_v2: 1 with the answer, 0 when missing or failed. */
int tr_cuda_stream_device(cudaStream_t s, int *device);
int tr_cuda_pointer_attributes(struct cudaPointerAttributes *a, const void *p);
int tr_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);
/* The names of a cudaError_t (cudaGetErrorName, which keeps no state) and
 * of a CUresult (cuGetErrorName); NULL when unknown. */
const char *tr_cuda_error_name(int err);
const char *tr_cu_error_name(int err);
/* The name, UUID and PCI bus id of device dev (cudaGetDeviceProperties,
 * whose name and uuid come first in every CUDA's layout, and
 * cudaDeviceGetPCIBusId), asked by the rules above: 1, or 0 when it cannot
 * be asked. */
int tr_cuda_device_identity(int dev, char *name, size_t name_cap, unsigned char uuid[16], char *pci, size_t pci_cap);
/* cudaRuntimeGetVersion, cudaDriverGetVersion; 0 when unknown (a missing
 * function is looked up again at each call). The driver's version getter
 * sets the calling thread's last error when there is no driver: only the
 * writer thread asks it. */
int tr_cuda_runtime_version(void);
int tr_cuda_driver_version(void);

/* ---- the background engines' runtime table ----------------------------------
 * Looked up together: a failed lookup (which searches the library path,
 * ~100 us) is retried at most once a second and only every 256th call; one
 * thread looks, the others wait for its answer. */
typedef struct {
    cudaError_t (*peek)(void);                                   /* cudaPeekAtLastError */
    cudaError_t (*getlast)(void);                                /* cudaGetLastError */
    cudaError_t (*getdev)(int *);
    cudaError_t (*setdev)(int);
    cudaError_t (*capmode)(enum cudaStreamCaptureMode *);        /* optional */
    /* completion events (tr_complete.c) */
    cudaError_t (*event_create)(cudaEvent_t *, unsigned int);    /* cudaEventCreateWithFlags */
    cudaError_t (*event_record)(cudaEvent_t, cudaStream_t);
    cudaError_t (*event_query)(cudaEvent_t);
    /* the NaN check's host engine (tr_nancheck.c) */
    cudaError_t (*memcpy_async)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
    cudaError_t (*host_func)(cudaStream_t, cudaHostFn_t, void *);      /* cudaLaunchHostFunc */
    cudaError_t (*host_alloc)(void **, size_t, unsigned int);          /* cudaHostAlloc */
} tr_cudart;

/* The table when the runtime is there (peek, getlast, getdev and setdev
 * found), else NULL; _events / _copies: when the completion events / the
 * host engine's functions are there too. tr_cuda_rt_found: the same as
 * tr_cuda_rt_events without looking (the completion poller). */
const tr_cudart *tr_cuda_rt(void);
const tr_cudart *tr_cuda_rt_events(void);
const tr_cudart *tr_cuda_rt_copies(void);
const tr_cudart *tr_cuda_rt_found(void);

/* A new event (cudaEventDisableTiming) on the current device, created in
 * relaxed capture mode (another thread's graph capture must not see our
 * call as unsafe); on failure our error is cleared. 0, or -1. */
int tr_cuda_event_new(const tr_cudart *rt, cudaEvent_t *ev);
/* cudaHostAlloc in relaxed capture mode; the error is left to the caller. */
cudaError_t tr_cuda_host_alloc(const tr_cudart *rt, void **p, size_t size, unsigned int flags);
/* The calling thread's capture mode becomes relaxed for good (the shim's
 * own threads). */
void tr_cuda_relax_thread(const tr_cudart *rt);

/* ---- the driver table of the NaN check's GPU engine (tr_nangpu.c) -------------
 * Looked up once, the first time it is asked for. */
typedef struct {
    CUresult (*ctx_get)(CUcontext *);                   /* cuCtxGetCurrent */
    CUresult (*ctx_push)(CUcontext);                    /* cuCtxPushCurrent_v2 */
    CUresult (*ctx_pop)(CUcontext *);                   /* cuCtxPopCurrent_v2 */
    CUresult (*stream_ctx)(CUstream, CUcontext *);      /* cuStreamGetCtx */
    CUresult (*mod_load)(CUmodule *, const void *);     /* cuModuleLoadData */
    CUresult (*mod_fn)(CUfunction *, CUmodule, const char *);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       CUstream, void **, void **);
    CUresult (*ctx_dev)(CUdevice *);
    CUresult (*dev_attr)(int *, CUdevice_attribute, CUdevice);
    CUresult (*host_alloc)(void **, size_t, unsigned);  /* cuMemHostAlloc */
    CUresult (*host_dptr)(CUdeviceptr *, void *, unsigned);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);       /* the driver's cuMemAlloc_v2, not the wrapper */
} tr_cudrv;
/* The table, NULL when a function is missing (no libcuda, the simulator). */
const tr_cudrv *tr_cuda_drv(void);

#endif
