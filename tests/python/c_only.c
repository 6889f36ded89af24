/* A C program (no Python in the process) under the shim, for
 * run_jobs.py's "c_only" case: two ranks, allocations, a few collectives of
 * two call sites, a clean end. Its traces must say "python": {"state":
 * "none"}, hold no Python stack anywhere, and be the same as with
 * TRSHIM_PYSTACK_DEPTH=0 (but for that setting and the state). */
#include "../common/trtest.h"

static __attribute__((noinline)) void grads_allreduce(float *buf, ncclComm_t comm, cudaStream_t s)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, s));
}

static __attribute__((noinline)) void lr_broadcast(float *buf, ncclComm_t comm, cudaStream_t s)
{
    NCCLCHECK(ncclBroadcast(buf, buf, 1, ncclFloat32, 0, comm, s));
}

int main(void)
{
    int rank, world;
    trtest_init(&rank, &world);
    cudaStream_t s;
    CUDACHECK(cudaStreamCreate(&s));
    float *buf;
    CUDACHECK(cudaMalloc((void **)&buf, 1024 * sizeof(float)));
    CUDACHECK(cudaMemset(buf, 0, 1024 * sizeof(float)));
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "world");
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));
    for (int step = 0; step < 4; step++) {
        grads_allreduce(buf, comm, s);
        if (step % 2 == 0) lr_broadcast(buf, comm, s);
        NCCLCHECK(ncclGroupStart());
        grads_allreduce(buf, comm, s);
        NCCLCHECK(ncclGroupEnd());
        CUDACHECK(cudaStreamSynchronize(s));
    }
    NCCLCHECK(ncclCommDestroy(comm));
    CUDACHECK(cudaFree(buf));
    return 0;
}
