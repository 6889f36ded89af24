/* Simulated NCCL communicators: unique ids, init (blocking, non-blocking,
 * all-in-one-process), the host-side exchange between their ranks,
 * finalize, destroy, abort, queries, NCCL memory, encryption settings and
 * error reporting. Communicators made from others are nccl_split.c's. */
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

ncclResult_t trsim_make_unique_id(ncclUniqueId *uniqueId)
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
    return trsim_make_unique_id(uniqueId);
}

int trsim_config_blocking(const ncclConfig_t *config)
{
    if (!config || config->blocking == NCCL_CONFIG_UNDEF_INT) return 1;
    return config->blocking != 0;
}

ncclResult_t trsim_check_config(const ncclConfig_t *config)
{
    if (!config) return ncclSuccess;
    if (config->size < offsetof(ncclConfig_t, blocking) + sizeof config->blocking ||
        config->magic != NCCL_API_MAGIC) {
        trsim_set_last_error("ncclConfig_t not initialised with NCCL_CONFIG_INITIALIZER");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

struct ncclComm *trsim_comm_new(int blocking)
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

void trsim_comm_free(struct ncclComm *comm)
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

ncclResult_t trsim_comm_setup(struct ncclComm *comm, int nranks, const trsim_id *id, uint64_t key,
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

ncclResult_t trsim_comm_attach(struct ncclComm **out, int nranks, const trsim_id *id,
                               uint64_t key, int rank, int device, int blocking)
{
    *out = NULL;
    struct ncclComm *comm = trsim_comm_new(blocking);
    if (!comm) return ncclSystemError;
    ncclResult_t r = trsim_comm_setup(comm, nranks, id, key, rank, device);
    if (r != ncclSuccess) {
        trsim_comm_free(comm);
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

ncclResult_t trsim_comm_ready(struct ncclComm *comm)
{
    if (init_complete(comm)) return (ncclResult_t)atomic_load(&comm->init_state);
    if (!comm->blocking) return (ncclResult_t)atomic_load(&comm->init_state);
    return trsim_comm_wait_init(comm);
}

ncclResult_t trsim_comm_finish_init(struct ncclComm *comm)
{
    if (!comm->blocking) return ncclInProgress;
    if (trsim_group_depth() > 0) {
        trsim_group_defer_init(comm);
        return ncclSuccess;
    }
    return trsim_comm_wait_init(comm);
}

ncclResult_t trsim_comm_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *uid, int rank,
                                  const ncclConfig_t *config)
{
    if (!out) return ncclInvalidArgument;
    *out = NULL;
    ncclResult_t r = trsim_check_config(config);
    if (r != ncclSuccess) return r;
    trsim_id id;
    memcpy(&id, uid, sizeof id);
    id.tag[sizeof id.tag - 1] = 0;
    if (id.magic != TRSIM_ID_MAGIC) {
        trsim_set_last_error("ncclUniqueId was not made by ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    struct ncclComm *comm;
    r = trsim_comm_attach(&comm, nranks, &id, id.key, rank, trsim_current_device(), trsim_config_blocking(config));
    if (r != ncclSuccess) return r;
    *out = comm;
    return trsim_comm_finish_init(comm);
}

TRSIM_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return trsim_comm_init_rank(comm, nranks, &commId, rank, NULL);
}

TRSIM_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                              int rank, ncclConfig_t *config)
{
    return trsim_comm_init_rank(comm, nranks, &commId, rank, config);
}

TRSIM_API ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                                ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId < 1 || !commIds) return ncclInvalidArgument;
    /* Every rank is handed the same list of ids; the first one names the job. */
    return trsim_comm_init_rank(newcomm, nranks, &commIds[0], myrank, config);
}

TRSIM_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (!comms || ndev < 1) return ncclInvalidArgument;
    ncclUniqueId uid;
    ncclResult_t r = trsim_make_unique_id(&uid);
    if (r != ncclSuccess) return r;
    trsim_id id;
    memcpy(&id, &uid, sizeof id);
    int i;
    for (i = 0; i < ndev; i++) {
        int dev = devlist ? devlist[i] : i;
        if (dev < 0 || dev >= trsim_device_count()) { r = ncclInvalidArgument; goto fail; }
        r = trsim_comm_attach(&comms[i], ndev, &id, id.key, i, dev, 1);
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

ncclResult_t trsim_comm_exchange(struct ncclComm *comm, const void *entry, size_t bytes, unsigned char **all)
{
    unsigned char mine[TRSIM_BOOT_BYTES] = {0};
    if (bytes) memcpy(mine, entry, bytes);
    *all = malloc((size_t)comm->nranks * TRSIM_BOOT_BYTES);
    if (!*all) return ncclSystemError;
    return trsim_comm_allgather_boot(comm, mine, *all);
}

ncclResult_t trsim_comm_barrier(struct ncclComm *comm)
{
    unsigned char *all;
    ncclResult_t r = trsim_comm_exchange(comm, NULL, 0, &all);
    free(all);
    return r;
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
    trsim_comm_free(comm);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!trsim_comm_valid(comm)) return ncclInvalidArgument;
    atomic_store(&comm->aborted, 1);
    trsim_shm_ring(&comm->shm);   /* wakes this process's workers waiting on it */
    wait_ops_done(comm);
    trsim_comm_free(comm);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    if (!trsim_comm_valid(comm) || revokeFlags != NCCL_REVOKE_DEFAULT) return ncclInvalidArgument;
    atomic_store(&comm->aborted, 1);
    trsim_shm_ring(&comm->shm);
    return ncclSuccess;
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
    if (atomic_load(&comm->pending_jobs) > 0 ||
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

/* ---- registration and NCCL memory ------------------------------------------------ */

/* In a mapping of its own, as NCCL's cuMem memory is, so that it can
 * become a window: registration moves its pages into shared memory then
 * (nccl_win.c), not here — most NCCL memory never becomes a window, and a
 * shared-memory file per allocation made allocation-heavy jobs ~50x slower. */
TRSIM_API ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr) return ncclInvalidArgument;
    cudaError_t e = trsim_mem_alloc_mapped(ptr, size, trsim_current_device());
    if (e != cudaSuccess) {
        trsim_set_last_error("ncclMemAlloc(%zu): %s", size, cudaGetErrorName(e));
        return ncclUnhandledCudaError;
    }
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
