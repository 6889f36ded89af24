/* The live-allocation table of the memory accounting (tr_memory.c): every
 * allocation of the application that is live, by pointer or cuMemCreate
 * handle, with the bytes and device it was counted to. See tr_memtable.h for
 * the interface.
 *
 * Cost: the live-allocation table is a hash table split into 64 shards,
 * each an open-addressing (linear probing, backward-shift deletion) table
 * under its own spin lock, grown by doubling one shard at a time; the new
 * array is allocated outside the lock. In front of it, each thread keeps
 * its last 8 allocations in a small ring, so that an allocation freed soon
 * after never touches the big table (whose slots are cache misses once
 * millions of allocations are live), and one kept moves to the table with
 * its slot prefetched. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "tr_core.h"
#include "tr_memory_int.h"
#include "tr_memtable.h"

/* ---- spin locks (tr_memtable.h) --------------------------------------------- */

static inline void mt_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

__attribute__((noinline)) void mt_lock_slow(atomic_int *l)
{
    for (unsigned spins = 0;; spins++) {
        if (!atomic_load_explicit(l, memory_order_relaxed) &&
            !atomic_exchange_explicit(l, 1, memory_order_acquire))
            return;
        if (spins < 100)
            mt_cpu_relax();
        else
            sched_yield();
    }
}

/* For the trace writer: a holder may be a thread stopped in a signal handler
 * that waits for this very write, so give up after a while (~10 ms) and read
 * without the lock. Returns 1 if the lock was taken. */
int mt_lock_bounded(atomic_int *l)
{
    for (unsigned spins = 0; spins < 2000; spins++) {
        if (!atomic_load_explicit(l, memory_order_relaxed) &&
            !atomic_exchange_explicit(l, 1, memory_order_acquire))
            return 1;
        if (spins < 100)
            mt_cpu_relax();
        else
            sched_yield();
    }
    return 0;
}

/* ---- the live-allocation table ------------------------------------------- */

#define MT_INITIAL_SLOTS 64u

mt_table mt_live_ptrs;
mt_table mt_live_handles;

static inline mt_shard *mt_shard_of(mt_table *t, uint64_t h)
{
    return &t->shard[h >> (64 - MT_SHARD_BITS)];
}

/* Places v into slots (mask), which have room and no entry with its key. */
static inline void mt_place(mt_slot *slots, uint32_t mask, const mt_slot *v)
{
    uint32_t i = (uint32_t)tr_fmix64(v->key) & mask;
    while (slots[i].key)
        i = (i + 1) & mask;
    slots[i] = *v;
}

/* Makes room for one more entry; called and returns with the lock held.
 * Returns 0, or -1 when no memory (lock held). */
static int mt_reserve(mt_shard *s)
{
    while (!s->slots || (uint64_t)(s->count + 1) * 2 > (uint64_t)s->mask + 1) {
        uint32_t gen = s->gen;
        uint64_t want = s->slots ? ((uint64_t)s->mask + 1) * 2 : MT_INITIAL_SLOTS;
        if (want > ((uint64_t)1 << 31))
            return -1;
        mt_unlock(&s->lock);
        mt_slot *fresh = calloc((size_t)want, sizeof *fresh);
        mt_lock(&s->lock);
        if (!fresh)
            return -1;
        if (s->gen != gen) {           /* another thread grew it meanwhile */
            mt_unlock(&s->lock);
            free(fresh);
            mt_lock(&s->lock);
            continue;
        }
        mt_slot *old = s->slots;
        uint32_t old_n = old ? s->mask + 1 : 0;
        for (uint32_t i = 0; i < old_n; i++)
            if (old[i].key)
                mt_place(fresh, (uint32_t)(want - 1), &old[i]);
        /* atomic stores: mt_prefetch reads both without the lock */
        __atomic_store_n(&s->slots, fresh, __ATOMIC_RELAXED);
        __atomic_store_n(&s->mask, (uint32_t)(want - 1), __ATOMIC_RELAXED);
        s->gen++;
        if (old) {
            mt_unlock(&s->lock);
            free(old);
            mt_lock(&s->lock);
        }
    }
    return 0;
}

/* Inserts v. Returns 0 (new key), 1 (the key was there: its entry is
 * replaced and returned in *old), -1 (no memory: not inserted). */
int mt_put(mt_table *t, const mt_slot *v, mt_slot *old)
{
    uint64_t h = tr_fmix64(v->key);
    mt_shard *s = mt_shard_of(t, h);
    mt_lock(&s->lock);
    if (mt_reserve(s) != 0) {
        mt_unlock(&s->lock);
        return -1;
    }
    uint32_t i = (uint32_t)h & s->mask;
    for (;; i = (i + 1) & s->mask) {
        if (s->slots[i].key == v->key) {
            *old = s->slots[i];
            s->slots[i] = *v;
            mt_unlock(&s->lock);
            return 1;
        }
        if (!s->slots[i].key)
            break;
    }
    s->slots[i] = *v;
    s->count++;
    mt_unlock(&s->lock);
    return 0;
}

