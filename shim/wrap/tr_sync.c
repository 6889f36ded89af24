/* The application's stream and device synchronizations, called through
 * unchanged: one that returned cudaSuccess proves that the NCCL operations
 * enqueued before it completed, which the completion poller (tr_complete.c)
 * would see only at its next pass; a rank killed in between would leave
 * them "pending" in its ring. wrap/ (tr_core.h's folders); records nothing of
 * its own and never activates the shim. */
#include <cuda_runtime_api.h>

#include "tr_record.h"
#include "tr_core.h"

#define SYNC_WRAPPER(name, params, args, whole_device, stream)                   \
    TR_API cudaError_t name params                                               \
    {                                                                            \
        typedef cudaError_t(*fn_t) params;                                       \
        TR_REAL(real, fn_t, #name, TR_LIB_CUDART);                               \
        if (!real) {                                                             \
            tr_warn("no real " #name " found");                                  \
            return cudaErrorInitializationError;                                 \
        }                                                                        \
        uint64_t mark = tr_complete_mark();                                      \
        cudaError_t r = real args;                                               \
        if (r == cudaSuccess && mark) tr_complete_synced(whole_device, stream, mark); \
        return r;                                                                \
    }

SYNC_WRAPPER(cudaStreamSynchronize, (cudaStream_t s), (s), 0, s)
SYNC_WRAPPER(cudaStreamSynchronize_ptsz, (cudaStream_t s), (s), 0, s)
SYNC_WRAPPER(cudaDeviceSynchronize, (void), (), 1, NULL)
