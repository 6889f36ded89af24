/* The rest of the driver entries PyTorch's c10 looks up (driver_api.cpp
 * asserts that each one is found): contexts, two stream-ordered writes,
 * driver logs (registered, never delivered), and what a simulated device
 * does not have (green contexts, device resources, multicast), which fails with
 * CUDA_ERROR_NOT_SUPPORTED and one "trsim:" line per function. They are
 * handed out through the entry-point lookups only (rt_driver.c's table):
 * none is exported, so a real libcuda's, if one were loaded, is never
 * shadowed by them. */
#include <stdlib.h>
#include <stdint.h>
#include <cuda.h>

#include "sim_internal.h"

/* ---- contexts: each device's primary context, as the runtime uses it ---- */

/* a context handle: 1 + the device */
static CUcontext ctx_of(int dev) { return (CUcontext)(uintptr_t)(dev + 1); }
static int dev_of(CUcontext c) { return (int)((uintptr_t)c - 1); }

static __thread CUcontext ctx_stack[16];
static __thread int ctx_depth;

CUresult trsim_cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = ctx_of(trsim_current_device());
    return CUDA_SUCCESS;
}

CUresult trsim_cuCtxSetCurrent(CUcontext ctx)
{
    if (!ctx)
        return CUDA_SUCCESS;
    int dev = dev_of(ctx);
    if (dev < 0 || dev >= trsim_device_count())
        return CUDA_ERROR_INVALID_CONTEXT;
    return (CUresult)cudaSetDevice(dev);
}

CUresult trsim_cuCtxPushCurrent(CUcontext ctx)
{
    if (ctx_depth >= (int)(sizeof ctx_stack / sizeof ctx_stack[0]))
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext cur = ctx_of(trsim_current_device());
    CUresult r = trsim_cuCtxSetCurrent(ctx);
    if (r == CUDA_SUCCESS)
        ctx_stack[ctx_depth++] = cur;
    return r;
}

CUresult trsim_cuCtxPopCurrent(CUcontext *pctx)
{
    if (pctx)
        *pctx = ctx_of(trsim_current_device());
    if (!ctx_depth)
        return CUDA_SUCCESS;
    return trsim_cuCtxSetCurrent(ctx_stack[--ctx_depth]);
}

/* ---- stream-ordered writes ------------------------------------------------ */

struct fill32 { uint32_t *dst; uint32_t value; size_t n; };

static void fill32_run(void *arg)
{
    struct fill32 *f = arg;
    for (size_t i = 0; i < f->n; i++)
        f->dst[i] = f->value;
}

static CUresult enqueue_fill32(CUdeviceptr dst, uint32_t value, size_t n, CUstream stream)
{
    trsim_alloc_info info;
    uintptr_t a = (uintptr_t)dst;
    if (a % 4 || !trsim_mem_lookup((void *)a, &info) ||
        a + n * 4 > (uintptr_t)info.base + info.size)
        return CUDA_ERROR_INVALID_VALUE;
    trsim_stream *s;
    if (trsim_stream_get((cudaStream_t)stream, &s) != cudaSuccess)
        return CUDA_ERROR_INVALID_HANDLE;
    struct fill32 f = {(uint32_t *)a, value, n};
    return (CUresult)trsim_stream_call_copy(s, fill32_run, &f, sizeof f, cudaGraphNodeTypeMemset);
}

CUresult trsim_cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream stream)
{
    return enqueue_fill32(dst, ui, n, stream);
}

CUresult trsim_cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    (void)flags;
    return enqueue_fill32(addr, value, 1, stream);
}

/* ---- driver logs: the simulated driver has none to deliver ---------------- */

CUresult trsim_cuLogsRegisterCallback(CUlogsCallback cb, void *userData, CUlogsCallbackHandle *handle)
{
    (void)userData;
    if (!cb || !handle)
        return CUDA_ERROR_INVALID_VALUE;
    *handle = (CUlogsCallbackHandle)(uintptr_t)cb;
    return CUDA_SUCCESS;
}

CUresult trsim_cuLogsUnregisterCallback(CUlogsCallbackHandle handle)
{
    return handle ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- what a simulated device does not have --------------------------------- */

#define UNSUPPORTED(name)                                                                        \
    int trsim_unsupported_##name(void)                                                         \
    {                                                                                            \
        static int said;                                                                         \
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))                                    \
            trsim_warn(#name ": not supported by the simulated driver (CUDA_ERROR_NOT_SUPPORTED)"); \
        return CUDA_ERROR_NOT_SUPPORTED;                                                         \
    }
TRSIM_DRIVER_UNSUPPORTED(UNSUPPORTED)
