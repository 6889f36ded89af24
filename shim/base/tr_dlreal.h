/* The real dlsym and dlvsym, the link maps of loaded objects
 * (tr_dlreal.c) and the library families an object belongs to (tr_real.c):
 * how the shim finds what it forwards to without going through its own
 * lookups. Part of base's boundary: included through tr_core.h. */
#ifndef TR_DLREAL_H
#define TR_DLREAL_H

#include <link.h>

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

#endif
