/* Tests of tests/sim/dtype.c against a reference that shares nothing with it:
 *  - every half, bfloat16, e4m3 and e5m2 pattern is decoded from its
 *    definition (sign, exponent, mantissa, ldexp);
 *  - values are rounded by brute force: the exact value (a fixed-point big
 *    integer) is placed in the sorted table of all finite values of the
 *    format, the nearest is taken, ties to the even mantissa, and past the
 *    largest finite value the format's overflow rule applies;
 *  - arithmetic on the small types is exact (big integers) and rounded once,
 *    as the GPU's instructions do;
 *  - GCC's _Float16 is a second oracle for half conversions.
 * Then every datatype x op (sum, prod, max, min, avg, premulsum) x nsrc in
 * {1,2,3,4,8} is compared bit for bit with a plain reference fold. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"

static int failures;
#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            if (failures++ < 40) {                                            \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
                fprintf(stderr, __VA_ARGS__);                                 \
                fputc('\n', stderr);                                          \
            }                                                                 \
        }                                                                     \
    } while (0)

/* ---- random numbers (xorshift64*) ---------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; }

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static double bitsd(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

/* ---- exact fixed-point numbers: value = w / 2^SCALE, two's complement ---- */

#define NL 12
#define SCALE 320
typedef struct { uint64_t w[NL]; } big;

static big big_zero(void) { big b; memset(&b, 0, sizeof b); return b; }
static int big_isneg(const big *a) { return (int)(a->w[NL - 1] >> 63); }
static int big_iszero(const big *a)
{
    for (int i = 0; i < NL; i++)
        if (a->w[i]) return 0;
    return 1;
}
static big big_add(big a, big b)
{
    big r;
    unsigned carry = 0;
    for (int i = 0; i < NL; i++) {
        uint64_t s = a.w[i] + b.w[i];
        unsigned c1 = s < a.w[i];
        uint64_t t = s + carry;
        unsigned c2 = t < s;
        r.w[i] = t;
        carry = c1 | c2;
    }
    return r;
}
static big big_neg(big a)
{
    big one = big_zero();
    for (int i = 0; i < NL; i++) a.w[i] = ~a.w[i];
    one.w[0] = 1;
    return big_add(a, one);
}
static big big_sub(big a, big b) { return big_add(a, big_neg(b)); }
static int big_cmp(const big *a, const big *b)
{
    int na = big_isneg(a), nb = big_isneg(b);
    if (na != nb) return na ? -1 : 1;
    for (int i = NL - 1; i >= 0; i--)
        if (a->w[i] != b->w[i]) return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}
/* M * 2^E, negated if neg; values out of range are clamped to a tiny or a
 * huge magnitude, which round like the exact value in every format here. */
static big big_from(uint64_t M, int E, int neg)
{
    big r = big_zero();
    if (M == 0) return r;
    while (M >> 62) { /* keep 62 bits: tested values are exact with fewer */
        if (M & 1) { fprintf(stderr, "big_from: inexact\n"); exit(2); }
        M >>= 1, E++;
    }
    if (E + SCALE < 0) M = 1, E = -SCALE;
    if (E + SCALE > NL * 64 - 130) M = 1, E = NL * 64 - 130 - SCALE;
    int sh = E + SCALE;
    r.w[sh / 64] |= M << (sh % 64);
    if (sh % 64) r.w[sh / 64 + 1] |= M >> (64 - sh % 64);
    return neg ? big_neg(r) : r;
}
/* exact value of a finite double */
static big big_from_double(double d)
{
    if (d == 0) return big_zero();
    int e;
    double fr = frexp(fabs(d), &e);
    uint64_t M = (uint64_t)ldexp(fr, 53);
    return big_from(M, e - 53, d < 0);
}

/* ---- formats, decoded from their definition ------------------------------ */

enum { K_ZERO, K_FIN, K_INF, K_NAN };
enum { OV_INF, OV_NAN, OV_SAT };

typedef struct {
    const char *name;
    int ebits, mbits, has_inf; /* !has_inf: e4m3fn, only S.1111.111 is NaN */
    uint32_t canon_nan;        /* the GPU's NaN */
    /* brute-force table: finite non-negative values, sorted, + overflow */
    int n;
    uint32_t *code;
    big *val;
} fmt;

static fmt F_HALF = {"float16", 5, 10, 1, 0x7fff, 0, 0, 0};
static fmt F_BF16 = {"bfloat16", 8, 7, 1, 0x7fff, 0, 0, 0};
static fmt F_E4M3 = {"e4m3", 4, 3, 0, 0x7f, 0, 0, 0};
static fmt F_E5M2 = {"e5m2", 5, 2, 1, 0x7f, 0, 0, 0};

typedef struct {
    int kind, neg;
    uint64_t M; /* finite: value = M * 2^E (exact products need these) */
    int E;
    big v;      /* finite: exact value (signed) */
} rv;

static uint32_t signbit_of(const fmt *f) { return 1u << (f->ebits + f->mbits); }

static rv ref_decode(const fmt *f, uint32_t code)
{
    rv r;
    memset(&r, 0, sizeof r);
    int bias = (1 << (f->ebits - 1)) - 1;
    uint32_t e = (code >> f->mbits) & ((1u << f->ebits) - 1);
    uint32_t m = code & ((1u << f->mbits) - 1);
    uint32_t emax = (1u << f->ebits) - 1;
    r.neg = (code & signbit_of(f)) != 0;
    if (e == emax && f->has_inf) {
        r.kind = m ? K_NAN : K_INF;
        return r;
    }
    if (e == emax && m == (1u << f->mbits) - 1) {
        r.kind = K_NAN;
        return r;
    }
    if (e == 0) r.M = m, r.E = 1 - bias - f->mbits;
    else r.M = (1u << f->mbits) | m, r.E = (int)e - bias - f->mbits;
    r.kind = r.M ? K_FIN : K_ZERO;
    r.v = big_from(r.M, r.E, r.neg);
    return r;
}

