/* Catalog: a rank returns early (or crashes); the others wait in the next
 * collective. Rank 3 exits after step 2 in maybe_stop_early(); ranks 0-2
 * wait in collective #7 (the gradient all-reduce of step 3). */
#include "job.h"

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclSum, wcomm, stream));
}

static NOINLINE void sync_step(void)
{
    NCCLCHECK(ncclBroadcast(buf, buf, 4, ncclFloat32, 0, wcomm, stream));
}

static NOINLINE void maybe_stop_early(int step)
{
    if (rank == 3 && step == 3) {
        job_sync();
        exit(0);
    }
}

int main(void)
{
    job_setup();
    for (int step = 0; step < 6; step++) {
        maybe_stop_early(step);
        train_step();
        sync_step();
        job_sync();
    }
    job_finish();
    return 0;
}
