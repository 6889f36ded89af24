/* One-sided operations (NCCL 2.29): ncclPutSignal writes into a peer's
 * window with no action of that peer and signals it, ncclSignal signals
 * alone, ncclWaitSignal waits on the stream for signals. Windows
 * (ncclCommWindowRegister) are collective; as in NCCL, signals and waits
 * need a symmetric window (NCCL_WIN_COLL_SYMMETRIC) registered first, and a
 * put's source must lie in one (its target need not). Checked exactly: the
 * data a WaitSignal makes visible, counts (several signals per wait, several
 * descriptors per wait, waits taking turns on one counter, signal indexes
 * and contexts kept apart), a wait that stays pending until a signal that
 * comes later, the argument errors. Modes (argv[1]):
 *   all              the above (2 and 4 ranks)
 *   hang             rank 0 waits for a signal nobody sends: its stream
 *                    stays pending (cudaStreamQuery), ncclCommAbort ends it
 *   hang-timeout     the same with TRSIM_TIMEOUT_SEC=1: ncclSystemError
 *   hang-forever     rank 0 blocks in cudaStreamSynchronize; the
 *                    launcher's --timeout ends the job (status 124) */
#include "nccl232.h"

#define WIN_INTS 16384          /* window size per rank, in int32 */

static int rank, world;
static ncclComm_t comm;
static cudaStream_t stream;
static int32_t *win_buf, *src_buf;   /* both inside symmetric windows, from ncclMemAlloc */
static int32_t *plain_buf;           /* in a window registered without NCCL_WIN_COLL_SYMMETRIC */
static ncclWindow_t win, src_win, plain_win;

static int32_t pattern(size_t i, int arg)
{
    return arg * 100000 + (int32_t)i;
}

static int32_t minus_one(size_t i, int arg)
{
    (void)i; (void)arg;
    return -1;
}

static void wait_desc(int n, ncclWaitSignalDesc_t *d)
{
    NCCLCHECK(ncclWaitSignal(n, d, comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
}

static void expect_pending(cudaStream_t s, const char *what)
{
    trtest_sleep_ms(200);
    cudaError_t e = cudaStreamQuery(s);
    EXPECT(e == cudaErrorNotReady, "%s: stream query gave %s", what, cudaGetErrorName(e));
}

static void setup(void)
{
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "onesided");
    NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));
    CUDACHECK(cudaStreamCreate(&stream));
    NCCLCHECK(ncclMemAlloc((void **)&win_buf, WIN_INTS * sizeof(int32_t)));
    NCCLCHECK(ncclMemAlloc((void **)&src_buf, WIN_INTS * sizeof(int32_t)));
    NCCLCHECK(ncclMemAlloc((void **)&plain_buf, 4096));
    test_put_ints(win_buf, WIN_INTS, minus_one, 0);
    test_put_ints(plain_buf, 1024, minus_one, 0);
    /* before a symmetric window, NCCL's one-sided machinery is not set up */
    ncclWaitSignalDesc_t d = {1, 0, 0, 0};
    EXPECT(ncclSignal(0, 0, 0, 0, comm, stream) == ncclInvalidUsage, "a signal before any symmetric window");
    EXPECT(ncclWaitSignal(1, &d, comm, stream) == ncclInvalidUsage, "a wait before any symmetric window");
    EXPECT(strstr(ncclGetLastError(NULL), "before RMA is initialized") != NULL, "%s", ncclGetLastError(NULL));
    NCCLCHECK(ncclCommWindowRegister(comm, plain_buf, 4096, &plain_win, NCCL_WIN_DEFAULT));
    EXPECT(ncclSignal(0, 0, 0, 0, comm, stream) == ncclInvalidUsage, "a signal with only a plain window");
    NCCLCHECK(ncclCommWindowRegister(comm, win_buf, WIN_INTS * sizeof(int32_t), &win, NCCL_WIN_COLL_SYMMETRIC));
    NCCLCHECK(ncclCommWindowRegister(comm, src_buf, WIN_INTS * sizeof(int32_t), &src_win, NCCL_WIN_COLL_SYMMETRIC));
    /* registration keeps the contents */
    test_expect_ints(win_buf, WIN_INTS, minus_one, 0, "window after registration");
    void *user;
    NCCLCHECK(ncclWinGetUserPtr(comm, win, &user));
    EXPECT(user == win_buf, "ncclWinGetUserPtr gave %p, not %p", user, (void *)win_buf);
    /* no peer puts into this window before it was checked */
    trtest_file_barrier("registered", rank, world);
}

