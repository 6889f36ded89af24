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
 * Before the process is initialised: a sanitizer runtime (ASan, TSan,
 * linked in or preloaded after the shim) looks up the functions it
 * intercepts with dlsym(RTLD_NEXT, ...) and dlvsym while it initialises
 * itself, from the program's preinit array: before any constructor, and
 * before its own interceptors of strcmp, strrchr, strtol, memset,
 * dl_iterate_phdr... have found what they forward to (each would jump to
 * address 0). That lookup reaches the shim's dlsym, which needs the real
 * one: so real_init() calls nothing of the C library but the real dlvsym
 * (and dlerror, when a lookup failed) it found itself, through their
 * addresses. The C library is found on the list of loaded objects the
 * dynamic linker keeps (_r_debug: data, read without a call); every object
 * before it is one of the program's initial objects, which are never
 * unloaded, so the walk needs no lock. Names are compared and the shim's
 * own addresses recognised by code of this file; the glibc version comes
 * from the C library's own version definitions (DT_VERDEF). errno is saved
 * and restored (__errno_location: the C library's initial thread-local
 * storage, set up before any code runs; intercepted by no sanitizer).
 *
 * Linked alone (with tr_dynsym.c) into a program, "the shim" is that
 * program. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>

#include "tr_dlreal.h"
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

/* The shim's own dynamic section and ELF header (defined by the linker). */
extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

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

/* ---- the shim's own code only (see above) --------------------------------- */

/* name starts with prefix */
static int has_prefix(const char *name, const char *prefix)
{
    while (*prefix)
        if (*name++ != *prefix++) return 0;
    return 1;
}

static int str_eq(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

/* The file name of path (after its last '/'). */
static const char *base_name(const char *path)
{
    const char *b = path;
    for (; *path; path++)
        if (*path == '/') b = path + 1;
    return b;
}

/* Whether addr lies in one of the shim's loaded segments. */
static int in_self(const void *addr)
{
    const ElfW(Ehdr) *eh = &__ehdr_start;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
    uintptr_t a = (uintptr_t)addr, bias = 0;
    int found = 0;
    for (ElfW(Half) i = 0; i < eh->e_phnum && !found; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
            bias = (uintptr_t)eh - ph[i].p_vaddr;
            found = 1;
        }
    if (!found) return 0;
    for (ElfW(Half) i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && a - (bias + ph[i].p_vaddr) < ph[i].p_memsz) return 1;
    return 0;
}

/* Whether the object of lm defines the symbol version ver (DT_VERDEF). */
static int defines_version(const struct link_map *lm, const char *ver)
{
    uintptr_t base = (uintptr_t)lm->l_addr, verdef = 0, strtab = 0;
    size_t n = 0, strsz = 0;
    for (const ElfW(Dyn) *dyn = lm->l_ld; dyn && dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_VERDEF: verdef = dyn->d_un.d_ptr; break;
        case DT_VERDEFNUM: n = dyn->d_un.d_val; break;
        case DT_STRTAB: strtab = dyn->d_un.d_ptr; break;
        case DT_STRSZ: strsz = dyn->d_un.d_val; break;
        default: break;
        }
    }
    if (!verdef || !strtab) return 0;
    /* address entries: as in tr_dynsym.c, an entry below the bias is an offset */
    if (verdef < base) verdef += base;
    if (strtab < base) strtab += base;
    const char *vd = (const char *)verdef;
    for (size_t i = 0; i < n && i < 4096; i++) {
        const ElfW(Verdef) *d = (const ElfW(Verdef) *)vd;
        if (d->vd_cnt > 0 && !(d->vd_flags & VER_FLG_BASE)) {
            const ElfW(Verdaux) *aux = (const ElfW(Verdaux) *)(vd + d->vd_aux);
            if (aux->vda_name < strsz && str_eq((const char *)strtab + aux->vda_name, ver)) return 1;
        }
        if (!d->vd_next) break;
        vd += d->vd_next;
    }
    return 0;
}

/* The C library's own dlsym, dlvsym and dlerror, read from its dynamic
 * symbols; dlerror is the one of the object that defines dlvsym (libdl.so.2
 * before glibc 2.34), has_2_34 whether that object defines GLIBC_2.34. */
struct libc_syms {
    void *dlsym, *dlvsym, *dlerror;
    int has_2_34;
};

static void find_libc(struct libc_syms *s)
{
    for (const struct link_map *lm = _r_debug.r_map; lm; lm = lm->l_next) {
        if (lm->l_ld == _DYNAMIC || !lm->l_name) continue;     /* the shim itself */
        const char *base = base_name(lm->l_name);
        if (!has_prefix(base, "libc.so") && !has_prefix(base, "libdl.so")) continue;
        tr_dyn d;
        if (!tr_dyn_init_map(&d, lm)) continue;
        if (!s->dlsym) s->dlsym = tr_dyn_func(&d, "dlsym");
        if (!s->dlvsym) {
            s->dlvsym = tr_dyn_func(&d, "dlvsym");
            if (s->dlvsym) {
                s->dlerror = tr_dyn_func(&d, "dlerror");
                s->has_2_34 = defines_version(lm, "GLIBC_2.34");
            }
        }
        if (s->dlsym && s->dlvsym) return;
    }
}

/* The next definition of name after the shim, asked of the C library's
 * dlvsym under the first version that exists (so that no failed lookup is
 * left behind); *failed is set when a lookup failed. */
static void *next_after_shim(const struct libc_syms *s, const char *name, int *failed)
{
    tr_dlvsym_fn boot = (tr_dlvsym_fn)s->dlvsym;
    const char *versions[2] = {"GLIBC_2.34", TR_GLIBC_FIRST};
    if (!s->has_2_34) {
        versions[0] = TR_GLIBC_FIRST;
        versions[1] = NULL;
    }
    for (int i = 0; i < 2 && versions[i]; i++) {
        /* called from here, so RTLD_NEXT means: after the shim */
        void *p = boot(RTLD_NEXT, name, versions[i]);
        if (!p) *failed = 1;
        if (p && !in_self(p)) return p;
    }
    return NULL;
}

static void real_init(void)
{
    int saved = errno;
    struct libc_syms s = {NULL, NULL, NULL, 0};
    find_libc(&s);
    tr_dlsym_fn ds = (tr_dlsym_fn)s.dlsym;
    tr_dlvsym_fn dv = (tr_dlvsym_fn)s.dlvsym;
    if (dv) {
        int failed = 0;
        void *next = next_after_shim(&s, "dlsym", &failed);
        if (next) ds = (tr_dlsym_fn)next;
        next = next_after_shim(&s, "dlvsym", &failed);
        if (next) dv = (tr_dlvsym_fn)next;
        /* a version that did not exist leaves no error behind */
        if (failed && s.dlerror) ((char *(*)(void))s.dlerror)();
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
