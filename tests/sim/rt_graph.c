/* Graphs: what stream capture builds (rt_capture.c), instantiated and
 * launched.
 *
 * A node holds a template: the task that was queued on the capturing
 * stream, which never runs. Templates are shared, reference counted, by the
 * graph and by the executable graphs instantiated from it, so a graph can
 * be destroyed once instantiated and an executable graph while launches of
 * it are pending (as CUDA allows): a launch never touches a template after
 * it returned. cudaGraphLaunch walks the nodes in their order (capture
 * order, a topological order of the DAG) and has each template queue a
 * fresh task on the launch stream (trsim_task.clone): the graph's work runs
 * serialized on that stream, one valid execution of the DAG. Two captured
 * operations that can only complete while running concurrently (say,
 * collectives on two streams that the peers issue in opposite orders)
 * therefore wait for each other forever in the simulator, where a GPU
 * might run them side by side. Simulated NCCL operations are numbered by
 * their clone, so each launch numbers them anew, in node order, on the
 * launching thread, exactly as the same calls made there eagerly.
 *
 * Node handles are the nodes themselves, valid while their graph lives,
 * as in CUDA. References to user objects (rt_userobj.c) that a graph owns
 * are also owned by each executable graph instantiated from it, until it is
 * destroyed and its launches are done. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

struct tmpl {
    atomic_int refs;            /* the graph's node, each executable graph's */
    trsim_task *task;
};

struct CUgraphNode_st {
    cudaGraph_t graph;
    size_t index;               /* in its graph: every dependency's is lower */
    enum cudaGraphNodeType type;
    struct tmpl *tmpl;          /* NULL: an empty node */
    size_t ndeps;
    struct CUgraphNode_st **deps;
};

struct urefs {                  /* references to user objects */
    struct uref { cudaUserObject_t obj; unsigned count; } *v;
    size_t n, cap;
};

struct graph {
    pthread_mutex_t lock;
    cudaGraph_t handle;
    struct CUgraphNode_st **nodes;
    size_t n, cap;
    int captures;               /* captures into it in progress */
    struct urefs urefs;
};

struct xnode {                  /* a node of an executable graph */
    enum cudaGraphNodeType type;
    struct tmpl *tmpl;
    size_t ndeps;
    size_t *deps;               /* indexes */
};

struct exec {
    pthread_mutex_t lock;       /* also serializes launches: each numbers its NCCL nodes in one run */
    unsigned long long flags;
    struct xnode *nodes;
    size_t n;
    trsim_stream *last;         /* the previous launch's stream and last ticket */
    uint64_t last_ticket;
    struct urefs urefs;
};

#define INSTANTIATE_FLAGS (cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload | \
                           cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority)

static pthread_once_t graphs_once = PTHREAD_ONCE_INIT;
static trsim_handles *graph_handles, *exec_handles;

static void graphs_init(void)
{
    graph_handles = trsim_handles_new(4);
    exec_handles = trsim_handles_new(5);
    if (!graph_handles || !exec_handles) {
        trsim_warn("cannot initialize graphs");
        abort();
    }
}

static struct graph *graph_get(cudaGraph_t handle)
{
    pthread_once(&graphs_once, graphs_init);
    return trsim_handle_get(graph_handles, (uintptr_t)handle);
}

static struct exec *exec_get(cudaGraphExec_t handle)
{
    pthread_once(&graphs_once, graphs_init);
    return trsim_handle_get(exec_handles, (uintptr_t)handle);
}

static void tmpl_unref(struct tmpl *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
        return;
    if (t->task->destroy)
        t->task->destroy(t->task);
    free(t);
}

static void node_free(struct CUgraphNode_st *node)
{
    tmpl_unref(node->tmpl);
    free(node->deps);
    free(node);
}

/* ---- user object references ---------------------------------------------- */

/* Records count references to obj in r (they are taken already); 0 when
 * out of memory. */
static int urefs_add(struct urefs *r, cudaUserObject_t obj, unsigned count)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].obj == obj) {
            r->v[i].count += count;
            return 1;
        }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4;
        struct uref *v = realloc(r->v, cap * sizeof *v);
        if (!v)
            return 0;
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (struct uref){obj, count};
    return 1;
}

