/* Allocation wrappers and per-device memory accounting.
 *
 * What is recorded (docs/trace-format.md, "memory"):
 *   - per device: live bytes, peak bytes, allocation and free counts, when
 *     the peak was reached, the call stack that reached it and the last
 *     collective issued before it;
 *   - pinned host memory (cudaMallocHost, cudaHostAlloc, cuMemCreate on a
 *     host location), apart from device memory;
 *   - every failed allocation.
 * Bytes are the application's: the size it asked for (cudaMallocPitch: the
 * pitch times the height it got back, the bytes reserved for it), exact to
 * the byte. Calls made inside another wrapped call (tr_enter() == 0: NCCL's
 * own cudaMalloc inside ncclMemAlloc or ncclCommInitRank, the runtime's
 * cudaHostAlloc inside cudaMallocHost) are not the application's and are not
 * counted; a free of a pointer the shim never saw counted is ignored.
 *
 * The wrappers never change arguments or results, never synchronize and
 * never touch the application's CUDA error state: the only runtime calls
 * made besides the real one are cudaGetDevice, cudaStreamGetDevice and
 * cudaPointerGetAttributes, each only where it cannot fail (a valid pointer
 * or stream just used successfully, or a failure that proves the device was
 * initialized), and cudaGetErrorName, which keeps no state. Free and total
 * memory at a failure come from the driver's cuMemGetInfo_v2, which has no
 * part in the runtime's last-error state.
 *
 * Cost: the live allocations are kept in tr_memtable.c (a sharded hash
 * table with a small per-thread ring in front of it, see there). Counters
 * are per-device atomics, kept in the ring header's slot of the device
 * (tr_memory_int.h: mt_dev_counters), so that the ring file says them with
 * no second count; the first failure of a device is stored there too.
 * Stacks, times and the last collective are taken only when an allocation
 * raises its device's peak.
 *
 * The counters and the failures are kept in tr_memcount.c (tr_memory_int.h),
 * from where tr_memjson.c writes the trace's "memory" member. wrap/
 * (tr_core.h's folders). */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include "trshim/nccl_abi.h"

#include "tr_core.h"
#include "tr_init.h"
#include "tr_record.h"
#include "tr_stacks.h"

/* ---- counters -------------------------------------------------------------- */

/* Raises c->peak to at least live; returns 1 if this call raised it. */
static inline int mt_raise(mt_counters *c, uint64_t live)
{
    uint64_t pk = atomic_load_explicit(&c->peak, memory_order_relaxed);
    while (live > pk) {
        if (atomic_compare_exchange_weak_explicit(&c->peak, &pk, live, memory_order_relaxed,
                                                  memory_order_relaxed))
            return 1;
    }
    return 0;
}

/* ---- what a wrapper completes with the call stack ---------------------------
 * tr_stack_capture() must be called by the wrapper itself (it takes its
 * caller's frame for the wrapper's), so the helpers below leave what needs a
 * stack here and the wrapper ends with MT_FINISH. */

enum { MT_NOTHING = 0, MT_PEAK, MT_FAILURE };

typedef struct {
    int what;                  /* MT_NOTHING, MT_PEAK, MT_FAILURE */
    /* MT_PEAK: the device's peak grew to live */
    int device;
    uint64_t live;
    /* MT_FAILURE: all but the stack */
    mt_failure fail;
} mt_pending;

/* A device's peak grew to live: note when and after which collective at
 * once; the stack follows (mt_finish). */
static __attribute__((noinline)) void mt_peak_grew(mt_device *d, int device, uint64_t live,
                                                   mt_pending *pd)
{
    uint64_t ns = tr_now_ns(), comm = 0, seq = 0;
    int has_coll = tr_nccl_last_collective(device, &comm, &seq) ? 1 : 0;
    mt_lock(&d->plock);
    if (live > d->p_bytes) {   /* a concurrent higher peak may have been noted first */
        d->p_bytes = live;
        d->p_ns = ns;
        d->p_stack = -1;
        d->p_pystack = -1;
        d->p_has_coll = has_coll;
        d->p_comm = comm;
        d->p_seq = seq;
        trr_mem *m = tr_ring_mem(device);
        if (m)       /* under plock: in the order the peaks were noted */
            __atomic_store_n(&m->peak_ns, ns, __ATOMIC_RELAXED);
        pd->what = MT_PEAK;
        pd->device = device;
        pd->live = live;
    }
    mt_unlock(&d->plock);
}

