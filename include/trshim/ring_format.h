/* The ring file: the binary, memory-mapped half of a trace, shared by the
 * writer (libtrshim.so, shim/ring/tr_ring.c) and the reader (tranalyze,
 * analyzer/load/ring/ring.c). It is written as events happen, by stores into
 * a MAP_SHARED mapping, so the kernel keeps everything up to the last store
 * when the process is killed (SIGKILL, OOM killer, scheduler). Documented in
 * docs/trace-format.md ("Ring file"); a change an older reader would misread
 * bumps TRSHIM_RING_VERSION.
 *
 * Layout (every offset in the header; all little-endian, x86-64/aarch64):
 *   [0, 4096)                      trr_header
 *   [off_comms, +max_comms*1024)   trr_comm slots, in creation order
 *   [off_records, +capacity*128)   trr_record slots: record i is in slot i % capacity
 *   [off_blobs, +blob_bytes)       trr_blob entries, appended (stacks, modules,
 *                                  Python code objects and Python stacks)
 * The file is created sparse (ftruncate): untouched slots read as zeros.
 *
 * Commit protocol (what a reader may trust after a kill at any instant):
 *   - record: the writer stores stamp = 0, fills the entry fields, then stores
 *     stamp = index + 1 (release). A slot whose stamp is not index + 1 for
 *     the index the reader expects there is skipped (torn or overwritten).
 *     Return fields (seq, exit_ns, rc) are stored before state = RETURNED
 *     (release); done_ns before gpu = DONE.
 *   - comm slot: fields written, then `valid` = 1 (release); later fields
 *     change in place (atomics), each meaningful on its own.
 *   - blob: payload written, then `kind` (release); the reader stops at the
 *     first zero kind or at blob_bytes.
 */
#ifndef TRSHIM_RING_FORMAT_H
#define TRSHIM_RING_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_calls.h"

#define TRSHIM_RING_MAGIC "TRSHRING"      /* 8 bytes, no NUL */
#define TRSHIM_RING_VERSION 1
/* File names: TRSHIM_TRACE_PREFIX<job>.<host>.<pid>.ring (one per process; the job as in the traces' names) */
#define TRSHIM_RING_SUFFIX ".ring"

#define TRR_HEADER_BYTES 4096
#define TRR_RECORD_BYTES 128
#define TRR_COMM_BYTES 1024
#define TRR_COMM_CHECKPOINTS 48

/* process state (trr_header.state) */
enum { TRR_RUNNING = 1, TRR_EXITED = 2, TRR_SIGNALED = 3 };

/* record.op: the vocabulary's operations (TR_NCCL_OPS in nccl_calls.h), in
 * its order; names as in JSON */
#define TRR_OP_ENUM_(suffix, name, flags, alias) TRR_OP_##suffix = TR_OP_##suffix,
enum { TR_NCCL_OPS(TRR_OP_ENUM_) TRR_OP_N = TR_OP_N };
#undef TRR_OP_ENUM_
/* record.extra of a collective issued through a *Config entry point
 * (ncclAllReduceConfig...): TRR_EXTRA_CONFIG | (index of its
 * TRR_BLOB_COLLCONFIG + 1, 0: not stored); 0 for the plain entry points.
 * Of PutSignal, Signal and WaitSignal: sigIdx | (uint64_t)(uint32_t)ctx << 32. */
#define TRR_EXTRA_CONFIG (1ull << 63)
/* record.state */
enum { TRR_REC_EMPTY, TRR_REC_ENTERED, TRR_REC_RETURNED };
/* record.capturing */
enum { TRR_CAPT_NO, TRR_CAPT_YES, TRR_CAPT_UNKNOWN };
/* record.gpu: completion of the operation on the GPU */
enum { TRR_GPU_UNTRACKED,   /* not observed: group/failed call, capturing stream, no event, off */
       TRR_GPU_PENDING,     /* enqueued (event recorded after it), not complete when last polled */
       TRR_GPU_DONE,        /* completed; done_ns = when the poller saw it */
       TRR_GPU_ERROR,       /* the event query failed (sticky CUDA error) */
       TRR_GPU_ABORTED };   /* released by its communicator's abort: seen not complete after the abort
                               began (or tracked after it), then complete; it did not complete its work
                               (docs/trace-format.md, "Aborted operations") */
