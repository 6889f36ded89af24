/* bench/shim_overhead: the time per call of
 *   - ncclAllReduce called from 30 frames deep (the application's frames
 *     under main), the same call site every time as in a training loop;
 *   - a cudaMalloc + cudaFree pair with 0, 10k and 1M other allocations live
 *     (the shim's allocation table must not slow down as it fills);
 *   - cudaGraphLaunch, 30 frames deep, of a graph that captured 2
 *     AllReduces on one communicator (one replay record: what it costs
 *     next to a recorded collective) and of one that captured 8 on 2
 *     communicators (2 lanes).
 * It links bench/libfakegpu.so, whose functions return at once, so run plain
 * it measures the call itself and run with LD_PRELOAD=libtrshim.so what the
 * shim adds. bench/run runs both and prints the table.
 *
 * Output, one line each: "shim yes|no PATH", then "NAME NS" per operation
 * (median over rounds of the mean time per call).
 *
 * Usage: shim_overhead [calls per round [only]]   only: one operation's
 * name as printed (for profiling it alone, e.g. under perf record). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include "bench_time.h"

#define NOIPA __attribute__((noipa))
#define ROUNDS 9
#define DEPTH 30

static volatile int sink;
static long per_round = 40000;
static ncclComm_t comm;
static void *sbuf, *rbuf;

static void die(const char *what)
{
    fprintf(stderr, "shim_overhead: %s failed\n", what);
    exit(1);
}

/* ---- ncclAllReduce from DEPTH frames deep ---- */
NOIPA double allreduce_rounds(void)
{
    double t[ROUNDS];
    for (int r = -1; r < ROUNDS; r++) {    /* round -1: warm-up */
        double t0 = now_ns();
        for (long i = 0; i < per_round; i++)
            if (ncclAllReduce(sbuf, rbuf, 1024, ncclFloat, ncclSum, comm, 0) != ncclSuccess)
                die("ncclAllReduce");
        double dt = (now_ns() - t0) / per_round;
        if (r >= 0) t[r] = dt;
    }
    return median(t, ROUNDS);
}

NOIPA double deep(int d)
{
    double r = d <= 1 ? allreduce_rounds() : deep(d - 1);
    sink += 1;
    return r;
}

/* ---- cudaGraphLaunch from DEPTH frames deep ---- */
static cudaGraphExec_t graph_exec;

NOIPA double launch_rounds(void)
{
    double t[ROUNDS];
    for (int r = -1; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < per_round; i++)
            if (cudaGraphLaunch(graph_exec, 0) != cudaSuccess) die("cudaGraphLaunch");
        double dt = (now_ns() - t0) / per_round;
        if (r >= 0) t[r] = dt;
    }
    return median(t, ROUNDS);
}

NOIPA double deep_launch(int d)
{
    double r = d <= 1 ? launch_rounds() : deep_launch(d - 1);
    sink += 1;
    return r;
}

/* a graph of ncoll AllReduces, alternating over comms[0..ncomms-1] */
static void capture(int ncoll, ncclComm_t *comms, int ncomms)
{
    cudaStream_t s = (cudaStream_t)0x5000;
    cudaGraph_t g;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess) die("cudaStreamBeginCapture");
    for (int i = 0; i < ncoll; i++)
        if (ncclAllReduce(sbuf, rbuf, 1024, ncclFloat, ncclSum, comms[i % ncomms], s) != ncclSuccess)
            die("ncclAllReduce (captured)");
    if (cudaStreamEndCapture(s, &g) != cudaSuccess) die("cudaStreamEndCapture");
    if (cudaGraphInstantiate(&graph_exec, g, 0) != cudaSuccess) die("cudaGraphInstantiate");
}

/* ---- cudaMalloc + cudaFree with live allocations ---- */
NOIPA double alloc_pair_rounds(long live)
{
    void **keep = NULL;
    if (live) {
        keep = malloc(live * sizeof *keep);
        if (!keep) die("malloc");
        for (long i = 0; i < live; i++)
            if (cudaMalloc(&keep[i], 4096 + (i & 7) * 512) != cudaSuccess) die("cudaMalloc");
    }
    double t[ROUNDS];
    for (int r = -1; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < per_round; i++) {
            void *p;
            if (cudaMalloc(&p, 1 << 20) != cudaSuccess) die("cudaMalloc");
            if (cudaFree(p) != cudaSuccess) die("cudaFree");
        }
        double dt = (now_ns() - t0) / per_round;
        if (r >= 0) t[r] = dt;
    }
    for (long i = 0; i < live; i++) cudaFree(keep[i]);
    free(keep);
    return median(t, ROUNDS);
}

int main(int argc, char **argv)
{
    if (argc > 1) per_round = atol(argv[1]);
    const char *only = argc > 2 ? argv[2] : NULL;
    if (per_round <= 0) {
        fprintf(stderr, "usage: shim_overhead [calls per round [only]]\n");
        return 2;
    }
    /* which library answers ncclAllReduce: the shim when preloaded */
    Dl_info di;
    void *f = dlsym(RTLD_DEFAULT, "ncclAllReduce");
    int shim = f && dladdr(f, &di) && di.dli_fname && strstr(di.dli_fname, "libtrshim");
    printf("shim %s %s\n", shim ? "yes" : "no", f && dladdr(f, &di) ? di.dli_fname : "?");

    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess) die("cudaGetDevice");
    if (cudaMalloc(&sbuf, 4096) != cudaSuccess || cudaMalloc(&rbuf, 4096) != cudaSuccess) die("cudaMalloc");
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) die("ncclGetUniqueId");
    if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) die("ncclCommInitRank");

    if (!only || strcmp(only, "allreduce_30deep") == 0) {
        printf("allreduce_30deep %.1f\n", deep(DEPTH));
        fflush(stdout);
    }
    if (!only || strcmp(only, "graph_launch_2coll") == 0) {
        capture(2, &comm, 1);
        printf("graph_launch_2coll %.1f\n", deep_launch(DEPTH));
        fflush(stdout);
    }
    if (!only || strcmp(only, "graph_launch_8coll_2comms") == 0) {
        ncclComm_t two[2] = {comm, NULL};
        ncclUniqueId id2;
        if (ncclGetUniqueId(&id2) != ncclSuccess || ncclCommInitRank(&two[1], 1, id2, 0) != ncclSuccess)
            die("ncclCommInitRank");
        capture(8, two, 2);
        printf("graph_launch_8coll_2comms %.1f\n", deep_launch(DEPTH));
        fflush(stdout);
    }
    static const long lives[] = {0, 10000, 1000000};
    static const char *names[] = {"0", "10k", "1M"};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "alloc_pair_live_%s", names[i]);
        if (only && strcmp(only, name) != 0) continue;
        printf("alloc_pair_live_%s %.1f\n", names[i], alloc_pair_rounds(lives[i]));
        fflush(stdout);
    }
    ncclCommDestroy(comm);
    cudaFree(sbuf);
    cudaFree(rbuf);
    return 0;
}
