/* Simulated devices: how many (TRSIM_DEVICE_COUNT), how much memory each
 * has (TRSIM_DEVICE_MEM), the calling thread's current device, and what the
 * devices say about themselves: a Hopper-class GPU (compute capability 9.0)
 * whose global memory is the configured capacity. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define DEFAULT_DEVICE_COUNT 8
#define DEFAULT_DEVICE_MEM ((size_t)80 << 30)
#define SM_COUNT 132

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int device_count = DEFAULT_DEVICE_COUNT;
static size_t device_capacity = DEFAULT_DEVICE_MEM;

static __thread int current_device = 0;

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned device_flags[TRSIM_MAX_DEVICES];
static unsigned char peer_enabled[TRSIM_MAX_DEVICES][TRSIM_MAX_DEVICES];
static size_t limits[TRSIM_MAX_DEVICES][cudaLimitPersistingL2CacheSize + 1];
static enum cudaFuncCache cache_configs[TRSIM_MAX_DEVICES];
static enum cudaSharedMemConfig shared_mem_configs[TRSIM_MAX_DEVICES];

/* Parses bytes with an optional binary suffix (K, M, G, KiB, MiB, GiB).
 * Returns 0 on success. */
static int parse_bytes(const char *text, size_t *out)
{
    static const struct { const char *suffix; unsigned shift; } suffixes[] = {
        {"", 0}, {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20}, {"G", 30}, {"GiB", 30},
    };
    char *end;
    if (*text < '0' || *text > '9')
        return -1;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno != 0)
        return -1;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcmp(end, suffixes[i].suffix) != 0)
            continue;
        if (n == 0 || n > (SIZE_MAX >> suffixes[i].shift))
            return -1;
        *out = (size_t)n << suffixes[i].shift;
        return 0;
    }
    return -1;
}

static void config_load(void)
{
    const char *count = getenv("TRSIM_DEVICE_COUNT");
    if (count && *count) {
        char *end;
        errno = 0;
        long n = strtol(count, &end, 10);
        if (errno != 0 || *end != '\0') {
            trsim_warn("TRSIM_DEVICE_COUNT=%s is not a number; using %d devices",
                       count, DEFAULT_DEVICE_COUNT);
        } else if (n < 1 || n > TRSIM_MAX_DEVICES) {
            device_count = n < 1 ? 1 : TRSIM_MAX_DEVICES;
            trsim_warn("TRSIM_DEVICE_COUNT=%s is out of range; using %d devices",
                       count, device_count);
        } else {
            device_count = (int)n;
        }
    }
    const char *mem = getenv("TRSIM_DEVICE_MEM");
    if (mem && *mem && parse_bytes(mem, &device_capacity) != 0) {
        device_capacity = DEFAULT_DEVICE_MEM;
        trsim_warn("TRSIM_DEVICE_MEM=%s is not a byte count (like 85899345920, 512M "
                   "or 80GiB); using 80 GiB", mem);
    }
    for (int d = 0; d < TRSIM_MAX_DEVICES; d++) {
        limits[d][cudaLimitStackSize] = 1024;
        limits[d][cudaLimitPrintfFifoSize] = 1 << 20;
        limits[d][cudaLimitMallocHeapSize] = 8 << 20;
        limits[d][cudaLimitDevRuntimeSyncDepth] = 2;
        limits[d][cudaLimitDevRuntimePendingLaunchCount] = 2048;
        limits[d][cudaLimitMaxL2FetchGranularity] = 32;
        limits[d][cudaLimitPersistingL2CacheSize] = 0;
    }
    trsim_driver_mark_initialized();
}

int trsim_device_count(void)
{
    pthread_once(&config_once, config_load);
    return device_count;
}

size_t trsim_device_capacity(void)
{
    pthread_once(&config_once, config_load);
    return device_capacity;
}

int trsim_current_device(void)
{
    pthread_once(&config_once, config_load);
    return current_device;
}

static int device_valid(int device)
{
    return device >= 0 && device < trsim_device_count();
}

/* ---- the API: current device --------------------------------------------- */

