/* dlsym_lookups MODE ...: what dlsym and dlvsym return, printed as
 * "<tag> <lookup> -> <module> <symbol>" (test_dlsym.py checks every line,
 * with and without the shim). Linked with libdlsym_ctor.so and libtrsim.so.
 *
 *   lookups OTHER NCCL2  wrapped and unwrapped names on the runtime's handle,
 *                        RTLD_DEFAULT, RTLD_NEXT, failures and dlerror(), a
 *                        library OTHER defining its own "ncclAllReduce", a
 *                        second NCCL (NCCL2, another copy of the simulator
 *                        named libnccl.so.2); then one allocation through the
 *                        looked-up cudaMalloc (in lk_alloc)
 *   ctor                 what libdlsym_ctor.so's constructor found
 *                        (DLSYM_CTOR=1), and its 8 threads' mismatches
 *   race                 8 threads whose lookups are the process's first
 *                        dlsym calls, all at once */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>

#include "dlsym_show.h"

#define NOINLINE __attribute__((noinline))

extern const char *const ctor_names[];
extern void *ctor_results[];
extern int ctor_ran, ctor_threads, ctor_mismatches;

static void show_error(const char *what)
{
    const char *e = dlerror();
    printf("dlerror after %s: %s\n", what, e ? e : "none");
}

typedef cudaError_t (*fn_malloc)(void **, size_t);
typedef cudaError_t (*fn_free)(void *);

NOINLINE void lk_alloc(fn_malloc m, fn_free f)
{
    void *p = NULL;
    printf("lk_alloc: malloc rc %d\n", (int)m(&p, 4096));
    printf("lk_alloc: free rc %d\n", (int)f(p));
}

static int mode_lookups(const char *other, const char *nccl2)
{
    void *h = dlopen("libtrsim.so", RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        printf("dlopen libtrsim.so: %s\n", dlerror());
        return 1;
    }
    static const char *const names[] = {"cudaMalloc", "cudaFree", "ncclAllReduce", "ncclCommInitRank",
                                        "cuMemAlloc_v2", "cuMemCreate", "cudaGetDriverEntryPoint",
                                        "cuGetProcAddress_v2", "ncclGetUniqueId", "cudaMemcpy",
                                        "cuMemGetInfo_v2", "cudaGetDeviceCount", "cuMemAlloc"};
    char label[256];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(label, sizeof label, "dlsym(libtrsim.so, %s)", names[i]);
        dlsym_show("lookup", label, dlsym(h, names[i]));
    }
    show_error("successful lookups");
    dlsym_show("lookup", "dlsym(libtrsim.so, noSuchFunction)", dlsym(h, "noSuchFunction"));
    show_error("dlsym(libtrsim.so, noSuchFunction)");
    /* an error before a successful lookup of a wrapped name: cleared by it, as without the shim */
    dlsym(h, "noSuchFunction");
    dlsym_show("lookup", "dlsym(libtrsim.so, ncclAllReduce) after a failure", dlsym(h, "ncclAllReduce"));
    show_error("a failure then a successful wrapped lookup");
    dlsym_show("lookup", "dlvsym(libtrsim.so, cudaMalloc, NOVERSION)", dlvsym(h, "cudaMalloc", "NOVERSION"));
    show_error("dlvsym(libtrsim.so, cudaMalloc, NOVERSION)");
    dlsym_show("lookup", "dlsym(RTLD_DEFAULT, cudaMalloc)", dlsym(RTLD_DEFAULT, "cudaMalloc"));
    dlsym_show("lookup", "dlsym(RTLD_DEFAULT, ncclGetUniqueId)", dlsym(RTLD_DEFAULT, "ncclGetUniqueId"));
    dlsym_show("lookup", "dlsym(RTLD_NEXT, cudaMalloc)", dlsym(RTLD_NEXT, "cudaMalloc"));
    dlsym_show("lookup", "dlsym(RTLD_NEXT, ncclGetUniqueId)", dlsym(RTLD_NEXT, "ncclGetUniqueId"));
    dlsym_show("lookup", "dlsym(RTLD_DEFAULT, noSuchFunction)", dlsym(RTLD_DEFAULT, "noSuchFunction"));
    show_error("dlsym(RTLD_DEFAULT, noSuchFunction)");
    void *self = dlopen(NULL, RTLD_NOW);
    dlsym_show("lookup", "dlsym(main program, cudaMalloc)", dlsym(self, "cudaMalloc"));

    void *o = dlopen(other, RTLD_NOW | RTLD_LOCAL);
    if (!o) {
        printf("dlopen %s: %s\n", other, dlerror());
        return 1;
    }
    int (*own)(void) = (int (*)(void))dlsym(o, "ncclAllReduce");
    dlsym_show("lookup", "dlsym(libdlsym_other.so, ncclAllReduce)", (void *)own);
    printf("libdlsym_other.so's ncclAllReduce() = %d\n", own ? own() : -1);

    void *n2 = dlopen(nccl2, RTLD_NOW | RTLD_LOCAL);
    if (!n2) {
        printf("dlopen %s: %s\n", nccl2, dlerror());
        return 1;
    }
    dlsym_show("lookup", "dlsym(second libnccl.so.2, ncclAllReduce)", dlsym(n2, "ncclAllReduce"));
    dlsym_show("lookup", "dlsym(second libnccl.so.2, cudaMalloc)", dlsym(n2, "cudaMalloc"));
    dlsym_show("lookup", "dlsym(second libnccl.so.2, ncclGetVersion)", dlsym(n2, "ncclGetVersion"));
    show_error("lookups in the second libnccl.so.2");

    printf("cudaSetDevice rc %d\n", (int)cudaSetDevice(0));
    lk_alloc((fn_malloc)dlsym(h, "cudaMalloc"), (fn_free)dlsym(h, "cudaFree"));
    return 0;
}

