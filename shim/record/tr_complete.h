/* Completion of NCCL operations on the GPU (tr_complete.c): an event from a
 * per-device pool recorded on the call's stream right after the call was
 * enqueued, polled by a background thread that stores gpu/done_ns in the
 * call's ring record; and the hang watchdog (TRSHIM_HANG_SEC, tr_watchdog.c)
 * on top of it. Never synchronizes a stream, never blocks the caller. Part of
 * record/'s boundary: included through tr_record.h. */
#ifndef TR_COMPLETE_H
#define TR_COMPLETE_H

#include <stdint.h>
#include <cuda_runtime_api.h>
#include "trshim/nccl_abi.h"

/* A collective or send/recv, outside any group, returned rc on stream; rec
 * is its ring record index. Records an event after it when rc is
 * ncclSuccess, the stream is not capturing (capturing: 0 no, 1 yes, -1
 * unknown) and completion tracking is on; otherwise leaves the record's gpu
 * field TRR_GPU_UNTRACKED. */
void tr_complete_after(uint64_t rec, cudaStream_t stream, int capturing, ncclResult_t rc);
/* Inside a group: remembered, and tracked at the outermost GroupEnd. */
void tr_complete_group_call(uint64_t rec, cudaStream_t stream, int capturing);
/* The outermost GroupEnd returned rc. */
void tr_complete_group_end(ncclResult_t rc);

/* Starts the poller thread (at activation: tr_init.c): GPU completion, the
 * ring's heartbeat (about once a second) and the watchdog. */
void tr_complete_start(void);
/* Calls not tracked because a bound was reached (operations pending,
 * streams, calls in one group). */
uint64_t tr_complete_untracked_full(void);

/* The abort of ring comm slot comm began (ncclCommAbort, ncclCommRevoke,
 * before the real call; an asynchronous error it reported): its operations
 * not complete now are ABORTED when their events complete. Waits, at most
 * 200 ms, for one poller pass that begins after it (none when nothing is
 * pending). */
void tr_complete_aborting(int32_t comm);
/* A fatal signal: every operation seen pending from now on is aborted.
 * Async-signal-safe. */
void tr_complete_fatal(void);

/* The application's cudaStreamSynchronize / cudaDeviceSynchronize
 * (tr_sync.c): mark is tr_complete_mark() before the real call; after it
 * returned cudaSuccess, tr_complete_synced makes the operations tracked by
 * then on that stream (whole_device: every stream of the current device)
 * complete. */
uint64_t tr_complete_mark(void);
void tr_complete_synced(int whole_device, cudaStream_t stream, uint64_t mark);

/* ---- the watchdog (tr_watchdog.c), called by the poller thread only ---- */

/* The oldest pending operation of a stream, ring record rec, returned at
 * exit_ns, is still not complete at now: reported once (*stalled) when
 * overdue. Returns 1 when overdue. */
int tr_watchdog_pending(int *stalled, uint64_t rec, uint64_t exit_ns, uint64_t now);
/* Calls that entered and have not returned (records, communicator inits and
 * ends): reported once each when overdue. Returns 1 when one is overdue. */
int tr_watchdog_host(uint64_t now);
/* After a pass: whether anything was overdue (0 ends the current hang: the
 * next stuck call prints a line again). */
void tr_watchdog_settle(int overdue);

#endif