TRSIM_API cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return trsim_error(cudaErrorInvalidValue);
    *count = trsim_device_count();
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaSetDevice(int device)
{
    if (!device_valid(device))
        return trsim_error(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return trsim_error(cudaErrorInvalidValue);
    *device = trsim_current_device();
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
    if (!device_valid(device))
        return trsim_error(cudaErrorInvalidDevice);
    if (flags & ~(unsigned)cudaInitDeviceFlagsAreValid)
        return trsim_error(cudaErrorInvalidValue);
    if (flags & cudaInitDeviceFlagsAreValid) {
        if (deviceFlags & ~(unsigned)cudaDeviceMask)
            return trsim_error(cudaErrorInvalidValue);
        pthread_mutex_lock(&state_lock);
        device_flags[device] = deviceFlags;
        pthread_mutex_unlock(&state_lock);
    }
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    unsigned schedule = flags & cudaDeviceScheduleMask;
    /* At most one scheduling policy. */
    if ((flags & ~(unsigned)cudaDeviceMask) || (schedule & (schedule - 1)))
        return trsim_error(cudaErrorInvalidValue);
    int device = trsim_current_device();
    pthread_mutex_lock(&state_lock);
    device_flags[device] = flags;
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
    if (!flags)
        return trsim_error(cudaErrorInvalidValue);
    int device = trsim_current_device();
    pthread_mutex_lock(&state_lock);
    /* Mapped pinned memory is implicit in the runtime: CUDA reports it. */
    *flags = device_flags[device] | cudaDeviceMapHost;
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceSynchronize(void)
{
    /* Potentially unsafe during stream capture: the thread's mode decides. */
    cudaError_t err = trsim_sticky_error(0);
    if (err == cudaSuccess)
        err = trsim_capture_unsafe(trsim_current_device());
    if (err != cudaSuccess)
        return trsim_error(err);
    trsim_device_wait_idle(trsim_current_device());
    trsim_user_objects_settle();
    return cudaSuccess;
}

/* Waits for the device and forgets its settings. Allocations and streams
 * survive, unlike CUDA's reset, which destroys them: a program that uses
 * either after a reset is wrong on a GPU already. */
TRSIM_API cudaError_t cudaDeviceReset(void)
{
    int device = trsim_current_device();
    trsim_device_wait_idle(device);
    pthread_mutex_lock(&state_lock);
    device_flags[device] = 0;
    memset(peer_enabled[device], 0, sizeof peer_enabled[device]);
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
    int device = trsim_current_device();
    if ((unsigned)limit > cudaLimitPersistingL2CacheSize)
        return trsim_error(cudaErrorUnsupportedLimit);
    pthread_mutex_lock(&state_lock);
    limits[device][limit] = value;
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)
{
    int device = trsim_current_device();
    if (!pValue)
        return trsim_error(cudaErrorInvalidValue);
    if ((unsigned)limit > cudaLimitPersistingL2CacheSize)
        return trsim_error(cudaErrorUnsupportedLimit);
    pthread_mutex_lock(&state_lock);
    *pValue = limits[device][limit];
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

/* Cache and shared-memory preferences: kept and reported, without effect. */
TRSIM_API cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig)
{
    int device = trsim_current_device();
    if ((unsigned)cacheConfig > cudaFuncCachePreferEqual)
        return trsim_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&state_lock);
    cache_configs[device] = cacheConfig;
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache *pCacheConfig)
{
    int device = trsim_current_device();
    if (!pCacheConfig)
        return trsim_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&state_lock);
    *pCacheConfig = cache_configs[device];
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config)
{
    int device = trsim_current_device();
    if ((unsigned)config > cudaSharedMemBankSizeEightByte)
        return trsim_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&state_lock);
    shared_mem_configs[device] = config;
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig *pConfig)
{
    int device = trsim_current_device();
    if (!pConfig)
        return trsim_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&state_lock);
    *pConfig = shared_mem_configs[device];
    pthread_mutex_unlock(&state_lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return trsim_error(cudaErrorInvalidValue);
    *driverVersion = TRSIM_CUDA_VERSION;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return trsim_error(cudaErrorInvalidValue);
    *runtimeVersion = TRSIM_CUDA_VERSION;
    return cudaSuccess;
}

/* ---- the API: properties ------------------------------------------------- */

