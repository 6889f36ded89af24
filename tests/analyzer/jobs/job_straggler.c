/* Catalog: a slow rank (a slow input pipeline, a throttled GPU, a noisy
 * host) makes every collective wait for it; nothing hangs, the job is just
 * slow. Rank 3 spends STRAGGLER_MS (default 80, above tranalyze's 50 ms
 * floor) in load_batch() before each step's gradient AllReduce, the others
 * none: tranalyze names rank 3 as a straggler on the world communicator. STRAGGLER_MS=0 is the healthy twin:
 * no finding. STRAGGLER_AT=N: rank 3 is late at step N only (a rank that
 * stalls once and catches up: a watcher's report of it must be withdrawn). */
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
    int at = trtest_env_int("STRAGGLER_AT", -1);
    job_setup();
    for (int step = 0; step < 30; step++) {
        load_batch(at < 0 || step == at ? delay_ms : 0);
        train_step();
        job_sync();
    }
    job_finish();
    return 0;
}
