/* Simulated NCCL communicators made from communicators: ncclCommSplit,
 * ncclCommShrink and ncclCommGrow (with ncclCommGetUniqueId), and the jobs
 * that run such collective host-side work (window registrations too,
 * nccl_win.c): at once, at the outermost ncclGroupEnd, or on a thread of
 * their own. */
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"

/* ---- making jobs -------------------------------------------------------------------- */

struct trsim_job *trsim_job_new(enum trsim_job_kind kind, struct ncclComm *parent, int blocking)
{
    struct trsim_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    job->kind = kind;
    job->parent = parent;
    job->blocking = blocking;
    return job;
}

/* A split or grow of parent: blocking as its config says, else as the
 * parent is. The child's handle (with_child) is made now, so that it can be
 * handed out before the exchange. */
static struct trsim_job *comm_job_new(enum trsim_job_kind kind, struct ncclComm *parent,
                                      const ncclConfig_t *config, int with_child)
{
    int blocking = config && config->blocking != NCCL_CONFIG_UNDEF_INT ? trsim_config_blocking(config)
                                                                        : parent->blocking;
    struct trsim_job *job = trsim_job_new(kind, parent, blocking);
    if (job && with_child && !(job->child = trsim_comm_new(blocking))) {
        free(job);
        return NULL;
    }
    return job;
}

/* The end of a split's or grow's exchange: its child attaches as rank of
 * nranks to the segment of key; a failure becomes the child's init state.
 * Waits for the child's peers when the job is blocking. */
static ncclResult_t attach_child(struct trsim_job *job, int nranks, uint64_t key, int rank)
{
    struct ncclComm *parent = job->parent, *c = job->child;
    ncclResult_t r = trsim_comm_setup(c, nranks, &parent->id, key, rank, parent->device);
    if (r != ncclSuccess) {
        atomic_store(&c->init_state, r);
        return r;
    }
    return job->blocking ? trsim_comm_wait_init(c) : ncclSuccess;
}

/* ---- split ----------------------------------------------------------------------------- */

struct split_entry { int32_t color, key, rank; };

