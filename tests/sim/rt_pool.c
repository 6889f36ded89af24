/* Memory pools and stream-ordered allocation (cudaMallocAsync & co).
 * The memory itself comes from rt_memory.c, which reports every allocation
 * and free of pool memory back here (trsim_pool_account) for the pools'
 * statistics. cudaFreeAsync lives in rt_memory.c, beside the table it marks. */
#include <pthread.h>
#include <stdint.h>

#include "sim_internal.h"

/* Guards current_pools[] and the pools' statistics. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* Memory pools: one default pool per device. Allocations are returned to
 * the system as soon as they are freed, so a pool never holds memory in
 * reserve beyond what is in use. */
struct CUmemPoolHandle_st {
    int device;
    uint64_t release_threshold;
    int reuse[3];               /* cudaMemPoolReuse* attributes 1..3 */
    size_t used_current, used_high, reserved_high;
};
static struct CUmemPoolHandle_st default_pools[TRSIM_MAX_DEVICES];
static cudaMemPool_t current_pools[TRSIM_MAX_DEVICES];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;

/* ---- pools --------------------------------------------------------------- */

static void pools_init(void)
{
    for (int i = 0; i < TRSIM_MAX_DEVICES; i++) {
        default_pools[i].device = i;
        for (int r = 0; r < 3; r++)
            default_pools[i].reuse[r] = 1;
        current_pools[i] = &default_pools[i];
    }
}

static int pool_valid(cudaMemPool_t pool)
{
    return pool >= &default_pools[0] && pool < &default_pools[trsim_device_count()];
}

void trsim_pool_account(cudaMemPool_t pool, size_t size, int add)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool_lock);
    if (add) {
        pool->used_current += size;
        if (pool->used_current > pool->used_high)
            pool->used_high = pool->used_current;
        if (pool->used_current > pool->reserved_high)
            pool->reserved_high = pool->used_current;
    } else {
        pool->used_current -= size;
    }
    pthread_mutex_unlock(&pool_lock);
}

/* ---- the API ------------------------------------------------------------- */

static cudaError_t pool_get(cudaMemPool_t pool)
{
    pthread_once(&pools_once, pools_init);
    return pool_valid(pool) ? cudaSuccess : cudaErrorInvalidValue;
}

/* The checks of cudaDeviceGet(Default)MemPool: an out-pointer and a device. */
static cudaError_t device_pool_query(const cudaMemPool_t *memPool, int device)
{
    pthread_once(&pools_once, pools_init);
    if (!memPool)
        return cudaErrorInvalidValue;
    if (device < 0 || device >= trsim_device_count())
        return cudaErrorInvalidDevice;
    return cudaSuccess;
}

/* The checks of cudaMemPoolGet/SetAttribute: a pool and a value pointer. */
static cudaError_t pool_attribute_check(cudaMemPool_t pool, const void *value)
{
    cudaError_t err = pool_get(pool);
    if (err == cudaSuccess && !value)
        err = cudaErrorInvalidValue;
    return err;
}

/* Graphs' memory nodes are not simulated: an allocation on a capturing
 * stream fails loudly. */
static cudaError_t capture_refused(trsim_stream *s)
{
    if (trsim_stream_capturing(s))
        return trsim_capture_refuse(s, cudaErrorNotSupported, "cudaMallocAsync (a graph memory node)");
    return trsim_capture_check(s, TRSIM_CAPTURE_ENQUEUE);
}

TRSIM_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                              cudaStream_t stream)
{
    trsim_stream *s;
    cudaError_t err = pool_get(memPool);
    if (err == cudaSuccess)
        err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess)
        err = capture_refused(s);
    if (err != cudaSuccess)
        return trsim_error(err);
    /* The memory exists at once; using it before the stream reaches this
     * point is as harmless as on a GPU whose pool already had it. */
    return trsim_error(trsim_mem_alloc_pool(ptr, size, memPool->device, memPool));
}

