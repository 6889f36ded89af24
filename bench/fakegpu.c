/* libfakegpu.so: CUDA runtime/driver and NCCL entry points that return at
 * once, so that bench/shim_overhead measures only what libtrshim.so adds.
 * Allocations hand out unique, never-mapped addresses; a communicator is a
 * small struct. Everything the shim may call is here, so it never falls
 * back to a slow "function not found" path. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define API __attribute__((visibility("default")))

struct ncclComm {
    int nranks, rank, device;
};

static _Atomic uintptr_t next_addr = 0x7e0000000000ull;

/* FAKEGPU_REUSE=1: a freed block is handed out again by the next
 * allocation of the same size (as the driver usually does) instead of a
 * fresh address every time. */
static int reuse = -1;
static pthread_mutex_t reuse_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t last_p, free_p;
static size_t last_step, free_step;

static void *fake_alloc(size_t size)
{
    size_t step = (size + 511) & ~(size_t)511;
    if (step == 0) step = 512;
    if (reuse < 0) {
        const char *v = getenv("FAKEGPU_REUSE");
        reuse = v && strcmp(v, "1") == 0;
    }
    if (!reuse) return (void *)atomic_fetch_add_explicit(&next_addr, step, memory_order_relaxed);
    pthread_mutex_lock(&reuse_mu);
    uintptr_t p;
    if (free_p && free_step == step) {
        p = free_p;
        free_p = 0;
    } else {
        p = atomic_fetch_add_explicit(&next_addr, step, memory_order_relaxed);
    }
    last_p = p;
    last_step = step;
    pthread_mutex_unlock(&reuse_mu);
    return (void *)p;
}

static void fake_free(void *p)
{
    if (reuse <= 0 || !p) return;
    pthread_mutex_lock(&reuse_mu);
    if ((uintptr_t)p == last_p) {
        free_p = last_p;
        free_step = last_step;
        last_p = 0;
    }
    pthread_mutex_unlock(&reuse_mu);
}

/* ---- runtime ---- */
API cudaError_t cudaMalloc(void **p, size_t size) { *p = fake_alloc(size); return cudaSuccess; }
API cudaError_t cudaFree(void *p) { fake_free(p); return cudaSuccess; }
API cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s) { (void)s; *p = fake_alloc(size); return cudaSuccess; }
API cudaError_t cudaFreeAsync(void *p, cudaStream_t s) { (void)p; (void)s; return cudaSuccess; }
API cudaError_t cudaMallocHost(void **p, size_t size) { *p = fake_alloc(size); return cudaSuccess; }
API cudaError_t cudaFreeHost(void *p) { (void)p; return cudaSuccess; }
API cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
API cudaError_t cudaSetDevice(int d) { (void)d; return cudaSuccess; }
API cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
/* graph capture: one capture at a time, a graph and an executable graph are counters */
static int fake_capturing;
static unsigned long long fake_capture_id;
static uintptr_t fake_graphs;
API cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    (void)s;
    *st = fake_capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
API int cuStreamGetCaptureInfo(void *s, int *st, unsigned long long *id)
{
    (void)s;
    *st = fake_capturing;
    *id = fake_capturing ? fake_capture_id : 0;
    return 0;
}
API cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode m)
{
    (void)s; (void)m;
    fake_capturing = 1;
    fake_capture_id++;
    return cudaSuccess;
}
API cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    (void)s;
    fake_capturing = 0;
    *g = (cudaGraph_t)(0x10000 + 16 * ++fake_graphs);
    return cudaSuccess;
}
API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags)
{
    (void)flags;
    *e = (cudaGraphExec_t)((uintptr_t)g + 0x100000);
    return cudaSuccess;
}
API cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) { (void)e; (void)s; return cudaSuccess; }
API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { (void)e; return cudaSuccess; }
API cudaError_t cudaGraphDestroy(cudaGraph_t g) { (void)g; return cudaSuccess; }
API cudaError_t cudaStreamGetDevice(cudaStream_t s, int *d) { (void)s; *d = 0; return cudaSuccess; }
/* events: the shim's completion tracking records one after each collective
 * and its poller queries it (complete at once here) */
static _Atomic uintptr_t next_event = 1;
API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = (cudaEvent_t)atomic_fetch_add(&next_event, 1);
    return cudaSuccess;
}
API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { (void)e; (void)s; return cudaSuccess; }
API cudaError_t cudaEventQuery(cudaEvent_t e) { (void)e; return cudaSuccess; }
API cudaError_t cudaEventDestroy(cudaEvent_t e) { (void)e; return cudaSuccess; }
API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *m) { (void)m; return cudaSuccess; }
API cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }
API cudaError_t cudaGetLastError(void) { return cudaSuccess; }
API cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = *t = (size_t)80 << 30; return cudaSuccess; }
API cudaError_t cudaRuntimeGetVersion(int *v) { *v = 12040; return cudaSuccess; }
API cudaError_t cudaDriverGetVersion(int *v) { *v = 12040; return cudaSuccess; }
API const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorUnknown"; }
API const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "unknown error"; }
API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeDevice;
    a->devicePointer = (void *)p;
    return cudaSuccess;
}

/* ---- driver (types spelled out: cuda.h is not needed) ---- */
API int cuInit(unsigned flags) { (void)flags; return 0; }
API int cuCtxGetDevice(int *d) { *d = 0; return 0; }
API int cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = (size_t)80 << 30; return 0; }
API int cuGetErrorName(int e, const char **s) { *s = e ? "CUDA_ERROR_UNKNOWN" : "CUDA_SUCCESS"; return 0; }
API int cuDriverGetVersion(int *v) { *v = 12040; return 0; }

/* ---- NCCL ---- */
API ncclResult_t ncclGetVersion(int *v) { *v = NCCL_VERSION_CODE; return ncclSuccess; }
API ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    pid_t pid = getpid();
    memcpy(id->internal, &pid, sizeof pid);
    return ncclSuccess;
}
API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    (void)id;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->nranks = nranks;
    c->rank = rank;
    *comm = c;
    return ncclSuccess;
}
API ncclResult_t ncclCommCount(const ncclComm_t c, int *n) { *n = c->nranks; return ncclSuccess; }
API ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r) { *r = c->rank; return ncclSuccess; }
API ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *d) { *d = c->device; return ncclSuccess; }
API ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) { (void)c; *e = ncclSuccess; return ncclSuccess; }
API ncclResult_t ncclCommFinalize(ncclComm_t c) { (void)c; return ncclSuccess; }
API ncclResult_t ncclCommDestroy(ncclComm_t c) { free(c); return ncclSuccess; }
API ncclResult_t ncclCommAbort(ncclComm_t c) { free(c); return ncclSuccess; }
API const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "error"; }
API const char *ncclGetLastError(ncclComm_t c) { (void)c; return ""; }
API ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
API ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
API ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t st)
{
    (void)s; (void)r; (void)n; (void)t; (void)op; (void)c; (void)st;
    return ncclSuccess;
}