static int split_order(const void *a, const void *b)
{
    const struct split_entry *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The collective part of a split: every member of the parent (NOCOLOR
 * included) publishes its color and key; each computes the same grouping and
 * attaches to its group's segment. Waits for the peers when blocking. */
static ncclResult_t split_run(struct trsim_job *job)
{
    struct ncclComm *comm = job->parent;
    ncclResult_t r = trsim_comm_wait_init(comm);
    if (r != ncclSuccess) return r;
    struct split_entry me = {job->color, job->key, comm->rank};
    struct split_entry *members = malloc((size_t)comm->nranks * sizeof *members);
    if (!members) return ncclSystemError;
    unsigned char *all;
    if ((r = trsim_comm_exchange(comm, &me, sizeof me, &all)) != ncclSuccess) goto out;
    uint64_t split_no = comm->splits++;
    if (job->color == NCCL_SPLIT_NOCOLOR) goto out;
    int n = 0;
    for (int q = 0; q < comm->nranks; q++) {
        struct split_entry e;
        memcpy(&e, all + (size_t)q * TRSIM_BOOT_BYTES, sizeof e);
        if (e.color == job->color) members[n++] = e;
    }
    qsort(members, (size_t)n, sizeof *members, split_order);
    int newrank = 0;
    while (members[newrank].rank != comm->rank) newrank++;
    uint64_t child = trsim_hash64(trsim_hash64(comm->id.key, split_no), (uint64_t)(uint32_t)job->color);
    r = attach_child(job, n, child, newrank);
out:
    free(all);
    free(members);
    return r;
}

/* ---- grow ------------------------------------------------------------------------------ */

/* What each existing rank publishes in a grow. */
struct grow_entry { int32_t root, status, nranks, pad; uint64_t key; };

/* The collective part of a grow on the existing ranks: the root (the rank
 * that passed the unique id) publishes the id's key; all attach to the new,
 * larger segment with their ranks unchanged, the new ranks join it through
 * the id (ncclCommGrow with comm NULL). */
static ncclResult_t grow_run(struct trsim_job *job)
{
    struct ncclComm *comm = job->parent;
    ncclResult_t r = trsim_comm_wait_init(comm);
    if (r != ncclSuccess) return r;
    struct grow_entry me = {job->grow_root, ncclSuccess, job->grow_nranks, 0, job->grow_key};
    if (job->grow_root && (!comm->grow_id_pending || comm->grow_key != job->grow_key)) {
        trsim_set_last_error("ncclCommGrow: the unique id was not made by ncclCommGetUniqueId on this "
                             "communicator, or was used already");
        me.status = ncclInvalidArgument;
    }
    if (job->grow_nranks <= comm->nranks || job->grow_nranks > TRSIM_MAX_RANKS) {
        trsim_set_last_error("ncclCommGrow: %d ranks do not grow a communicator of %d", job->grow_nranks,
                             comm->nranks);
        me.status = ncclInvalidArgument;
    }
    unsigned char *all;
    if ((r = trsim_comm_exchange(comm, &me, sizeof me, &all)) != ncclSuccess) goto out;
    int roots = 0;
    uint64_t key = 0;
    for (int q = 0; q < comm->nranks; q++) {
        struct grow_entry e;
        memcpy(&e, all + (size_t)q * TRSIM_BOOT_BYTES, sizeof e);
        if (e.status != ncclSuccess && r == ncclSuccess) r = (ncclResult_t)e.status;
        if (e.nranks != job->grow_nranks && r == ncclSuccess) {
            trsim_set_last_error("ncclCommGrow: rank %d asked for %d ranks, rank %d for %d", q, e.nranks,
                                 comm->rank, job->grow_nranks);
            r = ncclInvalidArgument;
        }
        if (e.root) { roots++; key = e.key; }
    }
    if (r == ncclSuccess && roots != 1) {
        trsim_set_last_error("ncclCommGrow: %d existing ranks passed a unique id; exactly one (the root) must",
                             roots);
        r = ncclInvalidUsage;
    }
    if (r != ncclSuccess) goto out;
    if (job->grow_root) comm->grow_id_pending = 0;   /* the id is consumed */
    r = attach_child(job, job->grow_nranks, key, comm->rank);
out:
    free(all);
    return r;
}

/* ---- running jobs ---------------------------------------------------------------------- */

ncclResult_t trsim_job_run(struct trsim_job *job)
{
    ncclResult_t r;
    switch (job->kind) {
    case TRSIM_JOB_SPLIT: r = split_run(job); break;
    case TRSIM_JOB_GROW: r = grow_run(job); break;
    case TRSIM_JOB_WINREG: r = trsim_window_register_run(job); break;
    case TRSIM_JOB_WINDEREG: r = trsim_window_deregister_run(job); break;
    default: r = ncclInternalError; break;
    }
    job->result = r;
    return r;
}

ncclResult_t trsim_job_free(struct trsim_job *job)
{
    ncclResult_t r = job->result;
    if (r != ncclSuccess && job->child) atomic_store(&job->child->init_state, r);
    free(job);
    return r;
}

static void *job_thread(void *arg)
{
    struct trsim_job *job = arg;
    struct ncclComm *parent = job->parent;
    trsim_job_run(job);
    trsim_job_free(job);
    atomic_fetch_sub(&parent->pending_jobs, 1);
    return NULL;
}

ncclResult_t trsim_job_launch(struct trsim_job *job, ncclComm_t *newcomm)
{
    struct ncclComm *comm = job->parent;
    if (trsim_group_depth() > 0) {
        if (newcomm) *newcomm = job->child;
        /* One thread may split several communicators inside a group: the
         * exchanges then run side by side at the outermost ncclGroupEnd. */
        trsim_group_defer_job(job);
        return ncclSuccess;
    }
    if (!job->blocking) {
        /* The handle is valid at once; it reports ncclInProgress until the
         * exchange and the peers' attach are done. */
        if (newcomm) *newcomm = job->child;
        pthread_t t;
        atomic_fetch_add(&comm->pending_jobs, 1);
        if (pthread_create(&t, NULL, job_thread, job) != 0) {
            atomic_fetch_sub(&comm->pending_jobs, 1);
            if (newcomm) *newcomm = NULL;
            if (job->child) trsim_comm_free(job->child);
            free(job);
            return ncclSystemError;
        }
        pthread_detach(t);
        return ncclInProgress;
    }
    ncclResult_t r = trsim_job_run(job);
    if (r == ncclSuccess) {
        if (newcomm) *newcomm = job->child;
    } else if (job->child) {
        trsim_comm_free(job->child);
    }
    free(job);
    return r;
}

TRSIM_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                     ncclConfig_t *config)
{
    if (!trsim_comm_valid(comm) || !newcomm) return ncclInvalidArgument;
    *newcomm = NULL;
    ncclResult_t r = trsim_check_config(config);
    if (r != ncclSuccess) return r;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        trsim_set_last_error("ncclCommSplit: color %d is negative", color);
        return ncclInvalidArgument;
    }
    struct trsim_job *job = comm_job_new(TRSIM_JOB_SPLIT, comm, config, color != NCCL_SPLIT_NOCOLOR);
    if (!job) return ncclSystemError;
    job->color = color;
    job->key = key;
    return trsim_job_launch(job, newcomm);
}

