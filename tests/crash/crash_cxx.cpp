// The rank that died of an uncaught C++ exception (issue 21; test_crash.py
// cases "cxx", "cxx-before", "cxx-after"): crash_job.c's loop in C++, rank
// CRASH_RANK (2) throws from parse_batch at step 6, and nothing catches it:
// std::terminate, abort(), SIGABRT. MODE (argv[1]):
//   plain    std::runtime_error("bad batch 6"), libstdc++'s own terminate
//            handler (its "terminate called after throwing..." message)
//   before   the same, with the program's own terminate handler installed
//            before its first CUDA call (the shim's chains to it): it
//            creates the marker terminate.before and calls abort()
//   after    train::BadBatch (a std::runtime_error) thrown, with the
//            program's own terminate handler installed after the shim's (at
//            step 1), which replaces it: the marker terminate.after, abort()
#include <stdexcept>
#include <string>
#include <exception>
#include <cstdlib>
#include "../common/trtest.h"

#define NOINLINE __attribute__((noinline))

namespace train {
struct BadBatch : std::runtime_error {
    explicit BadBatch(const std::string &m) : std::runtime_error(m) {}
};
}

static int rank, world;
static ncclComm_t comm;
static cudaStream_t stream;
static float *grads;
static std::string mode = "plain";

NOINLINE void parse_batch(int step)
{
    if (mode == "after") throw train::BadBatch("bad batch " + std::to_string(step));   // CRASH-SITE-parse_batch_after
    throw std::runtime_error("bad batch " + std::to_string(step));   // CRASH-SITE-parse_batch
}

NOINLINE void load_batch(int step)
{
    if (rank != trtest_env_int("CRASH_RANK", 2) || step != trtest_env_int("CRASH_STEP", 6)) return;
    usleep(300 * 1000);     // the peers in AllReduce #6 first (crash_job.c)
    parse_batch(step);
}

NOINLINE void allreduce_grads(void)
{
    NCCLCHECK(ncclAllReduce(grads, grads, 1024, ncclFloat32, ncclSum, comm, stream));
}

static void own_before()
{
    trtest_marker("terminate.before");
    std::abort();
}

static void own_after()
{
    trtest_marker("terminate.after");
    std::abort();
}

int main(int argc, char **argv)
{
    if (argc > 1) mode = argv[1];
    if (mode == "before") std::set_terminate(own_before);
    comm = trtest_world_comm(&rank, &world, "crash");
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaMalloc((void **)&grads, 1024 * sizeof(float)));
    for (int step = 1; step <= 10; step++) {
        if (step == 1 && mode == "after") std::set_terminate(own_after);
        load_batch(step);
        allreduce_grads();
        CUDACHECK(cudaStreamSynchronize(stream));
    }
    NCCLCHECK(ncclCommDestroy(comm));
    return 0;
}