static int mode_ctor(void)
{
    printf("ctor ran %d, threads %d, mismatches %d\n", ctor_ran, ctor_threads, ctor_mismatches);
    for (int i = 0; i < 6; i++) dlsym_show("ctor", ctor_names[i], ctor_results[i]);
    return 0;
}

#define NTHREADS 8
#define ROUNDS 200
#define NLOOK 5
static pthread_barrier_t barrier;
static void *race_handle;
static void *race_got[NTHREADS][NLOOK];
static int race_bad[NTHREADS];

static void race_lookup(void **out)
{
    out[0] = dlsym(race_handle, "cudaMalloc");
    out[1] = dlsym(race_handle, "ncclGetUniqueId");
    out[2] = dlsym(RTLD_DEFAULT, "ncclAllReduce");
    out[3] = dlsym(RTLD_NEXT, "cudaGetDeviceCount");
    out[4] = dlvsym(race_handle, "ncclAllReduce", "NOVERSION");
}

static void *race_worker(void *arg)
{
    int t = (int)(long)arg;
    void *again[NLOOK];
    pthread_barrier_wait(&barrier);
    race_lookup(race_got[t]);
    for (int i = 1; i < ROUNDS; i++) {
        race_lookup(again);
        race_bad[t] += memcmp(again, race_got[t], sizeof again) != 0;
    }
    return NULL;
}

static int mode_race(void)
{
    static const char *const labels[NLOOK] = {
        "dlsym(libtrsim.so, cudaMalloc)", "dlsym(libtrsim.so, ncclGetUniqueId)", "dlsym(RTLD_DEFAULT, ncclAllReduce)",
        "dlsym(RTLD_NEXT, cudaGetDeviceCount)", "dlvsym(libtrsim.so, ncclAllReduce, NOVERSION)"};
    pthread_t t[NTHREADS];
    race_handle = dlopen("libtrsim.so", RTLD_NOW | RTLD_NOLOAD);
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    for (long i = 0; i < NTHREADS; i++) pthread_create(&t[i], NULL, race_worker, (void *)i);
    int bad = 0, differ = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        bad += race_bad[i];
        differ += memcmp(race_got[i], race_got[0], sizeof race_got[0]) != 0;
    }
    printf("race: %d threads x %d rounds: %d changed results, %d threads differ from thread 0\n", NTHREADS, ROUNDS,
           bad, differ);
    for (int i = 0; i < NLOOK; i++) dlsym_show("race", labels[i], race_got[0][i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "lookups")) return mode_lookups(argv[2], argv[3]);
    if (argc >= 2 && !strcmp(argv[1], "ctor")) return mode_ctor();
    if (argc >= 2 && !strcmp(argv[1], "race")) return mode_race();
    fprintf(stderr, "usage: dlsym_lookups lookups OTHER NCCL2 | ctor | race\n");
    return 2;
}