/* Takes, for into, the references from holds. */
static int urefs_copy(struct urefs *into, const struct urefs *from)
{
    for (size_t i = 0; i < from->n; i++) {
        if (!urefs_add(into, from->v[i].obj, from->v[i].count))
            return 0;
        trsim_user_object_retain(from->v[i].obj, from->v[i].count);
    }
    return 1;
}

static void urefs_release(struct urefs *r)
{
    for (size_t i = 0; i < r->n; i++)
        trsim_user_object_release(r->v[i].obj, r->v[i].count);
    free(r->v);
    r->v = NULL;
    r->n = r->cap = 0;
}

/* The references of an executable graph destroyed while launches of it
 * are pending go once the last launch is done: a task behind it. */
struct urefs_task {
    trsim_task task;
    struct urefs urefs;
};

static trsim_task_state urefs_task_run(trsim_task *task)
{
    urefs_release(&((struct urefs_task *)task)->urefs);
    return TRSIM_TASK_DONE;
}

static void urefs_task_destroy(trsim_task *task)
{
    free(task);
}

/* ---- for stream capture ------------------------------------------------- */

cudaError_t trsim_graph_new(cudaGraph_t *out)
{
    pthread_once(&graphs_once, graphs_init);
    struct graph *g = calloc(1, sizeof *g);
    if (!g)
        return cudaErrorMemoryAllocation;
    pthread_mutex_init(&g->lock, NULL);
    g->handle = (cudaGraph_t)trsim_handle_add(graph_handles, g);
    if (!g->handle) {
        free(g);
        return cudaErrorMemoryAllocation;
    }
    *out = g->handle;
    return cudaSuccess;
}

int trsim_graph_valid(cudaGraph_t graph)
{
    return graph_get(graph) != NULL;
}

int trsim_graph_has_node(cudaGraph_t graph, cudaGraphNode_t node)
{
    struct graph *g = graph_get(graph);
    if (!g || !node)
        return 0;
    pthread_mutex_lock(&g->lock);
    int has = node->graph == graph && node->index < g->n && g->nodes[node->index] == node;
    pthread_mutex_unlock(&g->lock);
    return has;
}

cudaGraphNode_t trsim_graph_add(cudaGraph_t graph, enum cudaGraphNodeType type, trsim_task *task,
                                cudaGraphNode_t const *deps, size_t ndeps)
{
    struct graph *g = graph_get(graph);
    if (!g)
        return NULL;
    struct CUgraphNode_st *node = calloc(1, sizeof *node);
    struct tmpl *t = task ? calloc(1, sizeof *t) : NULL;
    if (!node || (task && !t) || (ndeps && !(node->deps = malloc(ndeps * sizeof *node->deps))))
        goto fail;
    pthread_mutex_lock(&g->lock);
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        struct CUgraphNode_st **nodes = realloc(g->nodes, cap * sizeof *nodes);
        if (!nodes) {
            pthread_mutex_unlock(&g->lock);
            goto fail;
        }
        g->nodes = nodes;
        g->cap = cap;
    }
    if (t) {
        atomic_init(&t->refs, 1);
        t->task = task;
    }
    node->graph = graph;
    node->index = g->n;
    node->type = type;
    node->tmpl = t;
    node->ndeps = ndeps;
    if (ndeps)
        memcpy(node->deps, deps, ndeps * sizeof *node->deps);
    g->nodes[g->n++] = node;
    pthread_mutex_unlock(&g->lock);
    return node;

fail:
    if (node)
        free(node->deps);
    free(node);
    free(t);
    return NULL;
}

size_t trsim_graph_size(cudaGraph_t graph)
{
    struct graph *g = graph_get(graph);
    if (!g)
        return 0;
    pthread_mutex_lock(&g->lock);
    size_t n = g->n;
    pthread_mutex_unlock(&g->lock);
    return n;
}

