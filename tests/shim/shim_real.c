/* Linked against the real libcudart and libnccl of the machine (test_shim.py
 * case "real"): run with and without the shim alone in front of them, on a
 * machine with or without a GPU, it must print the same thing. Each line is
 * a call's return code and the thread's CUDA error state after it. Only
 * calls that need no GPU and no network are made. */
#include <stdio.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define SAY(what, r) printf("%-14s rc %d  peek %d\n", what, (int)(r), (int)cudaPeekAtLastError())

int main(void)
{
    int n = -1, v = 0;
    void *p = NULL;
    ncclComm_t comms[2] = {NULL, NULL};
    SAY("DeviceCount", cudaGetDeviceCount(&n));
    printf("devices %d\n", n);
    SAY("GetLastError", cudaGetLastError());
    SAY("Malloc", cudaMalloc(&p, 1024));
    SAY("GetVersion", ncclGetVersion(&v));
    printf("nccl %d\n", v);
    SAY("GroupStart", ncclGroupStart());
    SAY("AllReduce", ncclAllReduce(NULL, NULL, 1, ncclFloat32, ncclSum, NULL, NULL));
    SAY("Send", ncclSend(NULL, 1, ncclInt32, 0, NULL, NULL));
    SAY("GroupEnd", ncclGroupEnd());
    SAY("GroupEnd", ncclGroupEnd());
    SAY("Bcast", ncclBcast(NULL, 1, ncclInt32, 0, NULL, NULL));
    SAY("Broadcast", ncclBroadcast(NULL, NULL, 1, ncclInt32, 0, NULL, NULL));
    SAY("Reduce", ncclReduce(NULL, NULL, 1, ncclInt32, ncclSum, 0, NULL, NULL));
    SAY("AllGather", ncclAllGather(NULL, NULL, 1, ncclInt32, NULL, NULL));
    SAY("ReduceScatter", ncclReduceScatter(NULL, NULL, 1, ncclInt32, ncclSum, NULL, NULL));
    SAY("AlltoAll", ncclAlltoAll(NULL, NULL, 1, ncclInt32, NULL, NULL));
    SAY("Gather", ncclGather(NULL, NULL, 1, ncclInt32, 0, NULL, NULL));
    SAY("Scatter", ncclScatter(NULL, NULL, 1, ncclInt32, 0, NULL, NULL));
    SAY("Recv", ncclRecv(NULL, 1, ncclInt32, 0, NULL, NULL));
    SAY("InitAll", ncclCommInitAll(comms, 1, NULL));
    SAY("Split", ncclCommSplit(NULL, 0, 0, &comms[1], NULL));
    SAY("Finalize", ncclCommFinalize(NULL));
    SAY("Destroy", ncclCommDestroy(NULL));
    SAY("Abort", ncclCommAbort(NULL));
    SAY("GetLastError", cudaGetLastError());
    if (comms[0]) ncclCommDestroy(comms[0]);     /* a machine with a GPU */
    SAY("Free", cudaFree(p));
    SAY("GetLastError", cudaGetLastError());
    return 0;
}
