/* Loaded with RTLD_LOCAL by dlsym_next: RTLD_DEFAULT from here searches
 * this library's scope too (its dependency libdlsym_dep.so), RTLD_NEXT the
 * objects after it; the shim must not change either. */
#include <dlfcn.h>

#include "dlsym_show.h"

int dep_only(void);

__attribute__((visibility("default"))) void plugin_report(void)
{
    dlsym_show("next", "plugin dlsym(RTLD_DEFAULT, dep_only)", dlsym(RTLD_DEFAULT, "dep_only"));
    dlsym_show("next", "plugin dlsym(RTLD_DEFAULT, cudaGetDeviceCount)", dlsym(RTLD_DEFAULT, "cudaGetDeviceCount"));
    dlsym_show("next", "plugin dlsym(RTLD_NEXT, dep_only)", dlsym(RTLD_NEXT, "dep_only"));
    dlsym_show("next", "plugin dlsym(RTLD_NEXT, cudaMalloc)", dlsym(RTLD_NEXT, "cudaMalloc"));
    printf("plugin dep_only() = %d\n", dep_only());
}
