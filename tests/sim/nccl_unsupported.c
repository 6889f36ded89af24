/* The NCCL 2.32 host functions the simulator does not implement: the
 * set-up of the device-initiated API (device communicators, device
 * pointers into windows, GIN, LSA barriers, LL all-to-all, CFT teams),
 * which only device kernels could use, and no kernel runs on a simulated
 * GPU. Each fails loudly: one line "trsim: <name> is not supported by the
 * simulator" the first time, ncclInvalidUsage (and ncclGetLastError's
 * text) every time. The stubs take no parameters: the caller's arguments
 * are ignored, as the C calling convention allows (rt_unsupported.c does
 * the same for the runtime). */
#include <stdatomic.h>

#include "sim_internal.h"

void trsim_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define TRSIM_NCCL_INVALID_USAGE 5   /* ncclInvalidUsage */

/* X(name): functions returning ncclResult_t */
#define TRSIM_NCCL_UNSUPPORTED(X)                                                                    \
    X(ncclDevCommCreate) X(ncclDevCommDestroy)                                                       \
    X(ncclGetLsaDevicePointer) X(ncclGetLsaMultimemDevicePointer) X(ncclGetMultimemDevicePointer)    \
    X(ncclGetPeerDevicePointer) X(ncclGetCftDeviceLeInfo) X(ncclGetMultimemDeviceLeInfo)             \
    X(ncclGetPeerDeviceLeInfo) X(ncclGinBarrierCreateRequirement) X(ncclGinInboxA2ACreateRequirement) \
    X(ncclGinOutboxCreateRequirement) X(ncclLLA2ACreateRequirement) X(ncclLsaBarrierCreateRequirement)

static void say(atomic_int *said, const char *name)
{
    if (!atomic_exchange(said, 1)) trsim_warn("%s is not supported by the simulator", name);
    trsim_set_last_error("%s is not supported by the simulator", name);
}

#define STUB(name)                                                                                   \
    TRSIM_API int name(void);                                                                        \
    TRSIM_API int name(void)                                                                         \
    {                                                                                                \
        static atomic_int said;                                                                      \
        say(&said, #name);                                                                           \
        return TRSIM_NCCL_INVALID_USAGE;                                                             \
    }
TRSIM_NCCL_UNSUPPORTED(STUB)

/* The ones that return something else: a team of no rank, -1 slots. */
typedef struct { int nRanks, rank, stride; } team_t;   /* ncclTeam_t */

TRSIM_API team_t ncclTeamCft(void);
TRSIM_API team_t ncclTeamCft(void)
{
    static atomic_int said;
    say(&said, "ncclTeamCft");
    return (team_t){0, 0, 0};
}

TRSIM_API team_t ncclTeamCftMultimem(void);
TRSIM_API team_t ncclTeamCftMultimem(void)
{
    static atomic_int said;
    say(&said, "ncclTeamCftMultimem");
    return (team_t){0, 0, 0};
}

TRSIM_API int ncclLLA2ACalcSlots(void);
TRSIM_API int ncclLLA2ACalcSlots(void)
{
    static atomic_int said;
    say(&said, "ncclLLA2ACalcSlots");
    return -1;
}
