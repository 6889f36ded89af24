/* Every optional CUDA runtime and driver function the shim calls besides
 * the ones it wraps, and the ways of asking them that leave the
 * application's CUDA error state alone (tr_cuda.h).
 *
 * Three lookup rules, each for its callers:
 *   - a function on its own (TR_REAL_OPT): the wrappers' questions, on the
 *     application's threads; a miss costs one counter add, a lookup every
 *     1024th time;
 *   - the background engines' table (completion events, the NaN check's
 *     host engine), looked up together behind a gate: one thread looks and
 *     stores, the others wait for its answer; a miss is looked up again at
 *     most once a second and every 256th call;
 *   - the GPU engine's driver table, looked up once.
 * The versions are looked up at each call until found (the writer asks them
 * a few times only). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

#include "tr_core.h"
#include "tr_cuda.h"

typedef cudaError_t (*f_err)(void);
typedef cudaError_t (*f_getdev)(int *);
typedef cudaError_t (*f_iscap)(cudaStream_t, enum cudaStreamCaptureStatus *);
typedef cudaError_t (*f_streamdev)(cudaStream_t, int *);
typedef cudaError_t (*f_ptrattr)(struct cudaPointerAttributes *, const void *);
typedef const char *(*f_errname)(cudaError_t);
typedef cudaError_t (*f_version)(int *);
typedef CUresult (*f_cu_errname)(CUresult, const char **);
typedef CUresult (*f_cu_ctxdev)(CUdevice *);
typedef CUresult (*f_cu_meminfo)(size_t *, size_t *);

/* ---- single functions ------------------------------------------------------------ */

static f_err opt_peek(void)
{
    TR_REAL_OPT(f, f_err, "cudaPeekAtLastError", TR_LIB_CUDART);
    return f;
}

static f_err opt_getlast(void)
{
    TR_REAL_OPT(f, f_err, "cudaGetLastError", TR_LIB_CUDART);
    return f;
}

/* cudaGetDevice: TR_REAL_OPT's rule, with the cache visible to the inline
 * tr_cuda_device_known (tr_cuda.h) */
_Atomic(tr_cuda_getdev_t) tr_cuda_getdev;

tr_cuda_getdev_t tr_cuda_getdev_miss(void)
{
    /* The first lookup is waited for by every thread that misses meanwhile:
     * threads allocating at once at start-up would otherwise find no
     * function while the first one is still looking, and leave their
     * allocations' device unknown (unaccounted). Later misses (no runtime
     * loaded) look again every 1024th time only. */
    static atomic_uint miss;
    static atomic_int first;              /* 0 not looked, 1 looking, 2 looked */
    int st = atomic_load_explicit(&first, memory_order_acquire);
    if (st == 0 && atomic_compare_exchange_strong(&first, &st, 1)) {
        tr_cuda_getdev_t f = (tr_cuda_getdev_t)tr_real("cudaGetDevice", TR_LIB_CUDART);
        if (f) atomic_store_explicit(&tr_cuda_getdev, f, memory_order_release);
        atomic_store_explicit(&first, 2, memory_order_release);
        return f;
    }
    while (atomic_load_explicit(&first, memory_order_acquire) == 1) sched_yield();
    tr_cuda_getdev_t f = atomic_load_explicit(&tr_cuda_getdev, memory_order_acquire);
    if (f || (atomic_fetch_add_explicit(&miss, 1, memory_order_relaxed) & 1023) != 0) return f;
    f = (tr_cuda_getdev_t)tr_real("cudaGetDevice", TR_LIB_CUDART);
    if (f) atomic_store_explicit(&tr_cuda_getdev, f, memory_order_release);
    return f;
}

static f_getdev opt_getdev(void)
{
    f_getdev f = atomic_load_explicit(&tr_cuda_getdev, memory_order_acquire);
    return f ? f : tr_cuda_getdev_miss();
}

int tr_cuda_device(void)
{
    f_err peek = opt_peek();
    f_getdev getdev = opt_getdev();
    f_err getlast = opt_getlast();
    if (!peek || !getdev || peek() != cudaSuccess) return -1;
    int d = -1;
    if (getdev(&d) != cudaSuccess) {
        if (getlast) getlast();      /* the error was ours: back to the clean state */
        return -1;
    }
    return d;
}