/* Removes key; returns 1 and its entry in *out, or 0 when absent. */
int mt_take(mt_table *t, uintptr_t key, mt_slot *out)
{
    uint64_t h = tr_fmix64(key);
    mt_shard *s = mt_shard_of(t, h);
    mt_lock(&s->lock);
    if (!s->slots) {
        mt_unlock(&s->lock);
        return 0;
    }
    mt_slot *slots = s->slots;
    uint32_t mask = s->mask, i = (uint32_t)h & mask;
    for (;; i = (i + 1) & mask) {
        if (!slots[i].key) {
            mt_unlock(&s->lock);
            return 0;
        }
        if (slots[i].key == key)
            break;
    }
    *out = slots[i];
    /* Backward shift: pull later entries of the run into the hole unless
     * their home slot lies cyclically in (hole, j]. */
    for (uint32_t j = i;;) {
        j = (j + 1) & mask;
        if (!slots[j].key)
            break;
        uint32_t home = (uint32_t)tr_fmix64(slots[j].key) & mask;
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            slots[i] = slots[j];
            i = j;
        }
    }
    slots[i].key = 0;
    s->count--;
    mt_unlock(&s->lock);
    return 1;
}

/* ---- young allocations: a small ring per thread ------------------------------
 * A new pointer goes first into its thread's ring of the last MT_RING
 * allocations, where a free soon after (on any thread) finds it without
 * touching the big table; it moves to the table when MT_RING newer
 * allocations of the thread have pushed it out. The table slot it will go to
 * is prefetched one allocation ahead. So an allocation freed soon costs no
 * cache miss however many others are live, and one kept costs a miss that
 * the CPU overlaps with the application's work. A thread's ring is emptied
 * into the table when the thread ends; rings are reused, never freed. */

#define MT_RING 8

typedef struct mt_ring {
    atomic_int lock;
    atomic_int owned;                  /* a live thread uses it */
    unsigned head;                     /* next slot to fill */
    _Atomic uintptr_t key[MT_RING];    /* 0: empty; read without the lock by other threads */
    mt_slot val[MT_RING];
    struct mt_ring *next;              /* the list of all rings (never unlinked) */
} mt_ring;

static _Atomic(mt_ring *) all_rings;
static pthread_mutex_t rings_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static pthread_key_t ring_key;
static __thread mt_ring *my_ring __attribute__((tls_model("initial-exec")));

/* An entry leaves a ring for the table. A same-key entry there is stale
 * (freed where the shim could not see it): it is replaced and uncounted. */
static void mt_table_put(mt_table *t, const mt_slot *v)
{
    mt_slot old;
    int r = mt_put(t, v, &old);
    if (r == 1) {
        mt_uncount(&old, 0);
    } else if (r < 0) {
        tr_warn("memory: out of host memory for the allocation table; allocations are missed");
        mt_uncount(v, 0);
    }
}

static void mt_ring_exit(void *arg)
{
    mt_ring *r = arg;
    mt_lock(&r->lock);
    for (unsigned i = 0; i < MT_RING; i++) {
        if (atomic_load_explicit(&r->key[i], memory_order_relaxed)) {
            mt_table_put(&mt_live_ptrs, &r->val[i]);
            atomic_store_explicit(&r->key[i], 0, memory_order_release);
        }
    }
    mt_unlock(&r->lock);
    my_ring = NULL;
    atomic_store_explicit(&r->owned, 0, memory_order_release);
}

static void mt_ring_key_init(void)
{
    if (pthread_key_create(&ring_key, mt_ring_exit) != 0)
        tr_warn("memory: no thread-exit hook; allocations of ended threads stay in their rings");
}

static __attribute__((noinline)) mt_ring *mt_ring_new(void)
{
    pthread_once(&ring_once, mt_ring_key_init);
    mt_ring *r = NULL;
    pthread_mutex_lock(&rings_mu);
    for (mt_ring *x = atomic_load_explicit(&all_rings, memory_order_acquire); x; x = x->next) {
        int free_ = 0;
        if (atomic_compare_exchange_strong(&x->owned, &free_, 1)) {
            r = x;
            break;
        }
    }
    if (!r && (r = calloc(1, sizeof *r)) != NULL) {
        atomic_store_explicit(&r->owned, 1, memory_order_relaxed);
        r->next = atomic_load_explicit(&all_rings, memory_order_relaxed);
        atomic_store_explicit(&all_rings, r, memory_order_release);
    }
    pthread_mutex_unlock(&rings_mu);
    if (r) {
        my_ring = r;
        pthread_setspecific(ring_key, r);
    }
    return r;
}

