/* Simulated device memory: allocations live in host memory, recorded in one
 * process-wide table that answers "which allocation contains this address"
 * in O(log n) (a treap ordered by base address, under a read-write lock).
 *
 * Device and managed allocations count their exact requested size against
 * the device's capacity (TRSIM_DEVICE_MEM). Large allocations are anonymous
 * mappings reserved without swap, so an 80 GiB device costs nothing until
 * the program touches its memory; small ones come from the C heap. Fresh
 * memory reads as zeros either way. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_internal.h"

#define ALLOC_ALIGN 256                 /* cudaMalloc's guaranteed alignment */
#define MMAP_THRESHOLD (1u << 20)       /* from this size on, a mapping of its own */
#define PITCH_ALIGN 512                 /* cudaMallocPitch's row alignment */

enum origin {
    ORIGIN_HEAP,        /* ours, from aligned_alloc */
    ORIGIN_MMAP,        /* ours, an anonymous mapping */
    ORIGIN_REGISTERED,  /* the application's memory, cudaHostRegister */
    ORIGIN_MAPPING,     /* a cuMemMap range (rt_driver.c) */
};

struct mem_entry {
    uintptr_t base;
    size_t size;                /* as asked */
    size_t backing_len;         /* ORIGIN_MMAP: bytes mapped */
    int device;
    trsim_mem_kind kind;
    unsigned flags;
    enum origin origin;
    int free_pending;           /* a cudaFreeAsync for it is queued */
    cudaMemPool_t pool;         /* cudaMallocAsync's pool, else NULL */
    uint64_t prio;
    struct mem_entry *left, *right;
};

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct mem_entry *table;

/* Guards used[]. */
static pthread_mutex_t capacity_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t used[TRSIM_MAX_DEVICES];

/* ---- the table ----------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

static uintptr_t entry_end(const struct mem_entry *e)
{
    return e->base + (e->size ? e->size : 1);
}

static struct mem_entry *rotate_right(struct mem_entry *t)
{
    struct mem_entry *l = t->left;
    t->left = l->right;
    l->right = t;
    return l;
}

static struct mem_entry *rotate_left(struct mem_entry *t)
{
    struct mem_entry *r = t->right;
    t->right = r->left;
    r->left = t;
    return r;
}

static struct mem_entry *tree_insert(struct mem_entry *t, struct mem_entry *n)
{
    if (!t)
        return n;
    if (n->base < t->base) {
        t->left = tree_insert(t->left, n);
        if (t->left->prio > t->prio)
            t = rotate_right(t);
    } else {
        t->right = tree_insert(t->right, n);
        if (t->right->prio > t->prio)
            t = rotate_left(t);
    }
    return t;
}

static struct mem_entry *tree_merge(struct mem_entry *a, struct mem_entry *b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (a->prio > b->prio) {
        a->right = tree_merge(a->right, b);
        return a;
    }
    b->left = tree_merge(a, b->left);
    return b;
}

static struct mem_entry *tree_remove(struct mem_entry *t, uintptr_t base)
{
    if (!t)
        return NULL;
    if (base < t->base)
        t->left = tree_remove(t->left, base);
    else if (base > t->base)
        t->right = tree_remove(t->right, base);
    else
        return tree_merge(t->left, t->right);
    return t;
}

/* The entry with the greatest base <= p. */
static struct mem_entry *tree_floor(uintptr_t p)
{
    struct mem_entry *t = table, *best = NULL;
    while (t) {
        if (t->base <= p) {
            best = t;
            t = t->right;
        } else {
            t = t->left;
        }
    }
    return best;
}

