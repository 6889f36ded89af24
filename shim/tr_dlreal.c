/* The real dlsym and dlvsym, and the link maps of addresses (tr_dlsym.h).
 *
 * Finding the real dlsym cannot use dlsym, nor dlvsym (the shim exports
 * both: a call from the shim would come back to itself). real_init() reads
 * dlvsym and dlsym from the dynamic symbol table of the C library in memory
 * (tr_dynsym.c: libc.so.6 since glibc 2.34, libdl.so.2 before), then asks
 * that dlvsym for the next definitions after the shim, dlvsym(RTLD_NEXT,
 * "dlsym", "GLIBC_2.34"), then the architecture's first glibc version
 * (GLIBC_2.2.5 on x86-64, GLIBC_2.17 on aarch64), so another interposer
 * loaded after the shim keeps its place in the chain. No lock is taken:
 * threads that race through the first lookup each find the same functions
 * and store them atomically; a constructor that runs before the shim's own
 * (the shim needs no initialisation for this) or while another thread is
 * inside dlopen() cannot wait on the shim.
 *
 * Linked alone (with tr_dynsym.c) into a program, "the shim" is that
 * program. */
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tr_dlsym.h"
#include "tr_dynsym.h"

#if defined(__x86_64__)
#define TR_GLIBC_FIRST "GLIBC_2.2.5"
#elif defined(__aarch64__) || defined(__powerpc64__)
#define TR_GLIBC_FIRST "GLIBC_2.17"
#elif defined(__i386__)
#define TR_GLIBC_FIRST "GLIBC_2.0"
#else
#define TR_GLIBC_FIRST NULL
#endif

static _Atomic(tr_dlsym_fn) g_dlsym;
static _Atomic(tr_dlvsym_fn) g_dlvsym;
static _Atomic(struct link_map *) g_self;

struct link_map *tr_map_of(const void *addr)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!addr || !dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP)) return NULL;
    return lm;
}

struct link_map *tr_self_map(void)
{
    struct link_map *lm = atomic_load_explicit(&g_self, memory_order_acquire);
    if (!lm) {
        lm = tr_map_of((const void *)&tr_self_map);
        if (lm) atomic_store_explicit(&g_self, lm, memory_order_release);
    }
    return lm;
}

struct libc_syms {
    uintptr_t self_base;
    void *dlsym, *dlvsym;
};

/* The C library's own definitions (read from memory: dl_iterate_phdr's
 * callback must not call the dynamic linker). */
static int libc_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct libc_syms *s = data;
    tr_dyn d;
    (void)size;
    if (!info->dlpi_name || (uintptr_t)info->dlpi_addr == s->self_base) return 0;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libc.so", 7) != 0 && strncmp(base, "libdl.so", 8) != 0) return 0;
    if (!tr_dyn_init_phdr(&d, info)) return 0;
    if (!s->dlsym) s->dlsym = tr_dyn_func(&d, "dlsym");
    if (!s->dlvsym) s->dlvsym = tr_dyn_func(&d, "dlvsym");
    return s->dlsym && s->dlvsym;
}

/* glibc 2.34 moved dlsym into libc.so.6 under version GLIBC_2.34; before,
 * only the architecture's first version exists. Asking for the one that
 * exists first leaves no failed lookup behind. */
static int glibc_has_2_34(void)
{
    const char *v = gnu_get_libc_version();
    char *end;
    long major = strtol(v, &end, 10), minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    return major > 2 || (major == 2 && minor >= 34);
}

static void *next_after_shim(tr_dlvsym_fn boot, const char *name)
{
    const char *versions[3] = {"GLIBC_2.34", TR_GLIBC_FIRST, NULL};
    if (!glibc_has_2_34()) {
        versions[0] = TR_GLIBC_FIRST;
        versions[1] = NULL;
    }
    struct link_map *self = tr_self_map();
    for (int i = 0; i < 2 && versions[i]; i++) {
        /* called from here, so RTLD_NEXT means: after the shim */
        void *p = boot(RTLD_NEXT, name, versions[i]);
        if (p && (!self || tr_map_of(p) != self)) return p;
    }
    return NULL;
}

static void real_init(void)
{
    int saved = errno;
    struct link_map *self = tr_self_map();
    struct libc_syms s = {self ? (uintptr_t)self->l_addr : 0, NULL, NULL};
    dl_iterate_phdr(libc_cb, &s);
    tr_dlsym_fn ds = (tr_dlsym_fn)s.dlsym;
    tr_dlvsym_fn dv = (tr_dlvsym_fn)s.dlvsym;
    if (dv) {
        void *next = next_after_shim(dv, "dlsym");
        if (next) ds = (tr_dlsym_fn)next;
        next = next_after_shim(dv, "dlvsym");
        if (next) dv = (tr_dlvsym_fn)next;
        dlerror();     /* a version that did not exist leaves no error behind */
    }
    if (ds) atomic_store_explicit(&g_dlsym, ds, memory_order_release);
    if (dv) atomic_store_explicit(&g_dlvsym, dv, memory_order_release);
    errno = saved;
}

tr_dlsym_fn tr_dlsym_real(void)
{
    tr_dlsym_fn f = atomic_load_explicit(&g_dlsym, memory_order_acquire);
    if (!f) {
        real_init();
        f = atomic_load_explicit(&g_dlsym, memory_order_acquire);
    }
    return f;
}

tr_dlvsym_fn tr_dlvsym_real(void)
{
    tr_dlvsym_fn f = atomic_load_explicit(&g_dlvsym, memory_order_acquire);
    if (!f) {
        real_init();
        f = atomic_load_explicit(&g_dlvsym, memory_order_acquire);
    }
    return f;
}
