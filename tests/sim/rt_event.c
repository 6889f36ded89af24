/* Events: markers queued on streams.
 *
 * Each cudaEventRecord creates a record: a task queued on the stream that
 * notes the time when the stream's worker reaches it. The event points to
 * its latest record; queries, waits and timing look at that record's
 * (stream, ticket), so re-recording an event never changes a wait that was
 * set up before. Records are reference counted (the event and the queued
 * task each hold one), so destroying an event with a pending record is safe.
 *
 * An event recorded on a capturing stream gets a record without a stream:
 * a capture mark (rt_capture.c), which a stream waiting for the event
 * joins; querying or synchronizing it is cudaErrorCapturedEvent, as in
 * CUDA. With cudaEventRecordExternal / cudaEventWaitExternal the record or
 * the wait becomes a node of the graph instead, done at each launch.
 *
 * Event structures are reused, never freed: a thread racing cudaEventDestroy
 * with another call on the same event touches valid memory. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "sim_internal.h"

struct record {
    atomic_int refs;
    trsim_stream *stream;       /* NULL for a record made in capture */
    trsim_capture_mark *mark;   /* that record's place in its capture */
    uint64_t ticket;
    uint64_t time_ns;           /* written by the worker before the ticket completes */
};

struct event {
    pthread_mutex_t lock;
    unsigned flags;
    int device;
    struct record *rec;         /* latest record; NULL: never recorded */
    struct event *free_next;
};

struct record_task {
    trsim_task task;
    struct record *rec;
};

static pthread_once_t events_once = PTHREAD_ONCE_INIT;
static trsim_handles *event_handles;
static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static struct event *free_events;

static void events_init(void)
{
    event_handles = trsim_handles_new(2);
    if (!event_handles) {
        trsim_warn("cannot initialize events");
        abort();
    }
}

static void record_release(struct record *rec)
{
    if (rec && atomic_fetch_sub(&rec->refs, 1) == 1) {
        trsim_capture_mark_free(rec->mark);
        free(rec);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static trsim_task_state record_run(trsim_task *task)
{
    struct record_task *rt = (struct record_task *)task;
    rt->rec->time_ns = now_ns();
    return TRSIM_TASK_DONE;
}

static void record_destroy(trsim_task *task)
{
    struct record_task *rt = (struct record_task *)task;
    record_release(rt->rec);
    free(rt);
}

static cudaError_t event_get(cudaEvent_t handle, struct event **out)
{
    pthread_once(&events_once, events_init);
    struct event *ev = trsim_handle_get(event_handles, (uintptr_t)handle);
    if (!ev)
        return cudaErrorInvalidResourceHandle;
    *out = ev;
    return cudaSuccess;
}

/* Returns the event's latest record with a reference the caller releases,
 * or NULL when the event was never recorded. */
static struct record *event_record(struct event *ev)
{
    pthread_mutex_lock(&ev->lock);
    struct record *rec = ev->rec;
    if (rec)
        atomic_fetch_add(&rec->refs, 1);
    pthread_mutex_unlock(&ev->lock);
    return rec;
}

/* ev is done with: a later cudaEventCreate may reuse it. */
static void event_free(struct event *ev)
{
    pthread_mutex_lock(&free_lock);
    ev->free_next = free_events;
    free_events = ev;
    pthread_mutex_unlock(&free_lock);
}

TRSIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    pthread_once(&events_once, events_init);
    const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!event || (flags & ~known))
        return trsim_error(cudaErrorInvalidValue);
    /* CUDA requires interprocess events to be created without timing. */
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
        return trsim_error(cudaErrorInvalidValue);

    pthread_mutex_lock(&free_lock);
    struct event *ev = free_events;
    if (ev)
        free_events = ev->free_next;
    pthread_mutex_unlock(&free_lock);
    if (!ev) {
        ev = calloc(1, sizeof *ev);
        if (!ev)
            return trsim_error(cudaErrorMemoryAllocation);
        pthread_mutex_init(&ev->lock, NULL);
    }
    ev->flags = flags;
    ev->device = trsim_current_device();
    ev->rec = NULL;
    ev->free_next = NULL;
    uintptr_t h = trsim_handle_add(event_handles, ev);
    if (!h) {
        event_free(ev);
        return trsim_error(cudaErrorMemoryAllocation);
    }
    *event = (cudaEvent_t)h;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

TRSIM_API cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    pthread_once(&events_once, events_init);
    struct event *ev = trsim_handle_remove(event_handles, (uintptr_t)event);
    if (!ev)
        return trsim_error(cudaErrorInvalidResourceHandle);
    /* A pending record completes on its own: the queued task holds it. */
    pthread_mutex_lock(&ev->lock);
    struct record *rec = ev->rec;
    ev->rec = NULL;
    pthread_mutex_unlock(&ev->lock);
    record_release(rec);
    event_free(ev);
    return cudaSuccess;
}

static cudaError_t record_on(struct event *ev, trsim_stream *s);
static cudaError_t node_task(trsim_stream *s, cudaEvent_t event, enum cudaGraphNodeType type);

