/* Common set-up of the analyzer's job programs: rank identity from the
 * launcher, the world communicator, a stream and buffers. Each program plants
 * one failure of shared/failure-catalog.md in a clearly named noinline
 * function that calls NCCL itself, so that the call site tranalyze reports
 * is that function. */
#ifndef JOB_H
#define JOB_H
#include "../../common/trtest.h"

#define NOINLINE __attribute__((noinline))

static int rank, world;
static cudaStream_t stream;
static ncclComm_t wcomm;
static float *buf;           /* 1 Mi floats */

static inline void job_setup(void)
{
    trtest_init(&rank, &world);
    CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc((void **)&buf, (1 << 20) * sizeof(float)));
    CUDACHECK(cudaMemset(buf, 0, (1 << 20) * sizeof(float)));
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "world");
    NCCLCHECK(ncclCommInitRank(&wcomm, world, id, rank));
}

/* JOB_WATCHDOG=exit:SEC, abort:SEC or commabort:SEC makes job_sync a
 * watchdog like PyTorch's: the stream is polled, and when it is still busy
 * after SEC seconds the rank exits with status 3 (a hung job that ends by
 * itself), calls abort(), or first aborts its communicator and then the
 * process (what PyTorch's watchdog does: ncclCommAbort releases the hung
 * operations' streams, then TORCH_NCCL_ASYNC_ERROR_HANDLING's SIGABRT).
 * Unset: block. */
static inline void job_sync(void)
{
    const char *w = getenv("JOB_WATCHDOG");
    if (!w || !*w) {
        CUDACHECK(cudaStreamSynchronize(stream));
        return;
    }
    int do_abort = !strncmp(w, "abort:", 6), comm_abort = !strncmp(w, "commabort:", 10);
    double limit = atof(strchr(w, ':') ? strchr(w, ':') + 1 : w);
    for (double waited = 0;; waited += 0.001) {
        cudaError_t e = cudaStreamQuery(stream);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) CUDACHECK(e);
        (void)cudaGetLastError();     /* not ready is no error: cleared, as PyTorch's query does */
        if (waited >= limit) {
            fprintf(stderr, "rank %d: watchdog: the stream is still busy after %g s: %s\n", rank, limit,
                    comm_abort ? "ncclCommAbort, abort()" : do_abort ? "abort()" : "exit(3)");
            if (comm_abort) {
                ncclCommAbort(wcomm);
                trtest_sleep_ms(50);     /* the released stream completes, as after a GPU's abort */
            }
            if (do_abort || comm_abort) abort();
            exit(3);
        }
        trtest_sleep_ms(1);
    }
}

static inline void job_finish(void)
{
    job_sync();
    trtest_file_barrier("done", rank, world);
    NCCLCHECK(ncclCommDestroy(wcomm));
}
#endif
