/* The NCCL 2.29-2.32 calls under the shim (test_shim.py case "nccl232"),
 * 4 ranks under trsim-launch, every call known in advance:
 *   world: AllReduce, then every *Config collective (one config with
 *   maxCTAs 4, algSelection "ring", profiler tag 7; one NULL config; one
 *   unset), so *Config calls take the plain ones' sequence numbers (1-11);
 *   one-sided: PutSignal and Signal to the next rank, one WaitSignal for
 *   both from the previous one;
 *   an AllReduce (12) once the signals arrived;
 *   a group of an AllReduce and a Send/Recv ended by ncclGroupSimulateEnd:
 *   nothing issued, so the next AllReduce is seq 13 and the Send/Recv
 *   numbers are not taken;
 *   Suspend / Resume of world;
 *   Grow: ranks 0 and 1 make "pair", grown to 4 with ranks 2 and 3 joining
 *   through rank 0's ncclCommGetUniqueId; one AllReduce on it.
 * Each call comes from a named function so the checker can assert the site. */
#define TRTEST_NCCL_ABI
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))
#define N 64

static int rank, world;
static cudaStream_t stream;
static float *buf, *buf2;
static ncclComm_t wcomm, pair, grown;

NOINLINE void n232_configs(void)
{
    ncclCollConfig_t cfg = {sizeof cfg, NCCL_API_MAGIC, 23203, NULL, 0, 0, 0, 0, NULL, 1, 0, 0, NULL};
    cfg.minCTAs = cfg.nvlsCTAs = cfg.cgaClusterSize = cfg.CTAPolicy = NCCL_CONFIG_UNDEF_INT;
    cfg.maxCTAs = 4;
    cfg.algSelection = "ring";
    cfg.userProfilerTag = 7;
    ncclCollConfig_t unset = {sizeof unset, NCCL_API_MAGIC, 23203, NULL, NCCL_CONFIG_UNDEF_INT,
                              NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL, 1,
                              NCCL_CONFIG_UNDEF_INT, 0, NULL};
    NCCLCHECK(ncclAllReduce(buf, buf2, N, ncclFloat32, ncclSum, wcomm, stream));                        /* 1 */
    NCCLCHECK(ncclAllReduceConfig(buf, buf2, N, ncclFloat32, ncclSum, wcomm, stream, &cfg));            /* 2 */
    NCCLCHECK(ncclAllReduceConfig(buf, buf2, N, ncclFloat32, ncclMax, wcomm, stream, NULL));            /* 3 */
    NCCLCHECK(ncclBroadcastConfig(buf, buf2, N, ncclFloat32, 1, wcomm, stream, &cfg));                  /* 4 */
    NCCLCHECK(ncclReduceConfig(buf, buf2, N, ncclFloat32, ncclSum, 2, wcomm, stream, &unset));          /* 5 */
    NCCLCHECK(ncclAllGatherConfig(buf, buf2, N / 4, ncclFloat32, wcomm, stream, &cfg));                 /* 6 */
    NCCLCHECK(ncclReduceScatterConfig(buf, buf2, N / 4, ncclFloat32, ncclSum, wcomm, stream, &cfg));    /* 7 */
    NCCLCHECK(ncclAlltoAllConfig(buf, buf2, N / 4, ncclFloat32, wcomm, stream, &cfg));                  /* 8 */
    NCCLCHECK(ncclGatherConfig(buf, buf2, N / 4, ncclFloat32, 3, wcomm, stream, &cfg));                 /* 9 */
    NCCLCHECK(ncclScatterConfig(buf, buf2, N / 4, ncclFloat32, 0, wcomm, stream, &cfg));                /* 10 */
    NCCLCHECK(ncclAllReduce(buf, buf2, N, ncclFloat32, ncclSum, wcomm, stream));                        /* 11 */
    CUDACHECK(cudaStreamSynchronize(stream));
}

