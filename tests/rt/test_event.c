/* Events: query and synchronize, elapsed time, the errors of
 * cudaEventElapsedTime, destruction with pending records, devices. */
#include "rttest.h"

static void sleep_30ms(void *arg)
{
    (void)arg;
    rt_sleep_ms(30);
}

int main(void)
{
    rt_watchdog(40);
    cudaStream_t s;
    cudaEvent_t start, stop, untimed, fresh;
    rt_gate gate;
    float ms = -1;
    rt_gate_init(&gate);
    CUDACHECK(cudaStreamCreate(&s));
    CUDACHECK(cudaEventCreate(&start));
    CUDACHECK(cudaEventCreateWithFlags(&stop, cudaEventBlockingSync));
    CUDACHECK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    CUDACHECK(cudaEventCreate(&fresh));

    /* Never recorded: complete. */
    CUDACHECK(cudaEventQuery(fresh));
    CUDACHECK(cudaEventSynchronize(fresh));

    /* Elapsed time covers what the stream did between the records. */
    CUDACHECK(cudaLaunchHostFunc(s, rt_gate_pass, &gate));
    CUDACHECK(cudaEventRecord(start, s));
    CUDACHECK(cudaLaunchHostFunc(s, sleep_30ms, NULL));
    CUDACHECK(cudaEventRecord(stop, s));
    CUDACHECK(cudaEventRecord(untimed, s));
    EXPECT_ERR(cudaEventQuery(stop), cudaErrorNotReady);
    EXPECT_ERR(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady);
    rt_gate_open(&gate);
    CUDACHECK(cudaEventSynchronize(stop));
    CUDACHECK(cudaEventQuery(stop));
    CUDACHECK(cudaEventQuery(start));
    CUDACHECK(cudaEventElapsedTime(&ms, start, stop));
    EXPECT(ms >= 30.0f, "elapsed %.3f ms, at least the 30 ms sleep", ms);
    CUDACHECK(cudaEventElapsedTime(&ms, stop, start));
    EXPECT(ms <= -30.0f, "reverse order gives a negative time: %.3f", ms);

    /* Errors. */
    EXPECT_ERR(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventElapsedTime(&ms, start, fresh), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventElapsedTime(NULL, start, stop), cudaErrorInvalidValue);
    EXPECT_ERR(cudaEventCreateWithFlags(&fresh, cudaEventInterprocess), cudaErrorInvalidValue);
    EXPECT_ERR(cudaEventCreateWithFlags(&fresh, 0x80), cudaErrorInvalidValue);
    EXPECT_ERR(cudaEventCreate(NULL), cudaErrorInvalidValue);
    EXPECT_ERR(cudaEventQuery((cudaEvent_t)s), cudaErrorInvalidResourceHandle);   /* a stream */
    EXPECT_ERR(cudaStreamQuery((cudaStream_t)start), cudaErrorInvalidResourceHandle); /* an event */
    cudaEvent_t ipc;
    CUDACHECK(cudaEventCreateWithFlags(&ipc, cudaEventInterprocess | cudaEventDisableTiming));
    CUDACHECK(cudaEventDestroy(ipc));
    EXPECT_ERR(cudaEventRecordWithFlags(start, s, 0x10), cudaErrorInvalidValue);
    CUDACHECK(cudaEventRecordWithFlags(start, s, cudaEventRecordExternal));

    /* Destroyed events are invalid handles; destroying one with a pending
     * record is fine and the stream still completes. */
    rt_gate_init(&gate);
    CUDACHECK(cudaLaunchHostFunc(s, rt_gate_pass, &gate));
    CUDACHECK(cudaEventRecord(fresh, s));
    CUDACHECK(cudaEventDestroy(fresh));
    EXPECT_ERR(cudaEventQuery(fresh), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventRecord(fresh, s), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventDestroy(fresh), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventElapsedTime(&ms, fresh, stop), cudaErrorInvalidResourceHandle);
    rt_gate_open(&gate);
    CUDACHECK(cudaStreamSynchronize(s));

    /* Recording on the legacy stream, and on a stream of another device. */
    CUDACHECK(cudaEventRecord(start, 0));
    CUDACHECK(cudaEventSynchronize(start));
    cudaStream_t s1;
    CUDACHECK(cudaSetDevice(1));
    CUDACHECK(cudaStreamCreate(&s1));
    CUDACHECK(cudaSetDevice(0));
    EXPECT_ERR(cudaEventRecord(start, s1), cudaErrorInvalidResourceHandle);
    /* ... but any stream may wait for any event. */
    CUDACHECK(cudaStreamWaitEvent(s1, stop, 0));
    CUDACHECK(cudaStreamSynchronize(s1));
    CUDACHECK(cudaStreamDestroy(s1));

    /* Many events recorded and destroyed. */
    for (int i = 0; i < 1000; i++) {
        cudaEvent_t e;
        CUDACHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        CUDACHECK(cudaEventRecord(e, s));
        CUDACHECK(cudaEventDestroy(e));
    }
    CUDACHECK(cudaStreamSynchronize(s));
    CUDACHECK(cudaEventDestroy(start));
    CUDACHECK(cudaEventDestroy(stop));
    CUDACHECK(cudaEventDestroy(untimed));
    CUDACHECK(cudaStreamDestroy(s));
    (void)cudaGetLastError();
    printf("event OK\n");
    return 0;
}
