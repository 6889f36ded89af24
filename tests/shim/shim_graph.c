/* A 4-rank job that captures its collectives into a CUDA graph once and
 * replays it (test_graphs.py). Each rank has the world communicator and a
 * pair communicator (ranks {0,1} and {2,3}); the graph holds, in capture
 * order:
 *   AllReduce  world  1024 float32 sum   (sendA -> recvA)
 *   AllReduce  world    16 float32 max   (sendB -> recvB)
 *   Broadcast  pair     64 int32 root 0  (sendC -> recvC)
 *   group { Send world 32 float32 to rank+1, Recv world 32 float32 from rank-1 }
 * shim_graph MODE REPLAYS:
 *   clean      every rank replays REPLAYS times; after every 250th replay an
 *              eager AllReduce world 8 float32; the first 10 launches go
 *              through cuGraphLaunch from cudaGetDriverEntryPointByVersion; results
 *              checked after each synchronization; exits 0
 *   fewer      rank 3 replays once fewer, then waits (a host stall): the
 *              others' last replay never completes
 *   other      rank 1 captured AllGather instead of the second AllReduce
 *   interleave rank 2 issues the eager AllReduce of step 5 before its 5th
 *              replay, the others after it
 * Hung modes create $TRSHIM_TEST_MARKERS/ready.<rank> when they reach the
 * end of their loop, then sleep until killed. */
#include <cuda.h>
#include <fcntl.h>
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))

static int rank, world;

typedef struct {
    float *sendA, *recvA, *sendB, *recvB, *sendD, *recvD, *eager;
    int32_t *sendC, *recvC;
} bufs;

static void *dev_fill(size_t bytes, const void *host)
{
    void *p;
    CUDACHECK(cudaMalloc(&p, bytes));
    CUDACHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    return p;
}

static void make_bufs(bufs *b)
{
    float fa[1024], fb[16], fd[32], fe[8];
    int32_t ic[64];
    for (int i = 0; i < 1024; i++) fa[i] = (float)(rank + 1) * (float)(i % 7);
    for (int i = 0; i < 16; i++) fb[i] = (float)(rank * 10 + i);
    for (int i = 0; i < 32; i++) fd[i] = (float)(rank * 100 + i);
    for (int i = 0; i < 8; i++) fe[i] = 1.0f;
    for (int i = 0; i < 64; i++) ic[i] = rank * 1000 + i;
    b->sendA = dev_fill(sizeof fa, fa);
    b->sendB = dev_fill(sizeof fb, fb);
    b->sendC = dev_fill(sizeof ic, ic);
    b->sendD = dev_fill(sizeof fd, fd);
    b->eager = dev_fill(sizeof fe, fe);
    CUDACHECK(cudaMalloc((void **)&b->recvA, 4 * sizeof fa));   /* AllGather (mode other) needs 4 x */
    CUDACHECK(cudaMalloc((void **)&b->recvB, 4 * sizeof fb));
    CUDACHECK(cudaMalloc((void **)&b->recvC, sizeof ic));
    CUDACHECK(cudaMalloc((void **)&b->recvD, sizeof fd));
}

