/* One process driving four devices with ncclCommInitAll (check_nan.py case
 * "initall"): grouped float32 AllReduces from one thread, once on streams of
 * their own and once on each device's legacy default stream (NULL, which
 * names the current device's stream: the checks must be enqueued with the
 * communicator's device current), a NaN on device 2 at element 5. The shim
 * writes one trace per device. */
#include <math.h>
#include "../common/trtest.h"

#define NDEV 4
#define N 1000

int main(void)
{
    ncclComm_t comms[NDEV];
    int devs[NDEV] = {0, 1, 2, 3};
    cudaStream_t streams[NDEV];
    float *bufs[NDEV], *outs[NDEV];
    static float h[N];
    NCCLCHECK(ncclCommInitAll(comms, NDEV, devs));
    for (int d = 0; d < NDEV; d++) {
        CUDACHECK(cudaSetDevice(d));
        CUDACHECK(cudaStreamCreate(&streams[d]));
        for (int i = 0; i < N; i++) h[i] = d == 2 && i == 5 ? NAN : 1.0f;
        CUDACHECK(cudaMalloc((void **)&bufs[d], N * sizeof(float)));
        CUDACHECK(cudaMalloc((void **)&outs[d], N * sizeof(float)));
        CUDACHECK(cudaMemcpy(bufs[d], h, sizeof h, cudaMemcpyHostToDevice));
    }
    for (int round = 0; round < 2; round++) {
        NCCLCHECK(ncclGroupStart());
        for (int d = 0; d < NDEV; d++) {
            CUDACHECK(cudaSetDevice(d));
            NCCLCHECK(ncclAllReduce(bufs[d], outs[d], N, ncclFloat32, ncclSum, comms[d],
                                    round == 0 ? streams[d] : NULL));
        }
        CUDACHECK(cudaSetDevice(0));     /* another device is current at GroupEnd */
        NCCLCHECK(ncclGroupEnd());
    }
    for (int d = 0; d < NDEV; d++) {
        CUDACHECK(cudaSetDevice(d));
        CUDACHECK(cudaDeviceSynchronize());
    }
    for (int d = 0; d < NDEV; d++) NCCLCHECK(ncclCommDestroy(comms[d]));
    printf("nan_initall: ok\n");
    return 0;
}
