/* Streams: asynchrony, order, cross-stream waits, the legacy default
 * stream's rules, per-thread default streams, destruction, callbacks.
 * Nothing here depends on timing: gates hold a stream's worker until the
 * test opens them, and host functions log the order they ran in. */
#include "rttest.h"

static rt_log order;
static rt_log_entry entries[2048];
static atomic_int entries_used;

/* The argument of a host function that logs t (the test uses fewer than
 * 2048 of them). */
static rt_log_entry *tag(int t)
{
    rt_log_entry *e = &entries[atomic_fetch_add(&entries_used, 1)];
    e->log = &order;
    e->tag = t;
    return e;
}

static void log_reset(void)
{
    atomic_store(&order.n, 0);
}

static void test_async_and_order(void)
{
    cudaStream_t s;
    rt_gate gate;
    rt_gate_init(&gate);
    log_reset();
    CUDACHECK(cudaStreamCreate(&s));
    CUDACHECK(cudaStreamQuery(s));
    CUDACHECK(cudaLaunchHostFunc(s, rt_gate_pass, &gate));
    for (int i = 0; i < 200; i++)
        CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(i)));
    /* We got here although the stream is held: submission never waits. */
    rt_gate_wait_entered(&gate);
    EXPECT_ERR(cudaStreamQuery(s), cudaErrorNotReady);
    EXPECT(cudaGetLastError() == cudaErrorNotReady, "cudaStreamQuery records NotReady");
    EXPECT(atomic_load(&order.n) == 0, "nothing ran past the gate");
    rt_gate_open(&gate);
    CUDACHECK(cudaStreamSynchronize(s));
    CUDACHECK(cudaStreamQuery(s));
    EXPECT(atomic_load(&order.n) == 200, "all ran");
    for (int i = 0; i < 200; i++)
        EXPECT(order.tags[i] == i, "in order: position %d has %d", i, order.tags[i]);
    CUDACHECK(cudaStreamDestroy(s));
}

/* cudaStreamWaitEvent: b waits for what a had queued when the wait was
 * set up; re-recording the event afterwards does not move the wait. */
static void test_wait_event(void)
{
    cudaStream_t a, b;
    cudaEvent_t ev;
    rt_gate gate_a, gate_later;
    rt_gate_init(&gate_a);
    rt_gate_init(&gate_later);
    log_reset();
    CUDACHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CUDACHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

    CUDACHECK(cudaLaunchHostFunc(a, rt_gate_pass, &gate_a));
    CUDACHECK(cudaLaunchHostFunc(a, rt_log_append, tag(1)));
    CUDACHECK(cudaEventRecord(ev, a));
    CUDACHECK(cudaStreamWaitEvent(b, ev, 0));
    CUDACHECK(cudaLaunchHostFunc(b, rt_log_append, tag(2)));
    /* Re-record after a later gate: b must not wait for this one. */
    CUDACHECK(cudaLaunchHostFunc(a, rt_gate_pass, &gate_later));
    CUDACHECK(cudaEventRecord(ev, a));

    EXPECT_ERR(cudaStreamQuery(b), cudaErrorNotReady);
    rt_gate_open(&gate_a);
    CUDACHECK(cudaStreamSynchronize(b));    /* would hang if it waited for gate_later */
    EXPECT(rt_log_pos(&order, 1) == 0 && rt_log_pos(&order, 2) == 1, "b ran after a's first part");
    EXPECT_ERR(cudaEventQuery(ev), cudaErrorNotReady);
    rt_gate_open(&gate_later);
    CUDACHECK(cudaEventSynchronize(ev));
    CUDACHECK(cudaStreamSynchronize(a));

    /* Waiting for a never-recorded event waits for nothing. */
    cudaEvent_t fresh;
    CUDACHECK(cudaEventCreate(&fresh));
    CUDACHECK(cudaStreamWaitEvent(b, fresh, 0));
    CUDACHECK(cudaStreamSynchronize(b));
    EXPECT_ERR(cudaStreamWaitEvent(b, ev, 7), cudaErrorInvalidValue);
    CUDACHECK(cudaEventDestroy(fresh));
    EXPECT_ERR(cudaStreamWaitEvent(b, fresh, 0), cudaErrorInvalidResourceHandle);
    CUDACHECK(cudaEventDestroy(ev));
    CUDACHECK(cudaStreamDestroy(a));
    CUDACHECK(cudaStreamDestroy(b));
    (void)cudaGetLastError();
}

