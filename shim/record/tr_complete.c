/* Completion of NCCL operations on the GPU, observed without blocking, and
 * the poller thread that also keeps the ring file's heartbeat and runs the
 * hang watchdog (tr_watchdog.c).
 *
 * After a collective or send/recv is enqueued (outside a group: when it
 * returned ncclSuccess; inside one: when the outermost ncclGroupEnd did, one
 * event per distinct stream shared by the group's calls on it), the calling
 * thread records an event on the call's stream: cudaEventRecord of an event
 * from a per-device pool (cudaEventDisableTiming, created on first need,
 * never destroyed, reused), and sets the ring record's gpu to PENDING. The
 * poller thread queries the oldest pending event of each stream
 * (cudaEventQuery: never blocks, never synchronizes; events of one stream
 * complete in order, so the ones behind it need no query) about every
 * millisecond while anything is pending; once complete it stores the ring
 * record's done_ns, then gpu = DONE (ERROR when the query failed: a sticky
 * error), and gives the event back to the pool. Idle, it sleeps, waking once
 * a second for the heartbeat and the watchdog.
 *
 * The application's CUDA error state is left exactly as it was: nothing is
 * done when cudaPeekAtLastError shows an error pending on the calling thread
 * (the call stays untracked), and when one of our runtime calls fails,
 * cudaGetLastError clears exactly the error it left. No CUDA call is made on
 * an application thread unless a call is being tracked (or, after the
 * application's cudaDeviceSynchronize with operations pending, cudaGetDevice:
 * a synchronization that succeeded completes what it waited for, at once,
 * tr_complete_synced). A stream that is
 * capturing a graph, or may be (capturing unknown), is never given an event.
 *
 * Untracked (gpu stays UNTRACKED, JSON null): failed calls, group calls
 * themselves, calls of a group whose GroupEnd failed or returned
 * ncclInProgress, calls returning ncclInProgress (non-blocking
 * communicators: the operation may not be enqueued yet when the call
 * returns, so an event recorded then could complete before it),
 * capturing streams, TRSHIM_COMPLETION=0, no CUDA runtime, an error pending,
 * and calls beyond the bounds: PEND_MAX operations pending at once,
 * MAX_STREAMS distinct streams, GROUP_MAX calls in one group (counted, one
 * "trshim:" line from the poller).
 *
 * Aborted operations. ncclCommAbort (and Revoke) makes a hung operation's
 * kernels exit: its event completes although the operation never did. So
 * an operation seen not complete by a query that began after its
 * communicator's abort began (tr_complete_aborting, before the real call),
 * or tracked after that, becomes ABORTED, not DONE, when its event
 * completes. The abort waits (bounded) for one poller pass that began after
 * it: what completed before the abort is DONE, what had not is seen pending
 * then. The same for a communicator that reported an asynchronous error
 * and, for every communicator, after the process's fatal signal. The
 * shim's own order of events decides, never a comparison of clocks.
 *
 * At exit (an atexit handler registered after the runtime initialized, so
 * it runs before the runtime's own teardown and before the exit write) the
 * poller makes one last pass, then makes no CUDA call again; the heartbeat
 * goes on. A forked child tracks nothing. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tr_complete.h"
#include "tr_core.h"
#include "tr_ring.h"
#include "tr_stacks.h"

#define TR_TLS __thread __attribute__((tls_model("initial-exec")))

#define PEND_MAX 16384            /* operations (ring records) pending at once */
#define EVENT_MAX (2 * PEND_MAX)  /* events in all pools together */
#define MAX_STREAMS 1024          /* distinct (stream, device) pairs ever tracked */
#define MAX_DEV 64
#define GROUP_MAX 65536           /* calls remembered in one group */
#define POLL_NS 1000000ull        /* poll period while something is pending */
#define BEAT_NS 1000000000ull     /* heartbeat and watchdog period */
#define IDLE_NS 100000000ull      /* polling goes on this long after the last pending operation */

/* ---- pending operations ------------------------------------------------------ */

typedef struct {
    cudaEvent_t ev;               /* NULL: to be created */
    int32_t device;
    int32_t refs;                 /* entries waiting on it */
    int32_t next;                 /* its device's free list */
} event_t;