static double ref_double(const fmt *f, uint32_t code)
{
    rv r = ref_decode(f, code);
    double v = r.kind == K_NAN ? NAN : r.kind == K_INF ? INFINITY : ldexp((double)r.M, r.E);
    return r.neg ? -v : v;
}

static const fmt *sort_fmt;
static int cmp_codes(const void *a, const void *b)
{
    rv x = ref_decode(sort_fmt, *(const uint32_t *)a);
    rv y = ref_decode(sort_fmt, *(const uint32_t *)b);
    return big_cmp(&x.v, &y.v);
}

static void build_table(fmt *f)
{
    uint32_t ncodes = 1u << (1 + f->ebits + f->mbits);
    f->code = malloc(sizeof(uint32_t) * (ncodes + 1));
    f->val = malloc(sizeof(big) * (ncodes + 1));
    int n = 0;
    for (uint32_t c = 0; c < ncodes; c++) {
        rv r = ref_decode(f, c);
        if ((r.kind == K_FIN || r.kind == K_ZERO) && !r.neg) f->code[n++] = c;
    }
    sort_fmt = f;
    qsort(f->code, (size_t)n, sizeof(uint32_t), cmp_codes);
    for (int i = 0; i < n; i++) f->val[i] = ref_decode(f, f->code[i]).v;
    for (int i = 1; i < n; i++)
        if (big_cmp(&f->val[i - 1], &f->val[i]) >= 0) {
            fprintf(stderr, "%s: table not strictly increasing\n", f->name);
            exit(2);
        }
    /* the value one step past the largest: what an unbounded exponent would
     * give; rounding to it means overflow */
    rv mx = ref_decode(f, f->code[n - 1]);
    f->code[n] = f->code[n - 1] + 1;
    f->val[n] = big_from(mx.M + 1, mx.E, 0);
    f->n = n;
}

/* Round an exact rv to the format: nearest, ties to the even mantissa. */
static uint32_t ref_round(const fmt *f, rv x, int ov)
{
    uint32_t sgn = x.neg ? signbit_of(f) : 0;
    uint32_t maxfin = f->code[f->n - 1];
    if (x.kind == K_NAN) return f->canon_nan;
    if (x.kind == K_ZERO) return sgn;
    if (x.kind == K_FIN) {
        big a = big_isneg(&x.v) ? big_neg(x.v) : x.v;
        sgn = big_isneg(&x.v) ? signbit_of(f) : 0;
        if (big_cmp(&a, &f->val[f->n]) < 0) {
            int lo = 0, hi = f->n; /* val[lo] <= a < val[hi] */
            while (hi - lo > 1) {
                int mid = (lo + hi) / 2;
                if (big_cmp(&f->val[mid], &a) <= 0) lo = mid;
                else hi = mid;
            }
            big dlo = big_sub(a, f->val[lo]), dhi = big_sub(f->val[hi], a);
            int c = big_cmp(&dlo, &dhi);
            int pick = c < 0 ? lo : c > 0 ? hi : ((f->code[lo] & 1) ? hi : lo);
            if (pick < f->n) return sgn | f->code[pick];
        }
    }
    /* overflow or infinity */
    if (ov == OV_SAT) return sgn | maxfin;
    if (ov == OV_NAN) return sgn | 0x7f;
    return sgn | (((1u << f->ebits) - 1) << f->mbits);
}

static rv rv_add(rv a, rv b)
{
    rv r;
    memset(&r, 0, sizeof r);
    if (a.kind == K_NAN || b.kind == K_NAN) { r.kind = K_NAN; return r; }
    if (a.kind == K_INF && b.kind == K_INF && a.neg != b.neg) { r.kind = K_NAN; return r; }
    if (a.kind == K_INF) return a;
    if (b.kind == K_INF) return b;
    if (a.kind == K_ZERO && b.kind == K_ZERO) { r.kind = K_ZERO; r.neg = a.neg && b.neg; return r; }
    r.v = big_add(a.v, b.v);
    if (big_iszero(&r.v)) { r.kind = K_ZERO; r.neg = 0; return r; }
    r.kind = K_FIN;
    r.neg = big_isneg(&r.v);
    r.M = 0; /* not a product operand */
    return r;
}

static rv rv_mul(rv a, rv b)
{
    rv r;
    memset(&r, 0, sizeof r);
    r.neg = a.neg != b.neg;
    if (a.kind == K_NAN || b.kind == K_NAN) { r.kind = K_NAN; return r; }
    if ((a.kind == K_INF && b.kind == K_ZERO) || (a.kind == K_ZERO && b.kind == K_INF)) {
        r.kind = K_NAN;
        return r;
    }
    if (a.kind == K_INF || b.kind == K_INF) { r.kind = K_INF; return r; }
    if (a.kind == K_ZERO || b.kind == K_ZERO) { r.kind = K_ZERO; return r; }
    if (a.M == 0 || b.M == 0) { fprintf(stderr, "rv_mul of a sum\n"); exit(2); }
    r.kind = K_FIN;
    r.M = a.M * b.M;
    r.E = a.E + b.E;
    r.v = big_from(r.M, r.E, r.neg);
    return r;
}

/* exact value of a float / double as an rv */
static rv rv_of_double(double d)
{
    rv r;
    memset(&r, 0, sizeof r);
    r.neg = signbit(d) != 0;
    if (isnan(d)) r.kind = K_NAN;
    else if (isinf(d)) r.kind = K_INF;
    else if (d == 0) r.kind = K_ZERO;
    else {
        r.kind = K_FIN;
        r.v = big_from_double(d);
    }
    return r;
}

/* ---- conversion tests ------------------------------------------------------ */

static int is_nan16(const fmt *f, uint32_t c) { return ref_decode(f, c).kind == K_NAN; }