int tr_cuda_stream_capturing(cudaStream_t s)
{
    TR_REAL_OPT(iscap, f_iscap, "cudaStreamIsCapturing", TR_LIB_CUDART);
    f_err peek = opt_peek();
    f_err getlast = opt_getlast();
    if (!peek || !iscap || peek() != cudaSuccess) return -1;
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (iscap(s, &st) != cudaSuccess) {
        if (getlast) getlast();
        return -1;
    }
    return st != cudaStreamCaptureStatusNone;
}

/* The driver's cuStreamGetCaptureInfo of three parameters: the one ABI
 * every driver since CUDA 10.1 keeps under this name (the runtime's name
 * changed parameters across 12.x and 13), and a driver call leaves the
 * runtime's error state alone. */
typedef int (*f_capinfo)(cudaStream_t, int *, unsigned long long *);

int tr_cuda_capture_id(cudaStream_t s, uint64_t *id)
{
    TR_REAL_OPT(capinfo, f_capinfo, "cuStreamGetCaptureInfo", TR_LIB_CUDA);
    *id = 0;
    if (!capinfo) return -1;
    int st = 0;   /* CU_STREAM_CAPTURE_STATUS_NONE */
    unsigned long long v = 0;
    if (capinfo(s, &st, &v) != 0) return -1;
    if (st != 1) return 0;   /* not ACTIVE: none, or invalidated (nothing will run) */
    *id = v;
    return 1;
}

int tr_cuda_context_device(void)
{
    f_getdev getdev = opt_getdev();
    int d = -1;
    if (getdev) return getdev(&d) == cudaSuccess ? d : -1;
    TR_REAL_OPT(drv, f_cu_ctxdev, "cuCtxGetDevice", TR_LIB_CUDA);
    CUdevice cd;
    if (drv && drv(&cd) == CUDA_SUCCESS) return (int)cd;
    return -1;
}

typedef cudaError_t (*f_props)(struct cudaDeviceProp *, int);
typedef cudaError_t (*f_pcibus)(char *, int, int);

int tr_cuda_device_identity(int dev, char *name, size_t name_cap, unsigned char uuid[16], char *pci, size_t pci_cap)
{
    /* CUDA 12 exports its layout as _v2 beside the old one; 13 under the plain name */
    TR_REAL_OPT(props2, f_props, "cudaGetDeviceProperties_v2", TR_LIB_CUDART);
    TR_REAL_OPT(props1, f_props, "cudaGetDeviceProperties", TR_LIB_CUDART);
    TR_REAL_OPT(pcibus, f_pcibus, "cudaDeviceGetPCIBusId", TR_LIB_CUDART);
    f_props props = props2 ? props2 : props1;
    f_err peek = opt_peek();
    f_err getlast = opt_getlast();
    if (!peek || !props || peek() != cudaSuccess) return 0;
    /* room for the largest layout a runtime may write */
    union {
        struct cudaDeviceProp p;
        char room[4096];
    } u;
    memset(&u, 0, sizeof u);
    if (props(&u.p, dev) != cudaSuccess) {
        if (getlast) getlast();
        return 0;
    }
    snprintf(name, name_cap, "%.*s", (int)sizeof u.p.name, u.p.name);
    memcpy(uuid, u.p.uuid.bytes, 16);
    pci[0] = 0;
    if (pcibus && pcibus(pci, (int)pci_cap, dev) != cudaSuccess) {
        pci[0] = 0;
        if (getlast) getlast();
    }
    return 1;
}

int tr_cuda_stream_device(cudaStream_t s, int *device)
{
    TR_REAL_OPT(sgd, f_streamdev, "cudaStreamGetDevice", TR_LIB_CUDART);
    return sgd && sgd(s, device) == cudaSuccess;
}

int tr_cuda_pointer_attributes(struct cudaPointerAttributes *a, const void *p)
{
    TR_REAL_OPT(pga, f_ptrattr, "cudaPointerGetAttributes", TR_LIB_CUDART);
    return pga && pga(a, p) == cudaSuccess;
}

int tr_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    TR_REAL_OPT(info, f_cu_meminfo, "cuMemGetInfo_v2", TR_LIB_CUDA);
    return info && info(free_bytes, total_bytes) == CUDA_SUCCESS;
}

const char *tr_cuda_error_name(int err)
{
    TR_REAL_OPT(name, f_errname, "cudaGetErrorName", TR_LIB_CUDART);
    return name ? name((cudaError_t)err) : NULL;
}

