/* Copies and memsets: validated on the calling thread, queued on a stream,
 * executed by the stream's worker.
 *
 * The synchronous functions (cudaMemcpy, cudaMemcpy2D, cudaMemcpyPeer,
 * cudaMemset, cudaMemset2D) queue on the legacy default stream and wait for
 * completion. CUDA lets some of them return earlier (device-to-device
 * copies, memsets of device memory, pageable-to-device copies once staged),
 * but on a GPU they finish within microseconds, and programs that go on to
 * use the data from a non-blocking stream at once work there in practice;
 * waiting keeps them working here, and no correct program can tell.
 *
 * The Async functions follow CUDA's "API synchronization behavior" rules:
 *    pageable host -> device : the source is staged, no wait
 *    device -> pageable host : waits (CUDA is synchronous there)
 *    host -> host            : waits
 *    anything else           : no wait
 * Staging copies the pageable source before the call returns, so the caller
 * may reuse its buffer at once, as CUDA documents.
 *
 * With unified addressing a pointer is "device" memory when it lies in a
 * device, managed or pinned allocation; an address CUDA does not know is
 * pageable host memory, and passing one where a kind requires device
 * memory fails with cudaErrorInvalidValue, as on a GPU. A range running
 * past the end of its allocation fails the same way.
 *
 * In stream capture (rt_capture.c) an asynchronous copy or memset becomes
 * a graph node; one with pageable memory is refused (CUDA cannot replay
 * it: cudaErrorStreamCaptureUnsupported), and the synchronous functions
 * follow the capture rules for the legacy stream and unsafe calls. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

struct copy_task {
    trsim_task task;
    char *dst;
    const char *src;            /* NULL for a memset */
    size_t dpitch, spitch, width, height;
    int value;
    void *staging;              /* owned copy of a pageable source */
};

static trsim_task_state copy_run(trsim_task *task)
{
    struct copy_task *c = (struct copy_task *)task;
    for (size_t row = 0; row < c->height; row++) {
        if (c->src)
            memmove(c->dst + row * c->dpitch, c->src + row * c->spitch, c->width);
        else
            memset(c->dst + row * c->dpitch, c->value, c->width);
    }
    return TRSIM_TASK_DONE;
}

static void copy_destroy(trsim_task *task)
{
    struct copy_task *c = (struct copy_task *)task;
    free(c->staging);
    free(c);
}

/* A launch of a graph holding the copy: the same copy (a captured copy
 * never has a staged source: its memory is never pageable). */
static cudaError_t copy_clone(trsim_task *tmpl, trsim_stream *s)
{
    struct copy_task *c = malloc(sizeof *c);
    if (!c)
        return cudaErrorMemoryAllocation;
    *c = *(const struct copy_task *)tmpl;
    c->staging = NULL;
    trsim_stream_submit_after(s, &c->task, NULL, 0);
    return cudaSuccess;
}

/* Queues a copy of op on s, staging its source first when asked to, and
 * waits for it when asked to (a capturing s takes neither). */
static cudaError_t copy_queue(trsim_stream *s, const struct copy_task *op, int stage, int wait)
{
    if (wait) {
        cudaError_t err = trsim_capture_check(s, TRSIM_CAPTURE_SYNC);
        if (err != cudaSuccess)
            return err;
    }
    struct copy_task *c = malloc(sizeof *c);
    if (!c)
        return cudaErrorMemoryAllocation;
    *c = *op;
    c->task.run = copy_run;
    c->task.destroy = copy_destroy;
    c->task.clone = stage ? NULL : copy_clone;
    c->staging = NULL;
    if (stage) {
        if (c->height && c->width > SIZE_MAX / c->height)
            goto no_memory;
        char *staging = malloc(c->width * c->height);
        if (!staging)
            goto no_memory;
        for (size_t row = 0; row < c->height; row++)
            memcpy(staging + row * c->width, c->src + row * c->spitch, c->width);
        c->staging = staging;
        c->src = staging;
        c->spitch = c->width;
    }
    if (!wait)
        return trsim_stream_enqueue(s, &c->task, c->src ? cudaGraphNodeTypeMemcpy : cudaGraphNodeTypeMemset);
    trsim_stream_wait_ticket(s, trsim_stream_submit_after(s, &c->task, NULL, 0));
    return cudaSuccess;

no_memory:
    free(c);
    return cudaErrorMemoryAllocation;
}

