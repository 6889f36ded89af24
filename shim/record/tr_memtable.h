/* The live-allocation table of the memory accounting, and the spin locks it
 * shares with it. Shared by tr_memory.c (wrappers, counters), tr_memjson.c
 * (the locks, for the trace) and tr_memtable.c (the table); not used
 * elsewhere. Part of record/'s boundary: included through tr_record.h. */
#ifndef TR_MEMTABLE_H
#define TR_MEMTABLE_H

#include <stdatomic.h>
#include <stdint.h>

/* ---- spin locks -------------------------------------------------------------
 * Held for a few stores (or one shard's rehash). Uncontended: one exchange
 * and one release store. Contended: spin briefly, then yield the CPU. */

void mt_lock_slow(atomic_int *l);

static inline void mt_lock(atomic_int *l)
{
    if (atomic_exchange_explicit(l, 1, memory_order_acquire))
        mt_lock_slow(l);
}

static inline void mt_unlock(atomic_int *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}

/* For the trace writer: a holder may be a thread stopped in a signal handler
 * that waits for this very write, so give up after a while (~10 ms) and read
 * without the lock. Returns 1 if the lock was taken. */
int mt_lock_bounded(atomic_int *l);

/* ---- the live-allocation table ------------------------------------------- */

enum { MT_DEVICE = 0, MT_MANAGED, MT_PINNED, MT_VMM };

typedef struct {
    uintptr_t key;             /* pointer or cuMemCreate handle; 0: empty slot */
    uint64_t size;             /* bytes accounted */
    int32_t device;            /* device, or for pinned memory the current device (-1 unknown) */
    uint32_t kind;             /* MT_* */
} mt_slot;

#define MT_SHARD_BITS 6
#define MT_SHARDS (1u << MT_SHARD_BITS)

typedef struct {
    atomic_int lock;
    uint32_t count;
    uint32_t mask;             /* slots - 1 (valid when slots != NULL) */
    uint32_t gen;              /* grows each time the shard is rehashed */
    mt_slot *slots;
} __attribute__((aligned(64))) mt_shard;

typedef struct {
    mt_shard shard[MT_SHARDS];
} mt_table;

extern mt_table mt_live_ptrs;     /* device, managed and pinned pointers */
extern mt_table mt_live_handles;  /* cuMemCreate handles */

/* Inserts v. Returns 0 (new key), 1 (the key was there: its entry is
 * replaced and returned in *old), -1 (no memory: not inserted). */
int mt_put(mt_table *t, const mt_slot *v, mt_slot *old);
/* Removes key; returns 1 and its entry in *out, or 0 when absent. */
int mt_take(mt_table *t, uintptr_t key, mt_slot *out);

/* Enters a new allocation of the application (or one put back after a
 * failed free); returns 0 when it cannot be tracked. */
int mt_insert(mt_table *t, const mt_slot *v);
/* Free, part 1 (before the real call): takes key's entry out of the tables,
 * so that an allocation returning the same address on another thread right
 * after the real free cannot be mistaken for it. Returns 1 if it was there. */
int mt_free_begin(mt_table *t, uintptr_t key, mt_slot *e);

/* Entries that leave the table are uncounted by mt_uncount (tr_memory_int.h). */

#endif
