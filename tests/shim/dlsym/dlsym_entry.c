/* dlsym_entry: driver memory functions obtained through the entry-point
 * lookups (cudaGetDriverEntryPoint, cudaGetDriverEntryPointByVersion, their
 * _ptsz names, cuGetProcAddress v1 and _v2, and a lookup function itself
 * obtained through a lookup or through dlsym), as PyTorch's expandable
 * segments get cuMemCreate. Prints every return code, status and pointer
 * ("entry <what> -> <module> <symbol>"); test_dlsym.py (case "entry")
 * checks the pointers, that the output is otherwise the same with and
 * without the shim, and the trace's memory to the byte:
 *
 *   h1 2 MiB, h2 4 MiB (cuMemCreate)                     live 6 MiB
 *   d1 64 KiB (cuMemAlloc_v2, in entry_peak)              peak 6 MiB + 64 KiB
 *   release h1, free d1                                   4 MiB
 *   d2 3000 bytes, freed                                  4 MiB
 *   h3 2 MiB (cuMemCreate from a looked-up lookup)        6 MiB
 *   release h2, h3                                        0
 *
 * on device 0: 5 allocations, 5 frees. Linked with libtrsim.so. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include "dlsym_show.h"

/* deprecated since CUDA 12.5, still what many frameworks call */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *driverStatus);

#define NOINLINE __attribute__((noinline))
#define MiB (1u << 20)

typedef CUresult (*fn_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*fn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*fn_alloc)(CUdeviceptr *, size_t);
typedef CUresult (*fn_free)(CUdeviceptr);
typedef CUresult (*fn_gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef cudaError_t (*fn_gdep)(const char *, void **, unsigned long long, enum cudaDriverEntryPointQueryResult *);

static CUmemAllocationProp prop;

#define OK(what, call) do { int r_ = (int)(call); printf("%s: rc %d\n", what, r_); \
    if (r_ != 0) { fflush(stdout); exit(1); } } while (0)

/* a lookup's result: return code, status, pointer */
static void *got(const char *what, int rc, int status, void *p)
{
    char label[256];
    snprintf(label, sizeof label, "%s (rc %d, status %d)", what, rc, status);
    dlsym_show("entry", label, p);
    return p;
}

NOINLINE void entry_create2(fn_create create, CUmemGenericAllocationHandle *h1, CUmemGenericAllocationHandle *h2)
{
    OK("create h1", create(h1, 2 * MiB, &prop, 0));
    OK("create h2", create(h2, 4 * MiB, &prop, 0));
}

NOINLINE void entry_peak(fn_alloc alloc, CUdeviceptr *d1)
{
    OK("alloc d1", alloc(d1, 65536));
}

NOINLINE void entry_small(fn_alloc alloc, fn_free fr)
{
    CUdeviceptr d2 = 0;
    OK("alloc d2", alloc(&d2, 3000));
    OK("free d2", fr(d2));
}