void trsim_graph_drop(cudaGraph_t graph, size_t n)
{
    pthread_once(&graphs_once, graphs_init);
    struct graph *g = n == SIZE_MAX ? trsim_handle_remove(graph_handles, (uintptr_t)graph) : graph_get(graph);
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    size_t keep = n == SIZE_MAX ? 0 : n < g->n ? n : g->n;
    /* Later nodes depend on earlier ones only: the rest stays whole. */
    for (size_t i = keep; i < g->n; i++)
        node_free(g->nodes[i]);
    g->n = keep;
    pthread_mutex_unlock(&g->lock);
    if (n == SIZE_MAX) {
        urefs_release(&g->urefs);
        pthread_mutex_destroy(&g->lock);
        free(g->nodes);
        free(g);
    }
}

cudaGraphNode_t trsim_graph_unjoined(cudaGraph_t graph, size_t first, cudaGraphNode_t const *ends,
                                     size_t nends)
{
    struct graph *g = graph_get(graph);
    if (!g)
        return NULL;
    cudaGraphNode_t unjoined = NULL;
    pthread_mutex_lock(&g->lock);
    /* The ancestors of ends, walked from the last node down: a node's
     * dependencies always come before it. */
    unsigned char *joined = calloc(g->n ? g->n : 1, 1);
    if (!joined) {
        pthread_mutex_unlock(&g->lock);
        return NULL;
    }
    for (size_t i = 0; i < nends; i++)
        joined[ends[i]->index] = 1;
    for (size_t i = g->n; i-- > first;)
        if (joined[i])
            for (size_t d = 0; d < g->nodes[i]->ndeps; d++)
                joined[g->nodes[i]->deps[d]->index] = 1;
    for (size_t i = first; i < g->n && !unjoined; i++)
        if (!joined[i])
            unjoined = g->nodes[i];
    free(joined);
    pthread_mutex_unlock(&g->lock);
    return unjoined;
}

void trsim_graph_capture_ref(cudaGraph_t graph, int delta)
{
    struct graph *g = graph_get(graph);
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->captures += delta;
    pthread_mutex_unlock(&g->lock);
}

/* ---- executable graphs --------------------------------------------------- */

static void xnodes_free(struct xnode *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tmpl_unref(nodes[i].tmpl);
        free(nodes[i].deps);
    }
    free(nodes);
}

/* With g->lock held: the executable form of g's nodes, sharing their
 * templates (NULL when out of memory). */
static struct xnode *xnodes_of(struct graph *g)
{
    struct xnode *x = calloc(g->n ? g->n : 1, sizeof *x);
    for (size_t i = 0; x && i < g->n; i++) {
        const struct CUgraphNode_st *node = g->nodes[i];
        x[i].type = node->type;
        x[i].ndeps = node->ndeps;
        if (node->ndeps && !(x[i].deps = malloc(node->ndeps * sizeof *x[i].deps))) {
            xnodes_free(x, i);
            return NULL;
        }
        for (size_t d = 0; d < node->ndeps; d++)
            x[i].deps[d] = node->deps[d]->index;
        x[i].tmpl = node->tmpl;
        if (x[i].tmpl)
            atomic_fetch_add(&x[i].tmpl->refs, 1);
    }
    return x;
}

cudaError_t trsim_graph_instantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    struct graph *g = graph_get(graph);
    if (!pGraphExec || !g || (flags & ~(unsigned long long)INSTANTIATE_FLAGS))
        return cudaErrorInvalidValue;
    if (flags & cudaGraphInstantiateFlagDeviceLaunch) {
        trsim_warn("cudaGraphInstantiate: graphs for device launch are not supported by the simulator");
        return cudaErrorNotSupported;
    }
    struct exec *x = calloc(1, sizeof *x);
    if (!x)
        return cudaErrorMemoryAllocation;
    pthread_mutex_init(&x->lock, NULL);
    /* What cudaGraphExecGetFlags reports: the upload is not a property. */
    x->flags = flags & ~(unsigned long long)cudaGraphInstantiateFlagUpload;
    pthread_mutex_lock(&g->lock);
    x->n = g->n;
    x->nodes = xnodes_of(g);
    int referenced = urefs_copy(&x->urefs, &g->urefs);
    pthread_mutex_unlock(&g->lock);
    uintptr_t h = x->nodes && referenced ? trsim_handle_add(exec_handles, x) : 0;
    if (!h) {
        xnodes_free(x->nodes, x->n);
        urefs_release(&x->urefs);
        free(x);
        return cudaErrorMemoryAllocation;
    }
    *pGraphExec = (cudaGraphExec_t)h;
    return cudaSuccess;
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

