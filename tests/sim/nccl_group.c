/* Simulated NCCL groups, and how every operation is numbered, launched and
 * run. An operation (validated by nccl_ops.c or nccl_onesided.c) is
 * numbered when it is launched: at once outside a group, at the outermost
 * ncclGroupEnd inside one, in call order either way (NCCL matches
 * operations across ranks by call order; a group dropped by
 * ncclGroupSimulateEnd or failed by an invalid call numbers nothing). It
 * then runs on its stream's worker as a non-blocking state machine. A group
 * becomes one task per stream that advances all of its operations together,
 * so send/recv pairs inside a group cannot deadlock. An operation whose
 * peers never arrive never finishes: its stream stays pending, exactly like
 * a hung NCCL kernel.
 *
 * On a capturing stream (CUDA graphs, rt_graph.c) that task becomes a node
 * template: nothing is numbered, counted in flight or recorded
 * (launchCompletionEvent) then. Each launch of the graph clones it, and
 * the clone numbers its operations there, on the launching thread, in node
 * order: a replay matches its peers exactly as the same calls made eagerly
 * at that point would. */
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"

typedef struct {
    trsim_task task;
    int nops, nfinished;
    trsim_op **ops;
} group_task;

/* ---- per-thread group state ---------------------------------------------- */

static _Thread_local struct {
    int depth;
    ncclResult_t error;
    trsim_op **ops;
    int nops, cap;
    struct ncclComm **inits;
    int ninits, inits_cap;
    struct trsim_job **jobs;
    int njobs, jobs_cap;
} group;

/* Makes room for need elements in *arr; 0 when out of memory. */
static int reserve(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 1;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return 0;
    *arr = p;
    *cap = ncap;
    return 1;
}

int trsim_group_depth(void) { return group.depth; }

void trsim_group_defer_init(struct ncclComm *comm)
{
    if (reserve((void **)&group.inits, &group.inits_cap, group.ninits + 1, sizeof *group.inits))
        group.inits[group.ninits++] = comm;
    else if (group.error == ncclSuccess)
        group.error = ncclSystemError;
}

void trsim_group_defer_job(struct trsim_job *job)
{
    if (reserve((void **)&group.jobs, &group.jobs_cap, group.njobs + 1, sizeof *group.jobs))
        group.jobs[group.njobs++] = job;
    else if (group.error == ncclSuccess)
        group.error = ncclSystemError;
}

/* ---- running a group on a stream ---------------------------------------------- */

static void op_finish(trsim_op *op)
{
    struct ncclComm *comm = op->comm;
    op->finished = 1;
    /* Ring first: once nothing is in flight, ncclCommDestroy or Abort may
     * free the communicator (their wait also polls, so the order costs
     * them a few milliseconds at most). */
    trsim_shm_ring(&comm->shm);
    atomic_fetch_sub(&comm->inflight, 1);
}

/* Hung operations are never finished (a GPU kernel waits forever), but a
 * dead peer is reported through ncclCommGetAsyncError, and TRSIM_TIMEOUT_SEC
 * can turn the wait into an error for tests that ask for it. */
static void check_stalled(trsim_op *op, double now)
{
    struct ncclComm *comm = op->comm;
    double timeout = trsim_timeout_sec();
    if (timeout > 0 && now - op->started > timeout) {
        trsim_comm_set_error(comm, ncclSystemError,
                             "rank %d: %s #%llu did not complete within TRSIM_TIMEOUT_SEC=%g",
                             comm->rank, trsim_op_names[op->kind], (unsigned long long)op->seq, timeout);
        op_finish(op);
        return;
    }
    if (now - op->last_liveness_check < 0.5) return;
    op->last_liveness_check = now;
    int first = op->root >= 0 && !IS_COLL(op->kind) ? op->root : 0;
    int last = op->root >= 0 && !IS_COLL(op->kind) ? op->root : comm->nranks - 1;
    for (int q = first; q <= last; q++) {
        int dead = 0;
        if (op->kind != OP_WAITSIGNAL) {
            dead = trsim_shm_rank_dead(&comm->shm, q);
        } else {
            /* a wait depends on the peers of its descriptors only */
            for (int i = 0; i < op->ndesc && !dead; i++)
                dead = op->descs[i].peer == q && trsim_shm_rank_dead(&comm->shm, q);
        }
        if (dead) {
            trsim_comm_set_error(comm, ncclRemoteError,
                                 "rank %d: peer rank %d exited while %s #%llu waited for it",
                                 comm->rank, q, trsim_op_names[op->kind], (unsigned long long)op->seq);
            return;
        }
    }
}

