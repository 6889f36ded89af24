/* Element types and reductions of the simulated NCCL, bit-exact with NCCL's
 * kernels: every reduction step rounds to the element type, as the GPU does. */
#ifndef TRSIM_DTYPE_H
#define TRSIM_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>

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

#endif
