/* Catalog: a rank returns early (or crashes); the others wait in the next
 * collective. Rank 3 exits after step 2 in maybe_stop_early(); ranks 0-2
 * wait in collective #7 (the gradient all-reduce of step 3).
 * EARLY_STOP_STEP (default 3): the step before which rank 3 exits (it waits
 * in #2 * EARLY_STOP_STEP + 1); EARLY_WORK_US (default 0): CPU work per
 * step, so that a job of many ranks on few cores is seen mid-way (live
 * snapshots under a SIGUSR1 storm: check_snapshots.py). */
#include <time.h>
#include "job.h"

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclSum, wcomm, stream));
}

static NOINLINE void sync_step(void)
{
    NCCLCHECK(ncclBroadcast(buf, buf, 4, ncclFloat32, 0, wcomm, stream));
}

static NOINLINE void maybe_stop_early(int step, int stop_step)
{
    if (rank == 3 && step == stop_step) {
        job_sync();
        exit(0);
    }
}

/* busy CPU work (a forward pass): not a sleep, which a signal cuts short */
static void compute(int us)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while (us > 0 && (t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

int main(void)
{
    job_setup();
    int stop_step = trtest_env_int("EARLY_STOP_STEP", 3), work_us = trtest_env_int("EARLY_WORK_US", 0);
    for (int step = 0; step < stop_step + 3; step++) {
        maybe_stop_early(step, stop_step);
        compute(work_us);
        train_step();
        sync_step();
        job_sync();
    }
    job_finish();
    return 0;
}
