/* The driver API entries tools and frameworks use beside the runtime:
 * initialization and device queries, plain allocation, and the virtual
 * memory management API (cuMemCreate / cuMemAddressReserve / cuMemMap ...)
 * that PyTorch's expandable segments are built on, plus the entry-point
 * lookups (cuGetProcAddress, cudaGetDriverEntryPoint) through which such
 * frameworks find them.
 *
 * Virtual memory management maps onto the host's: physical memory is a
 * memfd of the allocation's size (counted against the device's capacity,
 * costing nothing until touched), a reservation is an inaccessible anonymous
 * mapping, cuMemMap maps the memfd over part of a reservation, still
 * inaccessible, and cuMemSetAccess makes it readable and writable. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cuda.h>

#include "sim_internal.h"

#define VMM_GRANULARITY ((size_t)2 << 20)

static int driver_initialized;
static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;

void trsim_driver_mark_initialized(void)
{
    __atomic_store_n(&driver_initialized, 1, __ATOMIC_RELEASE);
}

static int driver_ready(void)
{
    return __atomic_load_n(&driver_initialized, __ATOMIC_ACQUIRE);
}

int trsim_driver_ready(void)
{
    return driver_ready();
}

/* Runtime errors share their numbers with the driver's. */
static CUresult cu_result(cudaError_t err)
{
    return (CUresult)err;
}

/* ---- initialization and devices ------------------------------------------ */

TRSIM_API CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    trsim_device_count();       /* loads the configuration, marks us initialized */
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = TRSIM_CUDA_VERSION;
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuDeviceGetCount(int *count)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = trsim_device_count();
    return CUDA_SUCCESS;
}

static CUresult device_check(CUdevice dev)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    return dev >= 0 && dev < trsim_device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* device_check, then an out-pointer out that must not be NULL. */
static CUresult device_check_out(CUdevice dev, const void *out)
{
    CUresult r = device_check(dev);
    if (r == CUDA_SUCCESS && !out)
        r = CUDA_ERROR_INVALID_VALUE;
    return r;
}

TRSIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = device_check_out(ordinal, device);
    if (r == CUDA_SUCCESS)
        *device = ordinal;
    return r;
}

TRSIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    struct cudaDeviceProp prop;
    CUresult r = device_check(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    cudaGetDeviceProperties(&prop, dev);
    strncpy(name, prop.name, (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = device_check_out(dev, bytes);
    if (r == CUDA_SUCCESS)
        *bytes = trsim_device_capacity();
    return r;
}

TRSIM_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult r = device_check(dev);
    if (r != CUDA_SUCCESS)
        return r;
    return cu_result(trsim_device_attribute(pi, (int)attrib, dev));
}

/* The runtime's primary contexts exist once it is used; report them so. */
TRSIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r = device_check(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = 0;
    *active = 1;
    return CUDA_SUCCESS;
}

/* ---- plain allocation ---------------------------------------------------- */

TRSIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    void *p;
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dptr || bytesize == 0)   /* the driver, unlike cudaMalloc, refuses 0 */
        return CUDA_ERROR_INVALID_VALUE;
    /* potentially unsafe during stream capture, like cudaMalloc */
    cudaError_t err = trsim_capture_unsafe(trsim_current_device());
    if (err != cudaSuccess)
        return cu_result(err);
    err = trsim_mem_alloc(&p, bytesize, trsim_current_device(), TRSIM_MEM_DEVICE, 0);
    if (err == cudaSuccess)
        *dptr = (CUdeviceptr)(uintptr_t)p;
    return cu_result(err);
}

TRSIM_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    trsim_alloc_info info;
    void *p = (void *)(uintptr_t)dptr;
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!trsim_mem_lookup(p, &info) || info.base != p || info.kind == TRSIM_MEM_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    cudaError_t err = trsim_capture_unsafe(info.device);
    if (err != cudaSuccess)
        return cu_result(err);
    trsim_device_wait_idle(info.device);
    return cu_result(trsim_mem_free(p, info.kind));
}

TRSIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    return cu_result(trsim_mem_get_info(free_bytes, total_bytes));
}

/* ---- virtual memory management ------------------------------------------- */

struct phys {                   /* a cuMemCreate allocation */
    int fd;
    dev_t file_dev;             /* identity of the memfd, to recognize imports */
    ino_t file_ino;
    size_t size;
    int device;
    int counted;                /* counts against the device (not imported) */
    int refs;                   /* each handle until released, each mapping */
    CUmemAllocationProp prop;
    struct phys *next;
};

struct reservation { uintptr_t base; size_t size; struct reservation *next; };

struct mapping {
    uintptr_t base;
    size_t size;
    struct phys *phys;
    CUmemAccess_flags access;
    struct mapping *next;
};

/* Guards everything below; also the phys reference counts. */
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static trsim_handles *phys_handles;
static struct reservation *reservations;
static struct mapping *mappings;
static struct phys *phys_list;

/* With vmm_lock held. */
static void phys_unref(struct phys *p)
{
    if (--p->refs > 0)
        return;
    struct phys **link = &phys_list;
    while (*link != p)
        link = &(*link)->next;
    *link = p->next;
    close(p->fd);
    if (p->counted)
        trsim_mem_unreserve(p->device, p->size);
    free(p);
}

static struct phys *phys_get(CUmemGenericAllocationHandle handle)
{
    return phys_handles ? trsim_handle_get(phys_handles, (uintptr_t)handle) : NULL;
}

static CUresult phys_publish(struct phys *p, CUmemGenericAllocationHandle *handle)
{
    pthread_mutex_lock(&driver_lock);
    if (!phys_handles)
        phys_handles = trsim_handles_new(3);
    pthread_mutex_unlock(&driver_lock);
    uintptr_t h = phys_handles ? trsim_handle_add(phys_handles, p) : 0;
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *handle = (CUmemGenericAllocationHandle)h;
    return CUDA_SUCCESS;
}

static CUresult location_check(const CUmemLocation *loc)
{
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    return loc->id >= 0 && loc->id < trsim_device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

TRSIM_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                 CUmemAllocationGranularity_flags option)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!granularity || !prop || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                  option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = location_check(&prop->location);
    if (r == CUDA_SUCCESS)
        *granularity = VMM_GRANULARITY;
    return r;
}

TRSIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle || !prop || flags != 0 || size == 0 || size % VMM_GRANULARITY != 0 ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = location_check(&prop->location);
    if (r != CUDA_SUCCESS)
        return r;
    if (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    int device = prop->location.id;
    if (trsim_mem_reserve(device, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;

    struct phys *p = calloc(1, sizeof *p);
    struct stat st;
    int fd = memfd_create("trsim-device-memory", MFD_CLOEXEC);
    if (!p || fd < 0 || ftruncate(fd, (off_t)size) != 0 || fstat(fd, &st) != 0)
        goto fail;
    p->fd = fd;
    p->file_dev = st.st_dev;
    p->file_ino = st.st_ino;
    p->size = size;
    p->device = device;
    p->counted = 1;
    p->refs = 1;
    p->prop = *prop;
    if (phys_publish(p, handle) != CUDA_SUCCESS)
        goto fail;
    pthread_mutex_lock(&vmm_lock);
    p->next = phys_list;
    phys_list = p;
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;

fail:
    if (fd >= 0)
        close(fd);
    free(p);
    trsim_mem_unreserve(device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

TRSIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    struct phys *p = phys_handles ? trsim_handle_remove(phys_handles, (uintptr_t)handle) : NULL;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    /* Memory still mapped lives on until unmapped. */
    pthread_mutex_lock(&vmm_lock);
    phys_unref(p);
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                          CUmemGenericAllocationHandle handle)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    struct phys *p = phys_get(handle);
    if (!prop || !p)
        return CUDA_ERROR_INVALID_VALUE;
    *prop = p->prop;
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                                CUmemGenericAllocationHandle handle,
                                                CUmemAllocationHandleType handleType,
                                                unsigned long long flags)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    struct phys *p = phys_get(handle);
    if (!shareableHandle || !p || flags != 0 || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(p->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_NOT_PERMITTED;
    int fd = dup(p->fd);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)shareableHandle = fd;
    return CUDA_SUCCESS;
}

/* Imported from this process, the handle is one more reference to the same
 * allocation. From another process, the memory belongs to (and was counted
 * by) its creator: importing does not count it again. */
TRSIM_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                  CUmemAllocationHandleType shHandleType)
{
    struct stat st;
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    int fd = (int)(intptr_t)osHandle;
    if (!handle || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        fstat(fd, &st) != 0 || st.st_size <= 0)
        return CUDA_ERROR_INVALID_VALUE;

    pthread_mutex_lock(&vmm_lock);
    struct phys *p = phys_list;
    while (p && !(p->file_dev == st.st_dev && p->file_ino == st.st_ino))
        p = p->next;
    if (p)
        p->refs++;
    pthread_mutex_unlock(&vmm_lock);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p || (p->fd = dup(fd)) < 0) {
            free(p);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        p->file_dev = st.st_dev;
        p->file_ino = st.st_ino;
        p->size = (size_t)st.st_size;
        p->device = trsim_current_device();
        p->refs = 1;
        p->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        p->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        p->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p->prop.location.id = p->device;
        pthread_mutex_lock(&vmm_lock);
        p->next = phys_list;
        phys_list = p;
        pthread_mutex_unlock(&vmm_lock);
    }
    if (phys_publish(p, handle) != CUDA_SUCCESS) {
        pthread_mutex_lock(&vmm_lock);
        phys_unref(p);
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                       CUdeviceptr addr, unsigned long long flags)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (alignment == 0)
        alignment = VMM_GRANULARITY;
    if (!ptr || size == 0 || size % VMM_GRANULARITY != 0 || flags != 0 ||
        (alignment & (alignment - 1)) != 0 || size > SIZE_MAX - alignment)
        return CUDA_ERROR_INVALID_VALUE;
    struct reservation *r = malloc(sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Over-reserve, then trim to the alignment. addr is only a hint. */
    size_t span = size + alignment;
    char *raw = mmap((void *)(uintptr_t)addr, span, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uintptr_t base = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (base > (uintptr_t)raw)
        munmap(raw, base - (uintptr_t)raw);
    if ((uintptr_t)raw + span > base + size)
        munmap((void *)(base + size), (uintptr_t)raw + span - (base + size));
    r->base = base;
    r->size = size;
    pthread_mutex_lock(&vmm_lock);
    r->next = reservations;
    reservations = r;
    pthread_mutex_unlock(&vmm_lock);
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&vmm_lock);
    struct reservation **link = &reservations, *r;
    while ((r = *link) && !(r->base == ptr && r->size == size))
        link = &r->next;
    int mapped = 0;
    for (struct mapping *m = mappings; r && m; m = m->next)
        mapped |= m->base >= r->base && m->base < r->base + r->size;
    if (!r || mapped) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *link = r->next;
    pthread_mutex_unlock(&vmm_lock);
    munmap((void *)r->base, r->size);
    free(r);
    return CUDA_SUCCESS;
}

/* With vmm_lock held: whether [lo, hi) lies in one reservation. */
static int reserved(uintptr_t lo, uintptr_t hi)
{
    for (struct reservation *r = reservations; r; r = r->next)
        if (lo >= r->base && hi <= r->base + r->size)
            return 1;
    return 0;
}

/* With vmm_lock held: whether the mappings inside [lo, hi) tile it exactly,
 * with no mapping sticking out of it. */
static int tiled(uintptr_t lo, uintptr_t hi)
{
    size_t covered = 0;
    for (struct mapping *m = mappings; m; m = m->next) {
        if (m->base + m->size <= lo || m->base >= hi)
            continue;
        if (m->base < lo || m->base + m->size > hi)
            return 0;
        covered += m->size;
    }
    return covered == hi - lo;
}

TRSIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    struct phys *p = phys_get(handle);
    if (!p || flags != 0 || size == 0 || size % VMM_GRANULARITY || offset % VMM_GRANULARITY ||
        lo % VMM_GRANULARITY || offset > p->size || size > p->size - offset || hi < lo)
        return CUDA_ERROR_INVALID_VALUE;
    struct mapping *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&vmm_lock);
    int overlaps = 0;
    for (struct mapping *o = mappings; o; o = o->next)
        overlaps |= o->base < hi && lo < o->base + o->size;
    if (!reserved(lo, hi) || overlaps) {
        pthread_mutex_unlock(&vmm_lock);
        free(m);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* Like CUDA, a new mapping is inaccessible until cuMemSetAccess. */
    if (mmap((void *)lo, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset) == MAP_FAILED ||
        trsim_mem_add_mapping((void *)lo, size, p->device) != cudaSuccess) {
        mmap((void *)lo, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        pthread_mutex_unlock(&vmm_lock);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->refs++;
    m->base = lo;
    m->size = size;
    m->phys = p;
    m->access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    m->next = mappings;
    mappings = m;
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    pthread_mutex_lock(&vmm_lock);
    int ok = size != 0 && hi > lo && tiled(lo, hi);
    pthread_mutex_unlock(&vmm_lock);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    /* CUDA's unmap is synchronous: work still using the memory finishes. */
    for (int d = 0; d < trsim_device_count(); d++)
        trsim_device_wait_idle(d);

    pthread_mutex_lock(&vmm_lock);
    struct mapping **link = &mappings, *m;
    while ((m = *link)) {
        if (m->base >= lo && m->base + m->size <= hi) {
            *link = m->next;
            /* Back to reserved, inaccessible address space. */
            mmap((void *)m->base, m->size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
            trsim_mem_remove_mapping((void *)m->base);
            phys_unref(m->phys);
            free(m);
        } else {
            link = &m->next;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
}

TRSIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                  size_t count)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    if (!desc || count == 0 || size == 0 || hi < lo)
        return CUDA_ERROR_INVALID_VALUE;
    /* Every device shares the host's view, so the range gets the widest
     * access any listed device was given. */
    CUmemAccess_flags access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        CUresult r = location_check(&desc[i].location);
        if (r != CUDA_SUCCESS)
            return r;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].flags > access)
            access = desc[i].flags;
    }
    int prot = access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
             : access == CU_MEM_ACCESS_FLAGS_PROT_READ ? PROT_READ : PROT_NONE;
    pthread_mutex_lock(&vmm_lock);
    int ok = tiled(lo, hi) && mprotect((void *)lo, size, prot) == 0;
    for (struct mapping *m = mappings; ok && m; m = m->next)
        if (m->base >= lo && m->base + m->size <= hi)
            m->access = access;
    pthread_mutex_unlock(&vmm_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

TRSIM_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                  CUdeviceptr ptr)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = location_check(location);
    if (r != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    for (struct mapping *m = mappings; m; m = m->next) {
        if (ptr >= m->base && ptr < m->base + m->size) {
            *flags = m->access;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

/* The allocation containing dptr: a cuMemAlloc/cudaMalloc block, or a
 * mapping of a cuMemCreate allocation (PyTorch's expandable segments ask
 * for it). */
TRSIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    trsim_alloc_info info;
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!trsim_mem_lookup((void *)(uintptr_t)dptr, &info) || info.kind == TRSIM_MEM_HOST)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = (CUdeviceptr)(uintptr_t)info.base;
    if (psize)
        *psize = info.size;
    return CUDA_SUCCESS;
}

/* A new handle of the cuMemCreate allocation mapped at addr; released with
 * cuMemRelease like the first. */
TRSIM_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    if (!driver_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t a = (uintptr_t)addr;
    pthread_mutex_lock(&vmm_lock);
    struct mapping *m = mappings;
    while (m && !(m->base <= a && a < m->base + m->size))
        m = m->next;
    struct phys *p = m ? m->phys : NULL;
    if (p)
        p->refs++;
    pthread_mutex_unlock(&vmm_lock);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = phys_publish(p, handle);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&vmm_lock);
        phys_unref(p);
        pthread_mutex_unlock(&vmm_lock);
    }
    return r;
}

