/* Element types and reductions of the simulated NCCL, bit-exact with the
 * kernels NCCL 2.28 runs on an sm_90 GPU (see dtype.h for the exact rules).
 *
 * Layout of the hot path: the reduction walks the buffers in blocks of BLK
 * elements. Each block is accumulated in a local array (src 0 copied in, the
 * other sources folded into it one after the other, then copied out), so the
 * inner loops read one source and update an array nothing else can alias:
 * with a constant trip count GCC vectorises them even at -O2. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "dtype.h"

#define BLK 1024 /* elements per block: 8 KiB of accumulator at most */

/* ---- bit casts ------------------------------------------------------------ */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint64_t d2u(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static inline double u2d(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

#define CANON_F32 0x7fffffffu
#define CANON_F64 0x7fffffffffffffffull
#define CANON_H 0x7fffu  /* half and bfloat16 */
#define CANON_F8 0x7fu

/* ---- rounding a double to a small binary format ---------------------------
 * M mantissa bits, exponent bias BIAS, MAXFIN the largest finite encoding
 * (sign clear). Round to nearest even; subnormals exact. Overflow (and Inf):
 * OVF_INF gives INFC, OVF_NAN gives NANC (e4m3, no Inf), OVF_SAT gives MAXFIN;
 * all keep the sign. A NaN gives NANC (sign clear). */
enum { OVF_INF, OVF_NAN, OVF_SAT };

static inline uint32_t encode(double d, const int M, const int BIAS,
                              const uint32_t MAXFIN, const int OVF,
                              const uint32_t SIGN, const uint32_t NANC,
                              const uint32_t INFC)
{
    uint64_t x = d2u(d);
    uint32_t s = (x >> 63) ? SIGN : 0;
    uint64_t ax = x & 0x7fffffffffffffffull;
    if (ax >= 0x7ff0000000000000ull) {
        if (ax > 0x7ff0000000000000ull)
            return NANC;
        goto overflow;
    }
    int e = (int)(ax >> 52) - 1023;     /* -1023 for zero / double subnormal */
    const int emin = 1 - BIAS;
    int E = e < emin ? emin : e;
    int shift = 52 - M + (E - e);
    if (shift >= 54)                    /* below half the smallest subnormal */
        return s;
    uint64_t mant = (ax & 0xfffffffffffffull) | (1ull << 52);
    uint64_t enc = ((uint64_t)(E + BIAS - 1) << M) + (mant >> shift);
    uint64_t rem = mant & ((1ull << shift) - 1);
    uint64_t half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (enc & 1)))
        enc++;
    if (enc > MAXFIN)
        goto overflow;
    return s | (uint32_t)enc;
overflow:
    if (OVF == OVF_SAT)
        return s | MAXFIN;
    if (OVF == OVF_NAN)
        return s | NANC;
    return s | INFC;
}

static inline uint16_t d2h(double d)
{
    return (uint16_t)encode(d, 10, 15, 0x7bff, OVF_INF, 0x8000, CANON_H, 0x7c00);
}
static inline uint16_t d2bf(double d)
{
    return (uint16_t)encode(d, 7, 127, 0x7f7f, OVF_INF, 0x8000, CANON_H, 0x7f80);
}
static inline uint8_t d2e4m3_sat(double d)
{
    return (uint8_t)encode(d, 3, 7, 0x7e, OVF_SAT, 0x80, CANON_F8, 0);
}
static inline uint8_t d2e5m2_sat(double d)
{
    return (uint8_t)encode(d, 2, 15, 0x7b, OVF_SAT, 0x80, CANON_F8, 0);
}

/* ---- decoding ------------------------------------------------------------- */

/* c ? a : b with masks: every operand is computed, so GCC cannot sink a
 * float operation into a branch (which, with -ftrapping-math, it would then
 * refuse to if-convert) and the loops below vectorise. */
static inline uint32_t sel(int c, uint32_t a, uint32_t b)
{
    uint32_t m = -(uint32_t)(c != 0);
    return (a & m) | (b & ~m);
}

