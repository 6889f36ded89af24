/* CUDA graphs: stream capture (status, ids, modes, the prohibited calls and
 * what they invalidate, cross-stream fork and join, unjoined work), graphs
 * (instantiate, launch, update, nodes and dependencies, destroying what
 * launches still use) and the driver's twins through cuGetProcAddress.
 * Nothing depends on timing: gates hold a stream's worker until the test
 * opens them, host functions log the order they ran in. */
#include <cuda.h>
#include "rttest.h"

#define N 64

static rt_log order;
static rt_log_entry entries[1024];
static atomic_int entries_used;

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

static void expect_log(const int *want, int n)
{
    EXPECT(atomic_load(&order.n) == n, "%d entries logged, expected %d", atomic_load(&order.n), n);
    for (int i = 0; i < n; i++)
        EXPECT(order.tags[i] == want[i], "entry %d is %d, expected %d", i, order.tags[i], want[i]);
}

static enum cudaStreamCaptureStatus status_of(cudaStream_t s)
{
    enum cudaStreamCaptureStatus st = (enum cudaStreamCaptureStatus)-1;
    CUDACHECK(cudaStreamIsCapturing(s, &st));
    return st;
}

static size_t node_count(cudaGraph_t g)
{
    size_t n = 12345;
    CUDACHECK(cudaGraphGetNodes(g, NULL, &n));
    return n;
}

/* ---- capture, instantiate, launch ------------------------------------------ */

static int *h_in, *h_out;
static int seen[16], nseen;

/* host node A: the next launch copies other values */
static void bump_input(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++)
        h_in[i] += 100;
}

/* host node B: notes what reached h_out */
static void note_output(void *arg)
{
    (void)arg;
    seen[nseen++] = h_out[1] + h_out[N - 1];
}

static void test_capture_and_replay(void)
{
    cudaStream_t s;
    int *d;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc((void **)&d, N * sizeof(int)));
    CUDACHECK(cudaMallocHost((void **)&h_in, N * sizeof(int)));
    CUDACHECK(cudaMallocHost((void **)&h_out, N * sizeof(int)));
    for (int i = 0; i < N; i++) {
        h_in[i] = i;
        h_out[i] = -1;
    }
    CUDACHECK(cudaMemset(d, 0x55, N * sizeof(int)));
    log_reset();
    nseen = 0;

    EXPECT(status_of(s) == cudaStreamCaptureStatusNone, "not capturing yet");
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    EXPECT(status_of(s) == cudaStreamCaptureStatusActive, "capturing");
    enum cudaStreamCaptureStatus st;
    unsigned long long id = 0;
    cudaGraph_t during = NULL;
    const cudaGraphNode_t *deps = NULL;
    const cudaGraphEdgeData *edges = NULL;
    size_t ndeps = 99;
    CUDACHECK(cudaStreamGetCaptureInfo(s, &st, &id, &during, &deps, &edges, &ndeps));
    EXPECT(st == cudaStreamCaptureStatusActive && id != 0 && during && ndeps == 0, "info %d %llu %zu", st, id, ndeps);

    CUDACHECK(cudaMemsetAsync(d, 0, N * sizeof(int), s));
    CUDACHECK(cudaStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, &edges, &ndeps));
    EXPECT(ndeps == 1 && deps && edges && edges[0].type == cudaGraphDependencyTypeDefault, "one dependency");
    cudaGraphNode_t first = deps[0];
    CUDACHECK(cudaMemcpyAsync(d, h_in, N * sizeof(int), cudaMemcpyHostToDevice, s));
    CUDACHECK(cudaLaunchHostFunc(s, bump_input, NULL));
    CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(1)));
    CUDACHECK(cudaMemcpyAsync(h_out, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    CUDACHECK(cudaLaunchHostFunc(s, note_output, NULL));
    CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(2)));
    unsigned long long id_again = 0;
    CUDACHECK(cudaStreamGetCaptureInfo(s, &st, &id_again, NULL, NULL, NULL, NULL));
    EXPECT(id_again == id, "one id for the whole sequence");

    cudaGraph_t g = NULL;
    CUDACHECK(cudaStreamEndCapture(s, &g));
    EXPECT(g == during, "EndCapture returns the graph GetCaptureInfo named");
    EXPECT(status_of(s) == cudaStreamCaptureStatusNone, "capture over");
    /* Nothing ran. */
    CUDACHECK(cudaStreamSynchronize(s));
    int probe[N];
    CUDACHECK(cudaMemcpy(probe, d, sizeof probe, cudaMemcpyDeviceToHost));
    EXPECT(probe[0] == 0x55555555 && h_in[5] == 5 && h_out[5] == -1 && atomic_load(&order.n) == 0,
           "captured work does not run: %x %d %d", probe[0], h_in[5], h_out[5]);

    /* The nodes, in capture order, each depending on the one before. */
    cudaGraphNode_t nodes[8];
    size_t n = 8;
    CUDACHECK(cudaGraphGetNodes(g, nodes, &n));
    EXPECT(n == 7, "7 nodes, got %zu", n);
    EXPECT(nodes[0] == first && nodes[7] == NULL, "the first node, the rest NULL");
    const enum cudaGraphNodeType types[7] = {cudaGraphNodeTypeMemset, cudaGraphNodeTypeMemcpy, cudaGraphNodeTypeHost,
                                             cudaGraphNodeTypeHost, cudaGraphNodeTypeMemcpy, cudaGraphNodeTypeHost,
                                             cudaGraphNodeTypeHost};
    for (size_t i = 0; i < 7; i++) {
        enum cudaGraphNodeType t;
        cudaGraphNode_t dep[2] = {NULL, NULL};
        size_t nd = 2;
        CUDACHECK(cudaGraphNodeGetType(nodes[i], &t));
        CUDACHECK(cudaGraphNodeGetDependencies(nodes[i], dep, NULL, &nd));
        EXPECT(t == types[i], "node %zu type %d", i, t);
        EXPECT(i == 0 ? nd == 0 : nd == 1 && dep[0] == nodes[i - 1], "node %zu dependencies %zu", i, nd);
    }
    n = 3;
    CUDACHECK(cudaGraphGetNodes(g, nodes, &n));
    EXPECT(n == 3, "a short array gets what fits");

    cudaGraphExec_t x;
    CUDACHECK(cudaGraphInstantiate(&x, g, 0));
    for (int k = 0; k < 3; k++)
        CUDACHECK(cudaGraphLaunch(x, s));
    CUDACHECK(cudaStreamSynchronize(s));
    /* Three replays, each copying what the previous one's host node left. */
    const int want[6] = {1, 2, 1, 2, 1, 2};
    expect_log(want, 6);
    EXPECT(nseen == 3, "three outputs");
    for (int k = 0; k < 3; k++)
        EXPECT(seen[k] == (1 + 100 * k) + (N - 1 + 100 * k), "replay %d saw %d", k, seen[k]);
    EXPECT(h_in[7] == 7 + 300 && h_out[7] == 7 + 200, "final %d %d", h_in[7], h_out[7]);

    /* A second capture has another id. */
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaStreamGetCaptureInfo(s, &st, &id_again, NULL, NULL, NULL, NULL));
    EXPECT(id_again != 0 && id_again != id, "new id %llu after %llu", id_again, id);
    cudaGraph_t empty;
    CUDACHECK(cudaStreamEndCapture(s, &empty));
    EXPECT(node_count(empty) == 0, "an empty capture is an empty graph");
    CUDACHECK(cudaGraphDestroy(empty));

    CUDACHECK(cudaGraphExecDestroy(x));
    CUDACHECK(cudaGraphDestroy(g));
    EXPECT_ERR(cudaGraphDestroy(g), cudaErrorInvalidValue);
    EXPECT_ERR(cudaGraphLaunch(x, s), cudaErrorInvalidValue);
    cudaGetLastError();
    CUDACHECK(cudaFreeHost(h_in));
    CUDACHECK(cudaFreeHost(h_out));
    CUDACHECK(cudaFree(d));
    CUDACHECK(cudaStreamDestroy(s));
}

