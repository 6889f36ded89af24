/* bench/libpyloop.so: the C half of bench/py_overhead.py. Python calls
 * loop_allreduce through ctypes.CDLL (GIL released, as around PyTorch's
 * NCCL calls) from the innermost frame of a 30-frame Python stack; the loop
 * calls ncclAllReduce as the dynamic linker resolves it for the process
 * (RTLD_DEFAULT: the preloaded shim's wrapper when there is one, else
 * libfakegpu.so's, which returns at once) and returns the mean ns per call
 * of the median of `rounds` rounds of n calls. heap_in_use: malloc's bytes
 * in use (glibc mallinfo2), to see whether captures keep memory. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include "bench_time.h"

typedef int (*allreduce_fn)(const void *, void *, size_t, int, int, void *, void *);

#define API __attribute__((visibility("default")))

API double loop_allreduce(long n, int rounds, void *buf, void *comm)
{
    allreduce_fn f = (allreduce_fn)dlsym(RTLD_DEFAULT, "ncclAllReduce");
    if (!f || rounds < 1 || rounds > 64) return -1;
    double t[64];
    for (int r = -1; r < rounds; r++) {     /* round -1: warm-up */
        double t0 = now_ns();
        for (long i = 0; i < n; i++)
            if (f(buf, buf, 1024, 7, 0, comm, NULL) != 0) return -1;
        if (r >= 0) t[r] = (now_ns() - t0) / n;
    }
    return median(t, rounds);
}

API long long heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 m = mallinfo2();
    return (long long)(m.uordblks + m.hblkhd);
#else
    return -1;
#endif
}

API const char *which_allreduce(void)
{
    Dl_info di;
    void *f = dlsym(RTLD_DEFAULT, "ncclAllReduce");
    return f && dladdr(f, &di) && di.dli_fname ? di.dli_fname : "?";
}
