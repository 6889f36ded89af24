/* The wrappers of the communicators' lifecycle: init (InitRank,
 * InitRankConfig, InitRankScalable, InitAll), Split, Shrink, Grow, Suspend,
 * Resume and the teardown calls (Finalize, Destroy, Abort, Revoke). Each
 * derives the new communicator's id, identical on every member rank, from
 * what the call was given (the ncclUniqueId's hash, the parent's id and its
 * split count, the color, the excluded ranks) and enters it in the table of
 * communicators (tr_comm.c) before the real call, its handle and result
 * after. wrap/ (tr_core.h's folders). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tr_record.h"
#include "tr_core.h"
#include "tr_init.h"
#include "tr_nancheck.h"
#include "tr_stacks.h"

static atomic_uint g_initall_no;        /* InitAll calls of this process */

/* blocking from a config, else from the parent (splits) or the default */
static int config_blocking(const ncclConfig_t *config, int inherited)
{
    if (config && config->magic == 0xcafebeef &&
        config->size >= offsetof(ncclConfig_t, blocking) + sizeof config->blocking &&
        config->blocking != NCCL_CONFIG_UNDEF_INT)
        return config->blocking != 0;
    if (inherited >= 0) return inherited;
    const char *e = getenv("NCCL_COMM_BLOCKING");
    return !(e && !strcmp(e, "0"));
}

/* ---- lifecycle wrappers ------------------------------------------------------- */

static int32_t add_uid_comm(int kind, uint64_t id, int nranks, int rank, int blocking, uint64_t enter,
                            int32_t stack)
{
    tr_comm_init in = {.kind = kind, .id = id, .parent = -1, .size = nranks, .rank = rank,
                       .device = tr_cuda_device(), .blocking = blocking, .enter = enter, .stack = stack,
                       .from_uid = 1};
    return tr_comm_add(&in);
}

TR_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t *, int, ncclUniqueId, int);
    TR_REAL(real, fn_t, "ncclCommInitRank", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommInitRank");
    int rec = tr_enter();
    int32_t ci = -1;
    if (rec) {
        uint64_t t = tr_now_ns();
        int32_t st = tr_stack_capture();
        ci = add_uid_comm(TR_KIND_INITRANK, tr_hash_bytes(1, &commId, sizeof commId), nranks, rank,
                          config_blocking(NULL, -1), t, st);
    }
    ncclResult_t r = real(comm, nranks, commId, rank);
    if (rec) tr_comm_init_done(ci, r, comm);
    tr_leave();
    return r;
}

TR_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                           ncclConfig_t *config)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    TR_REAL(real, fn_t, "ncclCommInitRankConfig", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommInitRankConfig");
    int rec = tr_enter();
    int32_t ci = -1;
    if (rec) {
        uint64_t t = tr_now_ns();
        int32_t st = tr_stack_capture();
        ci = add_uid_comm(TR_KIND_INITRANKCONFIG, tr_hash_bytes(1, &commId, sizeof commId), nranks, rank,
                          config_blocking(config, -1), t, st);
    }
    ncclResult_t r = real(comm, nranks, commId, rank, config);
    if (rec) tr_comm_init_done(ci, r, comm);
    tr_leave();
    return r;
}

TR_API ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                             ncclUniqueId *commIds, ncclConfig_t *config)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t *, int, int, int, ncclUniqueId *, ncclConfig_t *);
    TR_REAL(real, fn_t, "ncclCommInitRankScalable", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommInitRankScalable");
    int rec = tr_enter();
    int32_t ci = -1;
    if (rec) {
        uint64_t t = tr_now_ns();
        int32_t st = tr_stack_capture();
        uint64_t id = 3;
        if (commIds && nId > 0)
            for (int i = 0; i < nId; i++) id = tr_hash_bytes(id, &commIds[i], sizeof commIds[i]);
        ci = add_uid_comm(TR_KIND_INITRANKSCALABLE, id, nranks, myrank, config_blocking(config, -1), t, st);
    }
    ncclResult_t r = real(newcomm, nranks, myrank, nId, commIds, config);
    if (rec) tr_comm_init_done(ci, r, newcomm);
    tr_leave();
    return r;
}

