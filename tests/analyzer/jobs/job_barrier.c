/* Catalog: only some ranks take part in a save with a collective inside
 * (checkpoint saved on rank 0 only, with a Broadcast in it). After step 1
 * rank 0 issues the Broadcast in save_checkpoint() as collective #3 while the
 * others go on with the next step's gradient all-reduce. */
#include "job.h"

static NOINLINE void save_checkpoint(void)
{
    NCCLCHECK(ncclBroadcast(buf, buf, 8, ncclFloat32, 0, wcomm, stream));
}

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    job_setup();
    for (int step = 0; step < 5; step++) {
        train_step();
        job_sync();
        if (step == 1 && rank == 0) save_checkpoint();
    }
    job_finish();
    return 0;
}