typedef struct {
    uint64_t rec;                 /* ring record index */
    uint64_t exit_ns;             /* when the call (or its group) returned */
    int32_t ev;
    int32_t next;                 /* next entry of its stream, or of the free list; -1 */
    int32_t comm;                 /* its ring comm slot, -1 */
    uint64_t no;                  /* g_tracked when it was tracked: its order among all entries */
    int stalled;                  /* seen by the watchdog (poller only) */
    int aborted;                  /* seen pending after its communicator's abort began */
} entry_t;

typedef struct {
    uintptr_t stream;
    int32_t device;
    int32_t head, tail;           /* its entries, oldest first; -1 */
} stream_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;       /* the poller's sleep */
static pthread_cond_t g_done_cv = PTHREAD_COND_INITIALIZER;  /* the last pass done */
static event_t *g_events;
static int32_t g_nevents;
static int32_t g_free_event[MAX_DEV];
static entry_t *g_entries;
static int32_t g_free_entry;
static int32_t g_npending;                  /* entries listed + reserved by a track() under way */
static int32_t g_nlisted;                   /* entries in the streams' lists: tracked, not popped */
static stream_t g_streams[MAX_STREAMS];
static _Atomic int32_t g_nstreams;
static int g_sleeping;                      /* the poller waits on g_cv */
static int g_stop, g_stopped;               /* at exit: the last pass asked for / done */
static atomic_int g_poller_up;
static _Atomic uint64_t g_untracked_full;   /* calls not tracked: a bound was reached */
static _Atomic uint64_t g_tracked;          /* entries ever tracked (g_mu to raise) */
static pthread_once_t g_storage_once = PTHREAD_ONCE_INIT;

/* ---- aborted communicators ---------------------------------------------------------
 * The comm slots whose abort began (slot + 1; 0: being stored), in the
 * order they began; all of them once the table is full or after a fatal
 * signal. Read by the poller before each query it makes while any is set. */
#define ABORTS_MAX 4096
static _Atomic int32_t g_aborted_slot[ABORTS_MAX];
static _Atomic uint32_t g_naborted;
static atomic_int g_all_aborted;
/* poller passes begun and ended (g_mu): an abort waits for one that began after it */
static pthread_cond_t g_pass_cv = PTHREAD_COND_INITIALIZER;
static uint64_t g_pass_begun, g_pass_ended;

typedef struct { uint32_t n; int all; } abort_view;    /* what had begun before a query */

static abort_view aborts_now(void)
{
    return (abort_view){atomic_load(&g_naborted), atomic_load(&g_all_aborted)};
}

static int aborts_any(abort_view v) { return v.n > 0 || v.all; }

static int comm_aborted(abort_view v, int32_t comm)
{
    if (v.all) return 1;
    if (comm < 0) return 0;
    for (uint32_t i = 0; i < v.n && i < ABORTS_MAX; i++)
        if (atomic_load_explicit(&g_aborted_slot[i], memory_order_relaxed) == comm + 1) return 1;
    return 0;
}
static pthread_once_t g_atexit_once = PTHREAD_ONCE_INIT;

static void storage_init(void)
{
    event_t *ev = calloc(EVENT_MAX, sizeof *ev);
    entry_t *en = calloc(PEND_MAX, sizeof *en);
    if (!ev || !en) {
        free(ev);
        free(en);
        return;
    }
    for (int d = 0; d < MAX_DEV; d++) g_free_event[d] = -1;
    for (int32_t i = 0; i < PEND_MAX; i++) en[i].next = i + 1 < PEND_MAX ? i + 1 : -1;
    g_free_entry = 0;
    g_entries = en;
    g_events = ev;           /* last: tracking is possible from here on */
}

/* The slot of (stream, device), made when new; -1 when the table is full.
 * g_mu held. A thread's last stream is remembered: slots are never reused. */
static TR_TLS int32_t t_last_slot = -1;

static int32_t stream_slot(uintptr_t stream, int32_t device)
{
    int32_t k = t_last_slot;
    if (k >= 0 && g_streams[k].stream == stream && g_streams[k].device == device) return k;
    int32_t n = atomic_load_explicit(&g_nstreams, memory_order_relaxed);
    for (k = 0; k < n; k++)
        if (g_streams[k].stream == stream && g_streams[k].device == device) break;
    if (k == n) {
        if (n == MAX_STREAMS) return -1;
        g_streams[k] = (stream_t){stream, device, -1, -1};
        atomic_store_explicit(&g_nstreams, n + 1, memory_order_release);
    }
    t_last_slot = k;
    return k;
}

