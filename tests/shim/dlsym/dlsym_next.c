/* dlsym_next PLUGIN: RTLD_NEXT and RTLD_DEFAULT lookups made by the
 * application's own code (its interposer libdlsym_interpose.so, linked
 * before libtrsim.so, and a plugin loaded with RTLD_LOCAL) return what they
 * return without the shim (test_dlsym.py case "next"); the calls through
 * the interposer reach libtrsim.so (cudaMalloc: once, recorded once). */
#include <dlfcn.h>
#include <stdio.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "dlsym_show.h"

void interpose_report(void);
extern int interposed_malloc_calls;

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    interpose_report();
    dlsym_show("next", "main dlsym(RTLD_NEXT, cudaGetDeviceCount)", dlsym(RTLD_NEXT, "cudaGetDeviceCount"));
    dlsym_show("next", "main dlsym(RTLD_NEXT, cudaMalloc)", dlsym(RTLD_NEXT, "cudaMalloc"));
    dlsym_show("next", "main dlsym(RTLD_DEFAULT, ncclGetVersion)", dlsym(RTLD_DEFAULT, "ncclGetVersion"));
    void *sim = dlopen("libtrsim.so", RTLD_NOW | RTLD_NOLOAD);
    /* the wrapper of cudaMalloc forwards to the interposer's: libtrsim.so's is another function */
    dlsym_show("next", "main dlsym(libtrsim.so, cudaMalloc)", sim ? dlsym(sim, "cudaMalloc") : NULL);
    dlsym_show("next", "main dlsym(libtrsim.so, ncclAllReduce)", sim ? dlsym(sim, "ncclAllReduce") : NULL);

    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    void (*report)(void) = (void (*)(void))dlsym(h, "plugin_report");
    dlsym_show("next", "dlsym(plugin, plugin_report)", (void *)report);
    if (report) report();

    int n = -1, v = -1, rc;
    void *p = NULL;
    rc = (int)cudaGetDeviceCount(&n);
    printf("cudaGetDeviceCount rc %d count %d\n", rc, n);
    rc = (int)ncclGetVersion(&v);
    printf("ncclGetVersion rc %d version %d\n", rc, v);
    printf("cudaSetDevice rc %d\n", (int)cudaSetDevice(0));
    rc = (int)cudaMalloc(&p, 12345);
    printf("cudaMalloc rc %d, through the interposer %d time(s)\n", rc, interposed_malloc_calls);
    printf("cudaFree rc %d\n", (int)cudaFree(p));
    return 0;
}
