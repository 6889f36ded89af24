/* Catalog: a hang spreads across groups. 8 ranks: tensor-parallel groups
 * {0-3} {4-7} and data-parallel pairs {0,4} {1,5} {2,6} {3,7}, split from the
 * world communicator. Rank 5 exits before step 3 (maybe_stop_early()): its TP
 * peers 4, 6, 7 wait in TP collective #7, their DP peers 0, 2, 3 wait for
 * them, and rank 1 waits for rank 5 in its DP pair. One root: rank 5. */
#include "job.h"

static ncclComm_t tp, dp;

static NOINLINE void tp_forward(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 2048, ncclFloat32, ncclSum, tp, stream));
}

static NOINLINE void tp_backward(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 2048, ncclFloat32, ncclSum, tp, stream));
}

static NOINLINE void dp_allreduce_grads(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 65536, ncclFloat32, ncclAvg, dp, stream));
}

static NOINLINE void maybe_stop_early(int step)
{
    if (rank == 5 && step == 3) {
        job_sync();
        exit(0);
    }
}

int main(void)
{
    job_setup();
    if (world != 8) FAIL("run with 8 ranks");
    NCCLCHECK(ncclCommSplit(wcomm, rank / 4, rank, &tp, NULL));
    NCCLCHECK(ncclCommSplit(wcomm, rank % 4, rank, &dp, NULL));
    for (int step = 0; step < 6; step++) {
        maybe_stop_early(step);
        tp_forward();
        tp_backward();
        job_sync();
        dp_allreduce_grads();
        job_sync();
    }
    job_sync();
    trtest_file_barrier("done", rank, world);
    NCCLCHECK(ncclCommDestroy(tp));
    NCCLCHECK(ncclCommDestroy(dp));
    NCCLCHECK(ncclCommDestroy(wcomm));
    return 0;
}
