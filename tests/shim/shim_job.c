/* A multi-rank job under the shim whose every NCCL call test_shim.py knows
 * in advance (case "job"): every collective, failed calls, splits (nested,
 * NOCOLOR), a send/recv pipeline, groups (nested too), two threads with a
 * communicator each, a non-blocking communicator, a shrink.
 *
 * Each call is issued from a named function (noinline, not static) so the
 * checker can assert the call site's symbol; keep test_shim.py's JOB model
 * in step with this file. */
#include <pthread.h>
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))
#define THREAD_CALLS 40

static int rank, world, device;
static cudaStream_t stream;
static char *buf, *buf2;
static ncclComm_t world_comm, half, rest, quarter, tcomm[2];

NOINLINE void job_init_world(void)
{
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "world");
    NCCLCHECK(ncclCommInitRank(&world_comm, world, id, rank));
}

NOINLINE void job_collectives(void)
{
    ncclComm_t c = world_comm;
    NCCLCHECK(ncclAllReduce(buf, buf2, 100, ncclFloat32, ncclSum, c, stream));
    NCCLCHECK(ncclBroadcast(buf, buf2, 50, ncclInt32, 1, c, stream));
    NCCLCHECK(ncclBcast(buf, 10, ncclUint8, 0, c, stream));
    NCCLCHECK(ncclReduce(buf, buf2, 20, ncclFloat64, ncclMax, world - 1, c, stream));
    NCCLCHECK(ncclAllGather(buf, buf2, 8, ncclBfloat16, c, stream));
    NCCLCHECK(ncclReduceScatter(buf, buf2, 4, ncclFloat16, ncclMin, c, stream));
    NCCLCHECK(ncclAlltoAll(buf, buf2, 3, ncclInt64, c, stream));
    NCCLCHECK(ncclGather(buf, buf2, 5, ncclUint32, 2 % world, c, stream));
    NCCLCHECK(ncclScatter(buf, buf2, 6, ncclInt8, 0, c, stream));
    NCCLCHECK(ncclAllReduce(buf, buf, 1, ncclInt32, ncclProd, c, stream));
    NCCLCHECK(ncclAllReduce(buf, buf, 7, ncclFloat32, ncclAvg, c, stream));
    ncclRedOp_t pm;
    float scale = 0.5f;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&pm, &scale, ncclFloat32, ncclScalarHostImmediate, c));
    NCCLCHECK(ncclAllReduce(buf, buf, 9, ncclFloat32, pm, c, stream));
    NCCLCHECK(ncclRedOpDestroy(pm, c));
    NCCLCHECK(ncclAllReduce(buf, buf, 2, ncclFloat8e4m3, ncclMax, c, stream));
    NCCLCHECK(ncclAllReduce(buf, buf, 2, ncclUint64, ncclMin, c, stream));
}

/* failed calls are not numbered */
NOINLINE void job_bad_calls(void)
{
    ncclResult_t r = ncclBroadcast(buf, buf, 1, ncclInt32, world, world_comm, stream);
    EXPECT(r == ncclInvalidArgument, "bad root gave %d", r);
    r = ncclAllReduce(buf, buf, 1, (ncclDataType_t)12, ncclSum, world_comm, stream);
    EXPECT(r == ncclInvalidArgument, "bad datatype gave %d", r);
    NCCLCHECK(ncclAllReduce(buf, buf, 3, ncclInt32, ncclSum, world_comm, stream));
}

NOINLINE void job_splits(void)
{
    NCCLCHECK(ncclCommSplit(world_comm, rank % 2, rank, &half, NULL));
    NCCLCHECK(ncclCommSplit(world_comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 5, 0, &rest, NULL));
    NCCLCHECK(ncclCommSplit(half, (rank / 2) % 2, 0, &quarter, NULL));
    NCCLCHECK(ncclAllReduce(buf, buf, 11, ncclFloat32, ncclSum, half, stream));
    NCCLCHECK(ncclAllReduce(buf, buf, 12, ncclFloat32, ncclSum, half, stream));
    NCCLCHECK(ncclAllReduce(buf, buf, 13, ncclFloat32, ncclSum, world_comm, stream));
    NCCLCHECK(ncclAllReduce(buf, buf, 14, ncclFloat32, ncclSum, quarter, stream));
    if (rest) NCCLCHECK(ncclAllReduce(buf, buf, 15, ncclFloat32, ncclSum, rest, stream));
}

/* three micro-batches down a pipeline of ranks */
NOINLINE void job_pipeline(void)
{
    for (int mb = 0; mb < 3; mb++) {
        if (rank > 0) NCCLCHECK(ncclRecv(buf2, 16, ncclFloat32, rank - 1, world_comm, stream));
        if (rank < world - 1) NCCLCHECK(ncclSend(buf, 16, ncclFloat32, rank + 1, world_comm, stream));
    }
}