/* ---- the capture rules --------------------------------------------------------- */

/* Ends s's capture, which must have been invalidated. */
static void expect_invalidated(cudaStream_t s)
{
    EXPECT(status_of(s) == cudaStreamCaptureStatusInvalidated, "capture invalidated");
    unsigned long long id = 0;
    enum cudaStreamCaptureStatus st;
    CUDACHECK(cudaStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL));
    EXPECT(st == cudaStreamCaptureStatusInvalidated && id != 0, "the invalidated sequence keeps its id");
    /* further use of the stream fails */
    EXPECT_ERR(cudaLaunchHostFunc(s, rt_log_append, tag(99)), cudaErrorStreamCaptureInvalidated);
    cudaGraph_t g = (cudaGraph_t)&id;
    EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    EXPECT(g == NULL, "no graph");
    EXPECT(status_of(s) == cudaStreamCaptureStatusNone, "capture over");
    cudaGetLastError();
}

static void begin(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    CUDACHECK(cudaStreamBeginCapture(s, mode));
    CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(7)));
}

static void end_ok(cudaStream_t s)
{
    cudaGraph_t g = NULL;
    CUDACHECK(cudaStreamEndCapture(s, &g));
    EXPECT(g && node_count(g) >= 1, "a graph");
    CUDACHECK(cudaGraphDestroy(g));
}