/* half -> float, exact */
static inline float h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t norm = (em << 13) + 0x38000000u;            /* rebias 15 -> 127 */
    uint32_t special = (norm + 0x38000000u)              /* Inf, NaN (quieted) */
                     | (em > 0x7c00u ? 0x400000u : 0);
    uint32_t sub = f2u((float)(int32_t)em * 0x1p-24f);   /* subnormal, zero */
    uint32_t r = sel(em >= 0x7c00u, special, sel(em >= 0x400u, norm, sub));
    return u2f(r | sign);
}

/* float -> half, round to nearest even, NaN -> 0x7fff: the same results as
 * encode(), without branches (after F. Giesen's float_to_half_fast3_rtne). */
static inline uint16_t f2h(float f)
{
    uint32_t u = f2u(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    /* normal: rebias, round the 13 dropped bits to nearest even */
    uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1)) >> 13;
    /* subnormal: adding 0.5 rounds to the 2^-24 grid (the FPU's RNE) */
    uint32_t sub = f2u(u2f(a) + 0.5f) - 0x3f000000u;
    uint32_t r = sel(a >= 0x47800000u, 0x7c00u, sel(a < 0x38800000u, sub, norm));
    r |= sign;
    return (uint16_t)sel(a > 0x7f800000u, 0x7fffu, r);
}

/* float -> bfloat16, round to nearest even, NaN -> 0x7fff */
static inline uint16_t f2bf(float f)
{
    uint32_t u = f2u(f);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : r);
}
static inline double h2d(uint16_t h) { return (double)h2f(h); }
static inline float bf2f(uint16_t b) { return u2f((uint32_t)b << 16); }
static inline double bf2d(uint16_t b) { return (double)bf2f(b); }

static float e4m3_value(uint8_t v)
{
    int e = (v >> 3) & 15, m = v & 7;
    float r;
    if (e == 15 && m == 7)
        r = u2f(0x7fc00000u);
    else if (e == 0)
        r = (float)m * 0x1p-9f;
    else
        r = ldexpf((float)(8 + m), e - 10);
    return (v & 0x80) ? -r : r;
}

/* fp8 -> half is exact; e5m2 is the top byte of a half. */
static inline uint16_t e5m2_to_h(uint8_t v) { return (uint16_t)(v << 8); }

/* ---- tables built once ---------------------------------------------------- */

static uint16_t e4m3_h[256];            /* e4m3 -> half bits (exact) */
static uint8_t e4m3_sum[256][256], e4m3_prod[256][256];
static uint8_t e5m2_sum[256][256], e5m2_prod[256][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* Half sums and products in float: a product of halves is exact in float,
 * and a float sum rounded again to half is the correctly rounded half sum
 * (24 >= 2*11+2 bits: the double rounding is innocuous). Same for bfloat16
 * (and its products: a product of two bfloat16 has at most 16 significant
 * bits, so float's subnormals cannot cut one that matters). The test checks
 * both against exact arithmetic. */
static inline uint16_t h_add(uint16_t a, uint16_t b) { return f2h(h2f(a) + h2f(b)); }
static inline uint16_t h_mul(uint16_t a, uint16_t b) { return f2h(h2f(a) * h2f(b)); }

static void build_tables(void)
{
    for (int v = 0; v < 256; v++) {
        e4m3_h[v] = ((v & 0x7f) == 0x7f) ? (uint16_t)(0x7fff | ((v & 0x80) << 8))
                                         : d2h(e4m3_value((uint8_t)v));
    }
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++) {
            uint16_t ha = e4m3_h[a], hb = e4m3_h[b];
            e4m3_sum[a][b] = d2e4m3_sat(h2d(h_add(ha, hb)));
            e4m3_prod[a][b] = d2e4m3_sat(h2d(h_mul(ha, hb)));
            ha = e5m2_to_h((uint8_t)a), hb = e5m2_to_h((uint8_t)b);
            e5m2_sum[a][b] = trsim_half_to_e5m2_sat(h_add(ha, hb));
            e5m2_prod[a][b] = trsim_half_to_e5m2_sat(h_mul(ha, hb));
        }
}
static inline void tables(void) { pthread_once(&tables_once, build_tables); }

/* ---- public conversions --------------------------------------------------- */

float trsim_half_to_float(uint16_t h) { return h2f(h); }
uint16_t trsim_float_to_half(float f) { return f2h(f); }
uint16_t trsim_double_to_half(double d) { return d2h(d); }
float trsim_bf16_to_float(uint16_t b) { return bf2f(b); }
uint16_t trsim_float_to_bf16(float f) { return f2bf(f); }
float trsim_e4m3_to_float(uint8_t v) { return e4m3_value(v); }
float trsim_e5m2_to_float(uint8_t v) { return h2f(e5m2_to_h(v)); }

static inline int h_isnan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }

uint8_t trsim_half_to_e4m3(uint16_t h)
{
    if (h_isnan(h))
        return (uint8_t)(0x7f | ((h >> 8) & 0x80));
    return (uint8_t)encode(h2d(h), 3, 7, 0x7e, OVF_NAN, 0x80, 0x7f, 0);
}
uint8_t trsim_half_to_e5m2(uint16_t h)
{
    if (h_isnan(h))
        return (uint8_t)((h >> 8) | 0x02);
    return (uint8_t)encode(h2d(h), 2, 15, 0x7b, OVF_INF, 0x80, 0x7f, 0x7c);
}
uint8_t trsim_half_to_e4m3_sat(uint16_t h)
{
    if (h_isnan(h))
        return (uint8_t)(0x7f | ((h >> 8) & 0x80));
    return d2e4m3_sat(h2d(h));
}
uint8_t trsim_half_to_e5m2_sat(uint16_t h)
{
    if (h_isnan(h))
        return (uint8_t)((h >> 8) | 0x02);
    return d2e5m2_sat(h2d(h));
}

/* ---- names and sizes ------------------------------------------------------ */

size_t trsim_dtype_size(int datatype)
{
    switch (datatype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2:
        return 1;
    case ncclFloat16: case ncclBfloat16:
        return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32:
        return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

const char *trsim_dtype_name(int datatype)
{
    switch (datatype) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "float8e4m3";
    case ncclFloat8e5m2: return "float8e5m2";
    default: return "invalid";
    }
}

/* ---- element operations --------------------------------------------------- */

/* a + b rounded to odd: exact when representable, otherwise the neighbour
 * of the exact sum with an odd last bit. Rounding that to a format of at most
 * 51 bits is the correctly rounded sum (here: an FMA, since a = x*s is exact). */
static inline double add_rto(double a, double b)
{
    double s = a + b;
    if (!isfinite(s))
        return s;
    double bb = s - a;
    double err = (a - (s - bb)) + (b - bb);
    if (err == 0)
        return s;
    uint64_t u = d2u(s);
    if (u & 1)
        return s;
    return u2d(((err > 0) == (s > 0)) ? u + 1 : u - 1);
}

typedef struct {
    int n;              /* nsrc, for integer avg */
    double sd;          /* scalar: float64, half and bf16 (exact) */
    float sf;           /* scalar: float32 */
    uint64_t si;        /* scalar: integers, as bits */
    uint8_t pre[256];   /* fp8: x -> x*s stored as fp8 */
} ctx_t;

typedef void (*blk_fn)(void *acc, const void *src, size_t n, const ctx_t *c);
typedef void (*una_fn)(void *acc, size_t n, const ctx_t *c);

/* A loop over a block: the full-block case has a constant trip count. */
#define BLOCK_LOOP(n, BODY)                                                   \
    do {                                                                      \
        if ((n) == BLK) { for (size_t j = 0; j < BLK; j++) { BODY; } }        \
        else { for (size_t j = 0; j < (n); j++) { BODY; } }                   \
    } while (0)

/* acc[j] = EXPR(a = acc[j], b = src[j]) */
#define DEF_BIN(NAME, T, EXPR)                                                \
    static void NAME(void *restrict acc_, const void *restrict src_,          \
                     size_t n, const ctx_t *restrict c)                       \
    {                                                                         \
        T *acc = acc_;                                                        \
        const T *src = src_;                                                  \
        (void)c;                                                              \
        BLOCK_LOOP(n, T a = acc[j]; T b = src[j]; acc[j] = (T)(EXPR));        \
    }
/* acc[j] = EXPR(a = acc[j]) */
#define DEF_UNA(NAME, T, EXPR)                                                \
    static void NAME(void *restrict acc_, size_t n, const ctx_t *restrict c)  \
    {                                                                         \
        T *acc = acc_;                                                        \
        (void)c;                                                              \
        BLOCK_LOOP(n, T a = acc[j]; acc[j] = (T)(EXPR));                      \
    }

/* integers: sum/prod in unsigned arithmetic (same bits for signed types) */
DEF_BIN(u8_sum, uint8_t, a + b)
DEF_BIN(u8_prod, uint8_t, (unsigned)a * (unsigned)b)
DEF_BIN(u32_sum, uint32_t, a + b)
DEF_BIN(u32_prod, uint32_t, a * b)
DEF_BIN(u64_sum, uint64_t, a + b)
DEF_BIN(u64_prod, uint64_t, a * b)
DEF_BIN(i8_max, int8_t, a > b ? a : b)
DEF_BIN(i8_min, int8_t, a < b ? a : b)
DEF_BIN(u8_max, uint8_t, a > b ? a : b)
DEF_BIN(u8_min, uint8_t, a < b ? a : b)
DEF_BIN(i32_max, int32_t, a > b ? a : b)
DEF_BIN(i32_min, int32_t, a < b ? a : b)
DEF_BIN(u32_max, uint32_t, a > b ? a : b)
DEF_BIN(u32_min, uint32_t, a < b ? a : b)
DEF_BIN(i64_max, int64_t, a > b ? a : b)
DEF_BIN(i64_min, int64_t, a < b ? a : b)
DEF_BIN(u64_max, uint64_t, a > b ? a : b)
DEF_BIN(u64_min, uint64_t, a < b ? a : b)
/* integer PreMulSum: x*s, then acc + x*s */
DEF_UNA(u8_pre, uint8_t, (unsigned)a * (unsigned)(uint8_t)c->si)
DEF_UNA(u32_pre, uint32_t, a * (uint32_t)c->si)
DEF_UNA(u64_pre, uint64_t, a * c->si)
DEF_BIN(u8_premul, uint8_t, (unsigned)a + (unsigned)b * (unsigned)(uint8_t)c->si)
DEF_BIN(u32_premul, uint32_t, a + b * (uint32_t)c->si)
DEF_BIN(u64_premul, uint64_t, a + b * c->si)
/* integer avg: divide the wrapped sum */
DEF_UNA(i8_div, int8_t, a / c->n)
DEF_UNA(u8_div, uint8_t, a / c->n)
DEF_UNA(i32_div, int32_t, a / c->n)
DEF_UNA(u32_div, uint32_t, a / (uint32_t)c->n)
DEF_UNA(i64_div, int64_t, a / c->n)
DEF_UNA(u64_div, uint64_t, a / (uint64_t)c->n)

/* float32 / float64 */
static inline float f32_canon(float r) { return r == r ? r : u2f(CANON_F32); }
static inline double f64_canon(double r) { return r == r ? r : u2d(CANON_F64); }
/* max/min as fmaxf/__hmax: a NaN loses to a number, two NaNs give the
 * canonical NaN, -0 < +0 (equal values other than zeros have equal bits).
 * Written as selects so the loops vectorise. */
static inline float f32_max(float a, float b, int ismax)
{
    uint32_t ua = f2u(a), ub = f2u(b);
    uint32_t r = (ismax ? a > b : a < b) ? ua : ub;
    r = a == b ? (ismax ? ua & ub : ua | ub) : r;
    r = b != b ? ua : r;
    r = a != a ? ub : r;
    r = (a != a) & (b != b) ? CANON_F32 : r;
    return u2f(r);
}
static inline double f64_max(double a, double b, int ismax)
{
    uint64_t ua = d2u(a), ub = d2u(b);
    uint64_t r = (ismax ? a > b : a < b) ? ua : ub;
    r = a == b ? (ismax ? ua & ub : ua | ub) : r;
    r = b != b ? ua : r;
    r = a != a ? ub : r;
    r = (a != a) & (b != b) ? CANON_F64 : r;
    return u2d(r);
}
DEF_BIN(f32_sum, float, f32_canon(a + b))
DEF_BIN(f32_prod, float, f32_canon(a * b))
DEF_BIN(f32_maxk, float, f32_max(a, b, 1))
DEF_BIN(f32_mink, float, f32_max(a, b, 0))
DEF_UNA(f32_pre, float, f32_canon(a * c->sf))
DEF_BIN(f32_premul, float, f32_canon(fmaf(b, c->sf, a)))
DEF_BIN(f64_sum, double, f64_canon(a + b))
DEF_BIN(f64_prod, double, f64_canon(a * b))
DEF_BIN(f64_maxk, double, f64_max(a, b, 1))
DEF_BIN(f64_mink, double, f64_max(a, b, 0))
DEF_UNA(f64_pre, double, f64_canon(a * c->sd))
DEF_BIN(f64_premul, double, f64_canon(fma(b, c->sd, a)))

/* The same two with the FMA instruction where the CPU has it: fmaf is then
 * one instruction and the loops vectorise (libm's is a call per element). */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_FMA_CLONES 1
#define DEF_BIN_FMA(NAME, T, EXPR)                                            \
    __attribute__((target("fma")))                                            \
    static void NAME(void *restrict acc_, const void *restrict src_,          \
                     size_t n, const ctx_t *restrict c)                       \
    {                                                                         \
        T *acc = acc_;                                                        \
        const T *src = src_;                                                  \
        BLOCK_LOOP(n, T a = acc[j]; T b = src[j]; acc[j] = (T)(EXPR));        \
    }
DEF_BIN_FMA(f32_premul_fma, float, f32_canon(fmaf(b, c->sf, a)))
DEF_BIN_FMA(f64_premul_fma, double, f64_canon(fma(b, c->sd, a)))

/* (libgcc's constructor has filled in the CPU model by the time this runs) */
static int cpu_has_fma(void) { return __builtin_cpu_supports("fma"); }
#endif

/* max/min of two sign-magnitude encodings (half, bfloat16, fp8) whose sign
 * bit is SIGN, on integer keys ordered like the values (-0 < +0); an, bn:
 * whether a, b are NaN. Same rules as f32_max. */
static inline uint32_t sm_maxmin(uint32_t a, uint32_t b, int an, int bn, int ismax,
                                 uint32_t SIGN, uint32_t CANON)
{
    uint32_t ka = a ^ sel(a & SIGN, 2 * SIGN - 1, SIGN);
    uint32_t kb = b ^ sel(b & SIGN, 2 * SIGN - 1, SIGN);
    uint32_t r = sel(ismax ? ka > kb : ka < kb, a, b);
    r = sel(bn, a, r);
    r = sel(an, b, r);
    return sel(an & bn, CANON, r);
}

/* float16; PreMulSum: x*s is exact in double, x*s + acc rounded once */
static inline uint16_t h_max(uint16_t a, uint16_t b, int ismax)
{
    return (uint16_t)sm_maxmin(a, b, (a & 0x7fff) > 0x7c00, (b & 0x7fff) > 0x7c00, ismax,
                               0x8000, CANON_H);
}
DEF_BIN(h_sumk, uint16_t, h_add(a, b))
DEF_BIN(h_prodk, uint16_t, h_mul(a, b))
DEF_BIN(h_maxk, uint16_t, h_max(a, b, 1))
DEF_BIN(h_mink, uint16_t, h_max(a, b, 0))
DEF_UNA(h_pre, uint16_t, d2h(h2d(a) * c->sd))
DEF_BIN(h_premul, uint16_t, d2h(add_rto(h2d(b) * c->sd, h2d(a))))

/* bfloat16 */
static inline uint16_t bf_max(uint16_t a, uint16_t b, int ismax)
{
    return (uint16_t)sm_maxmin(a, b, (a & 0x7fff) > 0x7f80, (b & 0x7fff) > 0x7f80, ismax,
                               0x8000, CANON_H);
}
DEF_BIN(bf_sumk, uint16_t, f2bf(bf2f(a) + bf2f(b)))
DEF_BIN(bf_prodk, uint16_t, f2bf(bf2f(a) * bf2f(b)))
DEF_BIN(bf_maxk, uint16_t, bf_max(a, b, 1))
DEF_BIN(bf_mink, uint16_t, bf_max(a, b, 0))
DEF_UNA(bf_pre, uint16_t, d2bf(bf2d(a) * c->sd))
DEF_BIN(bf_premul, uint16_t, d2bf(add_rto(bf2d(b) * c->sd, bf2d(a))))

/* fp8: op tables (half arithmetic, saturating store); max/min exact */
static inline uint8_t e4m3_max(uint8_t a, uint8_t b, int ismax)
{
    return (uint8_t)sm_maxmin(a, b, (a & 0x7f) == 0x7f, (b & 0x7f) == 0x7f, ismax, 0x80, CANON_F8);
}
static inline uint8_t e5m2_max(uint8_t a, uint8_t b, int ismax)
{
    return (uint8_t)sm_maxmin(a, b, (a & 0x7f) > 0x7c, (b & 0x7f) > 0x7c, ismax, 0x80, CANON_F8);
}
DEF_BIN(e4m3_sumk, uint8_t, e4m3_sum[a][b])
DEF_BIN(e4m3_prodk, uint8_t, e4m3_prod[a][b])
DEF_BIN(e4m3_maxk, uint8_t, e4m3_max(a, b, 1))
DEF_BIN(e4m3_mink, uint8_t, e4m3_max(a, b, 0))
DEF_BIN(e4m3_premul, uint8_t, e4m3_sum[a][c->pre[b]])
DEF_BIN(e5m2_sumk, uint8_t, e5m2_sum[a][b])
DEF_BIN(e5m2_prodk, uint8_t, e5m2_prod[a][b])
DEF_BIN(e5m2_maxk, uint8_t, e5m2_max(a, b, 1))
DEF_BIN(e5m2_mink, uint8_t, e5m2_max(a, b, 0))
DEF_BIN(e5m2_premul, uint8_t, e5m2_sum[a][c->pre[b]])
DEF_UNA(f8_pre, uint8_t, c->pre[a])

/* ---- the driver ----------------------------------------------------------- */

static void drive(void *dst, const void *const *srcs, int nsrc, size_t count,
                  size_t esz, una_fn first, blk_fn comb, una_fn post,
                  const ctx_t *c)
{
    _Alignas(64) unsigned char acc[BLK * 8];
    for (size_t i = 0; i < count; i += BLK) {
        size_t n = count - i < BLK ? count - i : BLK;
        size_t off = i * esz;
        memcpy(acc, (const char *)srcs[0] + off, n * esz);
        if (first)
            first(acc, n, c);
        for (int k = 1; k < nsrc; k++)
            comb(acc, (const char *)srcs[k] + off, n, c);
        if (post)
            post(acc, n, c);
        memcpy((char *)dst + off, acc, n * esz);
    }
}

/* double -> integer bits, truncating toward zero, wrapping modulo 2^64 */
static uint64_t scalar_to_int(double d)
{
    if (!(d == d))
        return 0;
    if (d >= 0)
        return d < 0x1p64 ? (uint64_t)d : 0;
    return d >= -0x1p63 ? (uint64_t)(int64_t)d : 0;
}

void trsim_reduce(void *dst, const void *const *srcs, int nsrc, size_t count,
                  int datatype, trsim_redop op)
{
    size_t esz = trsim_dtype_size(datatype);
    if (esz == 0 || nsrc < 1 || count == 0)
        return;
    int kind = op.premul ? -1 : op.op;   /* -1: PreMulSum */
    if (kind != -1 && kind != ncclSum && kind != ncclProd && kind != ncclMax &&
        kind != ncclMin && kind != ncclAvg)
        return;

    int is_int = datatype <= ncclUint64;
    int scaled = kind == -1 || (kind == ncclAvg && !is_int);
    if (nsrc == 1 && !scaled) {          /* nothing to combine: a copy */
        if (dst != srcs[0])
            memmove(dst, srcs[0], count * esz);
        return;
    }

    ctx_t c;
    memset(&c, 0, sizeof c);
    c.n = nsrc;
    /* The scalar, as NCCL has it: the avg one from float(1.0/n). */
    double sd = kind == -1 ? op.scalar : (double)(float)(1.0 / nsrc);
    if (datatype == ncclFloat64 && kind == ncclAvg)
        sd = 1.0 / nsrc;
    una_fn first = NULL, post = NULL;
    blk_fn comb = NULL;

#define PICK(SUM, PROD, MAX, MIN)                                             \
    comb = kind == ncclSum ? SUM : kind == ncclProd ? PROD                    \
         : kind == ncclMax ? MAX : kind == ncclMin ? MIN : NULL

    switch (datatype) {
    case ncclInt8: case ncclUint8:
        PICK(u8_sum, u8_prod, datatype == ncclInt8 ? i8_max : u8_max,
             datatype == ncclInt8 ? i8_min : u8_min);
        if (kind == ncclAvg) { comb = u8_sum; post = datatype == ncclInt8 ? i8_div : u8_div; }
        if (kind == -1) { c.si = scalar_to_int(sd); first = u8_pre; comb = u8_premul; }
        break;
    case ncclInt32: case ncclUint32:
        PICK(u32_sum, u32_prod, datatype == ncclInt32 ? i32_max : u32_max,
             datatype == ncclInt32 ? i32_min : u32_min);
        if (kind == ncclAvg) { comb = u32_sum; post = datatype == ncclInt32 ? i32_div : u32_div; }
        if (kind == -1) { c.si = scalar_to_int(sd); first = u32_pre; comb = u32_premul; }
        break;
    case ncclInt64: case ncclUint64:
        PICK(u64_sum, u64_prod, datatype == ncclInt64 ? i64_max : u64_max,
             datatype == ncclInt64 ? i64_min : u64_min);
        if (kind == ncclAvg) { comb = u64_sum; post = datatype == ncclInt64 ? i64_div : u64_div; }
        if (kind == -1) { c.si = scalar_to_int(sd); first = u64_pre; comb = u64_premul; }
        break;
    case ncclFloat32:
        PICK(f32_sum, f32_prod, f32_maxk, f32_mink);
        if (scaled) { c.sf = (float)sd; first = f32_pre; comb = f32_premul; }
#ifdef HAVE_FMA_CLONES
        if (scaled && cpu_has_fma()) comb = f32_premul_fma;
#endif
        break;
    case ncclFloat64:
        PICK(f64_sum, f64_prod, f64_maxk, f64_mink);
        if (scaled) { c.sd = sd; first = f64_pre; comb = f64_premul; }
#ifdef HAVE_FMA_CLONES
        if (scaled && cpu_has_fma()) comb = f64_premul_fma;
#endif
        break;
    case ncclFloat16:
        PICK(h_sumk, h_prodk, h_maxk, h_mink);
        if (scaled) { c.sd = h2d(d2h(sd)); first = h_pre; comb = h_premul; }
        break;
    case ncclBfloat16:
        PICK(bf_sumk, bf_prodk, bf_maxk, bf_mink);
        if (scaled) { c.sd = bf2d(d2bf(sd)); first = bf_pre; comb = bf_premul; }
        break;
    case ncclFloat8e4m3:
        tables();
        PICK(e4m3_sumk, e4m3_prodk, e4m3_maxk, e4m3_mink);
        if (scaled) {
            uint16_t s = e4m3_h[d2e4m3_sat(sd)];
            for (int v = 0; v < 256; v++)
                c.pre[v] = trsim_half_to_e4m3_sat(h_mul(e4m3_h[v], s));
            first = f8_pre;
            comb = e4m3_premul;
        }
        break;
    case ncclFloat8e5m2:
        tables();
        PICK(e5m2_sumk, e5m2_prodk, e5m2_maxk, e5m2_mink);
        if (scaled) {
            uint16_t s = e5m2_to_h(d2e5m2_sat(sd));
            for (int v = 0; v < 256; v++)
                c.pre[v] = trsim_half_to_e5m2_sat(h_mul(e5m2_to_h((uint8_t)v), s));
            first = f8_pre;
            comb = e5m2_premul;
        }
        break;
    }
#undef PICK
    if (comb == NULL)
        return;
    drive(dst, srcs, nsrc, count, esz, first, comb, post, &c);
}
