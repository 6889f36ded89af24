/* Catalog: one GPU runs out of memory while the others are fine. Devices of
 * 256 MiB (TRSIM_DEVICE_MEM); in step 2 rank 1 asks alloc_activations() for
 * 512 MiB, fails and exits; the others wait in collective #3. */
#include "job.h"

static NOINLINE void *alloc_activations(size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d: CUDA out of memory allocating %zu bytes\n", rank, bytes);
        sleep(1);   /* the launcher stops the others when this rank fails: let them reach collective #3 */
        exit(1);
    }
    return p;
}

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    job_setup();
    void *params = alloc_activations(64 << 20);
    for (int step = 0; step < 5; step++) {
        void *act = alloc_activations(rank == 1 && step == 2 ? (size_t)512 << 20 : 16 << 20);
        train_step();
        job_sync();
        CUDACHECK(cudaFree(act));
    }
    CUDACHECK(cudaFree(params));
    job_finish();
    return 0;
}