static void mt_fail_store(const mt_failure *f);

static __attribute__((noinline)) void mt_finish(mt_pending *pd, int32_t stack)
{
    /* the Python stack, if the thread runs Python code (no frame of the
     * wrapper is needed for it: it is the thread's interpreter state) */
    int32_t pystack = tr_pystack_capture();
    if (pd->what == MT_PEAK) {
        mt_device *d = &mt_devs[pd->device];
        mt_lock(&d->plock);
        if (d->p_bytes == pd->live) {  /* still this peak */
            d->p_stack = stack;
            d->p_pystack = pystack;
        }
        mt_unlock(&d->plock);
    } else if (pd->what == MT_FAILURE) {
        pd->fail.stack = stack;
        pd->fail.pystack = pystack;
        mt_fail_store(&pd->fail);
    }
}

/* In the wrapper's own body, after its accounting. */
#define MT_FINISH(pd)                                                          \
    do {                                                                       \
        if (__builtin_expect((pd).what != MT_NOTHING, 0))                      \
            mt_finish(&(pd), tr_stack_capture());                              \
    } while (0)

/* ---- allocations and frees ------------------------------------------------ */

/* A successful allocation of the application. */
static inline void mt_count_alloc(mt_table *t, uintptr_t key, uint64_t size, int device,
                                  unsigned kind, mt_pending *pd)
{
    if (!key || !size)
        return;                        /* nothing was allocated (size 0) */
    if (kind != MT_PINNED && !mt_device_ok(device)) {
        if (device >= MT_MAX_DEVICES)
            tr_warn("memory: device %d and above are not accounted", MT_MAX_DEVICES);
        else
            tr_warn("memory: an allocation's device is unknown; not accounted");
        return;
    }
    mt_slot v = {key, size, device, kind};
    if (!mt_insert(t, &v))
        return;
    if (kind == MT_PINNED) {
        mt_counters *c[2] = {&mt_pinned_all, mt_device_ok(device) ? &mt_pinned_dev[device] : NULL};
        for (int k = 0; k < 2; k++) {
            if (!c[k])
                continue;
            uint64_t live = atomic_fetch_add_explicit(&c[k]->live, size, memory_order_relaxed) + size;
            atomic_fetch_add_explicit(&c[k]->allocs, 1, memory_order_relaxed);
            mt_raise(c[k], live);
        }
        return;
    }
    mt_device *d = &mt_devs[device];
    mt_counters *c = mt_dev_counters(device);   /* in the ring header (tr_memory_int.h) */
    uint64_t live = atomic_fetch_add_explicit(&c->live, size, memory_order_relaxed) + size;
    if (live > atomic_load_explicit(&c->peak, memory_order_relaxed) && mt_raise(c, live))
        mt_peak_grew(d, device, live, pd);
    /* last: a device is listed (allocs > 0) once its first peak is noted */
    atomic_fetch_add_explicit(&c->allocs, 1, memory_order_release);
}

/* Free, part 2: the real call succeeded (count the free) or failed (the
 * allocation lives on: put it back). */
static void mt_free_end(mt_table *t, const mt_slot *e, int ok)
{
    if (ok)
        mt_uncount(e, 1);
    else if (!mt_insert(t, e))
        mt_uncount(e, 0);              /* cannot be tracked any more */
}

/* ---- failures -------------------------------------------------------------- */


