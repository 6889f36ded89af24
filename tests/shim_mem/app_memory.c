/* The application side of the memory tests (check_memory.py runs it, with
 * and without LD_PRELOAD=libtrshim.so, and checks the traces):
 *
 *   app_memory sequence   every allocation API on two devices, a known
 *                         sequence (TRSIM_DEVICE_COUNT=2, TRSIM_DEVICE_MEM=1GiB)
 *   app_memory oom        allocations past the capacity (TRSIM_DEVICE_MEM=64MiB):
 *                         prints what the application sees, which must not
 *                         change under the shim
 *   app_memory ranks      one rank of a 4-rank job (trsim-launch -n 4,
 *                         TRSIM_DEVICE_COUNT=4): collectives between
 *                         allocations, rank 2 allocating more than the others
 *
 * The functions that reach a peak or fail are global and never inlined: the
 * checker expects them as the innermost frame of the recorded stacks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "trtest.h"

#define MiB (1024ull * 1024)
#define NOINLINE __attribute__((noinline, noclone))
/* keeps a call from being a tail call, so the caller's frame stays on the stack */
#define KEEP_FRAME() __asm__ __volatile__("" ::: "memory")

#define CU_OK(call) do { CUresult e_ = (call); if (e_ != CUDA_SUCCESS) FAIL("%s -> %d", #call, (int)e_); } while (0)

/* ---- sequence ---------------------------------------------------------------- */

NOINLINE void reach_peak_d0_driver(CUdeviceptr *dp)
{
    CU_OK(cuMemAlloc_v2(dp, 65536));
    KEEP_FRAME();
}

NOINLINE CUmemGenericAllocationHandle reach_peak_vmm(int device)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    KEEP_FRAME();
    return h;
}

static int run_sequence(void)
{
    void *p1, *p2, *pm, *pp, *pa, *pf, *pn, *q, *pa2, *h123, *h456, *pz;
    size_t pitch;
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaMalloc(&p1, 1000));                           /* d0: 1000 */
    CUDACHECK(cudaMalloc(&p2, 3000));                           /* 4000 */
    CUDACHECK(cudaFree(p1));                                    /* 3000 */
    CUDACHECK(cudaMallocManaged(&pm, 777, cudaMemAttachGlobal)); /* 3777 */
    CUDACHECK(cudaMallocPitch(&pp, &pitch, 100, 10));           /* + 512 * 10 = 8897 */
    EXPECT(pitch == 512, "pitch %zu", pitch);
    cudaStream_t s0;
    CUDACHECK(cudaStreamCreate(&s0));
    CUDACHECK(cudaMallocAsync(&pa, 10000, s0));                 /* 18897 */
    CUDACHECK(cudaFreeAsync(pa, s0));                           /* 8897 */
    cudaMemPool_t pool0;
    CUDACHECK(cudaDeviceGetDefaultMemPool(&pool0, 0));
    CUDACHECK(cudaMallocFromPoolAsync(&pf, 2048, pool0, s0));   /* 10945 */
    NCCLCHECK(ncclMemAlloc(&pn, 4096));                         /* 15041 */
    CUDACHECK(cudaMalloc(&pz, 0));                              /* nothing */
    CU_OK(cuInit(0));
    CUdeviceptr dp;
    reach_peak_d0_driver(&dp);                                  /* 80577 */
    CU_OK(cuMemFree_v2(dp));                                    /* 15041 */

    CUDACHECK(cudaSetDevice(1));
    CUDACHECK(cudaMalloc(&q, MiB));                             /* d1: 1 MiB */
    CUDACHECK(cudaMallocAsync(&pa2, 100, s0));                  /* s0 is device 0's: d0 15141 */
    CUmemGenericAllocationHandle h1 = reach_peak_vmm(1);        /* d1: 3 MiB */
    CU_OK(cuMemRelease(h1));                                    /* d1: 1 MiB */
    CUmemGenericAllocationHandle h0 = reach_peak_vmm(0);        /* d0: 15141 + 2 MiB = 2112293 */
    CU_OK(cuMemRelease(h0));                                    /* d0: 15141 */
    CUDACHECK(cudaMallocHost(&h123, 123));                      /* pinned: 123 */
    CUDACHECK(cudaHostAlloc(&h456, 456, cudaHostAllocDefault)); /* 579 */
    CUDACHECK(cudaFreeHost(h123));                              /* 456 */
    /* A failing free changes nothing. */
    EXPECT(cudaFree(h456) == cudaErrorInvalidValue, "cudaFree of pinned memory");
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue, "last error");
    CUDACHECK(cudaStreamSynchronize(s0));
    /* left live at exit: d0 p2 pm pp pf pn pa2 = 15141, d1 q = 1 MiB, pinned 456 */
    (void)p2; (void)pm; (void)pp; (void)pf; (void)pn; (void)pa2;
    printf("sequence done\n");
    return 0;
}

