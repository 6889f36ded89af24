/* NCCL operations captured into CUDA graphs and replayed: each replay
 * numbers its operations anew, so replays match the peers' exactly as the
 * same calls made eagerly would, and a rank that replays one time fewer
 * leaves its peers hanging, as on GPUs. The captured sequence: inputs
 * copied from pinned memory, an AllReduce on communicator A, a Broadcast on
 * communicator B on a side stream forked from and joined back to the
 * capture stream (as PyTorch's process groups do), a grouped send/recv ring
 * on A, outputs copied back. Modes:
 *   replay  100 replays, each checked exactly; eager AllReduces on A between
 *           some of them; some replays launched from another thread
 *   mixed   the same, and rank 2 makes the calls eagerly instead of
 *           replaying every third time
 *   short   rank 3 replays one time fewer: the others' last replay stays
 *           pending; ncclCommAbort ends it */
#include <pthread.h>
#include "../common/trtest.h"

#define COUNT 1000
#define BYTES (COUNT * sizeof(int32_t))

static int rank, world;
static ncclComm_t comm_a, comm_b;
static cudaStream_t s, side;
static cudaEvent_t fork_ev, join_ev;
static int32_t *h_ar, *h_bc, *h_p2p, *h_ar_out, *h_bc_out, *h_p2p_out;   /* pinned */
static int32_t *d_ar, *d_ar_out, *d_bc, *d_bc_out, *d_p2p, *d_p2p_out, *d_extra;

static int32_t *pinned(void)
{
    void *p;
    CUDACHECK(cudaMallocHost(&p, BYTES));
    return p;
}

static int32_t *device(void)
{
    void *p;
    CUDACHECK(cudaMalloc(&p, BYTES));
    return p;
}

/* The work of one iteration, queued on s (captured or eager). */
static void enqueue_all(void)
{
    CUDACHECK(cudaMemcpyAsync(d_ar, h_ar, BYTES, cudaMemcpyHostToDevice, s));
    CUDACHECK(cudaMemcpyAsync(d_bc, h_bc, BYTES, cudaMemcpyHostToDevice, s));
    CUDACHECK(cudaMemcpyAsync(d_p2p, h_p2p, BYTES, cudaMemcpyHostToDevice, s));
    NCCLCHECK(ncclAllReduce(d_ar, d_ar_out, COUNT, ncclInt32, ncclSum, comm_a, s));
    CUDACHECK(cudaEventRecord(fork_ev, s));
    CUDACHECK(cudaStreamWaitEvent(side, fork_ev, 0));
    NCCLCHECK(ncclBroadcast(d_bc, d_bc_out, COUNT, ncclInt32, 1, comm_b, side));
    CUDACHECK(cudaEventRecord(join_ev, side));
    CUDACHECK(cudaStreamWaitEvent(s, join_ev, 0));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(d_p2p, COUNT, ncclInt32, (rank + 1) % world, comm_a, s));
    NCCLCHECK(ncclRecv(d_p2p_out, COUNT, ncclInt32, (rank + world - 1) % world, comm_a, s));
    NCCLCHECK(ncclGroupEnd());
    CUDACHECK(cudaMemcpyAsync(h_ar_out, d_ar_out, BYTES, cudaMemcpyDeviceToHost, s));
    CUDACHECK(cudaMemcpyAsync(h_bc_out, d_bc_out, BYTES, cudaMemcpyDeviceToHost, s));
    CUDACHECK(cudaMemcpyAsync(h_p2p_out, d_p2p_out, BYTES, cudaMemcpyDeviceToHost, s));
}

static void fill_inputs(int k)
{
    for (int i = 0; i < COUNT; i++) {
        h_ar[i] = rank * 1000 + i + k;
        h_bc[i] = rank == 1 ? 7 * k + i : -1 - rank;
        h_p2p[i] = rank * 100000 + i + 3 * k;
        h_ar_out[i] = h_bc_out[i] = h_p2p_out[i] = -7;
    }
}

static void check_outputs(int k, const char *how)
{
    int prev = (rank + world - 1) % world;
    int32_t rank_sum = 1000 * (world * (world - 1) / 2);
    for (int i = 0; i < COUNT; i++) {
        if (h_ar_out[i] != rank_sum + world * (i + k))
            FAIL("%s %d: AllReduce element %d is %d, expected %d", how, k, i, h_ar_out[i], rank_sum + world * (i + k));
        if (h_bc_out[i] != 7 * k + i)
            FAIL("%s %d: Broadcast element %d is %d, expected %d", how, k, i, h_bc_out[i], 7 * k + i);
        if (h_p2p_out[i] != prev * 100000 + i + 3 * k)
            FAIL("%s %d: Recv element %d is %d, expected %d", how, k, i, h_p2p_out[i], prev * 100000 + i + 3 * k);
    }
}

static cudaGraphExec_t capture(void)
{
    cudaGraph_t g;
    cudaGraphExec_t x;
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    enqueue_all();
    enum cudaStreamCaptureStatus st;
    unsigned long long id_s = 0, id_side = 1;
    CUDACHECK(cudaStreamGetCaptureInfo(s, &st, &id_s, NULL, NULL, NULL, NULL));
    EXPECT(st == cudaStreamCaptureStatusActive && id_s != 0, "capturing");
    CUDACHECK(cudaStreamGetCaptureInfo(side, &st, &id_side, NULL, NULL, NULL, NULL));
    EXPECT(id_side == id_s, "the side stream joined the capture");
    CUDACHECK(cudaStreamEndCapture(s, &g));
    size_t n = 0;
    CUDACHECK(cudaGraphGetNodes(g, NULL, &n));
    /* 3 copies in, AllReduce, Broadcast, the send/recv group, 3 copies out */
    EXPECT(n == 9, "9 nodes, got %zu", n);
    CUDACHECK(cudaGraphInstantiate(&x, g, 0));
    CUDACHECK(cudaGraphDestroy(g));   /* the executable graph keeps what it needs */
    return x;
}

