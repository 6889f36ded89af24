/* Streams: ordered task queues, each executed by its own worker thread, so
 * that work runs asynchronously to the threads that submit it, as on a GPU.
 *
 * Every task queued on a stream gets the next ticket of that stream; the
 * worker completes tasks in ticket order and publishes the last completed
 * ticket. A dependency on other work is a (stream, ticket) pair, satisfied
 * once that stream's completed ticket reaches it. This one mechanism carries
 * cudaStreamWaitEvent, events and the legacy default stream's rules:
 *  - a task on the legacy stream depends on the last task queued on every
 *    blocking stream of the device;
 *  - a task on a blocking stream depends on the last task queued on the
 *    legacy stream.
 * Submissions that take part in these rules are serialized per device, so
 * that two of them never wait for each other.
 *
 * Stream structures are never freed: a destroyed stream drains its queue,
 * its worker exits, and the structure is reused for a later stream with its
 * ticket counters continuing, so a (stream, ticket) pair held by an event or
 * a dependency stays satisfied forever. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* Stream priorities of a Hopper GPU: lower numbers are higher priorities. */
#define PRIORITY_LEAST 0
#define PRIORITY_GREATEST (-5)

enum stream_kind { STREAM_LEGACY, STREAM_PER_THREAD, STREAM_CREATED };

struct trsim_stream {
    pthread_mutex_t lock;
    pthread_cond_t cond;        /* broadcast when work is queued or completes */
    trsim_task *head, *tail;    /* queued tasks the worker has not started */
    uint64_t submitted;         /* ticket of the last queued task */
    uint64_t completed;         /* ticket of the last completed task */
    int worker_running;
    int destroyed;              /* no more work comes; the worker exits when drained */
    int device;
    unsigned flags;
    int priority;
    enum stream_kind kind;
    uintptr_t handle;           /* created streams: the application's handle */
    unsigned long long id;
    trsim_stream *dev_next, *dev_prev;  /* the device's streams, under its lock */
    trsim_stream *free_next;
};

static struct device_streams {
    /* Serializes submissions to the legacy stream and to blocking streams,
     * and guards the list. Taken before any stream's lock. */
    pthread_mutex_t lock;
    trsim_stream legacy;
    trsim_stream *list;         /* every other stream until it drained after destroy */
} devices[TRSIM_MAX_DEVICES];

static pthread_once_t streams_once = PTHREAD_ONCE_INIT;
static trsim_handles *stream_handles;
static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static trsim_stream *free_streams;
static atomic_ullong next_stream_id = 1;
static pthread_key_t per_thread_key;

/* One dependency: the task with this ticket on this stream. */
struct dep_ref { trsim_stream *stream; uint64_t ticket; };

struct per_thread_streams { trsim_stream *s[TRSIM_MAX_DEVICES]; };
static __thread struct per_thread_streams *per_thread;

static void stream_release(trsim_stream *s);

static void per_thread_exit(void *value)
{
    struct per_thread_streams *pts = value;
    for (int i = 0; i < TRSIM_MAX_DEVICES; i++)
        if (pts->s[i])
            stream_release(pts->s[i]);
    free(pts);
}

static void stream_init_sync(trsim_stream *s)
{
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
}

static void streams_init(void)
{
    stream_handles = trsim_handles_new(1);
    if (!stream_handles || pthread_key_create(&per_thread_key, per_thread_exit) != 0) {
        trsim_warn("cannot initialize streams");
        abort();
    }
    for (int i = 0; i < TRSIM_MAX_DEVICES; i++) {
        pthread_mutex_init(&devices[i].lock, NULL);
        stream_init_sync(&devices[i].legacy);
        devices[i].legacy.device = i;
        devices[i].legacy.kind = STREAM_LEGACY;
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        trsim_warn("out of host memory");
        abort();
    }
    return p;
}

/* ---- the worker ---------------------------------------------------------- */

static void task_dep(const trsim_task *task, int i, trsim_stream **s, uint64_t *ticket)
{
    if (task->ndeps_ <= 2) {
        *s = task->deps_[i].stream;
        *ticket = task->deps_[i].ticket;
    } else {
        const struct dep_ref *deps = task->internal_;
        *s = deps[i].stream;
        *ticket = deps[i].ticket;
    }
}

/* With d->lock held: takes s off its device's list. */
static void device_list_unlink(struct device_streams *d, trsim_stream *s)
{
    if (s->dev_prev)
        s->dev_prev->dev_next = s->dev_next;
    else
        d->list = s->dev_next;
    if (s->dev_next)
        s->dev_next->dev_prev = s->dev_prev;
    s->dev_next = s->dev_prev = NULL;
}