static void test_decode(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        double r = ref_double(&F_HALF, h);
        float got = trsim_half_to_float((uint16_t)h);
        if (isnan(r)) CHECK(isnan(got), "half %04x -> %g, want NaN", h, got);
        else CHECK(fbits(got) == fbits((float)r), "half %04x -> %a, want %a", h, got, r);
#ifdef __FLT16_MAX__
        _Float16 x;
        uint16_t hb = (uint16_t)h;
        memcpy(&x, &hb, 2);
        if (!isnan(r)) CHECK(fbits((float)x) == fbits(got), "half %04x vs _Float16", h);
#endif
        r = ref_double(&F_BF16, h);
        got = trsim_bf16_to_float((uint16_t)h);
        if (isnan(r)) CHECK(isnan(got), "bf16 %04x -> %g, want NaN", h, got);
        else CHECK(fbits(got) == fbits((float)r), "bf16 %04x -> %a, want %a", h, got, r);
    }
    for (uint32_t v = 0; v < 256; v++) {
        double r = ref_double(&F_E4M3, v);
        float got = trsim_e4m3_to_float((uint8_t)v);
        if (isnan(r)) CHECK(isnan(got), "e4m3 %02x -> %g, want NaN", v, got);
        else CHECK(fbits(got) == fbits((float)r), "e4m3 %02x -> %a, want %a", v, got, r);
        r = ref_double(&F_E5M2, v);
        got = trsim_e5m2_to_float((uint8_t)v);
        if (isnan(r)) CHECK(isnan(got), "e5m2 %02x -> %g, want NaN", v, got);
        else CHECK(fbits(got) == fbits((float)r), "e5m2 %02x -> %a, want %a", v, got, r);
    }
    /* a few values spelled out */
    CHECK(trsim_e4m3_to_float(0x7e) == 448.0f, "e4m3 max");
    CHECK(isnan(trsim_e4m3_to_float(0x7f)) && isnan(trsim_e4m3_to_float(0xff)), "e4m3 NaN");
    CHECK(trsim_e4m3_to_float(0x78) == 256.0f, "e4m3 0x78 is 256, not Inf");
    CHECK(trsim_e4m3_to_float(0x01) == 0x1p-9f, "e4m3 min subnormal");
    CHECK(trsim_e5m2_to_float(0x7b) == 57344.0f, "e5m2 max");
    CHECK(isinf(trsim_e5m2_to_float(0x7c)), "e5m2 Inf");
    CHECK(trsim_half_to_float(0x7bff) == 65504.0f, "half max");
    CHECK(trsim_half_to_float(0x0001) == 0x1p-24f, "half min subnormal");
    CHECK(trsim_bf16_to_float(0x7f7f) == 0x1.fep127f, "bf16 max");
}

static void test_roundtrip(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        if (!is_nan16(&F_HALF, h)) {
            double r = ref_double(&F_HALF, h);
            CHECK(trsim_float_to_half((float)r) == h, "half %04x float round trip", h);
            CHECK(trsim_double_to_half(r) == h, "half %04x double round trip", h);
        }
        if (!is_nan16(&F_BF16, h))
            CHECK(trsim_float_to_bf16((float)ref_double(&F_BF16, h)) == h, "bf16 %04x round trip", h);
    }
    for (uint32_t v = 0; v < 256; v++) {
        if (!is_nan16(&F_E4M3, v)) {
            uint16_t h = (uint16_t)ref_round(&F_HALF, ref_decode(&F_E4M3, v), OV_INF);
            CHECK(trsim_half_to_e4m3(h) == v, "e4m3 %02x round trip", v);
            CHECK(trsim_half_to_e4m3_sat(h) == v, "e4m3 %02x sat round trip", v);
        }
        if (!is_nan16(&F_E5M2, v)) {
            uint16_t h = (uint16_t)ref_round(&F_HALF, ref_decode(&F_E5M2, v), OV_INF);
            CHECK(trsim_half_to_e5m2(h) == v, "e5m2 %02x round trip", v);
        }
    }
}

/* every half to fp8, both overflow rules, against brute force */
static void test_half_to_fp8(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        rv x = ref_decode(&F_HALF, h);
        uint8_t a = trsim_half_to_e4m3((uint16_t)h), b = trsim_half_to_e4m3_sat((uint16_t)h);
        uint8_t c = trsim_half_to_e5m2((uint16_t)h), d = trsim_half_to_e5m2_sat((uint16_t)h);
        if (x.kind == K_NAN) {
            CHECK(is_nan16(&F_E4M3, a) && is_nan16(&F_E4M3, b), "half %04x -> e4m3 NaN", h);
            CHECK(is_nan16(&F_E5M2, c) && is_nan16(&F_E5M2, d), "half %04x -> e5m2 NaN", h);
            continue;
        }
        CHECK(a == ref_round(&F_E4M3, x, OV_NAN), "half %04x -> e4m3 %02x", h, a);
        CHECK(b == ref_round(&F_E4M3, x, OV_SAT), "half %04x -> e4m3 sat %02x", h, b);
        CHECK(c == ref_round(&F_E5M2, x, OV_INF), "half %04x -> e5m2 %02x", h, c);
        CHECK(d == ref_round(&F_E5M2, x, OV_SAT), "half %04x -> e5m2 sat %02x", h, d);
    }
    CHECK(trsim_half_to_e4m3_sat(0x7fff) == 0x7f && trsim_half_to_e5m2_sat(0x7fff) == 0x7f,
          "canonical NaN to fp8");
    CHECK(trsim_half_to_e4m3(0x7c00) == 0x7f && trsim_half_to_e4m3(0xfc00) == 0xff, "Inf to e4m3");
    CHECK(trsim_half_to_e4m3_sat(0x7c00) == 0x7e && trsim_half_to_e5m2_sat(0xfc00) == 0xfb,
          "Inf saturates");
}

