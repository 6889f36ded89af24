/* Unit tests of tr_memory.c's accounting, linked with stand-ins for the rest
 * of the shim (standins.c) and with libtrsim.so as the real runtime: the
 * wrappers defined in this executable sit in front of the simulator exactly
 * as the preloaded shim does. Every number is checked exactly.
 *
 *   unit_memory accounting   a known sequence on two devices, every API
 *   unit_memory failures     failed allocations of every kind
 *   unit_memory many         1200 failures: the first 500 and last 500 kept
 *   unit_memory threads      concurrent allocation on 6 threads
 *   unit_memory crossthread  frees on other threads than the allocation's, and
 *                            after the allocating thread ended
 *   unit_memory stale        an address freed unseen and handed out again
 *   unit_memory disabled     tr_enter() == 0: nothing is counted
 *
 * Every "memory" object read is also checked against the ring header's
 * mirror of the counters (unit_mirror.c), failures too.
 *
 * Runs with TRSIM_DEVICE_COUNT=6, TRSIM_DEVICE_MEM=1GiB (meson.build). */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "tr_core.h"
#include "standins.h"
#include "unit_mirror.h"
#include "tr_memjson.h"

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); failures++; } } while (0)
#define CUDA_OK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "FAIL %s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)e_); exit(1); } } while (0)
#define CU_OK(call) do { CUresult e_ = (call); if (e_ != CUDA_SUCCESS) { \
    fprintf(stderr, "FAIL %s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)e_); exit(1); } } while (0)
#define NCCL_OK(call) do { ncclResult_t e_ = (call); if (e_ != ncclSuccess) { \
    fprintf(stderr, "FAIL %s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)e_); exit(1); } } while (0)

/* The "memory" object as tr_memory_write_json writes it for device. */
static cJSON *memory_json(int device)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tr_json j;
    trj_init(&j, f);
    trj_object_begin(&j, NULL);
    tr_memory_write_json(&j, device);
    trj_object_end(&j);
    fclose(f);
    cJSON *root = cJSON_Parse(buf);
    if (!root) {
        fprintf(stderr, "FAIL: not JSON: %s\n", buf);
        exit(1);
    }
    free(buf);
    cJSON *m = cJSON_DetachItemFromObject(root, "memory");
    cJSON_Delete(root);
    if (!m) {
        fprintf(stderr, "FAIL: no memory member\n");
        exit(1);
    }
    failures += mirror_check(m, device);      /* the ring header says the same */
    return m;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) {
        char *s = cJSON_PrintUnformatted(o);
        fprintf(stderr, "FAIL: %s is not a number in %s\n", key, s);
        exit(1);
    }
    return v->valuedouble;
}

static int is_null(const cJSON *o, const char *key)
{
    return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, key));
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "(not a string)";
}

static const cJSON *device_entry(const cJSON *m, int device)
{
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(m, "devices"))
        if ((int)num(d, "device") == device)
            return d;
    return NULL;
}

static void expect_device(const cJSON *m, int device, uint64_t live, uint64_t peak,
                          uint64_t allocs, uint64_t frees, int line)
{
    const cJSON *d = device_entry(m, device);
    if (!d) {
        fprintf(stderr, "FAIL line %d: device %d missing\n", line, device);
        failures++;
        return;
    }
    if ((uint64_t)num(d, "live_bytes") != live || (uint64_t)num(d, "peak_bytes") != peak ||
        (uint64_t)num(d, "allocs") != allocs || (uint64_t)num(d, "frees") != frees) {
        fprintf(stderr, "FAIL line %d: device %d: live %.0f peak %.0f allocs %.0f frees %.0f, "
                "expected %llu %llu %llu %llu\n", line, device, num(d, "live_bytes"),
                num(d, "peak_bytes"), num(d, "allocs"), num(d, "frees"),
                (unsigned long long)live, (unsigned long long)peak, (unsigned long long)allocs,
                (unsigned long long)frees);
        failures++;
    }
}
#define EXPECT_DEVICE(m, dev, live, peak, allocs, frees) \
    expect_device(m, dev, live, peak, allocs, frees, __LINE__)