#define TRR_NONE INT32_MIN  /* no reduction op / root / peer; dtype of group calls */

/* The comm slot's kind and end_kind, in slot order, with their names in
 * the JSON traces ("kind", "end.kind"): the one table of them (the shim's
 * writer, the analyzer's ring reader and tests/common/ring.py read it). */
#define TRR_COMM_KINDS(X)                                                      \
    X(INITRANK, "InitRank")                                                    \
    X(INITRANKCONFIG, "InitRankConfig")                                        \
    X(INITRANKSCALABLE, "InitRankScalable")                                    \
    X(INITALL, "InitAll")                                                      \
    X(SPLIT, "Split")                                                          \
    X(SHRINK, "Shrink")                                                        \
    X(GROW, "Grow")
#define TRR_COMM_ENDS(X)                                                       \
    X(NONE, NULL)                                                              \
    X(FINALIZE, "Finalize")                                                    \
    X(DESTROY, "Destroy")                                                      \
    X(ABORT, "Abort")                                                          \
    X(REVOKE, "Revoke")
#define TRR_KIND_ENUM_(id, name) TRR_KIND_##id,
#define TRR_END_ENUM_(id, name) TRR_END_##id,
#define TRR_NAME_(id, name) name,
enum { TRR_COMM_KINDS(TRR_KIND_ENUM_) TRR_KIND_N };
enum { TRR_COMM_ENDS(TRR_END_ENUM_) TRR_END_N };
/* the names, by kind and by end kind (TRR_END_NONE: NULL) */
static const char *const trr_kind_names[TRR_KIND_N] __attribute__((unused)) = {TRR_COMM_KINDS(TRR_NAME_)};
static const char *const trr_end_names[TRR_END_N] __attribute__((unused)) = {TRR_COMM_ENDS(TRR_NAME_)};
#undef TRR_KIND_ENUM_
#undef TRR_END_ENUM_
#undef TRR_NAME_

/* blob kinds; a reader skips a kind it does not know by its `bytes` */
enum { TRR_BLOB_END = 0, TRR_BLOB_MODULE = 1, TRR_BLOB_STACK = 2, TRR_BLOB_PYCODE = 3, TRR_BLOB_PYSTACK = 4,
       TRR_BLOB_COLLCONFIG = 5, TRR_BLOB_NCCLINFO = 6, TRR_BLOB_GRAPH = 7, TRR_BLOB_CRASH = 8,
       TRR_BLOB_ERROR = 9, TRR_BLOB_PYROOTS = 10, TRR_BLOB_PYEXC = 11 };

/* A GraphLaunch record (op TRR_OP_GRAPHLAUNCH) numbers, for one replay of an
 * executable graph, one lane of one communicator: the graph's collectives
 * on it, or its sends to / receives from / signals to / waits for one peer.
 * A launch makes one record per lane its graph uses, consecutively, with
 * the same times, stack and replay number. Fields:
 *   comm     the lane's communicator slot
 *   redop    the lane: TRR_LANE_*
 *   root     the peer of a per-peer lane, TRR_NONE for TRR_LANE_COLL
 *   seq      the number the lane's first replayed call takes (its counter
 *            before the replay + 1: collectives' seq, messages' number per
 *            peer; waits count signals); 0 when the launch failed
 *   count    the replay number: launches of this executable graph, 1, 2...
 *   extra    the index of the graph's TRR_BLOB_GRAPH
 *   sendbuff the cudaGraphExec_t; recvbuff the numbers the lane takes per
 *            replay (calls; for TRR_LANE_WAIT the signals waited for)
 *   rc       the launch's cudaError_t; stack, pystack, stream, times: the launch's
 *   dtype    TRR_NONE */
#define TRR_LANES(X)                                                           \
    X(SEND, "send")                                                            \
    X(RECV, "recv")                                                            \
    X(SIGNAL, "signal")                                                        \
    X(WAIT, "wait")                                                            \
    X(COLL, "coll")