/* Legacy default stream: its work waits for earlier work of blocking
 * streams, and their later work waits for it; non-blocking streams take no
 * part. */
static void test_legacy(cudaStream_t legacy_handle)
{
    cudaStream_t blocking, nonblocking;
    rt_gate g1, g2, g3;
    rt_gate_init(&g1);
    rt_gate_init(&g2);
    rt_gate_init(&g3);
    log_reset();
    CUDACHECK(cudaStreamCreate(&blocking));
    CUDACHECK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));

    /* 1: blocking stream held; legacy work queued after it must wait. */
    CUDACHECK(cudaLaunchHostFunc(blocking, rt_gate_pass, &g1));
    CUDACHECK(cudaLaunchHostFunc(legacy_handle, rt_log_append, tag(10)));
    /* 2: blocking-stream work queued after the legacy work waits for it. */
    CUDACHECK(cudaLaunchHostFunc(blocking, rt_log_append, tag(11)));
    /* 3: a non-blocking stream runs freely meanwhile. */
    CUDACHECK(cudaLaunchHostFunc(nonblocking, rt_log_append, tag(12)));
    CUDACHECK(cudaStreamSynchronize(nonblocking));
    EXPECT(rt_log_pos(&order, 12) == 0, "the non-blocking stream was not held");
    EXPECT_ERR(cudaStreamQuery(legacy_handle), cudaErrorNotReady);
    EXPECT(rt_log_pos(&order, 10) < 0, "legacy work ran before earlier blocking-stream work");
    rt_gate_open(&g1);
    CUDACHECK(cudaStreamSynchronize(blocking));
    EXPECT(rt_log_pos(&order, 10) == 1 && rt_log_pos(&order, 11) == 2,
           "order: legacy %d, blocking %d", rt_log_pos(&order, 10), rt_log_pos(&order, 11));

    /* 4: legacy held; a blocking stream waits for it, a non-blocking one not. */
    log_reset();
    CUDACHECK(cudaLaunchHostFunc(legacy_handle, rt_gate_pass, &g2));
    CUDACHECK(cudaLaunchHostFunc(blocking, rt_log_append, tag(20)));
    CUDACHECK(cudaLaunchHostFunc(nonblocking, rt_log_append, tag(21)));
    CUDACHECK(cudaStreamSynchronize(nonblocking));
    EXPECT_ERR(cudaStreamQuery(blocking), cudaErrorNotReady);
    EXPECT(rt_log_pos(&order, 21) == 0 && rt_log_pos(&order, 20) < 0, "blocking stream waited");
    rt_gate_open(&g2);
    CUDACHECK(cudaStreamSynchronize(blocking));
    EXPECT(rt_log_pos(&order, 20) == 1, "then ran");

    /* 5: non-blocking work never holds legacy work. */
    log_reset();
    CUDACHECK(cudaLaunchHostFunc(nonblocking, rt_gate_pass, &g3));
    CUDACHECK(cudaLaunchHostFunc(legacy_handle, rt_log_append, tag(30)));
    CUDACHECK(cudaStreamSynchronize(legacy_handle));
    EXPECT(rt_log_pos(&order, 30) == 0, "legacy ran while the non-blocking stream was held");
    rt_gate_open(&g3);
    CUDACHECK(cudaDeviceSynchronize());
    CUDACHECK(cudaStreamDestroy(blocking));
    CUDACHECK(cudaStreamDestroy(nonblocking));
    (void)cudaGetLastError();
}