NOINLINE void job_groups(void)
{
    int next = (rank + 1) % world, prev = (rank - 1 + world) % world;
    /* group 1: a ring exchange */
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(buf, 4, ncclInt32, next, world_comm, stream));
    NCCLCHECK(ncclRecv(buf2, 4, ncclInt32, prev, world_comm, stream));
    NCCLCHECK(ncclGroupEnd());
    /* group 2: collectives of two communicators */
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(buf, buf, 21, ncclInt32, ncclSum, world_comm, stream));
    NCCLCHECK(ncclAllReduce(buf2, buf2, 22, ncclInt32, ncclSum, half, stream));
    NCCLCHECK(ncclGroupEnd());
    /* group 3: nested */
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(buf, buf, 23, ncclInt32, ncclSum, world_comm, stream));
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclSend(buf, 5, ncclInt32, next, world_comm, stream));
    NCCLCHECK(ncclRecv(buf2, 5, ncclInt32, prev, world_comm, stream));
    NCCLCHECK(ncclGroupEnd());
}

/* groups 4 and 5: both directions with one peer (sends and receives are
 * numbered apart) */
NOINLINE void job_exchange(void)
{
    int partner = rank ^ 1;
    for (int k = 0; k < 2; k++) {
        NCCLCHECK(ncclGroupStart());
        NCCLCHECK(ncclSend(buf, 6, ncclUint8, partner, world_comm, stream));
        NCCLCHECK(ncclRecv(buf2, 6, ncclUint8, partner, world_comm, stream));
        NCCLCHECK(ncclGroupEnd());
    }
}

NOINLINE void *job_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    cudaStream_t s;
    char *b;
    CUDACHECK(cudaSetDevice(device));
    CUDACHECK(cudaStreamCreate(&s));
    CUDACHECK(cudaMalloc((void **)&b, 4096));
    for (int i = 0; i < THREAD_CALLS; i++)
        NCCLCHECK(ncclAllReduce(b, b, (size_t)(100 * (t + 1) + i), ncclUint8, ncclMax, tcomm[t], s));
    CUDACHECK(cudaStreamSynchronize(s));
    CUDACHECK(cudaFree(b));
    CUDACHECK(cudaStreamDestroy(s));
    return NULL;
}

NOINLINE void job_threads(void)
{
    NCCLCHECK(ncclCommSplit(world_comm, 0, rank, &tcomm[0], NULL));
    NCCLCHECK(ncclCommSplit(world_comm, 0, rank, &tcomm[1], NULL));
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        if (pthread_create(&th[t], NULL, job_thread, (void *)(intptr_t)t) != 0) FAIL("pthread_create");
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
}

static void wait_ready(ncclComm_t comm)
{
    ncclResult_t state;
    do NCCLCHECK(ncclCommGetAsyncError(comm, &state)); while (state == ncclInProgress);
    if (state != ncclSuccess) FAIL("non-blocking communicator: %s", ncclGetErrorString(state));
}

NOINLINE void job_nonblocking(void)
{
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "nb");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t nb;
    ncclResult_t r = ncclCommInitRankConfig(&nb, world, id, rank, &config);
    EXPECT(r == ncclInProgress, "non-blocking init gave %d", r);
    wait_ready(nb);
    r = ncclAllReduce(buf, buf, 31, ncclFloat32, ncclSum, nb, stream);
    EXPECT(r == ncclInProgress, "collective on a non-blocking communicator gave %d", r);
    wait_ready(nb);
    CUDACHECK(cudaStreamSynchronize(stream));
    NCCLCHECK(ncclCommDestroy(nb));
}

NOINLINE void job_shrink(void)
{
    if (rank == world - 1) return;    /* excluded: takes no part */
    int excl = world - 1;
    ncclComm_t shrunk;
    NCCLCHECK(ncclCommShrink(world_comm, &excl, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
    NCCLCHECK(ncclAllReduce(buf, buf, 41, ncclFloat32, ncclSum, shrunk, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    NCCLCHECK(ncclCommDestroy(shrunk));
}

NOINLINE void job_teardown(void)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 51, ncclFloat32, ncclSum, world_comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    NCCLCHECK(ncclCommFinalize(world_comm));
    NCCLCHECK(ncclCommDestroy(quarter));
    NCCLCHECK(ncclCommDestroy(half));
    if (rest) NCCLCHECK(ncclCommDestroy(rest));
    NCCLCHECK(ncclCommDestroy(tcomm[0]));
    NCCLCHECK(ncclCommDestroy(tcomm[1]));
    NCCLCHECK(ncclCommDestroy(world_comm));
}

int main(void)
{
    trtest_init(&rank, &world);
    CUDACHECK(cudaGetDevice(&device));
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaMalloc((void **)&buf, 1 << 20));
    CUDACHECK(cudaMalloc((void **)&buf2, 1 << 20));
    CUDACHECK(cudaMemset(buf, 0, 1 << 20));
    CUDACHECK(cudaMemset(buf2, 0, 1 << 20));
    job_init_world();
    job_collectives();
    job_bad_calls();
    job_splits();
    job_pipeline();
    job_groups();
    job_exchange();
    job_threads();
    job_nonblocking();
    job_shrink();
    job_teardown();
    CUDACHECK(cudaFree(buf));
    CUDACHECK(cudaFree(buf2));
    if (rank == 0) printf("shim job on %d ranks: ok\n", world);
    return 0;
}