static void expect_pinned(const cJSON *m, uint64_t live, uint64_t peak, uint64_t allocs,
                          uint64_t frees, int line)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "pinned");
    if ((uint64_t)num(p, "live_bytes") != live || (uint64_t)num(p, "peak_bytes") != peak ||
        (uint64_t)num(p, "allocs") != allocs || (uint64_t)num(p, "frees") != frees) {
        fprintf(stderr, "FAIL line %d: pinned: live %.0f peak %.0f allocs %.0f frees %.0f, "
                "expected %llu %llu %llu %llu\n", line, num(p, "live_bytes"), num(p, "peak_bytes"),
                num(p, "allocs"), num(p, "frees"), (unsigned long long)live,
                (unsigned long long)peak, (unsigned long long)allocs, (unsigned long long)frees);
        failures++;
    }
}
#define EXPECT_PINNED(m, live, peak, allocs, frees) expect_pinned(m, live, peak, allocs, frees, __LINE__)

static int array_size(const cJSON *m, const char *key)
{
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, key));
}

/* ---- accounting ------------------------------------------------------------ */

static CUmemGenericAllocationHandle vmm_create(int device, size_t size)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, size, &prop, 0));
    return h;
}

static int test_accounting(void)
{
    typedef cudaError_t (*malloc_fn)(void **, size_t);
    malloc_fn raw_malloc = (malloc_fn)standin_next("cudaMalloc");
    int captures0;
    cJSON *m;

    m = memory_json(-1);
    CHECK(array_size(m, "devices") == 0, "no device before any allocation");
    CHECK(array_size(m, "failures") == 0, "no failures");
    EXPECT_PINNED(m, 0, 0, 0, 0);
    cJSON_Delete(m);

    CUDA_OK(cudaSetDevice(0));
    void *p1, *p2, *pm, *pp, *pa, *pf, *pn, *pz = (void *)1;
    size_t pitch = 0;
    standin_set_stack(11);
    CUDA_OK(cudaMalloc(&p1, 1000));                          /* d0: 1000 */
    CHECK(atomic_load(&standin_activations) >= 1, "activated on the first event");
    CUDA_OK(cudaMalloc(&p2, 3000));                          /* 4000 */
    CUDA_OK(cudaFree(p1));                                   /* 3000 */
    CUDA_OK(cudaMallocManaged(&pm, 777, cudaMemAttachGlobal)); /* 3777 */
    standin_set_stack(12);
    CUDA_OK(cudaMallocPitch(&pp, &pitch, 100, 10));          /* pitch 512: 3777 + 5120 = 8897 */
    CHECK(pitch == 512, "pitch %zu", pitch);
    m = memory_json(-1);
    EXPECT_DEVICE(m, 0, 8897, 8897, 4, 1);
    CHECK((int)num(device_entry(m, 0), "peak_stack") == 12, "stack of the peak");
    CHECK(is_null(device_entry(m, 0), "peak_after"), "no collective yet");
    cJSON_Delete(m);

    cudaStream_t s0;
    CUDA_OK(cudaStreamCreate(&s0));
    CUDA_OK(cudaMallocAsync(&pa, 10000, s0));                /* 18897 */
    CUDA_OK(cudaFreeAsync(pa, s0));                          /* uncounted at the call: 8897 */
    cudaMemPool_t pool0;
    CUDA_OK(cudaDeviceGetDefaultMemPool(&pool0, 0));
    CUDA_OK(cudaMallocFromPoolAsync(&pf, 2048, pool0, s0));  /* 10945 */
    NCCL_OK(ncclMemAlloc(&pn, 4096));                        /* 15041 */
    CUDA_OK(cudaMalloc(&pz, 0));                             /* nothing */
    CHECK(pz == NULL, "size 0 gives NULL");
    CU_OK(cuInit(0));
    CUdeviceptr dp;
    standin_set_collective(0, 1, 0xfeedbeefcafe1234ull, 7);
    standin_set_stack(13);
    CU_OK(cuMemAlloc_v2(&dp, 65536));                        /* 80577 */
    CU_OK(cuMemFree_v2(dp));                                 /* 15041 */
    m = memory_json(0);
    EXPECT_DEVICE(m, 0, 15041, 80577, 8, 3);
    const cJSON *d0 = device_entry(m, 0);
    CHECK((int)num(d0, "peak_stack") == 13, "stack of the peak");
    const cJSON *after = cJSON_GetObjectItemCaseSensitive(d0, "peak_after");
    CHECK(after && !strcmp(str(after, "comm"), "0xfeedbeefcafe1234") && num(after, "seq") == 7,
          "peak_after");
    CHECK(array_size(m, "devices") == 1, "one device");
    cJSON_Delete(m);

    /* device 1; a stream of device 0 used while device 1 is current */
    CUDA_OK(cudaSetDevice(1));
    void *q, *pa2;
    CUDA_OK(cudaMalloc(&q, MiB));                            /* d1: 1 MiB */
    CUDA_OK(cudaMallocAsync(&pa2, 100, s0));                 /* d0: 15141 */
    standin_set_collective(1, 1, 0x42, 3);
    CUmemGenericAllocationHandle h1 = vmm_create(1, 2 * MiB); /* d1: 3 MiB */
    standin_set_collective(1, 1, 0x42, 4);                   /* after the peak: not it */
    CU_OK(cuMemRelease(h1));                                 /* d1: 1 MiB */
    standin_set_stack(14);
    CUmemGenericAllocationHandle h0 = vmm_create(0, 2 * MiB); /* d0: 15141 + 2 MiB = 2112293 */
    CU_OK(cuMemRelease(h0));                                 /* d0: 15141 */

    /* pinned, while device 1 is current */
    void *h123, *h456;
    CUDA_OK(cudaMallocHost(&h123, 123));
    CUDA_OK(cudaHostAlloc(&h456, 456, cudaHostAllocDefault));
    CUDA_OK(cudaFreeHost(h123));

    /* not the application's: a free of a pointer the shim never saw, and a
     * call inside another wrapped call */
    void *raw, *nested;
    CUDA_OK(raw_malloc(&raw, 999));
    CUDA_OK(cudaFree(raw));
    standin_depth_push();
    CUDA_OK(cudaMalloc(&nested, 555));
    standin_depth_pop();
    CUDA_OK(cudaFree(nested));
    CHECK(cudaFree((void *)0x12345) == cudaErrorInvalidValue, "bad free fails as before");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "and sets the error as before");

    /* a cudaFree of a pinned pointer fails and changes nothing */
    CHECK(cudaFree(h456) == cudaErrorInvalidValue, "cudaFree of pinned memory");
    (void)cudaGetLastError();

    m = memory_json(-1);
    EXPECT_DEVICE(m, 0, 15141, 2112293, 10, 4);
    EXPECT_DEVICE(m, 1, MiB, 3 * MiB, 2, 1);
    CHECK((int)num(device_entry(m, 0), "peak_stack") == 14, "stack of the new peak");
    after = cJSON_GetObjectItemCaseSensitive(device_entry(m, 0), "peak_after");
    CHECK(after && !strcmp(str(after, "comm"), "0xfeedbeefcafe1234"), "peak_after d0");
    after = cJSON_GetObjectItemCaseSensitive(device_entry(m, 1), "peak_after");
    CHECK(after && !strcmp(str(after, "comm"), "0x42") && num(after, "seq") == 3, "peak_after d1");
    EXPECT_PINNED(m, 456, 579, 2, 1);
    CHECK(array_size(m, "devices") == 2, "two devices");
    cJSON_Delete(m);
    /* one rank per device: pinned memory goes to the device current at the call */
    m = memory_json(1);
    CHECK(array_size(m, "devices") == 1, "view of device 1");
    EXPECT_DEVICE(m, 1, MiB, 3 * MiB, 2, 1);
    EXPECT_PINNED(m, 456, 579, 2, 1);
    cJSON_Delete(m);
    m = memory_json(0);
    EXPECT_PINNED(m, 0, 0, 0, 0);
    cJSON_Delete(m);

    /* Allocation-heavy loops below the peak capture no stack. */
    captures0 = atomic_load(&standin_captures);
    standin_set_stack(-2);
    for (int i = 0; i < 20000; i++) {
        void *t;
        CUDA_OK(cudaMalloc(&t, 1000));
        CUDA_OK(cudaFree(t));
    }
    CHECK(atomic_load(&standin_captures) == captures0, "%d captures in the loop",
          atomic_load(&standin_captures) - captures0);
    m = memory_json(1);
    EXPECT_DEVICE(m, 1, MiB, 3 * MiB, 20002, 20001);
    cJSON_Delete(m);
    /* Each growth of the peak captures once. */
    void *g[10];
    for (int i = 0; i < 10; i++)
        CUDA_OK(cudaMalloc(&g[i], 2 * MiB));
    CHECK(atomic_load(&standin_captures) - captures0 == 9, "captures: %d",
          atomic_load(&standin_captures) - captures0);   /* the first one stays below 3 MiB */
    for (int i = 0; i < 10; i++)
        CUDA_OK(cudaFree(g[i]));

    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaFreeAsync(pa2, s0));
    CUDA_OK(cudaFreeAsync(pf, s0));
    NCCL_OK(ncclMemFree(pn));
    CUDA_OK(cudaFree(pp));
    CUDA_OK(cudaFree(pm));
    CUDA_OK(cudaFree(p2));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaFree(q));
    CUDA_OK(cudaFreeHost(h456));
    m = memory_json(-1);
    EXPECT_DEVICE(m, 0, 0, 2112293, 10, 10);
    EXPECT_DEVICE(m, 1, 0, 21 * MiB, 20012, 20012);
    EXPECT_PINNED(m, 0, 579, 2, 2);
    CHECK(array_size(m, "failures") == 0, "no failure recorded");
    CHECK(num(m, "failures_dropped") == 0, "none dropped");
    cJSON_Delete(m);
    CUDA_OK(cudaStreamSynchronize(s0));
    CUDA_OK(cudaStreamDestroy(s0));
    CHECK(cudaGetLastError() == cudaSuccess, "no error left behind");
    return failures;
}