/* s is retired: a later stream_new may reuse it. */
static void free_list_push(trsim_stream *s)
{
    pthread_mutex_lock(&free_lock);
    s->free_next = free_streams;
    free_streams = s;
    pthread_mutex_unlock(&free_lock);
}

/* Called by the worker of a destroyed stream, with s->lock held, once its
 * queue is empty. Returns 1 when s was retired (and its lock released), 0
 * when work arrived meanwhile (lock still held). */
static int stream_retire(trsim_stream *s)
{
    struct device_streams *d = &devices[s->device];
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&d->lock);
    pthread_mutex_lock(&s->lock);
    if (s->head || !s->destroyed) {
        pthread_mutex_unlock(&d->lock);
        return 0;
    }
    device_list_unlink(d, s);
    s->worker_running = 0;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&d->lock);
    free_list_push(s);
    return 1;
}

static void *stream_worker(void *arg)
{
    trsim_stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&s->cond, &s->lock);
        if (!s->head) {
            if (stream_retire(s))
                return NULL;
            continue;
        }
        trsim_task *task = s->head;
        s->head = task->next_;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->lock);

        for (int i = 0; i < task->ndeps_; i++) {
            trsim_stream *dep;
            uint64_t ticket;
            task_dep(task, i, &dep, &ticket);
            trsim_stream_wait_ticket(dep, ticket);
        }
        while (task->run(task) == TRSIM_TASK_AGAIN)
            ;
        uint64_t ticket = task->ticket_;
        if (task->ndeps_ > 2)
            free(task->internal_);
        if (task->destroy)
            task->destroy(task);

        pthread_mutex_lock(&s->lock);
        s->completed = ticket;
        pthread_cond_broadcast(&s->cond);
    }
}

/* With s->lock held. */
static void stream_start_worker(trsim_stream *s)
{
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, stream_worker, s) != 0) {
        trsim_warn("cannot start a stream worker thread");
        abort();
    }
    pthread_attr_destroy(&attr);
    s->worker_running = 1;
}

/* ---- submission ---------------------------------------------------------- */

/* Dependencies being collected for a task. The first two are kept in the
 * list itself, as the task keeps them, so that the common submission
 * allocates nothing; from the third on they move to the heap. */
struct dep_list { struct dep_ref small[2], *heap; int n, cap; };

static struct dep_ref *dep_items(struct dep_list *l)
{
    return l->heap ? l->heap : l->small;
}

static void dep_add(struct dep_list *l, trsim_stream *s, uint64_t ticket)
{
    if (l->n == (l->heap ? l->cap : 2)) {
        int cap = l->heap ? l->cap * 2 : 8;
        struct dep_ref *v = realloc(l->heap, (size_t)cap * sizeof *v);
        if (!v) {
            trsim_warn("out of host memory");
            abort();
        }
        if (!l->heap)
            memcpy(v, l->small, sizeof l->small);
        l->heap = v;
        l->cap = cap;
    }
    dep_items(l)[l->n++] = (struct dep_ref){ .stream = s, .ticket = ticket };
}

/* Adds (o, o's last ticket) to l unless all of o's work completed. */
static void dep_add_pending(struct dep_list *l, trsim_stream *o)
{
    pthread_mutex_lock(&o->lock);
    uint64_t last = o->submitted;
    int pending = o->completed < last;
    pthread_mutex_unlock(&o->lock);
    if (pending)
        dep_add(l, o, last);
}

uint64_t trsim_stream_submit_after(trsim_stream *s, trsim_task *task,
                                   trsim_stream *dep, uint64_t dep_ticket)
{
    struct dep_list deps = {0};
    struct device_streams *d = &devices[s->device];
    int ordered = !(s->flags & cudaStreamNonBlocking);

    if (dep && dep != s && !trsim_stream_ticket_done(dep, dep_ticket))
        dep_add(&deps, dep, dep_ticket);
    if (ordered) {
        pthread_mutex_lock(&d->lock);
        if (s->kind == STREAM_LEGACY) {
            for (trsim_stream *o = d->list; o; o = o->dev_next)
                if (!(o->flags & cudaStreamNonBlocking))
                    dep_add_pending(&deps, o);
        } else {
            dep_add_pending(&deps, &d->legacy);
        }
    }

    task->ndeps_ = deps.n;
    task->internal_ = deps.heap;    /* more than two: freed by the worker */
    for (int i = 0; !deps.heap && i < deps.n; i++) {
        task->deps_[i].stream = deps.small[i].stream;
        task->deps_[i].ticket = deps.small[i].ticket;
    }

    pthread_mutex_lock(&s->lock);
    uint64_t ticket = ++s->submitted;
    task->ticket_ = ticket;
    task->next_ = NULL;
    if (s->tail)
        s->tail->next_ = task;
    else
        s->head = task;
    s->tail = task;
    if (!s->worker_running)
        stream_start_worker(s);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);

    if (ordered)
        pthread_mutex_unlock(&d->lock);
    return ticket;
}

