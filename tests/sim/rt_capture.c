/* Stream capture: while a stream captures, the work queued on it becomes
 * nodes of a graph (rt_graph.c) instead of running.
 *
 * A capture sequence starts on one stream (its origin) and spreads to other
 * streams as CUDA's does: an event recorded on a capturing stream holds a
 * mark (the nodes the stream's next node would depend on), and a stream that
 * waits for that event joins the capture, its next node depending on the
 * mark's nodes. Each stream taking part (a member) keeps its own dependency
 * set, so the graph is the DAG CUDA would build; cudaStreamEndCapture on the
 * origin fails with cudaErrorStreamCaptureUnjoined when a node of the capture
 * is not an ancestor of the origin's last nodes (a fork never joined back).
 *
 * The rules of the CUDA programming guide ("Prohibited and Unhandled
 * Operations") and of cudaThreadExchangeStreamCaptureMode: an operation
 * that necessarily conflicts with capture (synchronizing or querying a
 * capturing stream or an event recorded in capture, using the legacy stream
 * while a blocking stream of its device captures) fails in every mode; a
 * potentially unsafe call (cudaMalloc, cudaFree, synchronous copies,
 * cudaDeviceSynchronize) fails when the calling thread's mode says so:
 * global mode, when the thread has a capture not begun in relaxed mode or
 * another thread one begun in global mode; thread-local mode, only the
 * thread's own; relaxed mode, never. A capture only restricts calls about
 * its own device (as measured on GPUs). The failing call returns the CUDA
 * error and invalidates the captures concerned: their further use returns
 * cudaErrorStreamCaptureInvalidated, and cudaStreamEndCapture ends them
 * without a graph.
 *
 * Everything here is under one lock; `live` (captures not ended) lets every
 * submission skip it when nothing captures. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

struct capture {
    unsigned long long id;      /* unique in the process, never 0 */
    enum cudaStreamCaptureMode mode;
    pthread_t thread;           /* the thread that began it */
    int device;                 /* the origin's */
    trsim_stream *origin;
    cudaGraph_t graph;
    int owns_graph;             /* made by cudaStreamBeginCapture (not ...ToGraph) */
    size_t first;               /* the graph's nodes before the capture began */
    int invalidated, ended;
    int refs;                   /* the capture list until ended, and each mark */
    struct capture *next;
};

struct member {                 /* a stream taking part in a capture */
    trsim_stream *s;
    struct capture *cap;
    cudaGraphNode_t *deps;      /* what the stream's next node depends on */
    size_t ndeps, deps_cap;
    cudaGraphNode_t *deps_out;  /* cudaStreamGetCaptureInfo's arrays, valid until */
    cudaGraphEdgeData *edges_out; /* the next call on the stream */
    struct member *next;
};

struct trsim_capture_mark {
    struct capture *cap;
    size_t ndeps;
    cudaGraphNode_t deps[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct member *members;
static struct capture *captures;
static atomic_int live;
static atomic_ullong next_id = 1;
static __thread enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

/* ---- members and captures (all with the lock held) ------------------------ */

static struct member *member_of(const trsim_stream *s)
{
    for (struct member *m = members; m; m = m->next)
        if (m->s == s)
            return m;
    return NULL;
}

static void invalidate(struct capture *c)
{
    if (!c->ended)
        c->invalidated = 1;
}

static void capture_unref(struct capture *c)
{
    if (--c->refs == 0)
        free(c);
}

/* Makes room for n nodes in m's dependency set; 0 when out of memory. */
static int deps_reserve(struct member *m, size_t n)
{
    if (n <= m->deps_cap)
        return 1;
    size_t cap = m->deps_cap ? m->deps_cap * 2 : 4;
    while (cap < n)
        cap *= 2;
    cudaGraphNode_t *d = realloc(m->deps, cap * sizeof *d);
    if (!d)
        return 0;
    m->deps = d;
    m->deps_cap = cap;
    return 1;
}

/* Adds the nodes of deps m does not depend on yet. */
static int deps_union(struct member *m, cudaGraphNode_t const *deps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < m->ndeps && m->deps[j] != deps[i])
            j++;
        if (j < m->ndeps)
            continue;
        if (!deps_reserve(m, m->ndeps + 1))
            return 0;
        m->deps[m->ndeps++] = deps[i];
    }
    return 1;
}