/* Interesting floats: random bits, midpoints of a format and their
 * neighbours, subnormals, the edges of the range, NaN and Inf. */
static float interesting_float(const fmt *f)
{
    switch (rnd() % 8) {
    case 0: return bitsf((uint32_t)rnd());
    case 1: case 2: case 3: { /* a midpoint between neighbours, +-0..2 ulp */
        uint32_t c = (uint32_t)(rnd() % (uint32_t)f->n);
        double lo = ref_double(f, f->code[c]);
        double hi = c + 1 < (uint32_t)f->n ? ref_double(f, f->code[c + 1])
                                           : 2 * lo - ref_double(f, f->code[c - 1]);
        float m = (float)((lo + hi) / 2); /* exact: a midpoint needs 1 more bit */
        int k = (int)(rnd() % 5) - 2;
        uint32_t u = fbits(m) + (uint32_t)k;
        float r = bitsf(u);
        return (rnd() & 1) ? -r : r;
    }
    case 4: return (float)ldexp(rnd_unit(), (int)(rnd() % 80) - 60) * ((rnd() & 1) ? 1 : -1);
    case 5: {
        static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65519.99f,
                                   65520.0f, 65520.01f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f,
                                   448.0f, 464.0f, 464.01f, 480.0f, 57344.0f, 61440.0f, 61439.0f,
                                   3.4028235e38f, 0x1p-133f, 0x1p-134f, 0x1.8p-134f, 1e-45f};
        return sp[rnd() % (sizeof sp / sizeof sp[0])];
    }
    default: return bitsf((uint32_t)rnd() & 0x807fffffu) ; /* subnormal */
    }
}

/* The compiler's own conversion to _Float16, where it has one, agrees with
 * the reference (x is a float or a double, exactly as given). */
static void check_float16(const char *from, double x, uint16_t want)
{
#ifdef __FLT16_MAX__
    if (!isnan(x)) {
        _Float16 o = (_Float16)x;
        uint16_t ob;
        memcpy(&ob, &o, 2);
        CHECK(ob == want, "%s %a -> _Float16 %04x, brute force %04x", from, x, ob, want);
    }
#else
    (void)from, (void)x, (void)want;
#endif
}

static void test_float_conversions(void)
{
    for (int i = 0; i < 300000; i++) {
        float f = interesting_float((i & 1) ? &F_HALF : &F_BF16);
        rv x = rv_of_double((double)f);
        uint16_t want = (uint16_t)ref_round(&F_HALF, x, OV_INF);
        uint16_t got = trsim_float_to_half(f);
        CHECK(got == want, "float %a -> half %04x, want %04x", f, got, want);
        got = trsim_double_to_half((double)f);
        CHECK(got == want, "double %a -> half %04x, want %04x", f, got, want);
        check_float16("float", f, want);
        want = (uint16_t)ref_round(&F_BF16, x, OV_INF);
        got = trsim_float_to_bf16(f);
        CHECK(got == want, "float %a -> bf16 %04x, want %04x", f, got, want);
    }
    /* doubles: random bits, and floats nudged by less than a float ulp */
    for (int i = 0; i < 200000; i++) {
        double d = (i & 1) ? bitsd(rnd())
                           : (double)interesting_float(&F_HALF) * (1 + (rnd_unit() - 0.5) * 0x1p-30);
        uint16_t want = (uint16_t)ref_round(&F_HALF, rv_of_double(d), OV_INF);
        uint16_t got = trsim_double_to_half(d);
        CHECK(got == want, "double %a -> half %04x, want %04x", d, got, want);
        check_float16("double", d, want);
    }
    CHECK(trsim_float_to_half(NAN) == 0x7fff && trsim_float_to_bf16(-NAN) == 0x7fff, "canonical NaN");
    CHECK(trsim_float_to_half(65520.0f) == 0x7c00 && trsim_float_to_half(65519.99f) == 0x7bff,
          "half overflow edge");
    CHECK(trsim_float_to_half(0x1p-25f) == 0 && trsim_float_to_half(0x1.8p-25f) == 1, "half underflow");
}

/* ---- reference fold ------------------------------------------------------ */

static const int all_types[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
                                ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16,
                                ncclFloat8e4m3, ncclFloat8e5m2};
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_PREMUL, NOPS };
static const char *op_names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};

static size_t tsize(int t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static uint64_t load(const void *p, size_t i, size_t sz)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * sz, sz); /* little endian */
    return v;
}

/* max/min the way fmaxf/__hmax do it: NaN loses, -0 < +0. */
static uint64_t ref_maxmin(int ismax, uint64_t ca, uint64_t cb, double a, double b, uint64_t canon)
{
    if (isnan(a) && isnan(b)) return canon;
    if (isnan(a)) return cb;
    if (isnan(b)) return ca;
    if (a == 0 && b == 0 && signbit(a) != signbit(b)) {
        int a_pos = !signbit(a);
        return (ismax == a_pos) ? ca : cb;
    }
    if (a == b) return ca;
    return (ismax ? a > b : a < b) ? ca : cb;
}

static int is_signed_int(int t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }

/* integer element as a signed 64-bit value (sign-extended) or unsigned */
static uint64_t int_mask(size_t sz) { return sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1; }
static int64_t sext(uint64_t v, size_t sz)
{
    if (sz == 8) return (int64_t)v;
    uint64_t sb = 1ull << (8 * sz - 1);
    return (int64_t)((v ^ sb) - sb);
}

static uint64_t dbl_to_int_bits(double d)
{
    if (isnan(d)) return 0;
    double t = trunc(d);
    if (t >= 0) return t < 18446744073709551616.0 ? (uint64_t)t : 0;
    return t >= -9223372036854775808.0 ? (uint64_t)(int64_t)t : 0;
}