/* One side of a copy: what the address is, and whether extent bytes from it
 * stay inside its allocation. */
struct endpoint {
    int known;                  /* inside an allocation CUDA knows */
    trsim_alloc_info info;
};

static cudaError_t endpoint_find(struct endpoint *ep, const void *p, size_t extent)
{
    ep->known = trsim_mem_lookup(p, &ep->info);
    if (ep->known) {
        size_t offset = (size_t)((const char *)p - (const char *)ep->info.base);
        if (extent > ep->info.size - offset)
            return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

static int endpoint_is_host(const struct endpoint *ep)
{
    return !ep->known || ep->info.kind == TRSIM_MEM_HOST;
}

/* Bytes a pitched region spans: the last row is only width long. */
static int region_extent(size_t pitch, size_t width, size_t height, size_t *extent)
{
    if (height - 1 > 0 && pitch > (SIZE_MAX - width) / (height - 1))
        return -1;
    *extent = (height - 1) * pitch + width;
    return 0;
}

enum copy_mode { COPY_SYNC, COPY_ASYNC };

/* A synchronous copy or memset on s: s must not capture nor be the legacy
 * stream of a device where a blocking stream captures, and the thread's
 * capture mode must allow an unsafe call. */
static cudaError_t sync_allowed(trsim_stream *s)
{
    cudaError_t err = trsim_capture_check(s, TRSIM_CAPTURE_SYNC);
    return err != cudaSuccess ? err : trsim_capture_unsafe(trsim_stream_device(s));
}

static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                           size_t width, size_t height, enum cudaMemcpyKind kind,
                           cudaStream_t stream, enum copy_mode mode)
{
    trsim_stream *s;
    struct endpoint d, sr;
    size_t dext, sext;
    int src_host, dst_host;

    if ((unsigned)kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err != cudaSuccess)
        return err;
    if (width > dpitch || width > spitch)
        return cudaErrorInvalidPitchValue;
    if (width == 0 || height == 0)
        return cudaSuccess;
    if (!dst || !src || region_extent(dpitch, width, height, &dext) != 0 ||
        region_extent(spitch, width, height, &sext) != 0)
        return cudaErrorInvalidValue;
    if ((err = endpoint_find(&d, dst, dext)) != cudaSuccess ||
        (err = endpoint_find(&sr, src, sext)) != cudaSuccess)
        return err;

    switch (kind) {
    case cudaMemcpyHostToHost:
        src_host = dst_host = 1;
        break;
    case cudaMemcpyHostToDevice:
        src_host = 1;
        dst_host = 0;
        break;
    case cudaMemcpyDeviceToHost:
        src_host = 0;
        dst_host = 1;
        break;
    case cudaMemcpyDeviceToDevice:
        src_host = dst_host = 0;
        break;
    default:                    /* cudaMemcpyDefault: the addresses tell */
        src_host = endpoint_is_host(&sr);
        dst_host = endpoint_is_host(&d);
        break;
    }
    if ((!src_host && !sr.known) || (!dst_host && !d.known))
        return cudaErrorInvalidValue;
    int src_pageable = src_host && !sr.known, dst_pageable = dst_host && !d.known;

    if (mode == COPY_SYNC && (err = sync_allowed(s)) != cudaSuccess)
        return err;
    if (mode == COPY_ASYNC && trsim_stream_capturing(s)) {
        /* A graph copies between memory CUDA knows, without waiting. */
        if (src_pageable || dst_pageable)
            return trsim_capture_refuse(s, cudaErrorStreamCaptureUnsupported, NULL);
        struct copy_task op = {
            .dst = dst, .src = src, .dpitch = dpitch, .spitch = spitch, .width = width, .height = height,
        };
        return copy_queue(s, &op, 0, 0);
    }
    int wait = mode == COPY_SYNC || (src_host && dst_host) || dst_pageable;
    int stage = !wait && src_pageable;

    struct copy_task op = {
        .dst = dst, .src = src, .dpitch = dpitch, .spitch = spitch,
        .width = width, .height = height,
    };
    return copy_queue(s, &op, stage, wait);
}

TRSIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return trsim_error(copy_2d(dst, count, src, count, count, 1, kind, NULL, COPY_SYNC));
}

TRSIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                      enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return trsim_error(copy_2d(dst, count, src, count, count, 1, kind, stream, COPY_ASYNC));
}

TRSIM_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return trsim_error(copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL, COPY_SYNC));
}

