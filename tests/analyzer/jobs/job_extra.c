/* Catalog: a rank-specific branch (`if rank == 0: log metrics`) adds a
 * collective on rank 0. At step 3 rank 0 issues an extra AllReduce of one
 * float in log_metrics() where the others issue the gradient AllReduce:
 * collective #4 of the world communicator diverges, rank 0 is the culprit. */
#include "job.h"

static NOINLINE void log_metrics(int step)
{
    if (rank == 0 && step == 3) NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, wcomm, stream));
}

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    job_setup();
    for (int step = 0; step < 6; step++) {
        log_metrics(step);
        train_step();
        job_sync();
    }
    job_finish();
    return 0;
}
