// The GPU engine of the NaN/Inf check: kernels built by nvcc into a fatbin
// that libtrshim.so embeds and loads with the driver API (tr_nangpu.c), so
// they run whatever CUDA runtime the application uses. No CUDA runtime
// call, no device assert or trap: a kernel only reads the buffer and writes
// counts into mapped host memory.
//
// tr_nan_scan_<type>(p, n, acc): counts the NaN and infinite elements among
// the n elements at p and finds the first index of each, with the same bit
// tests as the host scanner (shim/tr_nanscan.c): 16-byte loads folded as
// (w & abs) + step per 64-bit word, a carry into a lane's sign bit meaning
// an all-ones exponent; only the 16 bytes that have one are decoded element
// by element. Each block adds its counts to acc (device memory) with one
// atomic per field, and only when it found something: a clean buffer costs
// no atomic.
// tr_nan_finish(acc, slot, ticket), one thread, launched after the scan on
// the same stream: copies the counts into the slot (mapped host memory,
// plain stores: no atomic ever goes to host memory), resets acc for the
// next check, fences (system scope), then publishes ticket in slot->done,
// which the shim's background thread polls.
// tr_nan_reset(acc), one thread: before the first use of an acc.
#include <stdint.h>

// the running counts of one check, in device memory
struct tr_nan_acc {
    unsigned long long nan, inf, first_nan, first_inf;
};

// its result, in mapped host memory
struct tr_nan_slot {
    unsigned long long nan, inf, first_nan, first_inf;
    unsigned int done;                                                  // ticket once published
    unsigned int pad[7];
};

template <int D> struct dt;
// abs, step, sign: 64-bit lanes of the fast test; EABS, EXP: one element
template <> struct dt<8> {   // float64
    static constexpr unsigned long long ABS = 0x7fffffffffffffffull, STEP = 0x0010000000000000ull,
                                        SIGN = 0x8000000000000000ull, EABS = 0x7fffffffffffffffull,
                                        EXP = 0x7ff0000000000000ull;
    static constexpr int ES = 8, HAS_INF = 1;
};
template <> struct dt<7> {   // float32
    static constexpr unsigned long long ABS = 0x7fffffff7fffffffull, STEP = 0x0080000000800000ull,
                                        SIGN = 0x8000000080000000ull, EABS = 0x7fffffffull, EXP = 0x7f800000ull;
    static constexpr int ES = 4, HAS_INF = 1;
};
template <> struct dt<6> {   // float16
    static constexpr unsigned long long ABS = 0x7fff7fff7fff7fffull, STEP = 0x0400040004000400ull,
                                        SIGN = 0x8000800080008000ull, EABS = 0x7fffull, EXP = 0x7c00ull;
    static constexpr int ES = 2, HAS_INF = 1;
};
template <> struct dt<9> {   // bfloat16
    static constexpr unsigned long long ABS = 0x7fff7fff7fff7fffull, STEP = 0x0080008000800080ull,
                                        SIGN = 0x8000800080008000ull, EABS = 0x7fffull, EXP = 0x7f80ull;
    static constexpr int ES = 2, HAS_INF = 1;
};
template <> struct dt<10> {  // float8 e4m3: only S.1111.111 (NaN)
    static constexpr unsigned long long ABS = 0x7f7f7f7f7f7f7f7full, STEP = 0x0101010101010101ull,
                                        SIGN = 0x8080808080808080ull, EABS = 0x7full, EXP = 0x7full;
    static constexpr int ES = 1, HAS_INF = 0;
};
template <> struct dt<11> {  // float8 e5m2
    static constexpr unsigned long long ABS = 0x7f7f7f7f7f7f7f7full, STEP = 0x0404040404040404ull,
                                        SIGN = 0x8080808080808080ull, EABS = 0x7full, EXP = 0x7cull;
    static constexpr int ES = 1, HAS_INF = 1;
};

struct acc {
    unsigned long long nan, inf, first_nan, first_inf;
};

template <int D> __device__ __forceinline__ void note(acc &a, unsigned long long bits, unsigned long long idx)
{
    unsigned long long e = bits & dt<D>::EABS;
    if (e < dt<D>::EXP) return;
    if (e > dt<D>::EXP || !dt<D>::HAS_INF) {
        a.nan++;
        if (idx < a.first_nan) a.first_nan = idx;
    } else {
        a.inf++;
        if (idx < a.first_inf) a.first_inf = idx;
    }
}

template <int D> __device__ __forceinline__ unsigned long long load_elem(const unsigned char *p)
{
    if (dt<D>::ES == 8) return *(const unsigned long long *)p;
    if (dt<D>::ES == 4) return *(const unsigned int *)p;
    if (dt<D>::ES == 2) return *(const unsigned short *)p;
    return *p;
}

__device__ __forceinline__ unsigned long long lo(const uint4 &v) { return ((unsigned long long)v.y << 32) | v.x; }
__device__ __forceinline__ unsigned long long hi(const uint4 &v) { return ((unsigned long long)v.w << 32) | v.z; }

template <int D> __device__ __forceinline__ unsigned long long fold(const uint4 &v)
{
    return ((lo(v) & dt<D>::ABS) + dt<D>::STEP) | ((hi(v) & dt<D>::ABS) + dt<D>::STEP);
}

