/* The accounting state of the memory wrappers (tr_memory_int.h): per-device
 * counters and peaks, pinned host memory, the failures kept. The wrappers
 * (tr_memory.c) count into it, the live-allocation table (tr_memtable.c)
 * uncounts the stale entries it finds (mt_uncount), tr_memjson.c writes it
 * into the trace. */
#include <stdatomic.h>
#include <stdint.h>

#include "tr_memory_int.h"

mt_device mt_devs[MT_MAX_DEVICES];
mt_counters mt_pinned_all __attribute__((aligned(64)));
mt_counters mt_pinned_dev[MT_MAX_DEVICES];   /* by the device current at the allocation */
_Atomic uint64_t mt_failures_nodev;          /* failures whose device is unknown */

mt_fail_slot mt_fail_slots[MT_FAIL_HEAD + MT_FAIL_TAIL];
_Atomic uint64_t mt_fail_count;
