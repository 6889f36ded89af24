/* A 4-rank job where ranks 0 and 2 issue an AllReduce the others never
 * issue (test_shim.py cases "complete-hang", "watchdog"): its GPU work never
 * completes on them, ranks 1 and 3 have nothing pending.
 *   every rank  InitRank; three AllReduces from stuck_common (seq 1-3),
 *               cudaStreamSynchronize
 *   ranks 0, 2  one more from stuck_extra (seq 4), then
 *               cudaStreamQuery says not ready
 * Then each rank creates $TRSHIM_TEST_MARKERS/ready.<rank>, waits (without
 * a wrapped call) for the marker "go", creates alive.<rank> (it went on
 * after whatever the shim did meanwhile) and waits until the launcher ends
 * it. With STUCK_LATE=1 (case "watchdog-over"), ranks 1 and 3 issue that
 * AllReduce from stuck_extra after "go" (and synchronize): it completes
 * everywhere, the hang is over. */
#include <fcntl.h>
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))

static void marker(const char *name, int rank)
{
    const char *dir = getenv("TRSHIM_TEST_MARKERS");
    char path[4096];
    if (!dir) FAIL("TRSHIM_TEST_MARKERS is not set");
    snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) FAIL("cannot create %s", path);
    close(fd);
}

static int have_marker(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", getenv("TRSHIM_TEST_MARKERS"), name);
    return access(path, F_OK) == 0;
}

NOINLINE void stuck_common(float *buf, ncclComm_t comm, cudaStream_t s)
{
    for (int i = 0; i < 3; i++) NCCLCHECK(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s));
}

NOINLINE void stuck_extra(float *buf, ncclComm_t comm, cudaStream_t s)
{
    NCCLCHECK(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclMax, comm, s));
}

int main(void)
{
    int rank, world;
    trtest_init(&rank, &world);
    EXPECT(world == 4, "run on 4 ranks");
    ncclUniqueId id;
    trtest_exchange_id(&id, rank == 0, "stuck");
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, world, id, rank));
    cudaStream_t s;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *buf;
    CUDACHECK(cudaMalloc((void **)&buf, 64 * sizeof(float)));
    stuck_common(buf, comm, s);
    CUDACHECK(cudaStreamSynchronize(s));
    if (rank % 2 == 0) {
        stuck_extra(buf, comm, s);
        trtest_sleep_ms(50);
        EXPECT(cudaStreamQuery(s) == cudaErrorNotReady, "the extra AllReduce is stuck");
        cudaGetLastError();
    }
    marker("ready", rank);
    while (!have_marker("go")) trtest_sleep_ms(10);
    const char *late = getenv("STUCK_LATE");
    if (late && !strcmp(late, "1") && rank % 2 == 1) {
        stuck_extra(buf, comm, s);
        CUDACHECK(cudaStreamSynchronize(s));
    }
    marker("alive", rank);
    for (;;) trtest_sleep_ms(1000);
}
