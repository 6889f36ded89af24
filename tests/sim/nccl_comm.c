/* Simulated NCCL communicators: unique ids, init (blocking, non-blocking,
 * all-in-one-process), split, shrink, grow, suspend and resume, finalize,
 * destroy, abort, queries (properties, memory statistics, teams), user
 * reduction ops, NCCL memory, encryption settings and error reporting. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nccl_internal.h"

static _Thread_local char last_error[256];

void trsim_set_last_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

void trsim_comm_set_error(struct ncclComm *comm, ncclResult_t err, const char *fmt, ...)
{
    int expect = ncclSuccess;
    if (!atomic_compare_exchange_strong(&comm->async_error, &expect, (int)err)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comm->last_error, sizeof comm->last_error, fmt, ap);
    va_end(ap);
    trsim_warn("%s", comm->last_error);
}

double trsim_timeout_sec(void)
{
    static _Atomic double cached = -1;
    double v = atomic_load(&cached);
    if (v >= 0) return v;
    const char *s = getenv("TRSIM_TIMEOUT_SEC");
    v = 0;
    if (s && *s) {
        char *end;
        v = strtod(s, &end);
        if (end == s || *end || !(v >= 0) || v > 1e9) {
            trsim_warn("ignoring TRSIM_TIMEOUT_SEC=%s (want seconds >= 0)", s);
            v = 0;
        }
    }
    atomic_store(&cached, v);
    return v;
}

int trsim_comm_valid(const struct ncclComm *comm)
{
    return comm && comm->magic == TRSIM_COMM_MAGIC;
}

/* ---- unique ids and creation ---------------------------------------------- */

void trsim_job_tag(char *out, size_t n)
{
    const char *tag = getenv("TRSIM_SHM_TAG");
    size_t len = 0;
    if (tag && *tag) {
        /* Only characters that are safe in a file name. */
        for (; tag[len] && len + 1 < n && len < 64; len++) {
            char c = tag[len];
            out[len] = (c == '/' || c == ' ' || c < 33 || c > 126) ? '_' : c;
        }
        out[len] = 0;
    } else {
        snprintf(out, n, "u%d", (int)getuid());
    }
}

static ncclResult_t make_unique_id(ncclUniqueId *uniqueId)
{
    trsim_id id;
    memset(&id, 0, sizeof id);
    id.magic = TRSIM_ID_MAGIC;
    if (getrandom(&id.key, sizeof id.key, 0) != (ssize_t)sizeof id.key)
        id.key = trsim_hash64((uint64_t)getpid(), (uint64_t)(trsim_now() * 1e9));
    trsim_job_tag(id.tag, sizeof id.tag);
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId, &id, sizeof id);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId) return ncclInvalidArgument;
    return make_unique_id(uniqueId);
}

/* Of a ncclConfig_t only the fields every version has are read (size,
 * magic, version, blocking), after check_config. */
static int config_blocking(const ncclConfig_t *config)
{
    if (!config || config->blocking == NCCL_CONFIG_UNDEF_INT) return 1;
    return config->blocking != 0;
}