static const fmt *small_fmt(int t)
{
    return t == ncclFloat16 ? &F_HALF : t == ncclBfloat16 ? &F_BF16
         : t == ncclFloat8e4m3 ? &F_E4M3 : t == ncclFloat8e5m2 ? &F_E5M2 : NULL;
}

/* One step on a small float type: op computed exactly, rounded once to the
 * type; fp8 goes through half (NCCL widens, computes in half, stores with
 * the saturating conversion). */
static uint32_t small_store(const fmt *f, rv exact)
{
    if (f == &F_E4M3 || f == &F_E5M2) {
        uint32_t h = ref_round(&F_HALF, exact, OV_INF);
        return ref_round(f, ref_decode(&F_HALF, h), OV_SAT);
    }
    return ref_round(f, exact, OV_INF);
}

/* The scalar of avg / premulsum, rounded as NCCL does. */
static uint64_t small_scalar(int t, int op, int n, double premul_scalar)
{
    const fmt *f = small_fmt(t);
    double d = op == OP_AVG ? (double)(float)(1.0 / n) : premul_scalar;
    int ov = (f == &F_E4M3 || f == &F_E5M2) ? OV_SAT : OV_INF;
    return ref_round(f, rv_of_double(d), ov);
}

static uint64_t ref_elem(int t, int op, int nsrc, const uint64_t *x, double scalar)
{
    size_t sz = tsize(t);
    if (nsrc == 1 && (op == OP_SUM || op == OP_PROD || op == OP_MAX || op == OP_MIN ||
                      (op == OP_AVG && t <= ncclUint64)))
        return x[0];
    if (t <= ncclUint64) {
        uint64_t m = int_mask(sz), acc = x[0];
        uint64_t s = dbl_to_int_bits(scalar) & m;
        if (op == OP_PREMUL) acc = (acc * s) & m;
        for (int k = 1; k < nsrc; k++) {
            uint64_t b = x[k];
            switch (op) {
            case OP_SUM: case OP_AVG: acc = (acc + b) & m; break;
            case OP_PROD: acc = (acc * b) & m; break;
            case OP_PREMUL: acc = (acc + b * s) & m; break;
            case OP_MAX: case OP_MIN: {
                int gt = is_signed_int(t) ? sext(acc, sz) > sext(b, sz) : acc > b;
                int lt = is_signed_int(t) ? sext(acc, sz) < sext(b, sz) : acc < b;
                acc = (op == OP_MAX ? gt : lt) ? acc : (acc == b ? acc : b);
                break;
            }
            }
        }
        if (op == OP_AVG) {
            if (is_signed_int(t)) acc = (uint64_t)(sext(acc, sz) / nsrc) & m;
            else acc = acc / (uint64_t)nsrc;
        }
        return acc;
    }
    if (t == ncclFloat32) {
        const uint32_t canon = 0x7fffffffu;
        float acc = bitsf((uint32_t)x[0]);
        float s = op == OP_AVG ? (float)(1.0 / nsrc) : (float)scalar;
        if (op == OP_AVG || op == OP_PREMUL) acc = acc * s;
        if (isnan(acc)) acc = bitsf(canon);
        for (int k = 1; k < nsrc; k++) {
            float b = bitsf((uint32_t)x[k]);
            switch (op) {
            case OP_SUM: acc = acc + b; break;
            case OP_PROD: acc = acc * b; break;
            case OP_AVG: case OP_PREMUL: acc = fmaf(b, s, acc); break;
            default: acc = bitsf((uint32_t)ref_maxmin(op == OP_MAX, fbits(acc), fbits(b), acc, b, canon));
            }
            if (isnan(acc)) acc = bitsf(canon);
        }
        return fbits(acc);
    }
    if (t == ncclFloat64) {
        const uint64_t canon = 0x7fffffffffffffffull;
        double acc = bitsd(x[0]);
        double s = op == OP_AVG ? 1.0 / nsrc : scalar;
        if (op == OP_AVG || op == OP_PREMUL) acc = acc * s;
        if (isnan(acc)) acc = bitsd(canon);
        for (int k = 1; k < nsrc; k++) {
            double b = bitsd(x[k]);
            switch (op) {
            case OP_SUM: acc = acc + b; break;
            case OP_PROD: acc = acc * b; break;
            case OP_AVG: case OP_PREMUL: acc = fma(b, s, acc); break;
            default: acc = bitsd(ref_maxmin(op == OP_MAX, dbits(acc), dbits(b), acc, b, canon));
            }
            if (isnan(acc)) acc = bitsd(canon);
        }
        return dbits(acc);
    }
    /* half, bfloat16, fp8 */
    const fmt *f = small_fmt(t);
    int fp8 = f == &F_E4M3 || f == &F_E5M2;
    uint32_t acc = (uint32_t)x[0];
    if (op == OP_AVG || op == OP_PREMUL) {
        rv s = ref_decode(f, (uint32_t)small_scalar(t, op, nsrc, scalar));
        /* first: x0*s rounded; then x*s + acc, one rounding (FMA); fp8 rounds
         * the product to fp8 first, then adds in half */
        acc = small_store(f, rv_mul(ref_decode(f, acc), s));
        for (int k = 1; k < nsrc; k++) {
            rv p = rv_mul(ref_decode(f, (uint32_t)x[k]), s);
            if (fp8) p = ref_decode(f, small_store(f, p));
            acc = small_store(f, rv_add(p, ref_decode(f, acc)));
        }
        return acc;
    }
    for (int k = 1; k < nsrc; k++) {
        uint32_t b = (uint32_t)x[k];
        switch (op) {
        case OP_SUM: acc = small_store(f, rv_add(ref_decode(f, acc), ref_decode(f, b))); break;
        case OP_PROD: acc = small_store(f, rv_mul(ref_decode(f, acc), ref_decode(f, b))); break;
        default:
            acc = (uint32_t)ref_maxmin(op == OP_MAX, acc, b, ref_double(f, acc), ref_double(f, b),
                                       f->canon_nan);
        }
    }
    return acc;
}

