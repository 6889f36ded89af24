/* dlsym_fakedrv: cuGetProcAddress of a driver (fakecuda/) that hands out
 * functions of its own rather than its exported ones: under the shim,
 * cuMemAlloc at version 12000 must still be the shim's cuMemAlloc_v2 (the
 * version the shim knows the driver returns), cuMemAlloc at 3000 the
 * driver's legacy function (not wrapped), and at a version newer than the
 * shim's cuda.h the driver's own (it may be a newer version). Then one
 * allocation of 65536 bytes in fakedrv_alloc. */
#include <stdio.h>
#include <cuda.h>

#include "dlsym_show.h"

#define NOINLINE __attribute__((noinline))

extern int fake_internal_calls;

typedef CUresult (*fn_alloc)(CUdeviceptr *, size_t);
typedef CUresult (*fn_free)(CUdeviceptr);

static void *lookup(const char *symbol, int version)
{
    void *f = NULL;
    CUdriverProcAddressQueryResult st;
    char label[128];
    CUresult rc = cuGetProcAddress_v2(symbol, &f, version, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    snprintf(label, sizeof label, "%s@%d (rc %d, status %d)", symbol, version, (int)rc, (int)st);
    char buf[512];
    const char *where = dlsym_where(f, buf, sizeof buf);
    /* the driver's internal functions have no symbol: name the module only */
    if (f && !strstr(where, "libtrshim.so")) {
        const char *sp = strchr(where, ' ');
        printf("fakedrv %s -> %.*s (internal)\n", label, (int)(sp ? sp - where : (long)strlen(where)), where);
    } else {
        printf("fakedrv %s -> %s\n", label, where);
    }
    return f;
}

NOINLINE void fakedrv_alloc(fn_alloc alloc, fn_free fr)
{
    CUdeviceptr p = 0;
    printf("alloc rc %d\n", (int)alloc(&p, 65536));
    printf("free rc %d\n", (int)fr(p));
}

int main(void)
{
    fn_alloc alloc = (fn_alloc)lookup("cuMemAlloc", 12000);
    fn_free fr = (fn_free)lookup("cuMemFree", 12000);
    lookup("cuMemAlloc", 3000);
    lookup("cuMemAlloc", CUDA_VERSION + 1000);
    fakedrv_alloc(alloc, fr);
    printf("driver's internal functions called %d time(s)\n", fake_internal_calls);
    return 0;
}
