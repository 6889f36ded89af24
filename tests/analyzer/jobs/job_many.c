/* A long job: MANY_CALLS (default 5000) gradient AllReduces on the world
 * communicator, synchronised every 100 calls; enough calls to fill a small
 * trace folder mid-job (tests/shim/test_disk_full.py).
 *   MANY_FILL=PATH, MANY_FILL_STEP=S (default 500): before step S rank 0
 *     fills the file system of PATH (a file written there until ENOSPC, and
 *     kept: a checkpoint that filled the disk), all ranks synchronised
 *     before and after, so that the trace folder on it fills at the same
 *     call of every rank
 *   MANY_EXTRA=S plants a divergence of the catalog: at step S rank 0
 *     issues an extra AllReduce of one float in log_metrics() where the
 *     others issue the gradient AllReduce, so collective S + 1 of the world
 *     communicator diverges and hangs there; the ranks go on queueing
 *     their calls (no sync after it) and hang at the end
 * Prints "rank R done" at its end. */
#include <errno.h>
#include <fcntl.h>

#include "job.h"

static NOINLINE void log_metrics(int step, int extra_step)
{
    if (rank == 0 && step == extra_step) NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, wcomm, stream));
}

static NOINLINE void train_step(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, wcomm, stream));
}

static void fill(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) FAIL("cannot create %s: %s", path, strerror(errno));
    static char block[65536];
    for (size_t chunk = sizeof block; chunk;) {
        if (write(fd, block, chunk) < 0) {
            if (errno != ENOSPC) FAIL("writing %s: %s", path, strerror(errno));
            chunk /= 2;
        }
    }
    close(fd);
}

int main(void)
{
    job_setup();
    int calls = trtest_env_int("MANY_CALLS", 5000), extra_step = trtest_env_int("MANY_EXTRA", -1);
    int fill_step = trtest_env_int("MANY_FILL_STEP", 500);
    const char *filler = getenv("MANY_FILL");
    for (int step = 0; step < calls; step++) {
        if (filler && *filler && step == fill_step) {
            job_sync();
            trtest_file_barrier("fill", rank, world);
            if (rank == 0) fill(filler);
            trtest_file_barrier("filled", rank, world);
        }
        log_metrics(step, extra_step);
        train_step();
        /* past the divergence the stream hangs: the calls are queued, never waited for (as a framework
         * queues its collectives), so that the ranks go on issuing them */
        if (step % 100 == 99 && (extra_step < 0 || step < extra_step)) job_sync();
    }
    job_finish();
    printf("rank %d done\n", rank);
    return 0;
}
