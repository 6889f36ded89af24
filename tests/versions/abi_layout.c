/* Prints the NCCL ABI as a header declares it, as JSON: sizes and field
 * offsets of the structs trshim reads, enum values and constants. Built
 * against trshim/nccl_abi.h (TRSHIM_ABI) by meson, and against the real
 * nccl.h of NCCL 2.28 (the toolkit's) and 2.32 (PyPI's) by
 * check_versions.py, which compares them: the project's own declarations
 * must be the real ABI. What a header predates is left out. */
#include <stddef.h>
#include <stdio.h>
#ifdef TRSHIM_ABI
#include "trshim/nccl_abi.h"
#define HAS_2_29 1
#define HAS_2_31 1
#define HAS_2_32 1
#else
#include <nccl.h>
#define HAS_2_29 (NCCL_VERSION_CODE >= 22900)
#define HAS_2_31 (NCCL_VERSION_CODE >= 23100)
#define HAS_2_32 (NCCL_VERSION_CODE >= 23200)
#endif

static int n;
#define V(name, value) printf("%s\"%s\": %lld", n++ ? ", " : "", name, (long long)(value))
#define OFF(type, field) V(#type "." #field, offsetof(type, field))
#define SIZE(type) V("sizeof " #type, sizeof(type))

int main(void)
{
    printf("{");
    SIZE(ncclUniqueId);
    SIZE(ncclComm_t);
#ifdef NCCL_API_MAGIC
    V("NCCL_API_MAGIC", NCCL_API_MAGIC);
#endif
    V("NCCL_CONFIG_UNDEF_INT", NCCL_CONFIG_UNDEF_INT);
    V("NCCL_SPLIT_NOCOLOR", NCCL_SPLIT_NOCOLOR);
    V("ncclSuccess", ncclSuccess); V("ncclSystemError", ncclSystemError);
    V("ncclInvalidArgument", ncclInvalidArgument); V("ncclInvalidUsage", ncclInvalidUsage);
    V("ncclRemoteError", ncclRemoteError); V("ncclInProgress", ncclInProgress);
    V("ncclSum", ncclSum); V("ncclProd", ncclProd); V("ncclMax", ncclMax); V("ncclMin", ncclMin);
    V("ncclAvg", ncclAvg); V("ncclNumOps", ncclNumOps); V("ncclMaxRedOp", ncclMaxRedOp);
    V("ncclInt8", ncclInt8); V("ncclUint8", ncclUint8); V("ncclInt32", ncclInt32); V("ncclUint32", ncclUint32);
    V("ncclInt64", ncclInt64); V("ncclUint64", ncclUint64); V("ncclFloat16", ncclFloat16);
    V("ncclFloat32", ncclFloat32); V("ncclFloat64", ncclFloat64); V("ncclBfloat16", ncclBfloat16);
    V("ncclFloat8e4m3", ncclFloat8e4m3); V("ncclFloat8e5m2", ncclFloat8e5m2); V("ncclNumTypes", ncclNumTypes);
    OFF(ncclConfig_t, size); OFF(ncclConfig_t, magic); OFF(ncclConfig_t, version); OFF(ncclConfig_t, blocking);
    OFF(ncclSimInfo_t, size); OFF(ncclSimInfo_t, magic); OFF(ncclSimInfo_t, version);
    OFF(ncclSimInfo_t, estimatedTime); SIZE(ncclSimInfo_t);
#if HAS_2_29
    V("ncclTimeout", ncclTimeout); V("ncclNumResults", ncclNumResults);   /* 2.28: no timeout, 8 results */
    SIZE(ncclWindow_t);
    OFF(ncclWaitSignalDesc_t, opCnt); OFF(ncclWaitSignalDesc_t, peer); OFF(ncclWaitSignalDesc_t, sigIdx);
    OFF(ncclWaitSignalDesc_t, ctx); SIZE(ncclWaitSignalDesc_t);
    V("NCCL_SUSPEND_MEM", NCCL_SUSPEND_MEM);
    V("ncclStatGpuMemSuspend", ncclStatGpuMemSuspend); V("ncclStatGpuMemSuspended", ncclStatGpuMemSuspended);
    V("ncclStatGpuMemPersist", ncclStatGpuMemPersist); V("ncclStatGpuMemTotal", ncclStatGpuMemTotal);
#endif
#if HAS_2_31
    OFF(ncclCollConfig_t, size); OFF(ncclCollConfig_t, magic); OFF(ncclCollConfig_t, version);
    OFF(ncclCollConfig_t, ext); OFF(ncclCollConfig_t, minCTAs); OFF(ncclCollConfig_t, maxCTAs);
    OFF(ncclCollConfig_t, nvlsCTAs); OFF(ncclCollConfig_t, cgaClusterSize); OFF(ncclCollConfig_t, algSelection);
    OFF(ncclCollConfig_t, forceAlgSelection); OFF(ncclCollConfig_t, CTAPolicy);
    OFF(ncclCollConfig_t, userProfilerTag);
#endif
#if HAS_2_32
    OFF(ncclCollConfig_t, launchCompletionEvent); SIZE(ncclCollConfig_t);
#endif
    printf("}\n");
    return 0;
}