static ncclResult_t check_config(const ncclConfig_t *config)
{
    if (!config) return ncclSuccess;
    if (config->size < offsetof(ncclConfig_t, blocking) + sizeof config->blocking ||
        config->magic != NCCL_API_MAGIC) {
        trsim_set_last_error("ncclConfig_t not initialised with NCCL_CONFIG_INITIALIZER");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

static struct ncclComm *comm_new(int blocking)
{
    struct ncclComm *comm = calloc(1, sizeof *comm);
    if (!comm) return NULL;
    comm->magic = TRSIM_COMM_MAGIC;
    comm->blocking = blocking;
    atomic_init(&comm->init_state, ncclInProgress);
    atomic_init(&comm->async_error, ncclSuccess);
    pthread_mutex_init(&comm->lock, NULL);
    return comm;
}

static void comm_free(struct ncclComm *comm)
{
    trsim_comm_drop_windows(comm);
    if (atomic_load(&comm->attached)) trsim_shm_detach(&comm->shm);
    free(comm->sig_expected);
    free(comm->send_msgs);
    free(comm->recv_msgs);
    free((void *)comm->send_turn);
    free((void *)comm->recv_turn);
    free(comm->redops);
    pthread_mutex_destroy(&comm->lock);
    comm->magic = 0;
    free(comm);
}

/* Gives a new communicator its place and attaches it to its segment,
 * without waiting for the peers. */
static ncclResult_t comm_setup(struct ncclComm *comm, int nranks, const trsim_id *id, uint64_t key,
                               int rank, int device)
{
    if (nranks < 1 || nranks > TRSIM_MAX_RANKS || rank < 0 || rank >= nranks) {
        trsim_set_last_error("invalid rank %d of %d", rank, nranks);
        return ncclInvalidArgument;
    }
    comm->id = *id;
    comm->id.key = key;
    comm->nranks = nranks;
    comm->rank = rank;
    comm->device = device;
    comm->send_msgs = calloc((size_t)nranks, sizeof(uint64_t));
    comm->recv_msgs = calloc((size_t)nranks, sizeof(uint64_t));
    comm->send_turn = calloc((size_t)nranks, sizeof(_Atomic uint64_t));
    comm->recv_turn = calloc((size_t)nranks, sizeof(_Atomic uint64_t));
    comm->sig_expected = calloc((size_t)nranks * TRSIM_RMA_SLOTS, sizeof(uint64_t));
    if (!comm->send_msgs || !comm->recv_msgs || !comm->send_turn || !comm->recv_turn || !comm->sig_expected)
        return ncclSystemError;
    char name[160];
    snprintf(name, sizeof name, "/trsim.%s.%016llx", id->tag, (unsigned long long)key);
    ncclResult_t r = trsim_shm_attach(&comm->shm, name, nranks, rank, device);
    if (r == ncclSuccess) atomic_store_explicit(&comm->attached, 1, memory_order_release);
    return r;
}

static ncclResult_t comm_attach(struct ncclComm **out, int nranks, const trsim_id *id,
                                uint64_t key, int rank, int device, int blocking)
{
    *out = NULL;
    struct ncclComm *comm = comm_new(blocking);
    if (!comm) return ncclSystemError;
    ncclResult_t r = comm_setup(comm, nranks, id, key, rank, device);
    if (r != ncclSuccess) {
        comm_free(comm);
        return r;
    }
    *out = comm;
    return ncclSuccess;
}

static int init_complete(struct ncclComm *comm)
{
    if (atomic_load(&comm->init_state) != ncclInProgress) return 1;
    if (!atomic_load_explicit(&comm->attached, memory_order_acquire)) return 0;
    if (atomic_load(&comm->shm.hdr->attached) >= (uint32_t)comm->nranks) {
        int expect = ncclInProgress;
        atomic_compare_exchange_strong(&comm->init_state, &expect, ncclSuccess);
        return 1;
    }
    return 0;
}

enum { WAIT_READY = 1, WAIT_ABORTED = 0, WAIT_TIMEOUT = -1 };

/* Sleeps on the doorbell until ready(comm, arg) holds, the communicator is
 * aborted, or TRSIM_TIMEOUT_SEC (if set) has passed. */
static int wait_doorbell(struct ncclComm *comm, int (*ready)(struct ncclComm *, const void *),
                         const void *arg)
{
    double start = trsim_now(), timeout = trsim_timeout_sec();
    for (;;) {
        uint32_t seen = atomic_load(&comm->shm.hdr->doorbell);
        if (ready(comm, arg)) return WAIT_READY;
        if (atomic_load(&comm->aborted)) return WAIT_ABORTED;
        if (timeout > 0 && trsim_now() - start > timeout) return WAIT_TIMEOUT;
        trsim_shm_wait(&comm->shm, seen, 20 * 1000 * 1000L);
    }
}

static int init_ready(struct ncclComm *comm, const void *arg)
{
    (void)arg;
    return init_complete(comm);
}

ncclResult_t trsim_comm_wait_init(struct ncclComm *comm)
{
    switch (wait_doorbell(comm, init_ready, NULL)) {
    case WAIT_ABORTED:
        return ncclInvalidUsage;
    case WAIT_TIMEOUT:
        trsim_comm_set_error(comm, ncclSystemError,
                             "communicator init: only %u of %d ranks arrived within TRSIM_TIMEOUT_SEC",
                             atomic_load(&comm->shm.hdr->attached), comm->nranks);
        atomic_store(&comm->init_state, ncclSystemError);
        return ncclSystemError;
    }
    return (ncclResult_t)atomic_load(&comm->init_state);
}

static ncclResult_t finish_init(struct ncclComm *comm)
{
    if (!comm->blocking) return ncclInProgress;
    if (trsim_group_depth() > 0) {
        trsim_group_defer_init(comm);
        return ncclSuccess;
    }
    return trsim_comm_wait_init(comm);
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *uid, int rank,
                              const ncclConfig_t *config)
{
    if (!out) return ncclInvalidArgument;
    *out = NULL;
    ncclResult_t r = check_config(config);
    if (r != ncclSuccess) return r;
    trsim_id id;
    memcpy(&id, uid, sizeof id);
    id.tag[sizeof id.tag - 1] = 0;
    if (id.magic != TRSIM_ID_MAGIC) {
        trsim_set_last_error("ncclUniqueId was not made by ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    struct ncclComm *comm;
    r = comm_attach(&comm, nranks, &id, id.key, rank, trsim_current_device(), config_blocking(config));
    if (r != ncclSuccess) return r;
    *out = comm;
    return finish_init(comm);
}

TRSIM_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, &commId, rank, NULL);
}

TRSIM_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                              int rank, ncclConfig_t *config)
{
    return init_rank(comm, nranks, &commId, rank, config);
}

TRSIM_API ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                                ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId < 1 || !commIds) return ncclInvalidArgument;
    /* Every rank is handed the same list of ids; the first one names the job. */
    return init_rank(newcomm, nranks, &commIds[0], myrank, config);
}