static void event_free(int32_t e)
{
    int32_t d = g_events[e].device;
    g_events[e].next = g_free_event[d];
    g_free_event[d] = e;
}

/* Creates the event of pool slot e on the current device (which is its
 * device), in relaxed capture mode: another thread's graph capture must not
 * see our call as unsafe. 0 on success; on failure the error is cleared. */
static int event_create(const tr_cudart *rt, int32_t e)
{
    cudaEvent_t ev;
    if (tr_cuda_event_new(rt, &ev) != 0) return -1;
    g_events[e].ev = ev;
    return 0;
}

static void mark_pending(uint64_t rec)
{
    trr_record *r = tr_ring_get(rec);
    if (r) __atomic_store_n(&r->gpu, (uint8_t)TRR_GPU_PENDING, __ATOMIC_RELEASE);
}

static void complete_atexit(void);
static void complete_atexit_register(void) { atexit(complete_atexit); }

/* The calls recs[0..n), all enqueued on stream of device (-1: the current
 * one), returned at exit_ns: one event after them, shared. */
static void track(const uint64_t *recs, int n, cudaStream_t stream, int device, uint64_t exit_ns)
{
    const tr_cudart *rt;
    if (n <= 0 || !atomic_load_explicit(&g_poller_up, memory_order_acquire) || !(rt = tr_cuda_rt_events())) return;
    pthread_once(&g_storage_once, storage_init);
    if (!g_events) return;
    /* an error of the application's pending: left as it is, untracked */
    if (rt->peek() != cudaSuccess) return;
    int cur = -1;
    if (rt->getdev(&cur) != cudaSuccess) {
        rt->getlast();
        return;
    }
    if (device < 0) device = cur;
    if (device < 0 || device >= MAX_DEV) return;

    pthread_mutex_lock(&g_mu);
    int stopping = g_stop;        /* exiting: the poller makes no more CUDA calls */
    int32_t si = stopping ? -1 : stream_slot((uintptr_t)stream, device);
    int32_t e = -1;
    if (si >= 0 && g_npending + n <= PEND_MAX) {
        e = g_free_event[device];
        if (e >= 0) g_free_event[device] = g_events[e].next;
        else if (g_nevents < EVENT_MAX) {
            e = g_nevents++;
            g_events[e] = (event_t){NULL, device, 0, -1};
        }
        if (e >= 0) g_npending += n;        /* reserved */
    }
    pthread_mutex_unlock(&g_mu);
    if (e < 0) {
        if (!stopping) atomic_fetch_add_explicit(&g_untracked_full, (uint64_t)n, memory_order_relaxed);
        return;
    }

    /* the event must be of the stream's device: the stream 0 of NCCL is
     * that of the communicator's device */
    int switched = 0, ok = 1;
    if (cur != device) {
        if (rt->setdev(device) != cudaSuccess) {
            rt->getlast();
            ok = 0;
        } else {
            switched = 1;
        }
    }
    if (ok && !g_events[e].ev) ok = event_create(rt, e) == 0;
    if (ok && rt->event_record(g_events[e].ev, stream) != cudaSuccess) {
        rt->getlast();          /* ours: there was none before */
        ok = 0;
    }
    if (switched) rt->setdev(cur);

    abort_view av = aborts_now();
    pthread_mutex_lock(&g_mu);
    g_npending -= n;
    if (ok) {
        for (int i = 0; i < n; i++) {
            int32_t x = g_free_entry;
            g_free_entry = g_entries[x].next;
            trr_record *r = tr_ring_get(recs[i]);
            int32_t comm = r ? r->comm : -1;
            /* tracked after its communicator's abort began: whatever completes is the abort's */
            g_entries[x] = (entry_t){recs[i], exit_ns, e, -1, comm, atomic_load(&g_tracked) + 1, 0,
                                     aborts_any(av) && comm_aborted(av, comm)};
            atomic_store(&g_tracked, g_entries[x].no);
            mark_pending(recs[i]);
            stream_t *s = &g_streams[si];
            if (s->tail >= 0) g_entries[s->tail].next = x;
            else s->head = x;
            s->tail = x;
        }
        g_events[e].refs = n;
        g_npending += n;
        g_nlisted += n;
        if (g_sleeping) pthread_cond_signal(&g_cv);
    } else {
        event_free(e);
    }
    pthread_mutex_unlock(&g_mu);
    /* registered once the runtime is initialized: runs before its teardown */
    if (ok) pthread_once(&g_atexit_once, complete_atexit_register);
}

