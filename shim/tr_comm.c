/* Communicators: the table of every communicator this process created (ids
 * identical on every member rank, parents, sizes, ranks, devices, init and
 * teardown times), the handle map, the lifecycle wrappers, the ranks of the
 * process and the "comms" part of a trace.
 *
 * Records are appended and never removed: a destroyed communicator stays in
 * the trace, and a handle NCCL reuses later maps to the new record. The
 * writer reads everything lock-free while wrappers run.
 *
 * Each communicator also has a slot in the ring file (tr_ring.h) of the same
 * index, which mirrors every field here as it changes, so that a killed
 * process leaves them behind; beyond the ring's slots, a private copy of
 * the same layout holds its fingerprint. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tr_hash.h"
#include "tr_nancheck.h"
#include "tr_nccl_int.h"

static _Atomic(tr_comm *) g_comms[TR_MAX_COMMS];
static atomic_int g_ncomms;             /* slots reserved (a slot may still be NULL) */
static _Atomic uint64_t g_first_uid_comm;
static atomic_uint g_initall_no;

#define MAP_SIZE (1u << 17)
static struct {
    _Atomic uintptr_t key;
    _Atomic int32_t idx;
} g_map[MAP_SIZE];
static unsigned g_map_used;
static pthread_mutex_t g_map_mu = PTHREAD_MUTEX_INITIALIZER;

/* comms created inside this thread's current group whose size is asked for
 * once the group has ended */
#define MAX_GROUP_PENDING 64
static __thread int32_t t_pending[MAX_GROUP_PENDING] __attribute__((tls_model("initial-exec")));
static __thread int t_npending __attribute__((tls_model("initial-exec")));


/* ---- table and handle map ------------------------------------------------------ */

tr_comm *tr_comm_at(int32_t idx)
{
    if (idx < 0 || idx >= TR_MAX_COMMS) return NULL;
    return atomic_load_explicit(&g_comms[idx], memory_order_acquire);
}

int32_t tr_comm_count(void)
{
    int n = atomic_load_explicit(&g_ncomms, memory_order_acquire);
    return n < TR_MAX_COMMS ? n : TR_MAX_COMMS;
}

static unsigned map_slot(uintptr_t h)
{
    return (unsigned)(((uint64_t)h * 0x9e3779b97f4a7c15ull) >> (64 - 17));
}

int32_t tr_comm_lookup(ncclComm_t comm)
{
    uintptr_t h = (uintptr_t)comm;
    if (!h) return -1;
    for (unsigned i = map_slot(h), n = 0; n < MAP_SIZE; i = (i + 1) & (MAP_SIZE - 1), n++) {
        uintptr_t k = atomic_load_explicit(&g_map[i].key, memory_order_acquire);
        if (k == h) return atomic_load_explicit(&g_map[i].idx, memory_order_relaxed);
        if (!k) return -1;
    }
    return -1;
}

static void map_bind(uintptr_t h, int32_t idx)
{
    if (!h) return;
    pthread_mutex_lock(&g_map_mu);
    for (unsigned i = map_slot(h), n = 0; n < MAP_SIZE; i = (i + 1) & (MAP_SIZE - 1), n++) {
        uintptr_t k = atomic_load_explicit(&g_map[i].key, memory_order_relaxed);
        if (k == h) {
            atomic_store_explicit(&g_map[i].idx, idx, memory_order_relaxed);
            break;
        }
        if (!k) {
            if (g_map_used >= MAP_SIZE / 4 * 3) {
                tr_warn("too many communicators: calls on the newest are recorded without a communicator");
                break;
            }
            g_map_used++;
            atomic_store_explicit(&g_map[i].idx, idx, memory_order_relaxed);
            atomic_store_explicit(&g_map[i].key, h, memory_order_release);
            break;
        }
    }
    pthread_mutex_unlock(&g_map_mu);
}