/* The entry with the smallest base >= p. */
static struct mem_entry *tree_ceil(uintptr_t p)
{
    struct mem_entry *t = table, *best = NULL;
    while (t) {
        if (t->base >= p) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

static struct mem_entry *table_containing(uintptr_t p)
{
    struct mem_entry *e = tree_floor(p);
    return e && p < entry_end(e) ? e : NULL;
}

/* The entry based exactly at p, or NULL. */
static struct mem_entry *table_at(const void *p)
{
    struct mem_entry *e = tree_floor((uintptr_t)p);
    return e && e->base == (uintptr_t)p ? e : NULL;
}

/* Some entry overlapping [lo, hi), or NULL. */
static struct mem_entry *table_overlap(uintptr_t lo, uintptr_t hi)
{
    struct mem_entry *e = table_containing(lo);
    if (e)
        return e;
    e = tree_ceil(lo);
    return e && e->base < hi ? e : NULL;
}

/* With the write lock held. */
static void table_insert(struct mem_entry *e)
{
    e->prio = mix64(e->base);
    e->left = e->right = NULL;
    table = tree_insert(table, e);
}

static void table_remove(struct mem_entry *e)
{
    table = tree_remove(table, e->base);
}

static int owned(const struct mem_entry *e)
{
    return e->origin == ORIGIN_HEAP || e->origin == ORIGIN_MMAP;
}

static void entry_info(const struct mem_entry *e, trsim_alloc_info *out)
{
    out->base = (void *)e->base;
    out->size = e->size;
    out->device = e->device;
    out->kind = e->kind;
    out->flags = e->flags;
}

/* ---- capacity -------------------------------------------------------- */

int trsim_mem_reserve(int device, size_t bytes)
{
    if (device < 0 || device >= trsim_device_count())
        return -1;
    size_t capacity = trsim_device_capacity();
    int ok;
    pthread_mutex_lock(&capacity_lock);
    ok = used[device] <= capacity && bytes <= capacity - used[device];
    if (ok)
        used[device] += bytes;
    pthread_mutex_unlock(&capacity_lock);
    return ok ? 0 : -1;
}

void trsim_mem_unreserve(int device, size_t bytes)
{
    pthread_mutex_lock(&capacity_lock);
    used[device] -= bytes;
    pthread_mutex_unlock(&capacity_lock);
}

size_t trsim_mem_used(int device)
{
    if (device < 0 || device >= TRSIM_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&capacity_lock);
    size_t n = used[device];
    pthread_mutex_unlock(&capacity_lock);
    return n;
}

/* ---- allocation ---------------------------------------------------------- */

static cudaError_t mem_alloc(void **ptr, size_t size, int device, trsim_mem_kind kind,
                             unsigned flags, cudaMemPool_t pool, int own_mapping)
{
    if (!ptr)
        return cudaErrorInvalidValue;
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    int counted = kind != TRSIM_MEM_HOST;
    if (counted && (device < 0 || device >= trsim_device_count()))
        return cudaErrorInvalidDevice;
    if (size > SIZE_MAX / 2)
        return cudaErrorMemoryAllocation;
    if (counted && trsim_mem_reserve(device, size) != 0)
        return cudaErrorMemoryAllocation;

    struct mem_entry *e = calloc(1, sizeof *e);
    void *mem = NULL;
    if (e && (size >= MMAP_THRESHOLD || own_mapping)) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        e->backing_len = (size + page - 1) / page * page;
        mem = mmap(NULL, e->backing_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mem == MAP_FAILED)
            mem = NULL;
        e->origin = ORIGIN_MMAP;
    } else if (e) {
        size_t len = (size + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN;
        mem = aligned_alloc(ALLOC_ALIGN, len);
        if (mem)
            memset(mem, 0, len);
        e->origin = ORIGIN_HEAP;
    }
    if (!mem) {
        free(e);
        if (counted)
            trsim_mem_unreserve(device, size);
        return cudaErrorMemoryAllocation;
    }
    e->base = (uintptr_t)mem;
    e->size = size;
    e->device = device;
    e->kind = kind;
    e->flags = flags;
    e->pool = pool;

    pthread_rwlock_wrlock(&table_lock);
    /* Fresh memory can only overlap a registration whose memory the
     * application released without cudaHostUnregister: drop those. */
    struct mem_entry *stale;
    while ((stale = table_overlap(e->base, entry_end(e))) && stale->origin == ORIGIN_REGISTERED) {
        table_remove(stale);
        free(stale);
    }
    table_insert(e);
    pthread_rwlock_unlock(&table_lock);
    trsim_pool_account(pool, size, 1);
    *ptr = mem;
    return cudaSuccess;
}

cudaError_t trsim_mem_alloc(void **ptr, size_t size, int device,
                            trsim_mem_kind kind, unsigned flags)
{
    return mem_alloc(ptr, size, device, kind, flags, NULL, 0);
}

cudaError_t trsim_mem_alloc_pool(void **ptr, size_t size, int device, cudaMemPool_t pool)
{
    return mem_alloc(ptr, size, device, TRSIM_MEM_DEVICE, 0, pool, 0);
}

cudaError_t trsim_mem_alloc_mapped(void **ptr, size_t size, int device)
{
    return mem_alloc(ptr, size, device, TRSIM_MEM_DEVICE, 0, NULL, 1);
}

int trsim_mem_own_mapping(const void *p, size_t size, trsim_alloc_info *out)
{
    pthread_rwlock_rdlock(&table_lock);
    struct mem_entry *e = table_containing((uintptr_t)p);
    int ok = e && e->origin == ORIGIN_MMAP && e->kind != TRSIM_MEM_HOST &&
             size <= e->base + e->size - (uintptr_t)p;
    if (ok && out)
        entry_info(e, out);
    pthread_rwlock_unlock(&table_lock);
    return ok;
}

static void entry_release(struct mem_entry *e)
{
    if (e->origin == ORIGIN_MMAP) {
        trsim_window_memory_freed((void *)e->base, e->backing_len);
        munmap((void *)e->base, e->backing_len);
    }
    else
        free((void *)e->base);
    if (e->kind != TRSIM_MEM_HOST)
        trsim_mem_unreserve(e->device, e->size);
    trsim_pool_account(e->pool, e->size, 0);
    free(e);
}

/* Frees our allocation at ptr of the given kind; a pending cudaFreeAsync
 * makes it invalid unless that free is the caller. */
static cudaError_t mem_free(void *ptr, trsim_mem_kind kind, int async_free)
{
    pthread_rwlock_wrlock(&table_lock);
    struct mem_entry *e = table_at(ptr);
    if (!e || e->kind != kind || !owned(e) ||
        e->free_pending != async_free) {
        pthread_rwlock_unlock(&table_lock);
        return cudaErrorInvalidValue;
    }
    table_remove(e);
    pthread_rwlock_unlock(&table_lock);
    entry_release(e);
    return cudaSuccess;
}

cudaError_t trsim_mem_free(void *ptr, trsim_mem_kind kind)
{
    return mem_free(ptr, kind, 0);
}

int trsim_mem_lookup(const void *p, trsim_alloc_info *out)
{
    pthread_rwlock_rdlock(&table_lock);
    struct mem_entry *e = table_containing((uintptr_t)p);
    if (e && out)
        entry_info(e, out);
    pthread_rwlock_unlock(&table_lock);
    return e != NULL;
}

/* Registers [base, base + size) of the given origin; fails when it overlaps
 * anything known. */
static cudaError_t range_add(void *base, size_t size, int device, trsim_mem_kind kind,
                             unsigned flags, enum origin origin)
{
    struct mem_entry *e = calloc(1, sizeof *e);
    if (!e)
        return cudaErrorMemoryAllocation;
    e->base = (uintptr_t)base;
    e->size = size;
    e->device = device;
    e->kind = kind;
    e->flags = flags;
    e->origin = origin;
    pthread_rwlock_wrlock(&table_lock);
    if (table_overlap(e->base, entry_end(e))) {
        pthread_rwlock_unlock(&table_lock);
        free(e);
        return origin == ORIGIN_REGISTERED ? cudaErrorHostMemoryAlreadyRegistered
                                           : cudaErrorInvalidValue;
    }
    table_insert(e);
    pthread_rwlock_unlock(&table_lock);
    return cudaSuccess;
}

static int range_remove(void *base, enum origin origin)
{
    pthread_rwlock_wrlock(&table_lock);
    struct mem_entry *e = table_at(base);
    int found = e && e->origin == origin;
    if (found)
        table_remove(e);
    pthread_rwlock_unlock(&table_lock);
    if (found)
        free(e);
    return found;
}

cudaError_t trsim_mem_add_mapping(void *base, size_t size, int device)
{
    return range_add(base, size, device, TRSIM_MEM_DEVICE, 0, ORIGIN_MAPPING);
}

cudaError_t trsim_mem_remove_mapping(void *base)
{
    return range_remove(base, ORIGIN_MAPPING) ? cudaSuccess : cudaErrorInvalidValue;
}

/* The origin of the live allocation based exactly at p, or -1 (also when
 * a cudaFreeAsync of it is pending: it is as good as freed). */
static int origin_at(const void *p, trsim_alloc_info *info)
{
    pthread_rwlock_rdlock(&table_lock);
    struct mem_entry *e = table_at(p);
    int origin = e && !e->free_pending ? (int)e->origin : -1;
    if (origin >= 0 && info)
        entry_info(e, info);
    pthread_rwlock_unlock(&table_lock);
    return origin;
}

static void wait_all_devices(void)
{
    int n = trsim_device_count();
    for (int d = 0; d < n; d++)
        trsim_device_wait_idle(d);
}

/* ---- the API: device memory ---------------------------------------------- */

/* Allocating and freeing are potentially unsafe during stream capture
 * (cudaThreadExchangeStreamCaptureMode): refused when the thread's mode
 * says so. */
TRSIM_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    cudaError_t err = trsim_capture_unsafe(trsim_current_device());
    if (err != cudaSuccess)
        return trsim_error(err);
    return trsim_error(mem_alloc(devPtr, size, trsim_current_device(), TRSIM_MEM_DEVICE, 0, NULL, 0));
}

TRSIM_API cudaError_t cudaFree(void *devPtr)
{
    trsim_alloc_info info;
    (void)trsim_current_device();   /* cudaFree(0) is the customary way to initialize */
    if (!devPtr)
        return cudaSuccess;
    int origin = origin_at(devPtr, &info);
    if ((origin != ORIGIN_HEAP && origin != ORIGIN_MMAP) || info.kind == TRSIM_MEM_HOST)
        return trsim_error(cudaErrorInvalidValue);
    cudaError_t err = trsim_capture_unsafe(info.device);
    if (err != cudaSuccess)
        return trsim_error(err);
    /* cudaFree waits for the device's outstanding work, which may still use
     * the memory. */
    trsim_device_wait_idle(info.device);
    return trsim_error(trsim_mem_free(devPtr, info.kind));
}

TRSIM_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    if (!devPtr || !pitch)
        return trsim_error(cudaErrorInvalidValue);
    if (width > SIZE_MAX - PITCH_ALIGN)
        return trsim_error(cudaErrorMemoryAllocation);
    size_t p = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    if (height && p > SIZE_MAX / height)
        return trsim_error(cudaErrorMemoryAllocation);
    cudaError_t err = trsim_capture_unsafe(trsim_current_device());
    if (err != cudaSuccess)
        return trsim_error(err);
    err = mem_alloc(devPtr, p * height, trsim_current_device(), TRSIM_MEM_DEVICE, 0, NULL, 0);
    if (err == cudaSuccess)
        *pitch = p;
    return trsim_error(err);
}