/* ---- the wrappers' side ---------------------------------------------------------- */

void tr_complete_after(uint64_t rec, cudaStream_t stream, int capturing, ncclResult_t rc)
{
    if (rc != ncclSuccess || capturing != 0 || !tr_cfg()->completion || tr_is_forked_child()) return;
    trr_record *r = tr_ring_get(rec);
    if (!r) return;
    track(&rec, 1, stream, r->device, r->state == TRR_REC_RETURNED ? r->exit_ns : tr_now_ns());
}

/* This thread's calls inside its current group. */
typedef struct {
    uint64_t rec;
    cudaStream_t stream;
    int32_t device;
} grouped;
static TR_TLS grouped *t_group;
static TR_TLS int t_ngroup, t_capgroup;

void tr_complete_group_call(uint64_t rec, cudaStream_t stream, int capturing)
{
    if (capturing != 0 || !tr_cfg()->completion || tr_is_forked_child()) return;
    trr_record *r = tr_ring_get(rec);
    if (!r) return;
    if (t_ngroup == t_capgroup) {
        int cap = t_capgroup ? 2 * t_capgroup : 64;
        grouped *g = cap <= GROUP_MAX ? realloc(t_group, (size_t)cap * sizeof *g) : NULL;
        if (!g) {
            atomic_fetch_add_explicit(&g_untracked_full, 1, memory_order_relaxed);
            return;
        }
        t_group = g;
        t_capgroup = cap;
    }
    t_group[t_ngroup++] = (grouped){rec, stream, r->device};
}

void tr_complete_group_end(ncclResult_t rc)
{
    int n = t_ngroup;
    t_ngroup = 0;
    if (rc == ncclSuccess && n > 0) {
        uint64_t now = tr_now_ns();
        uint64_t *recs = malloc((size_t)n * sizeof *recs);
        /* one event per distinct (stream, device), after the group: the
         * calls of each moved to the front of what is left */
        for (int i = 0; recs && i < n;) {
            int k = i + 1;
            for (int j = i + 1; j < n; j++)
                if (t_group[j].stream == t_group[i].stream && t_group[j].device == t_group[i].device) {
                    grouped t = t_group[k];
                    t_group[k++] = t_group[j];
                    t_group[j] = t;
                }
            int m = 0;
            for (int j = i; j < k; j++) {
                /* only calls that were enqueued (a failed one fails the group anyway) */
                trr_record *r = tr_ring_get(t_group[j].rec);
                if (r && r->state == TRR_REC_RETURNED && r->rc == ncclSuccess) recs[m++] = t_group[j].rec;
            }
            track(recs, m, t_group[i].stream, t_group[i].device, now);
            i = k;
        }
        free(recs);
    }
    if (t_capgroup > 1024) {          /* a huge group once: give the memory back */
        free(t_group);
        t_group = NULL;
        t_capgroup = 0;
    }
}

/* ---- the poller ------------------------------------------------------------------- */

static const tr_cudart *g_prt;        /* the runtime, once found (the poller's) */
static int g_poll_device = -1;        /* the poller's current device */
static int g_capture_relaxed;         /* the poller's capture mode was made relaxed */

/* The record of index rec completed (state DONE, ERROR or ABORTED) at t;
 * one already marked (by an application's synchronization, g_mu held by
 * both) is left as it is. Its slot
 * is reused once index rec + capacity is handed out (the head passes it):
 * then nothing is stored, and a store that raced with the reuse is taken
 * back (a newer record it reached was PENDING, as it is again). */