static void hang(const char *mode)
{
    ncclWaitSignalDesc_t d = {1, (rank + 1) % world, 0, 0};
    if (rank == 0) {
        NCCLCHECK(ncclWaitSignal(1, &d, comm, stream));
        if (!strcmp(mode, "hang")) {
            expect_pending(stream, "WaitSignal without a signal");
            ncclResult_t state;
            NCCLCHECK(ncclCommGetAsyncError(comm, &state));
            EXPECT(state == ncclSuccess, "a hang is not an error: %d", state);
        } else if (!strcmp(mode, "hang-timeout")) {
            CUDACHECK(cudaStreamSynchronize(stream));   /* returns once the timeout fires */
            ncclResult_t state;
            NCCLCHECK(ncclCommGetAsyncError(comm, &state));
            EXPECT(state == ncclSystemError, "timeout gave %d", state);
            EXPECT(strstr(ncclGetLastError(comm), "WaitSignal") != NULL, "last error: %s", ncclGetLastError(comm));
        } else {
            fprintf(stderr, "rank 0 waits for a signal that never comes\n");
            CUDACHECK(cudaStreamSynchronize(stream));   /* never returns */
            FAIL("the wait returned");
        }
    }
    trtest_file_barrier("checked", rank, world);
    NCCLCHECK(ncclCommAbort(comm));
    CUDACHECK(cudaStreamSynchronize(stream));
    if (rank == 0) printf("one-sided %s on %d ranks: ok\n", mode, world);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    trtest_init(&rank, &world);
    if (world < 2) FAIL("needs 2 ranks or more");
    setup();
    if (strcmp(mode, "all") != 0) {
        hang(mode);
        return 0;
    }
    int right = (rank + 1) % world, left = (rank + world - 1) % world;

    /* ring: put 1000 ints at offset 100 of the right neighbour's window */
    test_put_ints(src_buf, 1000, pattern, rank);
    NCCLCHECK(ncclPutSignal(src_buf, 1000, ncclInt32, right, win, 100 * sizeof(int32_t), 0, 0, 0, comm, stream));
    ncclWaitSignalDesc_t d = {1, left, 0, 0};
    wait_desc(1, &d);
    test_expect_ints(win_buf + 100, 1000, pattern, left, "ring put");
    test_expect_ints(win_buf, 100, minus_one, 0, "before the ring put");
    test_expect_ints(win_buf + 1100, 100, minus_one, 0, "after the ring put");
    trtest_file_barrier("ring", rank, world);   /* nobody rewrites a window still being checked */

    /* several signals in one wait: rank 0 puts three blocks into rank 1
     * and signals once more; rank 1 waits for all four at once */
    if (rank == 0) {
        for (int k = 0; k < 3; k++) {
            test_put_ints(src_buf + k * 500, 500, pattern, 10 + k);
            NCCLCHECK(ncclPutSignal(src_buf + k * 500, 500, ncclInt32, 1, win, (size_t)(2000 + k * 500) * 4, 0, 0,
                                    0, comm, stream));
        }
        NCCLCHECK(ncclSignal(1, 0, 0, 0, comm, stream));
        CUDACHECK(cudaStreamSynchronize(stream));
    } else if (rank == 1) {
        ncclWaitSignalDesc_t four = {4, 0, 0, 0};
        wait_desc(1, &four);
        for (int k = 0; k < 3; k++) test_expect_ints(win_buf + 2000 + k * 500, 500, pattern, 10 + k, "three puts");
    }

    /* all to all: everyone puts a block into every window (its own
     * included) inside one group, then waits with one descriptor per rank */
    test_put_ints(src_buf, 256, pattern, 1000 + rank);
    ncclWaitSignalDesc_t *all = calloc((size_t)world, sizeof *all);
    NCCLCHECK(ncclGroupStart());
    for (int q = 0; q < world; q++) {
        NCCLCHECK(ncclPutSignal(src_buf, 256, ncclInt32, q, win, (size_t)(4096 + rank * 256) * 4, 0, 0, 0, comm,
                                stream));
        all[q] = (ncclWaitSignalDesc_t){1, q, 0, 0};
    }
    NCCLCHECK(ncclWaitSignal(world, all, comm, stream));
    NCCLCHECK(ncclGroupEnd());
    CUDACHECK(cudaStreamSynchronize(stream));
    for (int q = 0; q < world; q++) test_expect_ints(win_buf + 4096 + q * 256, 256, pattern, 1000 + q, "all to all");
    free(all);

    /* Waits take turns on one counter, and signal indexes and contexts are
     * counters of their own: rank 0 signals rank 1 twice on (sigIdx 1,
     * ctx 2) and once each on (1, 0) and (0, 2); rank 1's two waits on
     * (1, 2) take one each, its third stays pending until rank 0 signals
     * (1, 2) again. */
    if (rank == 0) {
        NCCLCHECK(ncclSignal(1, 1, 2, 0, comm, stream));
        NCCLCHECK(ncclSignal(1, 1, 2, 0, comm, stream));
        NCCLCHECK(ncclSignal(1, 1, 0, 0, comm, stream));
        NCCLCHECK(ncclSignal(1, 0, 2, 0, comm, stream));
        CUDACHECK(cudaStreamSynchronize(stream));
        test_flag_set("sent-early");
        test_flag_wait("pending-seen");
        test_put_ints(src_buf, 64, pattern, 77);
        NCCLCHECK(ncclPutSignal(src_buf, 64, ncclInt32, 1, win, 8000 * 4, 1, 2, 0, comm, stream));
        CUDACHECK(cudaStreamSynchronize(stream));
    } else if (rank == 1) {
        test_flag_wait("sent-early");
        ncclWaitSignalDesc_t one = {1, 0, 1, 2};
        wait_desc(1, &one);
        wait_desc(1, &one);
        NCCLCHECK(ncclWaitSignal(1, &one, comm, stream));
        expect_pending(stream, "a third wait on (1, 2) with two signals sent");
        test_flag_set("pending-seen");
        CUDACHECK(cudaStreamSynchronize(stream));
        test_expect_ints(win_buf + 8000, 64, pattern, 77, "put on (1, 2)");
        ncclWaitSignalDesc_t others[2] = {{1, 0, 1, 0}, {1, 0, 0, 2}};
        wait_desc(2, others);
    }

    /* a plain (not symmetric) window is a fine target */
    test_put_ints(src_buf, 100, pattern, 500 + rank);
    NCCLCHECK(ncclPutSignal(src_buf, 100, ncclInt32, right, plain_win, 400, 3, 1, 0, comm, stream));
    ncclWaitSignalDesc_t from_left = {1, left, 3, 1};
    wait_desc(1, &from_left);
    test_expect_ints(plain_buf + 100, 100, pattern, 500 + left, "put into a plain window");

    /* argument errors */
    int32_t *plain;
    CUDACHECK(cudaMalloc((void **)&plain, 4096));
    EXPECT(ncclPutSignal(plain, 10, ncclInt32, right, win, 0, 0, 0, 0, comm, stream) == ncclInvalidArgument,
           "a source outside any window");
    EXPECT(strstr(ncclGetLastError(NULL), "not in a valid symmetric window") != NULL, "%s", ncclGetLastError(NULL));
    EXPECT(ncclPutSignal(plain_buf, 10, ncclInt32, right, win, 0, 0, 0, 0, comm, stream) == ncclInvalidArgument,
           "a source in a window that is not symmetric");
    EXPECT(ncclPutSignal(NULL, 0, ncclInt32, right, win, 0, 0, 0, 0, comm, stream) == ncclInvalidArgument,
           "no source");
    EXPECT(ncclPutSignal(src_buf, 10, ncclInt32, right, win, WIN_INTS * 4 - 8, 0, 0, 0, comm, stream) ==
           ncclInvalidArgument, "a put past the end of the window");
    EXPECT(ncclPutSignal(src_buf, 10, ncclInt32, right, NULL, 0, 0, 0, 0, comm, stream) == ncclInvalidArgument,
           "no window");
    EXPECT(ncclPutSignal(src_buf, 10, ncclInt32, world, win, 0, 0, 0, 0, comm, stream) == ncclInvalidArgument,
           "peer out of range");
    EXPECT(ncclPutSignal(src_buf, 10, (ncclDataType_t)99, right, win, 0, 0, 0, 0, comm, stream) ==
           ncclInvalidArgument, "bad datatype");
    EXPECT(ncclSignal(right, 4, 0, 0, comm, stream) == ncclInvalidArgument, "sigIdx out of range");
    EXPECT(ncclSignal(right, 0, -1, 0, comm, stream) == ncclInvalidArgument, "ctx out of range");
    EXPECT(ncclSignal(right, 0, 0, 1, comm, stream) == ncclInvalidArgument, "flags not 0");
    EXPECT(ncclSignal(right, 0, 0, 0, NULL, stream) == ncclInvalidArgument, "no communicator");
    ncclWaitSignalDesc_t bad = {1, world, 0, 0};
    EXPECT(ncclWaitSignal(1, &bad, comm, stream) == ncclInvalidArgument, "wait on a peer out of range");
    bad = (ncclWaitSignalDesc_t){0, left, 0, 0};
    EXPECT(ncclWaitSignal(1, &bad, comm, stream) == ncclInvalidArgument, "opCnt 0");
    bad = (ncclWaitSignalDesc_t){1, left, 4, 0};
    EXPECT(ncclWaitSignal(1, &bad, comm, stream) == ncclInvalidArgument, "sigIdx out of range");
    EXPECT(ncclWaitSignal(1, NULL, comm, stream) == ncclInvalidArgument, "no descriptors");
    EXPECT(ncclWaitSignal(0, &bad, comm, stream) == ncclInvalidArgument, "zero descriptors");
    void *user;
    EXPECT(ncclWinGetUserPtr(comm, (ncclWindow_t)plain, &user) == ncclInvalidArgument, "not a window");

    /* A window must be memory of its own (ncclMemAlloc): a small cudaMalloc
     * block is refused, on every rank alike. */
    ncclWindow_t w2 = (ncclWindow_t)1;
    EXPECT(ncclCommWindowRegister(comm, plain, 4096, &w2, NCCL_WIN_DEFAULT) == ncclInvalidArgument,
           "a window in cudaMalloc'ed memory of 4 KiB");
    EXPECT(w2 == NULL, "no window handle on failure");
    CUDACHECK(cudaFree(plain));

    /* everyone has checked its window before it goes */
    trtest_file_barrier("done", rank, world);
    NCCLCHECK(ncclCommWindowDeregister(comm, win));
    EXPECT(ncclPutSignal(src_buf, 1, ncclInt32, right, win, 0, 0, 0, 0, comm, stream) == ncclInvalidArgument,
           "a deregistered window");
    NCCLCHECK(ncclCommWindowDeregister(comm, src_win));
    NCCLCHECK(ncclCommWindowDeregister(comm, plain_win));
    /* the buffer is still the rank's memory, contents kept */
    test_expect_ints(win_buf + 100, 1000, pattern, left, "window memory after deregistration");
    NCCLCHECK(ncclMemFree(win_buf));
    NCCLCHECK(ncclMemFree(src_buf));
    NCCLCHECK(ncclMemFree(plain_buf));
    NCCLCHECK(ncclCommDestroy(comm));
    if (rank == 0) printf("one-sided on %d ranks: ok\n", world);
    return 0;
}