TRSIM_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (!comms || ndev < 1) return ncclInvalidArgument;
    ncclUniqueId uid;
    ncclResult_t r = make_unique_id(&uid);
    if (r != ncclSuccess) return r;
    trsim_id id;
    memcpy(&id, &uid, sizeof id);
    int i;
    for (i = 0; i < ndev; i++) {
        int dev = devlist ? devlist[i] : i;
        if (dev < 0 || dev >= trsim_device_count()) { r = ncclInvalidArgument; goto fail; }
        r = comm_attach(&comms[i], ndev, &id, id.key, i, dev, 1);
        if (r != ncclSuccess) goto fail;
    }
    for (i = 0; i < ndev; i++) {
        r = trsim_comm_wait_init(comms[i]);
        if (r != ncclSuccess) { i = ndev; goto fail; }
    }
    return ncclSuccess;
fail:
    while (i-- > 0) {
        ncclCommAbort(comms[i]);
        comms[i] = NULL;
    }
    return r;
}

/* ---- host-side exchange over the segment ---------------------------------- */

struct boot_wait {
    _Atomic uint64_t *(*field)(trsim_shm_rank *);
    uint64_t value;
};

static int boot_ready(struct ncclComm *comm, const void *arg)
{
    const struct boot_wait *w = arg;
    for (int q = 0; q < comm->nranks; q++)
        if (atomic_load(w->field(&comm->shm.ranks[q])) < w->value) return 0;
    return 1;
}

/* Waits until every rank's field reached value; 0 on abort or timeout. */
static int wait_all(struct ncclComm *comm, _Atomic uint64_t *(*field)(trsim_shm_rank *), uint64_t value)
{
    struct boot_wait w = {field, value};
    int r = wait_doorbell(comm, boot_ready, &w);
    if (r == WAIT_TIMEOUT)
        trsim_comm_set_error(comm, ncclSystemError, "communicator exchange timed out (TRSIM_TIMEOUT_SEC)");
    return r == WAIT_READY;
}

static _Atomic uint64_t *boot_posted(trsim_shm_rank *r) { return &r->boot_posted; }
static _Atomic uint64_t *boot_consumed(trsim_shm_rank *r) { return &r->boot_consumed; }