static void test_rules(void)
{
    cudaStream_t s, blocking;
    cudaEvent_t ev;
    int *d, host[N];
    void *p;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreate(&blocking));
    CUDACHECK(cudaEventCreate(&ev));
    CUDACHECK(cudaMalloc((void **)&d, N * sizeof(int)));

    /* where capture cannot begin */
    EXPECT_ERR(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
    EXPECT_ERR(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
    EXPECT_ERR(cudaStreamBeginCapture(s, (enum cudaStreamCaptureMode)7), cudaErrorInvalidValue);
    cudaGraph_t g;
    EXPECT_ERR(cudaStreamEndCapture(s, &g), cudaErrorIllegalState);
    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
    EXPECT(status_of(s) == cudaStreamCaptureStatusActive, "a refused begin changes nothing");
    end_ok(s);

    /* Each prohibited call: its error (also the last error), the capture
     * invalidated. */
    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);

    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaStreamQuery(s), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);

    begin(s, cudaStreamCaptureModeGlobal);
    CUDACHECK(cudaEventRecord(ev, s));
    EXPECT_ERR(cudaEventQuery(ev), cudaErrorCapturedEvent);
    expect_invalidated(s);
    EXPECT_ERR(cudaEventSynchronize(ev), cudaErrorCapturedEvent);   /* still last recorded in capture */
    CUDACHECK(cudaEventRecord(ev, s));                               /* recorded for real again */
    CUDACHECK(cudaEventSynchronize(ev));

    begin(s, cudaStreamCaptureModeGlobal);
    CUDACHECK(cudaEventRecord(ev, s));
    EXPECT_ERR(cudaEventSynchronize(ev), cudaErrorCapturedEvent);
    expect_invalidated(s);
    CUDACHECK(cudaEventRecord(ev, s));

    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);

    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaMemset(d, 0, N), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);

    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);

    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaMalloc(&p, 256), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);

    begin(s, cudaStreamCaptureModeThreadLocal);
    EXPECT_ERR(cudaFree(d), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);

    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, s), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);   /* pageable memory cannot be replayed */

    begin(s, cudaStreamCaptureModeGlobal);
    dim3 one = {1, 1, 1};
    EXPECT_ERR(cudaLaunchKernel((const void *)test_rules, one, one, NULL, 0, s), cudaErrorNotSupported);
    expect_invalidated(s);

    begin(s, cudaStreamCaptureModeGlobal);
    EXPECT_ERR(cudaStreamAddCallback(s, NULL, NULL, 0), cudaErrorInvalidValue);   /* arguments first */
    EXPECT(status_of(s) == cudaStreamCaptureStatusActive, "still active");
    cudaEvent_t outside;
    CUDACHECK(cudaEventCreate(&outside));
    CUDACHECK(cudaEventRecord(outside, blocking));
    EXPECT_ERR(cudaStreamWaitEvent(s, outside, 0), cudaErrorStreamCaptureIsolation);
    expect_invalidated(s);

    /* The legacy stream while a blocking stream captures, in every mode. */
    CUDACHECK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
    enum cudaStreamCaptureStatus st;
    EXPECT_ERR(cudaStreamIsCapturing(cudaStreamLegacy, &st), cudaErrorStreamCaptureImplicit);
    EXPECT(status_of(blocking) == cudaStreamCaptureStatusActive, "asking does not invalidate");
    EXPECT_ERR(cudaMemsetAsync(d, 0, N, 0), cudaErrorStreamCaptureImplicit);
    expect_invalidated(blocking);
    CUDACHECK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed));
    EXPECT_ERR(cudaStreamSynchronize(0), cudaErrorStreamCaptureImplicit);
    expect_invalidated(blocking);
    /* a non-blocking stream's capture leaves the legacy stream alone */
    begin(s, cudaStreamCaptureModeRelaxed);
    CUDACHECK(cudaMemsetAsync(d, 0, N, 0));
    CUDACHECK(cudaStreamSynchronize(0));
    end_ok(s);

    /* Relaxed: the potentially unsafe calls are allowed, the capture stays. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    begin(s, cudaStreamCaptureModeGlobal);
    CUDACHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    EXPECT(mode == cudaStreamCaptureModeGlobal, "the default mode is global");
    CUDACHECK(cudaMalloc(&p, 256));
    CUDACHECK(cudaFree(p));
    CUDACHECK(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost));
    CUDACHECK(cudaDeviceSynchronize());
    /* what necessarily conflicts is still refused */
    EXPECT_ERR(cudaStreamQuery(s), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);
    begin(s, cudaStreamCaptureModeGlobal);
    CUDACHECK(cudaMalloc(&p, 256));
    CUDACHECK(cudaFree(p));
    CUDACHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    EXPECT(mode == cudaStreamCaptureModeRelaxed, "swapped back");
    EXPECT(status_of(s) == cudaStreamCaptureStatusActive, "relaxed calls leave the capture active");
    end_ok(s);
    /* a capture begun in relaxed mode restricts nobody */
    begin(s, cudaStreamCaptureModeRelaxed);
    CUDACHECK(cudaMalloc(&p, 256));
    CUDACHECK(cudaFree(p));
    end_ok(s);
    mode = (enum cudaStreamCaptureMode)9;
    EXPECT_ERR(cudaThreadExchangeStreamCaptureMode(&mode), cudaErrorInvalidValue);

    /* After all this the stream works as before. */
    CUDACHECK(cudaMemsetAsync(d, 3, N, s));
    CUDACHECK(cudaStreamSynchronize(s));
    CUDACHECK(cudaMemcpy(host, d, N, cudaMemcpyDeviceToHost));
    EXPECT(host[0] == 0x03030303, "memset ran: %x", host[0]);
    cudaGetLastError();
    CUDACHECK(cudaEventDestroy(outside));
    CUDACHECK(cudaEventDestroy(ev));
    CUDACHECK(cudaFree(d));
    CUDACHECK(cudaStreamDestroy(blocking));
    CUDACHECK(cudaStreamDestroy(s));
}

/* ---- modes across threads ----------------------------------------------------- */

struct other_call {
    enum cudaStreamCaptureMode mode;    /* the other thread's */
    cudaError_t malloc_err;
    cudaStream_t end_stream;            /* when set: EndCapture it there */
    cudaError_t end_err;
    cudaGraph_t graph;
};

static void *other_thread(void *arg)
{
    struct other_call *c = arg;
    CUDACHECK(cudaSetDevice(0));
    if (c->end_stream) {
        c->end_err = cudaStreamEndCapture(c->end_stream, &c->graph);
        return NULL;
    }
    enum cudaStreamCaptureMode m = c->mode;
    CUDACHECK(cudaThreadExchangeStreamCaptureMode(&m));
    void *p = NULL;
    c->malloc_err = cudaMalloc(&p, 64);
    if (c->malloc_err == cudaSuccess)
        CUDACHECK(cudaFree(p));
    return NULL;
}

static void run_other(struct other_call *c)
{
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, other_thread, c) == 0, "thread");
    pthread_join(t, NULL);
}

static void test_threads(void)
{
    cudaStream_t s;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    /* thread-local capture: another thread in global mode may allocate */
    struct other_call c = {.mode = cudaStreamCaptureModeGlobal};
    begin(s, cudaStreamCaptureModeThreadLocal);
    run_other(&c);
    EXPECT(c.malloc_err == cudaSuccess, "allowed: %s", cudaGetErrorName(c.malloc_err));
    end_ok(s);
    /* global capture: another thread in global mode may not */
    begin(s, cudaStreamCaptureModeGlobal);
    run_other(&c);
    EXPECT(c.malloc_err == cudaErrorStreamCaptureUnsupported, "refused: %s", cudaGetErrorName(c.malloc_err));
    expect_invalidated(s);
    /* ... unless it is in thread-local or relaxed mode */
    c.mode = cudaStreamCaptureModeThreadLocal;
    begin(s, cudaStreamCaptureModeGlobal);
    run_other(&c);
    EXPECT(c.malloc_err == cudaSuccess, "thread-local: %s", cudaGetErrorName(c.malloc_err));
    c.mode = cudaStreamCaptureModeRelaxed;
    run_other(&c);
    EXPECT(c.malloc_err == cudaSuccess, "relaxed: %s", cudaGetErrorName(c.malloc_err));
    /* ending it from another thread: not in global mode ... */
    struct other_call e = {.end_stream = s};
    run_other(&e);
    EXPECT(e.end_err == cudaErrorStreamCaptureWrongThread && e.graph == NULL, "wrong thread: %s",
           cudaGetErrorName(e.end_err));
    EXPECT(status_of(s) == cudaStreamCaptureStatusActive, "the capture goes on");
    end_ok(s);
    begin(s, cudaStreamCaptureModeThreadLocal);
    run_other(&e);
    EXPECT(e.end_err == cudaErrorStreamCaptureWrongThread, "thread-local: %s", cudaGetErrorName(e.end_err));
    end_ok(s);
    /* ... but in relaxed mode */
    begin(s, cudaStreamCaptureModeRelaxed);
    run_other(&e);
    EXPECT(e.end_err == cudaSuccess && e.graph && node_count(e.graph) == 1, "relaxed: %s",
           cudaGetErrorName(e.end_err));
    CUDACHECK(cudaGraphDestroy(e.graph));
    EXPECT(status_of(s) == cudaStreamCaptureStatusNone, "ended there");
    CUDACHECK(cudaStreamDestroy(s));
}