#define TRR_LANE_ENUM_(id, name) TRR_LANE_##id,
#define TRR_LANE_NAME_(id, name) name,
enum { TRR_LANES(TRR_LANE_ENUM_) TRR_LANE_N };
/* the lanes' names in the JSON traces ("lane"), by number */
static const char *const trr_lane_names[TRR_LANE_N] __attribute__((unused)) = {TRR_LANES(TRR_LANE_NAME_)};
#undef TRR_LANE_ENUM_
#undef TRR_LANE_NAME_
/* TRR_BLOB_GRAPH payload: a graph whose capture recorded NCCL calls, stored
 * when its capture ended (cudaStreamEndCapture); then its calls */
typedef struct {
    uint32_t index;                 /* the GraphLaunch records' extra: 0, 1, 2... */
    uint32_t ncalls;                /* trr_graph_call entries after this struct */
    uint64_t capture_id;            /* CUDA's capture sequence id */
    uint64_t stream;                /* the stream the capture began on */
    uint64_t graph;                 /* the cudaGraph_t */
    int32_t stack, pystack;         /* where the capture began (cudaStreamBeginCapture), -1 */
    int32_t end_stack, end_pystack; /* where it ended, -1 */
    uint32_t dropped;               /* captured calls beyond TRR_GRAPH_MAX_CALLS, not listed */
    int32_t base;                   /* cudaStreamBeginCaptureToGraph: the graph index whose
                                     * calls come first (listed again here), -1 */
} trr_graph;
#define TRR_GRAPH_MAX_CALLS 4096
/* one captured call, in capture order */
typedef struct {
    uint8_t op;                     /* TRR_OP_* */
    uint8_t lane;                   /* TRR_LANE_* */
    uint16_t pad;
    int32_t comm;                   /* comm slot */
    int32_t dtype, redop, root;     /* as in a record (root: the peer of a per-peer call) */
    int32_t stack, pystack;
    uint32_t pad2;
    uint64_t count, sendbuff, recvbuff, stream;
    uint64_t n;                     /* numbers it takes in its lane (WaitSignal: opCnt; else 1) */
    uint64_t extra;                 /* as in a record */
} trr_graph_call;

/* One device's memory in the ring header: the application's bytes, as the
 * trace's memory.devices counts them (shim/wrap/tr_memory.c: for a device with
 * a slot, its counters are the slot's own live, peak, allocs and frees),
 * so that a killed or still running rank's ring says them. `used` is
 * stored last (release) when the slot is claimed for `device`; pinned host
 * memory is not device memory (not here). */
#define TRR_MEM_DEVICES 8
typedef struct {
    uint32_t used;                  /* atomic: 1 once device is set */
    int32_t device;
    uint64_t live, peak;            /* atomics: bytes */
    uint64_t allocs, frees;         /* atomics */
    uint64_t peak_ns;               /* atomic: CLOCK_MONOTONIC when the peak was last raised */
    uint64_t failures;              /* atomic: failed device allocations on this device */
    /* the first failed allocation, valid once fail_ns != 0 (stored last, release) */
    uint64_t fail_bytes;            /* the size asked for */
    uint64_t fail_live;             /* the device's live bytes then */
    uint64_t fail_free, fail_total; /* cuMemGetInfo's, UINT64_MAX: unknown */
    uint64_t fail_ns;
    int32_t fail_stack, fail_pystack;   /* -1 */
    int32_t fail_code;              /* cudaError_t; CUresult for the driver's cu* calls (fail_api) */
    char fail_api[28];              /* "cudaMalloc", NUL-terminated */
} trr_mem;