uint64_t trsim_stream_last_ticket(trsim_stream *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t t = s->submitted;
    pthread_mutex_unlock(&s->lock);
    return t;
}

int trsim_stream_ticket_done(trsim_stream *s, uint64_t ticket)
{
    pthread_mutex_lock(&s->lock);
    int done = s->completed >= ticket;
    pthread_mutex_unlock(&s->lock);
    return done;
}

void trsim_stream_wait_ticket(trsim_stream *s, uint64_t ticket)
{
    pthread_mutex_lock(&s->lock);
    while (s->completed < ticket)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

void trsim_stream_wait_idle(trsim_stream *s)
{
    trsim_stream_wait_ticket(s, trsim_stream_last_ticket(s));
}

void trsim_device_wait_idle(int device)
{
    pthread_once(&streams_once, streams_init);
    if (device < 0 || device >= TRSIM_MAX_DEVICES)
        return;
    struct device_streams *d = &devices[device];
    struct dep_list pending = {0};
    pthread_mutex_lock(&d->lock);
    dep_add_pending(&pending, &d->legacy);
    for (trsim_stream *o = d->list; o; o = o->dev_next)
        dep_add_pending(&pending, o);
    pthread_mutex_unlock(&d->lock);
    const struct dep_ref *items = dep_items(&pending);
    for (int i = 0; i < pending.n; i++)
        trsim_stream_wait_ticket(items[i].stream, items[i].ticket);
    free(pending.heap);
}

struct call_task {
    trsim_task task;
    void (*fn)(void *arg);
    void *arg;
    void (*free_arg)(void *arg);
    size_t copy_size;           /* arg is the task's own copy of this many bytes */
};

static trsim_task_state call_run(trsim_task *task)
{
    struct call_task *c = (struct call_task *)task;
    c->fn(c->arg);
    return TRSIM_TASK_DONE;
}

static void call_destroy(trsim_task *task)
{
    struct call_task *c = (struct call_task *)task;
    if (c->free_arg)
        c->free_arg(c->arg);
    free(c);
}

static struct call_task *call_new(void (*fn)(void *arg), void *arg, void (*free_arg)(void *arg),
                                  size_t copy_size);

/* A launch of a graph holding the call: the same call, with its own copy
 * of an argument it owns. */
static cudaError_t call_clone(trsim_task *tmpl, trsim_stream *s)
{
    struct call_task *t = (struct call_task *)tmpl;
    struct call_task *c = call_new(t->fn, t->arg, t->free_arg, t->copy_size);
    if (!c)
        return cudaErrorMemoryAllocation;
    trsim_stream_submit_after(s, &c->task, NULL, 0);
    return cudaSuccess;
}

/* copy_size > 0: the task owns a copy of that many bytes of arg. */
static struct call_task *call_new(void (*fn)(void *arg), void *arg, void (*free_arg)(void *arg),
                                  size_t copy_size)
{
    struct call_task *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (copy_size) {
        void *copy = malloc(copy_size);
        if (!copy) {
            free(c);
            return NULL;
        }
        memcpy(copy, arg, copy_size);
        arg = copy;
        free_arg = free;
    }
    c->task.run = call_run;
    c->task.destroy = call_destroy;
    /* An argument owned by the task cannot be shared by the launches of a
     * graph, unless the task knows how to copy it. */
    c->task.clone = !free_arg || copy_size ? call_clone : NULL;
    c->fn = fn;
    c->arg = arg;
    c->free_arg = free_arg;
    c->copy_size = copy_size;
    return c;
}

cudaError_t trsim_stream_call(trsim_stream *s, void (*fn)(void *arg), void *arg,
                              void (*free_arg)(void *arg), enum cudaGraphNodeType type)
{
    struct call_task *c = call_new(fn, arg, free_arg, 0);
    return c ? trsim_stream_enqueue(s, &c->task, type) : cudaErrorMemoryAllocation;
}

cudaError_t trsim_stream_call_copy(trsim_stream *s, void (*fn)(void *arg), const void *arg,
                                   size_t size, enum cudaGraphNodeType type)
{
    struct call_task *c = call_new(fn, (void *)arg, NULL, size);
    return c ? trsim_stream_enqueue(s, &c->task, type) : cudaErrorMemoryAllocation;
}

/* ---- stream objects ------------------------------------------------------ */

static trsim_stream *stream_new(int device, unsigned flags, int priority, enum stream_kind kind)
{
    pthread_mutex_lock(&free_lock);
    trsim_stream *s = free_streams;
    if (s)
        free_streams = s->free_next;
    pthread_mutex_unlock(&free_lock);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        stream_init_sync(s);
    }
    /* A reused structure keeps its lock and its ticket counters. */
    s->destroyed = 0;
    s->device = device;
    s->flags = flags;
    s->priority = priority;
    s->kind = kind;
    s->handle = 0;
    s->id = atomic_fetch_add(&next_stream_id, 1);
    s->free_next = NULL;

    struct device_streams *d = &devices[device];
    pthread_mutex_lock(&d->lock);
    s->dev_prev = NULL;
    s->dev_next = d->list;
    if (d->list)
        d->list->dev_prev = s;
    d->list = s;
    pthread_mutex_unlock(&d->lock);
    return s;
}

