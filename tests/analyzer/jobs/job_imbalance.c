/* Catalog: uneven partitioning, rank 0 holding extra state: rank 0 keeps a
 * full copy of the model (keep_full_model_copy(), 48 MiB more than the 16 MiB
 * every rank holds). Nothing hangs; rank 0's peak is reported. */
#include "job.h"

static NOINLINE void *keep_full_model_copy(void)
{
    void *p = NULL;
    CUDACHECK(cudaMalloc(&p, 48 << 20));
    return p;
}

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    job_setup();
    void *shard = NULL, *full = NULL;
    CUDACHECK(cudaMalloc(&shard, 16 << 20));
    for (int step = 0; step < 3; step++) {
        train_step();
        job_sync();
        if (rank == 0 && step == 1) full = keep_full_model_copy();
    }
    job_finish();
    CUDACHECK(cudaFree(shard));
    if (full) CUDACHECK(cudaFree(full));
    return 0;
}