/* ---- entry points -------------------------------------------------------- */

/* The driver hands out its own functions, whatever another library (a
 * preloaded interposer) defines under the same names: the table takes their
 * addresses through local aliases, not through the global scope, as a real
 * libcuda's internal table does. (cuGetErrorName/String live in
 * rt_errors.c; nothing interposes them.) */
#define LOCAL(fn) extern __typeof__(fn) local_##fn __attribute__((alias(#fn), visibility("hidden")));
LOCAL(cuInit) LOCAL(cuDriverGetVersion) LOCAL(cuDeviceGet) LOCAL(cuDeviceGetCount) LOCAL(cuDeviceGetName)
LOCAL(cuDeviceTotalMem_v2) LOCAL(cuDeviceGetAttribute) LOCAL(cuDevicePrimaryCtxGetState) LOCAL(cuMemAlloc_v2)
LOCAL(cuMemFree_v2) LOCAL(cuMemGetInfo_v2) LOCAL(cuMemGetAllocationGranularity) LOCAL(cuMemCreate)
LOCAL(cuMemRelease) LOCAL(cuMemGetAllocationPropertiesFromHandle) LOCAL(cuMemExportToShareableHandle)
LOCAL(cuMemImportFromShareableHandle) LOCAL(cuMemAddressReserve) LOCAL(cuMemAddressFree) LOCAL(cuMemMap)
LOCAL(cuMemUnmap) LOCAL(cuMemSetAccess) LOCAL(cuMemGetAccess) LOCAL(cuGetProcAddress_v2)
LOCAL(cuMemGetAddressRange_v2) LOCAL(cuMemRetainAllocationHandle)

