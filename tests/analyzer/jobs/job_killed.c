/* Catalog: one rank is killed (OOM killer, node failure): SIGKILL leaves it
 * no chance to write its JSON trace, only its ring file. Rank 2 is killed
 * before step 2 (die_suddenly()); the launcher then stops the others, which
 * wait in collective #3: rank 2 never issued #3, and was killed.
 * KILL_AFTER_MS (default 1000): how long rank 2 lives after its stream
 * synchronized; 0: killed at once, before the completion poller's next look,
 * yet its ring must say its last collective completed (the synchronization
 * proved it).
 * KILL_AT=end: rank 2 is killed after the last step instead, once every
 * rank passed the final barrier, outside any NCCL call (die_after_training());
 * the others finish cleanly: nobody waits for it, yet it died. */
#include <signal.h>
#include "job.h"

static NOINLINE void die_suddenly(int step)
{
    if (rank == 2 && step == 2) {
        job_sync();
        int ms = trtest_env_int("KILL_AFTER_MS", 1000);
        if (ms > 0) trtest_sleep_ms(ms);   /* the others are in collective #3 by now */
        kill(getpid(), SIGKILL);
    }
}

static NOINLINE void die_after_training(void)
{
    if (rank == 2) {
        trtest_sleep_ms(trtest_env_int("KILL_AFTER_MS", 1000));   /* the poller has seen its last call complete */
        kill(getpid(), SIGKILL);
    }
}

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    const char *at = getenv("KILL_AT");
    int at_end = at && !strcmp(at, "end");
    job_setup();
    for (int step = 0; step < 5; step++) {
        if (!at_end) die_suddenly(step);
        train_step();
        job_sync();
    }
    job_sync();
    trtest_file_barrier("done", rank, world);
    if (at_end) die_after_training();
    NCCLCHECK(ncclCommDestroy(wcomm));
    return 0;
}
