/* Micro-benchmark: nanoseconds per cudaMalloc + cudaFree pair.
 *
 * bench_memory_unit (BENCH_STANDINS): the wrappers of tr_memory.c with the
 * stand-ins and a fake allocator that costs next to nothing, against the
 * fake called directly: the difference is tr_memory.c's own cost.
 *   bench_memory_unit [PAIRS]
 * bench_memory (linked with libtrsim only): run it with and without
 * LD_PRELOAD=libtrshim.so and compare: the whole shim's cost per pair.
 *   bench_memory [PAIRS]
 * Both repeat the measurement with 0, 10^4 and 10^6 (BENCH_MAX_LIVE) other
 * allocations live: the cost must not grow with them. Then the worst case:
 * each pair frees the oldest allocation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda_runtime_api.h>

#ifdef BENCH_STANDINS
#include "standins.h"
#include "tr_core.h"
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);

static double pairs_ns(malloc_fn m, free_fn f, long pairs)
{
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (long i = 0; i < pairs; i++) {
            void *p;
            if (m(&p, 256) != cudaSuccess || f(p) != cudaSuccess) {
                fprintf(stderr, "allocation failed\n");
                exit(1);
            }
        }
        double ns = (now_s() - t0) * 1e9 / (double)pairs;
        if (ns < best)
            best = ns;
    }
    return best;
}

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 200000;
    malloc_fn direct_m = NULL;
    free_fn direct_f = NULL;
#ifdef BENCH_STANDINS
    standin_fake_real = 1;
    standin_fake_reuse = getenv("BENCH_FRESH") == NULL;
    /* the fakes, called without the wrappers */
    direct_m = (malloc_fn)tr_real("cudaMalloc", TR_LIB_CUDART);
    direct_f = (free_fn)tr_real("cudaFree", TR_LIB_CUDART);
#endif
    long max_live = getenv("BENCH_MAX_LIVE") ? atol(getenv("BENCH_MAX_LIVE")) : 1000000;
    long live_counts[] = {0, 10000 < max_live ? 10000 : max_live, max_live};
    long held = 0;
    void **keep = malloc(sizeof(void *) * (size_t)(max_live > 0 ? max_live : 1));
    for (int k = 0; k < 3; k++) {
        while (held < live_counts[k]) {
            if (cudaMalloc(&keep[held], 256) != cudaSuccess) {
                fprintf(stderr, "cannot hold %ld allocations\n", live_counts[k]);
                return 1;
            }
            held++;
        }
        double wrapped = pairs_ns(cudaMalloc, cudaFree, pairs);
        if (direct_m) {
            double direct = pairs_ns(direct_m, direct_f, pairs);
            printf("live %7ld: wrapped %7.1f ns/pair, direct %7.1f ns/pair, added %7.1f ns/pair\n",
                   held, wrapped, direct, wrapped - direct);
        } else {
            printf("live %7ld: %7.1f ns per cudaMalloc+cudaFree pair\n", held, wrapped);
        }
    }
    /* The worst case: every pair frees the oldest of the live allocations
     * (in the big table: a cache miss) and keeps the new one. */
    double t0 = now_s();
    long n = pairs < held ? pairs : held;
    for (long i = 0; i < n; i++) {
        void *p;
        if (cudaFree(keep[i]) != cudaSuccess || cudaMalloc(&p, 256) != cudaSuccess) {
            fprintf(stderr, "allocation failed\n");
            return 1;
        }
        keep[i] = p;
    }
    printf("live %7ld, freeing the oldest each time: %7.1f ns/pair (all included)\n", held,
           (now_s() - t0) * 1e9 / (double)n);
    while (held > 0)
        cudaFree(keep[--held]);
    free(keep);
    return 0;
}
