/* Simulated NCCL user reduction ops (ncclRedOpCreatePreMulSum) and how an
 * operation's reduction op handle is resolved. */
#include <stdlib.h>

#include "nccl_internal.h"

double trsim_scalar_value(const void *p, int datatype)
{
    switch (datatype) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *(const uint8_t *)p;
    case ncclInt32: return *(const int32_t *)p;
    case ncclUint32: return *(const uint32_t *)p;
    case ncclInt64: return (double)*(const int64_t *)p;
    case ncclUint64: return (double)*(const uint64_t *)p;
    case ncclFloat16: return trsim_half_to_float(*(const uint16_t *)p);
    case ncclFloat32: return *(const float *)p;
    case ncclFloat64: return *(const double *)p;
    case ncclBfloat16: return trsim_bf16_to_float(*(const uint16_t *)p);
    case ncclFloat8e4m3: return trsim_e4m3_to_float(*(const uint8_t *)p);
    case ncclFloat8e5m2: return trsim_e5m2_to_float(*(const uint8_t *)p);
    default: return 0;
    }
}

TRSIM_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                                ncclScalarResidence_t residence, ncclComm_t comm)
{
    if (!trsim_comm_valid(comm) || !op || !scalar || !trsim_dtype_size(datatype) ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate))
        return ncclInvalidArgument;
    pthread_mutex_lock(&comm->lock);
    int slot = 0;
    while (slot < comm->nredops && comm->redops[slot].in_use) slot++;
    if (slot == comm->nredops) {
        struct trsim_comm_redop *grown = realloc(comm->redops, (size_t)(slot + 1) * sizeof *grown);
        if (!grown) { pthread_mutex_unlock(&comm->lock); return ncclSystemError; }
        comm->redops = grown;
        comm->nredops++;
    }
    struct trsim_comm_redop *r = &comm->redops[slot];
    r->in_use = 1;
    r->datatype = datatype;
    r->dev_scalar = residence == ncclScalarDevice ? scalar : NULL;
    r->scalar = residence == ncclScalarDevice ? 0 : trsim_scalar_value(scalar, datatype);
    pthread_mutex_unlock(&comm->lock);
    *op = (ncclRedOp_t)(ncclNumOps + slot);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    int slot = (int)op - ncclNumOps;
    pthread_mutex_lock(&comm->lock);
    ncclResult_t r = ncclInvalidArgument;
    if (slot >= 0 && slot < comm->nredops && comm->redops[slot].in_use) {
        comm->redops[slot].in_use = 0;
        r = ncclSuccess;
    }
    pthread_mutex_unlock(&comm->lock);
    return r;
}

ncclResult_t trsim_comm_redop(struct ncclComm *comm, int op, int datatype, trsim_redop *out,
                              const void **dev_scalar)
{
    *dev_scalar = NULL;
    if (op >= ncclSum && op < ncclNumOps) {
        out->op = op;
        out->premul = 0;
        out->scalar = 0;
        return ncclSuccess;
    }
    int slot = op - ncclNumOps;
    ncclResult_t r = ncclInvalidArgument;
    pthread_mutex_lock(&comm->lock);
    if (slot >= 0 && slot < comm->nredops && comm->redops[slot].in_use &&
        comm->redops[slot].datatype == datatype) {
        out->op = ncclSum;
        out->premul = 1;
        out->scalar = comm->redops[slot].scalar;
        *dev_scalar = comm->redops[slot].dev_scalar;
        r = ncclSuccess;
    }
    pthread_mutex_unlock(&comm->lock);
    if (r != ncclSuccess) trsim_set_last_error("invalid reduction op %d for datatype %d", op, datatype);
    return r;
}
