/* Kernels: registered, never run.
 *
 * The simulator runs no device code. A program's kernels are still
 * registered with the runtime when its modules load (nvcc's generated
 * constructors call __cudaRegisterFatBinary and __cudaRegisterFunction for
 * every kernel), so the simulator takes those registrations, remembering
 * each kernel's name by its host stub, and every launch fails loudly: one
 * "trsim:" line per kernel naming it, cudaErrorNotSupported returned and
 * left as the thread's last error (nvcc's launch stubs drop the status;
 * PyTorch's launch check reads cudaGetLastError and raises). Without these
 * definitions the launch would reach the real libcudart, fail there
 * (no driver), and the simulator's cudaGetLastError would say success: a
 * tensor filled on the device would silently read as zeros. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* host stub -> device name, open addressing; grows, never shrinks */
struct kernel_name { const void *stub; const char *name; int reported; };
static struct kernel_name *names;
static size_t names_cap, names_len;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(const void *stub, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)stub * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

/* the entry of stub, added (without a name) when absent; NULL: no memory */
static struct kernel_name *names_slot(const void *stub)
{
    if ((names_len + 1) * 2 > names_cap) {
        size_t cap = names_cap ? names_cap * 2 : 1024;
        struct kernel_name *n = calloc(cap, sizeof *n);
        if (!n) return NULL;
        for (size_t i = 0; i < names_cap; i++) {
            if (!names[i].stub) continue;
            size_t s = slot_of(names[i].stub, cap);
            while (n[s].stub) s = (s + 1) & (cap - 1);
            n[s] = names[i];
        }
        free(names);
        names = n;
        names_cap = cap;
    }
    size_t s = slot_of(stub, names_cap);
    while (names[s].stub && names[s].stub != stub) s = (s + 1) & (names_cap - 1);
    if (!names[s].stub) {
        names[s].stub = stub;
        names_len++;
    }
    return &names[s];
}

/* reports a launch of the kernel whose host stub is stub: once per kernel.
 * A launch into a capturing stream also invalidates the capture (the graph
 * would lack the kernel). */
static cudaError_t launch_refused(const char *api, const void *stub, cudaStream_t stream)
{
    trsim_stream *s;
    if (trsim_stream_get(stream, &s) == cudaSuccess && trsim_stream_capturing(s))
        trsim_capture_refuse(s, cudaErrorNotSupported, NULL);
    const char *name = NULL;
    int first = 1;
    pthread_mutex_lock(&names_lock);
    struct kernel_name *k = names_slot(stub);
    if (k) {
        name = k->name;
        first = !k->reported;
        k->reported = 1;
    }
    pthread_mutex_unlock(&names_lock);
    if (first)
        trsim_warn("%s of kernel %s: the simulated runtime runs no device code; the launch fails with "
                   "cudaErrorNotSupported (also the thread's last error). Move data with cudaMemcpy/cudaMemset "
                   "(PyTorch: build tensors on the CPU and .cuda() them)",
                   api, name ? name : "(not registered)");
    return trsim_error(cudaErrorNotSupported);
}

/* ---- registration (nvcc's module constructors) ---------------------------- */

/* a handle per fat binary; its contents are never read */
TRSIM_API void **__cudaRegisterFatBinary(void *fatCubin)
{
    void **h = malloc(sizeof(void *));
    if (h) *h = fatCubin;
    return h;
}

TRSIM_API void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    (void)fatCubinHandle;
}

TRSIM_API void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    free(fatCubinHandle);
}

TRSIM_API void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                                      dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)fatCubinHandle; (void)deviceFun; (void)thread_limit; (void)tid; (void)bid; (void)bDim; (void)gDim;
    (void)wSize;
    if (!hostFun) return;
    pthread_mutex_lock(&names_lock);
    struct kernel_name *k = names_slot(hostFun);
    if (k) k->name = deviceName;      /* nvcc's string, in the module: lives as long as it */
    pthread_mutex_unlock(&names_lock);
}

TRSIM_API void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName,
                                 int ext, size_t size, int constant, int global)
{
    (void)fatCubinHandle; (void)hostVar; (void)deviceAddress; (void)deviceName; (void)ext; (void)size;
    (void)constant; (void)global;
}

TRSIM_API void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                                        const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)fatCubinHandle; (void)hostVarPtrAddress; (void)deviceAddress; (void)deviceName; (void)ext; (void)size;
    (void)constant; (void)global;
}

TRSIM_API void __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName, char *hostVar, size_t size)
{
    (void)fatCubinHandle; (void)deviceName; (void)hostVar; (void)size;
}

TRSIM_API void __cudaRegisterUnifiedTable(void **fatCubinHandle, const char **ids, void **addrs, size_t n)
{
    (void)fatCubinHandle; (void)ids; (void)addrs; (void)n;
}

TRSIM_API char __cudaInitModule(void **fatCubinHandle)
{
    (void)fatCubinHandle;
    return 1;
}

/* ---- launches ---------------------------------------------------------------- */

/* <<<grid, block, shmem, stream>>>: pushed by the caller, popped by the stub */
static __thread struct { dim3 grid, block; size_t shmem; void *stream; } call_config;

TRSIM_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream)
{
    call_config.grid = gridDim;
    call_config.block = blockDim;
    call_config.shmem = sharedMem;
    call_config.stream = stream;
    return 0;
}

TRSIM_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
    if (gridDim) *gridDim = call_config.grid;
    if (blockDim) *blockDim = call_config.block;
    if (sharedMem) *sharedMem = call_config.shmem;
    if (stream) *(void **)stream = call_config.stream;
    return cudaSuccess;
}

/* the kernel handle of a host stub: the stub itself, so that a launch by
 * handle still names the kernel */
TRSIM_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *entryFuncAddr)
{
    if (!kernel) return trsim_error(cudaErrorInvalidValue);
    *kernel = (cudaKernel_t)(uintptr_t)entryFuncAddr;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
    return __cudaGetKernel(kernelPtr, entryFuncAddr);
}

TRSIM_API cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
    if (!functionPtr) return trsim_error(cudaErrorInvalidValue);
    *functionPtr = (cudaFunction_t)(uintptr_t)symbolPtr;
    return cudaSuccess;
}

TRSIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream)
{
    (void)gridDim; (void)blockDim; (void)args; (void)sharedMem;
    return launch_refused("launch", (const void *)kernel, stream);
}

TRSIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                              size_t sharedMem, cudaStream_t stream)
{
    return __cudaLaunchKernel(kernel, gridDim, blockDim, args, sharedMem, TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                       cudaStream_t stream)
{
    (void)gridDim; (void)blockDim; (void)args; (void)sharedMem;
    return launch_refused("cudaLaunchKernel", func, stream);
}

TRSIM_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                            size_t sharedMem, cudaStream_t stream)
{
    return cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    (void)args;
    return launch_refused("cudaLaunchKernelExC", func, config ? config->stream : NULL);
}

TRSIM_API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    cudaLaunchConfig_t ptsz;
    if (config) {
        ptsz = *config;
        ptsz.stream = TRSIM_PTSZ(ptsz.stream);
        config = &ptsz;
    }
    return cudaLaunchKernelExC(config, func, args);
}

TRSIM_API cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                                  size_t sharedMem, cudaStream_t stream)
{
    (void)gridDim; (void)blockDim; (void)args; (void)sharedMem;
    return launch_refused("cudaLaunchCooperativeKernel", func, stream);
}

TRSIM_API cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                                       size_t sharedMem, cudaStream_t stream)
{
    return cudaLaunchCooperativeKernel(func, gridDim, blockDim, args, sharedMem, TRSIM_PTSZ(stream));
}
