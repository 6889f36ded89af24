/* Independent host reference for the NCCL element types: decodes every type
 * from its definition (sign, exponent, mantissa), so results of the simulated
 * collectives are checked without using the simulator's own conversions. */
#ifndef REFDTYPE_H
#define REFDTYPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <nccl.h>

static const int ref_types[] = {
    ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64, ncclFloat16,
    ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2,
};
#define REF_NTYPES ((int)(sizeof ref_types / sizeof ref_types[0]))

static inline const char *ref_type_name(int t)
{
    static const char *names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                  "float16", "float32", "float64", "bfloat16", "e4m3", "e5m2"};
    return t >= 0 && t < 12 ? names[t] : "?";
}

static inline size_t ref_size(int t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

static inline int ref_is_float(int t)
{
    return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
           t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

static inline int ref_is_unsigned(int t)
{
    return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

/* Generic binary float: ebits exponent bits, mbits mantissa bits. */
static inline double ref_decode_bits(uint32_t bits, int ebits, int mbits, int has_inf)
{
    int sign = (bits >> (ebits + mbits)) & 1;
    uint32_t e = (bits >> mbits) & ((1u << ebits) - 1);
    uint32_t m = bits & ((1u << mbits) - 1);
    int bias = (1 << (ebits - 1)) - 1;
    double v;
    if (e == (1u << ebits) - 1 && has_inf) v = m ? NAN : INFINITY;
    else if (e == (1u << ebits) - 1 && !has_inf && m == (1u << mbits) - 1) v = NAN; /* e4m3fn */
    else if (e == 0) v = ldexp((double)m, 1 - bias - mbits);
    else v = ldexp((double)((1u << mbits) | m), (int)e - bias - mbits);
    return sign ? -v : v;
}

/* Element i of a buffer of type t as a double (integers exactly up to 2^53). */
static inline double ref_get(const void *buf, size_t i, int t)
{
    const unsigned char *p = (const unsigned char *)buf + i * ref_size(t);
    switch (t) {
    case ncclInt8: return (double)*(const int8_t *)p;
    case ncclUint8: return (double)*(const uint8_t *)p;
    case ncclInt32: return (double)*(const int32_t *)p;
    case ncclUint32: return (double)*(const uint32_t *)p;
    case ncclInt64: return (double)*(const int64_t *)p;
    case ncclUint64: return (double)*(const uint64_t *)p;
    case ncclFloat32: return (double)*(const float *)p;
    case ncclFloat64: return *(const double *)p;
    case ncclFloat16: { uint16_t b; memcpy(&b, p, 2); return ref_decode_bits(b, 5, 10, 1); }
    case ncclBfloat16: { uint16_t b; memcpy(&b, p, 2); return ref_decode_bits(b, 8, 7, 1); }
    case ncclFloat8e4m3: return ref_decode_bits(*p, 4, 3, 0);
    case ncclFloat8e5m2: return ref_decode_bits(*p, 5, 2, 1);
    }
    return NAN;
}

/* Stores an exactly representable value v (small integers, halves...): the
 * encoding is found by search, not by arithmetic on the format. */
static inline int ref_set(void *buf, size_t i, int t, double v)
{
    unsigned char *p = (unsigned char *)buf + i * ref_size(t);
    switch (t) {
    case ncclInt8: *(int8_t *)p = (int8_t)v; return 1;
    case ncclUint8: *(uint8_t *)p = (uint8_t)v; return 1;
    case ncclInt32: *(int32_t *)p = (int32_t)v; return 1;
    case ncclUint32: *(uint32_t *)p = (uint32_t)v; return 1;
    case ncclInt64: *(int64_t *)p = (int64_t)v; return 1;
    case ncclUint64: *(uint64_t *)p = (uint64_t)v; return 1;
    case ncclFloat32: *(float *)p = (float)v; return 1;
    case ncclFloat64: *(double *)p = v; return 1;
    default: break;
    }
    int bits = ref_size(t) == 1 ? 8 : 16;
    /* The search is slow; tests store few distinct values, so remember them. */
    static struct { int t; double v; uint32_t b; } memo[256];
    static int nmemo;
    for (int k = 0; k < nmemo; k++)
        if (memo[k].t == t && memo[k].v == v && signbit(memo[k].v) == signbit(v)) {
            if (bits == 8) *p = (unsigned char)memo[k].b;
            else { uint16_t h = (uint16_t)memo[k].b; memcpy(p, &h, 2); }
            return 1;
        }
    for (uint32_t b = 0; b < (1u << bits); b++) {
        double d = t == ncclFloat16 ? ref_decode_bits(b, 5, 10, 1)
                 : t == ncclBfloat16 ? ref_decode_bits(b, 8, 7, 1)
                 : t == ncclFloat8e4m3 ? ref_decode_bits(b, 4, 3, 0) : ref_decode_bits(b, 5, 2, 1);
        if (d == v && (v != 0 || !signbit(d))) {
            if (nmemo < 256) { memo[nmemo].t = t; memo[nmemo].v = v; memo[nmemo].b = b; nmemo++; }
            if (bits == 8) *p = (unsigned char)b;
            else { uint16_t h = (uint16_t)b; memcpy(p, &h, 2); }
            return 1;
        }
    }
    return 0;
}

/* Wraps an exact integer result to the type's width, as the GPU does. */
static inline double ref_wrap(double v, int t)
{
    switch (t) {
    case ncclInt8: return (double)(int8_t)(uint8_t)(int64_t)v;
    case ncclUint8: return (double)(uint8_t)(int64_t)v;
    case ncclInt32: return (double)(int32_t)(uint32_t)(int64_t)v;
    case ncclUint32: return (double)(uint32_t)(int64_t)v;
    default: return v;
    }
}

#endif
