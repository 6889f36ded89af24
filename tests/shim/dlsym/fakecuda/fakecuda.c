/* A CUDA driver (soname libcuda.so.1) whose cuGetProcAddress hands out
 * functions of its own that are not its exported ones, as a driver may: the
 * shim cannot match them by address and falls back on the versions it
 * knows (tr_entry.c). Memory is the host's; the context's device is 0.
 * Only what dlsym_fakedrv and the shim's memory accounting call. */
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

#undef cuMemAlloc    /* cuda.h: the _v2 name; here the legacy one as well */

#define API __attribute__((visibility("default")))

API int fake_internal_calls;     /* calls that went through the internal functions */

static CUresult internal_alloc_v2(CUdeviceptr *dptr, size_t size)
{
    fake_internal_calls++;
    void *p = size ? malloc(size) : NULL;
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult internal_free_v2(CUdeviceptr dptr)
{
    fake_internal_calls++;
    free((void *)(uintptr_t)dptr);
    return CUDA_SUCCESS;
}

/* the CUDA 3.1 ABI: 32-bit pointers and sizes; never succeeds here */
static CUresult internal_alloc_v1(unsigned int *dptr, unsigned int size)
{
    (void)dptr;
    (void)size;
    fake_internal_calls++;
    return CUDA_ERROR_NOT_SUPPORTED;
}

API CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

API CUresult cuCtxGetDevice(CUdevice *dev)
{
    *dev = 0;
    return CUDA_SUCCESS;
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    void *p = size ? malloc(size) : NULL;
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    free((void *)(uintptr_t)dptr);
    return CUDA_SUCCESS;
}

API CUresult cuMemAlloc(unsigned int *dptr, unsigned int size)
{
    return internal_alloc_v1(dptr, size);
}

API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    (void)flags;
    void *f = NULL;
    if (!strcmp(symbol, "cuMemAlloc")) f = version >= 3020 ? (void *)internal_alloc_v2 : (void *)internal_alloc_v1;
    else if (!strcmp(symbol, "cuMemFree")) f = (void *)internal_free_v2;
    *pfn = f;
    if (status) *status = f ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}