TR_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t *, int, const int *);
    TR_REAL(real, fn_t, "ncclCommInitAll", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommInitAll");
    int rec = tr_enter();
    int32_t *idx = NULL;
    int n = 0;
    if (rec && ndev > 0 && ndev <= 4096 && (idx = malloc((size_t)ndev * sizeof *idx))) {
        uint64_t t = tr_now_ns();
        int32_t st = tr_stack_capture();
        char host[256];
        tr_host_name(host, sizeof host);
        uint64_t id = tr_hash_bytes(4, host, strlen(host));
        id = tr_mix64(tr_mix64(id, (uint64_t)getpid()), atomic_fetch_add(&g_initall_no, 1) + 1);
        for (n = 0; n < ndev; n++) {
            tr_comm_init in = {.kind = TR_KIND_INITALL, .id = id, .parent = -1, .size = ndev, .rank = n,
                               .device = devlist ? devlist[n] : n, .blocking = 1, .enter = t, .stack = st};
            idx[n] = tr_comm_add(&in);
        }
    }
    ncclResult_t r = real(comms, ndev, devlist);
    for (int i = 0; i < n; i++) tr_comm_init_done(idx[i], r, comms ? &comms[i] : NULL);
    free(idx);
    tr_leave();
    return r;
}

/* A communicator made from parent handle comm (split, shrink, grow): in
 * gets the parent, the base of its id (salt, the parent's id and the
 * parent's count of children: every member counts the same children, so
 * all agree), the device (the parent's, else the current one), blocking
 * (the config's, else inherited), the entry time and stack. Returns the
 * parent's record, NULL when the handle is not known. */
static tr_comm *child_of(ncclComm_t comm, uint64_t salt, ncclConfig_t *config, tr_comm_init *in)
{
    int32_t pi = tr_comm_lookup(comm);
    tr_comm *p = tr_comm_at(pi);
    uint64_t child_no = p ? atomic_fetch_add(&p->splits, 1) + 1 : 0;
    int dev = p ? atomic_load(&p->device) : -1;
    in->parent = pi;
    in->id = tr_mix64(tr_mix64(salt, p ? p->id : 0), child_no);
    in->device = dev >= 0 ? dev : tr_cuda_device();
    in->blocking = config_blocking(config, p ? p->blocking : -1);
    return p;
}

TR_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                  ncclConfig_t *config)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
    TR_REAL(real, fn_t, "ncclCommSplit", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommSplit");
    int rec = tr_enter();
    int32_t ci = -1;
    if (rec) {
        tr_comm_init in = {.kind = TR_KIND_SPLIT, .size = -1, .rank = -1, .has_color = 1, .color = color,
                           .key = key, .enter = tr_now_ns(), .stack = tr_stack_capture()};
        /* NOCOLOR members count the split too (child_of), but make nothing */
        child_of(comm, 5, config, &in);
        if (color != NCCL_SPLIT_NOCOLOR) {
            in.id = tr_mix64(in.id, (uint64_t)(uint32_t)color);
            ci = tr_comm_add(&in);
        }
    }
    ncclResult_t r = real(comm, color, key, newcomm, config);
    if (rec) tr_comm_init_done(ci, r, newcomm);
    tr_leave();
    return r;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

TR_API ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                   ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int);
    TR_REAL(real, fn_t, "ncclCommShrink", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommShrink");
    int rec = tr_enter();
    int32_t ci = -1;
    if (rec) {
        tr_comm_init in = {.kind = TR_KIND_SHRINK, .size = -1, .rank = -1, .enter = tr_now_ns(),
                           .stack = tr_stack_capture()};
        tr_comm *p = child_of(comm, 6, config, &in);
        int n = excludeRanksList && excludeRanksCount > 0 ? excludeRanksCount : 0;
        int *sorted = n ? malloc((size_t)n * sizeof *sorted) : NULL;
        int distinct = 0, below = 0, excluded = 0, listed = !n || sorted;
        if (sorted) {
            memcpy(sorted, excludeRanksList, (size_t)n * sizeof *sorted);
            qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
        }
        int prank = p ? atomic_load(&p->rank) : -1, psize = p ? atomic_load(&p->size) : -1;
        for (int i = 0; i < n && sorted; i++) {
            if (i > 0 && sorted[i] == sorted[i - 1]) continue;
            in.id = tr_mix64(in.id, (uint64_t)(uint32_t)sorted[i]);
            distinct++;
            if (sorted[i] < prank) below++;
            if (sorted[i] == prank) excluded = 1;
        }
        in.id = tr_mix64(in.id, (uint64_t)distinct);
        free(sorted);
        if (psize > 0 && prank >= 0 && !excluded && listed) {
            in.size = psize - distinct;
            in.rank = prank - below;
        }
        ci = tr_comm_add(&in);
    }
    ncclResult_t r = real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    if (rec) tr_comm_init_done(ci, r, newcomm);
    tr_leave();
    return r;
}

