/* libnvidia-ml.so.1: the NVML calls a framework makes, answered from the
 * simulated devices.
 *
 * PyTorch loads NVML to count devices without creating a context, to map
 * PCI bus ids and UUIDs to devices, to read the driver's CUDA version and,
 * for expandable segments and NVLink topology, to ask about fabric and
 * peers. Device queries answer from the simulator (libtrsim.so); fabric,
 * NVLink and peer-to-peer questions get NVML_ERROR_NOT_SUPPORTED, as on a
 * GPU without those features. A function missing here is missing for the
 * program too (dlsym gives NULL): every name PyTorch 2.15 looks up is
 * defined. No NVML header is needed: the ABI is plain C. */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>

#define NVML_API __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
       NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7,
       NVML_ERROR_UNKNOWN = 999 };
/* a device handle: 1 + its index, never dereferenced by the caller */
typedef struct nvml_device *nvmlDevice_t;

static int device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static int index_of(nvmlDevice_t d)
{
    long i = (long)(size_t)d - 1;
    return i >= 0 && i < device_count() ? (int)i : -1;
}

static void uuid_text(int dev, char *out, size_t len)
{
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    cudaGetDeviceProperties(&p, dev);
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

NVML_API nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
NVML_API nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return NVML_SUCCESS; }
NVML_API nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

NVML_API const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    return cudaDriverGetVersion(v) == cudaSuccess ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return nvmlSystemGetCudaDriverVersion_v2(v); }

NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    if (!n) return NVML_ERROR_INVALID_ARGUMENT;
    *n = (unsigned)device_count();
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return nvmlDeviceGetCount_v2(n); }

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (!d || i >= (unsigned)device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *d = (nvmlDevice_t)(size_t)(i + 1);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d)
{
    return nvmlDeviceGetHandleByIndex_v2(i, d);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *d)
{
    if (!bus || !d) return NVML_ERROR_INVALID_ARGUMENT;
    int dev;
    if (cudaDeviceGetByPCIBusId(&dev, bus) != cudaSuccess) return NVML_ERROR_NOT_FOUND;
    *d = (nvmlDevice_t)(size_t)(dev + 1);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus, nvmlDevice_t *d)
{
    return nvmlDeviceGetHandleByPciBusId_v2(bus, d);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d)
{
    if (!uuid || !d) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < device_count(); i++) {
        char u[96];
        uuid_text(i, u, sizeof u);
        if (!strcmp(u, uuid) || !strcmp(u + 4, uuid)) {
            *d = (nvmlDevice_t)(size_t)(i + 1);
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
    int i = index_of(d);
    if (i < 0 || !uuid) return NVML_ERROR_INVALID_ARGUMENT;
    char u[96];
    uuid_text(i, u, sizeof u);
    if (strlen(u) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(uuid, u, strlen(u) + 1);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
    int i = index_of(d);
    if (i < 0 || !name) return NVML_ERROR_INVALID_ARGUMENT;
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    cudaGetDeviceProperties(&p, i);
    if (strlen(p.name) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(name, p.name, strlen(p.name) + 1);
    return NVML_SUCCESS;
}

/* no process runs on a simulated device as far as NVML knows */
NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count, void *infos)
{
    (void)infos;
    if (index_of(d) < 0 || !count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = 0;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, void *infos)
{
    return nvmlDeviceGetComputeRunningProcesses(d, count, infos);
}

/* fabric, NVLink, peer-to-peer: a device without them */
NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, void *info)
{
    (void)d; (void)info;
    return NVML_ERROR_NOT_SUPPORTED;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t d, void *info)
{
    (void)d; (void)info;
    return NVML_ERROR_NOT_SUPPORTED;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, int *type)
{
    (void)d; (void)link; (void)type;
    return NVML_ERROR_NOT_SUPPORTED;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, void *pci)
{
    (void)d; (void)link; (void)pci;
    return NVML_ERROR_NOT_SUPPORTED;
}

NVML_API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status)
{
    (void)a; (void)b; (void)index; (void)status;
    return NVML_ERROR_NOT_SUPPORTED;
}