static int device_id;

static void *launch_there(void *arg)
{
    CUDACHECK(cudaSetDevice(device_id));
    CUDACHECK(cudaGraphLaunch(*(cudaGraphExec_t *)arg, s));
    return NULL;
}

/* An eager AllReduce on A between replays: numbered between theirs. */
static void eager_allreduce(int k)
{
    int32_t host[4];
    for (int i = 0; i < 4; i++) host[i] = rank + k + i;
    CUDACHECK(cudaMemcpy(d_extra, host, sizeof host, cudaMemcpyHostToDevice));
    NCCLCHECK(ncclAllReduce(d_extra, d_extra, 4, ncclInt32, ncclSum, comm_a, s));
    CUDACHECK(cudaMemcpyAsync(host, d_extra, sizeof host, cudaMemcpyDeviceToHost, s));
    CUDACHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < 4; i++)
        EXPECT(host[i] == world * (world - 1) / 2 + world * (k + i), "eager AllReduce %d: %d", k, host[i]);
}

static void *abort_comm(void *arg)
{
    NCCLCHECK(ncclCommAbort(*(ncclComm_t *)arg));
    return NULL;
}

static void expect_pending(const char *what)
{
    trtest_sleep_ms(300);
    cudaError_t e = cudaStreamQuery(s);
    EXPECT(e == cudaErrorNotReady, "%s: stream query gave %s", what, cudaGetErrorName(e));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "replay";
    comm_a = trtest_world_comm(&rank, &world, "graph-a");
    ncclUniqueId id_b;
    trtest_exchange_id(&id_b, rank == 0, "graph-b");
    NCCLCHECK(ncclCommInitRank(&comm_b, world, id_b, rank));
    CUDACHECK(cudaGetDevice(&device_id));
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CUDACHECK(cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming));
    CUDACHECK(cudaEventCreateWithFlags(&join_ev, cudaEventDisableTiming));
    h_ar = pinned(); h_bc = pinned(); h_p2p = pinned();
    h_ar_out = pinned(); h_bc_out = pinned(); h_p2p_out = pinned();
    d_ar = device(); d_ar_out = device(); d_bc = device(); d_bc_out = device();
    d_p2p = device(); d_p2p_out = device(); d_extra = device();

    /* An eager round first: capturing after it must not disturb the order. */
    fill_inputs(0);
    enqueue_all();
    CUDACHECK(cudaStreamSynchronize(s));
    check_outputs(0, "eager");

    cudaGraphExec_t x = capture();
    int replays = !strcmp(mode, "short") ? 5 : 100;
    if (!strcmp(mode, "short") && rank == 3) replays--;
    for (int k = 1; k <= replays; k++) {
        fill_inputs(k);
        if (!strcmp(mode, "mixed") && rank == 2 && k % 3 == 1) {
            enqueue_all();
        } else if (k % 4 == 3) {
            /* numbered on the launching thread, whichever it is */
            pthread_t t;
            EXPECT(pthread_create(&t, NULL, launch_there, &x) == 0, "thread");
            pthread_join(t, NULL);
        } else {
            CUDACHECK(cudaGraphLaunch(x, s));
        }
        if (!strcmp(mode, "short") && k == 5) {
            /* rank 3 never launches this one: the AllReduce waits for it */
            expect_pending("a replay rank 3 skipped");
            ncclResult_t state;
            NCCLCHECK(ncclCommGetAsyncError(comm_a, &state));
            EXPECT(state == ncclSuccess, "a hang is not an error: %d", state);
            break;
        }
        CUDACHECK(cudaStreamSynchronize(s));
        check_outputs(k, "replay");
        if (k % 10 == 5) eager_allreduce(k);
    }

    if (!strcmp(mode, "short")) {
        trtest_file_barrier("checked", rank, world);
        /* both communicators at once: the hung replay holds both */
        pthread_t ta, tb;
        EXPECT(pthread_create(&ta, NULL, abort_comm, &comm_a) == 0, "thread");
        EXPECT(pthread_create(&tb, NULL, abort_comm, &comm_b) == 0, "thread");
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CUDACHECK(cudaStreamSynchronize(s));
        CUDACHECK(cudaGraphExecDestroy(x));
        if (rank == 0) printf("graph mode short on %d ranks: ok\n", world);
        return 0;
    }

    /* Captured operations are not in flight until launched: a communicator
     * whose only operations are captured (never launched) is destroyed at once. */
    ncclComm_t comm_c;
    NCCLCHECK(ncclCommSplit(comm_a, 0, rank, &comm_c, NULL));
    cudaGraph_t g;
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    NCCLCHECK(ncclAllReduce(d_extra, d_extra, 4, ncclInt32, ncclSum, comm_c, s));
    CUDACHECK(cudaStreamEndCapture(s, &g));
    NCCLCHECK(ncclCommDestroy(comm_c));
    CUDACHECK(cudaGraphDestroy(g));

    CUDACHECK(cudaGraphExecDestroy(x));
    NCCLCHECK(ncclCommDestroy(comm_b));
    NCCLCHECK(ncclCommDestroy(comm_a));
    if (rank == 0) printf("graph mode %s on %d ranks: ok\n", mode, world);
    return 0;
}
