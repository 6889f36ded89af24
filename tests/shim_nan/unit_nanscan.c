/* The host scanners of the NaN/Inf check (shim/nan/tr_nanscan.c) against a
 * scalar reference that shares no code with them: every one of the 65536
 * float16 and bfloat16 patterns and the 256 patterns of each float8 type,
 * decoded to float by the simulator's conversions (tests/sim/dtype.c; the
 * compiler's _Float16 for float16 where it has one) and classified with
 * isnan/isinf; float32 and float64 over every exponent-all-ones class and a
 * million random patterns. Then buffers: each pattern alone at a random
 * place in a clean buffer of random length and misalignment (head, 4 KiB
 * blocks, 64-byte groups, tail), many at once (counts, first indexes), and
 * all patterns of a type in one buffer. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "tr_nanscan.h"

static int failures;
#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            if (failures++ < 20) {                                                           \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                         \
                fprintf(stderr, __VA_ARGS__);                                                \
                fputc('\n', stderr);                                                         \
            }                                                                                \
        }                                                                                    \
    } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* 1 NaN, 2 infinity, 0 finite: decode, then isnan/isinf */
static int ref_class(int dt, uint64_t bits)
{
    double v;
    switch (dt) {
    case TR_NS_FLOAT16: {
#ifdef __FLT16_MAX__
        _Float16 h;
        uint16_t b = (uint16_t)bits;
        memcpy(&h, &b, 2);
        v = (double)h;
#else
        v = trsim_half_to_float((uint16_t)bits);
#endif
        break;
    }
    case TR_NS_BFLOAT16: v = trsim_bf16_to_float((uint16_t)bits); break;
    case TR_NS_E4M3: v = trsim_e4m3_to_float((uint8_t)bits); break;
    case TR_NS_E5M2: v = trsim_e5m2_to_float((uint8_t)bits); break;
    case TR_NS_FLOAT32: {
        uint32_t b = (uint32_t)bits;
        float f;
        memcpy(&f, &b, 4);
        v = f;
        break;
    }
    default: memcpy(&v, &bits, 8); break;
    }
    return isnan(v) ? 1 : isinf(v) ? 2 : 0;
}

static const char *name(int dt)
{
    switch (dt) {
    case TR_NS_FLOAT16: return "float16";
    case TR_NS_BFLOAT16: return "bfloat16";
    case TR_NS_E4M3: return "e4m3";
    case TR_NS_E5M2: return "e5m2";
    case TR_NS_FLOAT32: return "float32";
    default: return "float64";
    }
}

static void put(unsigned char *p, size_t i, size_t es, uint64_t bits) { memcpy(p + i * es, &bits, es); }

/* A finite filler that is not zero (exercises the fast test on real data). */
static uint64_t filler(int dt, size_t i)
{
    switch (dt) {
    case TR_NS_FLOAT16: return 0x3c00u + (i % 0x3000u);       /* 1 .. below 65504 */
    case TR_NS_BFLOAT16: return 0x3f80u + (i % 0x3f00u);
    case TR_NS_E4M3: return (i % 0x7fu) | (i & 0x100 ? 0x80u : 0);      /* never 0x7f / 0xff */
    case TR_NS_E5M2: return (i % 0x7cu) | (i & 0x100 ? 0x80u : 0);
    case TR_NS_FLOAT32: return 0x3f800000u + (uint32_t)(i * 2654435761u % 0x3f000000u);
    default: return 0x3ff0000000000000ull + (i * 0x9e3779b97f4a7c1ull) % 0x3fe0000000000000ull;
    }
}

/* scan [p, p + n) in the given number of pieces, as the caller would */
static tr_nanscan_result scan(int dt, const unsigned char *p, size_t n)
{
    tr_nanscan_result r;
    tr_nanscan_init(&r);
    CHECK(tr_nanscan(dt, p, n, 0, &r) == 0, "%s: tr_nanscan refused", name(dt));
    return r;
}

static tr_nanscan_result reference(int dt, const unsigned char *p, size_t n)
{
    size_t es = tr_nanscan_esize(dt);
    tr_nanscan_result r;
    tr_nanscan_init(&r);
    for (size_t i = 0; i < n; i++) {
        uint64_t b = 0;
        memcpy(&b, p + i * es, es);
        int k = ref_class(dt, b);
        if (k == 1) {
            if (!r.nan++) r.first_nan = i;
        } else if (k == 2) {
            if (!r.inf++) r.first_inf = i;
        }
    }
    return r;
}

static void same(int dt, tr_nanscan_result got, tr_nanscan_result want, const char *what, uint64_t info)
{
    CHECK(got.nan == want.nan && got.inf == want.inf && got.first_nan == want.first_nan &&
              got.first_inf == want.first_inf,
          "%s %s (%llx): got nan %llu inf %llu first %lld/%lld, want nan %llu inf %llu first %lld/%lld", name(dt),
          what, (unsigned long long)info, (unsigned long long)got.nan, (unsigned long long)got.inf,
          (long long)got.first_nan, (long long)got.first_inf, (unsigned long long)want.nan,
          (unsigned long long)want.inf, (long long)want.first_nan, (long long)want.first_inf);
}

static unsigned char *arena;
#define ARENA (1u << 22)