typedef struct {
    int kind;
    uint64_t id;
    int32_t parent;
    int size, rank, device, blocking;
    int has_color, color, key;
    uint64_t enter;
    int32_t stack;
    int from_uid;
    uint64_t grow_uid;
    int grow_ranks;
} comm_init;

/* stores into a ring comm slot: each field is meaningful on its own */
#define RING_SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELEASE)

/* The ring slot of communicator idx, with its identity written (then
 * valid); a private copy when the ring has no slot for it. */
static trr_comm *ring_slot(int32_t idx, const tr_comm *c, const tr_comm *parent, int from_uid, int32_t *slot)
{
    *slot = idx;
    trr_comm *k = tr_ring_comm_claim(idx);
    if (!k) {
        *slot = -1;
        if (!(k = calloc(1, sizeof *k))) return NULL;
        k->init_stack = -1;
        k->fp_step = tr_ring_fp_interval();
    }
    k->kind = c->kind;
    k->id = c->id;
    k->parent_id = c->parent_id;
    k->parent = parent && parent->slot >= 0 ? parent->slot : -1;
    k->blocking = c->blocking;
    k->has_color = c->has_color;
    k->color = c->color;
    k->key = c->key;
    k->group = c->group;
    k->init_enter = c->init_enter;
    k->init_stack = c->init_stack;
    k->from_uid = from_uid;
    k->size = atomic_load(&c->size);
    k->rank = atomic_load(&c->rank);
    k->device = atomic_load(&c->device);
    k->grow_uid = c->grow_uid;
    k->grow_ranks = c->grow_ranks;
    RING_SET(k->valid, 1);
    return k;
}

static int32_t comm_add(const comm_init *in)
{
    tr_nccl_library_info(1);          /* the library's exports, once */
    tr_comm *c = calloc(1, sizeof *c);
    if (!c) return -1;
    int32_t idx = atomic_fetch_add(&g_ncomms, 1);
    if (idx >= TR_MAX_COMMS) {
        free(c);
        tr_warn("more than 65536 communicators: the rest are not recorded");
        return -1;
    }
    tr_comm *parent = tr_comm_at(in->parent);
    c->kind = in->kind;
    c->id = in->id;
    c->parent = parent ? in->parent : -1;
    c->parent_id = parent ? parent->id : 0;
    c->blocking = in->blocking;
    c->has_color = in->has_color;
    c->color = in->color;
    c->key = in->key;
    c->group = tr_group_current();
    c->init_enter = in->enter;
    c->init_stack = in->stack;
    c->grow_uid = in->grow_uid;
    c->grow_ranks = in->grow_ranks;
    atomic_init(&c->device, in->device);
    atomic_init(&c->size, in->size);
    atomic_init(&c->rank, in->rank);
    atomic_init(&c->resolved, in->size >= 0 && in->rank >= 0);
    c->ring = ring_slot(idx, c, parent, in->from_uid, &c->slot);
    atomic_store_explicit(&g_comms[idx], c, memory_order_release);
    if (c->group && !atomic_load(&c->resolved) && t_npending < MAX_GROUP_PENDING)
        t_pending[t_npending++] = idx;
    return idx;
}

/* After the init call returned r with *out the new handle. */
static void comm_init_done(int32_t idx, ncclResult_t r, ncclComm_t *out)
{
    tr_comm *c = tr_comm_at(idx);
    if (!c) return;
    ncclComm_t h = NULL;
    if ((r == ncclSuccess || r == ncclInProgress) && out) h = *out;
    if (h) {
        atomic_store(&c->handle, (uintptr_t)h);
        map_bind((uintptr_t)h, idx);
    }
    uint64_t t = tr_now_ns();
    atomic_store(&c->init_rc, (int)r);
    atomic_store_explicit(&c->init_exit, t, memory_order_release);
    atomic_store_explicit(&c->init_done, 1, memory_order_release);
    if (c->ring) {
        RING_SET(c->ring->init_rc, (int32_t)r);
        RING_SET(c->ring->init_exit, t);
        RING_SET(c->ring->init_done, 1);
    }
    /* a blocking split outside a group is ready now */
    if (h && r == ncclSuccess && c->blocking && !c->group) tr_comm_resolve(c, h);
}

