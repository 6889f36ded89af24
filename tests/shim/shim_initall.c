/* One process driving four devices (test_shim.py case "initall"): the
 * shim must write one trace per device, each rank apart. ncclCommInitAll
 * and a grouped AllReduce from one thread, grouped inits and splits from one
 * thread, then one thread per device with ncclCommInitRank. */
#include <pthread.h>
#include "../common/trtest.h"

#define NDEV 4
#define NOINLINE __attribute__((noinline))

static ncclUniqueId thread_id;
static cudaStream_t streams[NDEV];
static int *bufs[NDEV];

NOINLINE void *initall_thread(void *arg)
{
    int dev = (int)(intptr_t)arg;
    CUDACHECK(cudaSetDevice(dev));
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, NDEV, thread_id, dev));
    NCCLCHECK(ncclAllReduce(bufs[dev], bufs[dev], 1, ncclInt32, ncclMax, comm, cudaStreamPerThread));
    CUDACHECK(cudaStreamSynchronize(cudaStreamPerThread));
    NCCLCHECK(ncclCommDestroy(comm));
    return NULL;
}

NOINLINE void initall_main(void)
{
    ncclComm_t comms[NDEV], again[NDEV], split[NDEV];
    int devs[NDEV] = {0, 1, 2, 3};
    NCCLCHECK(ncclCommInitAll(comms, NDEV, devs));
    for (int i = 0; i < NDEV; i++) {
        CUDACHECK(cudaSetDevice(i));
        CUDACHECK(cudaStreamCreate(&streams[i]));
        CUDACHECK(cudaMalloc((void **)&bufs[i], 1000 * sizeof(int)));
        CUDACHECK(cudaMemset(bufs[i], 0, 1000 * sizeof(int)));
    }
    /* group 1 */
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < NDEV; i++)
        NCCLCHECK(ncclAllReduce(bufs[i], bufs[i], 1000, ncclInt32, ncclSum, comms[i], streams[i]));
    NCCLCHECK(ncclGroupEnd());
    /* group 2: inits; group 3: splits; group 4: collectives on the splits */
    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < NDEV; i++) {
        CUDACHECK(cudaSetDevice(i));
        NCCLCHECK(ncclCommInitRank(&again[i], NDEV, id, i));
    }
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < NDEV; i++) NCCLCHECK(ncclCommSplit(again[i], i % 2, i, &split[i], NULL));
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < NDEV; i++)
        NCCLCHECK(ncclAllReduce(bufs[i], bufs[i], 7, ncclInt32, ncclSum, split[i], streams[i]));
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < NDEV; i++) {
        CUDACHECK(cudaSetDevice(i));
        CUDACHECK(cudaStreamSynchronize(streams[i]));
    }
    for (int i = 0; i < NDEV; i++) {
        NCCLCHECK(ncclCommDestroy(split[i]));
        NCCLCHECK(ncclCommDestroy(again[i]));
        NCCLCHECK(ncclCommDestroy(comms[i]));
    }
    /* one thread per device */
    NCCLCHECK(ncclGetUniqueId(&thread_id));
    pthread_t t[NDEV];
    for (int i = 0; i < NDEV; i++)
        if (pthread_create(&t[i], NULL, initall_thread, (void *)(intptr_t)i) != 0) FAIL("pthread_create");
    for (int i = 0; i < NDEV; i++) pthread_join(t[i], NULL);
}

int main(void)
{
    trtest_rank = 0;
    initall_main();
    printf("one process, %d ranks: ok\n", NDEV);
    return 0;
}