/* ---- cross-stream capture -------------------------------------------------------- */

static void test_fork_join(void)
{
    cudaStream_t s1, s2, s3;
    cudaEvent_t fork, join;
    int *a, *b, host[N];
    CUDACHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreate(&s3));
    CUDACHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDACHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    CUDACHECK(cudaMalloc((void **)&a, N * sizeof(int)));
    CUDACHECK(cudaMalloc((void **)&b, N * sizeof(int)));
    CUDACHECK(cudaMemset(b, 0, N * sizeof(int)));
    log_reset();

    /* s1: A memset, fork; s2: B copy a->b; s1: C host; join; s1: D host */
    CUDACHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaMemsetAsync(a, 0x11, N * sizeof(int), s1));
    CUDACHECK(cudaEventRecord(fork, s1));
    CUDACHECK(cudaStreamWaitEvent(s2, fork, 0));
    unsigned long long id1, id2;
    enum cudaStreamCaptureStatus st;
    cudaGraph_t g1, g2;
    CUDACHECK(cudaStreamGetCaptureInfo(s1, &st, &id1, &g1, NULL, NULL, NULL));
    CUDACHECK(cudaStreamGetCaptureInfo(s2, &st, &id2, &g2, NULL, NULL, NULL));
    EXPECT(st == cudaStreamCaptureStatusActive && id1 == id2 && g1 == g2, "s2 joined s1's capture");
    CUDACHECK(cudaMemcpyAsync(b, a, N * sizeof(int), cudaMemcpyDeviceToDevice, s2));
    CUDACHECK(cudaLaunchHostFunc(s1, rt_log_append, tag(3)));
    CUDACHECK(cudaEventRecord(join, s2));
    CUDACHECK(cudaStreamWaitEvent(s1, join, 0));
    CUDACHECK(cudaLaunchHostFunc(s1, rt_log_append, tag(4)));
    /* s2 ends no capture: it did not begin it */
    cudaGraph_t g;
    EXPECT_ERR(cudaStreamEndCapture(s2, &g), cudaErrorStreamCaptureUnmatched);
    expect_invalidated(s1);
    EXPECT(status_of(s2) == cudaStreamCaptureStatusNone, "s2 left with it");

    /* again, ended properly */
    CUDACHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaMemsetAsync(a, 0x11, N * sizeof(int), s1));
    CUDACHECK(cudaEventRecord(fork, s1));
    CUDACHECK(cudaStreamWaitEvent(s2, fork, 0));
    CUDACHECK(cudaMemcpyAsync(b, a, N * sizeof(int), cudaMemcpyDeviceToDevice, s2));
    CUDACHECK(cudaLaunchHostFunc(s1, rt_log_append, tag(3)));
    CUDACHECK(cudaEventRecord(join, s2));
    CUDACHECK(cudaStreamWaitEvent(s1, join, 0));
    const cudaGraphNode_t *deps;
    size_t ndeps;
    CUDACHECK(cudaStreamGetCaptureInfo(s1, &st, NULL, NULL, &deps, NULL, &ndeps));
    EXPECT(ndeps == 2, "after the join s1 depends on C and B: %zu", ndeps);
    CUDACHECK(cudaLaunchHostFunc(s1, rt_log_append, tag(4)));
    CUDACHECK(cudaStreamEndCapture(s1, &g));
    EXPECT(status_of(s2) == cudaStreamCaptureStatusNone, "every stream leaves the capture");

    cudaGraphNode_t nodes[4], dep[3];
    size_t n = 4, nd;
    CUDACHECK(cudaGraphGetNodes(g, nodes, &n));
    EXPECT(n == 4, "A B C D: %zu", n);
    nd = 3;
    CUDACHECK(cudaGraphNodeGetDependencies(nodes[1], dep, NULL, &nd));
    EXPECT(nd == 1 && dep[0] == nodes[0], "B after A");
    nd = 3;
    CUDACHECK(cudaGraphNodeGetDependencies(nodes[2], dep, NULL, &nd));
    EXPECT(nd == 1 && dep[0] == nodes[0], "C after A");
    nd = 3;
    CUDACHECK(cudaGraphNodeGetDependencies(nodes[3], dep, NULL, &nd));
    EXPECT(nd == 2 && ((dep[0] == nodes[2] && dep[1] == nodes[1]) || (dep[0] == nodes[1] && dep[1] == nodes[2])),
           "D after B and C");

    cudaGraphExec_t x;
    CUDACHECK(cudaGraphInstantiateWithFlags(&x, g, 0));
    CUDACHECK(cudaGraphLaunch(x, s3));
    CUDACHECK(cudaGraphLaunch(x, s3));
    CUDACHECK(cudaStreamSynchronize(s3));
    const int want[4] = {3, 4, 3, 4};
    expect_log(want, 4);
    CUDACHECK(cudaMemcpy(host, b, sizeof host, cudaMemcpyDeviceToHost));
    EXPECT(host[0] == 0x11111111 && host[N - 1] == 0x11111111, "B copied A's memset: %x", host[0]);
    CUDACHECK(cudaGraphExecDestroy(x));
    CUDACHECK(cudaGraphDestroy(g));

    /* unjoined: s2's work never reaches s1 */
    CUDACHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaEventRecord(fork, s1));
    CUDACHECK(cudaStreamWaitEvent(s2, fork, 0));
    CUDACHECK(cudaMemsetAsync(b, 0, N, s2));
    CUDACHECK(cudaLaunchHostFunc(s1, rt_log_append, tag(5)));
    g = (cudaGraph_t)&n;
    EXPECT_ERR(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureUnjoined);
    EXPECT(g == NULL, "no graph");
    EXPECT(status_of(s1) == cudaStreamCaptureStatusNone && status_of(s2) == cudaStreamCaptureStatusNone,
           "the capture is over");
    /* a fork with no work on it joins nothing and is no error */
    CUDACHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaEventRecord(fork, s1));
    CUDACHECK(cudaStreamWaitEvent(s2, fork, 0));
    CUDACHECK(cudaLaunchHostFunc(s1, rt_log_append, tag(5)));
    end_ok(s1);
    /* an event of a capture that is over: a captured event still */
    EXPECT_ERR(cudaStreamWaitEvent(s2, fork, 0), cudaErrorCapturedEvent);
    /* two captures do not merge */
    CUDACHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaEventRecord(fork, s1));
    EXPECT_ERR(cudaStreamWaitEvent(s2, fork, 0), cudaErrorStreamCaptureMerge);
    expect_invalidated(s1);
    expect_invalidated(s2);
    cudaGetLastError();

    CUDACHECK(cudaFree(a));
    CUDACHECK(cudaFree(b));
    CUDACHECK(cudaEventDestroy(fork));
    CUDACHECK(cudaEventDestroy(join));
    CUDACHECK(cudaStreamDestroy(s1));
    CUDACHECK(cudaStreamDestroy(s2));
    CUDACHECK(cudaStreamDestroy(s3));
}