ncclResult_t trsim_comm_allgather_boot(struct ncclComm *comm, const void *in, void *out)
{
    uint64_t k = ++comm->boot_seq;
    trsim_shm_rank *me = &comm->shm.ranks[comm->rank];
    if (!wait_all(comm, boot_consumed, k - 1)) return ncclSystemError;
    memcpy(me->boot[k & 1], in, TRSIM_BOOT_BYTES);
    atomic_store_explicit(&me->boot_posted, k, memory_order_release);
    trsim_shm_ring(&comm->shm);
    if (!wait_all(comm, boot_posted, k)) return ncclSystemError;
    for (int q = 0; q < comm->nranks; q++)
        memcpy((char *)out + (size_t)q * TRSIM_BOOT_BYTES, comm->shm.ranks[q].boot[k & 1], TRSIM_BOOT_BYTES);
    atomic_store_explicit(&me->boot_consumed, k, memory_order_release);
    trsim_shm_ring(&comm->shm);
    return ncclSuccess;
}

/* ---- split, grow, and the jobs that run them ------------------------------- */

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
static ncclResult_t split_run(struct trsim_split *job)
{
    struct ncclComm *comm = job->parent;
    ncclResult_t r = trsim_comm_wait_init(comm);
    if (r != ncclSuccess) return r;
    unsigned char mine[TRSIM_BOOT_BYTES] = {0};
    struct split_entry me = {job->color, job->key, comm->rank};
    memcpy(mine, &me, sizeof me);
    unsigned char *all = malloc((size_t)comm->nranks * TRSIM_BOOT_BYTES);
    struct split_entry *members = malloc((size_t)comm->nranks * sizeof *members);
    if (!all || !members) { r = ncclSystemError; goto out; }
    if ((r = trsim_comm_allgather_boot(comm, mine, all)) != ncclSuccess) goto out;
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
    struct ncclComm *c = job->child;
    r = comm_setup(c, n, &comm->id, child, newrank, comm->device);
    if (r != ncclSuccess) {
        atomic_store(&c->init_state, r);
        goto out;
    }
    if (job->blocking) r = trsim_comm_wait_init(c);
out:
    free(all);
    free(members);
    return r;
}

/* What each existing rank publishes in a grow. */
struct grow_entry { int32_t root, status, nranks, pad; uint64_t key; };

/* The collective part of a grow on the existing ranks: the root (the rank
 * that passed the unique id) publishes the id's key; all attach to the new,
 * larger segment with their ranks unchanged, the new ranks join it through
 * the id (ncclCommGrow with comm NULL). */
static ncclResult_t grow_run(struct trsim_split *job)
{
    struct ncclComm *comm = job->parent;
    ncclResult_t r = trsim_comm_wait_init(comm);
    if (r != ncclSuccess) return r;
    unsigned char mine[TRSIM_BOOT_BYTES] = {0};
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
    memcpy(mine, &me, sizeof me);
    unsigned char *all = malloc((size_t)comm->nranks * TRSIM_BOOT_BYTES);
    if (!all) return ncclSystemError;
    if ((r = trsim_comm_allgather_boot(comm, mine, all)) != ncclSuccess) goto out;
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
    struct ncclComm *c = job->child;
    r = comm_setup(c, job->grow_nranks, &comm->id, key, comm->rank, comm->device);
    if (r != ncclSuccess) {
        atomic_store(&c->init_state, r);
        goto out;
    }
    if (job->blocking) r = trsim_comm_wait_init(c);
out:
    free(all);
    return r;
}

ncclResult_t trsim_split_run(struct trsim_split *job)
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

ncclResult_t trsim_split_free(struct trsim_split *job)
{
    ncclResult_t r = job->result;
    if (r != ncclSuccess && job->child) atomic_store(&job->child->init_state, r);
    free(job);
    return r;
}

static void *split_thread(void *arg)
{
    struct trsim_split *job = arg;
    struct ncclComm *parent = job->parent;
    trsim_split_run(job);
    trsim_split_free(job);
    atomic_fetch_sub(&parent->pending_splits, 1);
    return NULL;
}

