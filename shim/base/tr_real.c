/* Finding the real function behind each wrapper: the next definition after
 * the shim (dlsym RTLD_NEXT), else the one in an already-loaded library of
 * the family, found by soname (a library the application dlopen()ed with
 * RTLD_LOCAL is not in the global scope RTLD_NEXT searches), else the one a
 * loaded library of the family under another name defines (it defines the
 * family's version query: ncclGetVersion, cudaRuntimeGetVersion,
 * cuDriverGetVersion). Never one of the shim's own functions: every lookup
 * here uses the real dlsym (tr_dlsym.c), not the shim's. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "tr_core.h"
#include "tr_dlreal.h"
#include "tr_dynsym.h"

static const char *const cudart_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                           "libcudart.so", NULL};
static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so", NULL};
static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so", NULL};

static const char *const *family_names(tr_lib lib)
{
    return lib == TR_LIB_NCCL ? nccl_names : lib == TR_LIB_CUDA ? cuda_names : cudart_names;
}

static const char *family_marker(tr_lib lib)
{
    return lib == TR_LIB_NCCL ? "ncclGetVersion" : lib == TR_LIB_CUDA ? "cuDriverGetVersion"
                                                                      : "cudaRuntimeGetVersion";
}

static int is_self(void *p)
{
    struct link_map *lm = tr_map_of(p);
    return lm && lm == tr_self_map();
}

/* Families of an object from its dynamic section; path: its file name,
 * for an object without a soname. */
static unsigned dyn_families(const tr_dyn *d, const char *path)
{
    const char *name = d->soname;
    if (!name && path) {
        const char *slash = strrchr(path, '/');
        name = slash ? slash + 1 : path;
    }
    unsigned fam = 0;
    for (int lib = TR_LIB_CUDART; lib <= TR_LIB_NCCL; lib++) {
        for (const char *const *n = family_names((tr_lib)lib); name && *n; n++)
            if (!strcmp(name, *n)) fam |= 1u << lib;
        if (tr_dyn_func(d, family_marker((tr_lib)lib))) fam |= 1u << lib;
    }
    return fam;
}

unsigned tr_lib_families(const struct link_map *lm)
{
    tr_dyn d;
    if (!lm || lm == tr_self_map() || !tr_dyn_init_map(&d, lm)) return 0;
    return dyn_families(&d, lm->l_name);
}

struct family_search {
    const char *name;
    tr_lib lib;
    uintptr_t self_base;
    void *found;
};

/* Runs with the loader's list lock held: reads memory only, calls nothing
 * of the dynamic linker. */
static int family_search_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct family_search *s = data;
    tr_dyn d;
    (void)size;
    if (!info->dlpi_name || !info->dlpi_name[0] || (uintptr_t)info->dlpi_addr == s->self_base) return 0;
    if (!tr_dyn_init_phdr(&d, info) || !(dyn_families(&d, info->dlpi_name) & (1u << s->lib))) return 0;
    s->found = tr_dyn_func(&d, s->name);
    return s->found != NULL;
}

static void *find_real(const char *name, tr_lib lib)
{
    tr_dlsym_fn real_dlsym = tr_dlsym_real();
    if (!real_dlsym) return NULL;
    void *p = real_dlsym(RTLD_NEXT, name);
    if (p && !is_self(p)) return p;
    for (const char *const *names = family_names(lib); *names; names++) {
        void *h = dlopen(*names, RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        p = real_dlsym(h, name);
        dlclose(h);    /* still loaded: RTLD_NOLOAD only took another reference */
        if (p && !is_self(p)) return p;
    }
    struct link_map *self = tr_self_map();
    struct family_search s = {name, lib, self ? (uintptr_t)self->l_addr : 0, NULL};
    dl_iterate_phdr(family_search_cb, &s);
    return s.found;
}

/* Leaves errno as it was and dlerror() clear: the lookups that found
 * nothing are the shim's business, not the application's. */
void *tr_real(const char *name, tr_lib lib)
{
    int saved = errno;
    void *p = find_real(name, lib);
    dlerror();
    errno = saved;
    return p;
}
