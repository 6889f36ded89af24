/* The ring header's memory mirror against the trace's "memory" object
 * (unit_mirror.c), for unit_memory.c. Each returns the failed checks
 * (printed). */
#ifndef SHIM_MEM_UNIT_MIRROR_H
#define SHIM_MEM_UNIT_MIRROR_H

#include <cjson/cJSON.h>
#include <stdint.h>

/* m: the "memory" object of the view of device view (-1: all): every
 * device it lists has its header slot, with its exact counters */
int mirror_check(const cJSON *m, int view);
/* device's slot counted failures failures (pinned host memory's not), the
 * first of them the JSON failure first */
int mirror_check_failure(int device, uint64_t failures, const cJSON *first);
/* no slot was claimed (nothing counted) */
int mirror_check_unused(void);

#endif
