/* NaN/Inf checks of reduced buffers.
 *
 * For every AllReduce, ReduceScatter and Reduce of a floating datatype the
 * shim checks the input of the rank before the collective (TRSHIM_NANCHECK
 * =all, the default) and the output after it (Reduce: on the root only):
 * how many elements are NaN, how many are infinite, and the index of the
 * first. With the inputs of every rank and the outputs side by side, the
 * analyzer tells a NaN that came in from one rank from one the reduction
 * made (an fp16 sum past 65504).
 *
 * Never on the job's critical path: nothing here synchronizes a stream or
 * the device, or waits for the GPU on the application's thread. A check is
 * work enqueued on the collective's own stream, so it is ordered with the
 * collective: the input check before it (an in-place collective overwrites
 * its input), the output check after it. Inside a group, both wait for the
 * outermost ncclGroupEnd (the collectives are launched there): the input
 * checks are enqueued just before the real ncclGroupEnd, the output checks
 * just after. On a non-blocking communicator (ncclInProgress) the output
 * check is enqueued by the background thread once ncclCommGetAsyncError no
 * longer says ncclInProgress.
 *
 * Two engines. The GPU engine (tr_nangpu.c) launches a scan kernel and a
 * one-thread kernel that publishes the counts into mapped host memory,
 * through the driver API. The host engine, used where no kernel can run
 * (no nvcc at build time, no driver API, as on the simulated runtime):
 * cudaMemcpyAsync of the buffer (up to the cap) into a pinned staging
 * buffer from a bounded pool, then cudaLaunchHostFunc whose callback only
 * queues the buffer for the background thread and returns; the thread scans
 * it (tr_nanscan.c) and gives the buffer back.
 *
 * The application's CUDA error state is untouched: a check starts only when
 * cudaPeekAtLastError says cudaSuccess (else it is "not_checked" with
 * cuda_error_pending), and when one of our runtime calls fails,
 * cudaGetLastError clears exactly the error we caused. A check that cannot
 * run is recorded as not_checked with a reason, never as clean. A stream
 * that is capturing a CUDA graph is never given our work.
 *
 * Results are kept per check in an append-only table (record index of the
 * call, which buffer, status, counts: tr_nanresults.c); the writer places
 * them in the trace next to the calls (tr_nan_snapshot, tr_nan_place,
 * tr_nan_write_json). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tr_core.h"
#include "tr_nancheck.h"
#include "tr_nangpu.h"
#include "tr_nanresults.h"
#include "tr_nanscan.h"
#include "tr_record.h"

typedef ncclResult_t (*f_asyncerr)(ncclComm_t, ncclResult_t *);

/* ---- the staging pool (host engine) ---------------------------------------- */

/* A pinned buffer; while in flight it carries its check. */
typedef struct stage {
    struct stage *next;
    void *buf;
    int cls;
    uint64_t entry;
    int dtype;
    uint64_t n;
} stage;

#define MIN_CLASS_BYTES (64u << 10)
#define NCLASS 32
static stage *g_free[NCLASS];
static uint64_t g_pool_used;            /* pinned bytes allocated */
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;

static int class_of(uint64_t bytes)
{
    int c = 0;
    while (c < NCLASS - 1 && ((uint64_t)MIN_CLASS_BYTES << c) < bytes) c++;
    return c;
}

/* A buffer of at least bytes, or NULL with *reason (and *err). Buffers are
 * allocated once, when a size is first needed (pinned memory is slow to
 * allocate: the only cost a check adds that is not constant), within
 * TRSHIM_NANCHECK_POOL_MB, and never freed (cudaFreeHost synchronizes). */
