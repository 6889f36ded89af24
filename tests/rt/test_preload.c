/* A program built for a real GPU: compiled against the toolkit's headers
 * and linked against the real libcudart, nothing of the simulator. Run with
 * LD_PRELOAD=libtrsim.so it must find the simulated GPUs and work; run
 * without, on a machine with no GPU, it fails cleanly with CUDA's error. */
#include "rttest.h"

static void bump(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

int main(void)
{
    rt_watchdog(30);
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        fprintf(stderr, "no CUDA device: %s (%s)\n", cudaGetErrorName(err), cudaGetErrorString(err));
        return 2;
    }
    struct cudaDeviceProp prop;
    CUDACHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%d x %s, %zu bytes, sm_%d%d\n", count, prop.name, prop.totalGlobalMem, prop.major, prop.minor);
    EXPECT(strcmp(prop.name, "trsim simulated GPU") == 0, "the simulator answered: %s", prop.name);
    EXPECT(count == 3, "TRSIM_DEVICE_COUNT=3 reached the simulator: %d", count);

    enum { N = 1 << 16 };
    static float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i * 0.5f;
    float *d;
    cudaStream_t s;
    cudaEvent_t a, b;
    atomic_int calls = 0;
    CUDACHECK(cudaSetDevice(count - 1));
    CUDACHECK(cudaMalloc((void **)&d, sizeof host));
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaEventCreate(&a));
    CUDACHECK(cudaEventCreate(&b));
    CUDACHECK(cudaEventRecord(a, s));
    CUDACHECK(cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, s));
    CUDACHECK(cudaLaunchHostFunc(s, bump, &calls));
    CUDACHECK(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s));
    CUDACHECK(cudaEventRecord(b, s));
    CUDACHECK(cudaEventSynchronize(b));
    float ms = -1;
    CUDACHECK(cudaEventElapsedTime(&ms, a, b));
    EXPECT(ms >= 0, "elapsed %f", ms);
    EXPECT(memcmp(host, back, sizeof host) == 0 && atomic_load(&calls) == 1, "round trip");

    struct cudaPointerAttributes attr;
    CUDACHECK(cudaPointerGetAttributes(&attr, d + 100));
    EXPECT(attr.type == cudaMemoryTypeDevice && attr.device == count - 1, "attributes");
    EXPECT(cudaMalloc((void **)&d, (size_t)1 << 62) == cudaErrorMemoryAllocation, "capacity");
    EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation, "last error");
    EXPECT(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0, "string");
    CUDACHECK(cudaEventDestroy(a));
    CUDACHECK(cudaEventDestroy(b));
    CUDACHECK(cudaStreamDestroy(s));
    CUDACHECK(cudaDeviceSynchronize());
    printf("preload OK\n");
    return 0;
}