static trsim_task_state group_run(trsim_task *task)
{
    group_task *g = (group_task *)task;
    for (;;) {
        trsim_op *waiting = NULL;
        uint32_t seen = 0;
        int progressed = 0;
        for (int i = 0; i < g->nops; i++) {
            trsim_op *op = g->ops[i];
            if (op->finished) continue;
            if (!waiting) {
                waiting = op;
                seen = atomic_load(&op->comm->shm.hdr->doorbell);
            }
            if (op->started == 0) op->started = trsim_now();
            if (atomic_load(&op->comm->aborted)) {
                op_finish(op);   /* ncclCommAbort kills the kernel */
            } else {
                if (!trsim_op_progress(op)) continue;
                op_finish(op);
            }
            g->nfinished++;
            progressed = 1;
        }
        if (g->nfinished == g->nops) return TRSIM_TASK_DONE;
        if (progressed) continue;
        double now = trsim_now();
        for (int i = 0; i < g->nops; i++)
            if (!g->ops[i]->finished) {
                check_stalled(g->ops[i], now);
                if (g->ops[i]->finished) g->nfinished++;
            }
        if (g->nfinished == g->nops) return TRSIM_TASK_DONE;
        /* Several communicators may be involved: sleep on one doorbell but
         * only briefly, so the others' progress is seen soon. */
        trsim_shm_wait(&waiting->comm->shm, seen, g->nops > 1 ? 1000000L : 50000000L);
        return TRSIM_TASK_AGAIN;
    }
}

static void op_free(trsim_op *op)
{
    if (!op) return;
    free(op->descs);
    trsim_window_release(op->win);
    free(op);
}

static void group_destroy(trsim_task *task)
{
    group_task *g = (group_task *)task;
    for (int i = 0; i < g->nops; i++) op_free(g->ops[i]);
    free(g->ops);
    free(g);
}

/* Gives an operation its place in the call order of its communicator:
 * collectives their number and steps, messages their number per peer, waits
 * the signal counts they wait for. Done when the operation is launched. */
static void op_number(trsim_op *op)
{
    struct ncclComm *comm = op->comm;
    pthread_mutex_lock(&comm->lock);
    if (IS_COLL(op->kind)) {
        op->seq = ++comm->coll_seq;
        op->step_base = comm->next_step;
        comm->next_step += op->nsteps;
    } else if (IS_P2P(op->kind) && op->bytes > 0) {
        /* Zero-byte send/recv are no-ops in NCCL: they match nothing. */
        op->seq = op->kind == OP_SEND ? ++comm->send_msgs[op->root] : ++comm->recv_msgs[op->root];
    } else if (op->kind == OP_WAITSIGNAL) {
        op->seq = ++comm->waits;
        for (int i = 0; i < op->ndesc; i++) {
            struct trsim_wait_desc *d = &op->descs[i];
            uint64_t *expected = &comm->sig_expected[(size_t)d->peer * TRSIM_RMA_SLOTS + d->slot];
            *expected += d->count;
            d->target = *expected;
        }
    }
    pthread_mutex_unlock(&comm->lock);
}

static cudaError_t group_clone(trsim_task *tmpl, trsim_stream *s);

/* Releases ops that will never run: they are no longer in flight. */
static void ops_drop(trsim_op **ops, int nops)
{
    for (int i = 0; i < nops; i++) {
        if (!ops[i]->finished) atomic_fetch_sub(&ops[i]->comm->inflight, 1);
        op_free(ops[i]);
    }
    free(ops);
}

/* Queues ops (all on one stream; numbered unless the stream captures,
 * counted in flight) as one task, or makes them a node of the stream's
 * capture. Owns ops and the operations, whatever the outcome. */
static ncclResult_t launch(trsim_op **ops, int nops, int captured)
{
    group_task *g = calloc(1, sizeof *g);
    if (!g) {
        ops_drop(ops, nops);
        return ncclSystemError;
    }
    g->ops = ops;
    g->nops = nops;
    g->task.run = group_run;
    g->task.destroy = group_destroy;
    g->task.clone = group_clone;
    if (captured) {
        /* A template: in flight only once a launch of its graph clones it. */
        for (int i = 0; i < nops; i++)
            if (!ops[i]->finished) atomic_fetch_sub(&ops[i]->comm->inflight, 1);
        cudaError_t e = trsim_stream_enqueue(ops[0]->stream, &g->task, cudaGraphNodeTypeKernel);
        if (e == cudaSuccess) return ncclSuccess;
        trsim_set_last_error("%s: CUDA error %d (%s) capturing the operation", trsim_op_names[ops[0]->kind],
                             (int)e, cudaGetErrorName(e));
        return ncclUnhandledCudaError;
    }
    for (int i = 0; i < nops; i++) {
        g->nfinished += ops[i]->finished;
        /* recorded before the launch, as NCCL does with CUDA < 12.3 */
        if (ops[i]->launch_event) trsim_event_record(ops[i]->launch_event, ops[i]->stream);
    }
    trsim_stream_submit_after(ops[0]->stream, &g->task, NULL, 0);
    return ncclSuccess;
}