cudaError_t trsim_graph_launch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    trsim_stream *s;
    struct exec *x = exec_get(graphExec);
    if (!x)
        return cudaErrorInvalidValue;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess)
        err = trsim_capture_check(s, TRSIM_CAPTURE_ENQUEUE);
    if (err != cudaSuccess)
        return err;
    if (trsim_stream_capturing(s))
        return trsim_capture_refuse(s, cudaErrorNotSupported, "cudaGraphLaunch (a child graph node)");
    pthread_mutex_lock(&x->lock);
    /* Each launch is ordered behind the previous launch of the same
     * executable graph, on whichever stream that was. */
    if (x->last && x->last != s && !trsim_stream_ticket_done(x->last, x->last_ticket)) {
        trsim_task *marker = calloc(1, sizeof *marker);
        if (!marker) {
            pthread_mutex_unlock(&x->lock);
            return cudaErrorMemoryAllocation;
        }
        marker->run = marker_run;
        marker->destroy = marker_destroy;
        trsim_stream_submit_after(s, marker, x->last, x->last_ticket);
    }
    for (size_t i = 0; i < x->n && err == cudaSuccess; i++)
        if (x->nodes[i].tmpl)
            err = x->nodes[i].tmpl->task->clone(x->nodes[i].tmpl->task, s);
    x->last = s;
    x->last_ticket = trsim_stream_last_ticket(s);
    pthread_mutex_unlock(&x->lock);
    return err;
}

/* ---- the API ------------------------------------------------------------- */

TRSIM_API cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    if (!pGraph || flags != 0)
        return trsim_error(cudaErrorInvalidValue);
    return trsim_error(trsim_graph_new(pGraph));
}

cudaError_t trsim_graph_destroy(cudaGraph_t graph)
{
    struct graph *g = graph_get(graph);
    if (!g)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g->lock);
    int capturing = g->captures > 0;
    pthread_mutex_unlock(&g->lock);
    /* CUDA permits anything but destroying it while a capture adds to it. */
    if (capturing)
        return cudaErrorIllegalState;
    trsim_graph_drop(graph, SIZE_MAX);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    return trsim_error(trsim_graph_destroy(graph));
}

/* cudaGraphGetNodes's and cudaGraphNodeGetDependencies's convention: NULL
 * out gives the count; else up to *num entries, the rest of them NULL, and
 * *num becomes the count given. */
static void list_nodes(struct CUgraphNode_st *const *from, size_t n, cudaGraphNode_t *out, size_t *num)
{
    if (out) {
        for (size_t i = 0; i < *num; i++)
            out[i] = i < n ? from[i] : NULL;
        if (*num > n)
            *num = n;
    } else {
        *num = n;
    }
}

cudaError_t trsim_graph_get_nodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
    struct graph *g = graph_get(graph);
    if (!g || !numNodes)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g->lock);
    list_nodes(g->nodes, g->n, nodes, numNodes);
    pthread_mutex_unlock(&g->lock);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
    return trsim_error(trsim_graph_get_nodes(graph, nodes, numNodes));
}

TRSIM_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType)
{
    if (!node || !pType)
        return trsim_error(cudaErrorInvalidValue);
    *pType = node->type;
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *pDependencies,
                                                   cudaGraphEdgeData *edgeData, size_t *pNumDependencies)
{
    if (!node || !pNumDependencies || (edgeData && !pDependencies))
        return trsim_error(cudaErrorInvalidValue);
    size_t want = *pNumDependencies;
    list_nodes(node->deps, node->ndeps, pDependencies, pNumDependencies);
    /* Every edge a capture makes is a default one. */
    if (edgeData)
        memset(edgeData, 0, want * sizeof *edgeData);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                           unsigned long long flags)
{
    return trsim_error(trsim_graph_instantiate(pGraphExec, graph, flags));
}

