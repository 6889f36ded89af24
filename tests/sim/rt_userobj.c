/* User objects: reference-counted application data whose destructor runs
 * once the last reference is gone, references being held by the
 * application or by graphs and executable graphs (rt_graph.c) until they
 * and their launches are done. PyTorch's process groups hand the work of a
 * captured collective to the graph this way.
 *
 * As CUDA documents, destructors run on one shared internal thread, never
 * in the releasing call (a destructor may take locks its releaser holds). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "sim_internal.h"

struct uobj {
    atomic_uint refs;
    void *ptr;
    cudaHostFn_t destroy;
    uintptr_t handle;
    struct uobj *next;          /* in the destructor queue */
};

static pthread_once_t uobj_once = PTHREAD_ONCE_INIT;
static trsim_handles *uobj_handles;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static struct uobj *queue_head, *queue_tail;
static int destructor_running;
static int destructor_busy;             /* a destructor is running now */

static void uobj_init(void)
{
    uobj_handles = trsim_handles_new(6);
    if (!uobj_handles) {
        trsim_warn("cannot initialize user objects");
        abort();
    }
}

static struct uobj *uobj_get(cudaUserObject_t object)
{
    pthread_once(&uobj_once, uobj_init);
    return trsim_handle_get(uobj_handles, (uintptr_t)object);
}

static void *destructor_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&queue_lock);
    for (;;) {
        while (!queue_head)
            pthread_cond_wait(&queue_cond, &queue_lock);
        struct uobj *o = queue_head;
        queue_head = o->next;
        if (!queue_head)
            queue_tail = NULL;
        destructor_busy = 1;
        pthread_mutex_unlock(&queue_lock);
        o->destroy(o->ptr);
        free(o);
        pthread_mutex_lock(&queue_lock);
        destructor_busy = 0;
        if (!queue_head) pthread_cond_broadcast(&queue_cond);
    }
    return NULL;
}

/* A real driver runs a released object's destructor within moments; the
 * simulator's thread may lag far behind on a loaded machine, past the
 * point where a framework tears down what the destructor uses (PyTorch
 * destroys its process group right after synchronizing). So a device
 * synchronization also waits for the destructors queued so far, for at
 * most a second: CUDA promises nothing either way (the only flag,
 * cudaUserObjectNoDestructorSync), and a destructor waiting for a lock the
 * synchronizing thread holds must not hang it. */
void trsim_user_objects_settle(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    pthread_mutex_lock(&queue_lock);
    while ((queue_head || destructor_busy) &&
           pthread_cond_timedwait(&queue_cond, &queue_lock, &until) == 0) {
    }
    pthread_mutex_unlock(&queue_lock);
}

/* The last reference is gone: the handle dies now, the destructor soon. */
static void uobj_destroy(struct uobj *o)
{
    trsim_handle_remove(uobj_handles, o->handle);
    pthread_mutex_lock(&queue_lock);
    o->next = NULL;
    if (queue_tail)
        queue_tail->next = o;
    else
        queue_head = o;
    queue_tail = o;
    if (!destructor_running) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        destructor_running = pthread_create(&t, &attr, destructor_main, NULL) == 0;
        pthread_attr_destroy(&attr);
        if (!destructor_running) {
            trsim_warn("cannot start the user objects' destructor thread");
            abort();
        }
    }
    pthread_cond_signal(&queue_cond);
    pthread_mutex_unlock(&queue_lock);
}

cudaError_t trsim_user_object_retain(cudaUserObject_t object, unsigned count)
{
    struct uobj *o = uobj_get(object);
    if (!o)
        return cudaErrorInvalidValue;
    atomic_fetch_add(&o->refs, count);
    return cudaSuccess;
}

cudaError_t trsim_user_object_release(cudaUserObject_t object, unsigned count)
{
    struct uobj *o = uobj_get(object);
    if (!o || count == 0)
        return cudaErrorInvalidValue;
    unsigned refs = atomic_load(&o->refs);
    do {
        /* more than the references held: CUDA leaves it undefined */
        if (count > refs)
            return cudaErrorInvalidValue;
    } while (!atomic_compare_exchange_weak(&o->refs, &refs, refs - count));
    if (refs == count)
        uobj_destroy(o);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaUserObjectCreate(cudaUserObject_t *object_out, void *ptr, cudaHostFn_t destroy,
                                           unsigned int initialRefcount, unsigned int flags)
{
    pthread_once(&uobj_once, uobj_init);
    if (!object_out || !destroy || initialRefcount == 0 || flags != cudaUserObjectNoDestructorSync)
        return trsim_error(cudaErrorInvalidValue);
    struct uobj *o = calloc(1, sizeof *o);
    if (!o)
        return trsim_error(cudaErrorMemoryAllocation);
    atomic_init(&o->refs, initialRefcount);
    o->ptr = ptr;
    o->destroy = destroy;
    o->handle = trsim_handle_add(uobj_handles, o);
    if (!o->handle) {
        free(o);
        return trsim_error(cudaErrorMemoryAllocation);
    }
    *object_out = (cudaUserObject_t)o->handle;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count)
{
    if (count == 0)
        return trsim_error(cudaErrorInvalidValue);
    return trsim_error(trsim_user_object_retain(object, count));
}

TRSIM_API cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count)
{
    return trsim_error(trsim_user_object_release(object, count));
}