TRSIM_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    /* Exactly one of cudaMemAttachGlobal and cudaMemAttachHost; CUDA
     * refuses a zero size here (unlike cudaMalloc). */
    if (!devPtr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return trsim_error(cudaErrorInvalidValue);
    cudaError_t err = trsim_capture_unsafe(trsim_current_device());
    if (err != cudaSuccess)
        return trsim_error(err);
    return trsim_error(mem_alloc(devPtr, size, trsim_current_device(), TRSIM_MEM_MANAGED, flags, NULL, 0));
}

cudaError_t trsim_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return cudaErrorInvalidValue;
    size_t capacity = trsim_device_capacity(), in_use = trsim_mem_used(trsim_current_device());
    *total_bytes = capacity;
    *free_bytes = in_use < capacity ? capacity - in_use : 0;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    return trsim_error(trsim_mem_get_info(free_bytes, total_bytes));
}

/* ---- the API: stream-ordered allocation ---------------------------------- */

static void async_free_run(void *arg)
{
    if (mem_free(arg, TRSIM_MEM_DEVICE, 1) != cudaSuccess)
        trsim_warn("cudaFreeAsync: allocation %p vanished before its free", arg);
}

TRSIM_API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(hStream, &s);
    if (err != cudaSuccess)
        return trsim_error(err);
    if (!devPtr)
        return cudaSuccess;
    /* Graphs' memory nodes are not simulated. */
    if (trsim_stream_capturing(s))
        return trsim_error(trsim_capture_refuse(s, cudaErrorNotSupported, "cudaFreeAsync (a graph memory node)"));
    /* Mark it now so that a second free fails at once; the memory stays
     * allocated and counted until the stream reaches the free. */
    pthread_rwlock_wrlock(&table_lock);
    struct mem_entry *e = table_at(devPtr);
    int ok = e && e->kind == TRSIM_MEM_DEVICE && owned(e) && !e->free_pending;
    if (ok)
        e->free_pending = 1;
    pthread_rwlock_unlock(&table_lock);
    if (!ok)
        return trsim_error(cudaErrorInvalidValue);
    err = trsim_stream_call(s, async_free_run, devPtr, NULL, cudaGraphNodeTypeMemFree);
    if (err != cudaSuccess) {
        pthread_rwlock_wrlock(&table_lock);
        e->free_pending = 0;
        pthread_rwlock_unlock(&table_lock);
    }
    return trsim_error(err);
}

