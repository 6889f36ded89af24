/* Catalog: one rank feeds bad data (a corrupt sample) and its gradient turns
 * NaN; the NaN then reaches every rank at once. A "model" of 4096 float32
 * weights: each step every rank computes its gradient on the host from the
 * weights and its own batch, all-reduces it in allreduce_grads() (collective
 * 2 * step + 1 of the world communicator), applies it, and all-reduces its
 * loss in reduce_loss(). At step 3 rank 2's batch is corrupt: element 123 of
 * its gradient is NaN. The sum is NaN at 123 on every rank, so are the
 * weights and every later gradient and loss. tranalyze must name rank 2 as
 * the source at collective #7 (element 123), the later ones consequences. */
#include <math.h>
#include "job.h"

#define N 4096
static float w[N], g[N];

static NOINLINE void allreduce_grads(float *d)
{
    NCCLCHECK(ncclAllReduce(d, d, N, ncclFloat32, ncclSum, wcomm, stream));
}

static NOINLINE void reduce_loss(float *d)
{
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    job_setup();
    float *dg = buf, *dl = buf + N;
    for (int i = 0; i < N; i++) w[i] = 0.001f * (float)i;
    for (int step = 0; step < 6; step++) {
        float loss = 0;
        for (int i = 0; i < N; i++) {
            g[i] = 0.5f * w[i] + 0.01f * (float)(rank + 1);
            if (rank == 2 && step == 3 && i == 123) g[i] = NAN;     /* the corrupt sample */
            loss += g[i] * g[i];
        }
        CUDACHECK(cudaMemcpyAsync(dg, g, sizeof g, cudaMemcpyHostToDevice, stream));
        allreduce_grads(dg);
        CUDACHECK(cudaMemcpyAsync(g, dg, sizeof g, cudaMemcpyDeviceToHost, stream));
        CUDACHECK(cudaMemcpyAsync(dl, &loss, sizeof loss, cudaMemcpyHostToDevice, stream));
        reduce_loss(dl);
        job_sync();
        for (int i = 0; i < N; i++) w[i] -= 0.1f * g[i] / (float)world;
    }
    job_finish();
    return 0;
}