static struct member *member_add(trsim_stream *s, struct capture *c, cudaGraphNode_t const *deps, size_t n)
{
    struct member *m = calloc(1, sizeof *m);
    /* Room for one node at least: a captured node replaces the set. */
    if (!m || !deps_reserve(m, 1) || !deps_union(m, deps, n)) {
        free(m);
        return NULL;
    }
    m->s = s;
    m->cap = c;
    m->next = members;
    members = m;
    return m;
}

static void member_free(struct member *m)
{
    free(m->deps);
    free(m->deps_out);
    free(m->edges_out);
    free(m);
}

/* Takes every member of c out of it and ends it. Returns c's graph. */
static cudaGraph_t capture_end(struct capture *c)
{
    for (struct member **link = &members, *m; (m = *link);) {
        if (m->cap == c) {
            *link = m->next;
            member_free(m);
        } else {
            link = &m->next;
        }
    }
    struct capture **link = &captures;
    while (*link != c)
        link = &(*link)->next;
    *link = c->next;
    c->ended = 1;
    atomic_fetch_sub(&live, 1);
    trsim_graph_capture_ref(c->graph, -1);
    return c->graph;
}

/* A failed capture's graph: the one it made goes, an existing one loses
 * the nodes the capture added. */
static void capture_discard(cudaGraph_t graph, int owned, size_t first)
{
    trsim_graph_drop(graph, owned ? SIZE_MAX : first);
}

/* The legacy stream s of a device where a blocking stream captures:
 * invalidates those captures (unless peek) and returns 1. */
static int legacy_conflict(const trsim_stream *s, int peek)
{
    int conflict = 0;
    if (!trsim_stream_is_legacy(s))
        return 0;
    for (struct member *m = members; m; m = m->next) {
        if (trsim_stream_device(m->s) == trsim_stream_device(s) && trsim_stream_is_blocking(m->s)) {
            conflict = 1;
            if (!peek)
                invalidate(m->cap);
        }
    }
    return conflict;
}

/* ---- the rules ------------------------------------------------------------ */

int trsim_stream_capturing(trsim_stream *s)
{
    if (!atomic_load(&live))
        return 0;
    pthread_mutex_lock(&lock);
    int capturing = member_of(s) != NULL;
    pthread_mutex_unlock(&lock);
    return capturing;
}

/* With the lock held. */
static cudaError_t check_locked(trsim_stream *s, enum trsim_capture_use use)
{
    if (legacy_conflict(s, use == TRSIM_CAPTURE_PEEK))
        return cudaErrorStreamCaptureImplicit;
    struct member *m = member_of(s);
    if (!m || use == TRSIM_CAPTURE_PEEK)
        return cudaSuccess;
    if (m->cap->invalidated)
        return cudaErrorStreamCaptureInvalidated;
    if (use == TRSIM_CAPTURE_SYNC) {
        invalidate(m->cap);
        return cudaErrorStreamCaptureUnsupported;
    }
    return cudaSuccess;
}

cudaError_t trsim_capture_check(trsim_stream *s, enum trsim_capture_use use)
{
    if (!atomic_load(&live))
        return cudaSuccess;
    pthread_mutex_lock(&lock);
    cudaError_t err = check_locked(s, use);
    pthread_mutex_unlock(&lock);
    return err;
}

