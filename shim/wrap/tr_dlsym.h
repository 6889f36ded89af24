/* Lookups that bypass the symbol table (tr_dlsym.c, tr_entry.c): the
 * shim's dlsym/dlvsym and the CUDA entry-point lookups hand out the shim's
 * wrapper where the application would get a function the shim wraps (the
 * real dlsym for the shim's own lookups: tr_dlreal.h, in base/). Private to
 * wrap/. */
#ifndef TR_DLSYM_H
#define TR_DLSYM_H

#include <link.h>

#include "tr_core.h"

/* Whether a lookup made from code at caller may be handed wrappers: the
 * shim is enabled (TRSHIM is not 0), this thread is in no wrapped call, and
 * caller is not in the shim nor in a CUDA/NCCL library (those libraries
 * find their own functions this way; their internal calls are not the
 * application's). */
int tr_lookup_may_wrap(const void *caller);

/* The shim's wrapper of name when the lookup found p and calling the
 * wrapper is calling p: name is exported by the shim, p lies in a library
 * of name's family, and p is the very function the wrapper forwards to.
 * NULL otherwise; with warn, p in a library of the family that is not the
 * one the wrapper forwards to (a second copy of the library) gives one
 * "trshim:" line. Leaves dlerror() clear. */
void *tr_lookup_wrapper(const char *name, void *p, int warn);

/* The shim's own definition of name (its export), NULL if it has none. */
void *tr_self_func(const char *name);

#endif