/* the replay's results, as every replay must leave them */
static void check_results(const bufs *b, cudaStream_t s, int step)
{
    float fa[1024], fb[16], fd[32];
    int32_t ic[64];
    CUDACHECK(cudaStreamSynchronize(s));
    CUDACHECK(cudaMemcpy(fa, b->recvA, sizeof fa, cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(fb, b->recvB, sizeof fb, cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(ic, b->recvC, sizeof ic, cudaMemcpyDeviceToHost));
    CUDACHECK(cudaMemcpy(fd, b->recvD, sizeof fd, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 1024; i++) EXPECT(fa[i] == 10.0f * (float)(i % 7), "step %d recvA[%d] = %g", step, i, fa[i]);
    for (int i = 0; i < 16; i++) EXPECT(fb[i] == (float)(30 + i), "step %d recvB[%d] = %g", step, i, fb[i]);
    int root = rank / 2 * 2;
    for (int i = 0; i < 64; i++) EXPECT(ic[i] == root * 1000 + i, "step %d recvC[%d] = %d", step, i, ic[i]);
    int from = (rank + world - 1) % world;
    for (int i = 0; i < 32; i++) EXPECT(fd[i] == (float)(from * 100 + i), "step %d recvD[%d] = %g", step, i, fd[i]);
}

NOINLINE cudaGraphExec_t capture_step(const bufs *b, ncclComm_t wc, ncclComm_t pc, cudaStream_t s, int gather)
{
    cudaGraph_t g;
    cudaGraphExec_t e;
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    NCCLCHECK(ncclAllReduce(b->sendA, b->recvA, 1024, ncclFloat32, ncclSum, wc, s));
    if (gather) NCCLCHECK(ncclAllGather(b->sendB, b->recvB, 16, ncclFloat32, wc, s));
    else NCCLCHECK(ncclAllReduce(b->sendB, b->recvB, 16, ncclFloat32, ncclMax, wc, s));
    NCCLCHECK(ncclBroadcast(b->sendC, b->recvC, 64, ncclInt32, 0, pc, s));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(b->sendD, 32, ncclFloat32, (rank + 1) % world, wc, s));
    NCCLCHECK(ncclRecv(b->recvD, 32, ncclFloat32, (rank + world - 1) % world, wc, s));
    NCCLCHECK(ncclGroupEnd());
    CUDACHECK(cudaStreamEndCapture(s, &g));
    CUDACHECK(cudaGraphInstantiate(&e, g, 0));
    CUDACHECK(cudaGraphDestroy(g));   /* the executable graph lives on */
    return e;
}

NOINLINE void eager_step(const bufs *b, ncclComm_t wc, cudaStream_t s)
{
    NCCLCHECK(ncclAllReduce(b->eager, b->eager, 8, ncclFloat32, ncclMax, wc, s));
}

typedef CUresult (*fn_cuGraphLaunch)(CUgraphExec, CUstream);

/* eager_at: one more eager AllReduce at that replay, before it (before = 1) or after */
NOINLINE void train_loop(const bufs *b, cudaGraphExec_t e, ncclComm_t wc, cudaStream_t s, int replays,
                         int eager_at, int before)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CUDACHECK(cudaGetDriverEntryPointByVersion("cuGraphLaunch", &fn, 12000, cudaEnableDefault, &q));
    EXPECT(fn != NULL, "cuGraphLaunch from the entry point");
    for (int i = 1; i <= replays; i++) {
        if (i == eager_at && before) eager_step(b, wc, s);
        if (i <= 10) EXPECT(((fn_cuGraphLaunch)fn)((CUgraphExec)e, (CUstream)s) == CUDA_SUCCESS, "cuGraphLaunch");
        else CUDACHECK(cudaGraphLaunch(e, s));
        if (i == eager_at && !before) eager_step(b, wc, s);
        if (i % 250 == 0) {
            eager_step(b, wc, s);
            check_results(b, s, i);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) FAIL("usage: shim_graph clean|fewer|other|interleave REPLAYS");
    const char *mode = argv[1];
    int replays = atoi(argv[2]);
    rank = trtest_env_int("RANK", -1);
    world = trtest_env_int("WORLD_SIZE", -1);
    trtest_rank = rank;
    if (world != 4) FAIL("run with 4 ranks");
    CUDACHECK(cudaSetDevice(rank));
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "world");
    ncclComm_t wc, pc;
    NCCLCHECK(ncclCommInitRank(&wc, world, id, rank));
    NCCLCHECK(ncclCommSplit(wc, rank / 2, rank, &pc, NULL));
    cudaStream_t s;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    bufs b;
    make_bufs(&b);

    int fewer = !strcmp(mode, "fewer"), other = !strcmp(mode, "other"), inter = !strcmp(mode, "interleave");
    if (!fewer && !other && !inter && strcmp(mode, "clean")) FAIL("unknown mode %s", mode);
    cudaGraphExec_t e = capture_step(&b, wc, pc, s, other && rank == 1);
    int n = fewer && rank == 3 ? replays - 1 : replays;
    /* interleave: the eager AllReduce of replay 5 comes after it, on rank 2 before it */
    train_loop(&b, e, wc, s, n, inter ? 5 : -1, rank == 2);
    if (fewer || other || inter) {
        char m[32];
        snprintf(m, sizeof m, "ready.%d", rank);
        trtest_marker(m);
        for (;;) trtest_sleep_ms(1000);
    }
    CUDACHECK(cudaStreamSynchronize(s));
    check_results(&b, s, replays);
    CUDACHECK(cudaGraphExecDestroy(e));
    NCCLCHECK(ncclCommDestroy(pc));
    NCCLCHECK(ncclCommDestroy(wc));
    printf("rank %d: %d replays ok\n", rank, replays);
    return 0;
}
