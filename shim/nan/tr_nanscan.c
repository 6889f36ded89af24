/* Host scanners of the NaN/Inf check (see tr_nanscan.h).
 *
 * Fast path: the buffer is read as 64-bit words, 16 bytes at a time with
 * GCC vector extensions (SSE2 on any x86-64, NEON on arm64), and each word
 * is folded into an accumulator as acc |= (w & abs) + step. In every lane
 * (an element), abs clears the sign bit and step is the smallest value that
 * carries into the sign bit exactly when the exponent is all ones:
 *   float16  abs 0x7fff step 0x0400     bfloat16 abs 0x7fff step 0x0080
 *   float32  abs 0x7fffffff step 0x00800000
 *   float64  abs 0x7fff..ff step 0x0010..00
 *   e5m2     abs 0x7f step 0x04          e4m3 abs 0x7f step 0x01 (only 0x7f)
 * A lane never carries into its neighbour (abs + step < 2^lane bits), and
 * the sign bits of the OR of all words are the OR of each word's sign bits,
 * so a block is clean when (acc & sign) == 0: three vector operations per 16
 * bytes, which keeps up with memory. A block that is not clean (4 KiB) is
 * scanned again element by element for exact counts and first indexes. */
#include <string.h>

#include "tr_nanscan.h"

typedef struct {
    uint64_t abs, step, sign;
} lanes;

#define REP2(x) ((uint64_t)(x) * 0x0000000100000001ull)
#define REP4(x) ((uint64_t)(x) * 0x0001000100010001ull)
#define REP8(x) ((uint64_t)(x) * 0x0101010101010101ull)

size_t tr_nanscan_esize(int dtype)
{
    switch (dtype) {
    case TR_NS_FLOAT64: return 8;
    case TR_NS_FLOAT32: return 4;
    case TR_NS_FLOAT16: case TR_NS_BFLOAT16: return 2;
    case TR_NS_E4M3: case TR_NS_E5M2: return 1;
    default: return 0;
    }
}

static int lanes_of(int dtype, lanes *l)
{
    switch (dtype) {
    case TR_NS_FLOAT64: *l = (lanes){0x7fffffffffffffffull, 0x0010000000000000ull, 0x8000000000000000ull}; break;
    case TR_NS_FLOAT32: *l = (lanes){REP2(0x7fffffff), REP2(0x00800000), REP2(0x80000000)}; break;
    case TR_NS_FLOAT16: *l = (lanes){REP4(0x7fff), REP4(0x0400), REP4(0x8000)}; break;
    case TR_NS_BFLOAT16: *l = (lanes){REP4(0x7fff), REP4(0x0080), REP4(0x8000)}; break;
    case TR_NS_E5M2: *l = (lanes){REP8(0x7f), REP8(0x04), REP8(0x80)}; break;
    case TR_NS_E4M3: *l = (lanes){REP8(0x7f), REP8(0x01), REP8(0x80)}; break;
    default: return -1;
    }
    return 0;
}

int tr_nanscan_classify(int dtype, uint64_t bits)
{
    uint64_t a;
    switch (dtype) {
    case TR_NS_FLOAT64:
        a = bits & 0x7fffffffffffffffull;
        return a > 0x7ff0000000000000ull ? 1 : a == 0x7ff0000000000000ull ? 2 : 0;
    case TR_NS_FLOAT32:
        a = bits & 0x7fffffffull;
        return a > 0x7f800000ull ? 1 : a == 0x7f800000ull ? 2 : 0;
    case TR_NS_FLOAT16:
        a = bits & 0x7fffull;
        return a > 0x7c00ull ? 1 : a == 0x7c00ull ? 2 : 0;
    case TR_NS_BFLOAT16:
        a = bits & 0x7fffull;
        return a > 0x7f80ull ? 1 : a == 0x7f80ull ? 2 : 0;
    case TR_NS_E5M2:
        a = bits & 0x7full;
        return a > 0x7cull ? 1 : a == 0x7cull ? 2 : 0;
    case TR_NS_E4M3:
        return (bits & 0x7full) == 0x7full ? 1 : 0;
    default:
        return 0;
    }
}

/* Element by element: n elements at p, the first being element base. One
 * loop per datatype, so the test is inlined; only blocks that hold a NaN or
 * an infinity come here. */