/* A record made in capture: the stream's place in it, no work (a normal
 * record when the capture ended meanwhile). */
static cudaError_t record_in_capture(struct event *ev, trsim_stream *s)
{
    cudaError_t err;
    struct record *rec = calloc(1, sizeof *rec);
    if (!rec)
        return cudaErrorMemoryAllocation;
    rec->mark = trsim_capture_mark_new(s, &err);
    if (!rec->mark) {
        free(rec);
        return err != cudaSuccess ? err : record_on(ev, s);
    }
    atomic_init(&rec->refs, 1);
    pthread_mutex_lock(&ev->lock);
    struct record *old = ev->rec;
    ev->rec = rec;
    pthread_mutex_unlock(&ev->lock);
    record_release(old);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                               unsigned int flags)
{
    struct event *ev;
    trsim_stream *s;
    cudaError_t err = event_get(event, &ev);
    if (err == cudaSuccess)
        err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess && (flags & ~(unsigned)cudaEventRecordExternal))
        err = cudaErrorInvalidValue;
    if (err == cudaSuccess && trsim_stream_device(s) != ev->device)
        err = cudaErrorInvalidResourceHandle;
    if (err == cudaSuccess)
        err = trsim_capture_check(s, TRSIM_CAPTURE_ENQUEUE);
    if (err != cudaSuccess)
        return trsim_error(err);
    if (trsim_stream_capturing(s)) {
        /* cudaEventRecordExternal: a node recording the event at each
         * launch; otherwise a place in the capture for streams to join. */
        if (flags & cudaEventRecordExternal)
            return trsim_error(node_task(s, event, cudaGraphNodeTypeEventRecord));
        return trsim_error(record_in_capture(ev, s));
    }
    return trsim_error(record_on(ev, s));
}

cudaError_t trsim_event_record(cudaEvent_t event, trsim_stream *s)
{
    struct event *ev;
    cudaError_t err = event_get(event, &ev);
    return err != cudaSuccess ? err : record_on(ev, s);
}

static cudaError_t record_on(struct event *ev, trsim_stream *s)
{
    /* CUDA requires the stream and the event to belong to the same device. */
    if (trsim_stream_device(s) != ev->device)
        return cudaErrorInvalidResourceHandle;

    struct record *rec = calloc(1, sizeof *rec);
    struct record_task *rt = calloc(1, sizeof *rt);
    if (!rec || !rt) {
        free(rec);
        free(rt);
        return cudaErrorMemoryAllocation;
    }
    atomic_init(&rec->refs, 2);
    rec->stream = s;
    rt->task.run = record_run;
    rt->task.destroy = record_destroy;
    rt->rec = rec;
    rec->ticket = trsim_stream_submit_after(s, &rt->task, NULL, 0);

    pthread_mutex_lock(&ev->lock);
    struct record *old = ev->rec;
    ev->rec = rec;
    pthread_mutex_unlock(&ev->lock);
    record_release(old);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return cudaEventRecordWithFlags(event, stream, cudaEventRecordDefault);
}

TRSIM_API cudaError_t cudaEventQuery(cudaEvent_t event)
{
    struct event *ev;
    cudaError_t err = trsim_sticky_error(0);
    if (err != cudaSuccess)
        return trsim_error(err);
    err = event_get(event, &ev);
    if (err != cudaSuccess)
        return trsim_error(err);
    struct record *rec = event_record(ev);
    if (!rec)
        return cudaSuccess;     /* never recorded: complete, as in CUDA */
    if (rec->mark) {
        err = trsim_capture_mark_misuse(rec->mark);
        record_release(rec);
        return trsim_error(err);
    }
    int done = trsim_stream_ticket_done(rec->stream, rec->ticket);
    record_release(rec);
    return done ? cudaSuccess : trsim_error(cudaErrorNotReady);
}

TRSIM_API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    struct event *ev;
    cudaError_t err = trsim_sticky_error(0);
    if (err != cudaSuccess)
        return trsim_error(err);
    err = event_get(event, &ev);
    if (err != cudaSuccess)
        return trsim_error(err);
    struct record *rec = event_record(ev);
    if (!rec)
        return cudaSuccess;
    if (rec->mark) {
        err = trsim_capture_mark_misuse(rec->mark);
        record_release(rec);
        return trsim_error(err);
    }
    trsim_stream_wait_ticket(rec->stream, rec->ticket);
    record_release(rec);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    struct event *ev_start, *ev_end;
    cudaError_t err = event_get(start, &ev_start);
    if (err == cudaSuccess)
        err = event_get(end, &ev_end);
    if (err != cudaSuccess)
        return trsim_error(err);
    if (!ms)
        return trsim_error(cudaErrorInvalidValue);
    if ((ev_start->flags | ev_end->flags) & cudaEventDisableTiming)
        return trsim_error(cudaErrorInvalidResourceHandle);

    struct record *a = event_record(ev_start), *b = event_record(ev_end);
    if (!a || !b) {
        err = cudaErrorInvalidResourceHandle;
    } else if (a->mark || b->mark) {
        err = trsim_capture_mark_misuse(a->mark ? a->mark : b->mark);
    } else if (!trsim_stream_ticket_done(a->stream, a->ticket) ||
               !trsim_stream_ticket_done(b->stream, b->ticket)) {
        err = cudaErrorNotReady;
    } else {
        /* The completed tickets, read under their streams' locks, order
         * these reads after the workers' writes. */
        *ms = (float)(((double)b->time_ns - (double)a->time_ns) / 1e6);
    }
    record_release(a);
    record_release(b);
    return trsim_error(err);
}