void tr_comm_resolve(tr_comm *c, ncclComm_t h)
{
    typedef ncclResult_t (*query_fn)(const ncclComm_t, int *);
    if (!c || !h || atomic_load_explicit(&c->resolved, memory_order_acquire) || atomic_load(&c->dead) ||
        atomic_fetch_add(&c->resolve_tries, 1) >= 4)
        return;
    TR_REAL(count_fn, query_fn, "ncclCommCount", TR_LIB_NCCL);
    TR_REAL(rank_fn, query_fn, "ncclCommUserRank", TR_LIB_NCCL);
    TR_REAL(dev_fn, query_fn, "ncclCommCuDevice", TR_LIB_NCCL);
    int n = -1, r = -1, d = -1;
    if (!count_fn || !rank_fn || count_fn(h, &n) != ncclSuccess || rank_fn(h, &r) != ncclSuccess) return;
    atomic_store(&c->size, n);
    atomic_store(&c->rank, r);
    if (atomic_load(&c->device) < 0 && dev_fn && dev_fn(h, &d) == ncclSuccess) atomic_store(&c->device, d);
    atomic_store_explicit(&c->resolved, 1, memory_order_release);
    if (c->ring) {
        RING_SET(c->ring->size, n);
        RING_SET(c->ring->rank, r);
        RING_SET(c->ring->device, atomic_load(&c->device));
    }
}

void tr_comm_group_ended(ncclResult_t r)
{
    for (int i = 0; i < t_npending; i++) {
        tr_comm *c = tr_comm_at(t_pending[i]);
        if (!c || r != ncclSuccess || !c->blocking) continue;
        tr_comm_resolve(c, (ncclComm_t)atomic_load(&c->handle));
    }
    t_npending = 0;
}

uint64_t tr_comm_p2p(tr_comm *c, ncclComm_t h, int peer, int dir, uint64_t n, int take)
{
    _Atomic uint64_t *a = atomic_load_explicit(&c->p2p, memory_order_acquire);
    if (!a) {
        if (!take) return peer >= 0 ? n : 0;
        tr_comm_resolve(c, h);
        int size = atomic_load(&c->size);
        if (size <= 0) size = 1024;      /* size unknown: enough for any peer we could number */
        _Atomic uint64_t *fresh = calloc(TR_P2P_DIRS * (size_t)size, sizeof *fresh);
        if (!fresh) return 0;
        atomic_store(&c->p2p_n, size);
        _Atomic uint64_t *expect = NULL;
        if (atomic_compare_exchange_strong(&c->p2p, &expect, fresh)) a = fresh;
        else { free(fresh); a = expect; }
    }
    int size = atomic_load(&c->p2p_n);
    if (peer < 0 || peer >= size || dir < 0 || dir >= TR_P2P_DIRS) return 0;
    _Atomic uint64_t *ctr = &a[(size_t)dir * (size_t)size + (size_t)peer];
    return take ? atomic_fetch_add(ctr, n) + n : atomic_load(ctr) + n;
}

uint64_t tr_nccl_first_comm_id(void) { return atomic_load(&g_first_uid_comm); }

