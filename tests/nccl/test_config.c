/* The *Config collectives (NCCL 2.31): each gives exactly what its plain
 * collective gives and is the same collective on the wire: all ranks plain,
 * all Config (a config, or NULL), and ranks mixing the two for the same
 * collective (even ranks plain, odd ranks Config), alone and inside a
 * group. A config with a wrong magic or too small a size is
 * ncclInvalidArgument with NCCL's ncclGetLastError text; inside a group it
 * fails the group, which then launches and numbers nothing: a rank that
 * alone issued that group still matches its peers' next collective. */
#include "nccl232.h"

enum { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER, NKINDS };
static const char *const names[] = {"AllReduce", "Broadcast", "Reduce", "AllGather",
                                    "ReduceScatter", "AlltoAll", "Gather", "Scatter"};

#define N 500                   /* elements per rank and block */

static int rank, world;
static ncclComm_t comm;
static cudaStream_t stream;
static int32_t *sendbuf, *recvbuf;

static int root_of(int kind)
{
    return kind == BROADCAST ? world - 1 : kind == GATHER ? 1 % world : 0;
}

/* what rank r sends at element j */
static int32_t input(int kind, int r, size_t j)
{
    switch (kind) {
    case ALLTOALL: return r * 100000 + (int32_t)j;          /* j = block * N + i */
    case SCATTER: return (int32_t)j + 7;
    default: return r * 1000 + (int32_t)j;
    }
}

static int32_t my_input(size_t j, int kind)
{
    return input(kind, rank, j);
}

/* what this rank receives at element j */
static int32_t expected(size_t j, int kind)
{
    int32_t acc = 0;
    switch (kind) {
    case ALLREDUCE: case REDUCE:
        for (int q = 0; q < world; q++) acc += input(kind, q, j);
        return acc;
    case REDUCESCATTER:
        for (int q = 0; q < world; q++) acc += input(kind, q, (size_t)rank * N + j);
        return acc;
    case BROADCAST: return input(kind, root_of(kind), j);
    case ALLGATHER: case GATHER: return input(kind, (int)(j / N), j % N);
    case ALLTOALL: return input(kind, (int)(j / N), (size_t)rank * N + j % N);
    case SCATTER: return input(kind, 0, (size_t)rank * N + j);
    }
    return 0;
}

static size_t send_count(int kind)
{
    return kind == REDUCESCATTER || kind == ALLTOALL || kind == SCATTER ? (size_t)world * N : N;
}

static size_t recv_count(int kind)
{
    return kind == ALLGATHER || kind == ALLTOALL || kind == GATHER ? (size_t)world * N : N;
}

/* issues collective kind, plain or through its Config entry */
static ncclResult_t coll(int kind, int use_config, const ncclCollConfig_t *cfg)
{
    const void *s = sendbuf;
    void *r = recvbuf;
    int root = root_of(kind);
/* ncclX(args, comm, stream) or ncclXConfig(args, comm, stream, cfg) */
#define CALL(fn, ...) (use_config ? fn##Config(__VA_ARGS__, comm, stream, cfg) : fn(__VA_ARGS__, comm, stream))
    switch (kind) {
    case ALLREDUCE: return CALL(ncclAllReduce, s, r, N, ncclInt32, ncclSum);
    case BROADCAST: return CALL(ncclBroadcast, s, r, N, ncclInt32, root);
    case REDUCE: return CALL(ncclReduce, s, r, N, ncclInt32, ncclSum, root);
    case ALLGATHER: return CALL(ncclAllGather, s, r, N, ncclInt32);
    case REDUCESCATTER: return CALL(ncclReduceScatter, s, r, N, ncclInt32, ncclSum);
    case ALLTOALL: return CALL(ncclAlltoAll, s, r, N, ncclInt32);
    case GATHER: return CALL(ncclGather, s, r, N, ncclInt32, root);
    case SCATTER: return CALL(ncclScatter, s, r, N, ncclInt32, root);
    }
#undef CALL
    return ncclInternalError;
}

static int receives(int kind)
{
    return !((kind == REDUCE || kind == GATHER) && rank != root_of(kind));
}

static void prepare(int kind)
{
    test_put_ints(sendbuf, send_count(kind), my_input, kind);
    CUDACHECK(cudaMemset(recvbuf, 0xff, (size_t)world * N * sizeof(int32_t)));
}