TRSIM_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind kind,
                                        cudaStream_t stream)
{
    return trsim_error(copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, COPY_ASYNC));
}

static cudaError_t peer_check(void *dst, int dstDevice, const void *src, int srcDevice,
                              size_t count)
{
    struct endpoint d, s;
    int n = trsim_device_count();
    cudaError_t err;
    if (dstDevice < 0 || dstDevice >= n || srcDevice < 0 || srcDevice >= n)
        return cudaErrorInvalidDevice;
    if (count == 0)
        return cudaSuccess;
    if (!dst || !src)
        return cudaErrorInvalidValue;
    if ((err = endpoint_find(&d, dst, count)) != cudaSuccess ||
        (err = endpoint_find(&s, src, count)) != cudaSuccess)
        return err;
    return d.known && s.known ? cudaSuccess : cudaErrorInvalidValue;
}

TRSIM_API cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                                     size_t count)
{
    trsim_stream *legacy;
    cudaError_t err = peer_check(dst, dstDevice, src, srcDevice, count);
    if (err != cudaSuccess || count == 0)
        return trsim_error(err);
    /* Synchronous, like a copy on the legacy stream. */
    err = trsim_stream_get(cudaStreamLegacy, &legacy);
    if (err == cudaSuccess)
        err = trsim_capture_check(legacy, TRSIM_CAPTURE_SYNC);
    if (err == cudaSuccess)
        err = trsim_capture_unsafe(trsim_current_device());
    if (err != cudaSuccess)
        return trsim_error(err);
    /* Serialized with all work of the current, source and destination
     * devices: once those are idle, the copy is done here, before any work
     * queued later can start. */
    trsim_device_wait_idle(trsim_current_device());
    trsim_device_wait_idle(srcDevice);
    trsim_device_wait_idle(dstDevice);
    memmove(dst, src, count);
    return cudaSuccess;
}

TRSIM_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src,
                                          int srcDevice, size_t count, cudaStream_t stream)
{
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess)
        err = peer_check(dst, dstDevice, src, srcDevice, count);
    if (err != cudaSuccess || count == 0)
        return trsim_error(err);
    struct copy_task op = {
        .dst = dst, .src = src, .dpitch = count, .spitch = count, .width = count, .height = 1,
    };
    return trsim_error(copy_queue(s, &op, 0, 0));
}

static cudaError_t memset_2d(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                             cudaStream_t stream, enum copy_mode mode)
{
    trsim_stream *s;
    struct endpoint d;
    size_t extent;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err != cudaSuccess)
        return err;
    if (width > pitch)
        return cudaErrorInvalidPitchValue;
    if (width == 0 || height == 0)
        return cudaSuccess;
    if (!devPtr || region_extent(pitch, width, height, &extent) != 0)
        return cudaErrorInvalidValue;
    if ((err = endpoint_find(&d, devPtr, extent)) != cudaSuccess)
        return err;
    if (!d.known)
        return cudaErrorInvalidValue;
    if (mode == COPY_SYNC && (err = sync_allowed(s)) != cudaSuccess)
        return err;
    struct copy_task op = {
        .dst = devPtr, .dpitch = pitch, .width = width, .height = height,
        .value = (unsigned char)value,
    };
    return copy_queue(s, &op, 0, mode == COPY_SYNC);
}

TRSIM_API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    return trsim_error(memset_2d(devPtr, count, value, count, 1, NULL, COPY_SYNC));
}

TRSIM_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return trsim_error(memset_2d(devPtr, count, value, count, 1, stream, COPY_ASYNC));
}

TRSIM_API cudaError_t cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width,
                                   size_t height)
{
    return trsim_error(memset_2d(devPtr, pitch, value, width, height, NULL, COPY_SYNC));
}

TRSIM_API cudaError_t cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width,
                                        size_t height, cudaStream_t stream)
{
    return trsim_error(memset_2d(devPtr, pitch, value, width, height, stream, COPY_ASYNC));
}

/* ---- per-thread default stream variants ---------------------------------- */

TRSIM_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return trsim_error(copy_2d(dst, count, src, count, count, 1, kind, cudaStreamPerThread, COPY_SYNC));
}

TRSIM_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return trsim_error(copy_2d(dst, dpitch, src, spitch, width, height, kind, cudaStreamPerThread,
                               COPY_SYNC));
}

