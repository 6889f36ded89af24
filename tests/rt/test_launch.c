/* What no simulated device can do fails loudly, and what PyTorch asks of a
 * driver is there: kernel launches (every entry nvcc's code and PyTorch
 * use) return cudaErrorNotSupported, leave it as the last error and name
 * the registered kernel in one "trsim:" line per kernel; a runtime function
 * the simulator does not implement (generated stubs) does the same; the
 * driver entries PyTorch 2.15 looks up exist (cuMemGetAddressRange,
 * cuMemRetainAllocationHandle, cuMemsetD32Async, contexts), the unsupported
 * ones say so; libnvidia-ml.so.1 answers from the simulated devices.
 * Runs with TRSIM_DEVICE_COUNT=2; NVML_LIB is the simulator's NVML. */
#include <cuda.h>
#include <dlfcn.h>
#include "rttest.h"

/* nvcc's registration and launch entries (crt/host_runtime.h is C++ only) */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **h);
void __cudaUnregisterFatBinary(void **h);
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int limit,
                            uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
unsigned __cudaPushCallConfiguration(dim3 g, dim3 b, size_t shmem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *g, dim3 *b, size_t *shmem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *fn);
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shmem, cudaStream_t s);

static void fill_stub(void) {}     /* host stubs: their addresses name the kernels */
static void scale_stub(void) {}
static char log_path[] = "/tmp/trsim-launch-XXXXXX";
static int saved_stderr = -1;

static void capture_stderr(void)
{
    int fd = mkstemp(log_path);
    EXPECT(fd >= 0, "mkstemp");
    fflush(stderr);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* the captured lines containing sub */
static int captured(const char *sub)
{
    fflush(stderr);
    FILE *f = fopen(log_path, "r");
    char line[1024];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, sub) != NULL;
    if (f) fclose(f);
    return n;
}

static void test_launches(void)
{
    void **h = __cudaRegisterFatBinary((void *)"fatbin");
    __cudaRegisterFunction(h, (const char *)fill_stub, NULL, "_Z11fill_kernelPfi", -1, NULL, NULL, NULL, NULL,
                           NULL);
    __cudaRegisterFunction(h, (const char *)scale_stub, NULL, "_Z12scale_kernelPf", -1, NULL, NULL, NULL, NULL,
                           NULL);
    __cudaRegisterFatBinaryEnd(h);
    dim3 g = {4, 1, 1}, b = {128, 1, 1}, g2, b2;
    size_t shmem = 0;
    cudaStream_t s = NULL;
    /* <<<...>>>: pushed by the caller, popped by the stub */
    EXPECT(__cudaPushCallConfiguration(g, b, 64, (void *)0x1234) == 0, "push");
    EXPECT_ERR(__cudaPopCallConfiguration(&g2, &b2, &shmem, &s), cudaSuccess);
    EXPECT(g2.x == 4 && b2.x == 128 && shmem == 64 && s == (cudaStream_t)0x1234, "popped %u %u %zu", g2.x, b2.x,
           shmem);
    EXPECT_ERR(cudaLaunchKernel((const void *)fill_stub, g, b, NULL, 0, NULL), cudaErrorNotSupported);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorNotSupported);
    EXPECT_ERR(cudaGetLastError(), cudaErrorNotSupported);
    EXPECT_ERR(cudaGetLastError(), cudaSuccess);
    EXPECT_ERR(cudaLaunchKernel((const void *)fill_stub, g, b, NULL, 0, NULL), cudaErrorNotSupported);
    EXPECT(captured("_Z11fill_kernelPfi") == 1, "one line for fill_kernel, %d", captured("_Z11fill_kernelPfi"));
    /* CUDA 13's stubs: the kernel handle, then __cudaLaunchKernel */
    cudaKernel_t k = NULL;
    EXPECT_ERR(__cudaGetKernel(&k, (const void *)scale_stub), cudaSuccess);
    EXPECT_ERR(__cudaLaunchKernel(k, g, b, NULL, 0, NULL), cudaErrorNotSupported);
    EXPECT(captured("_Z12scale_kernelPf") == 1, "one line for scale_kernel");
    EXPECT_ERR(cudaGetLastError(), cudaErrorNotSupported);
    cudaLaunchConfig_t cfg = {0};
    cfg.gridDim = g;
    cfg.blockDim = b;
    EXPECT_ERR(cudaLaunchKernelExC(&cfg, (const void *)scale_stub, NULL), cudaErrorNotSupported);
    EXPECT_ERR(cudaLaunchCooperativeKernel((const void *)test_launches, g, b, NULL, 0, NULL), cudaErrorNotSupported);
    EXPECT(captured("(not registered)") == 1, "an unregistered stub is named so");
    EXPECT(captured("_Z12scale_kernelPf") == 1, "still one line for scale_kernel");
    cudaGetLastError();
    __cudaUnregisterFatBinary(h);
}

