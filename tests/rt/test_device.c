/* Devices: count, current device (per thread), properties, attributes, PCI
 * ids, peers, flags, limits, versions. Runs with TRSIM_DEVICE_COUNT=4 and
 * TRSIM_DEVICE_MEM=2GiB. */
#include "rttest.h"

static void *thread_device(void *arg)
{
    int *seen = arg;
    /* A new thread starts on device 0, whatever other threads chose. */
    CUDACHECK(cudaGetDevice(&seen[0]));
    CUDACHECK(cudaSetDevice(3));
    CUDACHECK(cudaGetDevice(&seen[1]));
    return NULL;
}

int main(void)
{
    rt_watchdog(30);
    const size_t capacity = (size_t)2 << 30;

    CUDACHECK(cudaFree(0));     /* the customary context initialization */
    int count = -1, dev = -1;
    CUDACHECK(cudaGetDeviceCount(&count));
    EXPECT(count == 4, "TRSIM_DEVICE_COUNT=4 gives %d", count);
    EXPECT_ERR(cudaGetDeviceCount(NULL), cudaErrorInvalidValue);
    CUDACHECK(cudaGetDevice(&dev));
    EXPECT(dev == 0, "device 0 is current at first, not %d", dev);
    EXPECT_ERR(cudaSetDevice(4), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaSetDevice(-1), cudaErrorInvalidDevice);
    CUDACHECK(cudaGetDevice(&dev));
    EXPECT(dev == 0, "a failed cudaSetDevice changes nothing");
    CUDACHECK(cudaSetDevice(2));
    CUDACHECK(cudaGetDevice(&dev));
    EXPECT(dev == 2, "set device 2, got %d", dev);

    int seen[2] = {-1, -1};
    pthread_t t;
    pthread_create(&t, NULL, thread_device, seen);
    pthread_join(t, NULL);
    EXPECT(seen[0] == 0 && seen[1] == 3, "per-thread current device: %d %d", seen[0], seen[1]);
    CUDACHECK(cudaGetDevice(&dev));
    EXPECT(dev == 2, "the other thread did not change ours");

    for (int d = 0; d < count; d++) {
        struct cudaDeviceProp prop;
        CUDACHECK(cudaGetDeviceProperties(&prop, d));
        EXPECT(strcmp(prop.name, "trsim simulated GPU") == 0, "name '%s'", prop.name);
        EXPECT(prop.totalGlobalMem == capacity, "totalGlobalMem %zu", prop.totalGlobalMem);
        EXPECT(prop.major == 9 && prop.minor == 0, "compute capability %d.%d", prop.major, prop.minor);
        EXPECT(prop.warpSize == 32 && prop.multiProcessorCount > 0, "warp size, SMs");
        EXPECT(prop.pciBusID == d, "pciBusID %d", prop.pciBusID);
        EXPECT(prop.unifiedAddressing == 1 && prop.managedMemory == 1, "UVA, managed");
        EXPECT(prop.maxThreadsPerBlock == 1024, "threads per block");

        int v = -1;
        CUDACHECK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, d));
        EXPECT(v == 9, "attribute major %d", v);
        CUDACHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, d));
        EXPECT(v == prop.multiProcessorCount, "attribute SMs %d", v);
        CUDACHECK(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, d));
        EXPECT(v == 32, "attribute warp size");
        CUDACHECK(cudaDeviceGetAttribute(&v, cudaDevAttrPciBusId, d));
        EXPECT(v == d, "attribute bus id");
        CUDACHECK(cudaDeviceGetAttribute(&v, cudaDevAttrUnifiedAddressing, d));
        EXPECT(v == 1, "attribute UVA");
        CUDACHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, d));
        EXPECT(v == 1, "attribute pools");

        char bus[32];
        CUDACHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
        int back = -1;
        CUDACHECK(cudaDeviceGetByPCIBusId(&back, bus));
        EXPECT(back == d, "bus id %s maps back to %d", bus, back);
    }
    struct cudaDeviceProp prop;
    EXPECT_ERR(cudaGetDeviceProperties(&prop, 4), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetDeviceProperties(NULL, 0), cudaErrorInvalidValue);
    int v;
    EXPECT_ERR(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 7), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaDeviceGetAttribute(NULL, cudaDevAttrWarpSize, 0), cudaErrorInvalidValue);

    /* Memory info of the current device. */
    size_t free_b = 0, total_b = 0;
    CUDACHECK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT(total_b == capacity && free_b == capacity, "fresh device: %zu of %zu free", free_b, total_b);

    /* Peers. */
    int can = -1;
    CUDACHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
    EXPECT(can == 1, "0 can access 1");
    CUDACHECK(cudaDeviceCanAccessPeer(&can, 1, 1));
    EXPECT(can == 0, "a device is not its own peer");
    EXPECT_ERR(cudaDeviceCanAccessPeer(&can, 0, 9), cudaErrorInvalidDevice);
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaDeviceEnablePeerAccess(1, 0));
    EXPECT_ERR(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    EXPECT_ERR(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaDeviceEnablePeerAccess(2, 1), cudaErrorInvalidValue);
    CUDACHECK(cudaSetDevice(1));
    CUDACHECK(cudaDeviceEnablePeerAccess(0, 0));   /* per direction */
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaDeviceDisablePeerAccess(1));
    EXPECT_ERR(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    CUDACHECK(cudaDeviceEnablePeerAccess(1, 0));
    (void)cudaGetLastError();

    /* Versions. */
    int ver = 0;
    CUDACHECK(cudaDriverGetVersion(&ver));
    EXPECT(ver == 13020, "driver version %d (the toolkit's, at least 13.2)", ver);
    CUDACHECK(cudaRuntimeGetVersion(&ver));
    EXPECT(ver == 13020, "runtime version %d", ver);

    /* Flags, stream priorities, limits. */
    unsigned flags = 0;
    CUDACHECK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    CUDACHECK(cudaGetDeviceFlags(&flags));
    EXPECT((flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync, "flags %#x", flags);
    EXPECT_ERR(cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield), cudaErrorInvalidValue);
    EXPECT_ERR(cudaSetDeviceFlags(0x100), cudaErrorInvalidValue);
    int least = 1, greatest = 1;
    CUDACHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    EXPECT(least == 0 && greatest < 0, "priority range [%d, %d]", least, greatest);
    size_t limit = 0;
    CUDACHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1 << 24));
    CUDACHECK(cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize));
    EXPECT(limit == 1 << 24, "limit %zu", limit);

    EXPECT(cudaGetLastError() == cudaErrorInvalidValue, "the last failure");
    CUDACHECK(cudaDeviceSynchronize());
    CUDACHECK(cudaDeviceReset());
    EXPECT(cudaGetLastError() == cudaSuccess, "no error left");
    printf("device OK\n");
    return 0;
}