/* The application is done with s: its queued work still completes. */
static void stream_release(trsim_stream *s)
{
    /* The structure will serve another stream: it must not stay in a capture. */
    trsim_capture_stream_gone(s);
    pthread_mutex_lock(&s->lock);
    s->destroyed = 1;
    if (s->worker_running) {
        pthread_cond_broadcast(&s->cond);   /* the worker retires s when drained */
        pthread_mutex_unlock(&s->lock);
        return;
    }
    /* Never had work (a worker starts with the first task): retire it now. */
    pthread_mutex_unlock(&s->lock);
    struct device_streams *d = &devices[s->device];
    pthread_mutex_lock(&d->lock);
    device_list_unlink(d, s);
    pthread_mutex_unlock(&d->lock);
    free_list_push(s);
}

static trsim_stream *per_thread_stream(int device)
{
    if (!per_thread) {
        per_thread = calloc(1, sizeof *per_thread);
        if (!per_thread)
            return NULL;
        pthread_setspecific(per_thread_key, per_thread);
    }
    if (!per_thread->s[device])
        per_thread->s[device] = stream_new(device, 0, 0, STREAM_PER_THREAD);
    return per_thread->s[device];
}

cudaError_t trsim_stream_get(cudaStream_t handle, trsim_stream **out)
{
    pthread_once(&streams_once, streams_init);
    int device = trsim_current_device();
    trsim_stream *s;
    if (handle == NULL || handle == cudaStreamLegacy)
        s = &devices[device].legacy;
    else if (handle == cudaStreamPerThread)
        s = per_thread_stream(device);
    else
        s = trsim_handle_get(stream_handles, (uintptr_t)handle);
    if (!s)
        return cudaErrorInvalidResourceHandle;
    *out = s;
    return cudaSuccess;
}

int trsim_stream_device(const trsim_stream *s)
{
    return s->device;
}

int trsim_stream_is_legacy(const trsim_stream *s)
{
    return s->kind == STREAM_LEGACY;
}

int trsim_stream_is_blocking(const trsim_stream *s)
{
    return !(s->flags & cudaStreamNonBlocking);
}

/* ---- the API ------------------------------------------------------------- */

/* For the query functions: resolves handle, then requires the out-pointer
 * out (cudaErrorInvalidValue when NULL). */
static cudaError_t stream_get_out(cudaStream_t handle, const void *out, trsim_stream **s)
{
    cudaError_t err = trsim_stream_get(handle, s);
    if (err == cudaSuccess && !out)
        err = cudaErrorInvalidValue;
    return err;
}

TRSIM_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
                                                   int priority)
{
    pthread_once(&streams_once, streams_init);
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
        return trsim_error(cudaErrorInvalidValue);
    /* CUDA clamps priorities outside the device's range into it. */
    if (priority > PRIORITY_LEAST)
        priority = PRIORITY_LEAST;
    if (priority < PRIORITY_GREATEST)
        priority = PRIORITY_GREATEST;
    trsim_stream *s = stream_new(trsim_current_device(), flags, priority, STREAM_CREATED);
    if (!s)
        return trsim_error(cudaErrorMemoryAllocation);
    s->handle = trsim_handle_add(stream_handles, s);
    if (!s->handle) {
        stream_release(s);
        return trsim_error(cudaErrorMemoryAllocation);
    }
    *pStream = (cudaStream_t)s->handle;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return cudaStreamCreateWithPriority(pStream, flags, 0);
}

