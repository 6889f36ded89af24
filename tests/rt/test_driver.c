/* The driver API: initialization, devices, plain allocation, virtual memory
 * management as PyTorch's expandable segments use it, shareable handles,
 * and entry-point lookup. Runs with TRSIM_DEVICE_COUNT=2 and
 * TRSIM_DEVICE_MEM=64MiB. */
#include <cuda.h>
#include "rttest.h"

#define CAPACITY ((size_t)64 << 20)
#define MiB ((size_t)1 << 20)

#define CUCHECK(call) do { CUresult r_ = (call); \
    if (r_ != CUDA_SUCCESS) FAIL("%s -> %d", #call, (int)r_); } while (0)
#define CUEXPECT(call, want) do { CUresult r_ = (call); \
    if (r_ != (want)) FAIL("%s -> %d, expected %d", #call, (int)r_, (int)(want)); } while (0)

static size_t used_bytes(void)
{
    size_t f, t;
    CUCHECK(cuMemGetInfo(&f, &t));
    EXPECT(t == CAPACITY, "total %zu", t);
    return t - f;
}

static void test_init_and_devices(void)
{
    int n = -1, v = 0;
    CUdevice dev = -1;
    char name[64];
    size_t total = 0;
    /* Before cuInit, and before any runtime call, the driver is not ready. */
    CUEXPECT(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CUEXPECT(cuMemGetInfo(&total, &total), CUDA_ERROR_NOT_INITIALIZED);
    CUCHECK(cuDriverGetVersion(&v));
    EXPECT(v == 13020, "driver version %d", v);
    CUEXPECT(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CUCHECK(cuInit(0));
    CUCHECK(cuDeviceGetCount(&n));
    EXPECT(n == 2, "%d devices", n);
    CUCHECK(cuDeviceGet(&dev, 1));
    EXPECT(dev == 1, "device %d", dev);
    CUEXPECT(cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
    CUCHECK(cuDeviceGetName(name, sizeof name, 0));
    EXPECT(strcmp(name, "trsim simulated GPU") == 0, "name %s", name);
    CUCHECK(cuDeviceTotalMem(&total, 0));
    EXPECT(total == CAPACITY, "total %zu", total);
    CUCHECK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    EXPECT(v == 9, "major %d", v);
    unsigned flags;
    int active;
    CUCHECK(cuDevicePrimaryCtxGetState(0, &flags, &active));
}

static void test_plain_alloc(void)
{
    CUdeviceptr p = 0;
    CUEXPECT(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    CUCHECK(cuMemAlloc(&p, MiB));
    EXPECT(used_bytes() == MiB, "used %zu", used_bytes());
    struct cudaPointerAttributes a;
    CUDACHECK(cudaPointerGetAttributes(&a, (void *)(uintptr_t)p));
    EXPECT(a.type == cudaMemoryTypeDevice && a.device == 0, "driver memory is device memory");
    CUEXPECT(cuMemFree(p + 1), CUDA_ERROR_INVALID_VALUE);
    CUCHECK(cuMemFree(p));
    CUEXPECT(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    EXPECT(used_bytes() == 0, "all freed");
    CUEXPECT(cuMemAlloc(&p, CAPACITY + 1), CUDA_ERROR_OUT_OF_MEMORY);
}

static void test_vmm(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CUCHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    EXPECT(gran == 2 * MiB, "granularity %zu", gran);

    /* Physical memory counts against the device when created. */
    CUmemGenericAllocationHandle h1, h2, extra;
    CUCHECK(cuMemCreate(&h1, 4 * MiB, &prop, 0));
    EXPECT(used_bytes() == 4 * MiB, "used %zu", used_bytes());
    CUEXPECT(cuMemCreate(&extra, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CUEXPECT(cuMemCreate(&extra, CAPACITY, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(used_bytes() == 4 * MiB, "a failed create takes nothing");
    prop.location.id = 5;
    CUEXPECT(cuMemCreate(&extra, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    prop.location.id = 0;

    /* Address space: reserved, mapped, then made accessible. */
    CUdeviceptr va = 0;
    CUCHECK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    EXPECT(va % gran == 0, "reservation aligned");
    CUCHECK(cuMemMap(va, 4 * MiB, 0, h1, 0));
    CUEXPECT(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h1, 0), CUDA_ERROR_INVALID_VALUE);   /* overlaps */
    CUEXPECT(cuMemMap(va + 8 * MiB, 2 * MiB, 0, h1, 0), CUDA_ERROR_INVALID_VALUE);   /* outside */
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUCHECK(cuMemSetAccess(va, 4 * MiB, &access, 1));
    CUEXPECT(cuMemSetAccess(va, 6 * MiB, &access, 1), CUDA_ERROR_INVALID_VALUE);     /* not all mapped */
    unsigned long long got = 0;
    CUCHECK(cuMemGetAccess(&got, &prop.location, va + 100));
    EXPECT(got == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "access %llu", got);

    /* The mapped range is device memory to the runtime. */
    char *base = (char *)(uintptr_t)va;
    struct cudaPointerAttributes a;
    CUDACHECK(cudaPointerGetAttributes(&a, base + 3 * MiB));
    EXPECT(a.type == cudaMemoryTypeDevice && a.device == 0, "mapped range is device memory");
    EXPECT_ERR(cudaFree(base), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    unsigned char host[256];
    for (int i = 0; i < 256; i++)
        host[i] = (unsigned char)i;
    CUDACHECK(cudaMemcpy(base + 4 * MiB - 256, host, 256, cudaMemcpyHostToDevice));

    /* A shareable handle maps the same physical memory again. */
    int fd = -1;
    CUCHECK(cuMemExportToShareableHandle(&fd, h1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUCHECK(cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    CUCHECK(cuMemMap(va + 4 * MiB, 4 * MiB, 0, h2, 0));
    CUCHECK(cuMemSetAccess(va + 4 * MiB, 4 * MiB, &access, 1));
    memset(host, 0, sizeof host);
    CUDACHECK(cudaMemcpy(host, base + 8 * MiB - 256, 256, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 256; i++)
        EXPECT(host[i] == i, "shared physical memory, byte %d", i);
    EXPECT(used_bytes() == 4 * MiB, "importing counts nothing more");

    /* Released while mapped: the memory lives until unmapped. */
    CUCHECK(cuMemRelease(h1));
    CUEXPECT(cuMemRelease(h1), CUDA_ERROR_INVALID_VALUE);
    CUEXPECT(cuMemMap(va, 2 * MiB, 0, h1, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT(used_bytes() == 4 * MiB, "still mapped, still counted");
    CUEXPECT(cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);     /* part of a mapping */
    CUEXPECT(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    CUCHECK(cuMemUnmap(va, 4 * MiB));
    CUDACHECK(cudaPointerGetAttributes(&a, base));
    EXPECT(a.type == cudaMemoryTypeUnregistered, "unmapped range is unknown again");
    EXPECT(used_bytes() == 4 * MiB, "the import still holds it");
    CUCHECK(cuMemUnmap(va + 4 * MiB, 4 * MiB));
    CUCHECK(cuMemRelease(h2));
    EXPECT(used_bytes() == 0, "all physical memory returned");
    CUCHECK(cuMemAddressFree(va, 8 * MiB));
    CUEXPECT(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
}

static void test_entry_points(void)
{
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult status;
    enum cudaDriverEntryPointQueryResult rt_status;
    CUCHECK(cuGetProcAddress("cuMemCreate", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT(fn == (void *)cuMemCreate && status == CU_GET_PROC_ADDRESS_SUCCESS, "cuMemCreate found");
    CUCHECK(cuGetProcAddress("cuNoSuchThing", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT(fn == NULL && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "unknown symbol");
    CUDACHECK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, CUDART_VERSION,
                                               cudaEnableDefault, &rt_status));
    EXPECT(fn == (void *)cuMemAlloc && rt_status == cudaDriverEntryPointSuccess, "cuMemAlloc is _v2");
    CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult (*)(CUdeviceptr *, size_t))fn;
    CUdeviceptr p;
    CUCHECK(alloc(&p, 4096));
    CUCHECK(cuMemFree(p));
}

int main(void)
{
    rt_watchdog(30);
    test_init_and_devices();
    test_plain_alloc();
    test_vmm();
    test_entry_points();
    EXPECT(cudaGetLastError() == cudaSuccess, "no stray error");
    printf("driver OK\n");
    return 0;
}