static void device_properties(struct cudaDeviceProp *p, int device)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "trsim simulated GPU");
    /* A stable, distinct identity per device. */
    memcpy(p->uuid.bytes, "trsim-gpu-uuid", 14);
    p->uuid.bytes[14] = (char)(device >> 8);
    p->uuid.bytes[15] = (char)device;
    p->totalGlobalMem = trsim_device_capacity();
    p->sharedMemPerBlock = 48 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->texturePitchAlignment = 32;
    p->multiProcessorCount = SM_COUNT;
    p->canMapHostMemory = 1;
    p->maxTexture1D = 131072;
    p->maxTexture2D[0] = 131072;
    p->maxTexture2D[1] = 65536;
    p->maxTexture3D[0] = p->maxTexture3D[1] = p->maxTexture3D[2] = 16384;
    p->surfaceAlignment = 512;
    p->concurrentKernels = 1;
    p->ECCEnabled = 1;
    p->pciBusID = device;
    p->pciDeviceID = 0;
    p->pciDomainID = 0;
    p->asyncEngineCount = 3;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 50 << 20;
    p->persistingL2CacheMaxSize = 30 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = 1;
    p->localL1CacheSupported = 1;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->multiGpuBoardGroupID = device;
    p->concurrentManagedAccess = 1;
    p->computePreemptionSupported = 1;
    p->canUseHostPointerForRegisteredMem = 1;
    p->cooperativeLaunch = 1;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->maxBlocksPerMultiProcessor = 32;
    p->accessPolicyMaxWindowSize = 134213632;
    p->reservedSharedMemPerBlock = 1 << 10;
    p->hostRegisterSupported = 1;
    p->hostRegisterReadOnlySupported = 1;
    p->memoryPoolsSupported = 1;
    p->ipcEventSupported = 1;
    p->clusterLaunch = 1;
    p->unifiedFunctionPointers = 1;
    p->deviceNumaId = -1;
    p->hostNumaId = -1;
    p->gpuPciDeviceID = 0x233010de;     /* an H100's device and NVIDIA's vendor id */
}

TRSIM_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return trsim_error(cudaErrorInvalidValue);
    if (!device_valid(device))
        return trsim_error(cudaErrorInvalidDevice);
    device_properties(prop, device);
    return cudaSuccess;
}

cudaError_t trsim_device_attribute(int *value, int attr, int device)
{
    struct cudaDeviceProp p;
    if (!value)
        return cudaErrorInvalidValue;
    if (!device_valid(device))
        return cudaErrorInvalidDevice;
    device_properties(&p, device);
    int v;
    switch ((enum cudaDeviceAttr)attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: v = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: v = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: v = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: v = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: v = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: v = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrTotalConstantMemory: v = (int)p.totalConstMem; break;
    case cudaDevAttrWarpSize: v = p.warpSize; break;
    case cudaDevAttrMaxPitch: v = (int)p.memPitch; break;
    case cudaDevAttrMaxRegistersPerBlock: v = p.regsPerBlock; break;
    case cudaDevAttrClockRate: v = 1980000; break;          /* kHz */
    case cudaDevAttrTextureAlignment: v = (int)p.textureAlignment; break;
    case cudaDevAttrGpuOverlap: v = 1; break;
    case cudaDevAttrMultiProcessorCount: v = p.multiProcessorCount; break;
    case cudaDevAttrCanMapHostMemory: v = p.canMapHostMemory; break;
    case cudaDevAttrComputeMode: v = cudaComputeModeDefault; break;
    case cudaDevAttrMaxTexture1DWidth: v = p.maxTexture1D; break;
    case cudaDevAttrMaxTexture2DWidth: v = p.maxTexture2D[0]; break;
    case cudaDevAttrMaxTexture2DHeight: v = p.maxTexture2D[1]; break;
    case cudaDevAttrSurfaceAlignment: v = (int)p.surfaceAlignment; break;
    case cudaDevAttrConcurrentKernels: v = p.concurrentKernels; break;
    case cudaDevAttrEccEnabled: v = p.ECCEnabled; break;
    case cudaDevAttrPciBusId: v = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: v = p.pciDeviceID; break;
    case cudaDevAttrPciDomainId: v = p.pciDomainID; break;
    case cudaDevAttrMemoryClockRate: v = 2619000; break;    /* kHz */
    case cudaDevAttrGlobalMemoryBusWidth: v = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: v = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrAsyncEngineCount: v = p.asyncEngineCount; break;
    case cudaDevAttrUnifiedAddressing: v = p.unifiedAddressing; break;
    case cudaDevAttrTexturePitchAlignment: v = (int)p.texturePitchAlignment; break;
    case cudaDevAttrComputeCapabilityMajor: v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: v = p.minor; break;
    case cudaDevAttrStreamPrioritiesSupported: v = p.streamPrioritiesSupported; break;
    case cudaDevAttrGlobalL1CacheSupported: v = p.globalL1CacheSupported; break;
    case cudaDevAttrLocalL1CacheSupported: v = p.localL1CacheSupported; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: v = p.regsPerMultiprocessor; break;
    case cudaDevAttrManagedMemory: v = p.managedMemory; break;
    case cudaDevAttrMultiGpuBoardGroupID: v = p.multiGpuBoardGroupID; break;
    case cudaDevAttrSingleToDoublePrecisionPerfRatio: v = 2; break;
    case cudaDevAttrConcurrentManagedAccess: v = p.concurrentManagedAccess; break;
    case cudaDevAttrComputePreemptionSupported: v = p.computePreemptionSupported; break;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: v = p.canUseHostPointerForRegisteredMem; break;
    case cudaDevAttrCooperativeLaunch: v = p.cooperativeLaunch; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrHostRegisterSupported: v = p.hostRegisterSupported; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: v = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrMaxPersistingL2CacheSize: v = p.persistingL2CacheMaxSize; break;
    case cudaDevAttrMaxAccessPolicyWindowSize: v = p.accessPolicyMaxWindowSize; break;
    case cudaDevAttrReservedSharedMemoryPerBlock: v = (int)p.reservedSharedMemPerBlock; break;
    case cudaDevAttrHostRegisterReadOnlySupported: v = p.hostRegisterReadOnlySupported; break;
    case cudaDevAttrMemoryPoolsSupported: v = p.memoryPoolsSupported; break;
    case cudaDevAttrClusterLaunch: v = p.clusterLaunch; break;
    case cudaDevAttrIpcEventSupport: v = p.ipcEventSupported; break;
    case cudaDevAttrMemSyncDomainCount: v = 4; break;
    case cudaDevAttrNumaId: v = p.deviceNumaId; break;
    case cudaDevAttrHostNumaId: v = p.hostNumaId; break;
    case cudaDevAttrGpuPciDeviceId: v = (int)p.gpuPciDeviceID; break;
    default: v = 0; break;      /* features the simulation does not have */
    }
    *value = v;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    return trsim_error(trsim_device_attribute(value, (int)attr, device));
}