TRSIM_API cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithPriority(pStream, cudaStreamDefault, 0);
}

TRSIM_API cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    pthread_once(&streams_once, streams_init);
    /* The NULL stream, cudaStreamLegacy and cudaStreamPerThread cannot be
     * destroyed: they are not in the table. */
    trsim_stream *s = trsim_handle_remove(stream_handles, (uintptr_t)stream);
    if (!s)
        return trsim_error(cudaErrorInvalidResourceHandle);
    stream_release(s);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    trsim_stream *s;
    cudaError_t err = trsim_sticky_error(1);
    if (err != cudaSuccess)
        return trsim_error(err);
    err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess)
        err = trsim_capture_check(s, TRSIM_CAPTURE_SYNC);
    if (err != cudaSuccess)
        return trsim_error(err);
    trsim_stream_wait_idle(s);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    trsim_stream *s;
    cudaError_t err = trsim_sticky_error(0);
    if (err != cudaSuccess)
        return trsim_error(err);
    err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess)
        err = trsim_capture_check(s, TRSIM_CAPTURE_SYNC);
    if (err != cudaSuccess)
        return trsim_error(err);
    pthread_mutex_lock(&s->lock);
    int idle = s->completed == s->submitted;
    pthread_mutex_unlock(&s->lock);
    return idle ? cudaSuccess : trsim_error(cudaErrorNotReady);
}

TRSIM_API cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    trsim_stream *s;
    cudaError_t err = stream_get_out(hStream, flags, &s);
    if (err != cudaSuccess)
        return trsim_error(err);
    *flags = s->flags;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    trsim_stream *s;
    cudaError_t err = stream_get_out(hStream, priority, &s);
    if (err != cudaSuccess)
        return trsim_error(err);
    *priority = s->priority;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
    trsim_stream *s;
    cudaError_t err = stream_get_out(hStream, device, &s);
    if (err != cudaSuccess)
        return trsim_error(err);
    *device = s->device;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long *streamId)
{
    trsim_stream *s;
    cudaError_t err = stream_get_out(hStream, streamId, &s);
    if (err != cudaSuccess)
        return trsim_error(err);
    *streamId = s->id;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    if (leastPriority)
        *leastPriority = PRIORITY_LEAST;
    if (greatestPriority)
        *greatestPriority = PRIORITY_GREATEST;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err != cudaSuccess)
        return trsim_error(err);
    if (!fn)
        return trsim_error(cudaErrorInvalidValue);
    return trsim_error(trsim_stream_call(s, fn, userData, NULL, cudaGraphNodeTypeHost));
}

struct stream_callback {
    cudaStreamCallback_t fn;
    cudaStream_t stream;        /* the handle the application passed */
    void *user_data;
};

static void stream_callback_run(void *arg)
{
    struct stream_callback *cb = arg;
    cb->fn(cb->stream, cudaSuccess, cb->user_data);
}

TRSIM_API cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                            void *userData, unsigned int flags)
{
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err != cudaSuccess)
        return trsim_error(err);
    if (!callback || flags != 0)
        return trsim_error(cudaErrorInvalidValue);
    /* CUDA captures cudaLaunchHostFunc, not stream callbacks. */
    if (trsim_stream_capturing(s))
        return trsim_error(trsim_capture_refuse(s, cudaErrorStreamCaptureUnsupported, NULL));
    struct stream_callback *cb = xmalloc(sizeof *cb);
    cb->fn = callback;
    cb->stream = stream;
    cb->user_data = userData;
    err = trsim_stream_call(s, stream_callback_run, cb, free, cudaGraphNodeTypeHost);
    if (err != cudaSuccess)
        free(cb);
    return trsim_error(err);
}

/* ---- per-thread default stream variants ---------------------------------- */

TRSIM_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    return cudaStreamSynchronize(TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
    return cudaStreamQuery(TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags)
{
    return cudaStreamGetFlags(TRSIM_PTSZ(hStream), flags);
}

TRSIM_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority)
{
    return cudaStreamGetPriority(TRSIM_PTSZ(hStream), priority);
}

TRSIM_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int *device)
{
    return cudaStreamGetDevice(TRSIM_PTSZ(hStream), device);
}

TRSIM_API cudaError_t cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long *streamId)
{
    return cudaStreamGetId(TRSIM_PTSZ(hStream), streamId);
}

TRSIM_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return cudaLaunchHostFunc(TRSIM_PTSZ(stream), fn, userData);
}

TRSIM_API cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                                 void *userData, unsigned int flags)
{
    return cudaStreamAddCallback(TRSIM_PTSZ(stream), callback, userData, flags);
}
