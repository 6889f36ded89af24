/* The NCCL state the wrappers keep (tr_nccl.c, tr_lifecycle.c) and the
 * writer reads: the table of every communicator this process created (ids
 * identical on every member rank, parents, sizes, ranks, devices, init and
 * teardown times), the handle map, the groups of each thread, the last
 * collective of each device, and the ranks of the process. The "comms" part
 * of a trace is tr_comm_json.c's.
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

#include "tr_envsnap.h"
#include "tr_sysinfo.h"
#include "tr_nccl_int.h"

static _Atomic(tr_comm *) g_comms[TR_MAX_COMMS];
static atomic_int g_ncomms;             /* slots reserved (a slot may still be NULL) */
static _Atomic uint64_t g_first_uid_comm;

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

/* groups: this thread's nesting and its current outermost group (tr_nccl_int.h) */
__thread int tr_t_gdepth __attribute__((tls_model("initial-exec")));
__thread uint32_t tr_t_gnum __attribute__((tls_model("initial-exec")));
static atomic_uint g_groups;          /* outermost groups numbered */

/* the last collective of each device: (comm index + 1) << 40 | seq; [0]: any device */
_Atomic uint64_t tr_g_last[TR_LAST_DEVICES + 1];

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

static void note_uid_comm(uint64_t id)
{
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&g_first_uid_comm, &zero, id);
}

int32_t tr_comm_add(const tr_comm_init *in)
{
    if (in->from_uid) note_uid_comm(in->id);
    tr_nccl_library_info(1);          /* the library's exports, once */
    tr_env_capture(in->id);           /* what NCCL reads now */
    if (in->device >= 0) tr_sysinfo_note_device(in->device);
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

void tr_comm_init_done(int32_t idx, ncclResult_t r, ncclComm_t *out)
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

/* ---- groups ---------------------------------------------------------------------- */

uint32_t tr_group_count(void) { return atomic_load(&g_groups); }

void tr_group_start(void)
{
    if (tr_t_gdepth == 0) tr_t_gnum = atomic_fetch_add(&g_groups, 1) + 1;
    tr_t_gdepth++;
}

/* comms created in the group can now be asked for their size */
static void comm_group_ended(ncclResult_t r)
{
    for (int i = 0; i < t_npending; i++) {
        tr_comm *c = tr_comm_at(t_pending[i]);
        if (!c || r != ncclSuccess || !c->blocking) continue;
        tr_comm_resolve(c, (ncclComm_t)atomic_load(&c->handle));
    }
    t_npending = 0;
}

void tr_group_ended(ncclResult_t r)
{
    if (tr_t_gdepth > 0 && --tr_t_gdepth == 0) {
        comm_group_ended(r);
        tr_t_gnum = 0;
    }
}

/* ---- per-peer numbers ---------------------------------------------------------------- */

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

/* splitmix64's finalizer (the fingerprint's mixing function) */
static inline uint64_t fp_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Collective number s of communicator c enters its fingerprint (see
 * docs/trace-format.md, "Fingerprints"): a few multiplies per collective,
 * stored into its ring slot, which only this call's thread writes (NCCL
 * calls on one communicator are serialized by the application). Each
 * store is ordered so that a process killed at any instant leaves either
 * the old or the new value: fp_seq is 0 while fp_hash changes, and the
 * checkpoint count is 0 while checkpoints move. */
void tr_comm_fp_note(tr_comm *c, uint64_t s, int op_, int32_t dtype, int redop, int root_, uint64_t count)
{
    trr_comm *k = c->ring;
    if (!k) return;
    uint64_t op = op_ == OP_BCAST ? OP_BROADCAST : (uint64_t)op_;
    uint64_t redop_class = redop == NONE ? 6 : redop >= 0 && redop < 5 ? (uint64_t)redop : 5;
    uint64_t root = root_ == NONE ? 0 : (uint64_t)(uint32_t)(root_ + 1);
    uint64_t sig = op | (uint64_t)(uint32_t)dtype << 8 | redop_class << 16 | root << 32;
    uint64_t h = fp_mix(k->fp_hash ^ fp_mix(sig ^ fp_mix(count)));
    __atomic_store_n(&k->fp_seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&k->fp_hash, h, __ATOMIC_RELEASE);
    __atomic_store_n(&k->fp_seq, s, __ATOMIC_RELEASE);
    __atomic_store_n(&k->colls, s, __ATOMIC_RELEASE);
    uint32_t step = k->fp_step;
    if (s & (step - 1)) return;
    uint32_t n = k->ncheckpoints;
    if (n >= TRR_COMM_CHECKPOINTS) {
        /* full: keep every second one (those at multiples of 2 * step) */
        __atomic_store_n(&k->ncheckpoints, 0, __ATOMIC_RELEASE);
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++)
            if ((k->checkpoints[i].seq & (2 * (uint64_t)step - 1)) == 0) k->checkpoints[m++] = k->checkpoints[i];
        step *= 2;
        __atomic_store_n(&k->fp_step, step, __ATOMIC_RELEASE);
        n = m;
        __atomic_store_n(&k->ncheckpoints, n, __ATOMIC_RELEASE);
        if (s & (step - 1)) return;
    }
    k->checkpoints[n].seq = s;
    k->checkpoints[n].hash = h;
    __atomic_store_n(&k->ncheckpoints, n + 1, __ATOMIC_RELEASE);
}

uint64_t tr_nccl_first_comm_id(void) { return atomic_load(&g_first_uid_comm); }

/* ---- the last collective of each device --------------------------------------------- */

int tr_nccl_last_collective(int device, uint64_t *comm_id, uint64_t *seq)
{
    int slot = device >= 0 && device < TR_LAST_DEVICES ? device + 1 : 0;
    uint64_t v = atomic_load_explicit(&tr_g_last[slot], memory_order_acquire);
    tr_comm *c = v ? tr_comm_at((int32_t)(v >> 40) - 1) : NULL;
    if (!c) return 0;
    *comm_id = c->id;
    *seq = v & TR_LAST_SEQ_MASK;
    return 1;
}

/* ---- suspend, resume, teardown ------------------------------------------------------ */

void tr_comm_suspended(ncclComm_t comm, int suspended, ncclResult_t r)
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

/* Teardown: the communicator's "end" holds the last lifecycle call. */
tr_comm *tr_comm_end_begin(ncclComm_t comm, int kind)
{
    tr_comm *c = tr_comm_at(tr_comm_lookup(comm));
    if (!c) return NULL;
    if (kind == TR_END_FINALIZE || kind == TR_END_DESTROY) tr_comm_resolve(c, comm);
    uint64_t t = tr_now_ns();
    atomic_store(&c->end_exit, 0);
    atomic_store(&c->end_rc, 0);
    atomic_store(&c->end_enter, t);
    atomic_store(&c->end_kind, kind);     /* sequentially consistent: tr_nan_comm_ending */
    if (c->ring) {
        RING_SET(c->ring->end_exit, 0);
        RING_SET(c->ring->end_rc, 0);
        RING_SET(c->ring->end_enter, t);
        RING_SET(c->ring->end_kind, kind);
    }
    return c;
}

void tr_comm_end_finish(tr_comm *c, int kind, ncclResult_t r)
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
    if (kind == TR_END_DESTROY || kind == TR_END_ABORT) tr_write_request(TR_WRITE_COMM_END);
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