struct per_thread_result { rt_gate *gate; int query; };

static void *per_thread_main(void *arg)
{
    struct per_thread_result *r = arg;
    /* This thread's default stream is its own: the other thread's held
     * per-thread stream does not hold it. */
    CUDACHECK(cudaLaunchHostFunc(cudaStreamPerThread, rt_log_append, tag(41)));
    CUDACHECK(cudaStreamSynchronize(cudaStreamPerThread));
    r->query = cudaStreamQuery(cudaStreamPerThread);
    return NULL;
}

static void test_per_thread(void)
{
    rt_gate gate;
    pthread_t t;
    struct per_thread_result r = {&gate, -1};
    unsigned flags = 99;
    rt_gate_init(&gate);
    log_reset();
    CUDACHECK(cudaLaunchHostFunc(cudaStreamPerThread, rt_gate_pass, &gate));
    CUDACHECK(cudaLaunchHostFunc(cudaStreamPerThread, rt_log_append, tag(40)));
    pthread_create(&t, NULL, per_thread_main, &r);
    pthread_join(t, NULL);
    EXPECT(r.query == cudaSuccess && rt_log_pos(&order, 41) == 0, "other thread's stream ran");
    EXPECT_ERR(cudaStreamQuery(cudaStreamPerThread), cudaErrorNotReady);
    /* The per-thread stream is blocking: legacy work waits for it. */
    CUDACHECK(cudaLaunchHostFunc(cudaStreamLegacy, rt_log_append, tag(42)));
    EXPECT_ERR(cudaStreamQuery(0), cudaErrorNotReady);
    rt_gate_open(&gate);
    CUDACHECK(cudaStreamSynchronize(0));
    EXPECT(rt_log_pos(&order, 40) == 1 && rt_log_pos(&order, 42) == 2, "legacy after per-thread");
    CUDACHECK(cudaStreamGetFlags(cudaStreamPerThread, &flags));
    EXPECT(flags == 0, "per-thread stream is blocking");
    EXPECT_ERR(cudaStreamDestroy(cudaStreamPerThread), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaStreamDestroy(0), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
}

static void test_destroy_and_getters(void)
{
    cudaStream_t s, hi, other;
    rt_gate gate;
    rt_gate_init(&gate);
    log_reset();
    CUDACHECK(cudaStreamCreate(&s));
    CUDACHECK(cudaLaunchHostFunc(s, rt_gate_pass, &gate));
    CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(50)));
    CUDACHECK(cudaStreamDestroy(s));     /* returns although work is pending */
    EXPECT_ERR(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaLaunchHostFunc(s, rt_log_append, tag(51)), cudaErrorInvalidResourceHandle);
    /* Its pending work still runs, and still orders the legacy stream. */
    CUDACHECK(cudaLaunchHostFunc(0, rt_log_append, tag(52)));
    rt_gate_open(&gate);
    CUDACHECK(cudaDeviceSynchronize());
    EXPECT(rt_log_pos(&order, 50) == 0 && rt_log_pos(&order, 52) == 1, "destroyed stream's work ran first");

    int prio = 1, least, greatest, dev = -1;
    unsigned flags;
    unsigned long long id1, id2;
    CUDACHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDACHECK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest - 10));
    CUDACHECK(cudaStreamGetPriority(hi, &prio));
    EXPECT(prio == greatest, "priority clamped to %d, got %d", greatest, prio);
    CUDACHECK(cudaStreamGetFlags(hi, &flags));
    EXPECT(flags == cudaStreamNonBlocking, "flags %#x", flags);
    EXPECT_ERR(cudaStreamCreateWithFlags(&other, 0x4), cudaErrorInvalidValue);
    EXPECT_ERR(cudaStreamCreate(NULL), cudaErrorInvalidValue);

    /* A stream belongs to the device current at its creation. */
    CUDACHECK(cudaSetDevice(1));
    CUDACHECK(cudaStreamCreate(&other));
    CUDACHECK(cudaSetDevice(0));
    CUDACHECK(cudaStreamGetDevice(other, &dev));
    EXPECT(dev == 1, "stream device %d", dev);
    CUDACHECK(cudaStreamGetDevice(hi, &dev));
    EXPECT(dev == 0, "stream device %d", dev);
    CUDACHECK(cudaStreamGetId(hi, &id1));
    CUDACHECK(cudaStreamGetId(other, &id2));
    EXPECT(id1 != id2, "distinct ids");

    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
    CUDACHECK(cudaStreamIsCapturing(hi, &cs));
    EXPECT(cs == cudaStreamCaptureStatusNone, "not capturing");
    CUDACHECK(cudaStreamDestroy(hi));
    CUDACHECK(cudaStreamDestroy(other));
    EXPECT_ERR(cudaStreamIsCapturing(hi, &cs), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();

    /* Many create/destroy cycles: handles stay distinct from stale ones. */
    cudaStream_t first;
    CUDACHECK(cudaStreamCreate(&first));
    CUDACHECK(cudaStreamDestroy(first));
    for (int i = 0; i < 300; i++) {
        CUDACHECK(cudaStreamCreate(&s));
        EXPECT(s != first, "a stale handle came back");
        CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(60)));
        CUDACHECK(cudaStreamDestroy(s));
    }
    EXPECT_ERR(cudaStreamQuery(first), cudaErrorInvalidResourceHandle);
    CUDACHECK(cudaDeviceSynchronize());
    (void)cudaGetLastError();
}