static stage *pool_get(const tr_cudart *rt, uint64_t bytes, int *reason, int *err)
{
    int c = class_of(bytes);
    uint64_t size = (uint64_t)MIN_CLASS_BYTES << c;
    pthread_mutex_lock(&g_pool_mu);
    for (int k = c; k < NCLASS && k <= c + 2; k++) {
        stage *s = g_free[k];
        if (s) {
            g_free[k] = s->next;
            pthread_mutex_unlock(&g_pool_mu);
            return s;
        }
    }
    if (g_pool_used + size > tr_cfg()->nancheck_pool_bytes) {
        pthread_mutex_unlock(&g_pool_mu);
        *reason = R_POOL;
        return NULL;
    }
    g_pool_used += size;
    pthread_mutex_unlock(&g_pool_mu);

    stage *s = calloc(1, sizeof *s);
    void *p = NULL;
    cudaError_t r = cudaErrorMemoryAllocation;
    if (s) {
        /* relaxed capture mode: another thread's global-mode graph capture
         * must not see our allocation as an unsafe call */
        r = tr_cuda_host_alloc(rt, &p, size, cudaHostAllocPortable);
    }
    if (r != cudaSuccess || !p) {
        free(s);
        pthread_mutex_lock(&g_pool_mu);
        g_pool_used -= size;
        pthread_mutex_unlock(&g_pool_mu);
        *reason = R_PINNED_ALLOC;
        *err = (int)r;
        return NULL;
    }
    s->buf = p;
    s->cls = c;
    return s;
}

static void pool_put(stage *s)
{
    pthread_mutex_lock(&g_pool_mu);
    s->next = g_free[s->cls];
    g_free[s->cls] = s;
    pthread_mutex_unlock(&g_pool_mu);
}

/* ---- the background thread ---------------------------------------------------
 * Scans the staging buffers the host callbacks hand over, polls the GPU
 * engine's results, and enqueues the output checks of operations on
 * non-blocking communicators once they are enqueued. */

typedef struct defer {
    struct defer *next;
    tr_nan_call c;
    uint64_t entry;             /* pending, engine null, until enqueued */
    uint64_t since_ns;
} defer;

static pthread_mutex_t g_qmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_qcv, g_idle_cv;
static stage *g_ready, *g_ready_tail;   /* handed over by callbacks */
static defer *g_defer;                  /* non-blocking outputs waiting */
static atomic_int g_gpu_pending;        /* GPU checks enqueued whose result has not been read */
static int g_stop, g_stopped;
static pthread_once_t g_thread_once = PTHREAD_ONCE_INIT;
static atomic_int g_thread_ok;

#define DEFER_LIMIT_NS (600ull * 1000000000ull)   /* a non-blocking op not enqueued after 10 min */

/* The host function: hands the buffer over and returns at once (a long
 * host function would hold the stream). No CUDA call. */
static void CUDART_CB host_cb(void *arg)
{
    stage *s = arg;
    s->next = NULL;
    pthread_mutex_lock(&g_qmu);
    if (g_ready_tail) g_ready_tail->next = s;
    else g_ready = s;
    g_ready_tail = s;
    pthread_cond_signal(&g_qcv);
    pthread_mutex_unlock(&g_qmu);
}

static void gpu_done(uint64_t tag, const tr_nanscan_result *r, void *arg)
{
    (void)arg;
    tr_nan_entry_result(tag, r);
    atomic_fetch_sub(&g_gpu_pending, 1);
}

static void check_entry(const tr_nan_call *c, uint64_t e, const void *buf, uint64_t elems);

/* The communicator the NaN thread is asking NCCL about (ncclCommGetAsyncError),
 * NULL between questions: tr_nan_comm_ending waits for it. */
static _Atomic(ncclComm_t) g_asking;

void tr_nan_comm_ending(ncclComm_t comm)
{
    /* the caller has set the communicator's end_kind (sequentially
     * consistent): a question not yet begun sees it and is not asked; one
     * already begun ends before the communicator may be freed */
    while (comm && atomic_load(&g_asking) == comm) sched_yield();
}