#define EXACT_LOOP(T, ABS, EXP, HAS_INF)                                                  \
    for (size_t i = 0; i < n; i++) {                                                      \
        T v;                                                                              \
        memcpy(&v, p + i * sizeof(T), sizeof(T));                                         \
        T a = (T)(v & (ABS));                                                             \
        if (__builtin_expect(a < (EXP), 1)) continue;                                     \
        if (a > (EXP) || !(HAS_INF)) {                                                    \
            if (base + i < r->first_nan) r->first_nan = base + i;                         \
            r->nan++;                                                                     \
        } else {                                                                          \
            if (base + i < r->first_inf) r->first_inf = base + i;                         \
            r->inf++;                                                                     \
        }                                                                                 \
    }

static void scan_exact(int dtype, const unsigned char *p, size_t n, uint64_t base, tr_nanscan_result *r)
{
    switch (dtype) {
    case TR_NS_FLOAT64: EXACT_LOOP(uint64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ull, 1) break;
    case TR_NS_FLOAT32: EXACT_LOOP(uint32_t, 0x7fffffffu, 0x7f800000u, 1) break;
    case TR_NS_FLOAT16: EXACT_LOOP(uint16_t, 0x7fff, 0x7c00, 1) break;
    case TR_NS_BFLOAT16: EXACT_LOOP(uint16_t, 0x7fff, 0x7f80, 1) break;
    case TR_NS_E5M2: EXACT_LOOP(uint8_t, 0x7f, 0x7c, 1) break;
    case TR_NS_E4M3: EXACT_LOOP(uint8_t, 0x7f, 0x7f, 0) break;
    default: break;
    }
}

/* OR over n words (n a multiple of 8) of (w & abs) + step, two 32-byte
 * accumulators. x86-64 gets an AVX2 clone besides the SSE2 baseline (picked
 * once at load time); elsewhere the compiler lowers the vectors to what the
 * target has. A shim built with a sanitizer (tests/sanitize) has no clones:
 * their resolver runs while the dynamic linker relocates the shim, before
 * the sanitizer's runtime is initialised, and instrumented code there
 * crashes (TSan's function-entry hook: SIGSEGV before main). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define TR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TR_CLONES
#endif
typedef uint64_t v4u64 __attribute__((vector_size(32)));

TR_CLONES static uint64_t fold_words(const unsigned char *p, size_t n, uint64_t abs, uint64_t step)
{
    const v4u64 a = {abs, abs, abs, abs}, s = {step, step, step, step};
    v4u64 acc0 = {0, 0, 0, 0}, acc1 = {0, 0, 0, 0};
    for (size_t i = 0; i < n; i += 8) {
        v4u64 w0, w1;
        memcpy(&w0, p + 8 * i, 32);
        memcpy(&w1, p + 8 * i + 32, 32);
        acc0 |= (w0 & a) + s;
        acc1 |= (w1 & a) + s;
    }
    v4u64 acc = acc0 | acc1;
    return acc[0] | acc[1] | acc[2] | acc[3];
}

#define BLOCK_BYTES 4096

int tr_nanscan(int dtype, const void *buf, size_t n, uint64_t base, tr_nanscan_result *r)
{
    lanes l;
    size_t es = tr_nanscan_esize(dtype);
    if (!es || lanes_of(dtype, &l) != 0) return -1;
    const unsigned char *p = buf;
    /* head: up to an 8-byte boundary */
    size_t head = (size_t)((8 - ((uintptr_t)p & 7)) & 7) / es;
    if (head > n) head = n;
    scan_exact(dtype, p, head, base, r);
    p += head * es;
    base += head;
    n -= head;
    /* whole blocks, then what is left in whole 64-byte groups */
    size_t per_block = BLOCK_BYTES / es;
    while (n >= 64 / es) {
        size_t elems = n >= per_block ? per_block : n / (64 / es) * (64 / es);
        if (fold_words(p, elems * es / 8, l.abs, l.step) & l.sign) scan_exact(dtype, p, elems, base, r);
        p += elems * es;
        base += elems;
        n -= elems;
    }
    scan_exact(dtype, p, n, base, r);
    return 0;
}