ncclResult_t trsim_job_launch(struct trsim_split *job, ncclComm_t *newcomm)
{
    struct ncclComm *comm = job->parent;
    if (trsim_group_depth() > 0) {
        if (newcomm) *newcomm = job->child;
        /* One thread may split several communicators inside a group: the
         * exchanges then run side by side at the outermost ncclGroupEnd. */
        trsim_group_defer_split(job);
        return ncclSuccess;
    }
    if (!job->blocking) {
        /* The handle is valid at once; it reports ncclInProgress until the
         * exchange and the peers' attach are done. */
        if (newcomm) *newcomm = job->child;
        pthread_t t;
        atomic_fetch_add(&comm->pending_splits, 1);
        job->track_parent = 1;
        if (pthread_create(&t, NULL, split_thread, job) != 0) {
            atomic_fetch_sub(&comm->pending_splits, 1);
            if (newcomm) *newcomm = NULL;
            if (job->child) comm_free(job->child);
            free(job);
            return ncclSystemError;
        }
        pthread_detach(t);
        return ncclInProgress;
    }
    ncclResult_t r = trsim_split_run(job);
    if (r == ncclSuccess) {
        if (newcomm) *newcomm = job->child;
    } else if (job->child) {
        comm_free(job->child);
    }
    free(job);
    return r;
}

TRSIM_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                     ncclConfig_t *config)
{
    if (!trsim_comm_valid(comm) || !newcomm) return ncclInvalidArgument;
    *newcomm = NULL;
    ncclResult_t r = check_config(config);
    if (r != ncclSuccess) return r;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        trsim_set_last_error("ncclCommSplit: color %d is negative", color);
        return ncclInvalidArgument;
    }
    struct trsim_split *job = calloc(1, sizeof *job);
    if (!job) return ncclSystemError;
    job->kind = TRSIM_JOB_SPLIT;
    job->parent = comm;
    job->color = color;
    job->key = key;
    job->blocking = config && config->blocking != NCCL_CONFIG_UNDEF_INT ? config_blocking(config)
                                                                         : comm->blocking;
    if (color != NCCL_SPLIT_NOCOLOR) {
        job->child = comm_new(job->blocking);
        if (!job->child) { free(job); return ncclSystemError; }
    }
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
    ncclResult_t r = make_unique_id(uniqueId);
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
    ncclResult_t r = check_config(config);
    if (r != ncclSuccess) return r;
    if (!comm) {
        /* a new rank: joins the grown communicator through the id */
        if (!uniqueId || rank < 0) {
            trsim_set_last_error("ncclCommGrow: a new rank needs the unique id and its rank");
            return ncclInvalidArgument;
        }
        return init_rank(newcomm, nRanks, uniqueId, rank, config);
    }
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    if (rank != -1) {
        trsim_set_last_error("ncclCommGrow: an existing rank passes rank -1 (it keeps rank %d)", comm->rank);
        return ncclInvalidArgument;
    }
    struct trsim_split *job = calloc(1, sizeof *job);
    if (!job) return ncclSystemError;
    job->kind = TRSIM_JOB_GROW;
    job->parent = comm;
    job->grow_nranks = nRanks;
    if (uniqueId) {
        trsim_id id;
        memcpy(&id, uniqueId, sizeof id);
        job->grow_root = 1;
        job->grow_key = id.magic == TRSIM_ID_MAGIC ? id.key : 0;
    }
    job->blocking = config && config->blocking != NCCL_CONFIG_UNDEF_INT ? config_blocking(config)
                                                                         : comm->blocking;
    job->child = comm_new(job->blocking);
    if (!job->child) { free(job); return ncclSystemError; }
    return trsim_job_launch(job, newcomm);
}

TRSIM_API ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                      ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    if (!trsim_comm_valid(comm) || !newcomm || excludeRanksCount < 0 ||
        (excludeRanksCount > 0 && !excludeRanksList))
        return ncclInvalidArgument;
    *newcomm = NULL;
    ncclResult_t r = check_config(config);
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
    int blocking = config ? config_blocking(config) : comm->blocking;
    struct ncclComm *c;
    r = comm_attach(&c, comm->nranks - excludeRanksCount, &comm->id, child, comm->rank - below,
                    comm->device, blocking);
    if (r != ncclSuccess) return r;
    *newcomm = c;
    return finish_init(c);
}