typedef struct {
    char magic[8];                  /* TRSHIM_RING_MAGIC */
    uint32_t version;               /* TRSHIM_RING_VERSION */
    uint32_t header_bytes;          /* TRR_HEADER_BYTES */
    uint32_t record_bytes;          /* TRR_RECORD_BYTES */
    uint32_t comm_bytes;            /* TRR_COMM_BYTES */
    uint64_t capacity;              /* record slots (TRSHIM_RING) */
    uint32_t max_comms;             /* comm slots */
    uint32_t fp_interval;           /* first checkpoint interval (sequence numbers) */
    uint64_t off_comms, off_records, off_blobs, blob_bytes;
    uint64_t file_bytes;            /* the whole file */
    /* identity, written once before `magic` */
    int32_t pid;
    int32_t env_rank, world_size, local_rank;   /* -1 unset */
    double start_realtime;          /* Unix time (s) read together with start_mono_ns */
    uint64_t start_mono_ns;         /* CLOCK_MONOTONIC */
    char host[64];
    char job_id[256];               /* "" when no job variable was set */
    char job_source[32];            /* variable name, "" */
    char rank_source[32];           /* variable name, "" */
    char trshim_version[16];
    uint32_t stack_depth;           /* TRSHIM_STACK_DEPTH */
    uint32_t pad0;
    /* live, updated in place */
    uint64_t head;                  /* atomic: records handed out = index of the next one */
    uint32_t ncomms;                /* atomic: comm slots handed out */
    int32_t state;                  /* atomic: TRR_* */
    int32_t signo;                  /* the signal of TRR_SIGNALED, 0 */
    uint32_t writes;                /* atomic: JSON trace writes completed */
    uint64_t heartbeat_ns;          /* atomic: CLOCK_MONOTONIC, refreshed about once a second while alive */
    uint64_t end_ns;                /* CLOCK_MONOTONIC of the exit or signal, 0 */
    uint64_t blob_used;             /* atomic: bytes of committed blobs (a hint; readers scan) */
    uint64_t stacks_dropped;        /* atomic: stacks (native or Python) not stored (blob area full) */
    uint64_t comms_dropped;         /* atomic: communicators without a slot */
    /* Appended after version 1's first fields (a file of an older shim
     * holds zeros here: a reader takes hang_sec 0 as "not said"). What a
     * watcher reading the ring while the rank runs needs (tranalyze --watch,
     * docs/live.md): this rank's own hang watchdog, its pending GPU
     * operations (the completion poller's last pass) and its memory
     * (shim/ring/tr_ring_live.c; docs/trace-format.md "Live header fields"). */
    uint32_t hang_sec;              /* TRSHIM_HANG_SEC of this rank's watchdog, 0: off */
    uint32_t stalls;                /* atomic: hangs this rank's watchdog started */
    uint64_t stall_ns;              /* atomic: CLOCK_MONOTONIC when the watchdog found the current hang's
                                     * stuck call, 0: nothing stuck now (stored last, release) */
    uint64_t stall_rec;             /* the stuck call's record index + 1 (0: a communicator's init/end) */
    uint64_t stall_since_ns;        /* when that call began to wait (enqueued, or entered) */
    uint32_t pending;               /* atomic: GPU operations tracked, not complete at the poller's last pass */
    uint32_t pad2;
    uint64_t pending_since_ns;      /* atomic: enqueue time (exit_ns) of the oldest of them, 0: none */
    uint64_t pass_ns;               /* atomic: CLOCK_MONOTONIC of the poller's last pass */
    trr_mem mem[TRR_MEM_DEVICES];   /* device memory, by device (the first TRR_MEM_DEVICES used) */
    uint64_t mem_devices_dropped;   /* atomic: devices used beyond TRR_MEM_DEVICES */
    /* Appended after the live fields (zeros in an older shim's file: nothing
     * said). What the trace folder could not take (docs/trace-format.md
     * "Lost to the folder"): file_records and file_comms are stored before
     * lost_errno (release). */
    uint32_t lost_errno;            /* atomic: the first error that kept something out of the folder (the ring
                                     * file could not grow, a trace write failed): ENOSPC, EDQUOT, EFBIG...; 0 */
    uint32_t file_comms;            /* comm slots [file_comms, max_comms) are in memory only; 0: none */
    uint64_t file_records;          /* record slots [file_records, capacity) are in memory only; 0: none */
} trr_header;

typedef struct {
    uint64_t stamp;                 /* atomic: record index + 1 once the entry fields are complete */
    uint32_t state;                 /* atomic: TRR_REC_* */
    uint8_t op, depth, capturing, gpu;   /* gpu atomic: TRR_GPU_* */
    int32_t comm;                   /* comm slot index, -1 */
    int32_t dtype, redop, root;     /* TRR_NONE when absent; root holds the peer of Send/Recv */
    int32_t stack;                  /* stack index (TRR_BLOB_STACK.index), -1 */
    int32_t tid, device, rc;
    uint32_t group;
    int32_t pystack;                /* Python stack index (TRR_BLOB_PYSTACK.index), -1 */
    uint64_t seq;                   /* atomic */
    uint64_t count, sendbuff, recvbuff, stream;
    uint64_t enter_ns, exit_ns;     /* exit_ns valid when state == RETURNED */
    uint64_t done_ns;               /* valid when gpu == DONE */
    uint64_t extra;                 /* by op: see TRR_EXTRA_CONFIG */
} trr_record;

