/* Host scanners of the NaN/Inf check (tr_nanscan.c): count the NaN and
 * infinite elements of a buffer of one floating datatype and find the first
 * of each, by bit patterns only (no conversion):
 *   float64, float32, float16, bfloat16: exponent all ones, mantissa zero is
 *     an infinity, non-zero a NaN (IEEE 754);
 *   float8 e5m2: IEEE-like (S.11111.00 infinity, S.11111.xx NaN);
 *   float8 e4m3 (OCP FP8, as NVIDIA's __nv_fp8_e4m3): only S.1111.111 is
 *     NaN; it has no infinity.
 * Shared with the GPU kernel (tr_nangpu.cu), which tests the same patterns.
 * Self-contained (no other part of the shim), so tests and benchmarks link
 * it alone. Private to nan/ (its boundary: tr_nancheck.h). */
#ifndef TR_NANSCAN_H
#define TR_NANSCAN_H

#include <stddef.h>
#include <stdint.h>

/* The datatypes, numbered as ncclDataType_t. */
enum {
    TR_NS_FLOAT16 = 6,
    TR_NS_FLOAT32 = 7,
    TR_NS_FLOAT64 = 8,
    TR_NS_BFLOAT16 = 9,
    TR_NS_E4M3 = 10,
    TR_NS_E5M2 = 11,
};

#define TR_NS_NONE UINT64_MAX     /* no such element */

typedef struct {
    uint64_t nan, inf;            /* counts */
    uint64_t first_nan, first_inf;  /* element indexes, TR_NS_NONE */
} tr_nanscan_result;

/* Bytes per element of a checked datatype; 0 for any other (integers,
 * invalid values): those are not checked. */
size_t tr_nanscan_esize(int dtype);

/* Scans n elements of dtype at p (any address aligned to the element size),
 * adding to *r; element i of the buffer is reported as base + i. Returns 0,
 * or -1 for a datatype that is not checked. The common case (no NaN or Inf)
 * runs at memory speed: 64-bit words are tested a few lanes at a time with
 * (w & abs) + step & sign (a carry into a lane's sign bit means exponent all
 * ones), and only a block that has one is scanned element by element. */
int tr_nanscan(int dtype, const void *p, size_t n, uint64_t base, tr_nanscan_result *r);

/* 1 NaN, 2 infinity, 0 finite: one element given as its bits (the low
 * esize bytes of bits). */
int tr_nanscan_classify(int dtype, uint64_t bits);

static inline void tr_nanscan_init(tr_nanscan_result *r)
{
    r->nan = r->inf = 0;
    r->first_nan = r->first_inf = TR_NS_NONE;
}

#endif