cudaError_t trsim_stream_enqueue(trsim_stream *s, trsim_task *task, enum cudaGraphNodeType type)
{
    if (atomic_load(&live)) {
        int captured = 0;
        pthread_mutex_lock(&lock);
        cudaError_t err = check_locked(s, TRSIM_CAPTURE_ENQUEUE);
        struct member *m = err == cudaSuccess ? member_of(s) : NULL;
        if (m && !task->clone) {
            trsim_warn("a stream operation of graph node type %d cannot be captured by the simulator: "
                       "capture invalidated (cudaErrorNotSupported)", (int)type);
            invalidate(m->cap);
            err = cudaErrorNotSupported;
        } else if (m) {
            cudaGraphNode_t node = trsim_graph_add(m->cap->graph, type, task, m->deps, m->ndeps);
            if (node) {
                m->deps[0] = node;     /* a member always has room for one */
                m->ndeps = 1;
                captured = 1;
            } else {
                invalidate(m->cap);
                err = cudaErrorMemoryAllocation;
            }
        }
        pthread_mutex_unlock(&lock);
        if (err != cudaSuccess && task->destroy)
            task->destroy(task);
        if (err != cudaSuccess || captured)
            return err;
    }
    trsim_stream_submit_after(s, task, NULL, 0);
    return cudaSuccess;
}

cudaError_t trsim_capture_unsafe(int device)
{
    if (!atomic_load(&live) || thread_mode == cudaStreamCaptureModeRelaxed)
        return cudaSuccess;
    cudaError_t err = cudaSuccess;
    pthread_t me = pthread_self();
    pthread_mutex_lock(&lock);
    for (struct capture *c = captures; c; c = c->next) {
        if (c->device != device)
            continue;
        int mine = pthread_equal(c->thread, me);
        if ((mine && c->mode != cudaStreamCaptureModeRelaxed) ||
            (!mine && thread_mode == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal)) {
            invalidate(c);
            err = cudaErrorStreamCaptureUnsupported;
        }
    }
    pthread_mutex_unlock(&lock);
    return err;
}

cudaError_t trsim_capture_refuse(trsim_stream *s, cudaError_t err, const char *what)
{
    pthread_mutex_lock(&lock);
    struct member *m = member_of(s);
    if (m && m->cap->invalidated) {
        err = cudaErrorStreamCaptureInvalidated;
    } else if (m) {
        invalidate(m->cap);
        if (what)
            trsim_warn("%s is not supported in stream capture by the simulator: capture invalidated", what);
    }
    pthread_mutex_unlock(&lock);
    return err;
}

void trsim_capture_stream_gone(trsim_stream *s)
{
    if (!atomic_load(&live))
        return;
    pthread_mutex_lock(&lock);
    struct member *m = member_of(s);
    cudaGraph_t graph = NULL;
    int owned = 0;
    size_t first = 0;
    if (m && m->cap->origin == s) {
        /* Nobody can end it any more. */
        struct capture *c = m->cap;
        trsim_warn("a stream capturing a graph (capture %llu) was destroyed: the capture ends without a graph",
                   c->id);
        owned = c->owns_graph;
        first = c->first;
        graph = capture_end(c);
        capture_unref(c);
    } else if (m) {
        /* Its nodes stay in the graph, joined back or not. */
        for (struct member **link = &members; *link; link = &(*link)->next)
            if (*link == m) {
                *link = m->next;
                break;
            }
        member_free(m);
    }
    pthread_mutex_unlock(&lock);
    if (graph)
        capture_discard(graph, owned, first);
}

/* ---- marks (events recorded in capture) ------------------------------------ */

trsim_capture_mark *trsim_capture_mark_new(trsim_stream *s, cudaError_t *err)
{
    *err = cudaSuccess;
    if (!atomic_load(&live))
        return NULL;
    trsim_capture_mark *mark = NULL;
    pthread_mutex_lock(&lock);
    struct member *m = member_of(s);
    if (m && m->cap->invalidated) {
        *err = cudaErrorStreamCaptureInvalidated;
    } else if (m) {
        mark = malloc(sizeof *mark + m->ndeps * sizeof mark->deps[0]);
        if (mark) {
            mark->cap = m->cap;
            mark->cap->refs++;
            mark->ndeps = m->ndeps;
            memcpy(mark->deps, m->deps, m->ndeps * sizeof mark->deps[0]);
        } else {
            *err = cudaErrorMemoryAllocation;
        }
    }
    pthread_mutex_unlock(&lock);
    return mark;
}

