/* One process driving several devices: ncclCommInitAll, then grouped
 * collectives over all of them from one thread (the classic single-process
 * multi-GPU pattern), then one thread per device with ncclCommInitRank. */
#include <pthread.h>
#include "../common/trtest.h"

#define NDEV 4

static ncclUniqueId thread_id;

static void *per_thread(void *arg)
{
    int dev = (int)(intptr_t)arg;
    CUDACHECK(cudaSetDevice(dev));
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, NDEV, thread_id, dev));
    float *d, v = (float)dev;
    CUDACHECK(cudaMalloc((void **)&d, sizeof v));
    CUDACHECK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice));
    NCCLCHECK(ncclAllReduce(d, d, 1, ncclFloat32, ncclMax, comm, cudaStreamPerThread));
    CUDACHECK(cudaStreamSynchronize(cudaStreamPerThread));
    CUDACHECK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
    EXPECT(v == NDEV - 1, "thread %d: max %g", dev, v);
    NCCLCHECK(ncclCommDestroy(comm));
    return NULL;
}

int main(void)
{
    trtest_rank = 0;
    ncclComm_t comms[NDEV];
    int devs[NDEV] = {0, 1, 2, 3};
    NCCLCHECK(ncclCommInitAll(comms, NDEV, devs));
    cudaStream_t streams[NDEV];
    int *bufs[NDEV];
    for (int i = 0; i < NDEV; i++) {
        int d;
        NCCLCHECK(ncclCommCuDevice(comms[i], &d));
        EXPECT(d == i, "comm %d on device %d", i, d);
        CUDACHECK(cudaSetDevice(i));
        CUDACHECK(cudaStreamCreate(&streams[i]));
        CUDACHECK(cudaMalloc((void **)&bufs[i], 1000 * sizeof(int)));
        int h[1000];
        for (int k = 0; k < 1000; k++) h[k] = i * k;
        CUDACHECK(cudaMemcpy(bufs[i], h, sizeof h, cudaMemcpyHostToDevice));
    }
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < NDEV; i++)
        NCCLCHECK(ncclAllReduce(bufs[i], bufs[i], 1000, ncclInt32, ncclSum, comms[i], streams[i]));
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < NDEV; i++) {
        CUDACHECK(cudaSetDevice(i));
        CUDACHECK(cudaStreamSynchronize(streams[i]));
        int h[1000];
        CUDACHECK(cudaMemcpy(h, bufs[i], sizeof h, cudaMemcpyDeviceToHost));
        for (int k = 0; k < 1000; k++) EXPECT(h[k] == 6 * k, "device %d element %d = %d", i, k, h[k]);
    }
    /* grouped init from one thread, then a split of every comm in a group */
    ncclComm_t again[NDEV], split[NDEV];
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
    for (int i = 0; i < NDEV; i++) {
        int n, r;
        NCCLCHECK(ncclCommCount(split[i], &n));
        NCCLCHECK(ncclCommUserRank(split[i], &r));
        EXPECT(n == 2 && r == i / 2, "split %d: %d of %d", i, r, n);
    }
    for (int i = 0; i < NDEV; i++) {
        NCCLCHECK(ncclCommDestroy(split[i]));
        NCCLCHECK(ncclCommDestroy(again[i]));
        NCCLCHECK(ncclCommDestroy(comms[i]));
    }
    /* one thread per device */
    NCCLCHECK(ncclGetUniqueId(&thread_id));
    pthread_t t[NDEV];
    for (int i = 0; i < NDEV; i++) pthread_create(&t[i], NULL, per_thread, (void *)(intptr_t)i);
    for (int i = 0; i < NDEV; i++) pthread_join(t[i], NULL);
    printf("single-process multi-device: ok\n");
    return 0;
}