/* cudaEventRecordExternal / cudaEventWaitExternal: nodes done at each launch */
static void test_external_events(void)
{
    cudaStream_t s, other;
    cudaEvent_t rec, outside;
    rt_gate gate;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    CUDACHECK(cudaEventCreate(&rec));
    CUDACHECK(cudaEventCreate(&outside));
    log_reset();
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaStreamWaitEvent(s, outside, cudaEventWaitExternal));
    CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(8)));
    CUDACHECK(cudaEventRecordWithFlags(rec, s, cudaEventRecordExternal));
    cudaGraph_t g;
    CUDACHECK(cudaStreamEndCapture(s, &g));
    cudaGraphNode_t nodes[3];
    size_t n = 3;
    CUDACHECK(cudaGraphGetNodes(g, nodes, &n));
    enum cudaGraphNodeType t0, t2;
    CUDACHECK(cudaGraphNodeGetType(nodes[0], &t0));
    CUDACHECK(cudaGraphNodeGetType(nodes[2], &t2));
    EXPECT(n == 3 && t0 == cudaGraphNodeTypeWaitEvent && t2 == cudaGraphNodeTypeEventRecord, "event nodes");
    CUDACHECK(cudaEventQuery(rec));   /* the external record did not touch the event at capture */
    cudaGraphExec_t x;
    CUDACHECK(cudaGraphInstantiate(&x, g, 0));
    /* the wait node waits for what `outside` is recorded after at launch */
    rt_gate_init(&gate);
    CUDACHECK(cudaLaunchHostFunc(other, rt_gate_pass, &gate));
    CUDACHECK(cudaEventRecord(outside, other));
    CUDACHECK(cudaGraphLaunch(x, s));
    rt_gate_wait_entered(&gate);
    EXPECT_ERR(cudaEventQuery(rec), cudaErrorNotReady);
    EXPECT(atomic_load(&order.n) == 0, "held by the wait node");
    rt_gate_open(&gate);
    CUDACHECK(cudaEventSynchronize(rec));
    const int want[1] = {8};
    expect_log(want, 1);
    CUDACHECK(cudaStreamSynchronize(s));
    CUDACHECK(cudaGraphExecDestroy(x));
    CUDACHECK(cudaGraphDestroy(g));
    CUDACHECK(cudaEventDestroy(rec));
    CUDACHECK(cudaEventDestroy(outside));
    CUDACHECK(cudaStreamDestroy(s));
    CUDACHECK(cudaStreamDestroy(other));
}

/* ---- graphs ------------------------------------------------------------------------ */

static cudaGraph_t capture_memset_host(cudaStream_t s, int *d, int value, int tagv, int host_first)
{
    cudaGraph_t g;
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    if (host_first)
        CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(tagv)));
    CUDACHECK(cudaMemsetAsync(d, value, N * sizeof(int), s));
    if (!host_first)
        CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(tagv)));
    CUDACHECK(cudaStreamEndCapture(s, &g));
    return g;
}

static int first_int(const int *d)
{
    int v;
    CUDACHECK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
    return v;
}

