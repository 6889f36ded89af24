/* Stand-ins for the shim's internal interfaces that tr_memory.c calls
 * (tr_core.h), for unit tests that link tr_memory.c without the rest of the
 * shim. The "real" functions are the next definitions (libtrsim.so linked
 * into the test), or, with standin_fake_real, trivial fakes for timing. */
#ifndef SHIM_MEM_STANDINS_H
#define SHIM_MEM_STANDINS_H

#include <stdatomic.h>
#include <stdint.h>

/* Calls into tr_stack_capture / tr_activate / tr_warn so far. */
extern atomic_int standin_captures, standin_activations, standin_warnings;
/* tr_enter returns 0 while set (TRSHIM=0). */
extern int standin_disabled;
/* Pretend this thread is inside a wrapped call (tr_enter returns 0). */
void standin_depth_push(void);
void standin_depth_pop(void);
/* Stack index the next captures on this thread return (-2: a fresh number
 * per capture, counting from 1000). */
void standin_set_stack(int32_t index);
/* What tr_nccl_last_collective answers for device (has 0: no collective). */
void standin_set_collective(int device, int has, uint64_t comm, uint64_t seq);
/* Fake real functions: cudaMalloc hands out addresses from a counter. */
extern int standin_fake_real;
/* The fake cudaFree hands its address back to the next fake cudaMalloc. */
extern int standin_fake_reuse;
/* The ring header (tr_ring_header) is a zeroed one in memory: the memory
 * wrappers mirror their counters into its mem[] (tr_ring_live.c). */

/* The real function of libtrsim, bypassing the wrappers. */
void *standin_next(const char *name);

#endif