void trsim_capture_mark_free(trsim_capture_mark *mark)
{
    if (!mark)
        return;
    pthread_mutex_lock(&lock);
    capture_unref(mark->cap);
    pthread_mutex_unlock(&lock);
    free(mark);
}

cudaError_t trsim_capture_wait_mark(trsim_stream *s, const trsim_capture_mark *mark)
{
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&lock);
    struct capture *c = mark->cap;
    struct member *m = member_of(s);
    if (c->ended) {
        /* The event belongs to a capture that is over. */
        if (m)
            invalidate(m->cap);
        err = cudaErrorCapturedEvent;
    } else if (c->invalidated) {
        err = cudaErrorStreamCaptureInvalidated;
    } else if (trsim_stream_is_legacy(s)) {
        /* The legacy stream cannot capture. */
        invalidate(c);
        err = cudaErrorStreamCaptureImplicit;
    } else if (m && m->cap != c) {
        invalidate(c);
        invalidate(m->cap);
        err = cudaErrorStreamCaptureMerge;
    } else if (m ? !deps_union(m, mark->deps, mark->ndeps) : !member_add(s, c, mark->deps, mark->ndeps)) {
        invalidate(c);
        err = cudaErrorMemoryAllocation;
    }
    pthread_mutex_unlock(&lock);
    return err;
}

cudaError_t trsim_capture_mark_misuse(const trsim_capture_mark *mark)
{
    pthread_mutex_lock(&lock);
    invalidate(mark->cap);
    pthread_mutex_unlock(&lock);
    return cudaErrorCapturedEvent;
}

/* ---- the API ---------------------------------------------------------------- */

cudaError_t trsim_capture_begin(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                 const cudaGraphEdgeData *edges, size_t ndeps, enum cudaStreamCaptureMode mode)
{
    trsim_stream *s;
    if ((unsigned)mode > cudaStreamCaptureModeRelaxed)
        return cudaErrorInvalidValue;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err != cudaSuccess)
        return err;
    if (trsim_stream_is_legacy(s))
        return cudaErrorStreamCaptureUnsupported;
    if (graph) {
        if (!trsim_graph_valid(graph) || (ndeps && !deps))
            return cudaErrorInvalidValue;
        for (size_t i = 0; i < ndeps; i++) {
            if (!trsim_graph_has_node(graph, deps[i]))
                return cudaErrorInvalidValue;
            /* Edge types only matter to kernels (programmatic launches). */
            if (edges && (edges[i].type != cudaGraphDependencyTypeDefault || edges[i].from_port ||
                          edges[i].to_port)) {
                trsim_warn("cudaStreamBeginCaptureToGraph: edge data other than the default is not "
                           "supported by the simulator");
                return cudaErrorNotSupported;
            }
        }
    } else {
        ndeps = 0;
    }
    struct capture *c = calloc(1, sizeof *c);
    if (!c)
        return cudaErrorMemoryAllocation;
    c->owns_graph = !graph;
    if (!graph && (err = trsim_graph_new(&graph)) != cudaSuccess) {
        free(c);
        return err;
    }
    c->id = atomic_fetch_add(&next_id, 1);
    c->mode = mode;
    c->thread = pthread_self();
    c->device = trsim_stream_device(s);
    c->origin = s;
    c->graph = graph;
    c->first = trsim_graph_size(graph);
    c->refs = 1;

    pthread_mutex_lock(&lock);
    if (member_of(s))
        err = cudaErrorIllegalState;   /* already capturing */
    else if (!member_add(s, c, deps, ndeps))
        err = cudaErrorMemoryAllocation;
    if (err == cudaSuccess) {
        c->next = captures;
        captures = c;
        atomic_fetch_add(&live, 1);
        trsim_graph_capture_ref(graph, 1);
    }
    pthread_mutex_unlock(&lock);
    if (err != cudaSuccess) {
        if (c->owns_graph)
            trsim_graph_drop(graph, SIZE_MAX);
        free(c);
    }
    return err;
}

