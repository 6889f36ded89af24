/* Catalog: a slow rank (a slow input pipeline, a throttled GPU, a noisy
 * host) makes every collective wait for it; nothing hangs, the job is just
 * slow. Rank 3 spends STRAGGLER_MS (default 80, above tranalyze's 50 ms
 * floor) in load_batch() before each step's gradient AllReduce, the others
 * none: tranalyze names rank 3 as a straggler on the world communicator. STRAGGLER_MS=0 is the healthy twin:
 * no finding. */
#include "job.h"

static NOINLINE void load_batch(int delay_ms)
{
    if (rank == 3 && delay_ms > 0) trtest_sleep_ms(delay_ms);
}

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 4096, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    const char *v = getenv("STRAGGLER_MS");
    int delay_ms = v && *v ? atoi(v) : 80;
    job_setup();
    for (int step = 0; step < 30; step++) {
        load_batch(delay_ms);
        train_step();
        job_sync();
    }
    job_finish();
    return 0;
}
