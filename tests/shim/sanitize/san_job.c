/* A program built with a sanitizer (-fsanitize=address,undefined or
 * -fsanitize=thread; issue 12 item 6) run under libtrshim.so: its runtime
 * looks up every function it intercepts through the shim's dlsym while it
 * initialises, before any constructor. test_sanitize.py runs it without the
 * shim, with TRSHIM=0 and with the shim, and checks that it exits 0, that
 * no sanitizer report is printed, that every lookup gives what it gives
 * without the shim (the wrapper for the handle lookups of NCCL and CUDA
 * functions with the shim active) and the trace.
 *
 * The job: cudaMalloc, a 1-rank communicator, ncclAllReduce (seq 1), an
 * AllReduce through the pointer dlsym gives on libtrsim.so's own handle
 * (seq 2), destroy, cudaFree. Prints "lookup <label> -> <module> <symbol>"
 * for each lookup and "ok" at the end. */
#include <dlfcn.h>
#include "../../common/trtest.h"

typedef ncclResult_t (*allreduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                     cudaStream_t);

static const char *base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void show(const char *label, void *p)
{
    Dl_info info;
    if (!p) printf("lookup %s -> NULL\n", label);
    else if (!dladdr(p, &info) || !info.dli_fname) printf("lookup %s -> ? ?\n", label);
    else printf("lookup %s -> %s %s\n", label, base(info.dli_fname), info.dli_sname ? info.dli_sname : "?");
}

int main(void)
{
    trtest_rank = 0;
    /* lookups the sanitizer runtime makes too, from the program */
    show("dlsym(RTLD_NEXT, malloc)", dlsym(RTLD_NEXT, "malloc"));
    show("dlsym(RTLD_NEXT, mmap)", dlsym(RTLD_NEXT, "mmap"));
    show("dlsym(RTLD_DEFAULT, strcmp)", dlsym(RTLD_DEFAULT, "strcmp"));
    show("dlvsym(RTLD_NEXT, pthread_cond_wait, GLIBC_2.3.2)",
         dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.3.2"));
    show("dlsym(RTLD_NEXT, no_such_function)", dlsym(RTLD_NEXT, "trshim_no_such_function"));
    EXPECT(dlerror() != NULL, "a failed lookup leaves an error");

    void *sim = dlopen("libtrsim.so", RTLD_NOW | RTLD_NOLOAD);
    EXPECT(sim != NULL, "libtrsim.so is loaded: %s", dlerror());
    void *ar = dlsym(sim, "ncclAllReduce");
    show("dlsym(libtrsim.so, ncclAllReduce)", ar);
    show("dlsym(libtrsim.so, cudaMalloc)", dlsym(sim, "cudaMalloc"));
    show("dlsym(libtrsim.so, cudaGetErrorName)", dlsym(sim, "cudaGetErrorName"));
    fflush(stdout);

    float *buf;
    cudaStream_t stream;
    ncclUniqueId id;
    ncclComm_t comm;
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaMalloc((void **)&buf, 4096));
    CUDACHECK(cudaMemset(buf, 0, 4096));
    NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclCommInitRank(&comm, 1, id, 0));
    NCCLCHECK(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, comm, stream));
    NCCLCHECK(((allreduce_fn)ar)(buf, buf, 128, ncclFloat32, ncclSum, comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    NCCLCHECK(ncclCommDestroy(comm));
    CUDACHECK(cudaFree(buf));
    CUDACHECK(cudaStreamDestroy(stream));
    dlclose(sim);
    printf("ok\n");
    return 0;
}