/* A launch of a graph holding the group task tmpl: fresh operations, as
 * they were called, numbered now in their order (the template never ran,
 * so its state is the operations' initial one). */
static cudaError_t group_clone(trsim_task *tmpl, trsim_stream *s)
{
    const group_task *t = (const group_task *)tmpl;
    group_task *g = calloc(1, sizeof *g);
    trsim_op **ops = calloc((size_t)t->nops, sizeof *ops);
    int n = 0;
    if (!g || !ops) goto fail;
    for (; n < t->nops; n++) {
        trsim_op *op = malloc(sizeof *op);
        if (!op) goto fail;
        *op = *t->ops[n];
        op->stream = s;
        op->descs = NULL;
        if (op->ndesc) {
            op->descs = malloc((size_t)op->ndesc * sizeof *op->descs);
            if (!op->descs) {
                free(op);
                goto fail;
            }
            memcpy(op->descs, t->ops[n]->descs, (size_t)op->ndesc * sizeof *op->descs);
        }
        if (op->win) trsim_window_hold(op->win);
        ops[n] = op;
    }
    for (int i = 0; i < n; i++) {
        op_number(ops[i]);
        if (!ops[i]->finished) atomic_fetch_add(&ops[i]->comm->inflight, 1);
        g->nfinished += ops[i]->finished;
    }
    g->ops = ops;
    g->nops = n;
    g->task.run = group_run;
    g->task.destroy = group_destroy;
    trsim_stream_submit_after(s, &g->task, NULL, 0);
    return cudaSuccess;

fail:
    for (int i = 0; i < n; i++) op_free(ops[i]);
    free(ops);
    free(g);
    return cudaErrorMemoryAllocation;
}

/* ---- taking operations ------------------------------------------------------------ */

ncclResult_t trsim_group_fail(ncclResult_t r)
{
    if (group.depth > 0 && group.error == ncclSuccess) group.error = r;
    return r;
}

ncclResult_t trsim_op_submit(const trsim_op *proto)
{
    struct ncclComm *comm = proto->comm;
    trsim_op *op = malloc(sizeof *op);
    if (!op) return ncclSystemError;
    *op = *proto;
    if (!op->finished) atomic_fetch_add(&comm->inflight, 1);
    if (group.depth > 0) {
        if (!reserve((void **)&group.ops, &group.cap, group.nops + 1, sizeof *group.ops)) {
            if (!op->finished) atomic_fetch_sub(&comm->inflight, 1);
            free(op);
            return trsim_group_fail(ncclSystemError);
        }
        group.ops[group.nops++] = op;
        return ncclSuccess;
    }
    trsim_op **ops = malloc(sizeof *ops);
    if (!ops) {
        if (!op->finished) atomic_fetch_sub(&comm->inflight, 1);
        free(op);
        return ncclSystemError;
    }
    ops[0] = op;
    int captured = trsim_stream_capturing(op->stream);
    if (!captured) op_number(op);
    ncclResult_t r = launch(ops, 1, captured);
    if (r != ncclSuccess) return r;
    return comm->blocking ? ncclSuccess : ncclInProgress;
}

/* ---- the API ------------------------------------------------------------------------- */

TRSIM_API ncclResult_t ncclGroupStart(void)
{
    if (group.depth == 0) group.error = ncclSuccess;
    group.depth++;
    return ncclSuccess;
}

static void *job_thread_main(void *arg)
{
    trsim_job_run(arg);
    return NULL;
}

/* Deferred jobs run side by side (one thread may split several
 * communicators of one job); then deferred inits are waited for. */
static ncclResult_t finish_deferred(void)
{
    ncclResult_t r = ncclSuccess;
    if (group.njobs > 0) {
        pthread_t *threads = calloc((size_t)group.njobs, sizeof *threads);
        int *started = calloc((size_t)group.njobs, sizeof *started);
        for (int i = 0; i < group.njobs; i++)
            started[i] = threads && started &&
                         pthread_create(&threads[i], NULL, job_thread_main, group.jobs[i]) == 0;
        for (int i = 0; i < group.njobs; i++) {
            if (started && started[i]) pthread_join(threads[i], NULL);
            else trsim_job_run(group.jobs[i]);
            ncclResult_t w = trsim_job_free(group.jobs[i]);
            if (w != ncclSuccess && r == ncclSuccess) r = w;
        }
        free(threads);
        free(started);
        group.njobs = 0;
    }
    for (int i = 0; i < group.ninits; i++) {
        ncclResult_t w = trsim_comm_wait_init(group.inits[i]);
        if (w != ncclSuccess && r == ncclSuccess) r = w;
    }
    group.ninits = 0;
    return r;
}