/* ---- failures -------------------------------------------------------------- */

static const cJSON *failure_at(const cJSON *m, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "failures"), i);
}

static int test_failures(void)
{
    CUDA_OK(cudaSetDevice(0));
    void *a, *x = (void *)0x77;
    CUDA_OK(cudaMalloc(&a, 100 * MiB + 5));
    standin_set_stack(21);
    cudaError_t r = cudaMalloc(&x, 2 * GiB);
    CHECK(r == cudaErrorMemoryAllocation, "cudaMalloc past capacity: %d", (int)r);
    CHECK(cudaPeekAtLastError() == cudaErrorMemoryAllocation, "error state as without the shim");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "error state as without the shim");
    CHECK(cudaGetLastError() == cudaSuccess, "reset as without the shim");

    /* the driver and NCCL, and device 1 from device 0 */
    CUdeviceptr dp;
    standin_set_stack(22);
    CHECK(cuMemAlloc_v2(&dp, 3 * GiB) == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2");
    void *n;
    standin_set_stack(23);
    CHECK(ncclMemAlloc(&n, 5 * GiB) == ncclUnhandledCudaError, "ncclMemAlloc");
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 1;
    CUmemGenericAllocationHandle h;
    standin_set_stack(24);
    CHECK(cuMemCreate(&h, 2 * GiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate");
    standin_set_stack(25);
    CHECK(cudaMalloc(NULL, 64) == cudaErrorInvalidValue, "NULL pointer");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "error state as without the shim");
    void *hp;
    standin_set_stack(26);
    CHECK(cudaMallocHost(&hp, SIZE_MAX / 2 + 1) == cudaErrorMemoryAllocation, "pinned");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "error state as without the shim");
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    standin_set_stack(27);
    CHECK(cudaMallocAsync(&x, 4 * GiB, s) == cudaErrorMemoryAllocation, "async");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "error state as without the shim");

    cJSON *m = memory_json(-1);
    CHECK(array_size(m, "failures") == 7, "7 failures: %d", array_size(m, "failures"));
    const uint64_t live0 = 100 * MiB + 5, free0 = GiB - live0;
    const cJSON *f = failure_at(m, 0);
    CHECK(!strcmp(str(f, "api"), "cudaMalloc") && num(f, "device") == 0 &&
          (uint64_t)num(f, "bytes") == 2 * GiB && (uint64_t)num(f, "live_bytes") == live0 &&
          (uint64_t)num(f, "free_bytes") == free0 && (uint64_t)num(f, "total_bytes") == GiB &&
          !strcmp(str(f, "error"), "cudaErrorMemoryAllocation") && num(f, "error_code") == 2 &&
          num(f, "stack") == 21 && num(f, "t_ns") > 0, "%s", cJSON_PrintUnformatted(f));
    f = failure_at(m, 1);
    CHECK(!strcmp(str(f, "api"), "cuMemAlloc_v2") && num(f, "device") == 0 &&
          (uint64_t)num(f, "bytes") == 3 * GiB && (uint64_t)num(f, "live_bytes") == live0 &&
          (uint64_t)num(f, "free_bytes") == free0 && (uint64_t)num(f, "total_bytes") == GiB &&
          !strcmp(str(f, "error"), "CUDA_ERROR_OUT_OF_MEMORY") && num(f, "error_code") == 2 &&
          num(f, "stack") == 22, "%s", cJSON_PrintUnformatted(f));
    f = failure_at(m, 2);
    CHECK(!strcmp(str(f, "api"), "ncclMemAlloc") && is_null(f, "device") &&
          (uint64_t)num(f, "bytes") == 5 * GiB && is_null(f, "free_bytes") &&
          is_null(f, "total_bytes") && !strcmp(str(f, "error"), "ncclUnhandledCudaError") &&
          num(f, "error_code") == 1 && num(f, "stack") == 23, "%s", cJSON_PrintUnformatted(f));
    f = failure_at(m, 3);   /* device 1 while device 0 is current: no free/total */
    CHECK(!strcmp(str(f, "api"), "cuMemCreate") && num(f, "device") == 1 &&
          (uint64_t)num(f, "bytes") == 2 * GiB && num(f, "live_bytes") == 0 &&
          is_null(f, "free_bytes") && !strcmp(str(f, "error"), "CUDA_ERROR_OUT_OF_MEMORY") &&
          num(f, "stack") == 24, "%s", cJSON_PrintUnformatted(f));
    f = failure_at(m, 4);
    CHECK(!strcmp(str(f, "api"), "cudaMalloc") && is_null(f, "device") &&
          num(f, "bytes") == 64 && !strcmp(str(f, "error"), "cudaErrorInvalidValue") &&
          num(f, "error_code") == 1 && num(f, "stack") == 25, "%s", cJSON_PrintUnformatted(f));
    f = failure_at(m, 5);
    CHECK(!strcmp(str(f, "api"), "cudaMallocHost") && num(f, "device") == 0 &&
          num(f, "live_bytes") == 0 && is_null(f, "free_bytes") &&
          !strcmp(str(f, "error"), "cudaErrorMemoryAllocation") && num(f, "stack") == 26,
          "%s", cJSON_PrintUnformatted(f));
    f = failure_at(m, 6);
    CHECK(!strcmp(str(f, "api"), "cudaMallocAsync") && num(f, "device") == 0 &&
          (uint64_t)num(f, "bytes") == 4 * GiB && (uint64_t)num(f, "free_bytes") == free0 &&
          num(f, "stack") == 27, "%s", cJSON_PrintUnformatted(f));
    for (int i = 1; i < 7; i++)
        CHECK(num(failure_at(m, i), "t_ns") >= num(failure_at(m, i - 1), "t_ns"), "in order");
    CHECK(num(m, "failures_dropped") == 0, "none dropped");
    EXPECT_DEVICE(m, 0, live0, live0, 1, 0);
    CHECK(array_size(m, "devices") == 1, "failures add no device");
    /* the ring header: device 0's three (not the pinned one), device 1's one */
    failures += mirror_check_failure(0, 3, failure_at(m, 0));
    failures += mirror_check_failure(1, 1, failure_at(m, 3));
    cJSON_Delete(m);
    /* the view of device 1: its failure and those of unknown device */
    m = memory_json(1);
    CHECK(array_size(m, "failures") == 3, "device 1 view: %d", array_size(m, "failures"));
    CHECK(!strcmp(str(failure_at(m, 0), "api"), "ncclMemAlloc") &&
          !strcmp(str(failure_at(m, 1), "api"), "cuMemCreate") &&
          !strcmp(str(failure_at(m, 2), "api"), "cudaMalloc"), "device 1 view");
    cJSON_Delete(m);
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaStreamDestroy(s));
    return failures;
}

