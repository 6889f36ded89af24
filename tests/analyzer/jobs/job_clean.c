/* A correct job that must produce no finding at all: world, tensor- and
 * data-parallel communicators split from it, collectives of every kind, a
 * ring exchange of sends and receives inside a group, a pipeline between the
 * two halves, and an uneven but legal pattern (rank 0 sends step+1 messages
 * to rank 1 each step). Run with 8 ranks. CLEAN_PAUSE_MS: every rank
 * pauses that long after step 1 with nothing pending (an evaluation, a
 * checkpoint written by every rank): a watcher must not call it a hang. */
#include "job.h"

static ncclComm_t tp, dp;

int main(void)
{
    job_setup();
    if (world != 8) FAIL("run with 8 ranks");
    NCCLCHECK(ncclCommSplit(wcomm, rank / 4, rank, &tp, NULL));
    NCCLCHECK(ncclCommSplit(wcomm, rank % 4, rank, &dp, NULL));
    int t = rank % 4;
    for (int step = 0; step < 4; step++) {
        NCCLCHECK(ncclAllReduce(buf, buf, 2048, ncclFloat32, ncclSum, tp, stream));
        NCCLCHECK(ncclAllGather(buf, buf + 4096, 256, ncclFloat32, tp, stream));
        NCCLCHECK(ncclReduceScatter(buf, buf + 8192, 128, ncclFloat32, ncclSum, tp, stream));
        /* pipeline: stage 0 (ranks 0-3) -> stage 1 (ranks 4-7), 3 micro-batches */
        for (int mb = 0; mb < 3; mb++) {
            if (rank < 4) NCCLCHECK(ncclSend(buf, 4096, ncclFloat32, rank + 4, wcomm, stream));
            else NCCLCHECK(ncclRecv(buf + 65536, 4096, ncclFloat32, rank - 4, wcomm, stream));
        }
        /* ring exchange in a group on the TP communicator */
        NCCLCHECK(ncclGroupStart());
        NCCLCHECK(ncclSend(buf, 512, ncclFloat32, (t + 1) % 4, tp, stream));
        NCCLCHECK(ncclRecv(buf + 131072, 512, ncclFloat32, (t + 3) % 4, tp, stream));
        NCCLCHECK(ncclGroupEnd());
        /* uneven but legal */
        for (int k = 0; k <= step; k++) {
            if (rank == 0) NCCLCHECK(ncclSend(buf, 16, ncclFloat32, 1, wcomm, stream));
            if (rank == 1) NCCLCHECK(ncclRecv(buf + 200000, 16, ncclFloat32, 0, wcomm, stream));
        }
        NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclAvg, dp, stream));
        NCCLCHECK(ncclBroadcast(buf, buf, 4, ncclFloat32, 0, wcomm, stream));
        NCCLCHECK(ncclReduce(buf, buf + 300000, 16, ncclFloat32, ncclMax, 0, wcomm, stream));
        job_sync();
        if (step == 1) trtest_sleep_ms(trtest_env_int("CLEAN_PAUSE_MS", 0));
    }
    job_sync();
    trtest_file_barrier("done", rank, world);
    NCCLCHECK(ncclCommDestroy(tp));
    NCCLCHECK(ncclCommDestroy(dp));
    NCCLCHECK(ncclCommDestroy(wcomm));
    return 0;
}
