/* Catalog: ranks never finish communicator initialisation (bad MASTER_ADDR,
 * firewall). Rank 3 never gets the unique id (wait_for_master() waits
 * forever); ranks 0-2 are inside ncclCommInitRank until the launcher's
 * timeout. */
#include "job.h"

static NOINLINE void wait_for_master(void)
{
    for (;;) pause();
}

static NOINLINE void init_comm(void)
{
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "world");
    NCCLCHECK(ncclCommInitRank(&wcomm, world, id, rank));
}

int main(void)
{
    trtest_init(&rank, &world);
    CUDACHECK(cudaMalloc((void **)&buf, 1 << 20));   /* the model is on the GPU */
    if (rank == 3) wait_for_master();
    init_comm();
    job_finish();
    return 0;
}