static void verify(int kind, const char *how)
{
    CUDACHECK(cudaStreamSynchronize(stream));
    if (!receives(kind)) return;
    char what[128];
    snprintf(what, sizeof what, "%s %s", names[kind], how);
    test_expect_ints(recvbuf, recv_count(kind), expected, kind, what);
}

int main(void)
{
    comm = trtest_world_comm(&rank, &world, "config");
    CUDACHECK(cudaStreamCreate(&stream));
    sendbuf = test_dev_ints((size_t)world * N);
    recvbuf = test_dev_ints((size_t)world * N);
    ncclCollConfig_t cfg = TEST_COLLCONFIG_INITIALIZER;
    cfg.minCTAs = 1;
    cfg.maxCTAs = 4;
    cfg.algSelection = "RING";
    cfg.userProfilerTag = 42;

    for (int kind = 0; kind < NKINDS; kind++) {
        prepare(kind);
        NCCLCHECK(coll(kind, 0, NULL));
        verify(kind, "plain");
        prepare(kind);
        NCCLCHECK(coll(kind, 1, &cfg));
        verify(kind, "Config");
        prepare(kind);
        NCCLCHECK(coll(kind, 1, NULL));
        verify(kind, "Config(NULL)");
        /* the same collective, plain on even ranks and Config on odd ones */
        prepare(kind);
        NCCLCHECK(coll(kind, rank % 2, &cfg));
        verify(kind, "mixed plain/Config");
        /* inside a group, mixed the other way round */
        prepare(kind);
        NCCLCHECK(ncclGroupStart());
        NCCLCHECK(coll(kind, rank % 2 == 0, rank % 4 == 1 ? NULL : &cfg));
        NCCLCHECK(ncclGroupEnd());
        verify(kind, "mixed in a group");
    }

    /* a launch-completion event is recorded on the stream */
    cudaEvent_t ev;
    CUDACHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    ncclCollConfig_t with_event = cfg;
    with_event.launchCompletionEvent = ev;
    prepare(ALLREDUCE);
    NCCLCHECK(coll(ALLREDUCE, 1, &with_event));
    CUDACHECK(cudaEventSynchronize(ev));
    verify(ALLREDUCE, "Config with launchCompletionEvent");
    CUDACHECK(cudaEventDestroy(ev));

    /* bad configs, as NCCL reports them */
    ncclCollConfig_t bad = cfg;
    bad.magic = 0x12345678;
    for (int kind = 0; kind < NKINDS; kind++) {
        EXPECT(coll(kind, 1, &bad) == ncclInvalidArgument, "%sConfig with a bad magic", names[kind]);
        EXPECT(strstr(ncclGetLastError(NULL), "magic mismatch") != NULL, "last error: %s", ncclGetLastError(NULL));
    }
    bad = cfg;
    bad.size = offsetof(ncclCollConfig_t, userProfilerTag);   /* older than any ncclCollConfig_t */
    EXPECT(coll(ALLGATHER, 1, &bad) == ncclInvalidArgument, "AllGatherConfig with a small size");
    EXPECT(strstr(ncclGetLastError(NULL), "too small") != NULL, "last error: %s", ncclGetLastError(NULL));
    bad = cfg;
    bad.size = offsetof(ncclCollConfig_t, launchCompletionEvent);   /* 2.31's: fine */
    prepare(ALLGATHER);
    NCCLCHECK(coll(ALLGATHER, 1, &bad));
    verify(ALLGATHER, "Config of 2.31's size");

    /* Rank 0 alone issues a group with a valid AllReduce and a bad config:
     * the group fails and launches nothing, so everyone's next collective
     * still matches (else it would hang). */
    if (rank == 0) {
        bad = cfg;
        bad.magic = 0;
        prepare(ALLREDUCE);
        NCCLCHECK(ncclGroupStart());
        NCCLCHECK(ncclAllReduce(sendbuf, recvbuf, 7, ncclInt32, ncclSum, comm, stream));
        EXPECT(ncclReduceConfig(sendbuf, recvbuf, N, ncclInt32, ncclSum, 0, comm, stream, &bad) ==
                   ncclInvalidArgument, "ReduceConfig with a bad magic in a group");
        EXPECT(ncclGroupEnd() == ncclInvalidArgument, "a group with a bad config fails");
    }
    prepare(BROADCAST);
    NCCLCHECK(coll(BROADCAST, 1, &cfg));
    verify(BROADCAST, "after a failed group");

    NCCLCHECK(ncclCommDestroy(comm));
    if (rank == 0) printf("Config collectives on %d ranks: ok\n", world);
    return 0;
}
