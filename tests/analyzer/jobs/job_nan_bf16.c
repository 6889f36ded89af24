/* Catalog: one rank's bfloat16 gradient turns NaN, in a data-parallel group.
 * 4 ranks; the world communicator is split into two data-parallel pairs
 * {0, 2} and {1, 3}. Each step every rank all-reduces its bfloat16 gradient
 * (2048 elements) in its pair in dp_allreduce_bf16(), then the loss
 * (float32) over the world in reduce_loss(). At step 2 rank 3's gradient
 * holds a NaN at element 77: tranalyze must name rank 3 as the source at
 * collective #3 of the pair {1, 3}; the world loss all-reduce that turns NaN
 * right after is a consequence (the only one: the gradients are computed
 * afresh each step). */
#include <stdint.h>
#include <string.h>
#include "job.h"

#define N 2048
static uint16_t g[N];
static ncclComm_t dp;

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static NOINLINE void dp_allreduce_bf16(void *d)
{
    NCCLCHECK(ncclAllReduce(d, d, N, ncclBfloat16, ncclSum, dp, stream));
}

static NOINLINE void reduce_loss(float *d)
{
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    job_setup();
    if (world != 4) FAIL("run with 4 ranks");
    NCCLCHECK(ncclCommSplit(wcomm, rank % 2, rank, &dp, NULL));
    void *dg = buf;
    float *dl = buf + N;
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < N; i++) g[i] = to_bf16(0.25f * (float)(rank + 1) + 0.001f * (float)i);
        if (rank == 3 && step == 2) g[77] = 0x7fc0;      /* bfloat16 NaN */
        CUDACHECK(cudaMemcpyAsync(dg, g, sizeof g, cudaMemcpyHostToDevice, stream));
        dp_allreduce_bf16(dg);
        CUDACHECK(cudaMemcpyAsync(g, dg, sizeof g, cudaMemcpyDeviceToHost, stream));
        job_sync();
        float loss = 0;
        for (int i = 0; i < N; i++) loss += from_bf16(g[i]);
        CUDACHECK(cudaMemcpyAsync(dl, &loss, sizeof loss, cudaMemcpyHostToDevice, stream));
        reduce_loss(dl);
        job_sync();
    }
    job_sync();
    trtest_file_barrier("done", rank, world);
    NCCLCHECK(ncclCommDestroy(dp));
    NCCLCHECK(ncclCommDestroy(wcomm));
    return 0;
}