NOINLINE void n232_signals(void)
{
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    ncclWindow_t win;
    float *wbuf, got[8];
    /* a symmetric window in ncclMemAlloc memory: the source of a put lies in one too */
    NCCLCHECK(ncclMemAlloc((void **)&wbuf, 4096));
    CUDACHECK(cudaMemset(wbuf, 0, 4096));
    CUDACHECK(cudaMemcpy(wbuf, buf, 8 * sizeof(float), cudaMemcpyDeviceToDevice));
    NCCLCHECK(ncclCommWindowRegister(wcomm, wbuf, 4096, &win, NCCL_WIN_COLL_SYMMETRIC));
    NCCLCHECK(ncclPutSignal(wbuf, 8, ncclFloat32, next, win, 256, 0, 0, 0, wcomm, stream));
    NCCLCHECK(ncclSignal(next, 0, 0, 0, wcomm, stream));
    ncclWaitSignalDesc_t d = {2, prev, 0, 0};
    NCCLCHECK(ncclWaitSignal(1, &d, wcomm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    CUDACHECK(cudaMemcpy(got, wbuf + 64, sizeof got, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 8; i++) EXPECT(got[i] == 1.0f, "window element %d is %g after the wait", i, (double)got[i]);
    /* every rank's window is written before any deregisters it */
    NCCLCHECK(ncclAllReduce(buf, buf2 + N / 2, 1, ncclFloat32, ncclSum, wcomm, stream));               /* 12 */
    CUDACHECK(cudaStreamSynchronize(stream));
    NCCLCHECK(ncclCommWindowDeregister(wcomm, win));
    NCCLCHECK(ncclMemFree(wbuf));
}

NOINLINE void n232_simulate(void)
{
    ncclSimInfo_t info = {sizeof info, 0x74685283, 23203, -1.0f};
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(buf, buf2, N, ncclFloat32, ncclSum, wcomm, stream));
    NCCLCHECK(ncclSend(buf, 4, ncclFloat32, (rank + 1) % world, wcomm, stream));
    NCCLCHECK(ncclRecv(buf2, 4, ncclFloat32, (rank + world - 1) % world, wcomm, stream));
    NCCLCHECK(ncclGroupSimulateEnd(&info));
    EXPECT(info.estimatedTime > 0, "estimated time %g", (double)info.estimatedTime);
    NCCLCHECK(ncclAllReduce(buf, buf2, N, ncclFloat32, ncclSum, wcomm, stream));                        /* 13 */
    CUDACHECK(cudaStreamSynchronize(stream));
}

NOINLINE void n232_suspend(void)
{
    NCCLCHECK(ncclCommSuspend(wcomm, NCCL_SUSPEND_MEM));
    NCCLCHECK(ncclCommResume(wcomm));
}

NOINLINE void n232_grow(void)
{
    ncclUniqueId id;
    if (rank < 2) {
        trtest_exchange_id(&id, rank == 0, "pair");
        NCCLCHECK(ncclCommInitRank(&pair, 2, id, rank));
        NCCLCHECK(ncclAllReduce(buf, buf2, N, ncclFloat32, ncclSum, pair, stream));
        if (rank == 0) NCCLCHECK(ncclCommGetUniqueId(pair, &id));
        if (rank == 0) trtest_exchange_id(&id, 2, "grow");
        NCCLCHECK(ncclCommGrow(pair, 4, rank == 0 ? &id : NULL, -1, &grown, NULL));
    } else {
        trtest_exchange_id(&id, 0, "grow");
        NCCLCHECK(ncclCommGrow(NULL, 4, &id, rank, &grown, NULL));
    }
    NCCLCHECK(ncclAllReduce(buf, buf2, N, ncclFloat32, ncclSum, grown, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    for (int i = 0; i < N; i++) EXPECT(buf2[i] == 4.0f, "grown AllReduce element %d is %g", i, (double)buf2[i]);
}

int main(void)
{
    trtest_init(&rank, &world);
    if (world != 4) FAIL("run with 4 ranks");
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaMalloc((void **)&buf, N * sizeof(float)));
    CUDACHECK(cudaMalloc((void **)&buf2, N * sizeof(float)));
    float ones[N];
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    CUDACHECK(cudaMemcpy(buf, ones, sizeof ones, cudaMemcpyHostToDevice));
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "world");
    NCCLCHECK(ncclCommInitRank(&wcomm, world, id, rank));
    n232_configs();
    n232_signals();
    n232_simulate();
    n232_suspend();
    n232_grow();
    NCCLCHECK(ncclCommDestroy(grown));
    if (pair) NCCLCHECK(ncclCommDestroy(pair));
    NCCLCHECK(ncclCommDestroy(wcomm));
    printf("rank %d ok\n", rank);
    return 0;
}