// the 16 bytes of v, element by element; first = index of its first element
template <int D> __device__ __noinline__ void exact16(acc &a, uint4 v, unsigned long long first)
{
    constexpr int ES = dt<D>::ES, PER_WORD = 8 / ES;
    const unsigned long long mask = ES == 8 ? ~0ull : (1ull << (8 * ES)) - 1;
    unsigned long long w[2] = {lo(v), hi(v)};
#pragma unroll
    for (int e = 0; e < 16 / ES; e++) {
        unsigned long long bits = (w[e / PER_WORD] >> (8 * ES * (e % PER_WORD))) & mask;
        note<D>(a, bits, first + e);
    }
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ unsigned long long warp_min(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1) {
        unsigned long long u = __shfl_down_sync(0xffffffffu, v, o);
        v = u < v ? u : v;
    }
    return v;
}

#define TR_NAN_BLOCK 256

template <int D> __device__ __forceinline__ void scan(const unsigned char *p, unsigned long long n, tr_nan_acc *s)
{
    constexpr int ES = dt<D>::ES, PER_VEC = 16 / ES;
    acc a = {0, 0, ~0ull, ~0ull};
    unsigned long long addr = (unsigned long long)(uintptr_t)p;
    unsigned long long head = ((16 - (addr & 15)) & 15) / ES;
    if (head > n) head = n;
    unsigned long long nvec = (n - head) / PER_VEC;
    unsigned long long tail = head + nvec * PER_VEC;     // first element after the vectors
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;

    // unaligned head and the tail, element by element (under 16 bytes each)
    unsigned long long odd = head + (n - tail);
    for (unsigned long long i = tid; i < odd; i += stride) {
        unsigned long long e = i < head ? i : tail + (i - head);
        note<D>(a, load_elem<D>(p + e * ES), e);
    }

    const uint4 *v = (const uint4 *)(p + head * ES);
    unsigned long long i = tid;
    for (; i + 3 * stride < nvec; i += 4 * stride) {
        uint4 x0 = __ldcs(v + i), x1 = __ldcs(v + i + stride), x2 = __ldcs(v + i + 2 * stride),
              x3 = __ldcs(v + i + 3 * stride);
        if (__builtin_expect((fold<D>(x0) | fold<D>(x1) | fold<D>(x2) | fold<D>(x3)) & dt<D>::SIGN, 0)) {
            exact16<D>(a, x0, head + i * PER_VEC);
            exact16<D>(a, x1, head + (i + stride) * PER_VEC);
            exact16<D>(a, x2, head + (i + 2 * stride) * PER_VEC);
            exact16<D>(a, x3, head + (i + 3 * stride) * PER_VEC);
        }
    }
    for (; i < nvec; i += stride) {
        uint4 x = __ldcs(v + i);
        if (__builtin_expect(fold<D>(x) & dt<D>::SIGN, 0)) exact16<D>(a, x, head + i * PER_VEC);
    }

    // a clean block ends here, without any atomic
    if (!__syncthreads_or((a.nan | a.inf) != 0)) return;
    __shared__ unsigned long long sh[4][TR_NAN_BLOCK / 32];
    unsigned long long sn = warp_sum(a.nan), si = warp_sum(a.inf);
    unsigned long long fn = warp_min(a.first_nan), fi = warp_min(a.first_inf);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = (blockDim.x + 31) / 32;
    if (lane == 0) {
        sh[0][warp] = sn;
        sh[1][warp] = si;
        sh[2][warp] = fn;
        sh[3][warp] = fi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < nwarps; w++) {
            sn += sh[0][w];
            si += sh[1][w];
            fn = sh[2][w] < fn ? sh[2][w] : fn;
            fi = sh[3][w] < fi ? sh[3][w] : fi;
        }
        if (sn) {
            atomicAdd(&s->nan, sn);
            atomicMin(&s->first_nan, fn);
        }
        if (si) {
            atomicAdd(&s->inf, si);
            atomicMin(&s->first_inf, fi);
        }
    }
}

#define TR_SCAN_KERNEL(name, D)                                                                          \
    extern "C" __global__ void __launch_bounds__(TR_NAN_BLOCK)                                           \
        name(const unsigned char *p, unsigned long long n, tr_nan_acc *s)                                \
    {                                                                                                    \
        scan<D>(p, n, s);                                                                                \
    }

TR_SCAN_KERNEL(tr_nan_scan_f16, 6)
TR_SCAN_KERNEL(tr_nan_scan_f32, 7)
TR_SCAN_KERNEL(tr_nan_scan_f64, 8)
TR_SCAN_KERNEL(tr_nan_scan_bf16, 9)
TR_SCAN_KERNEL(tr_nan_scan_e4m3, 10)
TR_SCAN_KERNEL(tr_nan_scan_e5m2, 11)

extern "C" __global__ void tr_nan_reset(tr_nan_acc *a)
{
    a->nan = a->inf = 0;
    a->first_nan = a->first_inf = ~0ull;
}

extern "C" __global__ void tr_nan_finish(tr_nan_acc *a, tr_nan_slot *s, unsigned int ticket)
{
    volatile tr_nan_acc *va = a;
    volatile tr_nan_slot *vs = s;
    vs->nan = va->nan;
    vs->inf = va->inf;
    vs->first_nan = va->first_nan;
    vs->first_inf = va->first_inf;
    va->nan = va->inf = 0;
    va->first_nan = va->first_inf = ~0ull;
    __threadfence_system();       // the counts and the reset before the ticket
    vs->done = ticket;
}
