/* A test library around shim/stacks/python/tr_python.c alone (no other part of the shim):
 * Python programs load it with ctypes and call it from the code whose frames
 * they check (tests/python/test_frames.py, bench/py_capture.py). ctypes.CDLL
 * releases the GIL around the call, as PyTorch does around NCCL calls.
 *
 *   probe(out, cap)          captures the calling thread's Python stack and
 *                            writes "file:line in qualname\n" per frame,
 *                            innermost first; returns the frame count
 *   probe_set_depth(d)       the capture limit (default 64)
 *   probe_state(out, cap)    the version string; returns tr_py_state()
 *   probe_describe(out, cap) tr_py_describe()
 *   probe_raw(frames, max)   the tr_py_frame array itself
 *   probe_from_c_thread()    captures from a new pthread (no Python): count
 *   probe_bench(...)         ns per capture, captures repeated in C
 *   probe_stats(out6)        the thread's tr_py_stats */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define HAVE_MALLINFO2 1
#endif

#include "tr_core.h"
#include "tr_python.h"

#define API __attribute__((visibility("default")))

/* tr_core.c's warning function, as the shim has it: each format once. */
void tr_warn(const char *fmt, ...)
{
    static _Atomic(const char *) seen[64];
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++) {
        const char *cur = atomic_load(&seen[i]);
        if (cur == fmt) return;
        if (!cur) {
            const char *expect = NULL;
            if (atomic_compare_exchange_strong(&seen[i], &expect, fmt)) break;
            if (expect == fmt) return;
        }
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "trshim: %s\n", msg);
}

static int g_depth = 64;

API int probe_set_depth(int d)
{
    int old = g_depth;
    g_depth = d < 0 ? 0 : d > 4096 ? 4096 : d;
    return old;
}

API int probe(char *out, int cap)
{
    tr_py_frame fr[4096];
    int n = tr_py_capture(fr, g_depth);
    size_t len = 0;
    if (cap > 0) out[0] = 0;
    for (int i = 0; i < n; i++) {
        char file[1024], qual[512];
        int first = 0;
        if (tr_py_code_info(fr[i].code, file, sizeof file, qual, sizeof qual, &first) != 0) {
            snprintf(file, sizeof file, "?");
            snprintf(qual, sizeof qual, "?");
        }
        int k = snprintf(out + len, cap > 0 && len < (size_t)cap ? (size_t)cap - len : 0, "%s:%d in %s\n",
                         file, fr[i].line, qual);
        if (k < 0 || len + (size_t)k >= (size_t)cap) break;
        len += (size_t)k;
    }
    return n;
}

API int probe_state(char *out, int cap)
{
    tr_py_init();
    if (cap > 0) snprintf(out, (size_t)cap, "%s", tr_py_version_str());
    return tr_py_state();
}

API void probe_describe(char *out, int cap)
{
    if (cap > 0) tr_py_describe(out, (size_t)cap);
}

API int probe_raw(tr_py_frame *frames, int max)
{
    return tr_py_capture(frames, max);
}

API int probe_code_matches(uintptr_t code, uint64_t key)
{
    return tr_py_code_matches(code, key);
}

static void *c_thread(void *arg)
{
    tr_py_frame fr[64];
    *(int *)arg = tr_py_capture(fr, 64);
    return NULL;
}

API int probe_from_c_thread(void)
{
    pthread_t t;
    int n = -1;
    if (pthread_create(&t, NULL, c_thread, &n) != 0) return -2;
    pthread_join(t, NULL);
    return n;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static long long g_heap_delta;

static long long heap_in_use(void)
{
#ifdef HAVE_MALLINFO2
    return (long long)mallinfo2().uordblks;
#else
    return 0;
#endif
}

/* Bytes of heap the last probe_bench's captures kept (0: they allocate
 * nothing once the thread's cache exists). */
API long long probe_bench_heap_delta(void)
{
    return g_heap_delta;
}

/* Captures iters times (max frames each) from here; flush: empty the line
 * cache before each (the cost of lines not cached). Returns ns per capture,
 * *frames the frame count of the last one. */
API double probe_bench(int iters, int max, int flush, int *frames)
{
    tr_py_frame fr[4096];
    if (max > 4096) max = 4096;
    int n = tr_py_capture(fr, max);   /* warm: the check, the cache */
    long long h0 = heap_in_use();
    double t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        if (flush) tr_py_flush_thread_cache();
        n = tr_py_capture(fr, max);
    }
    double t1 = now_ns();
    g_heap_delta = heap_in_use() - h0;
    if (frames) *frames = n;
    return (t1 - t0) / (iters > 0 ? iters : 1);
}

/* The cost of the loop's other work: flushing alone. */
API double probe_bench_flush_only(int iters)
{
    tr_py_frame fr[1];
    tr_py_capture(fr, 1);
    double t0 = now_ns();
    for (int i = 0; i < iters; i++) tr_py_flush_thread_cache();
    return (now_ns() - t0) / (iters > 0 ? iters : 1);
}

API void probe_stats(uint64_t *out)
{
    tr_py_stats s;
    tr_py_get_thread_stats(&s);
    out[0] = s.captures;
    out[1] = s.frames;
    out[2] = s.line_hits;
    out[3] = s.line_misses;
    out[4] = s.cut;
    out[5] = s.bad_chain;
}
