/* Stream-ordered allocations of a program built with per-thread default
 * streams (nvcc --default-stream per-thread defines
 * CUDA_API_PER_THREAD_DEFAULT_STREAM): cudaMallocAsync, cudaFreeAsync and
 * cudaMallocFromPoolAsync are cudaMallocAsync_ptsz, ... here.
 * check_memory.py ptsz runs it under the shim (TRSIM_DEVICE_COUNT=2,
 * TRSIM_DEVICE_MEM=1GiB) and checks the trace to the byte.
 *
 * First it prints the module that defines each _ptsz name in the process
 * (under the shim: libtrshim.so). The simulator's _ptsz functions call its
 * exported plain ones, which the shim wraps too; the exact counts check that
 * each allocation is counted once all the same. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>

#include "trtest.h"

#if !defined(__CUDART_API_PER_THREAD_DEFAULT_STREAM) || !defined(cudaMallocAsync)
#error "app_ptsz must be built with CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

#define NOINLINE __attribute__((noinline, noclone))
#define KEEP_FRAME() __asm__ __volatile__("" ::: "memory")

NOINLINE void ptsz_peak(void **p)
{
    CUDACHECK(cudaMallocAsync(p, 10000, 0));     /* the per-thread default stream */
    KEEP_FRAME();
}

NOINLINE cudaError_t ptsz_oom_here(void **p)
{
    cudaError_t r = cudaMallocAsync_ptsz(p, 2ull << 30, 0);   /* the name itself */
    KEEP_FRAME();
    return r;
}

static void where(const char *name)
{
    Dl_info info;
    void *f = dlsym(RTLD_DEFAULT, name);
    const char *path = f && dladdr(f, &info) && info.dli_fname ? info.dli_fname : "?";
    const char *base = strrchr(path, '/');
    printf("%s from %s\n", name, base ? base + 1 : path);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    where("cudaMallocAsync_ptsz");
    where("cudaMallocFromPoolAsync_ptsz");
    where("cudaFreeAsync_ptsz");

    void *a, *b, *c, *pf, *q, *r1, *big = (void *)0x1234;
    cudaStream_t s;
    cudaMemPool_t pool0;
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaStreamCreate(&s));
    CUDACHECK(cudaDeviceGetDefaultMemPool(&pool0, 0));
    CUDACHECK(cudaMallocAsync(&a, 1000, 0));                  /* d0: 1000 */
    CUDACHECK(cudaMallocAsync(&b, 3000, s));                  /* 4000 */
    CUDACHECK(cudaFreeAsync(a, 0));                           /* 3000 */
    CUDACHECK(cudaMallocFromPoolAsync(&pf, 2048, pool0, s));  /* 5048 */
    ptsz_peak(&c);                                            /* 15048: the peak */
    CUDACHECK(cudaFreeAsync(c, s));                           /* 5048 */
    CUDACHECK(cudaFreeAsync(b, 0));                           /* 2048 */
    CUDACHECK(cudaStreamSynchronize(s));

    CUDACHECK(cudaSetDevice(1));
    CUDACHECK(cudaMallocFromPoolAsync(&q, 4096, pool0, 0));   /* the pool's device, d0: 6144 */
    CUDACHECK(cudaMallocAsync(&r1, 500, 0));                  /* d1: 500 */
    cudaError_t r = ptsz_oom_here(&big);                      /* d1: fails */
    printf("oom -> %s, pointer %s\n", cudaGetErrorName(r),
           big == (void *)0x1234 ? "untouched" : "changed");
    (void)cudaGetLastError();
    CUDACHECK(cudaStreamSynchronize(0));
    /* left live: d0 pf q = 6144, d1 r1 = 500 */
    (void)pf; (void)q; (void)r1;
    printf("ptsz done\n");
    return 0;
}