/* A deferred output: 1 when finished with (enqueued or given up). */
static int defer_step(defer *d, int stopping)
{
    static _Atomic(f_asyncerr) asyncerr;
    f_asyncerr fn = atomic_load(&asyncerr);
    if (!fn) {
        fn = (f_asyncerr)tr_real("ncclCommGetAsyncError", TR_LIB_NCCL);
        atomic_store(&asyncerr, fn);
    }
    tr_comm *comm = tr_comm_at(d->c.comm_index);
    int reason = R_NONE, err = 0;
    /* announced before end_kind is read (both sequentially consistent), the
     * application's destroy or abort, which sets end_kind first, waits until
     * the question is over (tr_nan_comm_ending) */
    if (!stopping) atomic_store(&g_asking, d->c.comm);
    if (stopping) reason = R_EXIT;
    else if (comm && (atomic_load(&comm->dead) || atomic_load(&comm->end_kind) != TR_END_NONE))
        reason = R_COMM_ENDED;     /* never ask NCCL about a communicator going away */
    else if (!fn) reason = R_NO_RUNTIME;
    else {
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = fn(d->c.comm, &st);
        atomic_store(&g_asking, NULL);
        if (r != ncclSuccess) {
            reason = R_COMM_ERROR;
            err = (int)r;
        } else if (st == ncclInProgress) {
            if (tr_now_ns() - d->since_ns < DEFER_LIMIT_NS) return 0;
            reason = R_ENQUEUE_TIMEOUT;
        } else if (st != ncclSuccess) {
            reason = R_COMM_ERROR;
            err = (int)st;
        }
    }
    atomic_store(&g_asking, NULL);
    if (reason != R_NONE) {
        tr_nan_entry_not_checked(d->entry, reason, err);
        return 1;
    }
    /* this thread's current device is its own: the stream's device for the
     * runtime's legacy default stream */
    const tr_cudart *rt;
    if (d->c.device >= 0 && (rt = tr_cuda_rt_copies())) {
        int cur = -1;
        if (rt->getdev(&cur) != cudaSuccess || cur != d->c.device) rt->setdev(d->c.device);
        rt->getlast();
    }
    check_entry(&d->c, d->entry, d->c.recvbuff, d->c.count);
    return 1;
}

static void *nan_main(void *arg)
{
    (void)arg;
    tr_nest();           /* nothing this thread calls is the application's: never leaves */
    pthread_mutex_lock(&g_qmu);
    for (;;) {
        while (!g_ready && !g_stop) {
            if (!atomic_load(&g_gpu_pending) && !g_defer) {
                pthread_cond_wait(&g_qcv, &g_qmu);
                continue;
            }
            /* results to poll: look again in 1 ms */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            if (pthread_cond_timedwait(&g_qcv, &g_qmu, &ts) == ETIMEDOUT) break;
        }
        int stopping = g_stop;
        stage *jobs = g_ready;
        g_ready = g_ready_tail = NULL;
        defer *ds = g_defer;
        g_defer = NULL;
        pthread_mutex_unlock(&g_qmu);

        while (jobs) {
            stage *s = jobs;
            jobs = s->next;
            tr_nanscan_result r;
            tr_nanscan_init(&r);
            tr_nanscan(s->dtype, s->buf, s->n, 0, &r);
            tr_nan_entry_result(s->entry, &r);
            pool_put(s);
        }
        tr_nangpu_poll(gpu_done, NULL);
        defer *keep = NULL;
        while (ds) {
            defer *d = ds;
            ds = d->next;
            if (defer_step(d, stopping)) free(d);
            else {
                d->next = keep;
                keep = d;
            }
        }

        pthread_mutex_lock(&g_qmu);
        while (keep) {
            defer *d = keep;
            keep = d->next;
            d->next = g_defer;
            g_defer = d;
        }
        if (stopping && !g_ready) {
            g_stopped = 1;
            pthread_cond_broadcast(&g_idle_cv);
            break;
        }
        pthread_cond_broadcast(&g_idle_cv);
    }
    pthread_mutex_unlock(&g_qmu);
    tr_nangpu_stop();
    return NULL;
}

/* At exit, before the CUDA runtime tears its contexts down (registered
 * after the runtime initialized, so it runs before the runtime's own exit
 * handler): scan what the callbacks handed over, read the results that
 * arrived, then stop touching pinned or mapped memory. Bounded (2 s). */