static void note_uid_comm(uint64_t id)
{
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&g_first_uid_comm, &zero, id);
}

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
    comm_init in = {.kind = kind, .id = id, .parent = -1, .size = nranks, .rank = rank,
                    .device = tr_cuda_device(), .blocking = blocking, .enter = enter, .stack = stack,
                    .from_uid = 1};
    note_uid_comm(id);
    return comm_add(&in);
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
    if (rec) comm_init_done(ci, r, comm);
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
    if (rec) comm_init_done(ci, r, comm);
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
    if (rec) comm_init_done(ci, r, newcomm);
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
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        uint64_t id = tr_hash_bytes(4, host, strlen(host));
        id = tr_mix64(tr_mix64(id, (uint64_t)getpid()), atomic_fetch_add(&g_initall_no, 1) + 1);
        for (n = 0; n < ndev; n++) {
            comm_init in = {.kind = TR_KIND_INITALL, .id = id, .parent = -1, .size = ndev, .rank = n,
                            .device = devlist ? devlist[n] : n, .blocking = 1, .enter = t, .stack = st};
            idx[n] = comm_add(&in);
        }
    }
    ncclResult_t r = real(comms, ndev, devlist);
    for (int i = 0; i < n; i++) comm_init_done(idx[i], r, comms ? &comms[i] : NULL);
    free(idx);
    tr_leave();
    return r;
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
        uint64_t t = tr_now_ns();
        int32_t st = tr_stack_capture();
        int32_t pi = tr_comm_lookup(comm);
        tr_comm *p = tr_comm_at(pi);
        /* every member counts the split, NOCOLOR ones too, so all agree */
        uint64_t split_no = p ? atomic_fetch_add(&p->splits, 1) + 1 : 0;
        if (color != NCCL_SPLIT_NOCOLOR) {
            uint64_t id = tr_mix64(tr_mix64(tr_mix64(5, p ? p->id : 0), split_no), (uint64_t)(uint32_t)color);
            int dev = p ? atomic_load(&p->device) : -1;
            comm_init in = {.kind = TR_KIND_SPLIT, .id = id, .parent = pi, .size = -1, .rank = -1,
                            .device = dev >= 0 ? dev : tr_cuda_device(),
                            .blocking = config_blocking(config, p ? p->blocking : -1),
                            .has_color = 1, .color = color, .key = key, .enter = t, .stack = st};
            ci = comm_add(&in);
        }
    }
    ncclResult_t r = real(comm, color, key, newcomm, config);
    if (rec) comm_init_done(ci, r, newcomm);
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
        uint64_t t = tr_now_ns();
        int32_t st = tr_stack_capture();
        int32_t pi = tr_comm_lookup(comm);
        tr_comm *p = tr_comm_at(pi);
        uint64_t split_no = p ? atomic_fetch_add(&p->splits, 1) + 1 : 0;
        uint64_t id = tr_mix64(tr_mix64(6, p ? p->id : 0), split_no);
        int n = excludeRanksList && excludeRanksCount > 0 ? excludeRanksCount : 0;
        int *sorted = n ? malloc((size_t)n * sizeof *sorted) : NULL;
        int size = -1, rank = -1, distinct = 0, below = 0, excluded = 0, listed = !n || sorted;
        if (sorted) {
            memcpy(sorted, excludeRanksList, (size_t)n * sizeof *sorted);
            qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
        }
        int prank = p ? atomic_load(&p->rank) : -1, psize = p ? atomic_load(&p->size) : -1;
        for (int i = 0; i < n && sorted; i++) {
            if (i > 0 && sorted[i] == sorted[i - 1]) continue;
            id = tr_mix64(id, (uint64_t)(uint32_t)sorted[i]);
            distinct++;
            if (sorted[i] < prank) below++;
            if (sorted[i] == prank) excluded = 1;
        }
        id = tr_mix64(id, (uint64_t)distinct);
        free(sorted);
        if (psize > 0 && prank >= 0 && !excluded && listed) {
            size = psize - distinct;
            rank = prank - below;
        }
        int dev = p ? atomic_load(&p->device) : -1;
        comm_init in = {.kind = TR_KIND_SHRINK, .id = id, .parent = pi, .size = size, .rank = rank,
                        .device = dev >= 0 ? dev : tr_cuda_device(),
                        .blocking = config_blocking(config, p ? p->blocking : -1), .enter = t, .stack = st};
        ci = comm_add(&in);
    }
    ncclResult_t r = real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    if (rec) comm_init_done(ci, r, newcomm);
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
        comm_init in = {.kind = TR_KIND_GROW, .parent = -1, .size = nRanks, .rank = rank, .enter = t, .stack = st,
                        .grow_uid = uid, .grow_ranks = nRanks};
        if (comm) {
            int32_t pi = tr_comm_lookup(comm);
            tr_comm *p = tr_comm_at(pi);
            uint64_t grow_no = p ? atomic_fetch_add(&p->splits, 1) + 1 : 0;
            int dev = p ? atomic_load(&p->device) : -1;
            in.id = tr_mix64(tr_mix64(7, p ? p->id : 0), grow_no);
            in.parent = pi;
            in.rank = p ? atomic_load(&p->rank) : -1;   /* existing members keep their rank */
            in.device = dev >= 0 ? dev : tr_cuda_device();
            in.blocking = config_blocking(config, p ? p->blocking : -1);
        } else {
            in.id = uid;
            in.device = tr_cuda_device();
            in.blocking = config_blocking(config, -1);
        }
        ci = comm_add(&in);
    }
    ncclResult_t r = real(comm, nRanks, uniqueId, rank, newcomm, config);
    if (rec) comm_init_done(ci, r, newcomm);
    tr_leave();
    return r;
}