static const struct entry_point { const char *name; void *fn; } entry_points[] = {
    {"cuInit", (void *)local_cuInit},
    {"cuDriverGetVersion", (void *)local_cuDriverGetVersion},
    {"cuDeviceGet", (void *)local_cuDeviceGet},
    {"cuDeviceGetCount", (void *)local_cuDeviceGetCount},
    {"cuDeviceGetName", (void *)local_cuDeviceGetName},
    {"cuDeviceTotalMem", (void *)local_cuDeviceTotalMem_v2},
    {"cuDeviceGetAttribute", (void *)local_cuDeviceGetAttribute},
    {"cuDevicePrimaryCtxGetState", (void *)local_cuDevicePrimaryCtxGetState},
    {"cuGetErrorName", (void *)cuGetErrorName},
    {"cuGetErrorString", (void *)cuGetErrorString},
    {"cuMemAlloc", (void *)local_cuMemAlloc_v2},
    {"cuMemFree", (void *)local_cuMemFree_v2},
    {"cuMemGetInfo", (void *)local_cuMemGetInfo_v2},
    {"cuMemGetAllocationGranularity", (void *)local_cuMemGetAllocationGranularity},
    {"cuMemCreate", (void *)local_cuMemCreate},
    {"cuMemRelease", (void *)local_cuMemRelease},
    {"cuMemGetAllocationPropertiesFromHandle", (void *)local_cuMemGetAllocationPropertiesFromHandle},
    {"cuMemExportToShareableHandle", (void *)local_cuMemExportToShareableHandle},
    {"cuMemImportFromShareableHandle", (void *)local_cuMemImportFromShareableHandle},
    {"cuMemAddressReserve", (void *)local_cuMemAddressReserve},
    {"cuMemAddressFree", (void *)local_cuMemAddressFree},
    {"cuMemMap", (void *)local_cuMemMap},
    {"cuMemUnmap", (void *)local_cuMemUnmap},
    {"cuMemSetAccess", (void *)local_cuMemSetAccess},
    {"cuMemGetAccess", (void *)local_cuMemGetAccess},
    {"cuGetProcAddress", (void *)local_cuGetProcAddress_v2},
    {"cuMemGetAddressRange", (void *)local_cuMemGetAddressRange_v2},
    {"cuMemRetainAllocationHandle", (void *)local_cuMemRetainAllocationHandle},
    {"cuCtxGetCurrent", (void *)trsim_cuCtxGetCurrent},
    {"cuCtxSetCurrent", (void *)trsim_cuCtxSetCurrent},
    {"cuCtxPushCurrent", (void *)trsim_cuCtxPushCurrent},
    {"cuCtxPopCurrent", (void *)trsim_cuCtxPopCurrent},
    {"cuMemsetD32Async", (void *)trsim_cuMemsetD32Async},
    {"cuStreamWriteValue32", (void *)trsim_cuStreamWriteValue32},
    {"cuLogsRegisterCallback", (void *)trsim_cuLogsRegisterCallback},
    {"cuLogsUnregisterCallback", (void *)trsim_cuLogsUnregisterCallback},
#define UNSUPPORTED_ENTRY(name) {#name, (void *)trsim_unsupported_##name},
    TRSIM_DRIVER_UNSUPPORTED(UNSUPPORTED_ENTRY)
};