static trsim_task_state marker_run(trsim_task *task)
{
    (void)task;
    return TRSIM_TASK_DONE;
}

static void marker_destroy(trsim_task *task)
{
    free(task);
}

TRSIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                          unsigned int flags)
{
    struct event *ev;
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess)
        err = event_get(event, &ev);
    if (err != cudaSuccess)
        return trsim_error(err);
    if (flags & ~(unsigned)cudaEventWaitExternal)
        return trsim_error(cudaErrorInvalidValue);
    err = trsim_capture_check(s, TRSIM_CAPTURE_ENQUEUE);
    if (err != cudaSuccess)
        return trsim_error(err);
    struct record *rec = event_record(ev);
    if (rec && rec->mark) {
        /* recorded in capture: s joins it */
        err = trsim_capture_wait_mark(s, rec->mark);
        record_release(rec);
        return trsim_error(err);
    }
    if (trsim_stream_capturing(s)) {
        /* Work outside the capture: only as a node waiting for the event's
         * record at each launch (CUDA refuses it otherwise). */
        record_release(rec);
        if (flags & cudaEventWaitExternal)
            return trsim_error(node_task(s, event, cudaGraphNodeTypeWaitEvent));
        return rec ? trsim_error(trsim_capture_refuse(s, cudaErrorStreamCaptureIsolation, NULL)) : cudaSuccess;
    }
    if (!rec)
        return cudaSuccess;     /* waiting for a never-recorded event waits for nothing */
    trsim_stream *dep = rec->stream;
    uint64_t ticket = rec->ticket;
    record_release(rec);
    if (trsim_stream_ticket_done(dep, ticket))
        return cudaSuccess;

    /* An empty task that holds back everything queued on s after it. */
    trsim_task *marker = calloc(1, sizeof *marker);
    if (!marker)
        return trsim_error(cudaErrorMemoryAllocation);
    marker->run = marker_run;
    marker->destroy = marker_destroy;
    trsim_stream_submit_after(s, marker, dep, ticket);
    return cudaSuccess;
}

/* ---- event nodes of graphs ------------------------------------------------ */

/* The template of an event record or wait node: the work is done at each
 * launch, with the event as it is then. */
struct event_node {
    trsim_task task;
    cudaEvent_t event;
    enum cudaGraphNodeType type;
};

static trsim_task_state event_node_never(trsim_task *task)
{
    (void)task;
    return TRSIM_TASK_DONE;
}

static cudaError_t event_node_clone(trsim_task *tmpl, trsim_stream *s)
{
    const struct event_node *n = (const struct event_node *)tmpl;
    struct event *ev;
    cudaError_t err = event_get(n->event, &ev);
    if (err != cudaSuccess)
        return err;
    if (n->type == cudaGraphNodeTypeEventRecord)
        return record_on(ev, s);
    struct record *rec = event_record(ev);
    if (!rec)
        return cudaSuccess;
    if (rec->mark) {
        /* recorded in a capture since: there is nothing to wait for */
        record_release(rec);
        return cudaErrorCapturedEvent;
    }
    trsim_stream *dep = rec->stream;
    uint64_t ticket = rec->ticket;
    record_release(rec);
    trsim_task *marker = calloc(1, sizeof *marker);
    if (!marker)
        return cudaErrorMemoryAllocation;
    marker->run = marker_run;
    marker->destroy = marker_destroy;
    trsim_stream_submit_after(s, marker, dep, ticket);
    return cudaSuccess;
}

static void event_node_destroy(trsim_task *task)
{
    free(task);
}

static cudaError_t node_task(trsim_stream *s, cudaEvent_t event, enum cudaGraphNodeType type)
{
    struct event_node *n = calloc(1, sizeof *n);
    if (!n)
        return cudaErrorMemoryAllocation;
    n->task.run = event_node_never;
    n->task.destroy = event_node_destroy;
    n->task.clone = event_node_clone;
    n->event = event;
    n->type = type;
    return trsim_stream_enqueue(s, &n->task, type);
}

/* ---- per-thread default stream variants ---------------------------------- */

TRSIM_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    return cudaEventRecord(event, TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                                    unsigned int flags)
{
    return cudaEventRecordWithFlags(event, TRSIM_PTSZ(stream), flags);
}

TRSIM_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                               unsigned int flags)
{
    return cudaStreamWaitEvent(TRSIM_PTSZ(stream), event, flags);
}