/* Suspend / resume (NCCL 2.29): a suspended communicator cannot be used,
 * so its members waiting on nothing there is no hang. */
static void set_suspended(ncclComm_t comm, int suspended, ncclResult_t r)
{
    tr_comm *c = tr_comm_at(tr_comm_lookup(comm));
    if (!c || (r != ncclSuccess && r != ncclInProgress)) return;
    atomic_store(&c->suspended, suspended);
    uint32_t n = suspended ? atomic_fetch_add(&c->suspends, 1) + 1 : atomic_load(&c->suspends);
    if (c->ring) {
        RING_SET(c->ring->suspends, n);
        RING_SET(c->ring->suspended, suspended);
    }
}

TR_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
    typedef ncclResult_t (*fn_t)(ncclComm_t, int);
    TR_REAL(real, fn_t, "ncclCommSuspend", TR_LIB_NCCL);
    if (!real) NO_REAL("ncclCommSuspend");
    int rec = tr_enter();
    ncclResult_t r = real(comm, flags);
    if (rec) set_suspended(comm, 1, r);
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
    if (rec) set_suspended(comm, 0, r);
    tr_leave();
    return r;
}

/* Teardown: the communicator's "end" holds the last lifecycle call. */
static tr_comm *end_begin(ncclComm_t comm, int kind)
{
    tr_comm *c = tr_comm_at(tr_comm_lookup(comm));
    if (!c) return NULL;
    if (kind == TR_END_FINALIZE || kind == TR_END_DESTROY) tr_comm_resolve(c, comm);
    uint64_t t = tr_now_ns();
    atomic_store(&c->end_exit, 0);
    atomic_store(&c->end_rc, 0);
    atomic_store(&c->end_enter, t);
    atomic_store(&c->end_kind, kind);     /* sequentially consistent: tr_nan_comm_ending */
    tr_nan_comm_ending(comm);
    if (c->ring) {
        RING_SET(c->ring->end_exit, 0);
        RING_SET(c->ring->end_rc, 0);
        RING_SET(c->ring->end_enter, t);
        RING_SET(c->ring->end_kind, kind);
    }
    return c;
}

static void end_finish(tr_comm *c, int kind, ncclResult_t r)
{
    if (!c) return;
    uint64_t t = tr_now_ns();
    atomic_store(&c->end_rc, (int)r);
    atomic_store_explicit(&c->end_exit, t, memory_order_release);
    if (c->ring) {
        RING_SET(c->ring->end_rc, (int32_t)r);
        RING_SET(c->ring->end_exit, t);
    }
    if ((kind == TR_END_DESTROY || kind == TR_END_ABORT) && (r == ncclSuccess || r == ncclInProgress))
        atomic_store(&c->dead, 1);
    if (kind == TR_END_DESTROY || kind == TR_END_ABORT) tr_writer_request(TR_WRITE_COMM_END);
}