/* ---- the API: host memory ------------------------------------------------ */

TRSIM_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    const unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if (!pHost || (flags & ~known))
        return trsim_error(cudaErrorInvalidValue);
    cudaError_t err = trsim_capture_unsafe(trsim_current_device());
    if (err != cudaSuccess)
        return trsim_error(err);
    return trsim_error(mem_alloc(pHost, size, trsim_current_device(), TRSIM_MEM_HOST, flags, NULL, 0));
}

TRSIM_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

TRSIM_API cudaError_t cudaFreeHost(void *ptr)
{
    if (!ptr)
        return cudaSuccess;
    int origin = origin_at(ptr, NULL);
    if (origin != ORIGIN_HEAP && origin != ORIGIN_MMAP)
        return trsim_error(cudaErrorInvalidValue);
    cudaError_t err = trsim_capture_unsafe(trsim_current_device());
    if (err != cudaSuccess)
        return trsim_error(err);
    /* Pending copies may still read or write it. */
    wait_all_devices();
    return trsim_error(trsim_mem_free(ptr, TRSIM_MEM_HOST));
}

TRSIM_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    const unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped |
                           cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
    if (!ptr || size == 0 || (flags & ~known))
        return trsim_error(cudaErrorInvalidValue);
    return trsim_error(range_add(ptr, size, trsim_current_device(), TRSIM_MEM_HOST, flags,
                                 ORIGIN_REGISTERED));
}