static void mt_fail_store(const mt_failure *f)
{
    uint64_t n = atomic_fetch_add_explicit(&mt_fail_count, 1, memory_order_relaxed);
    if (mt_device_ok(f->device))
        atomic_fetch_add_explicit(&mt_devs[f->device].failures, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&mt_failures_nodev, 1, memory_order_relaxed);
    /* the ring header: device memory's failures (the slot is claimed here
     * when the device had no allocation yet), the first one in full */
    trr_mem *m = f->pinned ? NULL : tr_ring_mem(f->device);
    if (m && __atomic_fetch_add(&m->failures, 1, __ATOMIC_RELAXED) == 0)
        tr_ring_mem_failed(m, f->api, f->code, f->bytes, f->live, f->has_info ? f->free_bytes : UINT64_MAX,
                           f->has_info ? f->total_bytes : UINT64_MAX, f->t_ns, f->stack, f->pystack);
    mt_fail_slot *s = n < MT_FAIL_HEAD ? &mt_fail_slots[n]
                                       : &mt_fail_slots[MT_FAIL_HEAD + (n - MT_FAIL_HEAD) % MT_FAIL_TAIL];
    mt_lock(&s->lock);
    if (s->number < n + 1) {   /* a later failure may already have taken a tail slot */
        s->number = n + 1;
        s->f = *f;
    }
    mt_unlock(&s->lock);
}

typedef enum { MT_API_RT, MT_API_DRV, MT_API_NCCL } mt_api_family;

static void mt_error_name(char *out, size_t n, mt_api_family fam, int code)
{
    const char *name = NULL;
    if (fam == MT_API_RT) {
        name = tr_cuda_error_name(code);
        if (name && strncmp(name, "cuda", 4) != 0)   /* "unrecognized error code" */
            name = NULL;
        if (!name) {
            snprintf(out, n, "cudaError(%d)", code);
            return;
        }
    } else if (fam == MT_API_DRV) {
        if (!(name = tr_cu_error_name(code))) {
            snprintf(out, n, "CUresult(%d)", code);
            return;
        }
    } else {
        static const char *const nccl_names[] = {
            "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
            "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"};
        if (code < 0 || code >= (int)(sizeof nccl_names / sizeof nccl_names[0])) {
            snprintf(out, n, "ncclResult(%d)", code);
            return;
        }
        name = nccl_names[code];
    }
    snprintf(out, n, "%s", name);
}

/* The runtime's current device (-1 when it does not say). Safe to call where
 * the runtime is known to work for this thread: cudaGetDevice sets no error
 * when it succeeds. */
static inline int mt_current_device(void)
{
    return tr_cuda_device_known();
}

/* The device of a driver-API allocation: the runtime's current device when
 * the runtime is loaded (it is the current context's), else the driver's. */
static int mt_driver_device(void)
{
    return tr_cuda_context_device();
}

/* Records a failed allocation (but its stack). device: where it was to be
 * (-1 unknown); current: the runtime's current device, when known (-1
 * otherwise); the driver's free/total are reported only when they describe
 * that device. */
static __attribute__((noinline)) void mt_fail(const char *api, mt_api_family fam, int code,
                                              uint64_t bytes, int device, int current, int pinned,
                                              mt_pending *pd)
{
    mt_failure *fp = &pd->fail, f;
    pd->what = MT_FAILURE;
    memset(&f, 0, sizeof f);
    f.t_ns = tr_now_ns();
    f.api = api;
    f.device = device;
    f.pinned = pinned;
    f.bytes = bytes;
    f.code = code;
    if (pinned)
        f.live = atomic_load_explicit(&mt_pinned_all.live, memory_order_relaxed);
    else if (mt_device_ok(device))
        f.live = atomic_load_explicit(&mt_dev_counters(device)->live, memory_order_relaxed);
    if (!pinned && device >= 0 && device == current) {
        size_t fr = 0, tot = 0;
        if (tr_cuda_mem_info(&fr, &tot)) {
            f.has_info = 1;
            f.free_bytes = fr;
            f.total_bytes = tot;
        }
    }
    mt_error_name(f.error, sizeof f.error, fam, code);
    f.stack = -1;
    f.pystack = -1;
    *fp = f;
}

