/* A program built for per-thread default streams (what nvcc's
 * --default-stream per-thread does): the headers turn its calls into the
 * _ptds / _ptsz variants, where stream 0 is the calling thread's own
 * stream, and cudaMemcpy waits for that stream only. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "rttest.h"

static unsigned char *d;

static void *other_thread(void *arg)
{
    int *done = arg;
    unsigned char host[64], back[64];
    memset(host, 0x5a, sizeof host);
    /* The main thread's default stream is held; ours is not. */
    CUDACHECK(cudaMalloc((void **)&d, sizeof host));
    CUDACHECK(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice));
    CUDACHECK(cudaMemset(d, 0x11, 8));
    CUDACHECK(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, 0));
    CUDACHECK(cudaStreamSynchronize(0));
    EXPECT(back[0] == 0x11 && back[63] == 0x5a, "copies on this thread's stream");
    CUDACHECK(cudaStreamQuery(0));
    /* (cudaFree would wait for the whole device, the held stream too.) */
    *done = 1;
    return NULL;
}

int main(void)
{
    rt_watchdog(30);
    rt_gate gate;
    pthread_t t;
    int done = 0;
    cudaEvent_t ev;
    rt_gate_init(&gate);

    CUDACHECK(cudaLaunchHostFunc(0, rt_gate_pass, &gate));
    CUDACHECK(cudaEventCreate(&ev));
    CUDACHECK(cudaEventRecord(ev, 0));
    EXPECT_ERR(cudaStreamQuery(0), cudaErrorNotReady);
    EXPECT_ERR(cudaEventQuery(ev), cudaErrorNotReady);
    /* Stream 0 is not the legacy stream here, though the legacy stream
     * would wait for it (the per-thread stream is a blocking stream). */
    EXPECT_ERR(cudaStreamQuery(cudaStreamLegacy), cudaSuccess);
    pthread_create(&t, NULL, other_thread, &done);
    pthread_join(t, NULL);
    EXPECT(done, "the other thread's default stream ran");
    rt_gate_open(&gate);
    CUDACHECK(cudaStreamSynchronize(0));
    CUDACHECK(cudaEventSynchronize(ev));
    CUDACHECK(cudaEventDestroy(ev));
    CUDACHECK(cudaFree(d));
    (void)cudaGetLastError();
    printf("ptds OK\n");
    return 0;
}
