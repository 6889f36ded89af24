/* Catalog: fp16 overflow. Every rank's float16 gradient is finite, but at
 * step 2 every rank contributes 40000 at elements 500..509 and the sum
 * (160000) is past float16's largest finite value, 65504: the output is
 * infinite there. The ranks keep what came out (the next gradients carry
 * the infinities). tranalyze must say overflow at collective #3, all four
 * ranks, in allreduce_fp16_grads(). */
#include <stdint.h>
#include "job.h"

#define N 1000
#define H_ONE 0x3c00u
#define H_40000 0x78e2u
#define H_INF 0x7c00u
static uint16_t g[N], prev[N];

static NOINLINE void allreduce_fp16_grads(void *d)
{
    NCCLCHECK(ncclAllReduce(d, d, N, ncclFloat16, ncclSum, wcomm, stream));
}

int main(void)
{
    job_setup();
    void *dg = buf;
    for (int i = 0; i < N; i++) prev[i] = H_ONE;
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < N; i++) {
            g[i] = H_ONE;
            if (step == 2 && i >= 500 && i < 510) g[i] = H_40000;
            if ((prev[i] & 0x7fffu) >= H_INF) g[i] = prev[i];      /* what overflowed stays */
        }
        CUDACHECK(cudaMemcpyAsync(dg, g, sizeof g, cudaMemcpyHostToDevice, stream));
        allreduce_fp16_grads(dg);
        CUDACHECK(cudaMemcpyAsync(prev, dg, sizeof prev, cudaMemcpyDeviceToHost, stream));
        job_sync();
    }
    job_finish();
    return 0;
}
