/* Call stacks: stacks/'s boundary, the one header of the folder a file
 * outside it includes. Native stacks (tr_stack.c: capture, the per-thread
 * cache, the stacks table; tr_symbols.c: symbols and the trace's "modules"
 * and "stacks"), the rank's crash (tr_crash.h) and Python stacks
 * (python/tr_python.h, that folder's boundary). */
#ifndef TR_STACKS_H
#define TR_STACKS_H

#include <stdint.h>

#include "tr_core.h"
#include "tr_symbols.h"
#include "tr_crash.h"
#include "tr_python.h"

/* ---- stacks (tr_stack.c) --------------------------------------------------- */

#define TR_STACK_MAX_DEPTH 256       /* frames kept at most (TRSHIM_STACK_DEPTH is clamped) */
#define TR_STACK_MAX_STACKS 65536    /* distinct stacks kept; beyond that captures give -1 */

/* Captures the calling thread's stack, starting at the application's frame
 * that called the wrapper: the wrapper must call tr_stack_capture directly
 * (it is noinline and finds the wrapper as its caller's frame, which needs
 * the shim's -fno-omit-frame-pointer). Keeps up to tr_cfg()->stack_depth
 * frames, innermost first. Returns a dense index >= 0 into the stacks table,
 * the same for the same stack (content), or -1 (stacks disabled, table full,
 * no memory). A stack seen before at the same call site costs ~1 load per
 * frame, without lock; a new one a full unwind (~150 ns per frame) and a
 * mutex. TRSHIM_STACK_CACHE=0 unwinds every time. Not async-signal-safe. */
int32_t tr_stack_capture(void);
/* The same from a helper the wrapper calls: skip = shim frames between the
 * wrapper and the caller of tr_stack_capture_skip (1: called by a function
 * the wrapper called). tr_stack_capture() == tr_stack_capture_skip(0) when
 * called from the same place. */
int32_t tr_stack_capture_skip(int skip);
/* The stack ip[0..n) (innermost first) interned as if captured (tr_crash.c,
 * from the writer thread: the crash stack the signal handler kept): its
 * index, or -1. Not async-signal-safe. */
int32_t tr_stack_intern(const uintptr_t *ip, uint32_t n);
/* Writes "modules": [...], "stacks": [...] members into the open top-level
 * object: every stack captured so far (indexes are process-wide, so every
 * rank of a process may share them), modules those stacks reference.
 * Symbolization happens here, in the writer, not at capture. */
void tr_stack_write_json(tr_json *j);

/* Counters, for tests and benchmarks. */
typedef struct {
    uint64_t hits, misses, uncacheable;   /* this thread's captures */
    uintptr_t last_ra, last_sp;           /* key of its last capture */
} tr_stack_thread_stats;
void tr_stack_get_thread_stats(tr_stack_thread_stats *out);
typedef struct {
    uint64_t stacks;        /* distinct stacks */
    uint64_t dropped;       /* unwound stacks refused: table full (seen again, from the cache: not counted) */
    uint64_t unwind_failed; /* captures whose frames the unwinder could not follow */
    uint64_t uncacheable;   /* misses whose stack cannot be cached (re-unwound each time) */
} tr_stack_stats;
void tr_stack_get_stats(tr_stack_stats *out);

#endif