/* pattern alone at a random place in a clean buffer */
static void alone(int dt, uint64_t bits)
{
    size_t es = tr_nanscan_esize(dt);
    size_t mis = (next() % 8) / es * es;              /* misaligned starts, whole elements */
    size_t n = 1 + next() % (3 * 4096 / es + 200);
    size_t at = next() % n;
    unsigned char *p = arena + ARENA / 2 + mis;
    for (size_t i = 0; i < n; i++) put(p, i, es, filler(dt, i));
    put(p, at, es, bits);
    /* only the planted element can be NaN or infinite (the filler is finite) */
    int k = ref_class(dt, bits);
    tr_nanscan_result want;
    tr_nanscan_init(&want);
    if (k == 1) {
        want.nan = 1;
        want.first_nan = at;
    } else if (k == 2) {
        want.inf = 1;
        want.first_inf = at;
    }
    same(dt, scan(dt, p, n), want, "alone", bits);
}

static void every_pattern(int dt)
{
    size_t es = tr_nanscan_esize(dt);
    uint64_t all = 1ull << (8 * es);
    unsigned char *p = arena;
    uint64_t nan = 0, inf = 0;
    for (uint64_t b = 0; b < all; b++) {
        int k = ref_class(dt, b);
        nan += k == 1;
        inf += k == 2;
        CHECK(tr_nanscan_classify(dt, b) == k, "%s: pattern %llx classified %d, reference %d", name(dt),
              (unsigned long long)b, tr_nanscan_classify(dt, b), k);
        put(p, (size_t)b, es, b);
        alone(dt, b);
    }
    /* all patterns, in order, in one buffer */
    tr_nanscan_result r = scan(dt, p, (size_t)all);
    same(dt, r, reference(dt, p, (size_t)all), "all patterns", all);
    printf("%-8s %6llu patterns: %llu NaN, %llu infinite\n", name(dt), (unsigned long long)all,
           (unsigned long long)nan, (unsigned long long)inf);
    uint64_t want_nan = dt == TR_NS_E4M3 ? 2 : dt == TR_NS_E5M2 ? 6 : dt == TR_NS_FLOAT16 ? 2046 : 254;
    CHECK(nan == want_nan && inf == (dt == TR_NS_E4M3 ? 0u : 2u), "%s: %llu NaN %llu Inf patterns", name(dt),
          (unsigned long long)nan, (unsigned long long)inf);
}

static void wide(int dt)
{
    size_t es = tr_nanscan_esize(dt);
    int ebits = dt == TR_NS_FLOAT32 ? 8 : 11, mbits = dt == TR_NS_FLOAT32 ? 23 : 52;
    uint64_t expall = ((1ull << ebits) - 1) << mbits;
    for (int i = 0; i < 1000000; i++) {
        uint64_t b = next();
        if (es == 4) b &= 0xffffffffu;
        if (i % 4 == 0) b |= expall;                      /* exponent all ones */
        if (i % 8 == 0) b &= ~((1ull << mbits) - 1);       /* ... mantissa zero: infinities */
        if (i % 16 == 1) b = (b & ~expall) | (expall - (1ull << mbits));   /* largest finite exponent */
        CHECK(tr_nanscan_classify(dt, b) == ref_class(dt, b), "%s: pattern %llx", name(dt), (unsigned long long)b);
        if (i % 50 == 0) alone(dt, b);
    }
    printf("%-8s 1000000 patterns\n", name(dt));
}

/* many non-finite values at random places: counts and first indexes */
static void crowds(int dt)
{
    size_t es = tr_nanscan_esize(dt);
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + next() % (round < 190 ? 3 * 4096 / es : ARENA / es / 4);
        size_t mis = (next() % 8) / es * es;
        unsigned char *p = arena + mis;
        for (size_t i = 0; i < n; i++) put(p, i, es, filler(dt, i));
        int k = (int)(next() % 40);
        for (int j = 0; j < k; j++) put(p, next() % n, es, next());   /* random bits: some NaN or Inf */
        tr_nanscan_result want = reference(dt, p, n);
        same(dt, scan(dt, p, n), want, "crowd", n);
        /* pieces: a caller scanning in parts with base offsets */
        tr_nanscan_result r;
        tr_nanscan_init(&r);
        size_t cut = next() % (n + 1);
        tr_nanscan(dt, p, cut, 0, &r);
        tr_nanscan(dt, p + cut * es, n - cut, cut, &r);
        same(dt, r, want, "crowd in two parts", cut);
    }
}

int main(void)
{
    arena = aligned_alloc(4096, ARENA + 4096);
    if (!arena) return 2;
    int dts[] = {TR_NS_FLOAT16, TR_NS_BFLOAT16, TR_NS_E4M3, TR_NS_E5M2, TR_NS_FLOAT32, TR_NS_FLOAT64};
    for (size_t i = 0; i < 6; i++) {
        int dt = dts[i];
        if (tr_nanscan_esize(dt) <= 2) every_pattern(dt);
        else wide(dt);
        crowds(dt);
    }
    /* integers and invalid values are not checked */
    tr_nanscan_result r;
    for (int dt = -1; dt <= 13; dt++)
        if (dt < TR_NS_FLOAT16 || dt > TR_NS_E5M2)
            CHECK(tr_nanscan_esize(dt) == 0 && tr_nanscan(dt, arena, 1, 0, &r) == -1, "datatype %d scanned", dt);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("unit_nanscan: ok\n");
    return 0;
}
