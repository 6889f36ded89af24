/* Element types and reductions of the simulated NCCL, bit-exact with NCCL's
 * kernels: every reduction step rounds to the element type, as the GPU does. */
#ifndef TRSIM_DTYPE_H
#define TRSIM_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "trshim/nccl_abi.h"

/* Bytes per element; 0 for a value that is not an ncclDataType_t. */
size_t trsim_dtype_size(int datatype);
/* "float32", "bfloat16", ...; "invalid" for an unknown value. */
const char *trsim_dtype_name(int datatype);

/* A reduction as it runs: one of ncclSum/Prod/Max/Min/Avg, or a PreMulSum
 * created with ncclRedOpCreatePreMulSum (premul = 1, scalar as double). */
typedef struct {
    int op;          /* ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg */
    int premul;      /* 1: multiply each input by `scalar` before summing */
    double scalar;
} trsim_redop;

/* dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... (op) srcs[nsrc-1][i], for
 * i < count, combined left to right with the result rounded to datatype
 * after every step. ncclAvg: floating types multiply each input by 1/nsrc
 * (rounded to the type) before summing, integer types divide the sum by
 * nsrc, as NCCL does. dst may alias srcs[0]. */
void trsim_reduce(void *dst, const void *const *srcs, int nsrc, size_t count,
                  int datatype, trsim_redop op);

/* Conversions (round to nearest even; overflow gives Inf, or NaN for e4m3
 * which has no Inf). Exposed for tests and for the shim's checks. */
float trsim_half_to_float(uint16_t h);
uint16_t trsim_float_to_half(float f);
uint16_t trsim_double_to_half(double d);
float trsim_bf16_to_float(uint16_t b);
uint16_t trsim_float_to_bf16(float f);
float trsim_e4m3_to_float(uint8_t v);
uint8_t trsim_half_to_e4m3(uint16_t h);
float trsim_e5m2_to_float(uint8_t v);
uint8_t trsim_half_to_e5m2(uint16_t h);

/* The conversions NCCL's fp8 kernels use to store a result: __nv_fp8_e4m3(h)
 * and __nv_fp8_e5m2(h) (cuda_fp8.hpp: __NV_SATFINITE). Round to nearest even;
 * a finite overflow and +-Inf give +-max finite (448, 57344); NaN gives 0x7f
 * (e4m3: 0x7f | sign; e5m2: the quieted top bits of the half). */
uint8_t trsim_half_to_e4m3_sat(uint16_t h);
uint8_t trsim_half_to_e5m2_sat(uint16_t h);

/* Exact semantics of trsim_reduce (NCCL 2.28's ring kernels on sm_90):
 *  - nsrc == 1 without a pre-multiply (sum, prod, max, min, integer avg):
 *    a plain copy, bits included.
 *  - A NaN produced by arithmetic is the GPU's canonical NaN: 0x7fff (half,
 *    bfloat16), 0x7fffffff (float32), 0x7fffffffffffffff (float64), 0x7f (fp8).
 *  - max/min on floating types: a NaN operand loses to a number, two NaNs give
 *    the canonical NaN, and -0 < +0.
 *  - float16, bfloat16: every step is the correctly rounded result (sm_80+
 *    computes them natively).
 *  - fp8: both operands widened to half, the op done in half, the result
 *    stored with trsim_half_to_e*_sat: an overflow saturates to max finite,
 *    an e5m2 Inf becomes 57344 (NCCL uses the saturating constructors).
 *  - ncclAvg on floating types / PreMulSum: the scalar s is 1/nsrc as NCCL
 *    makes it (float64: 1.0/nsrc; the others: float(1.0/nsrc), then for
 *    half/bf16/fp8 rounded to the type, fp8 saturating), or op.scalar rounded
 *    to the type (nearest even; fp8 saturating). acc = x0*s rounded; then
 *    acc = x_k*s + acc with ONE rounding (nvcc contracts NCCL's multiply and
 *    add into an FMA) for float16, bfloat16, float32 and float64; for fp8 the
 *    product is stored as fp8 first (saturating), then added in half.
 *  - Integer PreMulSum multiplies by the scalar truncated to the type
 *    (wrapping); integer avg sums (wrapping) then divides, truncating. */

#endif
