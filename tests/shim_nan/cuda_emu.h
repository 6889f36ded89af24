/* Just enough CUDA, on the CPU, to run shim/nan/tr_nangpu.cu's kernels in a
 * test (emu_nangpu.cpp): blocks one after the other, the threads of a block
 * as pthreads; __syncthreads is a barrier, __syncthreads_or and
 * __shfl_down_sync go through shared arrays between barriers (every thread
 * of the block reaches them together, as in the kernel). Tests the kernels'
 * arithmetic and indexing (alignment, head, tail, grid stride, block
 * reductions), not the GPU's memory model. */
#pragma once
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(x)
#define __shared__ static

struct emu_dim { unsigned x, y, z; };
extern thread_local emu_dim threadIdx, blockIdx;
extern emu_dim blockDim, gridDim;
struct uint4 { unsigned x, y, z, w; };
extern pthread_barrier_t emu_bar;
extern int emu_or;
extern unsigned long long emu_shfl[1024];

static inline uint4 __ldcs(const uint4 *p) { return *p; }
static inline void __syncthreads() { pthread_barrier_wait(&emu_bar); }
static inline int __syncthreads_or(int pred)
{
    __syncthreads();
    if (threadIdx.x == 0) emu_or = 0;
    __syncthreads();
    if (pred) __atomic_fetch_or(&emu_or, 1, __ATOMIC_SEQ_CST);
    __syncthreads();
    int r = emu_or;
    __syncthreads();
    return r;
}
static inline unsigned long long __shfl_down_sync(unsigned, unsigned long long v, int o)
{
    emu_shfl[threadIdx.x] = v;
    __syncthreads();
    unsigned lane = threadIdx.x % 32;
    unsigned long long r = lane + o < 32 ? emu_shfl[threadIdx.x + o] : v;
    __syncthreads();
    return r;
}
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
    unsigned long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return o;
}