static int test_many_failures(void)
{
    const int n = 1200;
    for (int i = 1; i <= n; i++)
        CHECK(cudaMalloc(NULL, (size_t)i) == cudaErrorInvalidValue, "failure %d", i);
    cJSON *m = memory_json(-1);
    CHECK(array_size(m, "failures") == 1000, "kept %d", array_size(m, "failures"));
    CHECK(num(m, "failures_dropped") == 200, "dropped %.0f", num(m, "failures_dropped"));
    for (int i = 0; i < 1000; i++) {
        int want = i < 500 ? i + 1 : n - 1000 + i + 1;
        CHECK(num(failure_at(m, i), "bytes") == want, "entry %d: %.0f, expected %d", i,
              num(failure_at(m, i), "bytes"), want);
    }
    cJSON_Delete(m);
    m = memory_json(3);   /* unknown device: in every view */
    CHECK(array_size(m, "failures") == 1000 && num(m, "failures_dropped") == 200, "view");
    cJSON_Delete(m);
    return failures;
}

/* ---- threads --------------------------------------------------------------- */

#define THREADS 6
#define OPS 200000
#define HOLD 3000

typedef struct {
    int index, device;
    uint64_t live, peak, allocs, frees;
} worker_t;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *worker(void *arg)
{
    worker_t *w = arg;
    static void *held[THREADS][HOLD];
    static size_t sizes[THREADS][HOLD];
    static int managed[THREADS][HOLD];
    int n = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->index + 1);
    CUDA_OK(cudaSetDevice(w->device));
    for (int op = 0; op < OPS; op++) {
        uint64_t r = rnd(&seed);
        int grow = n == 0 || (n < HOLD && (r & 3) != 0 && op < OPS * 3 / 4) ||
                   (n < HOLD && (r & 1) && op >= OPS * 3 / 4);
        if (grow) {
            size_t size = 1 + (size_t)(r >> 20) % 8192;
            int how = (int)((r >> 8) % 3);
            void *p;
            if (how == 0)
                CUDA_OK(cudaMalloc(&p, size));
            else if (how == 1)
                CUDA_OK(cudaMallocManaged(&p, size, cudaMemAttachGlobal));
            else
                NCCL_OK(ncclMemAlloc(&p, size));
            held[w->index][n] = p;
            managed[w->index][n] = how == 1;
            sizes[w->index][n++] = size;
            w->live += size;
            w->allocs++;
            if (w->live > w->peak)
                w->peak = w->live;
        } else {
            int k = (int)((r >> 16) % (uint64_t)n);
            void *p = held[w->index][k];
            int was_managed = managed[w->index][k];
            w->live -= sizes[w->index][k];
            held[w->index][k] = held[w->index][n - 1];
            sizes[w->index][k] = sizes[w->index][n - 1];
            managed[w->index][k] = managed[w->index][n - 1];
            n--;
            if (was_managed || ((r >> 40) & 1))   /* ncclMemFree: device memory only */
                CUDA_OK(cudaFree(p));
            else
                NCCL_OK(ncclMemFree(p));
            w->frees++;
        }
    }
    return NULL;
}