static void test_unsupported_runtime(void)
{
    /* graphs are simulated (test_graph.c), their kernel nodes are not */
    cudaGraphNode_t node;
    EXPECT_ERR(cudaGraphAddKernelNode(&node, NULL, NULL, 0, NULL), cudaErrorNotSupported);
    EXPECT_ERR(cudaGetLastError(), cudaErrorNotSupported);
    EXPECT_ERR(cudaGraphAddKernelNode(&node, NULL, NULL, 0, NULL), cudaErrorNotSupported);
    EXPECT(captured("cudaGraphAddKernelNode: not implemented by the simulated runtime") == 1,
           "one line for cudaGraphAddKernelNode");
    cudaGetLastError();
    struct cudaChannelFormatDesc d = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    EXPECT(d.x == 32 && d.y == 0 && d.f == cudaChannelFormatKindFloat, "channel desc %d %d", d.x, (int)d.f);
}

static void *entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    EXPECT_ERR(cudaGetDriverEntryPointByVersion(name, &fn, CUDART_VERSION, cudaEnableDefault, &q), cudaSuccess);
    EXPECT(q == cudaDriverEntryPointSuccess && fn, "entry %s found", name);
    return fn;
}

static void test_driver_entries(void)
{
    /* an interior pointer of a cudaMalloc block: its base and size */
    char *p;
    EXPECT_ERR(cudaMalloc((void **)&p, 3000), cudaSuccess);
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) = entry("cuMemGetAddressRange");
    CUdeviceptr base = 0;
    size_t size = 0;
    EXPECT(range(&base, &size, (CUdeviceptr)(uintptr_t)(p + 1234)) == CUDA_SUCCESS, "range");
    EXPECT(base == (CUdeviceptr)(uintptr_t)p && size == 3000, "base %p size %zu", (void *)(uintptr_t)base, size);
    EXPECT(range(&base, &size, (CUdeviceptr)(uintptr_t)&size) == CUDA_ERROR_NOT_FOUND, "host pointer");
    /* cuMemsetD32Async in stream order */
    CUresult (*setd32)(CUdeviceptr, unsigned, size_t, CUstream) = entry("cuMemsetD32Async");
    cudaStream_t s;
    EXPECT_ERR(cudaStreamCreate(&s), cudaSuccess);
    EXPECT(setd32((CUdeviceptr)(uintptr_t)p, 0x3f800000u, 750, (CUstream)s) == CUDA_SUCCESS, "memsetD32");
    EXPECT(setd32((CUdeviceptr)(uintptr_t)p, 0, 751, (CUstream)s) == CUDA_ERROR_INVALID_VALUE, "past the end");
    float host[750];
    EXPECT_ERR(cudaMemcpyAsync(host, p, sizeof host, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_ERR(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT(host[0] == 1.0f && host[749] == 1.0f, "filled %g %g", host[0], host[749]);
    /* a VMM mapping: its allocation handle, retained and released */
    CUresult (*retain)(CUmemGenericAllocationHandle *, void *) = entry("cuMemRetainAllocationHandle");
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle mh, again;
    CUdeviceptr va;
    size_t gran = 2 << 20;
    EXPECT(cuMemCreate(&mh, gran, &prop, 0) == CUDA_SUCCESS, "create");
    EXPECT(cuMemAddressReserve(&va, gran, 0, 0, 0) == CUDA_SUCCESS, "reserve");
    EXPECT(cuMemMap(va, gran, 0, mh, 0) == CUDA_SUCCESS, "map");
    EXPECT(retain(&again, (void *)(uintptr_t)(va + 4096)) == CUDA_SUCCESS, "retain");
    EXPECT(range(&base, &size, va + 100) == CUDA_SUCCESS && base == va && size == gran, "range of a mapping");
    EXPECT(cuMemRelease(again) == CUDA_SUCCESS, "release the retained handle");
    EXPECT(retain(&again, p) == CUDA_ERROR_INVALID_VALUE, "retain outside a mapping");
    EXPECT(cuMemUnmap(va, gran) == CUDA_SUCCESS, "unmap");
    EXPECT(cuMemRelease(mh) == CUDA_SUCCESS, "release");
    EXPECT(cuMemAddressFree(va, gran) == CUDA_SUCCESS, "free");
    /* contexts: the current device's primary one */
    CUresult (*getctx)(CUcontext *) = entry("cuCtxGetCurrent");
    CUresult (*setctx)(CUcontext) = entry("cuCtxSetCurrent");
    CUcontext c0, c1;
    EXPECT_ERR(cudaSetDevice(1), cudaSuccess);
    EXPECT(getctx(&c1) == CUDA_SUCCESS && c1, "ctx");
    EXPECT_ERR(cudaSetDevice(0), cudaSuccess);
    EXPECT(getctx(&c0) == CUDA_SUCCESS && c0 != c1, "contexts differ per device");
    EXPECT(setctx(c1) == CUDA_SUCCESS, "set");
    int dev = -1;
    EXPECT_ERR(cudaGetDevice(&dev), cudaSuccess);
    EXPECT(dev == 1, "cuCtxSetCurrent made device %d current", dev);
    /* what a simulated device does not have: said, not a NULL to call */
    CUresult (*green)(void) = entry("cuGreenCtxCreate");
    EXPECT(green() == CUDA_ERROR_NOT_SUPPORTED, "green contexts");
    EXPECT(captured("cuGreenCtxCreate: not supported by the simulated driver") == 1, "one line");
    void *fn = (void *)1;
    enum cudaDriverEntryPointQueryResult q;
    EXPECT_ERR(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, CUDART_VERSION, cudaEnableDefault, &q), cudaSuccess);
    EXPECT(!fn && q == cudaDriverEntryPointSymbolNotFound, "an unknown name is not found");
    EXPECT_ERR(cudaFree(p), cudaSuccess);
    EXPECT_ERR(cudaStreamDestroy(s), cudaSuccess);
}

static void test_nvml(void)
{
    const char *lib = getenv("NVML_LIB");
    EXPECT(lib && *lib, "NVML_LIB");
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    EXPECT(h, "dlopen %s: %s", lib, dlerror());
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    int (*byidx)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    int (*uuid)(void *, char *, unsigned) = (int (*)(void *, char *, unsigned))dlsym(h, "nvmlDeviceGetUUID");
    int (*byuuid)(const char *, void **) = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByUUID");
    int (*bybus)(const char *, void **) = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    int (*fabric)(void *, void *) = (int (*)(void *, void *))dlsym(h, "nvmlDeviceGetGpuFabricInfoV");
    int (*drv)(int *) = (int (*)(int *))dlsym(h, "nvmlSystemGetCudaDriverVersion_v2");
    EXPECT(init && count && byidx && uuid && byuuid && bybus && fabric && drv, "every function PyTorch looks up");
    unsigned n = 0;
    EXPECT(init() == 0 && count(&n) == 0 && n == 2, "%u devices", n);
    void *d1 = NULL, *back = NULL;
    char u[96], bus[32];
    EXPECT(byidx(1, &d1) == 0 && uuid(d1, u, sizeof u) == 0 && !strncmp(u, "GPU-", 4), "uuid %s", u);
    EXPECT(byuuid(u, &back) == 0 && back == d1, "by uuid");
    EXPECT_ERR(cudaDeviceGetPCIBusId(bus, sizeof bus, 1), cudaSuccess);
    EXPECT(bybus(bus, &back) == 0 && back == d1, "by bus id %s", bus);
    EXPECT(byidx(2, &back) == 2, "index past the devices: invalid argument");
    EXPECT(fabric(d1, NULL) == 3, "fabric info: not supported");
    int v = 0, cv = 0;
    EXPECT(drv(&v) == 0 && cudaDriverGetVersion(&cv) == cudaSuccess && v == cv, "driver version %d", v);
    dlclose(h);
}

int main(void)
{
    rt_watchdog(30);
    capture_stderr();
    test_launches();
    test_unsupported_runtime();
    test_driver_entries();
    test_nvml();
    dup2(saved_stderr, 2);
    unlink(log_path);
    printf("ok\n");
    return 0;
}
