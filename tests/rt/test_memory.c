/* Allocation: exact capacity accounting, failures that leave nothing
 * behind, alignment, every kind of memory and its pointer attributes,
 * registration, per-device capacity, stream-ordered allocation and pools.
 * Runs with TRSIM_DEVICE_COUNT=2 and TRSIM_DEVICE_MEM=64MiB. */
#include "rttest.h"

#define CAPACITY ((size_t)64 << 20)

static size_t free_bytes(void)
{
    size_t f = 0, t = 0;
    CUDACHECK(cudaMemGetInfo(&f, &t));
    EXPECT(t == CAPACITY, "total %zu", t);
    return f;
}

static void expect_attributes(const void *p, enum cudaMemoryType type, int device,
                              const void *dev_ptr, const void *host_ptr)
{
    struct cudaPointerAttributes a;
    CUDACHECK(cudaPointerGetAttributes(&a, p));
    EXPECT(a.type == type, "%p: type %d, expected %d", p, a.type, type);
    EXPECT(a.device == device, "%p: device %d, expected %d", p, a.device, device);
    EXPECT(a.devicePointer == dev_ptr, "%p: devicePointer %p", p, a.devicePointer);
    EXPECT(a.hostPointer == host_ptr, "%p: hostPointer %p", p, a.hostPointer);
}

static void *open_later(void *arg)
{
    rt_sleep_ms(100);
    rt_gate_open(arg);
    return NULL;
}