/* Grow (NCCL 2.29): existing members pass the communicator (the root also
 * the ncclUniqueId from ncclCommGetUniqueId), new members only the
 * ncclUniqueId and their rank. Existing members derive the new id from the
 * parent, as splits do; new members know only the ncclUniqueId, so their id
 * is its hash, which the root records too (grow_uid): tranalyze joins them. */
TR_API ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                                 ncclComm_t *newcomm, ncclConfig_t *config)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t, int, const ncclUniqueId *, int, ncclComm_t *, ncclConfig_t *);
    TR_REAL(real, fn_t, "ncclCommGrow", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommGrow");
    int rec = tr_enter();
    int32_t ci = -1;
    if (rec) {
        uint64_t t = tr_now_ns();
        int32_t st = tr_stack_capture();
        uint64_t uid = uniqueId ? tr_hash_bytes(1, uniqueId, sizeof *uniqueId) : 0;
        tr_comm_init in = {.kind = TR_KIND_GROW, .parent = -1, .size = nRanks, .rank = rank, .enter = t,
                           .stack = st, .grow_uid = uid, .grow_ranks = nRanks};
        if (comm) {
            tr_comm *p = child_of(comm, 7, config, &in);
            in.rank = p ? atomic_load(&p->rank) : -1;   /* existing members keep their rank */
        } else {
            in.id = uid;
            in.device = tr_cuda_device();
            in.blocking = config_blocking(config, -1);
        }
        ci = tr_comm_add(&in);
    }
    ncclResult_t r = real(comm, nRanks, uniqueId, rank, newcomm, config);
    if (rec) tr_comm_init_done(ci, r, newcomm);
    tr_leave();
    return r;
}

/* Suspend / resume (NCCL 2.29): a suspended communicator cannot be used,
 * so its members waiting on nothing there is no hang. */
TR_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t, int);
    TR_REAL(real, fn_t, "ncclCommSuspend", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommSuspend");
    int rec = tr_enter();
    ncclResult_t r = real(comm, flags);
    if (rec) tr_comm_suspended(comm, 1, r);
    tr_leave();
    return r;
}

TR_API ncclResult_t ncclCommResume(ncclComm_t comm)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t);
    TR_REAL(real, fn_t, "ncclCommResume", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommResume");
    int rec = tr_enter();
    ncclResult_t r = real(comm);
    if (rec) tr_comm_suspended(comm, 0, r);
    tr_leave();
    return r;
}

/* Teardown: the communicator's "end" holds the last lifecycle call; the
 * NaN thread is waited for while it asks NCCL about the communicator (its
 * handle may be freed by the real call). */
static tr_comm *end_begin(ncclComm_t comm, int kind)
{
    /* an abort releases the hung operations: they are told from completed
     * ones before the end's enter time is stored (tr_complete.c) */
    if (kind == TR_END_ABORT || kind == TR_END_REVOKE) tr_complete_aborting(tr_comm_lookup(comm));
    tr_comm *c = tr_comm_end_begin(comm, kind);
    if (c) tr_nan_comm_ending(comm);
    return c;
}

#define END_WRAPPER(name, kind)                                                      \
    TR_API ncclResult_t name(ncclComm_t comm)                                        \
    {                                                                                \
        typedef ncclResult_t (*fn_t)(ncclComm_t);                                    \
        TR_REAL(real, fn_t, #name, TR_LIB_NCCL);                                     \
        if (!real) NO_REAL(#name);                                                   \
        tr_comm *c = tr_enter() ? end_begin(comm, kind) : NULL;                      \
        ncclResult_t r = real(comm);                                                 \
        tr_comm_end_finish(c, kind, r);                                              \
        tr_leave();                                                                  \
        return r;                                                                    \
    }

END_WRAPPER(ncclCommFinalize, TR_END_FINALIZE)
END_WRAPPER(ncclCommDestroy, TR_END_DESTROY)
END_WRAPPER(ncclCommAbort, TR_END_ABORT)

TR_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t, int);
    TR_REAL(real, fn_t, "ncclCommRevoke", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommRevoke");
    tr_comm *c = tr_enter() ? end_begin(comm, TR_END_REVOKE) : NULL;
    ncclResult_t r = real(comm, revokeFlags);
    tr_comm_end_finish(c, TR_END_REVOKE, r);
    tr_leave();
    return r;
}
