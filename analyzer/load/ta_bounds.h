/* What the input can describe (load_bounds.c): the places the analysis
 * makes for the communicators the traces claim, bounded by the input's
 * real size.
 * (Private to load/: its boundary header is ta_load.h.) */
#ifndef TA_BOUNDS_H
#define TA_BOUNDS_H

#include "model/ta_model.h"

/* Every communicator of the job's placed traces (a->tr) costs the analysis
 * a table of its places (its size, a member's rank + 1, a grow's size):
 * all of them together get at most TA_PLACES_FLOOR plus TA_PLACES_PER_BYTE
 * per byte of the input's files (allocated bytes for a sparse file). The
 * communicators most traces share, then the smallest, come first; a trace
 * holding one that does not fit is not used (a note names the file, the
 * communicator and its claim), and a->tr is compacted. */
#define TA_PLACES_FLOOR (1ll << 22)
#define TA_PLACES_PER_BYTE 2
void ta_places_bound(ta_an *a);

#endif
