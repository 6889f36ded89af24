/* An application's own interposer, linked before libtrsim.so: it defines
 * cudaGetDeviceCount and ncclGetVersion (the shim wraps neither) and
 * cudaMalloc (the shim wraps it), each calling the next definition after
 * itself, found with dlsym(RTLD_NEXT). Under the shim that must still be
 * libtrsim.so's: were the shim the caller of the real dlsym, RTLD_NEXT would
 * search after the shim and find this library again (endless recursion).
 * Defining ncclGetVersion makes it an NCCL library to the shim: its own
 * lookups on a handle stay unwrapped, as NCCL's and the runtime's do. */
#include <dlfcn.h>
#include <stdio.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "dlsym_show.h"

#define API __attribute__((visibility("default")))

API int interposed_malloc_calls;

API cudaError_t cudaGetDeviceCount(int *count)
{
    cudaError_t (*next)(int *) = (cudaError_t (*)(int *))dlsym(RTLD_NEXT, "cudaGetDeviceCount");
    return next ? next(count) : cudaErrorUnknown;
}

API ncclResult_t ncclGetVersion(int *version)
{
    ncclResult_t (*next)(int *) = (ncclResult_t (*)(int *))dlsym(RTLD_NEXT, "ncclGetVersion");
    return next ? next(version) : ncclInternalError;
}

API cudaError_t cudaMalloc(void **p, size_t size)
{
    cudaError_t (*next)(void **, size_t) = (cudaError_t (*)(void **, size_t))dlsym(RTLD_NEXT, "cudaMalloc");
    interposed_malloc_calls++;
    return next ? next(p, size) : cudaErrorUnknown;
}

/* what RTLD_NEXT gives this library */
API void interpose_report(void)
{
    static const char *const names[] = {"cudaGetDeviceCount", "ncclGetVersion", "cudaMalloc", "ncclAllReduce",
                                        "cudaFree", "noSuchFunction"};
    char label[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(label, sizeof label, "interposer dlsym(RTLD_NEXT, %s)", names[i]);
        dlsym_show("next", label, dlsym(RTLD_NEXT, names[i]));
    }
    void *v = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!v) v = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (!v) v = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
    dlsym_show("next", "interposer dlvsym(RTLD_NEXT, dlsym, GLIBC_*)", v);
    dlsym_show("next", "interposer dlsym(RTLD_DEFAULT, cudaGetDeviceCount)", dlsym(RTLD_DEFAULT, "cudaGetDeviceCount"));
    void *h = dlopen("libtrsim.so", RTLD_NOW | RTLD_NOLOAD);
    dlsym_show("next", "interposer dlsym(libtrsim.so, ncclAllReduce)", h ? dlsym(h, "ncclAllReduce") : NULL);
    if (h) dlclose(h);
}