static void test_exec_update(void)
{
    cudaStream_t s, s2;
    int *d;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc((void **)&d, N * sizeof(int)));
    log_reset();
    cudaGraph_t g1 = capture_memset_host(s, d, 1, 10, 0);
    cudaGraphExec_t x;
    CUDACHECK(cudaGraphInstantiate(&x, g1, 0));
    CUDACHECK(cudaGraphLaunch(x, s));
    CUDACHECK(cudaStreamSynchronize(s));
    EXPECT(first_int(d) == 0x01010101, "g1's memset");

    /* same kinds, same order: the update takes g2's nodes */
    cudaGraph_t g2 = capture_memset_host(s, d, 2, 20, 0);
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0xff, sizeof info);
    CUDACHECK(cudaGraphExecUpdate(x, g2, &info));
    EXPECT(info.result == cudaGraphExecUpdateSuccess && !info.errorNode && !info.errorFromNode, "updated");
    CUDACHECK(cudaGraphDestroy(g2));     /* the executable keeps what it needs */
    CUDACHECK(cudaGraphLaunch(x, s));
    CUDACHECK(cudaStreamSynchronize(s));
    EXPECT(first_int(d) == 0x02020202, "g2's memset");
    const int want[2] = {10, 20};
    expect_log(want, 2);

    /* another order of kinds */
    cudaGraph_t g3 = capture_memset_host(s, d, 3, 30, 1);
    cudaGraphNode_t g3_nodes[2];
    size_t n = 2;
    CUDACHECK(cudaGraphGetNodes(g3, g3_nodes, &n));
    EXPECT_ERR(cudaGraphExecUpdate(x, g3, &info), cudaErrorGraphExecUpdateFailure);
    EXPECT(info.result == cudaGraphExecUpdateErrorNodeTypeChanged && info.errorNode == g3_nodes[0] &&
           info.errorFromNode == NULL, "type changed at the first node: %d", info.result);
    /* another number of nodes */
    cudaGraph_t g4;
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaMemsetAsync(d, 4, 4, s));
    CUDACHECK(cudaStreamEndCapture(s, &g4));
    EXPECT_ERR(cudaGraphExecUpdate(x, g4, &info), cudaErrorGraphExecUpdateFailure);
    EXPECT(info.result == cudaGraphExecUpdateErrorTopologyChanged && info.errorNode == NULL, "topology");
    /* the same kinds, other dependencies: the host node beside the memset */
    cudaGraph_t g5;
    cudaEvent_t fork;
    CUDACHECK(cudaEventCreate(&fork));
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaEventRecord(fork, s));
    CUDACHECK(cudaStreamWaitEvent(s2, fork, 0));
    CUDACHECK(cudaMemsetAsync(d, 5, N * sizeof(int), s));
    CUDACHECK(cudaLaunchHostFunc(s2, rt_log_append, tag(50)));
    CUDACHECK(cudaEventRecord(fork, s2));
    CUDACHECK(cudaStreamWaitEvent(s, fork, 0));
    CUDACHECK(cudaStreamEndCapture(s, &g5));
    cudaGraphNode_t g5_nodes[2];
    n = 2;
    CUDACHECK(cudaGraphGetNodes(g5, g5_nodes, &n));
    EXPECT_ERR(cudaGraphExecUpdate(x, g5, &info), cudaErrorGraphExecUpdateFailure);
    EXPECT(info.result == cudaGraphExecUpdateErrorTopologyChanged && info.errorNode == g5_nodes[1], "dependencies");
    EXPECT_ERR(cudaGraphExecUpdate(x, g5, NULL), cudaErrorInvalidValue);
    /* a failed update changed nothing */
    log_reset();
    CUDACHECK(cudaGraphLaunch(x, s));
    CUDACHECK(cudaStreamSynchronize(s));
    EXPECT(first_int(d) == 0x02020202, "still g2's memset");
    const int want2[1] = {20};
    expect_log(want2, 1);
    cudaGetLastError();
    CUDACHECK(cudaEventDestroy(fork));
    CUDACHECK(cudaGraphExecDestroy(x));
    CUDACHECK(cudaGraphDestroy(g1));
    CUDACHECK(cudaGraphDestroy(g3));
    CUDACHECK(cudaGraphDestroy(g4));
    CUDACHECK(cudaGraphDestroy(g5));
    CUDACHECK(cudaFree(d));
    CUDACHECK(cudaStreamDestroy(s));
    CUDACHECK(cudaStreamDestroy(s2));
}

static void test_pending_launches(void)
{
    cudaStream_t s, s2;
    int *d;
    rt_gate gate;
    rt_gate_init(&gate);
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc((void **)&d, N * sizeof(int)));
    CUDACHECK(cudaMemset(d, 0, N * sizeof(int)));
    log_reset();
    cudaGraph_t g;
    CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaLaunchHostFunc(s, rt_gate_pass, &gate));
    CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(60)));
    CUDACHECK(cudaMemsetAsync(d, 7, N * sizeof(int), s));
    CUDACHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t x;
    CUDACHECK(cudaGraphInstantiate(&x, g, 0));
    CUDACHECK(cudaGraphLaunch(x, s));
    /* a launch on another stream waits for the pending one */
    CUDACHECK(cudaGraphLaunch(x, s2));
    CUDACHECK(cudaLaunchHostFunc(s2, rt_log_append, tag(61)));
    rt_gate_wait_entered(&gate);
    EXPECT_ERR(cudaStreamQuery(s2), cudaErrorNotReady);
    /* both are destroyed while the launches are pending */
    CUDACHECK(cudaGraphExecDestroy(x));
    CUDACHECK(cudaGraphDestroy(g));
    EXPECT_ERR(cudaGraphUpload(x, s), cudaErrorInvalidValue);
    cudaGetLastError();
    rt_gate_open(&gate);
    CUDACHECK(cudaStreamSynchronize(s2));
    CUDACHECK(cudaStreamSynchronize(s));
    const int want[3] = {60, 60, 61};
    expect_log(want, 3);
    EXPECT(first_int(d) == 0x07070707, "the memset ran");

    /* a graph launched into a capturing stream: not simulated, loudly */
    cudaGraph_t g2 = capture_memset_host(s, d, 8, 62, 0);
    cudaGraphExec_t x2;
    CUDACHECK(cudaGraphInstantiateWithFlags(&x2, g2, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    unsigned long long flags = 9;
    CUDACHECK(cudaGraphExecGetFlags(x2, &flags));
    EXPECT(flags == cudaGraphInstantiateFlagAutoFreeOnLaunch, "flags %llu", flags);
    CUDACHECK(cudaGraphUpload(x2, s));
    CUDACHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    EXPECT_ERR(cudaGraphLaunch(x2, s2), cudaErrorNotSupported);
    expect_invalidated(s2);
    /* instantiating with parameters */
    cudaGraphExec_t x3;
    cudaGraphInstantiateParams params = {.flags = cudaGraphInstantiateFlagUpload, .uploadStream = s};
    CUDACHECK(cudaGraphInstantiateWithParams(&x3, g2, &params));
    EXPECT(params.result_out == cudaGraphInstantiateSuccess && params.errNode_out == NULL, "params");
    EXPECT_ERR(cudaGraphInstantiate(&x3, g2, 1ull << 40), cudaErrorInvalidValue);
    log_reset();
    CUDACHECK(cudaGraphLaunch(x3, s));
    CUDACHECK(cudaStreamSynchronize(s));
    EXPECT(first_int(d) == 0x08080808, "x3 ran");
    cudaGetLastError();
    CUDACHECK(cudaGraphExecDestroy(x2));
    CUDACHECK(cudaGraphExecDestroy(x3));
    CUDACHECK(cudaGraphDestroy(g2));
    CUDACHECK(cudaFree(d));
    CUDACHECK(cudaStreamDestroy(s));
    CUDACHECK(cudaStreamDestroy(s2));
}

/* capture into an existing graph, after given nodes */
static void test_capture_to_graph(void)
{
    cudaStream_t s;
    int *d;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc((void **)&d, N * sizeof(int)));
    cudaGraph_t g, out;
    CUDACHECK(cudaGraphCreate(&g, 0));
    EXPECT_ERR(cudaGraphCreate(&out, 1), cudaErrorInvalidValue);
    CUDACHECK(cudaStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, cudaStreamCaptureModeGlobal));
    EXPECT_ERR(cudaGraphDestroy(g), cudaErrorIllegalState);
    CUDACHECK(cudaMemsetAsync(d, 1, N * sizeof(int), s));
    CUDACHECK(cudaStreamEndCapture(s, &out));
    EXPECT(out == g && node_count(g) == 1, "captured into g");
    cudaGraphNode_t first;
    size_t n = 1;
    CUDACHECK(cudaGraphGetNodes(g, &first, &n));
    CUDACHECK(cudaStreamBeginCaptureToGraph(s, g, &first, NULL, 1, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaMemsetAsync(d, 2, 4, s));
    CUDACHECK(cudaStreamEndCapture(s, &out));
    cudaGraphNode_t nodes[2], dep;
    n = 2;
    CUDACHECK(cudaGraphGetNodes(g, nodes, &n));
    size_t nd = 1;
    CUDACHECK(cudaGraphNodeGetDependencies(nodes[1], &dep, NULL, &nd));
    EXPECT(n == 2 && nd == 1 && dep == first, "the second capture continues after the first");
    /* a failed capture into it leaves it as it was */
    CUDACHECK(cudaStreamBeginCaptureToGraph(s, g, nodes, NULL, 2, cudaStreamCaptureModeGlobal));
    CUDACHECK(cudaMemsetAsync(d, 3, 4, s));
    EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    expect_invalidated(s);
    EXPECT(node_count(g) == 2, "the failed capture's node is gone");
    EXPECT_ERR(cudaStreamBeginCaptureToGraph(s, g, &first, NULL, 1, (enum cudaStreamCaptureMode)3),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaStreamBeginCaptureToGraph(s, NULL, NULL, NULL, 0, cudaStreamCaptureModeGlobal),
               cudaErrorInvalidValue);
    cudaGetLastError();
    cudaGraphExec_t x;
    CUDACHECK(cudaGraphInstantiate(&x, g, 0));
    CUDACHECK(cudaGraphLaunch(x, s));
    CUDACHECK(cudaStreamSynchronize(s));
    int host[2];
    CUDACHECK(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost));
    EXPECT(host[0] == 0x02020202 && host[1] == 0x01010101, "in order: %x %x", host[0], host[1]);
    CUDACHECK(cudaGraphExecDestroy(x));
    CUDACHECK(cudaGraphDestroy(g));
    CUDACHECK(cudaFree(d));
    CUDACHECK(cudaStreamDestroy(s));
}