/* The runtime call failed with err: its device, when asking cannot disturb
 * anything. Out of memory proves the runtime is initialized for this thread,
 * so cudaGetDevice succeeds; after other errors (bad arguments, no device,
 * a sticky error) nothing is asked. */
static inline int mt_rt_fail_device(cudaError_t err)
{
    return err == cudaErrorMemoryAllocation ? mt_current_device() : -1;
}

/* ---- wrappers ---------------------------------------------------------------
 * Pattern: resolve the real function; rec = tr_enter(); real call; account
 * when rec; tr_leave(); return the real result. errno is preserved across
 * the shim's own work. */

#define MT_MISSING_RT(name)                                                    \
    do {                                                                       \
        tr_warn("memory: no real " name " found");                             \
        return cudaErrorInitializationError;                                  \
    } while (0)
#define MT_MISSING_DRV(name)                                                   \
    do {                                                                       \
        tr_warn("memory: no real " name " found");                             \
        return CUDA_ERROR_NOT_INITIALIZED;                                    \
    } while (0)
#define MT_MISSING_NCCL(name)                                                  \
    do {                                                                       \
        tr_warn("memory: no real " name " found");                             \
        return ncclSystemError;                                               \
    } while (0)

typedef cudaError_t (*fn_cudaMalloc)(void **, size_t);
typedef cudaError_t (*fn_cudaFree)(void *);
typedef cudaError_t (*fn_cudaMallocAsync)(void **, size_t, cudaStream_t);
typedef cudaError_t (*fn_cudaMallocFromPoolAsync)(void **, size_t, cudaMemPool_t, cudaStream_t);
typedef cudaError_t (*fn_cudaFreeAsync)(void *, cudaStream_t);
typedef cudaError_t (*fn_cudaMallocManaged)(void **, size_t, unsigned int);
typedef cudaError_t (*fn_cudaMallocPitch)(void **, size_t *, size_t, size_t);
typedef cudaError_t (*fn_cudaMallocHost)(void **, size_t);
typedef cudaError_t (*fn_cudaHostAlloc)(void **, size_t, unsigned int);
typedef cudaError_t (*fn_cudaFreeHost)(void *);
typedef ncclResult_t (*fn_ncclMemAlloc)(void **, size_t);
typedef ncclResult_t (*fn_ncclMemFree)(void *);
typedef CUresult (*fn_cuMemAlloc)(CUdeviceptr *, size_t);
typedef CUresult (*fn_cuMemFree)(CUdeviceptr);
typedef CUresult (*fn_cuMemCreate)(CUmemGenericAllocationHandle *, size_t,
                                   const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*fn_cuMemRelease)(CUmemGenericAllocationHandle);

static inline uintptr_t mt_ptr(void *const *p)
{
    return p ? (uintptr_t)*p : 0;
}

/* The body of an allocation wrapper: the real call, then (when recorded)
 * account, which sees r (the result) and pd (an mt_pending *). */
#define MT_ALLOC_BODY(call, account)                                           \
    int rec = tr_enter();                                                      \
    __typeof__(call) r = call;                                                 \
    if (rec) {                                                                 \
        int saved_ = errno;                                                    \
        mt_pending pd_;                                                        \
        mt_pending *pd = &pd_;                                                 \
        pd_.what = MT_NOTHING;                                                 \
        account;                                                               \
        MT_FINISH(pd_);                                                        \
        errno = saved_;                                                        \
    }                                                                          \
    tr_leave();                                                                \
    return r;

/* Memory from the runtime on the current device (or pinned host memory). */
static inline __attribute__((always_inline)) void
mt_rt_alloc_done(const char *api, cudaError_t r, void *const *p, uint64_t size, unsigned kind,
                 mt_pending *pd)
{
    if (r == cudaSuccess) {
        mt_count_alloc(&mt_live_ptrs, mt_ptr(p), size, mt_current_device(), kind, pd);
    } else {
        int dev = mt_rt_fail_device(r);
        mt_fail(api, MT_API_RT, (int)r, size, dev, dev, kind == MT_PINNED, pd);
    }
}