static int test_threads(void)
{
    /* devices 0-3 have one thread each (exact peaks); device 4 has two */
    worker_t w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].index = i;
        w[i].device = i < 4 ? i : 4;
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cJSON *m = memory_json(-1);
    for (int i = 0; i < 4; i++)
        EXPECT_DEVICE(m, i, w[i].live, w[i].peak, w[i].allocs, w[i].frees);
    const cJSON *d4 = device_entry(m, 4);
    CHECK(d4 && (uint64_t)num(d4, "live_bytes") == w[4].live + w[5].live &&
          (uint64_t)num(d4, "allocs") == w[4].allocs + w[5].allocs &&
          (uint64_t)num(d4, "frees") == w[4].frees + w[5].frees &&
          (uint64_t)num(d4, "peak_bytes") >= (w[4].peak > w[5].peak ? w[4].peak : w[5].peak) &&
          (uint64_t)num(d4, "peak_bytes") <= w[4].peak + w[5].peak, "device 4");
    cJSON_Delete(m);
    for (int d = 0; d < 5; d++) {
        size_t fr, tot;
        CUDA_OK(cudaSetDevice(d));
        CUDA_OK(cudaMemGetInfo(&fr, &tot));
        const cJSON *de = device_entry(m = memory_json(d), d);
        CHECK((uint64_t)num(de, "live_bytes") == tot - fr, "device %d: shim %.0f, simulator %zu", d,
              num(de, "live_bytes"), tot - fr);
        cJSON_Delete(m);
    }
    return failures;
}