/* ---- the driver's twins ------------------------------------------------------------ */

static void *proc(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    EXPECT(cuGetProcAddress(name, &fn, version, flags, &q) == CUDA_SUCCESS, "cuGetProcAddress %s", name);
    EXPECT(q == CU_GET_PROC_ADDRESS_SUCCESS && fn, "%s found for %d", name, version);
    return fn;
}

static void test_driver(void)
{
    CUresult (*begin_v2)(CUstream, CUstreamCaptureMode) = proc("cuStreamBeginCapture", 12080, 0);
    CUresult (*begin_v1)(CUstream) = proc("cuStreamBeginCapture", 10000, 0);
    CUresult (*to_graph)(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t,
                         CUstreamCaptureMode) = proc("cuStreamBeginCaptureToGraph", 12030, 0);
    CUresult (*end)(CUstream, CUgraph *) = proc("cuStreamEndCapture", 12080, 0);
    CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *) = proc("cuStreamIsCapturing", 12080, 0);
    CUresult (*info_v3)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **,
                        const CUgraphEdgeData **, size_t *) = proc("cuStreamGetCaptureInfo", 12080, 0);
    CUresult (*info_v2)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **,
                        size_t *) = proc("cuStreamGetCaptureInfo", 11030, 0);
    CUresult (*info_v1)(CUstream, CUstreamCaptureStatus *, cuuint64_t *) = proc("cuStreamGetCaptureInfo", 10010, 0);
    CUresult (*exchange)(CUstreamCaptureMode *) = proc("cuThreadExchangeStreamCaptureMode", 12080, 0);
    CUresult (*create)(CUgraph *, unsigned) = proc("cuGraphCreate", 12080, 0);
    CUresult (*destroy)(CUgraph) = proc("cuGraphDestroy", 12080, 0);
    CUresult (*get_nodes)(CUgraph, CUgraphNode *, size_t *) = proc("cuGraphGetNodes", 12080, 0);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long) = proc("cuGraphInstantiate", 12080, 0);
    CUresult (*instantiate_v1)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t) =
        proc("cuGraphInstantiate", 11000, 0);
    CUresult (*with_flags)(CUgraphExec *, CUgraph, unsigned long long) = proc("cuGraphInstantiateWithFlags", 12080, 0);
    CUresult (*with_params)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *) =
        proc("cuGraphInstantiateWithParams", 12080, 0);
    CUresult (*launch)(CUgraphExec, CUstream) = proc("cuGraphLaunch", 12080, 0);
    CUresult (*upload)(CUgraphExec, CUstream) = proc("cuGraphUpload", 12080, 0);
    CUresult (*update_v2)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *) = proc("cuGraphExecUpdate", 12080, 0);
    CUresult (*update_v1)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *) =
        proc("cuGraphExecUpdate", 11000, 0);
    CUresult (*exec_destroy)(CUgraphExec) = proc("cuGraphExecDestroy", 12080, 0);
    /* a signature newer than the version asked for */
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult q;
    EXPECT(cuGetProcAddress("cuStreamBeginCaptureToGraph", &fn, 12000, 0, &q) == CUDA_SUCCESS &&
               q == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && fn == NULL, "version not sufficient");

    cudaStream_t s;
    int *d;
    CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc((void **)&d, N * sizeof(int)));
    CUstream cs = (CUstream)s;
    log_reset();
    EXPECT(begin_v2(cs, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "begin");
    CUstreamCaptureStatus st;
    cuuint64_t id3 = 0, id2 = 0, id1 = 0;
    CUgraph during = NULL;
    const CUgraphNode *deps;
    const CUgraphEdgeData *edges;
    size_t ndeps = 5;
    EXPECT(info_v3(cs, &st, &id3, &during, &deps, &edges, &ndeps) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
               id3 && during && ndeps == 0, "info v3");
    CUDACHECK(cudaMemsetAsync(d, 9, N * sizeof(int), s));
    EXPECT(info_v2(cs, &st, &id2, NULL, &deps, &ndeps) == CUDA_SUCCESS && id2 == id3 && ndeps == 1, "info v2");
    EXPECT(info_v1(cs, &st, &id1) == CUDA_SUCCESS && id1 == id3, "info v1");
    CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(70)));
    CUgraph g = NULL;
    EXPECT(end(cs, &g) == CUDA_SUCCESS && g == during, "end");
    EXPECT(is_capturing(cs, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE, "not capturing");
    /* the driver leaves the runtime's last error alone */
    cudaGetLastError();
    EXPECT(end(cs, &g) == CUDA_ERROR_ILLEGAL_STATE, "nothing to end");
    EXPECT_ERR(cudaGetLastError(), cudaSuccess);

    size_t n = 0;
    EXPECT(get_nodes(g, NULL, &n) == CUDA_SUCCESS && n == 2, "two nodes");
    CUgraphExec x, x1, x2, x3;
    EXPECT(instantiate(&x, g, 0) == CUDA_SUCCESS, "instantiate (WithFlags)");
    CUgraphNode err_node = (CUgraphNode)1;
    char logbuf[8] = "junk";
    EXPECT(instantiate_v1(&x1, g, &err_node, logbuf, sizeof logbuf) == CUDA_SUCCESS && err_node == NULL &&
               logbuf[0] == 0, "instantiate (10.0)");
    EXPECT(with_flags(&x2, g, 0) == CUDA_SUCCESS, "instantiate with flags");
    CUDA_GRAPH_INSTANTIATE_PARAMS params = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, .hUploadStream = cs};
    EXPECT(with_params(&x3, g, &params) == CUDA_SUCCESS && params.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS,
           "instantiate with params");
    EXPECT(upload(x, cs) == CUDA_SUCCESS, "upload");
    EXPECT(launch(x, cs) == CUDA_SUCCESS && launch(x1, cs) == CUDA_SUCCESS && launch(x2, cs) == CUDA_SUCCESS &&
               launch(x3, cs) == CUDA_SUCCESS, "launches");
    CUDACHECK(cudaStreamSynchronize(s));
    const int want[4] = {70, 70, 70, 70};
    expect_log(want, 4);
    EXPECT(first_int(d) == 0x09090909, "memset");

    /* updates, both signatures */
    CUgraph g2;
    EXPECT(create(&g2, 0) == CUDA_SUCCESS, "create");
    EXPECT(to_graph(cs, g2, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "capture to graph");
    CUDACHECK(cudaLaunchHostFunc(s, rt_log_append, tag(71)));
    EXPECT(end(cs, &g) == CUDA_SUCCESS && g == g2, "end into g2");
    CUgraphExecUpdateResultInfo ri;
    EXPECT(update_v2(x, g2, &ri) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE &&
               ri.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, "update v2");
    CUgraphExecUpdateResult r1;
    EXPECT(update_v1(x, g2, &err_node, &r1) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE &&
               r1 == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED && err_node == NULL, "update v1");
    EXPECT_ERR(cudaGetLastError(), cudaSuccess);

    /* the 10.0 begin is global mode; the mode exchange is the runtime's */
    EXPECT(begin_v1(cs) == CUDA_SUCCESS, "begin v1");
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    EXPECT(exchange(&mode) == CUDA_SUCCESS && mode == CU_STREAM_CAPTURE_MODE_GLOBAL, "exchange");
    void *p;
    CUDACHECK(cudaMalloc(&p, 16));   /* relaxed now */
    CUDACHECK(cudaFree(p));
    EXPECT(exchange(&mode) == CUDA_SUCCESS && mode == CU_STREAM_CAPTURE_MODE_RELAXED, "exchange back");
    EXPECT_ERR(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
    EXPECT(end(cs, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && g == NULL, "invalidated");
    cudaGetLastError();

    /* per-thread default stream entries: stream 0 is the thread's stream */
    CUresult (*begin_ptsz)(CUstream, CUstreamCaptureMode) =
        proc("cuStreamBeginCapture", 12080, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    CUresult (*end_ptsz)(CUstream, CUgraph *) = proc("cuStreamEndCapture", 12080, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    EXPECT(begin_ptsz != begin_v2, "a per-thread variant");
    EXPECT(begin_ptsz(0, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "begin on the per-thread stream");
    EXPECT(status_of(cudaStreamPerThread) == cudaStreamCaptureStatusActive, "per-thread stream captures");
    EXPECT(status_of(s) == cudaStreamCaptureStatusNone, "not s");
    EXPECT(end_ptsz(0, &g) == CUDA_SUCCESS && g, "end there");
    EXPECT(destroy(g) == CUDA_SUCCESS, "destroy");

    EXPECT(exec_destroy(x) == CUDA_SUCCESS && exec_destroy(x1) == CUDA_SUCCESS && exec_destroy(x2) == CUDA_SUCCESS &&
               exec_destroy(x3) == CUDA_SUCCESS, "exec destroy");
    EXPECT(exec_destroy(x) == CUDA_ERROR_INVALID_VALUE, "twice");
    EXPECT(destroy(during) == CUDA_SUCCESS && destroy(g2) == CUDA_SUCCESS, "destroy");
    CUDACHECK(cudaFree(d));
    CUDACHECK(cudaStreamDestroy(s));
}

int main(void)
{
    rt_watchdog(60);
    CUDACHECK(cudaSetDevice(0));
    test_capture_and_replay();
    test_rules();
    test_threads();
    test_fork_join();
    test_external_events();
    test_exec_update();
    test_pending_launches();
    test_capture_to_graph();
    test_driver();
    printf("ok\n");
    return 0;
}
