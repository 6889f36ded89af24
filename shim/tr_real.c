/* Finding the real function behind each wrapper: the next definition after
 * the shim (dlsym RTLD_NEXT), else the one in an already-loaded library of
 * the family, found by soname (a library the application dlopen()ed with
 * RTLD_LOCAL is not in the global scope RTLD_NEXT searches). Never one of the
 * shim's own functions. */
#include <dlfcn.h>
#include <stddef.h>

#include "tr_core.h"

static const char *const cudart_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                           "libcudart.so", NULL};
static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so", NULL};
static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so", NULL};

static void *self_base(void)
{
    static void *base;
    if (!base) {
        Dl_info info;
        if (dladdr((void *)&self_base, &info)) base = info.dli_fbase;
    }
    return base;
}

static int is_self(void *p)
{
    Dl_info info;
    if (!dladdr(p, &info)) return 0;
    return info.dli_fbase == self_base();
}

void *tr_real(const char *name, tr_lib lib)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p && !is_self(p)) return p;
    const char *const *names = lib == TR_LIB_NCCL ? nccl_names : lib == TR_LIB_CUDA ? cuda_names : cudart_names;
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        p = dlsym(h, name);
        dlclose(h);    /* still loaded: RTLD_NOLOAD only took another reference */
        if (p && !is_self(p)) return p;
    }
    return NULL;
}
