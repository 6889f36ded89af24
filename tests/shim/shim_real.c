/* Linked against the real libcudart and libnccl of the machine (test_shim.py
 * case "real"; tests/nccl/check_versions.py runs it against every real
 * libnccl it finds): run with and without the shim alone in front of them,
 * on a machine with or without a GPU, it must print the same thing. Each
 * line is a call's return code and the thread's CUDA error state after it.
 * Only calls that need no GPU and no network are made. Functions newer than
 * the header it is built with (NCCL 2.29-2.32) are looked up in the loaded
 * libnccl by name ("absent" when it lacks them), as ctypes would. */
#include <dlfcn.h>
#include <stdio.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define SAY(what, r) printf("%-14s rc %d  peek %d\n", what, (int)(r), (int)cudaPeekAtLastError())

/* the 2.29-2.32 functions, declared here as the loaded library defines them */
typedef ncclResult_t (*allreduce_config_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                            cudaStream_t, const void *);
typedef ncclResult_t (*putsignal_fn)(const void *, size_t, ncclDataType_t, int, void *, size_t, int, int,
                                     unsigned int, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*signal_fn)(int, int, int, unsigned int, ncclComm_t, cudaStream_t);
typedef struct { int opCnt, peer, sigIdx, ctx; } wait_desc;
typedef ncclResult_t (*waitsignal_fn)(int, wait_desc *, ncclComm_t, cudaStream_t);
typedef struct { size_t size; unsigned int magic, version; float estimatedTime; } sim_info;
typedef ncclResult_t (*simulate_fn)(sim_info *);
typedef ncclResult_t (*comm_fn)(ncclComm_t);
typedef ncclResult_t (*suspend_fn)(ncclComm_t, int);

static void *newer(const char *name)
{
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    void *f = h ? dlsym(h, name) : NULL;
    if (!f) printf("%s absent\n", name);
    if (h) dlclose(h);
    return f;
}

static void newer_calls(void)
{
    allreduce_config_fn arc = (allreduce_config_fn)newer("ncclAllReduceConfig");
    if (arc) SAY("AllReduce", arc(NULL, NULL, 1, ncclFloat32, ncclSum, NULL, NULL, NULL));
    putsignal_fn ps = (putsignal_fn)newer("ncclPutSignal");
    if (ps) SAY("PutSignal", ps(NULL, 1, ncclFloat32, 0, NULL, 0, 0, 0, 0, NULL, NULL));
    signal_fn sg = (signal_fn)newer("ncclSignal");
    if (sg) SAY("Signal", sg(0, 0, 0, 0, NULL, NULL));
    wait_desc d = {1, 0, 0, 0};
    waitsignal_fn ws = (waitsignal_fn)newer("ncclWaitSignal");
    if (ws) SAY("WaitSignal", ws(1, &d, NULL, NULL));
    sim_info info = {sizeof info, 0x74685283, 23203, -1.0f};
    simulate_fn sim = (simulate_fn)newer("ncclGroupSimulateEnd");
    if (sim) SAY("GroupSimulateEnd", sim(&info));
    suspend_fn sus = (suspend_fn)newer("ncclCommSuspend");
    if (sus) SAY("Suspend", sus(NULL, 1));
    comm_fn res = (comm_fn)newer("ncclCommResume");
    if (res) SAY("Resume", res(NULL));
}

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
    newer_calls();
    if (comms[0]) ncclCommDestroy(comms[0]);     /* a machine with a GPU */
    SAY("Free", cudaFree(p));
    SAY("GetLastError", cudaGetLastError());
    return 0;
}
