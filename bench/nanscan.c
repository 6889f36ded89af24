/* bench/nanscan: speed of the host engine's scanners (shim/nan/tr_nanscan.c)
 * against a plain read of the same buffer in the same run.
 *
 * For each checked datatype, a buffer of MiB finite values (a mix of
 * magnitudes and signs, no NaN or Inf: the common case) is read ROUNDS
 * times by both, alternating: the plain read sums it as 64-bit words with
 * the same vector width and the same AVX2/SSE2 choice as the scanner, so
 * the ratio is what the NaN test costs on top of bringing the bytes in.
 * Each time is the median of the rounds.
 *
 * Output, one line per datatype:
 *   nanscan DTYPE MIB read_gbps GBPS scan_gbps GBPS ratio R
 * Usage: nanscan [MiB [rounds]]   (default 64 MiB, the default cap of a
 * check, 9 rounds) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tr_nanscan.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif
typedef uint64_t v4u64 __attribute__((vector_size(32)));

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* the plain read: sum of the buffer as 64-bit words, two 32-byte accumulators */
CLONES __attribute__((noinline)) static uint64_t plain_read(const unsigned char *p, size_t bytes)
{
    v4u64 a0 = {0, 0, 0, 0}, a1 = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
        v4u64 w0, w1;
        memcpy(&w0, p + i, 32);
        memcpy(&w1, p + i + 32, 32);
        a0 += w0;
        a1 += w1;
    }
    v4u64 a = a0 + a1;
    uint64_t s = a[0] + a[1] + a[2] + a[3];
    for (; i < bytes; i++) s += p[i];
    return s;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* a finite value of dtype, varied with i */
static uint64_t finite(int dt, uint64_t i)
{
    uint64_t h = (i * 0x9e3779b97f4a7c15ull) >> 7;
    switch (dt) {
    case TR_NS_FLOAT16: return (h % 0x7c00) | (h & 0x10000 ? 0x8000 : 0);
    case TR_NS_BFLOAT16: return (h % 0x7f80) | (h & 0x10000 ? 0x8000 : 0);
    case TR_NS_E4M3: return (h % 0x7f) | (h & 0x100 ? 0x80 : 0);
    case TR_NS_E5M2: return (h % 0x7c) | (h & 0x100 ? 0x80 : 0);
    case TR_NS_FLOAT32: return (h % 0x7f800000u) | (h & (1ull << 40) ? 0x80000000u : 0);
    default: return (h % 0x7ff0000000000000ull) | (i & 1 ? 0x8000000000000000ull : 0);
    }
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64;
    int rounds = argc > 2 ? atoi(argv[2]) : 9;
    if (!mib || rounds <= 0 || rounds > 1000) {
        fprintf(stderr, "usage: nanscan [MiB [rounds]]\n");
        return 2;
    }
    size_t bytes = mib << 20;
    unsigned char *buf = aligned_alloc(4096, bytes);
    double *tr = malloc(rounds * sizeof *tr), *ts = malloc(rounds * sizeof *ts);
    if (!buf || !tr || !ts) return 2;
    static const int dts[] = {TR_NS_FLOAT32, TR_NS_FLOAT16, TR_NS_BFLOAT16, TR_NS_FLOAT64, TR_NS_E4M3, TR_NS_E5M2};
    static const char *const names[] = {"float32", "float16", "bfloat16", "float64", "float8e4m3", "float8e5m2"};
    volatile uint64_t sink = 0;
    int bad = 0;
    for (int k = 0; k < 6; k++) {
        int dt = dts[k];
        size_t es = tr_nanscan_esize(dt), n = bytes / es;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = finite(dt, i);
            memcpy(buf + i * es, &v, es);
        }
        for (int r = -1; r < rounds; r++) {     /* round -1: warm-up */
            double t0 = now();
            sink += plain_read(buf, bytes);
            double t1 = now();
            tr_nanscan_result res;
            tr_nanscan_init(&res);
            tr_nanscan(dt, buf, n, 0, &res);
            double t2 = now();
            if (res.nan || res.inf) bad = 1;
            if (r >= 0) {
                tr[r] = t1 - t0;
                ts[r] = t2 - t1;
            }
        }
        qsort(tr, rounds, sizeof *tr, cmp);
        qsort(ts, rounds, sizeof *ts, cmp);
        double read = bytes / tr[rounds / 2] / 1e9, scan = bytes / ts[rounds / 2] / 1e9;
        printf("nanscan %s %zu read_gbps %.2f scan_gbps %.2f ratio %.2f\n", names[k], mib, read, scan, scan / read);
    }
    if (bad) {
        fprintf(stderr, "nanscan: found a NaN or Inf in a finite buffer\n");
        return 1;
    }
    return 0;
}
