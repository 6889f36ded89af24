/* shim_dlopen PLUGIN: loads PLUGIN with RTLD_LOCAL and runs it; links no
 * CUDA or NCCL library itself. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int (*run)(void) = (int (*)(void))dlsym(h, "plugin_run");
    int r = run ? run() : 99;
    printf("plugin_run: %d\n", r);
    return r;
}