static void test_capacity(void)
{
    void *a = NULL, *b = NULL, *c = (void *)0x1;
    EXPECT(free_bytes() == CAPACITY, "fresh device is empty");
    CUDACHECK(cudaMalloc(&a, 1000));
    EXPECT(free_bytes() == CAPACITY - 1000, "exact bytes are counted: %zu", free_bytes());
    for (int i = 0; i < 1000; i++)
        EXPECT(((unsigned char *)a)[i] == 0, "fresh memory reads as zero");

    CUDACHECK(cudaMalloc(&b, CAPACITY - 1000));       /* exactly full */
    EXPECT(free_bytes() == 0, "full: %zu free", free_bytes());
    EXPECT_ERR(cudaMalloc(&c, 1), cudaErrorMemoryAllocation);
    EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation, "the failure is the last error");
    EXPECT(free_bytes() == 0, "a failed allocation takes nothing");
    CUDACHECK(cudaFree(b));
    EXPECT_ERR(cudaMalloc(&c, CAPACITY), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaMalloc(&c, SIZE_MAX), cudaErrorMemoryAllocation);
    EXPECT(free_bytes() == CAPACITY - 1000, "failed allocations take nothing");
    EXPECT_ERR(cudaMallocManaged(&c, CAPACITY, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
    CUDACHECK(cudaFree(a));
    EXPECT(free_bytes() == CAPACITY, "all returned");

    /* Zero bytes: success and NULL; no pointer to store into: an error. */
    c = (void *)0x1;
    CUDACHECK(cudaMalloc(&c, 0));
    EXPECT(c == NULL, "cudaMalloc(0) gives NULL");
    EXPECT_ERR(cudaMalloc(NULL, 16), cudaErrorInvalidValue);

    /* 256-byte alignment, whatever the sizes. */
    void *ptrs[40];
    for (int i = 0; i < 40; i++) {
        CUDACHECK(cudaMalloc(&ptrs[i], (size_t)(i * 37 + 1) << (i % 12)));
        EXPECT((uintptr_t)ptrs[i] % 256 == 0, "alignment of %p", ptrs[i]);
    }
    for (int i = 0; i < 40; i++)
        CUDACHECK(cudaFree(ptrs[i]));
    EXPECT(free_bytes() == CAPACITY, "all returned");
}

static void test_free_errors(void)
{
    void *p, *h;
    int local;
    CUDACHECK(cudaMalloc(&p, 4096));
    CUDACHECK(cudaMallocHost(&h, 4096));
    CUDACHECK(cudaFree(NULL));
    EXPECT_ERR(cudaFree((char *)p + 256), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree(&local), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree(h), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFreeHost(p), cudaErrorInvalidValue);
    CUDACHECK(cudaFree(p));
    EXPECT_ERR(cudaFree(p), cudaErrorInvalidValue);
    CUDACHECK(cudaFreeHost(h));
    EXPECT_ERR(cudaFreeHost(h), cudaErrorInvalidValue);
    CUDACHECK(cudaFreeHost(NULL));
    (void)cudaGetLastError();
}

static void test_kinds_and_attributes(void)
{
    int local = 0;
    void *d, *h, *m, *p;
    size_t pitch = 0;

    CUDACHECK(cudaSetDevice(1));
    CUDACHECK(cudaMalloc(&d, 1 << 20));
    CUDACHECK(cudaMallocHost(&h, 3000));
    CUDACHECK(cudaMallocManaged(&m, 5000, cudaMemAttachGlobal));
    CUDACHECK(cudaSetDevice(0));

    expect_attributes(d, cudaMemoryTypeDevice, 1, d, NULL);
    expect_attributes((char *)d + 12345, cudaMemoryTypeDevice, 1, (char *)d + 12345, NULL);
    expect_attributes((char *)d + (1 << 20) - 1, cudaMemoryTypeDevice, 1, (char *)d + (1 << 20) - 1, NULL);
    expect_attributes(h, cudaMemoryTypeHost, 1, h, h);
    expect_attributes((char *)h + 2999, cudaMemoryTypeHost, 1, (char *)h + 2999, (char *)h + 2999);
    expect_attributes(m, cudaMemoryTypeManaged, 1, m, m);
    expect_attributes((char *)m + 10, cudaMemoryTypeManaged, 1, (char *)m + 10, (char *)m + 10);
    expect_attributes(&local, cudaMemoryTypeUnregistered, cudaInvalidDeviceId, NULL, &local);
    EXPECT_ERR(cudaPointerGetAttributes(NULL, d), cudaErrorInvalidValue);

    /* Managed memory counts against the device; pinned host memory does not. */
    CUDACHECK(cudaSetDevice(1));
    EXPECT(free_bytes() == CAPACITY - (1 << 20) - 5000, "device 1 used: %zu free", free_bytes());
    CUDACHECK(cudaSetDevice(0));
    EXPECT(free_bytes() == CAPACITY, "device 0 untouched");
    CUDACHECK(cudaFree(m));
    expect_attributes(m, cudaMemoryTypeUnregistered, cudaInvalidDeviceId, NULL, m);
    CUDACHECK(cudaFree(d));
    CUDACHECK(cudaFreeHost(h));

    EXPECT_ERR(cudaMallocManaged(&m, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMallocManaged(&m, 64, 0), cudaErrorInvalidValue);
    CUDACHECK(cudaMallocManaged(&m, 64, cudaMemAttachHost));
    /* Hints and prefetches are for managed memory only. */
    struct cudaMemLocation loc = {.type = cudaMemLocationTypeDevice, .id = 1};
    CUDACHECK(cudaMemPrefetchAsync(m, 64, loc, 0, 0));
    CUDACHECK(cudaMemAdvise((char *)m + 8, 8, cudaMemAdviseSetPreferredLocation, loc));
    CUDACHECK(cudaStreamAttachMemAsync(0, m, 0, cudaMemAttachSingle));
    EXPECT_ERR(cudaMemPrefetchAsync(m, 65, loc, 0, 0), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemPrefetchAsync(&local, 4, loc, 0, 0), cudaErrorInvalidValue);
    loc.id = 9;
    EXPECT_ERR(cudaMemPrefetchAsync(m, 64, loc, 0, 0), cudaErrorInvalidDevice);
    CUDACHECK(cudaFree(m));

    /* Pitched allocations: rows rounded up to 512 bytes. */
    CUDACHECK(cudaMallocPitch(&p, &pitch, 100, 10));
    EXPECT(pitch == 512, "pitch %zu", pitch);
    EXPECT(free_bytes() == CAPACITY - 5120, "pitch * height counted");
    CUDACHECK(cudaFree(p));
    CUDACHECK(cudaMallocPitch(&p, &pitch, 513, 3));
    EXPECT(pitch == 1024, "pitch %zu", pitch);
    CUDACHECK(cudaFree(p));

    /* Host allocation flags and mapped pointers. */
    void *dev_alias = NULL;
    unsigned flags = 0;
    EXPECT_ERR(cudaHostAlloc(&h, 64, 0x10), cudaErrorInvalidValue);
    CUDACHECK(cudaHostAlloc(&h, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    CUDACHECK(cudaHostGetFlags(&flags, h));
    EXPECT(flags == (cudaHostAllocMapped | cudaHostAllocPortable), "flags %#x", flags);
    CUDACHECK(cudaHostGetDevicePointer(&dev_alias, (char *)h + 8, 0));
    EXPECT(dev_alias == (char *)h + 8, "unified addressing: same address");
    EXPECT_ERR(cudaHostGetDevicePointer(&dev_alias, h, 1), cudaErrorInvalidValue);
    EXPECT_ERR(cudaHostGetDevicePointer(&dev_alias, &local, 0), cudaErrorInvalidValue);
    CUDACHECK(cudaFreeHost(h));
    CUDACHECK(cudaHostAlloc(&h, 0, 0));
    EXPECT(h == NULL, "zero bytes of host memory: NULL");

    /* Registration of the application's memory. */
    char *buf = malloc(8192);
    CUDACHECK(cudaHostRegister(buf, 8192, cudaHostRegisterDefault));
    expect_attributes(buf + 100, cudaMemoryTypeHost, 0, buf + 100, buf + 100);
    EXPECT_ERR(cudaHostRegister(buf + 4096, 100, 0), cudaErrorHostMemoryAlreadyRegistered);
    EXPECT_ERR(cudaHostRegister(buf - 100, 200, 0), cudaErrorHostMemoryAlreadyRegistered);
    EXPECT_ERR(cudaHostRegister(NULL, 100, 0), cudaErrorInvalidValue);
    EXPECT_ERR(cudaHostRegister(buf, 0, 0), cudaErrorInvalidValue);
    EXPECT_ERR(cudaHostUnregister(buf + 1), cudaErrorHostMemoryNotRegistered);
    EXPECT_ERR(cudaHostUnregister(&local), cudaErrorHostMemoryNotRegistered);
    CUDACHECK(cudaHostGetDevicePointer(&dev_alias, buf, 0));
    EXPECT_ERR(cudaFreeHost(buf), cudaErrorInvalidValue);
    CUDACHECK(cudaHostUnregister(buf));
    EXPECT_ERR(cudaHostUnregister(buf), cudaErrorHostMemoryNotRegistered);
    expect_attributes(buf, cudaMemoryTypeUnregistered, cudaInvalidDeviceId, NULL, buf);
    free(buf);
    (void)cudaGetLastError();
}

static void test_devices(void)
{
    void *a, *b;
    /* Capacity is per device: both can be filled. */
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaMalloc(&a, CAPACITY));
    CUDACHECK(cudaSetDevice(1));
    EXPECT(free_bytes() == CAPACITY, "device 1 still empty");
    CUDACHECK(cudaMalloc(&b, CAPACITY));
    EXPECT(free_bytes() == 0, "device 1 full");
    CUDACHECK(cudaSetDevice(0));
    EXPECT(free_bytes() == 0, "device 0 full");
    CUDACHECK(cudaFree(b));     /* freeing works from any current device */
    CUDACHECK(cudaSetDevice(1));
    EXPECT(free_bytes() == CAPACITY, "device 1 empty again");
    CUDACHECK(cudaFree(a));
    CUDACHECK(cudaSetDevice(0));
    EXPECT(free_bytes() == CAPACITY, "device 0 empty again");
}

static void test_free_synchronizes(void)
{
    cudaStream_t s;
    rt_gate gate;
    void *p;
    pthread_t opener;
    rt_gate_init(&gate);
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc(&p, 64));
    CUDACHECK(cudaLaunchHostFunc(s, rt_gate_pass, &gate));
    pthread_create(&opener, NULL, open_later, &gate);
    CUDACHECK(cudaFree(p));     /* waits for the device's pending work */
    EXPECT(gate.open, "cudaFree returned while the device still had work");
    CUDACHECK(cudaStreamQuery(s));
    pthread_join(opener, NULL);
    CUDACHECK(cudaStreamDestroy(s));
}

static void test_stream_ordered(void)
{
    cudaStream_t s;
    rt_gate gate;
    void *p, *q;
    cudaMemPool_t pool, pool1, current;
    uint64_t value;
    rt_gate_init(&gate);
    CUDACHECK(cudaStreamCreate(&s));
    CUDACHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CUDACHECK(cudaDeviceGetMemPool(&current, 0));
    EXPECT(pool == current, "the default pool is current");
    CUDACHECK(cudaDeviceGetDefaultMemPool(&pool1, 1));
    EXPECT(pool1 != pool, "one pool per device");
    EXPECT_ERR(cudaDeviceGetDefaultMemPool(&pool, 5), cudaErrorInvalidDevice);

    CUDACHECK(cudaLaunchHostFunc(s, rt_gate_pass, &gate));
    CUDACHECK(cudaMallocAsync(&p, 4096, s));
    EXPECT(p != NULL && free_bytes() == CAPACITY - 4096, "allocated at once");
    CUDACHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &value));
    EXPECT(value == 4096, "pool in use: %llu", (unsigned long long)value);
    CUDACHECK(cudaFreeAsync(p, s));
    EXPECT(free_bytes() == CAPACITY - 4096, "the free waits for the stream");
    EXPECT_ERR(cudaFreeAsync(p, s), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree(p), cudaErrorInvalidValue);
    EXPECT(cudaStreamQuery(s) == cudaErrorNotReady, "the stream is held");
    rt_gate_open(&gate);
    CUDACHECK(cudaStreamSynchronize(s));
    EXPECT(free_bytes() == CAPACITY, "freed when the stream reached it");
    CUDACHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &value));
    EXPECT(value == 0, "pool empty: %llu", (unsigned long long)value);
    CUDACHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &value));
    EXPECT(value == 4096, "high water mark: %llu", (unsigned long long)value);
    value = 0;
    CUDACHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &value));
    CUDACHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &value));
    EXPECT(value == 0, "high water mark reset");
    value = 1;
    EXPECT_ERR(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &value), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &value), cudaErrorInvalidValue);
    value = UINT64_MAX;
    CUDACHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &value));
    value = 0;
    CUDACHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &value));
    EXPECT(value == UINT64_MAX, "release threshold kept");
    CUDACHECK(cudaMemPoolTrimTo(pool, 0));

    /* A pool allocates on its own device, whatever the current one. */
    CUDACHECK(cudaMallocFromPoolAsync(&q, 1000, pool1, s));
    CUDACHECK(cudaSetDevice(1));
    EXPECT(free_bytes() == CAPACITY - 1000, "allocated on device 1");
    CUDACHECK(cudaSetDevice(0));
    EXPECT(free_bytes() == CAPACITY, "not on device 0");
    CUDACHECK(cudaFree(q));     /* cudaFree takes stream-ordered memory too */
    CUDACHECK(cudaFreeAsync(NULL, s));
    CUDACHECK(cudaStreamDestroy(s));
    (void)cudaGetLastError();
}

int main(void)
{
    rt_watchdog(40);
    test_capacity();
    test_free_errors();
    test_kinds_and_attributes();
    test_devices();
    test_free_synchronizes();
    test_stream_ordered();
    EXPECT(cudaGetLastError() == cudaSuccess, "no stray error");
    printf("memory OK\n");
    return 0;
}