/* ---- allocations freed by other threads ----------------------------------- */

#define QLEN 64
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *p[QLEN];
    size_t size[QLEN];
    int n, done;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, {0}, 0, 0};
static uint64_t consumer_freed_bytes, consumer_frees;

static void *consumer(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&q.mu);
        while (q.n == 0 && !q.done)
            pthread_cond_wait(&q.cv, &q.mu);
        if (q.n == 0 && q.done) {
            pthread_mutex_unlock(&q.mu);
            return NULL;
        }
        void *p = q.p[--q.n];
        size_t size = q.size[q.n];
        pthread_cond_broadcast(&q.cv);
        pthread_mutex_unlock(&q.mu);
        CUDA_OK(cudaFree(p));
        consumer_freed_bytes += size;
        consumer_frees++;
    }
}

/* A thread that allocates, hands some pointers to the consumer thread, frees
 * some itself, and ends holding a few (its ring is emptied into the table). */
typedef struct { int index; void *kept[4]; size_t kept_size[4]; uint64_t allocs, bytes, own_frees, own_bytes; } producer_t;

static void *producer(void *arg)
{
    producer_t *pr = arg;
    uint64_t seed = 0x2545f4914f6cdd1dull * (uint64_t)(pr->index + 1);
    void *mine[16];
    size_t mine_size[16];
    int n = 0;
    CUDA_OK(cudaSetDevice(0));
    for (int i = 0; i < 20000; i++) {
        uint64_t r = rnd(&seed);
        size_t size = 1 + (size_t)(r >> 24) % 5000;
        void *p;
        CUDA_OK(cudaMalloc(&p, size));
        pr->allocs++;
        pr->bytes += size;
        if ((r & 3) == 0 && n < 16) {          /* keep for a while, free it ourselves */
            mine[n] = p;
            mine_size[n++] = size;
        } else {                               /* to the other thread, soon or late */
            pthread_mutex_lock(&q.mu);
            while (q.n == QLEN)
                pthread_cond_wait(&q.cv, &q.mu);
            q.p[q.n] = p;
            q.size[q.n++] = size;
            pthread_cond_broadcast(&q.cv);
            pthread_mutex_unlock(&q.mu);
        }
        if (n == 16 || (n && (r >> 50) % 5 == 0)) {
            int k = (int)((r >> 8) % (uint64_t)n);
            CUDA_OK(cudaFree(mine[k]));
            pr->own_frees++;
            pr->own_bytes += mine_size[k];
            mine[k] = mine[--n];
            mine_size[k] = mine_size[n];
        }
    }
    for (int k = 0; k < n; k++) {
        CUDA_OK(cudaFree(mine[k]));
        pr->own_frees++;
        pr->own_bytes += mine_size[k];
    }
    for (int k = 0; k < 4; k++) {              /* left live when the thread ends */
        CUDA_OK(cudaMalloc(&pr->kept[k], 1000 + (size_t)k));
        pr->kept_size[k] = 1000 + (size_t)k;
        pr->allocs++;
        pr->bytes += pr->kept_size[k];
    }
    return NULL;
}