/* ---- teardown ---------------------------------------------------------------- */

static void wait_ops_done(struct ncclComm *comm)
{
    while (atomic_load(&comm->inflight) > 0) {
        uint32_t seen = atomic_load(&comm->shm.hdr->doorbell);
        if (atomic_load(&comm->inflight) == 0) break;
        trsim_shm_wait(&comm->shm, seen, 5 * 1000 * 1000L);
    }
}

TRSIM_API ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    atomic_store(&comm->finalizing, 1);
    if (!comm->blocking) return ncclInProgress;
    wait_ops_done(comm);
    return (ncclResult_t)atomic_load(&comm->async_error);
}

TRSIM_API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    /* Like NCCL, destroying a communicator with work still queued waits for
     * that work: a hung collective makes this hang too. */
    wait_ops_done(comm);
    comm_free(comm);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    atomic_store(&comm->aborted, 1);
    trsim_shm_ring(&comm->shm);   /* wakes this process's workers waiting on it */
    wait_ops_done(comm);
    comm_free(comm);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    if (!trsim_comm_valid(comm) || revokeFlags != NCCL_REVOKE_DEFAULT) return ncclInvalidArgument;
    atomic_store(&comm->aborted, 1);
    trsim_shm_ring(&comm->shm);
    return ncclSuccess;
}

/* ---- suspend and resume ------------------------------------------------------ */

/* A communicator ready for a call that needs its init done: waits for it
 * when blocking; a non-blocking one reports where its init stands. */
static ncclResult_t comm_ready(struct ncclComm *comm)
{
    if (init_complete(comm)) return (ncclResult_t)atomic_load(&comm->init_state);
    if (!comm->blocking) return (ncclResult_t)atomic_load(&comm->init_state);
    return trsim_comm_wait_init(comm);
}

/* Every rank of the communicator waits for the others (host side). */
static ncclResult_t comm_barrier(struct ncclComm *comm)
{
    unsigned char mine[TRSIM_BOOT_BYTES] = {0};
    unsigned char *all = malloc((size_t)comm->nranks * TRSIM_BOOT_BYTES);
    if (!all) return ncclSystemError;
    ncclResult_t r = trsim_comm_allgather_boot(comm, mine, all);
    free(all);
    return r;
}

/* Like NCCL: only NCCL_SUSPEND_MEM does something (the device's work is
 * waited for, then all ranks meet); a suspended communicator refuses
 * operations with ncclInvalidUsage until ncclCommResume, collective too. */
TRSIM_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    ncclResult_t r = comm_ready(comm);
    if (r != ncclSuccess) return r;
    if (!(flags & NCCL_SUSPEND_MEM)) return ncclSuccess;
    if (atomic_load(&comm->suspended)) {
        trsim_set_last_error("ncclCommSuspend: the communicator is suspended already");
        return ncclInvalidUsage;
    }
    trsim_device_wait_idle(comm->device);
    if ((r = comm_barrier(comm)) != ncclSuccess) return r;
    atomic_store(&comm->suspended, 1);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommResume(ncclComm_t comm)
{
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    ncclResult_t r = comm_ready(comm);
    if (r != ncclSuccess) return r;
    if (!atomic_load(&comm->suspended)) {
        trsim_set_last_error("ncclCommResume: the communicator is not suspended");
        return ncclInvalidUsage;
    }
    if ((r = comm_barrier(comm)) != ncclSuccess) return r;
    atomic_store(&comm->suspended, 0);
    return ncclSuccess;
}

/* The communicator's "GPU memory" is its segment: the part before the data
 * slots stays (persistent), the slots are what a suspend could release. */