static void nan_atexit(void)
{
    if (tr_is_forked_child()) return;
    pthread_mutex_lock(&g_qmu);
    g_stop = 1;
    pthread_cond_signal(&g_qcv);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += 2;
    while (!g_stopped)
        if (pthread_cond_timedwait(&g_idle_cv, &g_qmu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&g_qmu);
    tr_nangpu_stop();
}

static void thread_start(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_qcv, &ca);
    pthread_cond_init(&g_idle_cv, &ca);
    pthread_condattr_destroy(&ca);
    int e = tr_thread_start(nan_main, "trshim-nan");
    if (e != 0) {
        tr_warn("cannot start the NaN-check thread (%s): buffers are not checked", strerror(e));
        return;
    }
    atexit(nan_atexit);
    atomic_store(&g_thread_ok, 1);
}

static int thread_up(void)
{
    pthread_once(&g_thread_once, thread_start);
    return atomic_load(&g_thread_ok);
}

/* ---- one check ------------------------------------------------------------------ */

static const char *gpu_rc_text(int rc)
{
    switch (rc) {
    case TR_NANGPU_NOT_BUILT: return "the shim was built without nvcc";
    case TR_NANGPU_NO_DRIVER: return "no CUDA driver API (cuModuleLoadData & co.)";
    case TR_NANGPU_LOAD_FAILED: return "cuModuleLoadData failed";
    case TR_NANGPU_HOSTMEM_FAILED: return "cuMemHostAlloc failed";
    case TR_NANGPU_CTX_FAILED: return "the stream's context could not be made current";
    default: return "failed";
    }
}

/* The host engine: copy + host function on the stream. Returns R_NONE or
 * why not (*err); the entry is pending when it returns R_NONE. */
static int host_enqueue(const tr_cudart *rt, uint64_t e, int dtype, const void *buf, uint64_t n,
                        cudaStream_t stream, int device, int *err)
{
    int reason = R_NONE;
    uint64_t bytes = n * tr_nanscan_esize(dtype);
    stage *s = pool_get(rt, bytes, &reason, err);
    if (!s) return reason;
    int cur = -1, switched = 0;
    if (device >= 0 && rt->getdev(&cur) == cudaSuccess && cur != device) {
        cudaError_t r = rt->setdev(device);
        if (r != cudaSuccess) {
            pool_put(s);
            *err = (int)r;
            return R_SET_DEVICE;
        }
        switched = 1;
    }
    s->entry = e;
    s->dtype = dtype;
    s->n = n;
    tr_nan_entry_pending(e, ENG_HOST, n);
    cudaError_t r = rt->memcpy_async(s->buf, buf, bytes, cudaMemcpyDeviceToHost, stream);
    if (r != cudaSuccess) {
        pool_put(s);
        *err = (int)r;
        reason = R_COPY;
    } else if ((r = rt->host_func(stream, host_cb, s)) != cudaSuccess) {
        /* the copy is queued and will write into s: s is never reused */
        *err = (int)r;
        reason = R_HOST_FUNC;
    }
    if (switched) rt->setdev(cur);
    if (reason == R_NONE) atomic_fetch_add_explicit(&tr_nan_used_host, 1, memory_order_relaxed);
    return reason;
}

/* Elements checked of a buffer of elems elements: the cap. */
static uint64_t capped(const tr_nan_call *c, uint64_t elems)
{
    uint64_t most = tr_cfg()->nancheck_max_bytes / tr_nanscan_esize(c->dtype);
    return elems < most ? elems : most;
}