TR_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    TR_REAL(real, fn_cudaMalloc, "cudaMalloc", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaMalloc");
    MT_ALLOC_BODY(real(devPtr, size),
                  mt_rt_alloc_done("cudaMalloc", r, devPtr, size, MT_DEVICE, pd))
}

TR_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    TR_REAL(real, fn_cudaMallocManaged, "cudaMallocManaged", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaMallocManaged");
    MT_ALLOC_BODY(real(devPtr, size, flags),
                  mt_rt_alloc_done("cudaMallocManaged", r, devPtr, size, MT_MANAGED, pd))
}

/* Success: the rows as laid out (pitch * height), the bytes reserved for the
 * application. Failure: what was asked (width * height). */
static inline uint64_t mt_pitch_bytes(cudaError_t r, const size_t *pitch, size_t width,
                                      size_t height)
{
    return r == cudaSuccess && pitch ? (uint64_t)*pitch * height : (uint64_t)width * height;
}

TR_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    TR_REAL(real, fn_cudaMallocPitch, "cudaMallocPitch", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaMallocPitch");
    MT_ALLOC_BODY(real(devPtr, pitch, width, height),
                  mt_rt_alloc_done("cudaMallocPitch", r, devPtr,
                                   mt_pitch_bytes(r, pitch, width, height), MT_DEVICE, pd))
}

TR_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    TR_REAL(real, fn_cudaMallocHost, "cudaMallocHost", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaMallocHost");
    MT_ALLOC_BODY(real(ptr, size),
                  mt_rt_alloc_done("cudaMallocHost", r, ptr, size, MT_PINNED, pd))
}

TR_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    TR_REAL(real, fn_cudaHostAlloc, "cudaHostAlloc", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaHostAlloc");
    MT_ALLOC_BODY(real(pHost, size, flags),
                  mt_rt_alloc_done("cudaHostAlloc", r, pHost, size, MT_PINNED, pd))
}

/* The device of a stream-ordered allocation that succeeded at p: the pool's
 * (cudaMallocAsync: the pool of the stream's device). *kind becomes
 * MT_PINNED for a pool located on the host. */
static int mt_async_device(void *p, cudaStream_t stream, int use_stream, unsigned *kind)
{
    *kind = MT_DEVICE;
    if (use_stream) {
        int d;
        if (tr_cuda_stream_device(stream, &d))
            return d;
    }
    struct cudaPointerAttributes a;
    if (tr_cuda_pointer_attributes(&a, p)) {
        if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged)
            return a.device;
        if (a.type == cudaMemoryTypeHost) {
            *kind = MT_PINNED;
            return mt_current_device();
        }
    }
    return mt_current_device();
}

static inline __attribute__((always_inline)) void
mt_async_done(const char *api, cudaError_t r, void *const *p, size_t size, cudaStream_t stream,
              int use_stream, mt_pending *pd)
{
    if (r == cudaSuccess) {
        uintptr_t key = mt_ptr(p);
        if (!key || !size)
            return;
        unsigned kind;
        int dev = mt_async_device((void *)key, stream, use_stream, &kind);
        mt_count_alloc(&mt_live_ptrs, key, size, dev, kind, pd);
        return;
    }
    int cur = -1, dev = -1;
    if (r == cudaErrorMemoryAllocation) {
        cur = dev = mt_current_device();
        /* out of memory: the stream was valid, so asking for its device cannot fail */
        int sd;
        if (use_stream && tr_cuda_stream_device(stream, &sd))
            dev = sd;
    }
    mt_fail(api, MT_API_RT, (int)r, size, dev, cur, 0, pd);
}

TR_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    TR_REAL(real, fn_cudaMallocAsync, "cudaMallocAsync", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaMallocAsync");
    MT_ALLOC_BODY(real(devPtr, size, hStream),
                  mt_async_done("cudaMallocAsync", r, devPtr, size, hStream, 1, pd))
}

