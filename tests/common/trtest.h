/* Helpers for the multi-rank test programs: rank identity from the launcher's
 * environment, unique-id exchange through the launcher's rendezvous folder,
 * and CHECK macros that name the rank and line of a failure. */
#ifndef TRTEST_H
#define TRTEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
/* Programs using NCCL 2.29+ functions define TRTEST_NCCL_ABI first: the
 * project's own declarations (trshim/nccl_abi.h) instead of the installed
 * nccl.h (2.28 here), unless TRTEST_REAL_NCCL_H says to use the installed
 * one (the version-matrix build against NCCL 2.32's header). */
#if defined(TRTEST_NCCL_ABI) && !defined(TRTEST_REAL_NCCL_H)
#include "trshim/nccl_abi.h"
#else
#include <nccl.h>
#endif

static int trtest_rank = -1;

static inline int trtest_env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static inline void trtest_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls until path exists (another rank created it). */
static inline void trtest_wait_file(const char *path, int poll_ms)
{
    while (access(path, F_OK) != 0) trtest_sleep_ms(poll_ms);
}

/* Creates $TRSHIM_TEST_MARKERS/name (nothing when unset): how a test program
 * tells its driver it reached a point. Async-signal-safe. */
static inline void trtest_marker(const char *name)
{
    const char *dir = getenv("TRSHIM_TEST_MARKERS");
    char path[4096];
    if (!dir) return;
    size_t n = strlen(dir), m = strlen(name);
    if (n + m + 2 > sizeof path) return;
    memcpy(path, dir, n);
    path[n] = '/';
    memcpy(path + n + 1, name, m + 1);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
}

#define FAIL(...) do { \
    fprintf(stderr, "FAIL rank %d %s:%d: ", trtest_rank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

#define CUDACHECK(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) FAIL("%s -> %s", #call, cudaGetErrorName(e_)); } while (0)

#define NCCLCHECK(call) do { ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) FAIL("%s -> %s", #call, ncclGetErrorString(r_)); } while (0)

#define EXPECT(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "FAIL rank %d %s:%d: expected %s: ", trtest_rank, __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)

/* Rank 0 (of the group named tag) makes and publishes id; the others wait for it. The
 * folder comes from the launcher (TRSIM_RDZV). Writes go through a temporary
 * file and rename so a reader never sees half an id. */
/* is_root 2: publishes the id it is given (ncclCommGetUniqueId's, for a grow). */
static inline void trtest_exchange_id(ncclUniqueId *id, int is_root, const char *tag)
{
    const char *dir = getenv("TRSIM_RDZV");
    char path[4096], tmp[4200];
    if (!dir || !*dir) FAIL("TRSIM_RDZV is not set: run under trsim-launch");
    snprintf(path, sizeof path, "%s/%s.id", dir, tag);
    if (is_root) {
        if (is_root != 2) NCCLCHECK(ncclGetUniqueId(id));
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0) FAIL("write %s", tmp);
        if (rename(tmp, path) != 0) FAIL("rename %s: %s", tmp, strerror(errno));
        return;
    }
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (n == 1) return;
        }
        trtest_sleep_ms(2);
    }
}

/* Every rank of the job (world ranks) waits here for the others: a
 * barrier through files in the launcher's rendezvous folder, for tests that
 * must not let a rank exit while its peers still check something. */
static inline void trtest_file_barrier(const char *tag, int rank, int world)
{
    const char *dir = getenv("TRSIM_RDZV");
    char path[4096];
    if (!dir || !*dir) FAIL("TRSIM_RDZV is not set: run under trsim-launch");
    snprintf(path, sizeof path, "%s/%s.barrier.%d", dir, tag, rank);
    FILE *f = fopen(path, "w");
    if (!f) FAIL("cannot create %s", path);
    fclose(f);
    for (int q = 0; q < world; q++) {
        snprintf(path, sizeof path, "%s/%s.barrier.%d", dir, tag, q);
        trtest_wait_file(path, 2);
    }
}

/* Rank/world from the launcher, current device = LOCAL_RANK modulo devices. */
static inline void trtest_init(int *rank, int *world)
{
    *rank = trtest_env_int("RANK", -1);
    *world = trtest_env_int("WORLD_SIZE", -1);
    trtest_rank = *rank;
    if (*rank < 0 || *world <= 0) FAIL("RANK/WORLD_SIZE not set: run under trsim-launch");
    int ndev = 0;
    CUDACHECK(cudaGetDeviceCount(&ndev));
    CUDACHECK(cudaSetDevice(trtest_env_int("LOCAL_RANK", *rank) % ndev));
}

/* trtest_init, then the communicator of all ranks, its id from rank 0
 * under tag. */
static inline ncclComm_t trtest_world_comm(int *rank, int *world, const char *tag)
{
    trtest_init(rank, world);
    ncclUniqueId id;
    trtest_exchange_id(&id, *rank == 0, tag);
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, *world, id, *rank));
    return comm;
}

#endif