static int test_crossthread(void)
{
    enum { P = 3, ROUNDS = 4 };
    pthread_t c;
    pthread_create(&c, NULL, consumer, NULL);
    uint64_t allocs = 0, frees = 0;
    void *kept[ROUNDS * P * 4];
    int nkept = 0;
    for (int round = 0; round < ROUNDS; round++) {   /* later rounds reuse the ended threads' rings */
        producer_t pr[P];
        pthread_t t[P];
        for (int i = 0; i < P; i++) {
            memset(&pr[i], 0, sizeof pr[i]);
            pr[i].index = round * P + i;
            pthread_create(&t[i], NULL, producer, &pr[i]);
        }
        for (int i = 0; i < P; i++) {
            pthread_join(t[i], NULL);
            allocs += pr[i].allocs;
            frees += pr[i].own_frees;
            for (int k = 0; k < 4; k++)
                kept[nkept++] = pr[i].kept[k];
        }
    }
    pthread_mutex_lock(&q.mu);
    q.done = 1;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.mu);
    pthread_join(c, NULL);
    frees += consumer_frees;
    uint64_t kept_bytes = 0;
    for (int i = 0; i < nkept; i++)
        kept_bytes += 1000 + (uint64_t)(i % 4);
    cJSON *m = memory_json(0);
    const cJSON *d = device_entry(m, 0);
    CHECK(d && (uint64_t)num(d, "live_bytes") == kept_bytes, "live %.0f, expected %llu",
          d ? num(d, "live_bytes") : -1, (unsigned long long)kept_bytes);
    CHECK(d && (uint64_t)num(d, "allocs") == allocs && (uint64_t)num(d, "frees") == frees,
          "allocs %.0f frees %.0f, expected %llu %llu", d ? num(d, "allocs") : -1,
          d ? num(d, "frees") : -1, (unsigned long long)allocs, (unsigned long long)frees);
    cJSON_Delete(m);
    /* the ended threads' allocations are found and freed from here */
    CUDA_OK(cudaSetDevice(0));
    for (int i = 0; i < nkept; i++)
        CUDA_OK(cudaFree(kept[i]));
    m = memory_json(0);
    d = device_entry(m, 0);
    CHECK(d && num(d, "live_bytes") == 0 && (uint64_t)num(d, "frees") == frees + (uint64_t)nkept,
          "live %.0f after freeing the ended threads' allocations", d ? num(d, "live_bytes") : -1);
    cJSON_Delete(m);
    size_t fr, tot;
    CUDA_OK(cudaMemGetInfo(&fr, &tot));
    CHECK(fr == tot, "the simulator agrees: %zu of %zu free", fr, tot);
    return failures;
}

