/* dlsym_job LIB: a job of 2 ranks (under trsim-launch) that reaches CUDA
 * and NCCL only through dlopen(LIB, RTLD_LOCAL) + dlsym, as Python does
 * with ctypes.CDLL("libnccl.so.2") (built as dlsym_job_dl, linked with no
 * CUDA or NCCL library), or through the link (built with -DLINKED as
 * dlsym_job_linked, linked with libtrsim.so; LIB unused). Both call every
 * function through the same table of pointers, from the same functions:
 * test_dlsym.py (case "job") checks that their traces are the same to the
 * call, sequence number, size and byte of memory, and that each pointer is
 * the shim's wrapper exactly for the functions the shim wraps.
 *
 * Rank 0 prints "sym <name> -> <module> <symbol>" for every pointer. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "dlsym_show.h"

#define NOINLINE __attribute__((noinline))

#define FUNCS(X)                                                                                       \
    X(cudaGetDeviceCount) X(cudaSetDevice) X(cudaStreamCreate) X(cudaStreamSynchronize)               \
    X(cudaStreamDestroy) X(cudaMalloc) X(cudaFree) X(cudaMallocHost) X(cudaFreeHost) X(cudaMallocAsync) \
    X(cudaFreeAsync) X(cudaGetErrorName) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy)     \
    X(ncclAllReduce) X(ncclBroadcast) X(ncclAllGather) X(ncclReduceScatter) X(ncclSend) X(ncclRecv)   \
    X(ncclGroupStart) X(ncclGroupEnd) X(ncclMemAlloc) X(ncclMemFree) X(ncclGetErrorString)

#define DECL(n) __typeof__(&n) n;
static struct { FUNCS(DECL) } F;

static int rank = -1, world, peer;
static cudaStream_t stream;
static void *a, *b, *c, *host, *nb;
static ncclComm_t comm;

#define DIE(...) do { fprintf(stderr, "FAIL rank %d line %d: ", rank, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CU(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) DIE("%s -> %s", #call, F.cudaGetErrorName(e_)); } while (0)
#define NC(call) do { ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) DIE("%s -> %s", #call, F.ncclGetErrorString(r_)); } while (0)

static void resolve(const char *lib)
{
#ifdef LINKED
    (void)lib;
#define SET(n) F.n = &n;
#else
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) DIE("dlopen %s: %s", lib, dlerror());
#define SET(n) \
    if (!(F.n = (__typeof__(&n))dlsym(h, #n))) DIE("dlsym %s: %s", #n, dlerror());
#endif
    FUNCS(SET)
#define SHOW(n) dlsym_show("sym", #n, (const void *)F.n);
    if (rank == 0) {
        FUNCS(SHOW)
        fflush(stdout);
    }
}

/* rank 0 publishes the unique id in the launcher's rendezvous folder */
static void exchange_id(ncclUniqueId *id)
{
    const char *dir = getenv("TRSIM_RDZV");
    char path[4096], tmp[4200];
    if (!dir || !*dir) DIE("TRSIM_RDZV is not set: run under trsim-launch");
    snprintf(path, sizeof path, "%s/dlsym_job.id", dir);
    if (rank == 0) {
        NC(F.ncclGetUniqueId(id));
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0) DIE("write %s", tmp);
        if (rename(tmp, path) != 0) DIE("rename %s: %s", tmp, strerror(errno));
        return;
    }
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (n == 1) return;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

NOINLINE void dj_setup(void)
{
    int ndev = 0;
    CU(F.cudaGetDeviceCount(&ndev));
    CU(F.cudaSetDevice(rank % ndev));
    CU(F.cudaStreamCreate(&stream));
    CU(F.cudaMalloc(&a, 1 << 20));
    CU(F.cudaMalloc(&b, 4096));
    CU(F.cudaMallocHost(&host, 512));
    NC(F.ncclMemAlloc(&nb, 8192));
    CU(F.cudaMallocAsync(&c, 3000, stream));      /* the peak: 1048576 + 4096 + 8192 + 3000 */
}

NOINLINE void dj_init(void)
{
    ncclUniqueId id;
    exchange_id(&id);
    NC(F.ncclCommInitRank(&comm, world, id, rank));
}

NOINLINE void dj_collectives(void)
{
    NC(F.ncclAllReduce(a, a, 100, ncclFloat32, ncclSum, comm, stream));
    NC(F.ncclAllReduce(a, a, 200, ncclFloat32, ncclSum, comm, stream));
    NC(F.ncclAllReduce(a, a, 300, ncclFloat32, ncclSum, comm, stream));
    NC(F.ncclBroadcast(b, b, 50, ncclInt32, 1, comm, stream));
    NC(F.ncclAllGather(a, b, 8, ncclFloat32, comm, stream));
    NC(F.ncclReduceScatter(a, b, 4, ncclFloat32, ncclSum, comm, stream));
}

NOINLINE void dj_p2p(void)
{
    NC(F.ncclGroupStart());
    NC(F.ncclSend(a, 16, ncclFloat32, peer, comm, stream));
    NC(F.ncclRecv(b, 16, ncclFloat32, peer, comm, stream));
    NC(F.ncclGroupEnd());
}

NOINLINE void dj_teardown(void)
{
    CU(F.cudaStreamSynchronize(stream));
    CU(F.cudaFree(b));
    CU(F.cudaFreeAsync(c, stream));
    CU(F.cudaStreamSynchronize(stream));
    NC(F.ncclMemFree(nb));
    CU(F.cudaFreeHost(host));
    NC(F.ncclCommDestroy(comm));
    CU(F.cudaFree(a));
    CU(F.cudaStreamDestroy(stream));
}

int main(int argc, char **argv)
{
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    if (!r || !w) DIE("RANK/WORLD_SIZE not set: run under trsim-launch");
    rank = atoi(r);
    world = atoi(w);
    if (world != 2) DIE("2 ranks, not %d", world);
    peer = 1 - rank;
    resolve(argc > 1 ? argv[1] : NULL);
    dj_setup();
    dj_init();
    dj_collectives();
    dj_p2p();
    dj_teardown();
    printf("rank %d done\n", rank);
    return 0;
}
