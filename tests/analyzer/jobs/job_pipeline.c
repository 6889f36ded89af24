/* Catalog: pipeline stages disagree on send/recv. Four stages, four
 * micro-batches per step: stage s receives from s-1 and sends to s+1. In
 * step 1 stage 1 skips its send of micro-batch 2 (forward_stage()): stage 2's
 * receive #8 from stage 1 never gets its send. */
#include "job.h"

static NOINLINE void recv_forward(int from)
{
    NCCLCHECK(ncclRecv(buf, 4096, ncclFloat32, from, wcomm, stream));
}

static NOINLINE void send_forward(int to)
{
    NCCLCHECK(ncclSend(buf, 4096, ncclFloat32, to, wcomm, stream));
}

static NOINLINE void forward_stage(int step, int mb)
{
    if (rank > 0) recv_forward(rank - 1);
    if (rank < world - 1 && !(rank == 1 && step == 1 && mb == 2)) send_forward(rank + 1);
}

static NOINLINE void reduce_loss(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, wcomm, stream));
}

int main(void)
{
    job_setup();
    for (int step = 0; step < 3; step++) {
        for (int mb = 0; mb < 4; mb++) forward_stage(step, mb);
        job_sync();
        reduce_loss();
        job_sync();
    }
    job_finish();
    return 0;
}