typedef struct { uint64_t seq, hash; } trr_checkpoint;

typedef struct {
    uint32_t valid;                 /* atomic: 1 once the identity fields are written */
    int32_t kind;                   /* TRR_KIND_* */
    uint64_t id, parent_id;         /* parent_id meaningful when parent >= 0 */
    int32_t parent;                 /* slot of the parent, -1 */
    int32_t blocking;
    int32_t has_color, color, key;
    uint32_t group;
    uint64_t init_enter;
    int32_t init_stack;
    int32_t from_uid;               /* made from an ncclUniqueId (job identity) */
    /* live, atomics */
    int32_t size, rank, device;     /* -1 unknown */
    int32_t init_done, init_rc;
    int32_t end_kind;               /* TRR_END_* */
    uint64_t init_exit;
    uint64_t end_enter, end_exit;   /* end_exit 0: not returned */
    int32_t end_rc;
    uint32_t pad;
    uint64_t colls;                 /* collectives numbered */
    /* fingerprint of every collective's signature since init (see
     * docs/trace-format.md): fp_hash covers seq 1..fp_seq; checkpoints at
     * multiples of fp_step; when the array is full, every second one is
     * dropped and fp_step doubles (the same on every rank). */
    uint64_t fp_seq, fp_hash;
    uint32_t fp_step, ncheckpoints;
    trr_checkpoint checkpoints[TRR_COMM_CHECKPOINTS];
    /* ncclCommGrow (kind GROW): the hash of the ncclUniqueId it was grown
     * with, 0 when this member was not given it (an existing non-root) */
    uint64_t grow_uid;
    int32_t grow_ranks;             /* nRanks of the grow, 0 */
    /* live, atomics: ncclCommSuspend / ncclCommResume */
    int32_t suspended;              /* 1 after a successful suspend, 0 after a resume */
    uint32_t suspends;              /* suspend calls that succeeded */
    uint32_t pad1;
} trr_comm;

typedef struct {
    uint32_t kind;                  /* atomic: TRR_BLOB_*, stored last */
    uint32_t bytes;                 /* payload bytes after this header, a multiple of 8 */
} trr_blob;
/* TRR_BLOB_MODULE payload */
typedef struct {
    uint32_t index;                 /* 0, 1, 2... in order of appearance */
    uint32_t path_len;              /* bytes of path after this struct, NUL included */
    uint64_t base;                  /* load address (dl_phdr_info.dlpi_addr) */
    uint64_t lo, hi;                /* address range of its PT_LOAD segments */
    char build_id[48];              /* hex, "" when none */
    /* char path[path_len] */
} trr_module;
/* TRR_BLOB_STACK payload */
typedef struct {
    uint32_t index;                 /* the records' stack index */
    uint32_t n;                     /* frames */
    /* uint64_t ip[n]: return addresses, innermost first (the application's frame
     * first); the module of each is the trr_module whose [lo, hi) holds it */
} trr_stack;

/* TRR_BLOB_PYCODE payload: one Python code object (function), stored once,
 * before the first Python stack that uses it */
typedef struct {
    uint32_t index;                 /* the code index (trr_pyframe.code), 0, 1, 2... */
    int32_t firstlineno;            /* co_firstlineno */
    uint32_t file_len;              /* bytes of file after this struct, NUL included */
    uint32_t name_len;              /* bytes of qualname after file, NUL included */
    /* char file[file_len]: co_filename, UTF-8; then char qualname[name_len]:
     * co_qualname (3.10: co_name), UTF-8; then padding to 8 bytes */
} trr_pycode;
/* TRR_BLOB_PYSTACK payload */
typedef struct {
    uint32_t index;                 /* the records' pystack index */
    uint32_t n;                     /* frames */
    /* trr_pyframe frame[n], innermost first */
} trr_pystack;
/* TRR_BLOB_COLLCONFIG payload: one distinct ncclCollConfig_t (the fields
 * that matter for a diagnosis), stored once before the first record using it */
