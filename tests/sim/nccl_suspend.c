/* Simulated NCCL 2.29+ suspend and resume (ncclCommSuspend,
 * ncclCommResume) and the memory statistics that show them
 * (ncclCommMemStats). */
#include "nccl_internal.h"

/* Like NCCL: only NCCL_SUSPEND_MEM does something (the device's work is
 * waited for, then all ranks meet); a suspended communicator refuses
 * operations with ncclInvalidUsage until ncclCommResume, collective too. */
TRSIM_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    ncclResult_t r = trsim_comm_ready(comm);
    if (r != ncclSuccess) return r;
    if (!(flags & NCCL_SUSPEND_MEM)) return ncclSuccess;
    if (atomic_load(&comm->suspended)) {
        trsim_set_last_error("ncclCommSuspend: the communicator is suspended already");
        return ncclInvalidUsage;
    }
    trsim_device_wait_idle(comm->device);
    if ((r = trsim_comm_barrier(comm)) != ncclSuccess) return r;
    atomic_store(&comm->suspended, 1);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommResume(ncclComm_t comm)
{
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    ncclResult_t r = trsim_comm_ready(comm);
    if (r != ncclSuccess) return r;
    if (!atomic_load(&comm->suspended)) {
        trsim_set_last_error("ncclCommResume: the communicator is not suspended");
        return ncclInvalidUsage;
    }
    if ((r = trsim_comm_barrier(comm)) != ncclSuccess) return r;
    atomic_store(&comm->suspended, 0);
    return ncclSuccess;
}

/* The communicator's "GPU memory" is its segment: the part before the data
 * slots stays (persistent), the slots are what a suspend could release. */
TRSIM_API ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value)
{
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    ncclResult_t r = trsim_comm_ready(comm);
    if (r != ncclSuccess) return r;
    if (!value) return ncclInvalidArgument;
    uint64_t persist = trsim_shm_fixed_bytes(&comm->shm);
    uint64_t scratch = (uint64_t)comm->shm.size - persist;
    switch (stat) {
    case ncclStatGpuMemSuspend: *value = scratch; return ncclSuccess;
    case ncclStatGpuMemSuspended: *value = atomic_load(&comm->suspended) ? 1 : 0; return ncclSuccess;
    case ncclStatGpuMemPersist: *value = persist; return ncclSuccess;
    case ncclStatGpuMemTotal: *value = persist + scratch; return ncclSuccess;
    default:
        trsim_set_last_error("ncclCommMemStats: unknown statistic %d", (int)stat);
        return ncclInvalidArgument;
    }
}