const char *tr_cu_error_name(int err)
{
    TR_REAL_OPT(name, f_cu_errname, "cuGetErrorName", TR_LIB_CUDA);
    const char *s = NULL;
    if (!name || name((CUresult)err, &s) != CUDA_SUCCESS) return NULL;
    return s;
}

static int version_of(_Atomic(f_version) *cache, const char *name)
{
    f_version f = atomic_load_explicit(cache, memory_order_acquire);
    if (!f) {
        f = (f_version)tr_real(name, TR_LIB_CUDART);
        if (f) atomic_store_explicit(cache, f, memory_order_release);
    }
    int v = 0;
    if (!f || f(&v) != cudaSuccess) return 0;
    return v;
}

int tr_cuda_runtime_version(void)
{
    static _Atomic(f_version) f;
    return version_of(&f, "cudaRuntimeGetVersion");
}

int tr_cuda_driver_version(void)
{
    static _Atomic(f_version) f;
    return version_of(&f, "cudaDriverGetVersion");
}

/* ---- the background engines' table ------------------------------------------------ */

static tr_cudart g_rt;
static struct {
    atomic_int state;         /* 0 not looked up, 1 found, -1 missing, 2 being looked up */
    atomic_uint retry;
    _Atomic uint64_t next_ns;
} g_gate;
static int g_has_events, g_has_copies;   /* written before state 1 (release) */

/* 1 found before, 0 missing and not due, -1 look now (then gate_end) */
static int gate_begin(void)
{
    /* one thread looks (state 2) and stores what it finds; the others wait
     * for its answer (a lookup takes microseconds) rather than storing the
     * same functions at the same time */
    for (long spins = 0;; spins++) {
        int st = atomic_load_explicit(&g_gate.state, memory_order_acquire);
        if (st == 1) return 1;
        if (st == 2) {
            if (spins > 1000000) return 0;     /* never: the looking thread is stuck */
            sched_yield();
            continue;
        }
        if (st < 0) {
            if ((atomic_fetch_add(&g_gate.retry, 1) & 255) != 0) return 0;
            uint64_t now = tr_now_ns();
            if (now < atomic_load(&g_gate.next_ns)) return 0;
            atomic_store(&g_gate.next_ns, now + 1000000000ull);
        }
        if (atomic_compare_exchange_strong_explicit(&g_gate.state, &st, 2, memory_order_acquire,
                                                    memory_order_relaxed))
            return -1;
    }
}

const tr_cudart *tr_cuda_rt(void)
{
    int st = gate_begin();
    if (st >= 0) return st ? &g_rt : NULL;
    g_rt.peek = (f_err)tr_real("cudaPeekAtLastError", TR_LIB_CUDART);
    g_rt.getlast = (f_err)tr_real("cudaGetLastError", TR_LIB_CUDART);
    g_rt.getdev = (f_getdev)tr_real("cudaGetDevice", TR_LIB_CUDART);
    g_rt.setdev = (cudaError_t(*)(int))tr_real("cudaSetDevice", TR_LIB_CUDART);
    g_rt.capmode = (cudaError_t(*)(enum cudaStreamCaptureMode *))tr_real("cudaThreadExchangeStreamCaptureMode",
                                                                          TR_LIB_CUDART);
    g_rt.event_create = (cudaError_t(*)(cudaEvent_t *, unsigned int))tr_real("cudaEventCreateWithFlags",
                                                                             TR_LIB_CUDART);
    g_rt.event_record = (cudaError_t(*)(cudaEvent_t, cudaStream_t))tr_real("cudaEventRecord", TR_LIB_CUDART);
    g_rt.event_query = (cudaError_t(*)(cudaEvent_t))tr_real("cudaEventQuery", TR_LIB_CUDART);
    g_rt.memcpy_async = (cudaError_t(*)(void *, const void *, size_t, enum cudaMemcpyKind,
                                        cudaStream_t))tr_real("cudaMemcpyAsync", TR_LIB_CUDART);
    g_rt.host_func = (cudaError_t(*)(cudaStream_t, cudaHostFn_t, void *))tr_real("cudaLaunchHostFunc",
                                                                                 TR_LIB_CUDART);
    g_rt.host_alloc = (cudaError_t(*)(void **, size_t, unsigned int))tr_real("cudaHostAlloc", TR_LIB_CUDART);
    int found = g_rt.peek && g_rt.getlast && g_rt.getdev && g_rt.setdev;
    g_has_events = found && g_rt.event_create && g_rt.event_record && g_rt.event_query;
    g_has_copies = found && g_rt.memcpy_async && g_rt.host_func && g_rt.host_alloc;
    atomic_store_explicit(&g_gate.state, found ? 1 : -1, memory_order_release);
    return found ? &g_rt : NULL;
}