TR_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                           cudaStream_t stream)
{
    TR_REAL(real, fn_cudaMallocFromPoolAsync, "cudaMallocFromPoolAsync", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaMallocFromPoolAsync");
    MT_ALLOC_BODY(real(ptr, size, memPool, stream),
                  mt_async_done("cudaMallocFromPoolAsync", r, ptr, size, stream, 0, pd))
}

/* Per-thread default stream variants: programs built with nvcc
 * --default-stream per-thread (CUDA_API_PER_THREAD_DEFAULT_STREAM) call
 * these names instead (cuda_runtime_api.h declares them only in that mode,
 * hence the prototypes here). Each calls the real _ptsz function and is
 * accounted exactly like its plain counterpart, under the plain name. A
 * runtime whose _ptsz function calls its exported plain one through the
 * shim (the simulator) is still counted once: the inner call is nested
 * (tr_enter() == 0). */
TR_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
TR_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                cudaStream_t stream);
TR_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);

TR_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    TR_REAL(real, fn_cudaMallocAsync, "cudaMallocAsync_ptsz", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaMallocAsync_ptsz");
    MT_ALLOC_BODY(real(devPtr, size, hStream),
                  mt_async_done("cudaMallocAsync", r, devPtr, size, hStream, 1, pd))
}

TR_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                cudaStream_t stream)
{
    TR_REAL(real, fn_cudaMallocFromPoolAsync, "cudaMallocFromPoolAsync_ptsz", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaMallocFromPoolAsync_ptsz");
    MT_ALLOC_BODY(real(ptr, size, memPool, stream),
                  mt_async_done("cudaMallocFromPoolAsync", r, ptr, size, stream, 0, pd))
}

/* The body of a free wrapper: the entry leaves the table before the real
 * call (see mt_free_begin), and is counted freed or put back after it. */
#define MT_FREE_BODY(table, key, call, ok_expr)                                \
    int rec = tr_enter();                                                      \
    mt_slot e_;                                                                \
    int had_ = rec ? mt_free_begin(table, key, &e_) : 0;                       \
    __typeof__(call) r = call;                                                 \
    if (rec) {                                                                 \
        int saved_ = errno;                                                    \
        if (had_)                                                              \
            mt_free_end(table, &e_, (ok_expr));                                \
        errno = saved_;                                                        \
    }                                                                          \
    tr_leave();                                                                \
    return r;

TR_API cudaError_t cudaFree(void *devPtr)
{
    TR_REAL(real, fn_cudaFree, "cudaFree", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaFree");
    MT_FREE_BODY(&mt_live_ptrs, (uintptr_t)devPtr, real(devPtr), r == cudaSuccess)
}

/* Stream-ordered free: uncounted at the call (the memory returns to the
 * pool when the stream reaches it; the application may not use it after). */
TR_API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    TR_REAL(real, fn_cudaFreeAsync, "cudaFreeAsync", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaFreeAsync");
    MT_FREE_BODY(&mt_live_ptrs, (uintptr_t)devPtr, real(devPtr, hStream), r == cudaSuccess)
}

TR_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    TR_REAL(real, fn_cudaFreeAsync, "cudaFreeAsync_ptsz", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaFreeAsync_ptsz");
    MT_FREE_BODY(&mt_live_ptrs, (uintptr_t)devPtr, real(devPtr, hStream), r == cudaSuccess)
}

TR_API cudaError_t cudaFreeHost(void *ptr)
{
    TR_REAL(real, fn_cudaFreeHost, "cudaFreeHost", TR_LIB_CUDART);
    if (!real)
        MT_MISSING_RT("cudaFreeHost");
    MT_FREE_BODY(&mt_live_ptrs, (uintptr_t)ptr, real(ptr), r == cudaSuccess)
}

static inline __attribute__((always_inline)) void
mt_nccl_alloc_done(ncclResult_t r, void *const *ptr, size_t size, mt_pending *pd)
{
    if (r == ncclSuccess)
        mt_count_alloc(&mt_live_ptrs, mt_ptr(ptr), size, mt_current_device(), MT_DEVICE, pd);
    else   /* NCCL reports a CUDA failure as ncclUnhandledCudaError; whether
            * the runtime works for this thread is unknown then: ask nothing */
        mt_fail("ncclMemAlloc", MT_API_NCCL, (int)r, size, -1, -1, 0, pd);
}

TR_API ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    TR_REAL(real, fn_ncclMemAlloc, "ncclMemAlloc", TR_LIB_NCCL);
    if (!real)
        MT_MISSING_NCCL("ncclMemAlloc");
    MT_ALLOC_BODY(real(ptr, size), mt_nccl_alloc_done(r, ptr, size, pd))
}

TR_API ncclResult_t ncclMemFree(void *ptr)
{
    TR_REAL(real, fn_ncclMemFree, "ncclMemFree", TR_LIB_NCCL);
    if (!real)
        MT_MISSING_NCCL("ncclMemFree");
    MT_FREE_BODY(&mt_live_ptrs, (uintptr_t)ptr, real(ptr), r == ncclSuccess)
}

static inline __attribute__((always_inline)) void
mt_cu_alloc_done(CUresult r, const CUdeviceptr *dptr, size_t bytesize, mt_pending *pd)
{
    if (r == CUDA_SUCCESS) {
        mt_count_alloc(&mt_live_ptrs, dptr ? (uintptr_t)*dptr : 0, bytesize, mt_driver_device(),
                       MT_DEVICE, pd);
    } else {
        /* the current context's device: the one cuMemGetInfo describes */
        int dev = r == CUDA_ERROR_OUT_OF_MEMORY ? mt_driver_device() : -1;
        mt_fail("cuMemAlloc_v2", MT_API_DRV, (int)r, bytesize, dev, dev, 0, pd);
    }
}

TR_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    TR_REAL(real, fn_cuMemAlloc, "cuMemAlloc_v2", TR_LIB_CUDA);
    if (!real)
        MT_MISSING_DRV("cuMemAlloc_v2");
    MT_ALLOC_BODY(real(dptr, bytesize), mt_cu_alloc_done(r, dptr, bytesize, pd))
}