TRSIM_API ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId)
{
    if (!trsim_comm_valid(comm) || !uniqueId) return ncclInvalidArgument;
    if (comm->grow_id_pending) {
        trsim_set_last_error("ncclCommGetUniqueId: the previous id of this communicator was not consumed "
                             "by ncclCommGrow yet");
        return ncclInvalidUsage;
    }
    ncclResult_t r = trsim_make_unique_id(uniqueId);
    if (r != ncclSuccess) return r;
    trsim_id id;
    memcpy(&id, uniqueId, sizeof id);
    memcpy(id.tag, comm->id.tag, sizeof id.tag);   /* the communicator's job */
    memcpy(uniqueId, &id, sizeof id);
    comm->grow_key = id.key;
    comm->grow_id_pending = 1;
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                                    ncclComm_t *newcomm, ncclConfig_t *config)
{
    if (!newcomm) return ncclInvalidArgument;
    *newcomm = NULL;
    ncclResult_t r = trsim_check_config(config);
    if (r != ncclSuccess) return r;
    if (!comm) {
        /* a new rank: joins the grown communicator through the id */
        if (!uniqueId || rank < 0) {
            trsim_set_last_error("ncclCommGrow: a new rank needs the unique id and its rank");
            return ncclInvalidArgument;
        }
        return trsim_comm_init_rank(newcomm, nRanks, uniqueId, rank, config);
    }
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    if (rank != -1) {
        trsim_set_last_error("ncclCommGrow: an existing rank passes rank -1 (it keeps rank %d)", comm->rank);
        return ncclInvalidArgument;
    }
    struct trsim_job *job = comm_job_new(TRSIM_JOB_GROW, comm, config, 1);
    if (!job) return ncclSystemError;
    job->grow_nranks = nRanks;
    if (uniqueId) {
        trsim_id id;
        memcpy(&id, uniqueId, sizeof id);
        job->grow_root = 1;
        job->grow_key = id.magic == TRSIM_ID_MAGIC ? id.key : 0;
    }
    return trsim_job_launch(job, newcomm);
}

/* ---- shrink ---------------------------------------------------------------------------- */

TRSIM_API ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                      ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    if (!trsim_comm_valid(comm) || !newcomm || excludeRanksCount < 0 ||
        (excludeRanksCount > 0 && !excludeRanksList))
        return ncclInvalidArgument;
    *newcomm = NULL;
    ncclResult_t r = trsim_check_config(config);
    if (r != ncclSuccess) return r;
    int below = 0, excluded = 0;
    for (int i = 0; i < excludeRanksCount; i++) {
        int x = excludeRanksList[i];
        if (x < 0 || x >= comm->nranks) return ncclInvalidArgument;
        if (x == comm->rank) excluded = 1;
        if (x < comm->rank) below++;
    }
    if (excluded) {
        trsim_set_last_error("ncclCommShrink: rank %d is in its own exclude list", comm->rank);
        return ncclInvalidArgument;
    }
    if (shrinkFlags & NCCL_SHRINK_ABORT) {
        atomic_store(&comm->aborted, 1);
        trsim_shm_ring(&comm->shm);
    }
    /* Excluded ranks may be dead: the survivors agree on the new group from
     * the list alone, with no exchange. */
    uint64_t split_no = comm->splits++;
    uint64_t child = trsim_hash64(trsim_hash64(comm->id.key, split_no), 0x73687269ULL);
    int blocking = config ? trsim_config_blocking(config) : comm->blocking;
    struct ncclComm *c;
    r = trsim_comm_attach(&c, comm->nranks - excludeRanksCount, &comm->id, child, comm->rank - below,
                          comm->device, blocking);
    if (r != ncclSuccess) return r;
    *newcomm = c;
    return trsim_comm_finish_init(c);
}

