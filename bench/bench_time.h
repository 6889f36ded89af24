/* The clock and the median the benchmark programs share: each number they
 * print is the median of several rounds' mean time per call. */
#ifndef BENCH_TIME_H
#define BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

#endif