TR_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    TR_REAL(real, fn_cuMemFree, "cuMemFree_v2", TR_LIB_CUDA);
    if (!real)
        MT_MISSING_DRV("cuMemFree_v2");
    MT_FREE_BODY(&mt_live_ptrs, (uintptr_t)dptr, real(dptr), r == CUDA_SUCCESS)
}

/* Physical memory of the virtual memory management API, counted from
 * cuMemCreate to cuMemRelease (whether mapped or not), to the device of its
 * location; memory located on the host counts as pinned host memory. */
static inline __attribute__((always_inline)) void
mt_cu_create_done(CUresult r, const CUmemGenericAllocationHandle *handle, size_t size,
                  const CUmemAllocationProp *prop, mt_pending *pd)
{
    int host = prop && prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE;
    int dev = prop && !host ? prop->location.id : -1;
    if (r == CUDA_SUCCESS) {
        if (host)
            dev = mt_driver_device();
        mt_count_alloc(&mt_live_handles, handle ? (uintptr_t)*handle : 0, size, dev,
                       host ? MT_PINNED : MT_VMM, pd);
    } else {
        int cur = r == CUDA_ERROR_OUT_OF_MEMORY ? mt_driver_device() : -1;
        mt_fail("cuMemCreate", MT_API_DRV, (int)r, size, dev, cur, host, pd);
    }
}

TR_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    TR_REAL(real, fn_cuMemCreate, "cuMemCreate", TR_LIB_CUDA);
    if (!real)
        MT_MISSING_DRV("cuMemCreate");
    MT_ALLOC_BODY(real(handle, size, prop, flags), mt_cu_create_done(r, handle, size, prop, pd))
}

TR_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    TR_REAL(real, fn_cuMemRelease, "cuMemRelease", TR_LIB_CUDA);
    if (!real)
        MT_MISSING_DRV("cuMemRelease");
    MT_FREE_BODY(&mt_live_handles, (uintptr_t)handle, real(handle), r == CUDA_SUCCESS)
}