/* ---- random inputs --------------------------------------------------------- */

static uint64_t rand_elem(int t)
{
    uint64_t r = rnd();
    int pick = (int)(rnd() % 10);
    switch (t) {
    case ncclFloat32:
        if (pick < 3) return (uint32_t)r;
        if (pick < 8) return fbits((float)((rnd_unit() - 0.5) * ldexp(1, (int)(rnd() % 40) - 20)));
        {
            static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f,
                                       3.4028235e38f, 1e-45f, -1e-40f};
            return fbits(sp[rnd() % 10]);
        }
    case ncclFloat64:
        if (pick < 3) return r;
        if (pick < 8) return dbits((rnd_unit() - 0.5) * ldexp(1, (int)(rnd() % 80) - 40));
        {
            static const double sp[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0,
                                        1.7976931348623157e308, 5e-324, -1e-310};
            return dbits(sp[rnd() % 10]);
        }
    case ncclFloat16: case ncclBfloat16: {
        const fmt *f = small_fmt(t);
        if (pick == 0) return (r & 0x10000) ? 0x8000 : 0; /* +-0 */
        if (pick < 4) return r & 0xffff;
        /* moderate values: exponents near 1, so sums and products stay finite */
        uint32_t bias = (1u << (f->ebits - 1)) - 1;
        uint32_t e = bias - 6 + (uint32_t)(rnd() % 10);
        return ((r >> 20) & 0x8000) | (e << f->mbits) | (r & ((1u << f->mbits) - 1));
    }
    case ncclFloat8e4m3: case ncclFloat8e5m2:
        if (pick == 0) return (r & 0x100) ? 0x80 : 0; /* +-0 */
        return r & 0xff;
    default:
        if (pick < 3 && tsize(t) > 1) return r % 16; /* small integers */
        return r & int_mask(tsize(t));
    }
}

static int run_reduce_case(int t, int op, int nsrc, size_t count, int alias)
{
    size_t sz = tsize(t);
    void *src[8];
    for (int k = 0; k < nsrc; k++) {
        src[k] = malloc(count * sz);
        for (size_t i = 0; i < count; i++) {
            uint64_t v = rand_elem(t);
            memcpy((char *)src[k] + i * sz, &v, sz);
        }
    }
    double scalar = 0;
    if (op == OP_PREMUL) {
        static const double sc[] = {0.5, 3.0, -2.0, 0.3333333333333333, 1.0, 7.0, -0.75};
        scalar = sc[rnd() % 7];
    }
    uint64_t *want = malloc(count * sizeof(uint64_t));
    for (size_t i = 0; i < count; i++) {
        uint64_t x[8];
        for (int k = 0; k < nsrc; k++) x[k] = load(src[k], i, sz);
        want[i] = ref_elem(t, op, nsrc, x, scalar);
    }
    void *dst = alias ? src[0] : malloc(count * sz);
    trsim_redop ro = {op == OP_SUM ? ncclSum : op == OP_PROD ? ncclProd : op == OP_MAX ? ncclMax
                      : op == OP_MIN ? ncclMin : op == OP_AVG ? ncclAvg : ncclSum,
                      op == OP_PREMUL, scalar};
    trsim_reduce(dst, (const void *const *)src, nsrc, count, t, ro);
    int bad = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t got = load(dst, i, sz);
        if (got != want[i]) {
            if (bad++ < 3) {
                uint64_t x[8];
                for (int k = 0; k < nsrc; k++) x[k] = load(src[k], i, sz);
                CHECK(0, "%s %s nsrc=%d%s [%zu]: got %llx want %llx (inputs %llx %llx %llx...)",
                      trsim_dtype_name(t), op_names[op], nsrc, alias ? " in place" : "", i,
                      (unsigned long long)got, (unsigned long long)want[i],
                      (unsigned long long)x[0], nsrc > 1 ? (unsigned long long)x[1] : 0ull,
                      nsrc > 2 ? (unsigned long long)x[2] : 0ull);
            }
        }
    }
    if (bad > 3) CHECK(0, "... %d mismatches in all", bad);
    if (!alias) free(dst);
    for (int k = 0; k < nsrc; k++) free(src[k]);
    free(want);
    return bad;
}

/* every pair of fp8 values, every op but the scaled ones */
static void test_fp8_pairs(void)
{
    static const int types[] = {ncclFloat8e4m3, ncclFloat8e5m2};
    static const int ops[] = {OP_SUM, OP_PROD, OP_MAX, OP_MIN};
    static const int nccl_ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
    uint8_t *a = malloc(65536), *b = malloc(65536), *out = malloc(65536);
    for (uint32_t i = 0; i < 65536; i++) a[i] = (uint8_t)(i >> 8), b[i] = (uint8_t)i;
    const void *srcs[2] = {a, b};
    for (int ti = 0; ti < 2; ti++)
        for (int oi = 0; oi < 4; oi++) {
            trsim_redop ro = {nccl_ops[oi], 0, 0};
            trsim_reduce(out, srcs, 2, 65536, types[ti], ro);
            int bad = 0;
            for (uint32_t i = 0; i < 65536; i++) {
                uint64_t x[2] = {a[i], b[i]};
                uint64_t want = ref_elem(types[ti], ops[oi], 2, x, 0);
                if (out[i] != want && bad++ < 3)
                    CHECK(0, "%s %s %02x, %02x: got %02x want %02x", trsim_dtype_name(types[ti]),
                          op_names[ops[oi]], a[i], b[i], out[i], (unsigned)want);
            }
        }
    free(a), free(b), free(out);
}