TRSIM_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return trsim_error(trsim_capture_begin(stream, NULL, NULL, NULL, 0, mode));
}

TRSIM_API cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                    const cudaGraphNode_t *dependencies,
                                                    const cudaGraphEdgeData *dependencyData,
                                                    size_t numDependencies, enum cudaStreamCaptureMode mode)
{
    if (!graph)
        return trsim_error(cudaErrorInvalidValue);
    return trsim_error(trsim_capture_begin(stream, graph, dependencies, dependencyData, numDependencies, mode));
}

cudaError_t trsim_capture_end(cudaStream_t stream, cudaGraph_t *pGraph)
{
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess && !pGraph)
        err = cudaErrorInvalidValue;
    if (err != cudaSuccess)
        return err;
    pthread_mutex_lock(&lock);
    struct member *m = member_of(s);
    struct capture *c = m ? m->cap : NULL;
    cudaGraph_t graph = NULL;
    int owned = 0;
    size_t first = 0;
    if (!m) {
        err = legacy_conflict(s, 0) ? cudaErrorStreamCaptureImplicit : cudaErrorIllegalState;
    } else if (c->origin != s) {
        invalidate(c);
        err = cudaErrorStreamCaptureUnmatched;
    } else if (c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->thread, pthread_self())) {
        err = cudaErrorStreamCaptureWrongThread;   /* the capture goes on */
    } else {
        if (c->invalidated)
            err = cudaErrorStreamCaptureInvalidated;
        else if (trsim_graph_unjoined(c->graph, c->first, m->deps, m->ndeps))
            err = cudaErrorStreamCaptureUnjoined;
        owned = c->owns_graph;
        first = c->first;
        graph = capture_end(c);
        capture_unref(c);
    }
    pthread_mutex_unlock(&lock);
    /* *pGraph is only written when a capture ended. */
    if (graph && err != cudaSuccess) {
        capture_discard(graph, owned, first);
        *pGraph = NULL;
    } else if (graph) {
        *pGraph = graph;
    }
    return err;
}

TRSIM_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return trsim_error(trsim_capture_end(stream, pGraph));
}

TRSIM_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return trsim_error(trsim_capture_info(stream, pCaptureStatus, NULL, NULL, NULL, NULL, NULL));
}