#define END_WRAPPER(name, kind)                                                      \
    TR_API ncclResult_t name(ncclComm_t comm)                                        \
    {                                                                                \
        typedef ncclResult_t (*fn_t)(ncclComm_t);                                    \
        TR_REAL(real, fn_t, #name, TR_LIB_NCCL);                                     \
        if (!real) NO_REAL(#name);                                                   \
        tr_comm *c = tr_enter() ? end_begin(comm, kind) : NULL;                      \
        ncclResult_t r = real(comm);                                                 \
        end_finish(c, kind, r);                                                      \
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
    end_finish(c, TR_END_REVOKE, r);
    tr_leave();
    return r;
}

/* ---- ranks of the process --------------------------------------------------------- */

typedef struct { uint64_t id; int device; } id_dev;

static int cmp_id_dev(const void *a, const void *b)
{
    const id_dev *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return (x->device > y->device) - (x->device < y->device);
}

/* A communicator whose init failed is no communicator of the rank. */
static int comm_counts(tr_comm *c)
{
    if (!atomic_load_explicit(&c->init_done, memory_order_acquire)) return 1;
    int rc = atomic_load(&c->init_rc);
    return rc == ncclSuccess || rc == ncclInProgress;
}

int tr_nccl_ranks(tr_rank_view *out, int max)
{
    int n = tr_comm_count(), multi = 0, first = -1;
    id_dev *pairs = n ? malloc((size_t)n * sizeof *pairs) : NULL;
    int np = 0;
    for (int i = 0; i < n; i++) {
        tr_comm *c = tr_comm_at(i);
        if (!c || !comm_counts(c)) continue;
        int d = atomic_load(&c->device);
        if (first < 0 && d >= 0) first = i;
        if (pairs && d >= 0) pairs[np++] = (id_dev){c->id, d};
    }
    if (pairs) {
        qsort(pairs, (size_t)np, sizeof *pairs, cmp_id_dev);
        for (int i = 1; i < np && !multi; i++)
            multi = pairs[i].id == pairs[i - 1].id && pairs[i].device != pairs[i - 1].device;
        free(pairs);
    }
    const tr_process *proc = tr_proc();
    if (!multi || max < 2) {
        tr_rank_view v = {.device = -1, .rank = -1, .rank_source = "none", .trace_device = -1};
        tr_comm *c = tr_comm_at(first);
        if (c) v.trace_device = atomic_load(&c->device);
        if (proc->env_rank >= 0) {
            v.rank = proc->env_rank;
            v.rank_source = proc->env_rank_source;
        } else {
            for (int i = 0; i < n; i++) {
                tr_comm *k = tr_comm_at(i);
                if (k && comm_counts(k) && atomic_load(&k->rank) >= 0) {
                    v.rank = atomic_load(&k->rank);
                    v.rank_source = "comm";
                    break;
                }
            }
        }
        if (max > 0) out[0] = v;
        return max > 0;
    }
    /* several ranks in this process: one per device, ranked by its first communicator */
    int nv = 0;
    for (int i = 0; i < n; i++) {
        tr_comm *c = tr_comm_at(i);
        int d = c && comm_counts(c) ? atomic_load(&c->device) : -1, seen = 0;
        if (d < 0) continue;
        for (int k = 0; k < nv; k++) seen |= out[k].device == d;
        if (seen || nv == max) continue;
        out[nv++] = (tr_rank_view){.device = d, .rank = atomic_load(&c->rank), .rank_source = "comm",
                                   .trace_device = d};
    }
    /* in device order */
    for (int i = 1; i < nv; i++)
        for (int k = i; k > 0 && out[k].device < out[k - 1].device; k--) {
            tr_rank_view t = out[k];
            out[k] = out[k - 1];
            out[k - 1] = t;
        }
    return nv;
}

