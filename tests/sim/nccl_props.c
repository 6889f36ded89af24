/* What a simulated communicator tells of itself in NCCL 2.29+:
 * ncclCommQueryProperties and the teams of the device API's host side. */
#include <string.h>

#include "nccl_internal.h"

/* Write one field of a versioned struct only when its size covers it. */
#define SET_IF_COVERED(p, field, value)                                                   \
    do {                                                                                  \
        if ((p)->size >= offsetof(__typeof__(*(p)), field) + sizeof (p)->field) (p)->field = (value); \
    } while (0)

/* What a simulated communicator offers: host-initiated one-sided operations
 * (ncclPutSignal & co), no device API (no kernels run), no multimem, no
 * GIN, no CFT; every rank is a load/store team of its own (its memory is
 * not the peers'), so there are as many LSA teams as ranks. */
TRSIM_API ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t *props)
{
    if (!trsim_comm_valid(comm) || !props) return ncclInvalidArgument;
    if (props->magic != NCCL_API_MAGIC || props->size < offsetof(ncclCommProperties_t, rank)) {
        trsim_set_last_error("ncclCommProperties_t not initialised with NCCL_COMM_PROPERTIES_INITIALIZER");
        return ncclInvalidArgument;
    }
    ncclResult_t r = trsim_comm_ready(comm);
    if (r != ncclSuccess) return r;
    SET_IF_COVERED(props, rank, comm->rank);
    SET_IF_COVERED(props, nRanks, comm->nranks);
    SET_IF_COVERED(props, cudaDev, comm->device);
    SET_IF_COVERED(props, nvmlDev, comm->device);
    SET_IF_COVERED(props, deviceApiSupport, false);
    SET_IF_COVERED(props, multimemSupport, false);
    SET_IF_COVERED(props, ginType, NCCL_GIN_TYPE_NONE);
    SET_IF_COVERED(props, nLsaTeams, comm->nranks);
    SET_IF_COVERED(props, hostRmaSupport, true);
    SET_IF_COVERED(props, railedGinType, NCCL_GIN_TYPE_NONE);
    SET_IF_COVERED(props, commHash, comm->id.key);
    SET_IF_COVERED(props, ginMinStride, 0);
    SET_IF_COVERED(props, ginConnectionType, NCCL_GIN_CONNECTION_NONE);
    if (props->size >= offsetof(ncclCommProperties_t, ginSupport) + sizeof props->ginSupport)
        memset(props->ginSupport, 0, sizeof props->ginSupport);
    SET_IF_COVERED(props, devCommRuntimeVersionSize, 0);
    SET_IF_COVERED(props, cftSupport, false);
    SET_IF_COVERED(props, cftMulticastSupport, false);
    SET_IF_COVERED(props, cftCountedSupport, false);
    return ncclSuccess;
}

/* Teams (host side of the device API): the world; this rank alone as its
 * load/store team; the rail (same LSA index everywhere): the world again. */
TRSIM_API ncclTeam_t ncclTeamWorld(ncclComm_t comm)
{
    ncclTeam_t t = {0, 0, 0};
    if (trsim_comm_valid(comm)) t = (ncclTeam_t){comm->nranks, comm->rank, 1};
    return t;
}

TRSIM_API ncclTeam_t ncclTeamLsa(ncclComm_t comm)
{
    ncclTeam_t t = {0, 0, 0};
    if (trsim_comm_valid(comm)) t = (ncclTeam_t){1, 0, 1};
    return t;
}

TRSIM_API ncclTeam_t ncclTeamRail(ncclComm_t comm)
{
    return ncclTeamWorld(comm);
}

TRSIM_API int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank)
{
    if (!trsim_comm_valid(comm)) return -1;
    return comm->rank + (rank - team.rank) * team.stride;
}

TRSIM_API int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank)
{
    if (!trsim_comm_valid(comm)) return -1;
    return 0 + (rank - team.rank) * team.stride;   /* this rank is LSA rank 0 of its team */
}