static inline mt_ring *mt_my_ring(void)
{
    mt_ring *r = my_ring;
    return __builtin_expect(r != NULL, 1) ? r : mt_ring_new();
}

/* Prefetches the table slot where key would be looked for. */
static inline void mt_prefetch(mt_table *t, uintptr_t key)
{
    uint64_t h = tr_fmix64(key);
    mt_shard *s = mt_shard_of(t, h);
    mt_slot *slots = __atomic_load_n(&s->slots, __ATOMIC_RELAXED);
    uint32_t mask = __atomic_load_n(&s->mask, __ATOMIC_RELAXED);
    if (slots)   /* a stale array is harmless: prefetches never fault */
        __builtin_prefetch(&slots[(uint32_t)h & mask], 1, 3);
}

static inline void mt_ring_push(mt_ring *r, const mt_slot *v)
{
    mt_lock(&r->lock);
    unsigned i = r->head;
    for (unsigned k = 0; k < MT_RING; k++) {
        if (atomic_load_explicit(&r->key[k], memory_order_relaxed) == v->key) {
            mt_uncount(&r->val[k], 0);           /* stale, as in mt_table_put */
            atomic_store_explicit(&r->key[k], 0, memory_order_relaxed);
        }
    }
    r->head = (i + 1) % MT_RING;
    if (atomic_load_explicit(&r->key[i], memory_order_relaxed))
        mt_table_put(&mt_live_ptrs, &r->val[i]);   /* under the ring lock: never in neither */
    r->val[i] = *v;
    atomic_store_explicit(&r->key[i], v->key, memory_order_release);
    uintptr_t next = atomic_load_explicit(&r->key[r->head], memory_order_relaxed);
    mt_unlock(&r->lock);
    if (next)                                    /* the next one to move to the table */
        mt_prefetch(&mt_live_ptrs, next);
}

static inline int mt_ring_take(mt_ring *r, uintptr_t key, mt_slot *out)
{
    int found = 0;
    mt_lock(&r->lock);
    for (unsigned k = 0; k < MT_RING; k++) {
        if (atomic_load_explicit(&r->key[k], memory_order_relaxed) == key) {
            *out = r->val[k];
            atomic_store_explicit(&r->key[k], 0, memory_order_release);
            found = 1;
            break;
        }
    }
    mt_unlock(&r->lock);
    return found;
}

/* A pointer in neither this thread's ring nor the table: another thread's
 * ring (allocated there, freed here), or unknown. The table is asked again
 * after the rings: an entry moves from a ring to the table under the ring's
 * lock, so it is always in one of them. */
static __attribute__((noinline)) int mt_take_elsewhere(mt_ring *mine, uintptr_t key, mt_slot *e)
{
    for (mt_ring *x = atomic_load_explicit(&all_rings, memory_order_acquire); x; x = x->next) {
        if (x == mine)
            continue;
        for (unsigned k = 0; k < MT_RING; k++) {
            if (atomic_load_explicit(&x->key[k], memory_order_acquire) == key) {
                if (mt_ring_take(x, key, e))
                    return 1;
                break;
            }
        }
    }
    return mt_take(&mt_live_ptrs, key, e);
}

/* Enters a new allocation of the application (or one put back after a
 * failed free); returns 0 when it cannot be tracked. */
int mt_insert(mt_table *t, const mt_slot *v)
{
    mt_ring *r;
    if (t == &mt_live_ptrs && (r = mt_my_ring()) != NULL) {
        mt_ring_push(r, v);
        return 1;
    }
    mt_slot old;
    int rc = mt_put(t, v, &old);
    if (rc < 0) {
        tr_warn("memory: out of host memory for the allocation table; allocations are missed");
        return 0;
    }
    if (rc == 1)                       /* freed where the shim could not see it */
        mt_uncount(&old, 0);
    return 1;
}

/* Free, part 1 (before the real call): takes key's entry out of the tables,
 * so that an allocation returning the same address on another thread right
 * after the real free cannot be mistaken for it. Returns 1 if it was there. */
int mt_free_begin(mt_table *t, uintptr_t key, mt_slot *e)
{
    if (!key)
        return 0;
    if (t != &mt_live_ptrs)
        return mt_take(t, key, e);
    mt_ring *r = mt_my_ring();
    if (r && mt_ring_take(r, key, e))
        return 1;
    if (mt_take(t, key, e))
        return 1;
    return mt_take_elsewhere(r, key, e);
}
