// C++ exceptions under the shim (test_shim.py case "cxx"): the shim links
// its own unwinder, hidden; the program's throws and catches must still go
// through the C++ runtime's, from the main thread and from other threads,
// between NCCL calls whose stacks the shim captures.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <cuda_runtime.h>
#include <nccl.h>

#define CHECK(cond, what) do { if (!(cond)) { std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, what); std::exit(1); } } while (0)

static ncclComm_t comm;
static float *buf;
static cudaStream_t stream;

struct Custom { int value; };

__attribute__((noinline)) void cxx_thrower(int depth, int i)
{
    if (depth == 0) {
        if (i % 3 == 0) throw std::runtime_error("boom " + std::to_string(i));
        if (i % 3 == 1) throw Custom{i};
        throw i;
    }
    cxx_thrower(depth - 1, i);
    std::printf("unreachable\n");
}

__attribute__((noinline)) void cxx_collective(int i)
{
    CHECK(ncclAllReduce(buf, buf, 1 + i % 7, ncclFloat32, ncclSum, comm, stream) == ncclSuccess, "AllReduce");
}

__attribute__((noinline)) int cxx_round(int i)
{
    cxx_collective(i);
    try {
        cxx_thrower(5, i);
    } catch (const std::runtime_error &e) {
        CHECK(std::string(e.what()) == "boom " + std::to_string(i), "message");
        return 0;
    } catch (const Custom &c) {
        CHECK(c.value == i, "custom value");
        return 1;
    } catch (int v) {
        CHECK(v == i, "int value");
        return 2;
    }
    return -1;
}

int main()
{
    ncclUniqueId id;
    CHECK(ncclGetUniqueId(&id) == ncclSuccess, "GetUniqueId");
    CHECK(cudaStreamCreate(&stream) == cudaSuccess, "stream");
    CHECK(cudaMalloc(reinterpret_cast<void **>(&buf), 4096) == cudaSuccess, "cudaMalloc");
    CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess, "InitRank");
    int kinds[3] = {0, 0, 0};
    for (int i = 0; i < 300; i++) {
        int k = cxx_round(i);
        CHECK(k >= 0 && k < 3, "caught");
        kinds[k]++;
    }
    CHECK(kinds[0] == 100 && kinds[1] == 100 && kinds[2] == 100, "every kind caught");
    // rethrow and nested try blocks
    try {
        try {
            cxx_thrower(3, 0);
        } catch (...) {
            cxx_collective(1);
            throw;
        }
    } catch (const std::runtime_error &e) {
        CHECK(std::string(e.what()) == "boom 0", "rethrown");
    }
    // exceptions on other threads, which never called NCCL themselves
    std::vector<std::thread> threads;
    std::vector<int> caught(4, 0);
    for (int t = 0; t < 4; t++)
        threads.emplace_back([t, &caught] {
            for (int i = 0; i < 200; i++) {
                try {
                    cxx_thrower(4, 3 * i);
                } catch (const std::exception &) {
                    caught[t]++;
                }
            }
        });
    for (auto &th : threads) th.join();
    for (int t = 0; t < 4; t++) CHECK(caught[t] == 200, "thread caught");
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");
    CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    std::printf("C++ exceptions under the shim: ok\n");
    return 0;
}