cudaError_t trsim_capture_info(cudaStream_t stream,
    enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out,
    cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess && (!captureStatus_out || (edgeData_out && !dependencies_out)))
        err = cudaErrorInvalidValue;
    if (err != cudaSuccess)
        return err;
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    cudaGraph_t graph = NULL;
    const cudaGraphNode_t *deps = NULL;
    const cudaGraphEdgeData *edges = NULL;
    size_t ndeps = 0;
    pthread_mutex_lock(&lock);
    err = check_locked(s, TRSIM_CAPTURE_PEEK);
    struct member *m = err == cudaSuccess ? member_of(s) : NULL;
    if (m) {
        /* The id of an invalidated capture is still its id: it names the
         * sequence until cudaStreamEndCapture. */
        status = m->cap->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
        id = m->cap->id;
    }
    if (m && !m->cap->invalidated) {
        graph = m->cap->graph;
        ndeps = m->ndeps;
        if (dependencies_out) {
            /* Arrays of the stream's own: valid until its next call. */
            free(m->deps_out);
            free(m->edges_out);
            m->deps_out = malloc((ndeps ? ndeps : 1) * sizeof *m->deps_out);
            m->edges_out = calloc(ndeps ? ndeps : 1, sizeof *m->edges_out);
            if (m->deps_out && m->edges_out) {
                memcpy(m->deps_out, m->deps, ndeps * sizeof *m->deps_out);
                deps = m->deps_out;
                edges = m->edges_out;
            } else {
                err = cudaErrorMemoryAllocation;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    if (err != cudaSuccess)
        return err;
    *captureStatus_out = status;
    /* Only meaningful while active; nothing is left undefined anyway. */
    if (id_out)
        *id_out = id;
    if (graph_out)
        *graph_out = graph;
    if (dependencies_out)
        *dependencies_out = deps;
    if (edgeData_out)
        *edgeData_out = edges;
    if (numDependencies_out)
        *numDependencies_out = ndeps;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
    enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out,
    cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return trsim_error(trsim_capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out,
                                          edgeData_out, numDependencies_out));
}

cudaError_t trsim_capture_update(cudaStream_t stream, cudaGraphNode_t *dependencies,
                                                          const cudaGraphEdgeData *dependencyData,
                                                          size_t numDependencies, unsigned int flags)
{
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess && ((numDependencies && !dependencies) ||
                               (flags != cudaStreamAddCaptureDependencies && flags != cudaStreamSetCaptureDependencies)))
        err = cudaErrorInvalidValue;
    for (size_t i = 0; err == cudaSuccess && dependencyData && i < numDependencies; i++)
        if (dependencyData[i].type != cudaGraphDependencyTypeDefault || dependencyData[i].from_port ||
            dependencyData[i].to_port) {
            trsim_warn("cudaStreamUpdateCaptureDependencies: edge data other than the default is not "
                       "supported by the simulator");
            err = cudaErrorNotSupported;
        }
    if (err != cudaSuccess)
        return err;
    pthread_mutex_lock(&lock);
    struct member *m = member_of(s);
    if (!m) {
        err = cudaErrorIllegalState;
    } else if (m->cap->invalidated) {
        err = cudaErrorStreamCaptureInvalidated;
    } else {
        for (size_t i = 0; i < numDependencies; i++)
            if (!trsim_graph_has_node(m->cap->graph, dependencies[i]))
                err = cudaErrorInvalidValue;
        if (err == cudaSuccess) {
            if (flags == cudaStreamSetCaptureDependencies)
                m->ndeps = 0;
            if (!deps_union(m, dependencies, numDependencies))
                err = cudaErrorMemoryAllocation;
        }
    }
    pthread_mutex_unlock(&lock);
    return err;
}

TRSIM_API cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *dependencies,
                                                          const cudaGraphEdgeData *dependencyData,
                                                          size_t numDependencies, unsigned int flags)
{
    return trsim_error(trsim_capture_update(stream, dependencies, dependencyData, numDependencies, flags));
}

cudaError_t trsim_capture_mode_exchange(enum cudaStreamCaptureMode *mode)
{
    if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
        return cudaErrorInvalidValue;
    enum cudaStreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    return trsim_error(trsim_capture_mode_exchange(mode));
}

/* ---- per-thread default stream variants ------------------------------------- */

TRSIM_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return cudaStreamBeginCapture(TRSIM_PTSZ(stream), mode);
}

TRSIM_API cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                         const cudaGraphNode_t *dependencies,
                                                         const cudaGraphEdgeData *dependencyData,
                                                         size_t numDependencies, enum cudaStreamCaptureMode mode)
{
    return cudaStreamBeginCaptureToGraph(TRSIM_PTSZ(stream), graph, dependencies, dependencyData,
                                         numDependencies, mode);
}

TRSIM_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return cudaStreamEndCapture(TRSIM_PTSZ(stream), pGraph);
}

TRSIM_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return cudaStreamIsCapturing(TRSIM_PTSZ(stream), pCaptureStatus);
}

TRSIM_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
    enum cudaStreamCaptureStatus *captureStatus_out, unsigned long long *id_out,
    cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return cudaStreamGetCaptureInfo(TRSIM_PTSZ(stream), captureStatus_out, id_out, graph_out,
                                    dependencies_out, edgeData_out, numDependencies_out);
}

TRSIM_API cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t stream, cudaGraphNode_t *dependencies,
                                                               const cudaGraphEdgeData *dependencyData,
                                                               size_t numDependencies, unsigned int flags)
{
    return cudaStreamUpdateCaptureDependencies(TRSIM_PTSZ(stream), dependencies, dependencyData,
                                               numDependencies, flags);
}
