/* Lookups that bypass the symbol table (tr_dlsym.c, tr_entry.c): the
 * shim's dlsym/dlvsym and the CUDA entry-point lookups hand out the shim's
 * wrapper where the application would get a function the shim wraps, and
 * the real dlsym for the shim's own lookups. */
#ifndef TR_DLSYM_H
#define TR_DLSYM_H

#include <link.h>

#include "tr_core.h"

typedef void *(*tr_dlsym_fn)(void *, const char *);
typedef void *(*tr_dlvsym_fn)(void *, const char *, const char *);

/* The real dlsym and dlvsym: the next definitions after the shim (glibc's,
 * or another interposer's), never the shim's own. Every dlsym of the shim
 * goes through these. Found without dlsym and without a lock, so callable
 * at any time (constructors before the shim's, several threads at once);
 * NULL only when the C library has none. */
tr_dlsym_fn tr_dlsym_real(void);
tr_dlvsym_fn tr_dlvsym_real(void);

/* The link map of the object containing addr (dladdr1), NULL if none. */
struct link_map *tr_map_of(const void *addr);
/* The shim's own link map. */
struct link_map *tr_self_map(void);

/* Bit (1u << TR_LIB_...) of each family the object belongs to: its soname
 * is one of the family's (tr_real.c), or it defines the family's version
 * query itself (ncclGetVersion, cudaRuntimeGetVersion, cuDriverGetVersion:
 * NCCL or the CUDA runtime under another name, a simulator, a bundle).
 * 0 for the shim. tr_real.c. */
unsigned tr_lib_families(const struct link_map *lm);

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