TRSIM_API cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    if (!pciBusId || len <= 0)
        return trsim_error(cudaErrorInvalidValue);
    if (!device_valid(device))
        return trsim_error(cudaErrorInvalidDevice);
    snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", device);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId)
{
    unsigned domain = 0, bus, dev = 0, fn = 0;
    if (!device || !pciBusId)
        return trsim_error(cudaErrorInvalidValue);
    /* domain:bus:device.function, bus:device.function or bus:device */
    if (sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4 &&
        (domain = 0, sscanf(pciBusId, "%x:%x.%x", &bus, &dev, &fn)) != 3 &&
        sscanf(pciBusId, "%x:%x", &bus, &dev) != 2)
        return trsim_error(cudaErrorInvalidValue);
    if (domain != 0 || dev != 0 || fn != 0 || !device_valid((int)bus))
        return trsim_error(cudaErrorInvalidDevice);
    *device = (int)bus;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *prop)
{
    if (!device || !prop)
        return trsim_error(cudaErrorInvalidValue);
    *device = 0;                /* every device is the same */
    return cudaSuccess;
}

/* ---- the API: peers ------------------------------------------------------ */

TRSIM_API cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    if (!canAccessPeer)
        return trsim_error(cudaErrorInvalidValue);
    if (!device_valid(device) || !device_valid(peerDevice))
        return trsim_error(cudaErrorInvalidDevice);
    /* Every pair can, as on an NVLink-connected node; a device is not its
     * own peer. */
    *canAccessPeer = device != peerDevice;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    int device = trsim_current_device();
    if (!device_valid(peerDevice) || peerDevice == device)
        return trsim_error(cudaErrorInvalidDevice);
    if (flags != 0)
        return trsim_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&state_lock);
    int was = peer_enabled[device][peerDevice];
    peer_enabled[device][peerDevice] = 1;
    pthread_mutex_unlock(&state_lock);
    return was ? trsim_error(cudaErrorPeerAccessAlreadyEnabled) : cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
    int device = trsim_current_device();
    if (!device_valid(peerDevice) || peerDevice == device)
        return trsim_error(cudaErrorInvalidDevice);
    pthread_mutex_lock(&state_lock);
    int was = peer_enabled[device][peerDevice];
    peer_enabled[device][peerDevice] = 0;
    pthread_mutex_unlock(&state_lock);
    return was ? cudaSuccess : trsim_error(cudaErrorPeerAccessNotEnabled);
}

TRSIM_API cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr,
                                                int srcDevice, int dstDevice)
{
    if (!value)
        return trsim_error(cudaErrorInvalidValue);
    if (!device_valid(srcDevice) || !device_valid(dstDevice) || srcDevice == dstDevice)
        return trsim_error(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevP2PAttrPerformanceRank:
        *value = 0;
        break;
    case cudaDevP2PAttrAccessSupported:
    case cudaDevP2PAttrNativeAtomicSupported:
    case cudaDevP2PAttrCudaArrayAccessSupported:
        *value = 1;
        break;
    default:
        return trsim_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}