TRSIM_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                           enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return cudaMemcpyAsync(dst, src, count, kind, TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                             size_t width, size_t height, enum cudaMemcpyKind kind,
                                             cudaStream_t stream)
{
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    return trsim_error(memset_2d(devPtr, count, value, count, 1, cudaStreamPerThread, COPY_SYNC));
}

TRSIM_API cudaError_t cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width,
                                        size_t height)
{
    return trsim_error(memset_2d(devPtr, pitch, value, width, height, cudaStreamPerThread, COPY_SYNC));
}

TRSIM_API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return cudaMemsetAsync(devPtr, value, count, TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width,
                                             size_t height, cudaStream_t stream)
{
    return cudaMemset2DAsync(devPtr, pitch, value, width, height, TRSIM_PTSZ(stream));
}

/* ---- managed memory hints ------------------------------------------------ */

/* Managed memory lives in one place, the host, for every device: hints and
 * prefetches are validated like CUDA does and change nothing. */
static cudaError_t managed_range_check(const void *devPtr, size_t count)
{
    struct endpoint ep;
    if (!devPtr || count == 0)
        return cudaErrorInvalidValue;
    cudaError_t err = endpoint_find(&ep, devPtr, count);
    if (err == cudaSuccess && (!ep.known || ep.info.kind != TRSIM_MEM_MANAGED))
        err = cudaErrorInvalidValue;
    return err;
}

static cudaError_t location_check(struct cudaMemLocation location)
{
    switch (location.type) {
    case cudaMemLocationTypeDevice:
        return location.id >= 0 && location.id < trsim_device_count() ? cudaSuccess
                                                                      : cudaErrorInvalidDevice;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
    case cudaMemLocationTypeHostNumaCurrent:
        return cudaSuccess;
    default:
        return cudaErrorInvalidValue;
    }
}

TRSIM_API cudaError_t cudaMemPrefetchAsync(const void *devPtr, size_t count,
                                           struct cudaMemLocation location, unsigned int flags,
                                           cudaStream_t stream)
{
    trsim_stream *s;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err == cudaSuccess && flags != 0)
        err = cudaErrorInvalidValue;
    if (err == cudaSuccess)
        err = managed_range_check(devPtr, count);
    if (err == cudaSuccess)
        err = location_check(location);
    /* Nothing to queue, but a stream in capture or the legacy stream there
     * follows the rules. */
    if (err == cudaSuccess)
        err = trsim_capture_check(s, TRSIM_CAPTURE_ENQUEUE);
    return trsim_error(err);
}

TRSIM_API cudaError_t cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count,
                                                struct cudaMemLocation location, unsigned int flags,
                                                cudaStream_t stream)
{
    return cudaMemPrefetchAsync(devPtr, count, location, flags, TRSIM_PTSZ(stream));
}

TRSIM_API cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                                    struct cudaMemLocation location)
{
    cudaError_t err = managed_range_check(devPtr, count);
    if (err == cudaSuccess && (advice < cudaMemAdviseSetReadMostly || advice > cudaMemAdviseUnsetAccessedBy))
        err = cudaErrorInvalidValue;
    /* Read-mostly hints ignore the location. */
    if (err == cudaSuccess && advice != cudaMemAdviseSetReadMostly && advice != cudaMemAdviseUnsetReadMostly)
        err = location_check(location);
    return trsim_error(err);
}

TRSIM_API cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void *devPtr, size_t length,
                                               unsigned int flags)
{
    trsim_stream *s;
    trsim_alloc_info info;
    cudaError_t err = trsim_stream_get(stream, &s);
    if (err != cudaSuccess)
        return trsim_error(err);
    if ((flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle) ||
        !trsim_mem_lookup(devPtr, &info) || info.kind != TRSIM_MEM_MANAGED || info.base != devPtr ||
        (length != 0 && length != info.size))
        return trsim_error(cudaErrorInvalidValue);
    /* Not supported in graphs, as CUDA documents. */
    if (trsim_stream_capturing(s))
        return trsim_error(trsim_capture_refuse(s, cudaErrorStreamCaptureUnsupported, NULL));
    return trsim_error(trsim_capture_check(s, TRSIM_CAPTURE_ENQUEUE));
}

TRSIM_API cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void *devPtr, size_t length,
                                                    unsigned int flags)
{
    return cudaStreamAttachMemAsync(TRSIM_PTSZ(stream), devPtr, length, flags);
}