static cudaStream_t callback_stream;
static atomic_int callback_ok;

static void callback(cudaStream_t stream, cudaError_t status, void *data)
{
    if (stream == callback_stream && status == cudaSuccess && data == &callback_ok)
        atomic_store(&callback_ok, 1);
}

static void test_callbacks_and_device_sync(void)
{
    rt_gate gates[3];
    cudaStream_t s[3];
    CUDACHECK(cudaStreamCreate(&callback_stream));
    CUDACHECK(cudaStreamAddCallback(callback_stream, callback, &callback_ok, 0));
    EXPECT_ERR(cudaStreamAddCallback(callback_stream, callback, NULL, 1), cudaErrorInvalidValue);
    CUDACHECK(cudaStreamSynchronize(callback_stream));
    EXPECT(atomic_load(&callback_ok) == 1, "callback got its stream, status and data");
    CUDACHECK(cudaStreamDestroy(callback_stream));
    EXPECT_ERR(cudaLaunchHostFunc(0, NULL, NULL), cudaErrorInvalidValue);

    /* cudaDeviceSynchronize waits for every stream of the current device. */
    log_reset();
    for (int i = 0; i < 3; i++) {
        rt_gate_init(&gates[i]);
        CUDACHECK(cudaStreamCreateWithFlags(&s[i], i ? cudaStreamNonBlocking : 0));
        CUDACHECK(cudaLaunchHostFunc(s[i], rt_gate_pass, &gates[i]));
        CUDACHECK(cudaLaunchHostFunc(s[i], rt_log_append, tag(70 + i)));
    }
    for (int i = 0; i < 3; i++)
        rt_gate_open(&gates[i]);
    CUDACHECK(cudaDeviceSynchronize());
    EXPECT(atomic_load(&order.n) == 3, "all streams done");
    for (int i = 0; i < 3; i++)
        CUDACHECK(cudaStreamDestroy(s[i]));
    (void)cudaGetLastError();
}

int main(void)
{
    rt_watchdog(40);
    test_async_and_order();
    test_wait_event();
    test_legacy(0);
    test_legacy(cudaStreamLegacy);
    test_per_thread();
    test_destroy_and_getters();
    test_callbacks_and_device_sync();
    printf("stream OK\n");
    return 0;
}
