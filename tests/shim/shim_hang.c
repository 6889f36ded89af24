/* A hung 4-rank job (test_shim.py cases "hang-*"): killed by the launcher's
 * SIGTERM (--timeout) or a SIGINT, every rank must still leave its trace.
 *   rank 0  AllReduce #3, then waits for its stream forever (a GPU hang);
 *           it has a SIGTERM/SIGINT handler of its own, which must still run
 *   rank 1  AllReduce #3, then hangs inside ncclCommDestroy (queued work)
 *   rank 2  AllReduce #3, then hangs inside ncclGroupEnd (a grouped init
 *           of a communicator nobody else joins)
 *   rank 3  skips AllReduce #3, hangs inside a blocking ncclCommSplit
 * Before its hanging call each rank creates $TRSHIM_TEST_MARKERS/ready.<rank>. */
#include <fcntl.h>
#include <signal.h>
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))

static int rank, world;

/* async-signal-safe: open/close, then _exit */
static void app_handler(int sig)
{
    const char *dir = getenv("TRSHIM_TEST_MARKERS");
    char path[4096];
    if (dir) {
        snprintf(path, sizeof path, "%s/apphandler.%d", dir, sig);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) close(fd);
    }
    _exit(42);
}

NOINLINE void hang_rank0(float *buf, ncclComm_t comm, cudaStream_t s)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
    trtest_marker("ready.0");
    cudaStreamSynchronize(s);
}

NOINLINE void hang_rank1(float *buf, ncclComm_t comm, cudaStream_t s)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
    trtest_marker("ready.1");
    ncclCommDestroy(comm);
}

NOINLINE void hang_rank2(float *buf, ncclComm_t comm, cudaStream_t s)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    ncclComm_t lonely;
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclCommInitRank(&lonely, 2, id, 0));
    trtest_marker("ready.2");
    ncclGroupEnd();
}

NOINLINE void hang_rank3(ncclComm_t comm)
{
    ncclComm_t child;
    trtest_marker("ready.3");
    ncclCommSplit(comm, 0, 0, &child, NULL);
}

int main(void)
{
    if (getenv("RANK") && atoi(getenv("RANK")) == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = app_handler;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
    }
    trtest_init(&rank, &world);
    EXPECT(world == 4, "run on 4 ranks");
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "hang");
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));
    cudaStream_t s;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *buf;
    CUDACHECK(cudaMalloc((void **)&buf, 64 * sizeof(float)));
    for (int i = 0; i < 2; i++) NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
    CUDACHECK(cudaStreamSynchronize(s));
    switch (rank) {
    case 0: hang_rank0(buf, comm, s); break;
    case 1: hang_rank1(buf, comm, s); break;
    case 2: hang_rank2(buf, comm, s); break;
    default: hang_rank3(comm); break;
    }
    FAIL("rank %d: the hang ended", rank);
}