TRSIM_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    trsim_stream *s;
    pthread_once(&pools_once, pools_init);
    cudaError_t err = trsim_stream_get(hStream, &s);
    if (err == cudaSuccess)
        err = capture_refused(s);
    if (err != cudaSuccess)
        return trsim_error(err);
    pthread_mutex_lock(&pool_lock);
    cudaMemPool_t pool = current_pools[trsim_stream_device(s)];
    pthread_mutex_unlock(&pool_lock);
    /* The stream and the pool are valid: as cudaMallocFromPoolAsync. */
    return trsim_error(trsim_mem_alloc_pool(devPtr, size, pool->device, pool));
}

TRSIM_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    cudaError_t err = device_pool_query(memPool, device);
    if (err != cudaSuccess)
        return trsim_error(err);
    *memPool = &default_pools[device];
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    cudaError_t err = device_pool_query(memPool, device);
    if (err != cudaSuccess)
        return trsim_error(err);
    pthread_mutex_lock(&pool_lock);
    *memPool = current_pools[device];
    pthread_mutex_unlock(&pool_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
    cudaError_t err = pool_get(memPool);
    if (err != cudaSuccess)
        return trsim_error(err);
    if (device < 0 || device >= trsim_device_count())
        return trsim_error(cudaErrorInvalidDevice);
    if (memPool->device != device)
        return trsim_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_lock);
    current_pools[device] = memPool;
    pthread_mutex_unlock(&pool_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                              void *value)
{
    cudaError_t err = pool_attribute_check(memPool, value);
    if (err != cudaSuccess)
        return trsim_error(err);
    pthread_mutex_lock(&pool_lock);
    switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies:
        memPool->reuse[attr - 1] = *(int *)value != 0;
        break;
    case cudaMemPoolAttrReleaseThreshold:
        memPool->release_threshold = *(uint64_t *)value;
        break;
    case cudaMemPoolAttrReservedMemHigh:    /* may only be reset, to zero */
        if (*(uint64_t *)value != 0)
            err = cudaErrorInvalidValue;
        else
            memPool->reserved_high = memPool->used_current;
        break;
    case cudaMemPoolAttrUsedMemHigh:
        if (*(uint64_t *)value != 0)
            err = cudaErrorInvalidValue;
        else
            memPool->used_high = memPool->used_current;
        break;
    default:                                /* read-only or unknown */
        err = cudaErrorInvalidValue;
    }
    pthread_mutex_unlock(&pool_lock);
    return trsim_error(err);
}

TRSIM_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                              void *value)
{
    cudaError_t err = pool_attribute_check(memPool, value);
    if (err != cudaSuccess)
        return trsim_error(err);
    pthread_mutex_lock(&pool_lock);
    switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies:
        *(int *)value = memPool->reuse[attr - 1];
        break;
    case cudaMemPoolAttrReleaseThreshold:
        *(uint64_t *)value = memPool->release_threshold;
        break;
    case cudaMemPoolAttrReservedMemCurrent:   /* nothing is held beyond use */
    case cudaMemPoolAttrUsedMemCurrent:
        *(uint64_t *)value = memPool->used_current;
        break;
    case cudaMemPoolAttrReservedMemHigh:
        *(uint64_t *)value = memPool->reserved_high;
        break;
    case cudaMemPoolAttrUsedMemHigh:
        *(uint64_t *)value = memPool->used_high;
        break;
    default:
        err = cudaErrorInvalidValue;
    }
    pthread_mutex_unlock(&pool_lock);
    return trsim_error(err);
}

TRSIM_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;       /* the pools keep nothing to trim */
    return trsim_error(pool_get(memPool));
}

/* ---- per-thread default stream variants ---------------------------------- */

TRSIM_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return cudaMallocAsync(devPtr, size, TRSIM_PTSZ(hStream));
}

TRSIM_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                   cudaStream_t stream)
{
    return cudaMallocFromPoolAsync(ptr, size, memPool, TRSIM_PTSZ(stream));
}
