/* Catalog: the data loader gives one rank fewer micro-batches. Each step
 * all-reduces the gradient of every micro-batch, then the loss (one float).
 * In step 1 rank 2 gets 3 micro-batches instead of 4, so its collective #9
 * is reduce_loss() while its peers issue their 4th gradient all-reduce. */
#include "job.h"

static NOINLINE void backward_microbatch(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, wcomm, stream));
}

static NOINLINE void reduce_loss(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclAvg, wcomm, stream));
}

static NOINLINE int microbatches(int step) { return rank == 2 && step == 1 ? 3 : 4; }

int main(void)
{
    job_setup();
    for (int step = 0; step < 4; step++) {
        for (int mb = 0; mb < microbatches(step); mb++) backward_microbatch();
        reduce_loss();
        job_sync();
    }
    job_finish();
    return 0;
}
