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

static inline void job_sync(void) { CUDACHECK(cudaStreamSynchronize(stream)); }

static inline void job_finish(void)
{
    job_sync();
    trtest_file_barrier("done", rank, world);
    NCCLCHECK(ncclCommDestroy(wcomm));
}
#endif
