/* Helper of tests/python/jobs/py_gil.py: a C function, called through
 * ctypes.CDLL (so with the GIL released, as PyTorch's C++ runs), that waits,
 * then calls ncclAllReduce through the pointer it is given (the shim's
 * wrapper, looked up by simnccl) while another Python thread holds the GIL,
 * and reports when the call entered and returned (CLOCK_MONOTONIC ns). */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int (*allreduce_fn)(const void *, void *, size_t, int, int, void *, void *);

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((visibility("default"))) int delayed_allreduce(void *fn, void *buf, size_t count, int dtype, int op,
                                                             void *comm, void *stream, int delay_ms,
                                                             uint64_t *t_enter, uint64_t *t_exit)
{
    struct timespec d = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0) {
    }
    *t_enter = now_ns();
    int r = ((allreduce_fn)fn)(buf, buf, count, dtype, op, comm, stream);
    *t_exit = now_ns();
    return r;
}