/* Runs the check of entry e (created, no status or pending) now. */
static void check_entry(const tr_nan_call *c, uint64_t e, const void *buf, uint64_t elems)
{
    const tr_settings *cfg = tr_cfg();
    uint64_t n = capped(c, elems);
    if (c->capturing == 1) { tr_nan_entry_not_checked(e, R_CAPTURING, 0); return; }
    if (elems == 0) {
        tr_nan_entry_pending(e, ENG_NONE, 0);
        tr_nanscan_result none;
        tr_nanscan_init(&none);
        tr_nan_entry_result(e, &none);
        return;
    }
    if (!buf) { tr_nan_entry_not_checked(e, R_NULL_BUFFER, 0); return; }
    if (!thread_up()) { tr_nan_entry_not_checked(e, R_NO_THREAD, 0); return; }
    /* without a CUDA runtime (NCCL links its own statically) there is no
     * runtime error state to keep, and only the GPU engine can run */
    const tr_cudart *rt = tr_cuda_rt_copies();
    if (rt) {
        cudaError_t pending = rt->peek();
        if (pending != cudaSuccess) { tr_nan_entry_not_checked(e, R_ERROR_PENDING, (int)pending); return; }
    }

    int err = 0;
    if (cfg->nancheck_engine != TR_NAN_ENGINE_HOST) {
        tr_nan_entry_pending(e, ENG_GPU, n);
        int rc = tr_nangpu_enqueue((void *)c->stream, c->dtype, buf, n, e, &err);
        if (rc == TR_NANGPU_OK) {
            atomic_fetch_add_explicit(&tr_nan_used_gpu, 1, memory_order_relaxed);
            /* the thread polls while this is not 0 (it may even have read
             * the result already: the count is only a reason to look) */
            if (atomic_fetch_add(&g_gpu_pending, 1) == 0) {
                pthread_mutex_lock(&g_qmu);
                pthread_cond_signal(&g_qcv);
                pthread_mutex_unlock(&g_qmu);
            }
            return;
        }
        if (rc == TR_NANGPU_NO_SLOT) { tr_nan_entry_not_checked(e, R_GPU_BUSY, 0); return; }
        if (rc == TR_NANGPU_LAUNCH_FAILED) { tr_nan_entry_not_checked(e, R_GPU_LAUNCH, err); return; }
        tr_nan_note_gpu_why(gpu_rc_text(rc), err);
        if (cfg->nancheck_engine == TR_NAN_ENGINE_GPU) {
            tr_nan_entry_not_checked(e, R_GPU_UNAVAILABLE, err);
            return;
        }
        err = 0;
    }
    if (!rt) { tr_nan_entry_not_checked(e, R_NO_RUNTIME, 0); return; }
    int reason = host_enqueue(rt, e, c->dtype, buf, n, c->stream, c->device, &err);
    if (reason == R_NONE) return;
    /* one of our runtime calls failed: the error it left is ours (there was
     * none before), so this clears exactly that */
    if (reason != R_POOL) rt->getlast();
    tr_nan_entry_not_checked(e, reason, err);
}

static void check_one(const tr_nan_call *c, int buffer, const void *buf, uint64_t elems)
{
    uint64_t e = tr_nan_entry_new(c->rec, buffer, elems);
    if (e != NO_ENTRY) check_entry(c, e, buf, elems);
}

/* ---- the collectives ------------------------------------------------------------- */

static void input_check(const tr_nan_call *c)
{
    uint64_t elems = c->count;
    if (c->op == TR_NAN_OP_REDUCESCATTER) {
        if (c->nranks <= 0) {
            uint64_t e = tr_nan_entry_new(c->rec, BUF_INPUT, 0);
            if (e != NO_ENTRY) tr_nan_entry_not_checked(e, R_SIZE_UNKNOWN, 0);
            return;
        }
        elems = (uint64_t)c->count * (uint64_t)c->nranks;
    }
    check_one(c, BUF_INPUT, c->sendbuff, elems);
}

/* 0: this rank has no output to check (a Reduce off the root) */
static int has_output(const tr_nan_call *c)
{
    if (c->op != TR_NAN_OP_REDUCE) return 1;
    if (c->rank < 0) {
        uint64_t e = tr_nan_entry_new(c->rec, BUF_OUTPUT, c->count);
        if (e != NO_ENTRY) tr_nan_entry_not_checked(e, R_RANK_UNKNOWN, 0);
        return 0;
    }
    return c->rank == c->root;
}

static void output_not_checked(const tr_nan_call *c, int reason, int err)
{
    uint64_t e = tr_nan_entry_new(c->rec, BUF_OUTPUT, c->count);
    if (e != NO_ENTRY) tr_nan_entry_not_checked(e, reason, err);
}

