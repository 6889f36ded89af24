/* Stand-ins for tr_core.h's functions used by tr_memory.c (see standins.h). */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>

#include "tr_core.h"
#include "tr_ring_int.h"
#include "standins.h"

atomic_int standin_captures, standin_activations, standin_warnings;
int standin_disabled;
int standin_fake_real;
static __thread int depth;
static __thread int32_t next_stack = -2;
static atomic_int fresh_stack = 1000;

static struct { int has; uint64_t comm, seq; } colls[64];

void standin_depth_push(void) { depth++; }
void standin_depth_pop(void) { depth--; }
void standin_set_stack(int32_t index) { next_stack = index; }
void standin_set_collective(int device, int has, uint64_t comm, uint64_t seq)
{
    colls[device].has = has;
    colls[device].comm = comm;
    colls[device].seq = seq;
}

/* the ring: a header in memory, for tr_ring_live.c's mirror of the counters */
static trr_header ring_header;
trr_header *tr_ring_header(void) { return &ring_header; }

/* recorded: 2, "not activated yet" (tr_init.h's tr_enter then calls tr_activate) */
int tr_nest(void) { return depth++ == 0 && !standin_disabled ? 2 : 0; }
void tr_leave(void) { depth--; }
int tr_depth(void) { return depth; }
void tr_activate(void) { atomic_fetch_add(&standin_activations, 1); }

uint64_t tr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tr_warn(const char *fmt, ...)
{
    va_list ap;
    atomic_fetch_add(&standin_warnings, 1);
    fputs("trshim: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int32_t tr_stack_capture(void)
{
    atomic_fetch_add(&standin_captures, 1);
    return next_stack != -2 ? next_stack : atomic_fetch_add(&fresh_stack, 1);
}

/* no Python in these tests: no Python stacks */
int32_t tr_pystack_capture(void)
{
    return -1;
}

int tr_nccl_last_collective(int device, uint64_t *comm_id, uint64_t *seq)
{
    if (device < 0 || device >= 64 || !colls[device].has)
        return 0;
    *comm_id = colls[device].comm;
    *seq = colls[device].seq;
    return 1;
}

/* ---- fakes: the cheapest possible "real" allocator, for timing ---------- */
/* Addresses from a counter; with standin_fake_reuse, a freed address is
 * handed out again first (per thread, last in first out), as allocators do. */
int standin_fake_reuse;
static _Atomic uintptr_t fake_next = 0x100000;
static __thread uintptr_t fake_freed[64];
static __thread int fake_nfreed;
static cudaError_t fake_malloc(void **p, size_t n)
{
    (void)n;
    if (standin_fake_reuse && fake_nfreed > 0)
        *p = (void *)fake_freed[--fake_nfreed];
    else
        *p = (void *)atomic_fetch_add(&fake_next, 256);
    return cudaSuccess;
}
static cudaError_t fake_free(void *p)
{
    if (standin_fake_reuse && fake_nfreed < 64)
        fake_freed[fake_nfreed++] = (uintptr_t)p;
    return cudaSuccess;
}
static cudaError_t fake_get_device(int *d) { *d = 0; return cudaSuccess; }

void *standin_next(const char *name) { return dlsym(RTLD_NEXT, name); }

void *tr_real(const char *name, tr_lib lib)
{
    (void)lib;
    if (standin_fake_real) {
        if (!strcmp(name, "cudaMalloc")) return (void *)fake_malloc;
        if (!strcmp(name, "cudaFree")) return (void *)fake_free;
        if (!strcmp(name, "cudaGetDevice")) return (void *)fake_get_device;
    }
    return dlsym(RTLD_NEXT, name);
}