TRSIM_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                    unsigned long long flags)
{
    return trsim_error(trsim_graph_instantiate(pGraphExec, graph, flags));
}

cudaError_t trsim_graph_instantiate_params(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                     cudaGraphInstantiateParams *instantiateParams)
{
    trsim_stream *s;
    if (!instantiateParams)
        return cudaErrorInvalidValue;
    instantiateParams->errNode_out = NULL;
    instantiateParams->result_out = cudaGraphInstantiateError;
    cudaError_t err = cudaSuccess;
    if (instantiateParams->flags & cudaGraphInstantiateFlagUpload)
        err = trsim_stream_get(instantiateParams->uploadStream, &s);
    if (err == cudaSuccess)
        err = trsim_graph_instantiate(pGraphExec, graph, instantiateParams->flags);
    if (err == cudaSuccess)
        instantiateParams->result_out = cudaGraphInstantiateSuccess;
    return err;
}

TRSIM_API cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                     cudaGraphInstantiateParams *instantiateParams)
{
    return trsim_error(trsim_graph_instantiate_params(pGraphExec, graph, instantiateParams));
}

TRSIM_API cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t graphExec, unsigned long long *flags)
{
    struct exec *x = exec_get(graphExec);
    if (!x || !flags)
        return trsim_error(cudaErrorInvalidValue);
    *flags = x->flags;
    return cudaSuccess;
}

cudaError_t trsim_graph_exec_destroy(cudaGraphExec_t graphExec)
{
    pthread_once(&graphs_once, graphs_init);
    struct exec *x = trsim_handle_remove(exec_handles, (uintptr_t)graphExec);
    if (!x)
        return cudaErrorInvalidValue;
    /* Pending launches run clones of their own: nothing of x is left to
     * them but the user objects, released behind the last launch. */
    pthread_mutex_lock(&x->lock);
    xnodes_free(x->nodes, x->n);
    struct urefs_task *t = NULL;
    if (x->urefs.n && x->last && !trsim_stream_ticket_done(x->last, x->last_ticket) &&
        (t = calloc(1, sizeof *t))) {
        t->task.run = urefs_task_run;
        t->task.destroy = urefs_task_destroy;
        t->urefs = x->urefs;
        trsim_stream_submit_after(x->last, &t->task, NULL, 0);
    } else {
        urefs_release(&x->urefs);
    }
    pthread_mutex_unlock(&x->lock);
    pthread_mutex_destroy(&x->lock);
    free(x);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    return trsim_error(trsim_graph_exec_destroy(graphExec));
}

TRSIM_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return trsim_error(trsim_graph_launch(graphExec, stream));
}

/* Nothing to upload: a launch needs no preparation. */
cudaError_t trsim_graph_upload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    trsim_stream *s;
    cudaError_t err = exec_get(graphExec) ? trsim_stream_get(stream, &s) : cudaErrorInvalidValue;
    if (err == cudaSuccess)
        err = trsim_capture_check(s, TRSIM_CAPTURE_ENQUEUE);
    return err;
}

TRSIM_API cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return trsim_error(trsim_graph_upload(graphExec, stream));
}

/* The graph must have the executable graph's topology: as many nodes, each
 * with the same dependencies, and of the same type; then its nodes replace
 * the executable graph's (launches already made keep theirs). */
