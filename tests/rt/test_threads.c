/* Thread safety: several threads allocate, free, look up, copy, record and
 * wait at the same time, on shared and private streams, on two devices.
 * Accounting must come back exactly to zero, and every lookup must find the
 * allocation it was given. */
#include "rttest.h"

#define THREADS 6
#define ROUNDS 300

static cudaStream_t shared_stream;

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned seed = (unsigned)id * 2654435761u + 1;
    void *live[16] = {0};
    size_t sizes[16] = {0};
    cudaStream_t own;
    cudaEvent_t ev;
    unsigned char host[512];

    CUDACHECK(cudaSetDevice(id % 2));
    CUDACHECK(cudaStreamCreateWithFlags(&own, id % 3 ? cudaStreamNonBlocking : 0));
    CUDACHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    for (int round = 0; round < ROUNDS; round++) {
        seed = seed * 1103515245u + 12345u;
        int slot = (int)(seed >> 16) % 16;
        if (live[slot]) {
            struct cudaPointerAttributes a;
            char *inside = (char *)live[slot] + sizes[slot] - 1;
            CUDACHECK(cudaPointerGetAttributes(&a, inside));
            EXPECT(a.type == cudaMemoryTypeDevice && a.device == id % 2 && a.devicePointer == inside,
                   "lookup of a live allocation");
            if (round % 3 == 0)
                CUDACHECK(cudaFreeAsync(live[slot], own));
            else
                CUDACHECK(cudaFree(live[slot]));
            live[slot] = NULL;
        } else {
            sizes[slot] = 1 + (seed >> 8) % 100000;
            if (round % 2)
                CUDACHECK(cudaMallocAsync(&live[slot], sizes[slot], own));
            else
                CUDACHECK(cudaMalloc(&live[slot], sizes[slot]));
            size_t n = sizes[slot] < sizeof host ? sizes[slot] : sizeof host;
            memset(host, id, n);
            CUDACHECK(cudaMemcpyAsync(live[slot], host, n, cudaMemcpyHostToDevice, own));
            if (round % 5 == 0) {
                /* Read back on the shared stream, ordered after our copy. */
                CUDACHECK(cudaEventRecord(ev, own));
                CUDACHECK(cudaStreamWaitEvent(shared_stream, ev, 0));
            }
            CUDACHECK(cudaMemcpyAsync(host, live[slot], n, cudaMemcpyDeviceToHost,
                                      round % 5 ? own : shared_stream));
            CUDACHECK(cudaStreamSynchronize(round % 5 ? own : shared_stream));
            EXPECT(host[n - 1] == (unsigned char)id, "data round trip");
        }
        CUDACHECK(cudaEventRecord(ev, own));
        CUDACHECK(cudaStreamWaitEvent(0, ev, 0));
        if (round % 7 == 0 && live[slot])
            CUDACHECK(cudaMemsetAsync(live[slot], 0, sizes[slot], own));
    }
    for (int i = 0; i < 16; i++)
        if (live[i])
            CUDACHECK(cudaFree(live[i]));
    CUDACHECK(cudaStreamSynchronize(own));
    CUDACHECK(cudaEventDestroy(ev));
    CUDACHECK(cudaStreamDestroy(own));
    return NULL;
}

int main(void)
{
    rt_watchdog(50);
    pthread_t t[THREADS];
    size_t free0 = 0, free1 = 0, total = 0;
    CUDACHECK(cudaStreamCreateWithFlags(&shared_stream, cudaStreamNonBlocking));
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaDeviceSynchronize());
    CUDACHECK(cudaMemGetInfo(&free0, &total));
    CUDACHECK(cudaSetDevice(1));
    CUDACHECK(cudaDeviceSynchronize());
    CUDACHECK(cudaMemGetInfo(&free1, &total));
    EXPECT(free0 == total && free1 == total, "everything returned: %zu %zu of %zu", free0, free1, total);
    CUDACHECK(cudaStreamDestroy(shared_stream));
    printf("threads OK\n");
    return 0;
}