static void test_reduce(void)
{
    static const int nsrcs[] = {1, 2, 3, 4, 8};
    int cases = 0;
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++)
        for (int op = 0; op < NOPS; op++)
            for (int ni = 0; ni < 5; ni++) {
                /* more than two blocks and a partial one */
                run_reduce_case(all_types[ti], op, nsrcs[ni], 2600, 0);
                cases++;
            }
    /* in place, and tiny counts */
    for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++)
        for (int op = 0; op < NOPS; op++) {
            run_reduce_case(all_types[ti], op, 3, 1500, 1);
            run_reduce_case(all_types[ti], op, 2, 1 + rnd() % 7, 0);
            cases += 2;
        }
    printf("reduce: %d cases\n", cases);
}

/* ---- the known cases ------------------------------------------------------ */

static uint64_t reduce2(int t, int op, uint64_t a, uint64_t b, int nsrc)
{
    uint64_t in[2] = {a, b}, out = 0;
    const void *srcs[2] = {&in[0], &in[1]};
    trsim_redop ro = {op, 0, 0};
    trsim_reduce(&out, srcs, nsrc, 1, t, ro);
    return out;
}

static void test_known(void)
{
    uint16_t h60000 = trsim_float_to_half(60000.0f);
    CHECK(reduce2(ncclFloat16, ncclSum, h60000, h60000, 2) == 0x7c00, "fp16 60000+60000 = +Inf");
    /* NCCL stores fp8 results with __NV_SATFINITE: 448+448 is 448, not NaN;
     * the non-saturating conversion gives the NaN */
    CHECK(reduce2(ncclFloat8e4m3, ncclSum, 0x7e, 0x7e, 2) == 0x7e, "e4m3 448+448 = 448 (satfinite)");
    CHECK(trsim_half_to_e4m3(trsim_float_to_half(896.0f)) == 0x7f, "e4m3 nosat 896 = NaN");
    CHECK(reduce2(ncclFloat8e5m2, ncclSum, 0x7b, 0x7b, 2) == 0x7b, "e5m2 57344+57344 = 57344 (satfinite)");
    CHECK(trsim_half_to_e5m2(trsim_double_to_half(114688.0)) == 0x7c, "e5m2 nosat 114688 = Inf");
    CHECK(reduce2(ncclFloat8e5m2, ncclSum, 0x7c, 0x3c, 2) == 0x7b, "e5m2 Inf+1 = 57344 (satfinite)");
    CHECK(reduce2(ncclFloat8e4m3, ncclSum, 0x7f, 0x38, 2) == 0x7f, "e4m3 NaN+1 = NaN");
    CHECK((int8_t)reduce2(ncclInt8, ncclSum, 127, 1, 2) == -128, "int8 127+1 = -128");
    CHECK(reduce2(ncclInt32, ncclAvg, 7, 8, 2) == 7, "avg int 7,8 = 7");
    CHECK((int32_t)reduce2(ncclInt32, ncclAvg, (uint32_t)-7, (uint32_t)-8, 2) == -7, "avg int -7,-8 = -7");
    CHECK(reduce2(ncclFloat32, ncclSum, fbits(NAN), fbits(1.0f), 2) == 0x7fffffffu, "NaN+1 = NaN");
    CHECK(reduce2(ncclFloat32, ncclSum, fbits(1.0f), fbits(-NAN), 2) == 0x7fffffffu, "1+NaN = NaN");
    CHECK(reduce2(ncclFloat32, ncclSum, fbits(INFINITY), fbits(-INFINITY), 2) == 0x7fffffffu, "Inf-Inf");
    CHECK(reduce2(ncclFloat16, ncclSum, 0x7e00, 0x3c00, 2) == 0x7fff, "half NaN+1 = NaN");
    CHECK(reduce2(ncclBfloat16, ncclSum, 0xffc1, 0x3f80, 2) == 0x7fff, "bf16 NaN+1 = NaN");
    CHECK(reduce2(ncclFloat32, ncclMax, fbits(NAN), fbits(1.0f), 2) == fbits(1.0f), "max(NaN,1) = 1");
    CHECK(reduce2(ncclFloat32, ncclMin, fbits(1.0f), fbits(NAN), 2) == fbits(1.0f), "min(1,NaN) = 1");
    CHECK(reduce2(ncclFloat64, ncclMax, dbits(NAN), dbits(1.0), 2) == dbits(1.0), "f64 max(NaN,1) = 1");
    CHECK(reduce2(ncclFloat16, ncclMax, 0x7e00, 0x3c00, 2) == 0x3c00, "half max(NaN,1) = 1");
    CHECK(reduce2(ncclBfloat16, ncclMax, 0x7fc0, 0x3f80, 2) == 0x3f80, "bf16 max(NaN,1) = 1");
    CHECK(reduce2(ncclFloat8e4m3, ncclMax, 0x7f, 0x38, 2) == 0x38, "e4m3 max(NaN,1) = 1");
    CHECK(reduce2(ncclFloat32, ncclMax, fbits(NAN), fbits(NAN), 2) == 0x7fffffffu, "max(NaN,NaN)");
    CHECK(reduce2(ncclFloat32, ncclMax, fbits(-0.0f), fbits(0.0f), 2) == 0, "max(-0,+0) = +0");
    CHECK(reduce2(ncclFloat32, ncclMin, fbits(0.0f), fbits(-0.0f), 2) == 0x80000000u, "min(+0,-0) = -0");
    CHECK(reduce2(ncclFloat16, ncclMax, 0x8000, 0x0000, 2) == 0, "half max(-0,+0) = +0");
    CHECK(reduce2(ncclFloat16, ncclMin, 0x0000, 0x8000, 2) == 0x8000, "half min(+0,-0) = -0");
    CHECK(reduce2(ncclBfloat16, ncclMin, 0x0000, 0x8000, 2) == 0x8000, "bf16 min(+0,-0) = -0");
    CHECK(reduce2(ncclFloat8e4m3, ncclMax, 0x80, 0x00, 2) == 0x00, "e4m3 max(-0,+0) = +0");
    CHECK(reduce2(ncclFloat8e5m2, ncclMin, 0x00, 0x80, 2) == 0x80, "e5m2 min(+0,-0) = -0");
    CHECK(reduce2(ncclFloat16, ncclSum, 0x8000, 0x8000, 2) == 0x8000, "half -0 + -0 = -0");
    CHECK(reduce2(ncclFloat16, ncclSum, 0x8000, 0x0000, 2) == 0x0000, "half -0 + +0 = +0");
    CHECK(reduce2(ncclInt8, ncclMax, 0x80, 0x7f, 2) == 0x7f, "int8 max");
    CHECK(reduce2(ncclUint8, ncclMax, 0x80, 0x7f, 2) == 0x80, "uint8 max");
    CHECK(reduce2(ncclInt64, ncclMin, 0x8000000000000000ull, 5, 2) == 0x8000000000000000ull, "int64 min");
    CHECK(reduce2(ncclUint32, ncclProd, 0x10000, 0x10000, 2) == 0, "uint32 prod wraps");
    CHECK(reduce2(ncclFloat32, ncclSum, fbits(NAN), 0, 1) == fbits(NAN), "nsrc=1 copies bits");
    /* avg over 3 of float32: x/3 ~ x*float(1/3), then fma */
    {
        float in[3] = {1.0f, 2.0f, 4.0f}, out;
        const void *srcs[3] = {&in[0], &in[1], &in[2]};
        trsim_redop ro = {ncclAvg, 0, 0};
        trsim_reduce(&out, srcs, 3, 1, ncclFloat32, ro);
        float s = (float)(1.0 / 3);
        CHECK(out == fmaf(4.0f, s, fmaf(2.0f, s, 1.0f * s)), "avg f32 of 1,2,4 = %a", out);
    }
    /* bfloat16 premulsum, one rounding: x1*s = 1.5 + 2^-5 + 2^-8 is a tie in
     * bfloat16, the tiny acc (1.5 * 2^-60) decides it upwards; a double sum
     * would lose it and round to even */
    {
        uint16_t in[2] = {0x2180 /* 2^-60 */, 0x3f83 /* 1 + 3*2^-7 */}, out;
        const void *srcs[2] = {&in[0], &in[1]};
        trsim_redop ro = {ncclSum, 1, 1.5};
        trsim_reduce(&out, srcs, 2, 1, ncclBfloat16, ro);
        CHECK(out == 0x3fc5, "bf16 premulsum tie broken by acc: %04x", out);
    }
    /* avg's scalar goes through float: for 8283 ranks half(float(1/n)) is not
     * half(1/n) */
    {
        enum { N = 8283 };
        static const void *srcs[N];
        uint16_t one = 0x3c00, zero = 0, out;
        srcs[0] = &one;
        for (int k = 1; k < N; k++) srcs[k] = &zero;
        trsim_redop ro = {ncclAvg, 0, 0};
        trsim_reduce(&out, srcs, N, 1, ncclFloat16, ro);
        uint16_t want = (uint16_t)ref_round(&F_HALF, rv_of_double((double)(float)(1.0 / N)), OV_INF);
        uint16_t direct = (uint16_t)ref_round(&F_HALF, rv_of_double(1.0 / N), OV_INF);
        CHECK(out == want && want != direct, "half avg scalar for n=%d: %04x (want %04x, not %04x)",
              N, out, want, direct);
    }
    /* premulsum on int32: 3*x summed */
    {
        int32_t in[2] = {5, -9}, out;
        const void *srcs[2] = {&in[0], &in[1]};
        trsim_redop ro = {ncclSum, 1, 3.0};
        trsim_reduce(&out, srcs, 2, 1, ncclInt32, ro);
        CHECK(out == -12, "premulsum int32 3*(5-9) = %d", out);
    }
    /* sizes and names */
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    static const char *names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                  "float16", "float32", "float64", "bfloat16", "float8e4m3",
                                  "float8e5m2"};
    for (int t = 0; t < 12; t++) {
        CHECK(trsim_dtype_size(t) == sizes[t], "size of %d", t);
        CHECK(strcmp(trsim_dtype_name(t), names[t]) == 0, "name of %d: %s", t, trsim_dtype_name(t));
    }
    CHECK(trsim_dtype_size(12) == 0 && trsim_dtype_size(-1) == 0, "size of invalid");
    CHECK(strcmp(trsim_dtype_name(12), "invalid") == 0 && strcmp(trsim_dtype_name(-1), "invalid") == 0,
          "name of invalid");
    /* an invalid type or op leaves dst alone */
    {
        uint64_t a = 1, b = 2, out = 99;
        const void *srcs[2] = {&a, &b};
        trsim_redop bad = {42, 0, 0};
        trsim_reduce(&out, srcs, 2, 1, ncclFloat32, bad);
        trsim_redop sum = {ncclSum, 0, 0};
        trsim_reduce(&out, srcs, 2, 1, 12, sum);
        CHECK(out == 99, "invalid op/type wrote %llu", (unsigned long long)out);
    }
}

int main(void)
{
    build_table(&F_HALF);
    build_table(&F_BF16);
    build_table(&F_E4M3);
    build_table(&F_E5M2);
    CHECK(F_HALF.n == 0x7c00 && F_BF16.n == 0x7f80 && F_E4M3.n == 0x7f && F_E5M2.n == 0x7c,
          "table sizes %d %d %d %d", F_HALF.n, F_BF16.n, F_E4M3.n, F_E5M2.n);
#ifndef __FLT16_MAX__
    printf("note: no _Float16 in this compiler, second oracle skipped\n");
#endif
    test_decode();
    test_roundtrip();
    test_half_to_fp8();
    test_float_conversions();
    test_known();
    test_fp8_pairs();
    test_reduce();
    if (failures) {
        printf("FAILED: %d checks\n", failures);
        return 1;
    }
    printf("all dtype checks passed\n");
    return 0;
}