TRSIM_API cudaError_t cudaHostUnregister(void *ptr)
{
    if (origin_at(ptr, NULL) != ORIGIN_REGISTERED)
        return trsim_error(cudaErrorHostMemoryNotRegistered);
    wait_all_devices();
    return range_remove(ptr, ORIGIN_REGISTERED) ? cudaSuccess
                                                : trsim_error(cudaErrorHostMemoryNotRegistered);
}

TRSIM_API cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    trsim_alloc_info info;
    if (!pDevice || flags != 0 || !trsim_mem_lookup(pHost, &info) || info.kind != TRSIM_MEM_HOST)
        return trsim_error(cudaErrorInvalidValue);
    *pDevice = pHost;           /* unified addressing: the same address */
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    trsim_alloc_info info;
    if (!pFlags || !trsim_mem_lookup(pHost, &info) || info.kind != TRSIM_MEM_HOST)
        return trsim_error(cudaErrorInvalidValue);
    *pFlags = info.flags;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                               const void *ptr)
{
    trsim_alloc_info info;
    if (!attributes)
        return trsim_error(cudaErrorInvalidValue);
    memset(attributes, 0, sizeof *attributes);
    if (!trsim_mem_lookup(ptr, &info)) {
        /* CUDA 11 and later: success, for memory CUDA knows nothing about. */
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = cudaInvalidDeviceId;
        attributes->hostPointer = (void *)ptr;
        return cudaSuccess;
    }
    attributes->device = info.device;
    attributes->devicePointer = (void *)ptr;
    switch (info.kind) {
    case TRSIM_MEM_DEVICE:
        attributes->type = cudaMemoryTypeDevice;
        break;
    case TRSIM_MEM_HOST:
        attributes->type = cudaMemoryTypeHost;
        attributes->hostPointer = (void *)ptr;
        break;
    case TRSIM_MEM_MANAGED:
        attributes->type = cudaMemoryTypeManaged;
        attributes->hostPointer = (void *)ptr;
        break;
    }
    return cudaSuccess;
}

/* ---- per-thread default stream variants ---------------------------------- */

TRSIM_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return cudaFreeAsync(devPtr, TRSIM_PTSZ(hStream));
}

/* A channel format, for arrays and textures the simulator does not have:
 * a plain value, as the real runtime computes it. */
TRSIM_API struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                             enum cudaChannelFormatKind f)
{
    struct cudaChannelFormatDesc d = {x, y, z, w, f};
    return d;
}
