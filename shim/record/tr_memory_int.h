/* The accounting state of the memory wrappers: per-device counters and
 * peaks, pinned host memory, the failures kept. Defined by tr_memcount.c;
 * shared by tr_memory.c (the wrappers, which count), tr_memtable.c (which
 * uncounts stale entries: mt_uncount) and tr_memjson.c (the trace's
 * "memory" member, which reads it); not used elsewhere. The live-allocation
 * table and the spin locks are tr_memtable.h's.
 *
 * A device's counters live in the ring header's slot of that device
 * (tr_ring_mem: trr_mem's live, peak, allocs, frees, the same layout as
 * mt_counters), so that a killed or running rank's ring says its memory at
 * no cost beyond the count itself; mt_devs[d].c holds them only for a
 * device without a slot (no ring, more than TRR_MEM_DEVICES devices). The
 * choice is made once per device, before its first count. Pinned host
 * memory is not device memory and stays here. Part of record/'s boundary:
 * included through tr_record.h. */
#ifndef TR_MEMORY_INT_H
#define TR_MEMORY_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tr_memtable.h"
#include "tr_ring.h"

#define MT_MAX_DEVICES 64          /* devices 0..63 are accounted */
#define MT_FAIL_HEAD 500           /* failures kept: the first ones ... */
#define MT_FAIL_TAIL 500           /* ... and the most recent ones */

/* ---- counters -------------------------------------------------------------- */

typedef struct {
    _Atomic uint64_t live, peak, allocs, frees;
} mt_counters;

typedef struct {
    mt_counters c;                     /* a device without a ring header slot only: mt_dev_counters */
    _Atomic uint64_t failures;         /* failed allocations recorded on this device */
    /* The peak's circumstances, consistent with each other (plock). */
    atomic_int plock;
    uint64_t p_bytes, p_ns, p_comm, p_seq;
    int32_t p_stack, p_pystack;
    int p_has_coll;
} __attribute__((aligned(64))) mt_device;

extern mt_device mt_devs[MT_MAX_DEVICES];

extern mt_counters mt_pinned_all;
extern mt_counters mt_pinned_dev[MT_MAX_DEVICES];   /* by the device current at the allocation */
extern _Atomic uint64_t mt_failures_nodev;          /* failures whose device is unknown */

static inline int mt_device_ok(int device)
{
    return device >= 0 && device < MT_MAX_DEVICES;
}

_Static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t) && sizeof(mt_counters) == 4 * sizeof(uint64_t) &&
                   offsetof(trr_mem, peak) == offsetof(trr_mem, live) + offsetof(mt_counters, peak) &&
                   offsetof(trr_mem, allocs) == offsetof(trr_mem, live) + offsetof(mt_counters, allocs) &&
                   offsetof(trr_mem, frees) == offsetof(trr_mem, live) + offsetof(mt_counters, frees),
               "a ring header memory slot holds mt_counters");

/* The counters of device memory on device (mt_device_ok): its ring header
 * slot's, claimed on the first call (an allocation's or a failure's), else
 * mt_devs[device].c. */
static inline mt_counters *mt_dev_counters(int device)
{
    trr_mem *m = tr_ring_mem(device);
    /* the mask changes no valid device: it tells the compiler the index is in range */
    return m ? (mt_counters *)(void *)&m->live : &mt_devs[(unsigned)device % MT_MAX_DEVICES].c;
}

/* The same without claiming a slot (the trace writer's view of every device). */
static inline mt_counters *mt_dev_counters_peek(int device)
{
    trr_mem *m = tr_ring_mem_peek(device);
    return m ? (mt_counters *)(void *)&m->live : &mt_devs[(unsigned)device % MT_MAX_DEVICES].c;
}

/* Subtracts an entry that left the live-allocation table (freed, or
 * replaced as stale): tr_memory.c's frees, tr_memtable.c's stale entries.
 * Inline: every free. */
static inline void mt_uncount(const mt_slot *e, int is_free)
{
    mt_counters *c[2] = {NULL, NULL};
    if (e->kind == MT_PINNED) {
        c[0] = &mt_pinned_all;
        if (mt_device_ok(e->device))
            c[1] = &mt_pinned_dev[e->device];
    } else {
        c[0] = mt_dev_counters(e->device);  /* device entries always have a valid device */
    }
    for (int k = 0; k < 2; k++) {
        if (!c[k])
            continue;
        atomic_fetch_sub_explicit(&c[k]->live, e->size, memory_order_relaxed);
        if (is_free)
            atomic_fetch_add_explicit(&c[k]->frees, 1, memory_order_relaxed);
    }
}

/* ---- failures -------------------------------------------------------------- */

/* A failed allocation, as the trace lists it. */
typedef struct {
    const char *api;
    int device;                /* -1 unknown */
    int pinned;                /* pinned host memory (not mirrored into the ring's device memory) */
    uint64_t bytes, live;
    int has_info;
    uint64_t free_bytes, total_bytes;
    char error[64];
    int code;
    uint64_t t_ns;
    int32_t stack, pystack;
} mt_failure;

typedef struct {
    atomic_int lock;
    uint64_t number;           /* 1 + the failure's index; 0: empty */
    mt_failure f;
} mt_fail_slot;

/* Failure n (0-based) is kept in slot n while n < MT_FAIL_HEAD, then in a
 * ring of MT_FAIL_TAIL slots (the most recent ones). */
extern mt_fail_slot mt_fail_slots[MT_FAIL_HEAD + MT_FAIL_TAIL];
extern _Atomic uint64_t mt_fail_count;              /* failures recorded */

#endif