int main(void)
{
    void *f = NULL;
    enum cudaDriverEntryPointQueryResult st = (enum cudaDriverEntryPointQueryResult)-1;
    CUdriverProcAddressQueryResult cst = (CUdriverProcAddressQueryResult)-1;
    CUmemGenericAllocationHandle h1, h2, h3;
    CUdeviceptr d1;
    int rc;

    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    OK("cudaSetDevice", cudaSetDevice(0));

    rc = cudaGetDriverEntryPoint("cuMemCreate", &f, cudaEnableDefault, &st);
    fn_create create = (fn_create)got("cudaGetDriverEntryPoint(cuMemCreate)", rc, st, f);
    entry_create2(create, &h1, &h2);

    f = NULL;
    rc = cuGetProcAddress_v2("cuMemAlloc", &f, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &cst);
    fn_alloc alloc = (fn_alloc)got("cuGetProcAddress_v2(cuMemAlloc, 12000)", rc, cst, f);
    entry_peak(alloc, &d1);

    f = NULL;
    rc = cudaGetDriverEntryPointByVersion("cuMemRelease", &f, 12000, cudaEnableDefault, &st);
    fn_release release = (fn_release)got("cudaGetDriverEntryPointByVersion(cuMemRelease, 12000)", rc, st, f);
    OK("release h1", release(h1));

    f = NULL;
    rc = cuGetProcAddress("cuMemFree", &f, 12000, CU_GET_PROC_ADDRESS_DEFAULT);
    fn_free fr = (fn_free)got("cuGetProcAddress(cuMemFree, 12000)", rc, 0, f);
    OK("free d1", fr(d1));

    f = NULL;
    rc = cudaGetDriverEntryPoint_ptsz("cuMemAlloc", &f, cudaEnablePerThreadDefaultStream, &st);
    fn_alloc alloc2 = (fn_alloc)got("cudaGetDriverEntryPoint_ptsz(cuMemAlloc)", rc, st, f);
    f = NULL;
    rc = cudaGetDriverEntryPointByVersion_ptsz("cuMemFree", &f, 12000, cudaEnableDefault, &st);
    fn_free fr2 = (fn_free)got("cudaGetDriverEntryPointByVersion_ptsz(cuMemFree, 12000)", rc, st, f);
    entry_small(alloc2, fr2);

    /* functions the shim does not wrap: the real ones */
    static const char *const plain[] = {"cuMemGetInfo", "cuMemMap", "cuDeviceGet", "cuMemAddressReserve"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        char what[128];
        f = NULL;
        rc = cuGetProcAddress_v2(plain[i], &f, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &cst);
        snprintf(what, sizeof what, "cuGetProcAddress_v2(%s, 12000)", plain[i]);
        got(what, rc, cst, f);
    }

    /* the lookup function itself, looked up: the shim's, which hands out
     * the shim's cuMemCreate; per-thread-stream flags change nothing */
    f = NULL;
    rc = cuGetProcAddress_v2("cuGetProcAddress", &f, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &cst);
    fn_gpa2 gpa = (fn_gpa2)got("cuGetProcAddress_v2(cuGetProcAddress, 12000)", rc, cst, f);
    f = NULL;
    rc = gpa("cuMemCreate", &f, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &cst);
    fn_create create2 = (fn_create)got("looked-up cuGetProcAddress(cuMemCreate, ptds)", rc, cst, f);
    OK("create h3", create2(&h3, 2 * MiB, &prop, 0));

    /* cudaGetDriverEntryPoint through dlsym on the runtime's handle */
    void *h = dlopen("libtrsim.so", RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        printf("dlopen libtrsim.so: %s\n", dlerror());
        return 1;
    }
    fn_gdep gdep = (fn_gdep)dlsym(h, "cudaGetDriverEntryPoint");
    dlsym_show("entry", "dlsym(libtrsim.so, cudaGetDriverEntryPoint)", (void *)gdep);
    f = NULL;
    rc = gdep("cuMemRelease", &f, cudaEnableDefault, &st);
    fn_release release2 = (fn_release)got("dlsym'd cudaGetDriverEntryPoint(cuMemRelease)", rc, st, f);
    OK("release h2", release2(h2));
    OK("release h3", release2(h3));
    dlclose(h);

    /* failures: passed on untouched */
    f = (void *)&prop;
    rc = cuGetProcAddress_v2("cuNoSuchFunction", &f, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &cst);
    got("cuGetProcAddress_v2(cuNoSuchFunction)", rc, cst, f);
    f = (void *)&prop;
    rc = cudaGetDriverEntryPoint("cuNoSuchFunction", &f, cudaEnableDefault, &st);
    got("cudaGetDriverEntryPoint(cuNoSuchFunction)", rc, st, f);
    f = (void *)&prop;
    st = (enum cudaDriverEntryPointQueryResult)-1;
    rc = cudaGetDriverEntryPoint("cuMemCreate", &f, 0x40, &st);
    got("cudaGetDriverEntryPoint(cuMemCreate, bad flags)", rc, st, f);
    printf("cudaGetLastError after bad flags: %d\n", (int)cudaGetLastError());
    printf("all done\n");
    return 0;
}