static void mark_done(uint64_t rec, int state, uint64_t t)
{
    uint64_t cap = tr_ring_capacity();
    trr_record *r = tr_ring_get(rec);
    if (!r || tr_ring_head() >= rec + cap || __atomic_load_n(&r->gpu, __ATOMIC_ACQUIRE) != TRR_GPU_PENDING) return;
    if (state == TRR_GPU_DONE) __atomic_store_n(&r->done_ns, t, __ATOMIC_RELAXED);
    uint8_t expect = TRR_GPU_PENDING;
    if (!__atomic_compare_exchange_n(&r->gpu, &expect, (uint8_t)state, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        return;
    if (tr_ring_head() >= rec + cap && tr_ring_get(rec) != r) {
        expect = (uint8_t)state;
        __atomic_compare_exchange_n(&r->gpu, &expect, (uint8_t)TRR_GPU_PENDING, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED);
    }
}

#define POP_BATCH 256            /* entries popped per hold of g_mu */

/* Pops the entries of stream s from its head up to and including entry
 * last (in the list), or, when last < 0, those sharing the head's event e:
 * their records get state. g_mu held; released between batches. */
static void pop_done(stream_t *s, int32_t last, int32_t e, int state, uint64_t t)
{
    for (int n = 1;; n++) {
        int32_t h = s->head;
        if (h < 0 || (last < 0 && g_entries[h].ev != e)) return;
        int32_t ev = g_entries[h].ev;
        mark_done(g_entries[h].rec, state == TRR_GPU_DONE && g_entries[h].aborted ? TRR_GPU_ABORTED : state, t);
        s->head = g_entries[h].next;
        if (s->head < 0) s->tail = -1;
        g_entries[h].next = g_free_entry;
        g_free_entry = h;
        g_npending--;
        g_nlisted--;
        if (--g_events[ev].refs == 0) event_free(ev);
        if (h == last) return;
        if (n % POP_BATCH == 0) {          /* let the callers in */
            pthread_mutex_unlock(&g_mu);
            pthread_mutex_lock(&g_mu);
        }
    }
}

/* The poller's current device := dev (never a context on another one). */
static void poll_device(int dev)
{
    if (dev == g_poll_device) return;
    if (g_prt->setdev(dev) == cudaSuccess) g_poll_device = dev;
    else g_prt->getlast();
}

/* The entries of stream slot si that completed; the watchdog looks at the
 * first that did not. Events of one stream complete in order: when its
 * newest is complete, all are (one query for a stream that keeps up);
 * else its oldest is asked, then the next. Returns 1 when the oldest
 * incomplete one is overdue. */
static int poll_stream(int32_t si, uint64_t now)
{
    stream_t *s = &g_streams[si];
    for (;;) {
        pthread_mutex_lock(&g_mu);
        int32_t h = s->head, last = s->tail;
        if (h < 0) {
            pthread_mutex_unlock(&g_mu);
            return 0;
        }
        int32_t e = g_entries[h].ev, et = g_entries[last].ev;
        cudaEvent_t ev = g_events[e].ev, evt = g_events[et].ev;
        int dev = g_events[e].device;
        pthread_mutex_unlock(&g_mu);

        poll_device(dev);
        if (et != e) {
            cudaError_t q = g_prt->event_query(evt);
            if (q == cudaSuccess) {
                uint64_t t = tr_now_ns();
                pthread_mutex_lock(&g_mu);
                pop_done(s, last, -1, TRR_GPU_DONE, t);
                pthread_mutex_unlock(&g_mu);
                continue;
            }
            g_prt->getlast();         /* not ready (some runtimes note it), or an error: asked below */
        }
        abort_view av = aborts_now();    /* before the query: aborts that began before it */
        cudaError_t q = g_prt->event_query(ev);
        if (q == cudaErrorNotReady) {
            g_prt->getlast();
            if (aborts_any(av)) {
                /* events of a stream complete in order: every entry of it is pending now */
                pthread_mutex_lock(&g_mu);
                for (int32_t x = s->head; x >= 0; x = g_entries[x].next)
                    if (!g_entries[x].aborted && comm_aborted(av, g_entries[x].comm)) g_entries[x].aborted = 1;
                pthread_mutex_unlock(&g_mu);
            }
            return tr_watchdog_pending(&g_entries[h].stalled, g_entries[h].rec, g_entries[h].exit_ns, now);
        }
        int state = TRR_GPU_DONE;
        if (q != cudaSuccess) {
            g_prt->getlast();         /* this thread's own error state */
            state = TRR_GPU_ERROR;
            trr_record rr;            /* the first sticky error (tr_crash.c), at the call it followed */
            int have = tr_ring_read(g_entries[h].rec, &rr);
            tr_crash_error(TRR_ERR_CUDA, q, NULL, "cudaEventQuery (trshim's completion poller)", have ? rr.stack : -1,
                           have ? rr.pystack : -1, have ? rr.comm : -1);
        }
        uint64_t t = tr_now_ns();
        pthread_mutex_lock(&g_mu);
        pop_done(s, -1, e, state, t);   /* every entry sharing the event (a group's calls on this stream) */
        pthread_mutex_unlock(&g_mu);
    }
}

/* One pass over every stream. Returns 1 when a pending call is overdue.
 * Its end is told to the ring header (tr_ring_pending): the operations
 * still listed and when the oldest of them was enqueued (the earliest of
 * the streams' heads: each stream's list is in tracking order), so that a
 * watcher sees what waits without asking this process. No pass runs while
 * nothing is pending: the last one said 0. */
static int poll_all(uint64_t now)
{
    if (!g_capture_relaxed && g_prt->capmode) {
        tr_cuda_relax_thread(g_prt);
        g_capture_relaxed = 1;
    }
    pthread_mutex_lock(&g_mu);
    uint64_t pass = ++g_pass_begun;
    pthread_mutex_unlock(&g_mu);
    int overdue = 0;
    int32_t n = atomic_load_explicit(&g_nstreams, memory_order_acquire);
    for (int32_t si = 0; si < n; si++) overdue |= poll_stream(si, now);
    pthread_mutex_lock(&g_mu);
    g_pass_ended = pass;
    pthread_cond_broadcast(&g_pass_cv);
    int32_t listed = g_nlisted;
    uint64_t oldest = 0;
    n = atomic_load_explicit(&g_nstreams, memory_order_acquire);
    for (int32_t si = 0; listed > 0 && si < n; si++) {
        int32_t h = g_streams[si].head;
        if (h >= 0 && (!oldest || g_entries[h].exit_ns < oldest)) oldest = g_entries[h].exit_ns;
    }
    pthread_mutex_unlock(&g_mu);
    tr_ring_pending(listed > 0 ? (uint32_t)listed : 0, oldest, now);
    return overdue;
}

static void *poller_main(void *arg)
{
    (void)arg;
    tr_nest();           /* nothing this thread calls is the application's: never leaves */
    uint64_t last_beat = 0, last_active = 0;
    int cuda_off = 0, gpu_overdue = 0, host_overdue = 0;
    for (;;) {
        uint64_t now = tr_now_ns();
        pthread_mutex_lock(&g_mu);
        int pending = g_npending > 0, stop = g_stop;
        pthread_mutex_unlock(&g_mu);
        if (pending) last_active = now;
        /* GPU first, with the same clock as the host scan: of two calls
         * stuck together, the older (the cause) is the one reported */
        if (!g_prt) g_prt = tr_cuda_rt_found();
        if (!cuda_off && (pending || stop) && g_prt) gpu_overdue = poll_all(now);
        else if (!pending) gpu_overdue = 0;
        if (stop && !cuda_off) {
            /* the last pass is done: no CUDA call from here on */
            cuda_off = 1;
            pthread_mutex_lock(&g_mu);
            g_stopped = 1;
            pthread_cond_broadcast(&g_done_cv);
            pthread_mutex_unlock(&g_mu);
        }
        if (now - last_beat >= BEAT_NS) {
            last_beat = now;
            tr_ring_heartbeat();
            host_overdue = tr_watchdog_host(now);
            uint64_t full = atomic_load(&g_untracked_full);
            if (full)
                tr_warn("completion: more than %d operations pending, %d streams or %d calls in a group: "
                        "some operations are not tracked (gpu null)", PEND_MAX, MAX_STREAMS, GROUP_MAX);
        }
        tr_watchdog_settle(gpu_overdue || host_overdue);
        tr_ring_grow_ahead();

        /* While operations come (a training loop), poll every millisecond
         * without being woken: a wake-up would cost the caller a system
         * call per operation. Idle for a while: sleep until the next
         * heartbeat, woken by the next operation tracked. */
        pthread_mutex_lock(&g_mu);
        if (!cuda_off && (g_npending > 0 || g_stop || tr_now_ns() - last_active < IDLE_NS)) {
            pthread_mutex_unlock(&g_mu);
            struct timespec ts = {0, (long)POLL_NS};
            nanosleep(&ts, NULL);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t wake = last_beat + BEAT_NS, t = tr_now_ns();
        uint64_t wait = wake > t ? wake - t : 0;
        ts.tv_sec += (time_t)(wait / 1000000000ull);
        ts.tv_nsec += (long)(wait % 1000000000ull);
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        g_sleeping = 1;
        while (cuda_off || (g_npending == 0 && !g_stop))
            if (pthread_cond_timedwait(&g_cv, &g_mu, &ts) == ETIMEDOUT) break;
        g_sleeping = 0;
        pthread_mutex_unlock(&g_mu);
    }
    return NULL;
}

/* At exit, before the CUDA runtime tears down and before the exit write:
 * the last pass (what completed by now is DONE in the exit trace), bounded. */
static void complete_atexit(void)
{
    if (tr_is_forked_child() || !atomic_load(&g_poller_up)) return;
    pthread_mutex_lock(&g_mu);
    g_stop = 1;
    pthread_cond_signal(&g_cv);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += 1;
    while (!g_stopped)
        if (pthread_cond_timedwait(&g_done_cv, &g_mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&g_mu);
}

void tr_complete_start(void)
{
    if (tr_is_forked_child() || atomic_load(&g_poller_up)) return;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &ca);
    pthread_cond_init(&g_done_cv, &ca);
    pthread_cond_init(&g_pass_cv, &ca);
    pthread_condattr_destroy(&ca);
    int e = tr_thread_start(poller_main, "trshim-poll");
    if (e != 0) {
        tr_warn("cannot start the completion thread (%s): GPU completion, heartbeat and hang watchdog are off",
                strerror(e));
        return;
    }
    atomic_store_explicit(&g_poller_up, 1, memory_order_release);
}

uint64_t tr_complete_untracked_full(void) { return atomic_load(&g_untracked_full); }

/* ---- the application's synchronizations ----------------------------------------- */

uint64_t tr_complete_mark(void) { return atomic_load_explicit(&g_tracked, memory_order_acquire); }

/* A synchronization that returned cudaSuccess completed everything enqueued
 * before it on its stream (all streams of the device): the records of the
 * entries tracked by then are DONE now (ABORTED when released by an abort),
 * so a process killed right after it does not leave them pending in its
 * ring. The entries stay where they are: only the poller pops them (its
 * query then finds them complete; mark_done stores nothing twice). No CUDA
 * call but cudaGetDevice for a device-wide one, and none when nothing is
 * pending. */
void tr_complete_synced(int whole_device, cudaStream_t stream, uint64_t mark)
{
    if (!mark || !g_events || tr_is_forked_child()) return;
    int device = -1;
    if (whole_device) {
        const tr_cudart *rt = tr_cuda_rt_events();
        if (!rt || rt->getdev(&device) != cudaSuccess) return;
    }
    uint64_t t = tr_now_ns();
    pthread_mutex_lock(&g_mu);
    int32_t n = atomic_load_explicit(&g_nstreams, memory_order_acquire);
    for (int32_t si = 0; si < n && g_npending > 0 && !g_stopped; si++) {
        stream_t *s = &g_streams[si];
        if (whole_device ? s->device != device : s->stream != (uintptr_t)stream) continue;
        /* the entries tracked before the synchronization: the head's run of them */
        for (int32_t x = s->head; x >= 0 && g_entries[x].no <= mark; x = g_entries[x].next)
            mark_done(g_entries[x].rec, g_entries[x].aborted ? TRR_GPU_ABORTED : TRR_GPU_DONE, t);
    }
    pthread_mutex_unlock(&g_mu);
}

/* ---- aborts ------------------------------------------------------------------------ */

#define ABORT_WAIT_NS 200000000ull    /* the longest an abort waits for the poller's pass */

void tr_complete_aborting(int32_t comm)
{
    if (comm < 0 || tr_is_forked_child()) return;
    abort_view v = aborts_now();
    if (comm_aborted(v, comm)) return;
    uint32_t i = atomic_fetch_add(&g_naborted, 1);
    if (i < ABORTS_MAX) atomic_store(&g_aborted_slot[i], comm + 1);
    else atomic_store(&g_all_aborted, 1);
    if (!atomic_load_explicit(&g_poller_up, memory_order_acquire)) return;
    /* one pass that begins after this point: the operations not complete
     * now are seen pending by it (nothing to wait for when none is) */
    pthread_mutex_lock(&g_mu);
    if (g_npending > 0 && !g_stop && !g_stopped) {
        uint64_t want = g_pass_begun + 1;
        if (g_sleeping) pthread_cond_signal(&g_cv);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)ABORT_WAIT_NS;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        while (g_pass_ended < want && !g_stopped)
            if (pthread_cond_timedwait(&g_pass_cv, &g_mu, &ts) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&g_mu);
}

void tr_complete_fatal(void) { atomic_store(&g_all_aborted, 1); }