const tr_cudart *tr_cuda_rt_events(void)
{
    return tr_cuda_rt() && g_has_events ? &g_rt : NULL;
}

const tr_cudart *tr_cuda_rt_copies(void)
{
    return tr_cuda_rt() && g_has_copies ? &g_rt : NULL;
}

const tr_cudart *tr_cuda_rt_found(void)
{
    return atomic_load_explicit(&g_gate.state, memory_order_acquire) == 1 && g_has_events ? &g_rt : NULL;
}

int tr_cuda_event_new(const tr_cudart *rt, cudaEvent_t *ev)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    int swapped = rt->capmode && rt->capmode(&mode) == cudaSuccess;
    *ev = NULL;
    cudaError_t r = rt->event_create(ev, cudaEventDisableTiming);
    if (swapped) rt->capmode(&mode);
    if (r != cudaSuccess || !*ev) {
        rt->getlast();
        return -1;
    }
    return 0;
}

cudaError_t tr_cuda_host_alloc(const tr_cudart *rt, void **p, size_t size, unsigned int flags)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    int swapped = rt->capmode && rt->capmode(&mode) == cudaSuccess;
    cudaError_t r = rt->host_alloc(p, size, flags);
    if (swapped) rt->capmode(&mode);
    return r;
}

void tr_cuda_relax_thread(const tr_cudart *rt)
{
    if (!rt->capmode) return;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    rt->capmode(&mode);
}

/* ---- the GPU engine's driver table ------------------------------------------------ */

static tr_cudrv g_drv;
static int g_drv_ok;
static pthread_once_t g_drv_once = PTHREAD_ONCE_INIT;

static void drv_lookup(void)
{
    tr_cudrv *d = &g_drv;
    d->ctx_get = (CUresult(*)(CUcontext *))tr_real("cuCtxGetCurrent", TR_LIB_CUDA);
    d->ctx_push = (CUresult(*)(CUcontext))tr_real("cuCtxPushCurrent_v2", TR_LIB_CUDA);
    d->ctx_pop = (CUresult(*)(CUcontext *))tr_real("cuCtxPopCurrent_v2", TR_LIB_CUDA);
    d->stream_ctx = (CUresult(*)(CUstream, CUcontext *))tr_real("cuStreamGetCtx", TR_LIB_CUDA);
    d->mod_load = (CUresult(*)(CUmodule *, const void *))tr_real("cuModuleLoadData", TR_LIB_CUDA);
    d->mod_fn = (CUresult(*)(CUfunction *, CUmodule, const char *))tr_real("cuModuleGetFunction", TR_LIB_CUDA);
    d->launch = (CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **))tr_real("cuLaunchKernel", TR_LIB_CUDA);
    d->ctx_dev = (CUresult(*)(CUdevice *))tr_real("cuCtxGetDevice", TR_LIB_CUDA);
    d->dev_attr = (CUresult(*)(int *, CUdevice_attribute, CUdevice))tr_real("cuDeviceGetAttribute", TR_LIB_CUDA);
    d->host_alloc = (CUresult(*)(void **, size_t, unsigned))tr_real("cuMemHostAlloc", TR_LIB_CUDA);
    d->host_dptr = (CUresult(*)(CUdeviceptr *, void *, unsigned))tr_real("cuMemHostGetDevicePointer_v2",
                                                                         TR_LIB_CUDA);
    /* the driver's own, not the shim's wrapper: not the application's memory */
    d->mem_alloc = (CUresult(*)(CUdeviceptr *, size_t))tr_real("cuMemAlloc_v2", TR_LIB_CUDA);
    g_drv_ok = d->ctx_get && d->ctx_push && d->ctx_pop && d->stream_ctx && d->mod_load && d->mod_fn &&
               d->launch && d->ctx_dev && d->dev_attr && d->host_alloc && d->host_dptr && d->mem_alloc;
}

const tr_cudrv *tr_cuda_drv(void)
{
    pthread_once(&g_drv_once, drv_lookup);
    return g_drv_ok ? &g_drv : NULL;
}