/* A rough cost model for ncclGroupSimulateEnd, in microseconds as NCCL's
 * estimatedTime: a ring's latency per step plus the bytes each rank moves
 * at 20 GB/s. */
static double op_estimate_us(const trsim_op *op)
{
    double n = op->comm->nranks, bytes = (double)op->count * (double)op->elsize, steps = n - 1, moved = bytes;
    switch (op->kind) {
    case OP_ALLREDUCE: steps = 2 * (n - 1); moved = 2 * bytes * (n - 1) / n; break;
    case OP_ALLGATHER: case OP_ALLTOALL: case OP_GATHER: case OP_SCATTER: case OP_REDUCESCATTER:
        moved = bytes * (n - 1); break;
    case OP_BROADCAST: case OP_REDUCE: break;
    case OP_SEND: case OP_RECV: case OP_PUTSIGNAL: steps = 1; moved = (double)op->bytes; break;
    default: steps = 1; moved = 0; break;
    }
    return 5.0 + 2.0 * steps + moved / 20e3;
}

/* ncclGroupEnd, or ncclGroupSimulateEnd with sim: the group's operations
 * are dropped (nothing launched, nothing numbered: the peers see nothing),
 * its inits and splits still complete, and sim->estimatedTime gets the
 * estimate (when its size covers it). */
static ncclResult_t group_end(ncclSimInfo_t *sim)
{
    if (group.depth == 0) {
        trsim_set_last_error("ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--group.depth > 0) return ncclSuccess;
    if (sim && group.error == ncclSuccess &&
        (sim->size < offsetof(ncclSimInfo_t, magic) + sizeof sim->magic || sim->magic != 0x74685283)) {
        trsim_set_last_error("ncclSimInfo_t argument not initialized via NCCL_SIM_INFO_INITIALIZER");
        group.error = ncclInvalidArgument;
    }
    ncclResult_t r = finish_deferred();
    int nonblocking = 0;
    if (group.error != ncclSuccess || sim) {
        /* NCCL launches nothing of a group with an invalid call in it, nor
         * of a simulated one. */
        double us = 0;
        for (int i = 0; i < group.nops; i++) {
            us += op_estimate_us(group.ops[i]);
            if (!group.ops[i]->finished) op_finish(group.ops[i]);
            op_free(group.ops[i]);
        }
        if (sim && group.error == ncclSuccess && group.nops > 0 &&
            sim->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof sim->estimatedTime)
            sim->estimatedTime = (float)us;
        group.nops = 0;
    }
    /* Numbered in call order (those on a capturing stream at each launch
     * of their graph), then one task per stream, holding that stream's
     * operations in call order. */
    int *captured = calloc(group.nops ? (size_t)group.nops : 1, sizeof *captured);
    if (!captured) r = ncclSystemError;
    for (int i = 0; captured && i < group.nops; i++) {
        captured[i] = trsim_stream_capturing(group.ops[i]->stream);
        if (!captured[i]) op_number(group.ops[i]);
    }
    int remaining = captured ? group.nops : 0;
    while (remaining > 0) {
        trsim_stream *s = NULL;
        int n = 0, capturing = 0;
        for (int i = 0; i < group.nops; i++) {
            if (!group.ops[i]) continue;
            if (!s) {
                s = group.ops[i]->stream;
                capturing = captured[i];
            }
            if (group.ops[i]->stream == s) n++;
        }
        trsim_op **ops = malloc((size_t)n * sizeof *ops);
        if (!ops) { r = ncclSystemError; break; }
        n = 0;
        for (int i = 0; i < group.nops; i++)
            if (group.ops[i] && group.ops[i]->stream == s) {
                ops[n++] = group.ops[i];
                nonblocking |= !group.ops[i]->comm->blocking;
                group.ops[i] = NULL;
            }
        remaining -= n;
        ncclResult_t lr = launch(ops, n, capturing);
        if (lr != ncclSuccess) { r = lr; break; }
    }
    /* What could not be launched never runs. */
    for (int i = 0; i < group.nops; i++)
        if (group.ops[i]) {
            if (!group.ops[i]->finished) op_finish(group.ops[i]);
            op_free(group.ops[i]);
        }
    free(captured);
    group.nops = 0;
    if (group.error != ncclSuccess) r = group.error;
    group.error = ncclSuccess;
    if (r == ncclSuccess && nonblocking) r = ncclInProgress;
    return r;
}

TRSIM_API ncclResult_t ncclGroupEnd(void)
{
    return group_end(NULL);
}

/* With a NULL simInfo, NCCL's ncclGroupSimulateEnd launches the group like
 * ncclGroupEnd; so does the simulator. */
TRSIM_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    return group_end(simInfo);
}