/* ---- oom ----------------------------------------------------------------------- */

NOINLINE cudaError_t oom_here(void **p)
{
    cudaError_t r = cudaMalloc(p, 30 * MiB);
    KEEP_FRAME();
    return r;
}

NOINLINE cudaError_t oom_async_here(void **p, cudaStream_t s)
{
    cudaError_t r = cudaMallocAsync(p, 30 * MiB, s);
    KEEP_FRAME();
    return r;
}

static int run_oom(void)
{
    void *a, *b = (void *)0x1234, *c = (void *)0x5678;
    CUDACHECK(cudaMalloc(&a, 40 * MiB));
    cudaError_t r = oom_here(&b);
    printf("cudaMalloc -> %d (%s), pointer %s\n", (int)r, cudaGetErrorName(r),
           b == (void *)0x1234 ? "untouched" : b ? "changed" : "NULL");
    cudaError_t peek = cudaPeekAtLastError();
    cudaError_t last = cudaGetLastError();
    cudaError_t again = cudaGetLastError();
    printf("peek %d, last %d, then %d\n", (int)peek, (int)last, (int)again);
    cudaStream_t s;
    CUDACHECK(cudaStreamCreate(&s));
    r = oom_async_here(&c, s);
    printf("cudaMallocAsync -> %d (%s), pointer %s\n", (int)r, cudaGetErrorName(r),
           c == (void *)0x5678 ? "untouched" : c ? "changed" : "NULL");
    last = cudaGetLastError();
    again = cudaGetLastError();
    printf("last %d, then %d\n", (int)last, (int)again);
    /* an error the application leaves pending stays pending */
    r = cudaMalloc(&b, 64 * MiB);
    printf("cudaMalloc -> %d\n", (int)r);
    void *d;
    CUDACHECK(cudaMalloc(&d, MiB));
    CUDACHECK(cudaFree(d));
    printf("pending after a success: %d\n", (int)cudaGetLastError());
    size_t fr, tot;
    CUDACHECK(cudaMemGetInfo(&fr, &tot));
    printf("free %zu of %zu\n", fr, tot);
    CUDACHECK(cudaStreamDestroy(s));
    CUDACHECK(cudaFree(a));
    return 0;
}

/* ---- ranks --------------------------------------------------------------------- */

NOINLINE void *rank_peak(int rank)
{
    void *p;
    CUDACHECK(cudaMalloc(&p, (size_t)(rank + 1) * 2 * MiB));
    KEEP_FRAME();
    return p;
}

NOINLINE void *rank2_big(void)
{
    void *p;
    CUDACHECK(cudaMalloc(&p, 16 * MiB));
    KEEP_FRAME();
    return p;
}

static void allreduce(ncclComm_t comm, float *send, float *recv, cudaStream_t s)
{
    NCCLCHECK(ncclAllReduce(send, recv, 1024, ncclFloat, ncclSum, comm, s));
    CUDACHECK(cudaStreamSynchronize(s));
}

static int run_ranks(void)
{
    int rank = trtest_env_int("RANK", -1), world = trtest_env_int("WORLD_SIZE", -1);
    trtest_rank = rank;
    EXPECT(rank >= 0 && world == 4, "RANK %d WORLD_SIZE %d", rank, world);
    CUDACHECK(cudaSetDevice(rank));
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "mem");
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));
    cudaStream_t s;
    CUDACHECK(cudaStreamCreate(&s));
    void *base;
    float *send, *recv;
    CUDACHECK(cudaMalloc(&base, (size_t)(rank + 1) * MiB));
    CUDACHECK(cudaMalloc((void **)&send, 4096));
    CUDACHECK(cudaMalloc((void **)&recv, 4096));
    CUDACHECK(cudaMemset(send, 0, 4096));
    for (int i = 0; i < 3; i++)
        allreduce(comm, send, recv, s);                          /* seq 1, 2, 3 */
    void *extra = rank_peak(rank);                               /* the peak, after seq 3 */
    CUDACHECK(cudaFree(extra));
    allreduce(comm, send, recv, s);                              /* seq 4 */
    if (rank == 2)
        (void)rank2_big();                                       /* rank 2's peak, after seq 4 */
    CUDACHECK(cudaFree(send));
    CUDACHECK(cudaFree(recv));
    CUDACHECK(cudaStreamDestroy(s));
    NCCLCHECK(ncclCommDestroy(comm));
    printf("rank %d done\n", rank);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "sequence")) return run_sequence();
    if (!strcmp(mode, "oom")) return run_oom();
    if (!strcmp(mode, "ranks")) return run_ranks();
    fprintf(stderr, "usage: %s sequence|oom|ranks\n", argv[0]);
    return 2;
}
