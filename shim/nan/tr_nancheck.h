/* NaN/Inf checks of reduced buffers (tr_nancheck.c; results and JSON in tr_nanresults.c): used by tr_nccl.c's
 * AllReduce, ReduceScatter and Reduce wrappers and its GroupEnd wrapper,
 * and by tr_writer.c for the trace's "nancheck" and "checks" members
 * (docs/trace-format.md). nan/'s boundary: the one header of the folder a
 * file outside it includes. */
#ifndef TR_NANCHECK_H
#define TR_NANCHECK_H

#include <stdint.h>
#include <cuda_runtime_api.h>
#include "trshim/nccl_abi.h"

#include "tr_core.h"

enum { TR_NAN_OP_ALLREDUCE, TR_NAN_OP_REDUCESCATTER, TR_NAN_OP_REDUCE };

/* One collective, as its wrapper describes it. */
typedef struct {
    uint64_t rec;              /* index of the call's record */
    int op;                    /* TR_NAN_OP_* */
    int dtype;                 /* ncclDataType_t */
    size_t count;              /* as passed (ReduceScatter: the receive count) */
    const void *sendbuff;
    const void *recvbuff;
    int root;                  /* Reduce */
    ncclComm_t comm;
    int32_t comm_index;        /* tr_comm index, -1 */
    int nranks, rank;          /* in the communicator, -1 unknown */
    int device;                /* the communicator's device, -1 unknown */
    int blocking;              /* the communicator is blocking */
    cudaStream_t stream;
    int capturing;             /* the stream captures a graph: 1 yes, 0 no, -1 unknown */
} tr_nan_call;

/* Whether a collective of datatype dtype gets checks (checks on, a
 * floating datatype): a test on two integers, for the wrappers. */
static inline int tr_nan_wanted(int dtype)
{
    return tr_cfg()->nancheck != TR_NAN_OFF && dtype >= ncclFloat16 && dtype <= ncclFloat8e5m2;
}

/* Before the real collective: the input check (mode "all"). Inside a
 * group (in_group), the call is remembered and both checks wait for the
 * outermost GroupEnd. */
void tr_nan_before(const tr_nan_call *c, int in_group);
/* After the real collective returned rc: the output check (on a
 * non-blocking communicator: once the operation is enqueued). */
void tr_nan_after(const tr_nan_call *c, int in_group, ncclResult_t rc);
/* The outermost GroupEnd: before the real call (input checks of the
 * group's calls), then after it returned rc (output checks). */
void tr_nan_group_end_before(void);
void tr_nan_group_end_after(ncclResult_t rc);
/* The wrappers of the calls that end a communicator, after setting its
 * end_kind and before the real call: waits while the NaN thread is asking
 * NCCL about comm (its handle may be freed by the real call). */
void tr_nan_comm_ending(ncclComm_t comm);

/* ---- the writer's side ------------------------------------------------------
 * A snapshot of the checks, sorted by call; tr_nccl_write_json places each
 * call it writes (record index -> position in "calls"); tr_nan_write_json
 * writes "nancheck", "check_fields" and "checks" for the placed calls and
 * frees the snapshot. tr_nan_snapshot returns NULL when checks are off. */
typedef struct tr_nan_snap tr_nan_snap;
tr_nan_snap *tr_nan_snapshot(void);
void tr_nan_place(tr_nan_snap *s, uint64_t rec, uint64_t pos);
void tr_nan_write_json(tr_json *j, tr_nan_snap *s);

#endif
