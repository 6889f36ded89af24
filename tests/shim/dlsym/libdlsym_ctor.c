/* Linked into dlsym_lookups before the shim's constructor can run (a needed
 * library is initialised before a preloaded one it does not depend on):
 * with DLSYM_CTOR=1 its constructor looks functions up, then 8 threads
 * started here look them up at once, 100 times each, and compare. The
 * results wait in ctor_* for dlsym_lookups to print (mode "ctor").
 * Depends on libtrsim.so, so that one is initialised first. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
#define NLOOK 6
#define NTHREADS 8
#define ROUNDS 100

API const char *const ctor_names[NLOOK] = {
    "dlsym(libtrsim.so, cudaMalloc)", "dlsym(libtrsim.so, ncclAllReduce)", "dlsym(libtrsim.so, ncclGetUniqueId)",
    "dlsym(RTLD_DEFAULT, cudaMalloc)", "dlsym(RTLD_NEXT, ncclGetVersion)", "dlsym(libtrsim.so, cuMemCreate)"};
API void *ctor_results[NLOOK];
API int ctor_ran, ctor_threads, ctor_mismatches;

static void *handle;
static pthread_barrier_t barrier;

static void lookup(void **out)
{
    out[0] = dlsym(handle, "cudaMalloc");
    out[1] = dlsym(handle, "ncclAllReduce");
    out[2] = dlsym(handle, "ncclGetUniqueId");
    out[3] = dlsym(RTLD_DEFAULT, "cudaMalloc");
    out[4] = dlsym(RTLD_NEXT, "ncclGetVersion");
    out[5] = dlsym(handle, "cuMemCreate");
}

static void *worker(void *arg)
{
    int bad = 0;
    void *got[NLOOK];
    (void)arg;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < ROUNDS; i++) {
        lookup(got);
        bad += memcmp(got, ctor_results, sizeof got) != 0;
    }
    return (void *)(long)bad;
}

__attribute__((constructor)) static void ctor(void)
{
    const char *v = getenv("DLSYM_CTOR");
    if (!v || strcmp(v, "1") != 0) return;
    handle = dlopen("libtrsim.so", RTLD_NOW | RTLD_NOLOAD);
    lookup(ctor_results);
    ctor_ran = 1;
    pthread_t t[NTHREADS];
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) == 0) ctor_threads++;
    for (int i = 0; i < ctor_threads; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        ctor_mismatches += (int)(long)bad;
    }
}
