/* Hangs behave like on GPUs: a collective whose peers never arrive keeps its
 * stream pending (checked with cudaStreamQuery, the suite never blocks), so
 * do mismatched calls; ncclCommAbort releases the stream. Modes:
 *   skip     rank 1 skips the second AllReduce
 *   mismatch rank 0 reduces 10 elements, the others 20
 *   timeout  run with TRSIM_TIMEOUT_SEC=1: the wait becomes an error
 *   dead     rank 2 is SIGKILLed; peers see ncclRemoteError, stay pending */
#include <signal.h>
#include "../common/trtest.h"

static int rank, world;

static void expect_pending(cudaStream_t s, const char *what)
{
    trtest_sleep_ms(300);
    cudaError_t e = cudaStreamQuery(s);
    EXPECT(e == cudaErrorNotReady, "%s: stream query gave %s", what, cudaGetErrorName(e));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "skip";
    ncclComm_t comm = trtest_world_comm(&rank, &world, "hang");
    cudaStream_t s;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *buf;
    CUDACHECK(cudaMalloc((void **)&buf, 64 * sizeof(float)));
    NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
    CUDACHECK(cudaStreamSynchronize(s));

    if (!strcmp(mode, "skip")) {
        if (rank != 1) {
            NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
            expect_pending(s, "peers of a skipped AllReduce");
            ncclResult_t state;
            NCCLCHECK(ncclCommGetAsyncError(comm, &state));
            EXPECT(state == ncclSuccess, "a hang is not an error: %d", state);
        }
    } else if (!strcmp(mode, "mismatch")) {
        NCCLCHECK(ncclAllReduce(buf, buf, rank == 0 ? 10 : 20, ncclFloat32, ncclSum, comm, s));
        expect_pending(s, "AllReduce with mismatched counts");
    } else if (!strcmp(mode, "timeout")) {
        if (rank != 1) {
            NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
            CUDACHECK(cudaStreamSynchronize(s));   /* returns once the timeout fires */
            ncclResult_t state;
            NCCLCHECK(ncclCommGetAsyncError(comm, &state));
            EXPECT(state == ncclSystemError, "timeout gave %d", state);
        }
    } else if (!strcmp(mode, "dead")) {
        if (rank == 2) kill(getpid(), SIGKILL);
        NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
        ncclResult_t state = ncclSuccess;
        for (int i = 0; i < 3000 && state == ncclSuccess; i++) {
            trtest_sleep_ms(10);
            NCCLCHECK(ncclCommGetAsyncError(comm, &state));
        }
        EXPECT(state == ncclRemoteError, "dead peer gave %d", state);
        EXPECT(cudaStreamQuery(s) == cudaErrorNotReady, "the collective must still be pending");
    } else {
        FAIL("unknown mode %s", mode);
    }
    /* Nobody leaves before everyone has checked: an exited rank would be
     * reported as a dead peer. */
    if (strcmp(mode, "dead") != 0) trtest_file_barrier("checked", rank, world);
    /* Abort ends whatever is pending; the stream then drains. */
    NCCLCHECK(ncclCommAbort(comm));
    CUDACHECK(cudaStreamSynchronize(s));
    if (rank == 0) printf("hang mode %s on %d ranks: ok\n", mode, world);
    return 0;
}
