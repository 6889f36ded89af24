/* Activation, for the wrappers (tr_init.c). wrap/ only: the folders below
 * it (tr_core.h's folders) never activate the shim nor call tr_enter;
 * the shim's own threads use tr_nest. */
#ifndef TR_INIT_H
#define TR_INIT_H

#include "tr_core.h"

/* Starts what recording needs on the first recorded event: the trace
 * folder, the ring file, the Python interpreter's offsets, the completion
 * poller, the writer thread and its signal handlers, the exit handler.
 * Once; the other threads wait until it is done. A process that never calls
 * CUDA or NCCL never gets here. */
void tr_activate(void);

/* Every wrapper starts with tr_enter() and ends with tr_leave(): 1 when the
 * call must be recorded (tr_nest), the shim activated by then. */
static inline int tr_enter(void)
{
    int r = tr_nest();
    if (__builtin_expect(r == 2, 0)) tr_activate();
    return r != 0;
}

#endif