/* ---- memory freed where the shim could not see it --------------------------- */

static int test_stale(void)
{
    typedef cudaError_t (*free_fn)(void *);
    free_fn raw_free = (free_fn)standin_next("cudaFree");
    CUDA_OK(cudaSetDevice(0));
    for (int round = 0; round < 2; round++) {
        /* round 0: the stale entry is still in the thread's ring; round 1:
         * it has moved to the table (8 younger allocations pushed it out).
         * 3 MiB: the simulator maps it, and the kernel hands the same
         * addresses out again after an unmap. */
        void *p, *again, *young[16];
        int nyoung = 0;
        CUDA_OK(cudaMalloc(&p, 3 * MiB));
        if (round == 1)
            while (nyoung < 8)
                CUDA_OK(cudaMalloc(&young[nyoung++], 100));
        CUDA_OK(raw_free(p));                       /* unseen by the shim */
        CUDA_OK(cudaMalloc(&again, 3 * MiB));       /* the allocator hands p out again */
        if (round == 1)                             /* push again out to the table too */
            while (nyoung < 16)
                CUDA_OK(cudaMalloc(&young[nyoung++], 100));
        int reused = again == p;
        if (!reused) {
            printf("stale round %d: the allocator did not reuse the address; not checked\n", round);
        } else {
            cJSON *m = memory_json(0);
            const cJSON *d = device_entry(m, 0);
            uint64_t want = 3 * MiB + 100 * (uint64_t)nyoung;
            CHECK(d && (uint64_t)num(d, "live_bytes") == want,
                  "round %d: live %.0f, expected %llu (the stale entry uncounted)", round,
                  d ? num(d, "live_bytes") : -1, (unsigned long long)want);
            cJSON_Delete(m);
        }
        CUDA_OK(cudaFree(again));
        while (nyoung > 0)
            CUDA_OK(cudaFree(young[--nyoung]));
        if (reused) {
            cJSON *m = memory_json(0);
            const cJSON *d = device_entry(m, 0);
            CHECK(d && num(d, "live_bytes") == 0, "round %d: live %.0f at the end", round,
                  d ? num(d, "live_bytes") : -1);
            cJSON_Delete(m);
        }
    }
    return failures;
}

static int test_disabled(void)
{
    standin_disabled = 1;
    void *p;
    CUDA_OK(cudaMalloc(&p, 4096));
    CHECK(cudaMalloc(&p, 4 * GiB) == cudaErrorMemoryAllocation, "fails as usual");
    (void)cudaGetLastError();
    CUDA_OK(cudaFree(p));
    cJSON *m = memory_json(-1);
    CHECK(array_size(m, "devices") == 0 && array_size(m, "failures") == 0, "nothing recorded");
    CHECK(atomic_load(&standin_activations) == 0, "never activated");
    failures += mirror_check_unused();
    cJSON_Delete(m);
    return failures;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int r;
    if (!strcmp(mode, "accounting")) r = test_accounting();
    else if (!strcmp(mode, "failures")) r = test_failures();
    else if (!strcmp(mode, "many")) r = test_many_failures();
    else if (!strcmp(mode, "threads")) r = test_threads();
    else if (!strcmp(mode, "disabled")) r = test_disabled();
    else if (!strcmp(mode, "crossthread")) r = test_crossthread();
    else if (!strcmp(mode, "stale")) r = test_stale();
    else {
        fprintf(stderr, "usage: %s accounting|failures|many|threads|crossthread|stale|disabled\n", argv[0]);
        return 2;
    }
    CHECK(atomic_load(&standin_warnings) == 0, "%d warnings", atomic_load(&standin_warnings));
    r = failures;
    printf("%s: %s\n", mode, r ? "FAILED" : "ok");
    return r ? 1 : 0;
}