TRSIM_API ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value)
{
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    ncclResult_t r = comm_ready(comm);
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

/* ---- queries ------------------------------------------------------------------ */

TRSIM_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!trsim_comm_valid(comm) || !asyncError) return ncclInvalidArgument;
    int err = atomic_load(&comm->async_error);
    if (err != ncclSuccess) { *asyncError = (ncclResult_t)err; return ncclSuccess; }
    if (!init_complete(comm)) {
        *asyncError = (ncclResult_t)atomic_load(&comm->init_state);
        if (*asyncError == ncclInProgress && !comm->blocking &&
            atomic_load_explicit(&comm->attached, memory_order_acquire)) {
            /* A non-blocking init learns of dead peers here, not in a wait. */
            for (int q = 0; q < comm->nranks; q++)
                if (trsim_shm_rank_dead(&comm->shm, q)) {
                    trsim_comm_set_error(comm, ncclRemoteError, "rank %d of the communicator died", q);
                    *asyncError = ncclRemoteError;
                }
        }
        return ncclSuccess;
    }
    if (atomic_load(&comm->pending_splits) > 0 ||
        (atomic_load(&comm->finalizing) && atomic_load(&comm->inflight) > 0)) {
        *asyncError = ncclInProgress;
        return ncclSuccess;
    }
    *asyncError = ncclSuccess;
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!trsim_comm_valid(comm) || !count) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!trsim_comm_valid(comm) || !device) return ncclInvalidArgument;
    *device = comm->device;
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!trsim_comm_valid(comm) || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclGetVersion(int *version)
{
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

TRSIM_API const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

TRSIM_API const char *ncclGetLastError(ncclComm_t comm)
{
    if (trsim_comm_valid(comm) && comm->last_error[0]) return comm->last_error;
    return last_error;
}

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
    ncclResult_t r = comm_ready(comm);
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

/* ---- settings ---------------------------------------------------------------------- */

/* NCCL encrypts its TCP sockets; the simulator has none (ranks meet in
 * shared memory, nothing leaves the machine): a valid setting is accepted. */
TRSIM_API ncclResult_t ncclSetEncryption(const ncclEncryptionConfig_t *config)
{
    if (!config || config->size < offsetof(ncclEncryptionConfig_t, psk) + sizeof config->psk ||
        config->magic != NCCL_API_MAGIC) {
        trsim_set_last_error("ncclEncryptionConfig_t not initialised with NCCL_ENCRYPTION_CONFIG_INITIALIZER");
        return ncclInvalidArgument;
    }
    if (config->mode != NCCL_ENCRYPTION_MODE_NONE && config->mode != NCCL_ENCRYPTION_MODE_PSK) {
        trsim_set_last_error("ncclSetEncryption: unknown mode %d", config->mode);
        return ncclInvalidArgument;
    }
    if (config->mode == NCCL_ENCRYPTION_MODE_PSK && (!config->psk || !*config->psk)) {
        trsim_set_last_error("ncclSetEncryption: PSK mode without a key");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* NCCL reloads its logging settings; the simulator's (TRSIM_DEBUG) are
 * read where they are used, so there is nothing to reload. */
TRSIM_API void ncclResetDebugInit(void)
{
}

TRSIM_API void ncclResetDebugInitInternal(void);
TRSIM_API void ncclResetDebugInitInternal(void)
{
}

/* ---- user reduction ops -------------------------------------------------------- */

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

/* ---- registration and NCCL memory ------------------------------------------------ */

/* In a mapping of its own, as NCCL's cuMem memory is, and shared memory
 * from the start: it can become a window without being moved (nccl_win.c). */
TRSIM_API ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr) return ncclInvalidArgument;
    cudaError_t e = trsim_mem_alloc_mapped(ptr, size, trsim_current_device());
    if (e != cudaSuccess) {
        trsim_set_last_error("ncclMemAlloc(%zu): %s", size, cudaGetErrorName(e));
        return ncclUnhandledCudaError;
    }
    if (*ptr) trsim_window_share_alloc(*ptr, size);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclMemFree(void *ptr)
{
    if (!ptr) return ncclSuccess;
    return trsim_mem_free(ptr, TRSIM_MEM_DEVICE) == cudaSuccess ? ncclSuccess : ncclInvalidArgument;
}

TRSIM_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    (void)size;
    if (!trsim_comm_valid(comm) || !buff || !handle) return ncclInvalidArgument;
    *handle = buff;   /* registration only speeds real transports up */
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    (void)handle;
    return trsim_comm_valid(comm) ? ncclSuccess : ncclInvalidArgument;
}