typedef struct {
    uint32_t index;                 /* (record.extra & 0xffffffff) - 1 */
    uint32_t is_null;               /* 1: config == NULL (the plain behaviour); 2: not NCCL's
                                     * magic (NCCL rejects the call; no field read) */
    int32_t min_ctas, max_ctas, nvls_ctas, cga_cluster_size;  /* INT32_MIN: unset */
    int32_t force_alg, cta_policy;  /* INT32_MIN: unset */
    uint64_t user_tag;              /* userProfilerTag, 0: none */
    uint32_t alg_len;               /* bytes of algSelection after this struct, NUL included; 0: unset */
    uint32_t pad;
    /* char alg[alg_len], then padding to 8 bytes */
} trr_collconfig;

/* TRR_BLOB_NCCLINFO payload: the loaded NCCL library, stored once at its
 * first use */
typedef struct {
    int32_t version;                /* ncclGetVersion, 0: unknown */
    uint32_t exports;               /* host functions (nccl*, not pnccl*) it exports */
    uint32_t path_len;              /* bytes of its path after this struct, NUL included */
    uint32_t unknown_len;           /* bytes after the path: the exported functions the
                                     * vocabulary does not know, NUL-separated, NUL-terminated */
    /* char path[path_len], char unknown[unknown_len], then padding to 8 bytes */
} trr_ncclinfo;

/* TRR_BLOB_CRASH payload: the fatal signal a thread of the process died
 * of (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT), filled in by the signal
 * handler itself (shim/stacks/tr_crash.c). One per ring, reserved (all zero) when
 * the shim starts recording, so that the handler stores into it without a
 * lock or an allocation; `state` says how far it got:
 *   0   no crash
 *   1   signo, code, addr, tid, time_ns, thread are valid
 *   2   and ip[0..n) (the native stack), message
 * (stores before `state`, release). `stack` is written afterwards by the
 * writer thread when it got to intern the same frames as TRR_BLOB_STACK
 * index `stack` (with the modules they need stored before it), -1 until
 * then; pystack likewise for a Python stack (TRR_BLOB_PYSTACK), -1. */
#define TRR_CRASH_FRAMES 64
#define TRR_CRASH_MESSAGE 512
typedef struct {
    uint32_t state;                 /* atomic, see above */
    int32_t signo;
    int32_t code;                   /* si_code */
    int32_t tid;                    /* the thread the signal was delivered to */
    uint64_t addr;                  /* si_addr of SIGSEGV/SIGBUS/SIGFPE/SIGILL; 0 otherwise */
    uint64_t time_ns;               /* CLOCK_MONOTONIC */
    int32_t sender;                 /* si_pid for a signal sent by a process (kill, abort: the process itself), 0 */
    uint32_t n;                     /* frames in ip[] */
    int32_t stack, pystack;         /* see above, -1 */
    char thread[16];                /* the thread's name (PR_GET_NAME), "" */
    uint64_t ip[TRR_CRASH_FRAMES];  /* innermost first: ip[0] is the faulting instruction's address + 1, so
                                     * that every frame reads as a return address; the modules as for stacks */
    char message[TRR_CRASH_MESSAGE];/* why it aborted, NUL-terminated, "" unknown: glibc's abort message
                                     * (assertion text), "uncaught C++ exception TYPE: what()" */
} trr_crash;

/* TRR_BLOB_ERROR payload: the first error of its kind the rank saw, stored
 * when the application's call (or the shim's own poller) saw it: the first
 * sticky CUDA error, the first asynchronous NCCL error of a communicator. */
enum { TRR_ERR_CUDA = 1,            /* code: cudaError_t */
       TRR_ERR_NCCL = 2 };          /* code: ncclResult_t */