cudaError_t trsim_graph_exec_update(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                          cudaGraphExecUpdateResultInfo *resultInfo)
{
    struct exec *x = exec_get(hGraphExec);
    struct graph *g = graph_get(hGraph);
    if (!resultInfo)
        return cudaErrorInvalidValue;
    resultInfo->result = cudaGraphExecUpdateError;
    resultInfo->errorNode = resultInfo->errorFromNode = NULL;
    if (!x || !g)
        return cudaErrorInvalidValue;
    enum cudaGraphExecUpdateResult result = cudaGraphExecUpdateSuccess;
    cudaGraphNode_t error_node = NULL, error_from = NULL;
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&g->lock);
    pthread_mutex_lock(&x->lock);
    if (g->n != x->n)
        result = cudaGraphExecUpdateErrorTopologyChanged;
    for (size_t i = 0; result == cudaGraphExecUpdateSuccess && i < g->n; i++) {
        struct CUgraphNode_st *node = g->nodes[i];
        const struct xnode *was = &x->nodes[i];
        if (node->ndeps != was->ndeps) {
            result = cudaGraphExecUpdateErrorTopologyChanged;
            error_node = node;
        }
        for (size_t d = 0; result == cudaGraphExecUpdateSuccess && d < node->ndeps; d++)
            if (node->deps[d]->index != was->deps[d]) {
                result = cudaGraphExecUpdateErrorTopologyChanged;
                error_node = node;
                error_from = node->deps[d];
            }
        if (result == cudaGraphExecUpdateSuccess && node->type != was->type) {
            result = cudaGraphExecUpdateErrorNodeTypeChanged;
            error_node = node;
        }
    }
    struct xnode *fresh = result == cudaGraphExecUpdateSuccess ? xnodes_of(g) : NULL;
    if (fresh) {
        xnodes_free(x->nodes, x->n);
        x->nodes = fresh;
        /* The new graph's objects too; the old ones stay (pending launches
         * of the old nodes may need them) until the executable goes. */
        urefs_copy(&x->urefs, &g->urefs);
    } else if (result == cudaGraphExecUpdateSuccess) {
        result = cudaGraphExecUpdateError;
        err = cudaErrorMemoryAllocation;
    }
    pthread_mutex_unlock(&x->lock);
    pthread_mutex_unlock(&g->lock);
    resultInfo->result = result;
    resultInfo->errorNode = error_node;
    resultInfo->errorFromNode = error_from;
    if (err == cudaSuccess && result != cudaGraphExecUpdateSuccess)
        err = cudaErrorGraphExecUpdateFailure;
    return err;
}

TRSIM_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                          cudaGraphExecUpdateResultInfo *resultInfo)
{
    return trsim_error(trsim_graph_exec_update(hGraphExec, hGraph, resultInfo));
}

TRSIM_API cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                                                unsigned int flags)
{
    struct graph *g = graph_get(graph);
    if (!g || count == 0 || (flags & ~(unsigned)cudaGraphUserObjectMove))
        return trsim_error(cudaErrorInvalidValue);
    /* Moved references are the caller's already; others are new. */
    cudaError_t err = flags & cudaGraphUserObjectMove ? trsim_user_object_retain(object, 0)
                                                      : trsim_user_object_retain(object, count);
    if (err != cudaSuccess)
        return trsim_error(err);
    pthread_mutex_lock(&g->lock);
    int ok = urefs_add(&g->urefs, object, count);
    pthread_mutex_unlock(&g->lock);
    if (!ok) {
        if (!(flags & cudaGraphUserObjectMove))
            trsim_user_object_release(object, count);
        return trsim_error(cudaErrorMemoryAllocation);
    }
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count)
{
    struct graph *g = graph_get(graph);
    if (!g || count == 0)
        return trsim_error(cudaErrorInvalidValue);
    cudaError_t err = cudaErrorInvalidValue;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->urefs.n; i++)
        if (g->urefs.v[i].obj == object && g->urefs.v[i].count >= count) {
            g->urefs.v[i].count -= count;
            if (g->urefs.v[i].count == 0)
                g->urefs.v[i] = g->urefs.v[--g->urefs.n];
            err = cudaSuccess;
            break;
        }
    pthread_mutex_unlock(&g->lock);
    if (err == cudaSuccess)
        err = trsim_user_object_release(object, count);
    return trsim_error(err);
}

/* ---- per-thread default stream variants ---------------------------------- */

TRSIM_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return trsim_error(trsim_graph_launch(graphExec, TRSIM_PTSZ(stream)));
}

TRSIM_API cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return trsim_error(trsim_graph_upload(graphExec, TRSIM_PTSZ(stream)));
}

TRSIM_API cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                          cudaGraphInstantiateParams *instantiateParams)
{
    if (instantiateParams && (instantiateParams->flags & cudaGraphInstantiateFlagUpload))
        instantiateParams->uploadStream = TRSIM_PTSZ(instantiateParams->uploadStream);
    return trsim_error(trsim_graph_instantiate_params(pGraphExec, graph, instantiateParams));
}