/* Finds symbol for cudaVersion and the stream semantics of flags (the
 * per-thread default stream's, or the legacy one's); returns 1 when found,
 * 0 when not, -1 when only for later versions. The table above has one
 * version of each entry, the newest; the capture and graph entries
 * (rt_driver_graph.c), whose signatures changed, have each of theirs. */
static int entry_find(const char *symbol, int cudaVersion, unsigned long long flags, void **fn)
{
    *fn = NULL;
    for (size_t i = 0; i < sizeof entry_points / sizeof entry_points[0]; i++) {
        if (strcmp(entry_points[i].name, symbol) == 0) {
            *fn = entry_points[i].fn;
            return 1;
        }
    }
    return trsim_graph_entry_find(symbol, cudaVersion, flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, fn);
}

TRSIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    if (!symbol || !pfn || flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    int found = entry_find(symbol, cudaVersion, flags, pfn);
    if (symbolStatus)
        *symbolStatus = found > 0 ? CU_GET_PROC_ADDRESS_SUCCESS
                      : found < 0 ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

/* The CUDA 11 signature, still exported by CUDA 12/13 drivers under its
 * own name (cuda.h maps cuGetProcAddress to _v2). */
#undef cuGetProcAddress
TRSIM_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
TRSIM_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

TRSIM_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                                       unsigned int cudaVersion,
                                                       unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (!symbol || !funcPtr || flags > (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream))
        return trsim_error(cudaErrorInvalidValue);
    trsim_device_count();       /* the runtime initializes the driver */
    int found = entry_find(symbol, (int)cudaVersion, flags, funcPtr);
    if (driverStatus)
        *driverStatus = found > 0 ? cudaDriverEntryPointSuccess
                      : found < 0 ? cudaDriverEntryPointVersionNotSufficent : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                              unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

/* The per-thread-default-stream builds' names; the entries are the same. */
TRSIM_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                                   unsigned long long flags,
                                                   enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

TRSIM_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
                                                            unsigned int cudaVersion,
                                                            unsigned long long flags,
                                                            enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, cudaVersion, flags, driverStatus);
}