typedef struct {
    int32_t kind;                   /* TRR_ERR_* */
    int32_t code;
    int32_t stack, pystack;         /* where the call that returned it was made, -1 (the poller) */
    int32_t tid, comm;              /* comm slot (NCCL), -1 */
    int32_t device;                 /* -1 unknown */
    uint32_t pad;
    uint64_t time_ns;               /* CLOCK_MONOTONIC */
    char api[48];                   /* the call that returned it ("cudaStreamSynchronize", "ncclCommGetAsyncError",
                                     * "poller: cudaEventQuery"), NUL-terminated */
    char name[48];                  /* the error's name ("cudaErrorIllegalAddress", "ncclRemoteError") */
} trr_error;

/* TRR_BLOB_PYEXC payload: the uncaught Python exception the process was
 * about to exit with (shim/stacks/python/tr_pyexit.c): read at CPython's "sys.excepthook"
 * audit event, which PyErr_Print raises before it prints the traceback.
 * One per ring, reserved (all zero) at activation in a Python process where
 * the shim's audit hook was registered, then filled in place: `state` 0
 * none, 1 being written, 2 valid (stores before it, release); a later event
 * (the interactive interpreter prints every error this way) overwrites it
 * and counts. Strings NUL-terminated UTF-8, "" unknown. */
#define TRR_PYEXC_TYPE 128
#define TRR_PYEXC_FILE 512
#define TRR_PYEXC_FUNCTION 256
typedef struct {
    uint32_t state;                 /* atomic, see above */
    int32_t line;                   /* the raise site's line, -1 unknown */
    int32_t tid;                    /* the thread that printed it */
    uint32_t count;                 /* "sys.excepthook" events seen; this is the last one's */
    uint64_t time_ns;               /* CLOCK_MONOTONIC */
    char type[TRR_PYEXC_TYPE];      /* the class's tp_name ("ValueError") */
    char message[TRR_CRASH_MESSAGE];/* str(args[0]) when the class prints its single str argument, else "" */
    char file[TRR_PYEXC_FILE];      /* the innermost traceback entry's co_filename */
    char function[TRR_PYEXC_FUNCTION]; /* its co_qualname (3.10: co_name) */
} trr_pyexc;

/* TRR_BLOB_PYROOTS payload: the interpreter's install folders (shim/stacks/python/tr_pyroots.c),
 * stored once per process by the writer thread soon after activation */
typedef struct {
    uint32_t n;                     /* folders */
    uint32_t text_len;              /* bytes after this struct: n entries, each a kind byte ('s' the
                                     * standard library, 'p' installed distributions, 'e' an editable
                                     * install's source tree) then an absolute path, NUL-terminated;
                                     * then padding to 8 bytes */
} trr_pyroots;

typedef struct {
    uint32_t code;                  /* trr_pycode.index */
    int32_t line;                   /* source line, -1 unknown */
} trr_pyframe;

_Static_assert(sizeof(trr_header) <= TRR_HEADER_BYTES, "ring header fits its page");
_Static_assert(sizeof(trr_mem) == 136, "the memory slot has no implicit padding");
_Static_assert(sizeof(trr_record) == TRR_RECORD_BYTES, "records are 128 bytes");
_Static_assert(sizeof(trr_comm) <= TRR_COMM_BYTES, "comm slots fit");
_Static_assert(sizeof(trr_pycode) == 16 && sizeof(trr_pystack) == 8 && sizeof(trr_pyframe) == 8,
               "Python blobs have no implicit padding");
_Static_assert(sizeof(trr_graph) == 56 && sizeof(trr_graph_call) == 80, "graph blobs have no implicit padding");
_Static_assert(sizeof(trr_crash) == 64 + 8 * TRR_CRASH_FRAMES + TRR_CRASH_MESSAGE && sizeof(trr_error) == 136,
               "crash and error blobs have no implicit padding");
_Static_assert(sizeof(trr_pyexc) == 24 + TRR_PYEXC_TYPE + TRR_CRASH_MESSAGE + TRR_PYEXC_FILE + TRR_PYEXC_FUNCTION,
               "the Python exception blob has no implicit padding");
_Static_assert(sizeof(trr_pyroots) == 8, "the Python roots blob has no implicit padding");
_Static_assert(sizeof(trr_collconfig) == 48 && sizeof(trr_ncclinfo) == 16, "config and NCCL blobs have no implicit padding");

#endif