/* After the collective (or its group) returned rc. */
static void output_after(const tr_nan_call *c, ncclResult_t rc, int group_rc)
{
    if (!has_output(c)) return;
    if (rc != ncclSuccess && rc != ncclInProgress) { output_not_checked(c, R_CALL_FAILED, (int)rc); return; }
    if (group_rc != ncclSuccess && group_rc != ncclInProgress)
        { output_not_checked(c, R_GROUP_FAILED, group_rc); return; }
    if (rc == ncclSuccess && group_rc == ncclSuccess) { check_one(c, BUF_OUTPUT, c->recvbuff, c->count); return; }
    /* in progress: enqueued later by the background thread; pending meanwhile */
    if (!thread_up()) { output_not_checked(c, R_NO_THREAD, 0); return; }
    uint64_t e = tr_nan_entry_new(c->rec, BUF_OUTPUT, c->count);
    if (e == NO_ENTRY) return;
    defer *d = malloc(sizeof *d);
    if (!d) { tr_nan_entry_not_checked(e, R_NO_THREAD, 0); return; }
    tr_nan_entry_pending(e, ENG_NONE, capped(c, c->count));
    d->c = *c;
    d->entry = e;
    d->since_ns = tr_now_ns();
    pthread_mutex_lock(&g_qmu);
    d->next = g_defer;
    g_defer = d;
    pthread_cond_signal(&g_qcv);
    pthread_mutex_unlock(&g_qmu);
}

/* This thread's calls inside its current group. */
typedef struct {
    tr_nan_call c;
    ncclResult_t rc;
} grouped;
#define GROUP_MAX 65536
#define TR_TLS __thread __attribute__((tls_model("initial-exec")))
static TR_TLS grouped *t_group;
static TR_TLS int t_ngroup;
static TR_TLS int t_capgroup;

void tr_nan_before(const tr_nan_call *c, int in_group)
{
    if (!in_group) {
        if (tr_cfg()->nancheck == TR_NAN_ALL) input_check(c);
        return;
    }
    if (t_ngroup == t_capgroup) {
        int cap = t_capgroup ? 2 * t_capgroup : 64;
        grouped *g = cap <= GROUP_MAX ? realloc(t_group, (size_t)cap * sizeof *g) : NULL;
        if (!g) {
            /* the checks of this call say why there are none */
            if (tr_cfg()->nancheck == TR_NAN_ALL) {
                uint64_t e = tr_nan_entry_new(c->rec, BUF_INPUT, c->count);
                if (e != NO_ENTRY) tr_nan_entry_not_checked(e, R_GROUP_TOO_LARGE, 0);
            }
            if (c->op != TR_NAN_OP_REDUCE || c->rank == c->root) output_not_checked(c, R_GROUP_TOO_LARGE, 0);
            return;
        }
        t_group = g;
        t_capgroup = cap;
    }
    t_group[t_ngroup].c = *c;
    t_group[t_ngroup].rc = ncclInProgress + 1000;    /* not returned */
    t_ngroup++;
}

void tr_nan_after(const tr_nan_call *c, int in_group, ncclResult_t rc)
{
    if (!in_group) { output_after(c, rc, ncclSuccess); return; }
    for (int i = t_ngroup - 1; i >= 0; i--)
        if (t_group[i].c.rec == c->rec) {
            t_group[i].rc = rc;
            break;
        }
}

void tr_nan_group_end_before(void)
{
    if (tr_cfg()->nancheck != TR_NAN_ALL) return;
    for (int i = 0; i < t_ngroup; i++) input_check(&t_group[i].c);
}

void tr_nan_group_end_after(ncclResult_t rc)
{
    for (int i = 0; i < t_ngroup; i++) {
        grouped *g = &t_group[i];
        output_after(&g->c, g->rc, (int)rc);
    }
    t_ngroup = 0;
    if (t_capgroup > 1024) {          /* a huge group once: give the memory back */
        free(t_group);
        t_group = NULL;
        t_capgroup = 0;
    }
}
