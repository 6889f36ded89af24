/* tranalyze's model: what the traces say, once read (the types of a call,
 * a communicator, a trace, the job's communicators, the analysis), and the
 * helpers of model.c.
 * analyzer/ in folders, one per stage of the pipeline, lowest first; a file
 * calls only into its own folder or a lower one, and into no file that
 * calls it back (tests analyzer-folder-order, analyzer-no-call-circles:
 * tests/common/callgraph.py). Each folder has one boundary header, the only
 * one of its headers a file outside it includes (analyzer-boundaries:
 * tests/common/boundaries.py); the folder's other headers are its parts (the
 * boundary includes them) or private (_int.h, or their first comment says).
 * Includes: a file names its own folder's headers by name, any other header
 * by its path below analyzer/ (-I analyzer), e.g. "model/ta_model.h".
 *   model/     ta_model.h (this: the model; model.c: strings, names, texts,
 *              interning), its parts ta_seq.h (seq.c: per-seq tables, looked
 *              up: a comm's call at seq s) and ta_esc.h (esc.c: the traces'
 *              strings escaped as each output format writes them)
 *   site/      ta_site.h: pystack.c (Python call sites), pyroots.c (their
 *              install folders, folding), symbolize.c (libdw) or
 *              symbolize_plain.c (without), replay.c (a replayed call named:
 *              replay N of graph G, captured at, launched at)
 *   load/      ta_load.h: load.c (files, parsing: cJSON, 2 threads;
 *              validation, job grouping), load_files.c (the inputs found and
 *              opened), load_fields.c (load_int.h: fields, sections),
 *              load_env.c (a trace's "system" and "env_changes"),
 *              load_graphs.c (its "graphs"), calls.c (ta_calls.h: the "calls"
 *              array, a dedicated scanner; checks.c: "checks"; packed.c:
 *              packed rows; scan.c, scan_int.h: the scanner's rows), crash.c
 *              (ta_crash.h: a rank's crash, errors, Python exception),
 *              graphs.c (CUDA graph launches replaced by the calls they
 *              replay; the job's graphs identified across ranks), aborted.c
 *              (operations an abort released),
 *              budget.c (--max-calls), load_bounds.c (ta_bounds.h: places
 *              bounded by the input's size);
 *     ring/    ta_ring.h: ring files, ring.c (read and checked: header,
 *              slots, records), ring_blobs.c (the blob area), ring_io.c
 *              (reads, notes, strings), ring_trace.c (their traces, rings
 *              next to JSON traces), ring_graph.c (their CUDA graphs and
 *              launches), ring_mem.c (the header's device memory);
 *              ring_int.h (their internals)
 *   align/     ta_align.h: align.c (communicator table, per-seq tables built,
 *              p2p matching, completion simulation: what could never finish,
 *              ring windows); its part ta_clock.h (clocks.c: every rank's
 *              clock put on one, from what the collectives prove)
 *   findings/  ta_finding.h: the findings, findings.c (constructors,
 *              messages), members.c, diverge.c, rootcause.c and hang_sides.c
 *              (ta_hang.h: the hang analysis); its parts ta_kinds.h (the
 *              table of finding kinds, kinds.c, and each kind's detector and
 *              writers: kind_*.c, mispair.c, fingerprint.c, nan.c with
 *              nan_event.c, nan_out.c: nan_int.h, straggler.c,
 *              graph_launches.c), ta_jw.h (jw.c: JSON writing: values,
 *              calls, sites, stacks), ta_tx.h (tx.c: text and Markdown
 *              writing: a finding's heading, sides), ta_crash_out.h
 *              (crash_out.c: the rank that died, said; aborted_out.c)
 *   report/    ta_out.h: out_json.c (--json; ta_env.h: out_env.c, the
 *              environment; out_clocks.c), out_text.c (text), out_md.c
 *              (--markdown, sized to fit: out_md_int.h, out_md_text.c,
 *              out_md_env.c), out_timeline.c (--timeline), out_html.c
 *              (--html), out_reports.c and out_file.c (the files written),
 *              anon.c (--anonymize)
 *   watch/     ta_watch.h: watch.c, watch_ring.c (tranalyze --watch)
 *   main.c     options, the order of the phases
 * Traces are parsed one file at a time with cJSON and converted into the
 * compact structs below; the cJSON tree is freed at once. */
#ifndef TA_MODEL_H
#define TA_MODEL_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "trshim/nccl_calls.h"

#define TA_NULL64 INT64_MIN
#define TA_VERSION "0.1.0"

/* ---- operations, types --------------------------------------------------- */
/* the vocabulary's operations (include/trshim/nccl_calls.h), in its order */
#define TA_OP_ENUM_(suffix, name, flags, alias) OP_##suffix = TR_OP_##suffix,
enum { TR_NCCL_OPS(TA_OP_ENUM_) OP_N = TR_OP_N };
#undef TA_OP_ENUM_
extern const char *const ta_op_names[OP_N];
#define TA_OP_FLAGS_(suffix, name, flags, alias) flags,
static const unsigned char ta_op_flag_table[OP_N] = {TR_NCCL_OPS(TA_OP_FLAGS_)};
#undef TA_OP_FLAGS_
#define TA_OP_ALIAS_(suffix, name, flags, alias) OP_##alias,
static const unsigned char ta_op_alias_table[OP_N] = {TR_NCCL_OPS(TA_OP_ALIAS_)};
#undef TA_OP_ALIAS_
int ta_op_parse(const char *s);
static inline int ta_op_has(int op, int flag) { return op >= 0 && op < OP_N && (ta_op_flag_table[op] & flag); }
static inline int ta_op_is_p2p(int op) { return ta_op_has(op, TR_OPF_P2P); }
static inline int ta_op_is_coll(int op) { return ta_op_has(op, TR_OPF_COLL); }
static inline int ta_op_is_group(int op) { return ta_op_has(op, TR_OPF_GROUP); }
static inline int ta_op_is_onesided(int op) { return ta_op_has(op, TR_OPF_ONESIDED); }
static inline int ta_op_sends(int op) { return ta_op_has(op, TR_OPF_SENDS); }
static inline int ta_op_rooted(int op) { return ta_op_has(op, TR_OPF_ROOTED); }
static inline int ta_op_reducing(int op) { return ta_op_has(op, TR_OPF_REDUCING); }
/* the operation a call is the same as on the wire (Bcast is Broadcast) */
static inline int ta_op_norm(int op) { return op >= 0 && op < OP_N ? ta_op_alias_table[op] : op; }

/* element types and reduction operations: none, those of nccl_calls.h's tables, then
 * "invalid(N)" and "premulsum(N)" */
#define TA_DT_ID_(suffix, name, bytes, kind) DT_##suffix,
enum { DT_NONE, TR_NCCL_DTYPES(TA_DT_ID_) DT_INVALID, DT_N };
#undef TA_DT_ID_
extern const char *const ta_dtype_names[DT_N];
int ta_dtype_parse(const char *s);       /* -1 unknown */
int ta_dtype_size(int dt);
int ta_dtype_is_float(int dt);   /* a floating-point type (the table's FLOAT) */
#define TA_RO_ID_(suffix, name) RO_##suffix,
enum { RO_NONE, TR_NCCL_REDOPS(TA_RO_ID_) RO_PREMULSUM, RO_N };
#undef TA_RO_ID_
extern const char *const ta_redop_names[RO_N];
int ta_redop_parse(const char *s);

/* ---- one NCCL call, compact (64 bytes) ------------------------------------- */
/* completion on the GPU (trace "gpu" / ring record gpu) */
/* GPU_ABORTED only as read (the values are the ring's TRR_GPU_*): ta_aborts_resolve
 * makes it GPU_PENDING, an operation its communicator's abort released without completing */
enum { GPU_UNTRACKED, GPU_PENDING, GPU_DONE, GPU_ERROR, GPU_ABORTED };
/* The places of one communicator: its size, a member's rank, a grow's size.
 * The largest jobs have ~100,000 ranks; a damaged trace that claims 16
 * million places would cost every per-place table of the analysis 16
 * million entries. */
#define TA_COMM_PLACES_MAX (1 << 20)

typedef struct {
    int64_t count;
    int64_t enter_ns;
    int64_t exit_ns;      /* TA_NULL64: had not returned */
    int64_t done_ns;      /* completed on the GPU (gpu == GPU_DONE), else TA_NULL64 */
    uint32_t seq;
    int32_t comm;         /* index into the rank's comms, -1 */
    int32_t stack;        /* index into the rank's stacks, -1 */
    int32_t rp;           /* root (rooted collectives) or peer (send/recv), -1 */
    uint32_t group;
    int32_t pystack;      /* index into the rank's pystacks, -1 (none, or an older shim) */
    int16_t rc;           /* INT16_MIN: null */
    uint8_t op, dtype, redop, stream;
    uint8_t gpu;          /* GPU_*: GPU_UNTRACKED for traces without completion */
    uint8_t xf;           /* XF_*: more about the call in the trace's callx (ta_callx_of) */
} ta_call;
_Static_assert(sizeof(ta_call) == 64, "ta_call stays 64 bytes");
/* the call returned an error (ncclSuccess 0 and ncclInProgress 7, a nonblocking
 * communicator's, are not; INT16_MIN: it had not returned) */
static inline int ta_rc_failed(int16_t rc) { return rc != INT16_MIN && rc != 0 && rc != 7; }

/* what a few calls have besides (trace "config"/"signal", ring record.extra;
 * CUDA graph replays), kept aside, sorted by call, so that every call stays
 * 64 bytes */
enum { XF_CONFIG = 1,      /* a collective issued through its *Config entry point (ncclAllReduceConfig...) */
       XF_SIGNAL = 2,      /* PutSignal/Signal/WaitSignal: sigIdx and context known */
       XF_REPLAY = 4,      /* replayed by a CUDA graph launch (graphs.c made it from the launch and the
                              graph's captured call): graph, replay, node, the launch's site */
       XF_LAUNCH = 8 };    /* a GraphLaunch entry as read (one lane of one launch): graph, replay, lane;
                              graphs.c replaces it by the calls it replays, none is left after loading */
typedef struct {
    int64_t call;         /* index into the trace's calls */
    int32_t cfg;          /* XF_CONFIG: index into the trace's cfgs, -1 not stored (or damaged) */
    int32_t sig_ctx;      /* XF_SIGNAL */
    int64_t sig_idx;      /* XF_SIGNAL */
    int64_t replay;       /* XF_REPLAY, XF_LAUNCH: the replay number (launches of that executable graph, 1...) */
    int32_t graph;        /* XF_REPLAY, XF_LAUNCH: index into the trace's graphs */
    int32_t node;         /* XF_REPLAY: index of the call in its graph's calls; XF_LAUNCH: the lane (TRR_LANE_*) */
    int32_t lstack, lpystack;   /* XF_REPLAY: where the launch was made (stack, pystack), -1 */
} ta_callx;

/* CUDA graphs (trace "graphs", ring GRAPH blobs): the calls a capture
 * recorded, replayed by each launch (GraphLaunch entries) with no host call */
int ta_lane_parse(const char *s);            /* -1 unknown */
int ta_lane_of(int op);                      /* the lane an operation's calls are numbered in, -1: none */

typedef struct {
    int64_t count;
    uint64_t n;           /* numbers it takes in its lane per replay (WaitSignal: the signals it waits for; else 1) */
    int32_t comm;         /* index into the trace's comms; -1: none usable (another device's, or unknown) */
    int32_t rp;           /* root (rooted collectives) or peer (per-peer lanes), -1 */
    int32_t stack, pystack;   /* where the call was made during the capture, -1 */
    int32_t cfg;          /* XF_CONFIG (a ring's): as in ta_callx */
    int32_t sig_ctx;      /* XF_SIGNAL (a ring's) */
    int64_t sig_idx;
    uint8_t op, dtype, redop, lane;   /* lane: TRR_LANE_* */
    uint8_t xf;           /* XF_CONFIG, XF_SIGNAL */
} ta_gcall;
typedef struct {
    int valid;            /* 0: absent or damaged: its launches replay nothing known */
    int stack, pystack;   /* where the capture began (cudaStreamBeginCapture), -1 */
    int end_stack, end_pystack;   /* where it ended, -1 */
    int base;             /* cudaStreamBeginCaptureToGraph into graph `base` (its calls come first), -1 */
    int64_t dropped;      /* captured calls past the ones listed (their lanes' numbering is still exact) */
    ta_gcall *calls; int ncalls;
    /* derived (graphs.c): the graph's identity in the job: index into ta_an.graphs, -1 */
    int gid;
} ta_graph;
void ta_graphs_free(ta_graph *g, int n);     /* and their calls */

/* one ncclCollConfig_t of a *Config call (trace "coll_configs", ring COLLCONFIG blobs) */
#define TA_CFG_UNSET INT32_MIN
enum { CFG_SET, CFG_NULL, CFG_INVALID, CFG_UNKNOWN };   /* state: fields below, NULL pointer, bad magic, not known */
typedef struct {
    int state;            /* CFG_* */
    int32_t min_ctas, max_ctas, nvls_ctas, cga_cluster_size, force_alg, cta_policy;   /* TA_CFG_UNSET */
    uint64_t user_tag;    /* 0: none */
    const char *alg;      /* algSelection (interned, safe for any output), NULL: unset */
} ta_collcfg;

typedef struct {
    uint64_t id, parent;
    int has_parent;
    char kind[20];
    int size;             /* -1 null */
    int rank;             /* place in the communicator */
    int device;
    int64_t init_enter, init_exit, init_rc;   /* exit/rc TA_NULL64 when null */
    int init_stack;
    int init_pystack;     /* -1 */
    char end_kind[12];    /* "" when null */
    int64_t end_enter, end_exit;   /* TA_NULL64 when null */
    int64_t colls;
    /* fingerprint of every collective since init (trace "fingerprint"; absent: nckp 0, fp_seq 0) */
    uint64_t fp_seq, fp_hash;
    uint32_t fp_step;
    int nckp;
    struct ta_ckpt { uint64_t seq, hash; } *ckp;   /* ascending seq */
    /* ncclCommGrow (kind "Grow"): the uniqueId's hash (0: this member was not given it, an existing
     * non-root), the ranks of the grown communicator (0: not a grow); ncclCommSuspend/Resume */
    uint64_t grow_uid;
    int grow_ranks;
    int suspended;        /* suspended at the trace's last write (no successful resume since) */
    int64_t suspends;     /* successful suspends */
    uint32_t first_seq;   /* lowest seq of this comm kept in calls (0: none); below it, when the
                             trace lost records (ring_lost > 0), calls are unknown, not missing */
    /* derived (align.c): the collectives kept, by seq, indexed from the lowest
     * kept so that a window far into a long job costs what its calls cost */
    int g;                /* global comm index */
    int family;           /* position of this comm in the rank's comms list */
    uint32_t nseq;        /* highest seq of a collective kept (0: none) */
    uint32_t seq0;        /* lowest one */
    uint32_t nkept;       /* collectives kept (repeated seqs included) */
    int32_t *byseq;       /* call index of seq s at [s - seq0], -1 hole; NULL when the seqs kept are
                             too sparse for a table (a damaged or crafted trace): then sparse */
    struct ta_seqcall { uint32_t seq; int32_t call; } *sparse;   /* ascending seq; nsparse of them */
    uint32_t nsparse;
} ta_comm;

typedef struct {
    int module;           /* global module id, -1 */
    uint64_t offset;
    const char *symbol;   /* NULL */
    int64_t symbol_offset;
} ta_frame;

typedef struct {
    int nframes;
    ta_frame *frames;
} ta_stack;

/* Python call stacks (trace "pycodes"/"pystacks", ring PYCODE/PYSTACK blobs) */
typedef struct {
    const char *file;     /* co_filename as recorded (interned, made safe for any output) */
    const char *base;     /* its last path component (interned) */
    const char *name;     /* qualified name (interned) */
    int firstline;
    int folded;           /* TA_PY_USER (0), TA_PY_LIB or TA_PY_STDLIB (ta_py_class, pyroots.c) */
} ta_pycode;
/* Python's install folders the shim recorded once per process (trace
 * python.roots, ring PYROOTS blob; pyroots.c) */
enum { TA_ROOT_STDLIB = 1, TA_ROOT_SITE, TA_ROOT_EDITABLE };
typedef struct { const char *dir; int kind; } ta_pyroot;    /* dir interned, absolute, no trailing '/' */
typedef struct { ta_pyroot *v; int n; int present; } ta_pyroots;   /* present: recorded (maybe none) */
typedef struct { int32_t code, line; } ta_pyframe;   /* line < 1: unknown */
typedef struct {
    int nframes;          /* 0: none (a damaged stack is kept empty) */
    ta_pyframe *frames;   /* innermost first */
    /* derived (ta_py_prepare) */
    int site;             /* the frame that names the call site: the innermost not folded, else 0 */
    int nuser;            /* frames not folded; 0: every frame is folded (then all are compared) */
    uint64_t key;         /* hash of the compared frames (file name, function, line) */
} ta_pystack;

typedef struct {
    int device;
    int64_t live, peak, allocs, frees, peak_ns;
    int peak_stack;
    int peak_pystack;     /* -1 */
    int has_peak_after;
    uint64_t peak_after_comm;
    int64_t peak_after_seq;
} ta_memdev;

/* one NaN/Inf check of a buffer (trace "checks") */
enum { CK_CLEAN, CK_NONFINITE, CK_NOT_CHECKED, CK_PENDING };
enum { BUF_INPUT, BUF_OUTPUT };
extern const char *const ta_ck_status_names[4];
typedef struct {
    int64_t call;            /* index into the trace's calls (as kept) */
    int64_t nan, inf;
    int64_t first;           /* TA_NULL64: null */
    int64_t checked, elems;
    const char *reason;      /* interned; NULL */
    uint8_t buffer, status;
    uint8_t first_kind;      /* 0 null, 1 nan, 2 inf */
    uint8_t pad;
} ta_check;                  /* a check, whole (ta_check_at) */
/* as kept: 16 bytes (a trace has up to two per call, nearly all clean);
 * the rest of a check that is not clean and whole is in ckdet[det] */
#define TA_CK_NODET UINT32_MAX
typedef struct {
    uint32_t call;
    uint32_t det;            /* index into ckdet; TA_CK_NODET: clean, elems_checked == elems == .elems */
    uint32_t elems;
    uint8_t buffer, status, first_kind, pad;
} ta_ckc;
typedef struct { int64_t nan, inf, first, checked, elems; const char *reason; } ta_ckdet;
/* nancheck.mode of a trace */
enum { NM_ABSENT, NM_OFF, NM_OUTPUT, NM_ALL, NM_OTHER };
extern const char *const ta_nm_names[5];

typedef struct {
    char api[32];
    int device;
    int64_t bytes, live, free_bytes, total_bytes, t_ns;
    char error[48];
    int64_t error_code;
    int stack;
    int pystack;          /* -1 */
} ta_memfail;

/* How a rank's process ended, from the trace's last write. Kept separate
 * from the text so that a later source (traces that survive SIGKILL) can add
 * a state without changing the readers. */
enum { END_EXITED, END_SIGNAL, END_COMM_END, END_SNAPSHOT, END_NO_TRACE, END_UNKNOWN, END_KILLED, END_HANG };

/* trace "env_changes": a later communicator created in another environment */
typedef struct {
    char *comm;               /* its id as written, NULL */
    char **set; int nset;     /* "NAME=value" */
    char **unset; int nunset; /* names */
} ta_envchg;
/* trace "system".gpus */
/* The rank that died (crash.c): the fatal signal the shim's handler
 * captured (trace "crash", ring CRASH blob), and the first CUDA / NCCL
 * errors it saw (trace "errors", ring ERROR blobs). Frames are copies. */
typedef struct {
    int signo, code, tid, sender;
    int has_addr;
    uint64_t addr;
    char thread[17];
    char *message;        /* NULL */
    ta_stack stack;       /* nframes 0: unknown */
    int pystack;          /* the crashing thread's Python stack (the trace's pystacks), -1 */
} ta_crash;
typedef struct {
    int kind;             /* 1 CUDA, 2 NCCL (TRR_ERR_*) */
    int code, tid, device;  /* device -1 */
    char *name, *api;
    int has_comm;
    uint64_t comm;
    int64_t time_ns;
    ta_stack stack;       /* where the call was made; nframes 0: unknown */
} ta_error;
/* The uncaught Python exception a rank exited with (trace "python_exception",
 * ring PYEXC blob): strings as recorded, NULL unknown */
typedef struct ta_pyexc {
    char *type, *message, *file, *function;
    int line;             /* -1 unknown */
    int tid;
} ta_pyexc;

typedef struct { int device; char *name, *uuid, *pci; } ta_gpu;
/* trace "system" (optional): strings as written, NULL when absent */
typedef struct {
    int present;
    char *nccl, *cuda_runtime, *cuda_driver, *kernel_driver;
    ta_gpu *gpus; int ngpus;
    char **packages; int npackages;      /* "name=version" */
    char **launchers; int nlaunchers;    /* "name" or "name=job id" */
} ta_system;
extern const char *const ta_end_names[];

typedef struct {
    /* identity */
    const char *file;
    char *job_id, *job_source, *host, *rank_source;
    int rank, world_size, local_rank, device;
    int64_t pid;
    double start_time, write_time, clock_real;
    int64_t clock_mono;
    /* the clock sample of the trace's last write (clock_write; absent in older traces: has_clock_w 0) */
    double clock_real_w;
    int64_t clock_mono_w;
    int has_clock_w;
    /* clocks.c: this trace's place on the job's one clock (common = CLOCK_MONOTONIC + clk_off_ns);
     * clk_set 0 until then: its own clock sample */
    int64_t clk_off_ns;
    int clk_dom, clk_set;
    int end_state, end_signal, end_in_call;
    char *cmdline;        /* joined with spaces */
    char **env; int nenv; /* "NAME=value" */
    ta_envchg *envchg; int nenvchg;      /* env_changes (load_env.c) */
    ta_system sys;                       /* system (load_env.c) */
    int64_t v_cuda_rt, v_cuda_drv, v_nccl;
    char *v_trshim;
    int64_t dropped;
    /* the ring (trace "ring", or the ring file itself) */
    int from_ring;        /* calls, comms and stacks were read from the ring file (the process was
                             killed, or the ring holds calls newer than the JSON's last write) */
    char *ring_file;      /* its path, NULL */
    int64_t ring_capacity, ring_lost;    /* records before the kept window (overwritten in the ring, or
                                            not loaded: unloaded): 0 none */
    int64_t unloaded;     /* oldest calls not loaded: past the call budget (budget.c) */
    /* what the trace folder could not take (the ring header's lost_errno, file_records, file_comms):
     * lost_folder records at the window's end were never in the ring file (newer than every call kept
     * after the folder filled: unknown, not missing), communicator slots from lost_comms_from on
     * neither (0: none); lost_errno the first error (ENOSPC...), 0 */
    int64_t lost_folder;
    int lost_errno, lost_comms_from;
    /* operations a communicator's abort released (ta_aborts_resolve): counted as not complete */
    int64_t aborted_ops;
    int64_t abort_enter;  /* the first abort (ncclCommAbort, Revoke) of a communicator, TA_NULL64 */
    int64_t aborted_oldest;   /* when the oldest released operation was enqueued (its exit_ns), TA_NULL64 */
    int64_t after_abort;      /* calls entered after that abort, left out (aborted.c) */
    int64_t heartbeat_ns; /* ring: last sign of life (CLOCK_MONOTONIC), TA_NULL64 */
    /* records */
    ta_comm *comms; int ncomms;
    ta_call *calls; int64_t ncalls;
    ta_stack *stacks; int nstacks;
    /* Python stacks (absent: 0, NULL); py_state: trace "python".state, NULL when absent (interned) */
    ta_pycode *pycodes; int npycodes;
    ta_pystack *pystacks; int npystacks;
    const char *py_state, *py_version, *py_detail;
    int64_t py_badref;    /* calls whose pystack is not in pystacks (noted) */
    ta_pyroots pyroots;   /* python.roots: not present in older traces (folding by folder names then) */
    ta_memdev *mdev; int nmdev;
    int64_t pinned_peak;
    ta_memfail *mfail; int nmfail;
    int64_t skipped_records;
    int64_t *call_raw;    /* kept call i was calls[call_raw[i]] of the file; NULL: the same index */
    ta_callx *callx; int64_t ncallx;     /* calls with XF_* set, ascending call */
    ta_collcfg *cfgs; int ncfgs;         /* the *Config calls' configs by index (trace "coll_configs") */
    int64_t cfg_badref;   /* calls naming a config the trace does not hold (noted) */
    ta_graph *graphs; int ngraphs;       /* CUDA graphs by the shim's index (trace "graphs", ring GRAPH blobs) */
    /* the loaded NCCL library (trace "nccl", ring NCCLINFO blob): has_nccl 0 when not known */
    int has_nccl;
    int64_t nccl_version; /* ncclGetVersion, 0 unknown */
    int64_t nccl_exports; /* host functions it exports, -1 unknown */
    char *nccl_lib;       /* path, NULL */
    const char **nccl_unknown; int nnccl_unknown;   /* exported functions the vocabulary does not know (interned) */
    int64_t nccl_unknown_more;                      /* more of them, not listed by the shim */
    /* NaN/Inf checks */
    int nan_mode;         /* NM_* */
    int nan_usable;       /* the checks were read (mode not off, check_fields and checks valid) */
    char *nan_engine;     /* NULL */
    char *nan_gpu_unused; /* NULL */
    int64_t nan_dropped;
    ta_ckc *checks; int64_t nchecks;     /* sorted by call, input first */
    ta_ckdet *ckdet; int64_t nckdet;
    int64_t skipped_checks;
    ta_crash *crash;                     /* crash.c: NULL none */
    ta_error *errs; int nerrs;
    struct ta_pyexc *pyexc;              /* crash.c: the uncaught Python exception it exited with, NULL */
    /* derived */
    int idx;              /* index in the analysed job's rank array */
} ta_trace;
/* each communicator's first_seq from the trace's calls (after they change: a cut, a graph expansion) */
void ta_first_seqs(ta_trace *t);

/* ---- messages about the input ---------------------------------------------- */
typedef struct {
    char *file;           /* NULL: about the job */
    char *text;
    int fatal;            /* the file was not used */
    int64_t cut;          /* a trace file that ends early (truncated, empty): its bytes; -1 otherwise */
} ta_note;

/* ---- warnings about the job's environment (not its input, not a finding) ----- */
typedef struct {
    char *kind;           /* "nccl_unknown_functions" */
    char *text;
    char *library;        /* the NCCL library (path), NULL */
    int64_t version;      /* its version code, 0 unknown */
    const char **functions; int nfunctions;
    int64_t functions_more;   /* not listed by the shim */
    int *ranks; int nranks;
} ta_warning;

/* ---- a trace write that failed (the shim's marker trshim.*.write-failed) ----- */
typedef struct {
    char *file;           /* the marker */
    char *job;
    char *host;           /* NULL: not given */
    char *error;          /* what failed, e.g. "No space left on device" (the marker's text, else strerror) */
    int rank;             /* -1: unknown */
    int err;              /* errno, 0 unknown */
    int64_t pid, bytes;   /* -1: not given */
    int empty;            /* an empty marker (the folder had no room for its line): job (as file names
                             write it), rank, host and pid are its name's */
} ta_wfail;

/* ---- global communicator table ------------------------------------------------ */
/* how the members' entry times were put on one clock (straggler.c; entry_spread): a TC_*
 * of ta_clock.h, whose names are ta_clock_method_names */
extern const char *const ta_clock_method_names[];
typedef struct {
    uint64_t id, parent;
    int has_parent;
    const char *kind;
    int size;                /* from traces; -1 unknown */
    int npos;                /* positions (max(size, max rank+1)) */
    int *member;             /* trace index at each position, -1 none */
    int *local;              /* that trace's local comm index */
    int family;
    /* the per-seq tables (sigbad, the replay's, nan.c's, straggler.c's) have one
     * entry per seq any member kept, index ta_gseq(): memory follows the calls
     * kept, not how far into the job they are */
    uint32_t minseq, maxseq; /* lowest and highest seq of a collective any member kept (0: none) */
    uint32_t nseqs;          /* entries */
    uint32_t *seqv;          /* the seq of each, ascending; NULL: every seq of minseq..maxseq */
    uint8_t *sigbad;         /* [nseqs]: 1 when the members' calls at that seq disagree */
    /* entry spread (last - first entry) of the collectives every member issued (straggler.c) */
    int64_t spread_n;        /* collectives measured; 0: none */
    int64_t spread_median_ns, spread_max_ns;
    uint32_t spread_max_seq;
    int spread_clock;        /* TC_* (ta_clock.h) */
} ta_gcomm;

typedef struct {
    const char *path;
    const char *build_id;
} ta_module;

/* a CUDA graph of the job (graphs.c): the same on every rank that captured
 * it (the same capture site, the same calls), named "G<index + 1>" */
typedef struct {
    uint64_t key;            /* hash of the capture site and the calls' signature (stable across runs) */
    uint64_t site;           /* hash of the capture site alone */
    int trace, index;        /* the first trace holding it (lowest rank), its index there */
} ta_jgraph;

/* ---- the analysis -------------------------------------------------------------- */
struct ta_finding;           /* ta_finding.h */
typedef struct ta_an {
    /* options */
    int json, markdown, full_stacks;
    double imbalance;            /* fraction above the median */
    int64_t imbalance_min;       /* bytes */
    int64_t straggler_ns;        /* --straggler-ms: least median lateness of a straggler */
    double straggler_frac;       /* --straggler-fraction: least lateness, as a fraction of the interval
                                    between the communicator's collectives */
    const char *job_wanted;
    uint64_t max_trace_bytes;    /* --max-trace-mb: a JSON trace larger than this is not read */
    int64_t max_calls;           /* --max-calls: the call budget of the whole job (budget.c), 0: none */
    /* a second reading (main.c): each trace's window widened back to the first call of
     * communicator `comm` numbered after `after` (a divergence the fingerprints placed
     * before the calls the budget kept) */
    struct ta_anchor { uint64_t comm; uint32_t after; } *anchors; int nanchors;
    const char **module_dirs; int nmodule_dirs;
    /* input */
    ta_trace **all; int nall;    /* every usable trace of every job */
    ta_trace **tr; int ntr;      /* traces of the analysed job, by rank */
    ta_note *notes; int nnotes;
    ta_warning *warns; int nwarns;
    char *job; int njobs;
    char **other_jobs; int nother_jobs;
    int world;
    int *missing_ranks; int nmissing;
    int *missing_wfail;          /* per missing rank: its write-failed marker (index into wfail), -1 */
    int *missing_cut;            /* per missing rank: the note of its trace file that ends early (truncated,
                                    empty; named trshim.<job>.r<rank>...: index into notes), -1 */
    int missing_unlisted;        /* ranks below the world size without a trace not in missing_ranks (the
                                    world size is far beyond the traces found: load.c) */
    ta_wfail *wfail; int nwfail; /* write-failed markers read (every job's) */
    int nfiles;
    /* model */
    ta_gcomm *gc; int ngc;
    ta_module *mods; int nmods;
    ta_jgraph *graphs; int ngraphs;   /* the job's CUDA graphs (graphs.c) */
    struct ta_p2pkey **p2p_idx; int64_t *p2p_n;   /* align.c: each trace's point-to-point calls, sorted */
    int64_t **coll_idx; int64_t *coll_n;          /* diverge.c: each trace's collectives in its order */
    uint8_t **never_done;        /* simulate.c, per trace, per call: 1 never completed at the head of its
                                    stream, 2 queued behind one that never did, 0 completed or not an operation */
    /* results */
    struct ta_finding *f; int nf;
    struct ta_clocks *clk;       /* clocks.c: how the ranks' clocks were put on one, NULL before */
    int *stuck;                  /* per trace: 1 when it waits on something */
    int *root;                   /* per trace: 1 when a root of the hang */
} ta_an;

/* model.c */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ta_note_add(ta_an *a, const char *file, int fatal, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* a trace file that ends early (bytes long: truncated, empty) and is skipped: a note that also
 * places it (ta_markers_place: the rank it names is shown as truncated, not as killed before a write) */
void ta_note_cut(ta_an *a, const char *file, int64_t bytes, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
const char *ta_intern(const char *s);
/* every interned string freed: once nothing holds one (the end of an analysis, main.c) */
void ta_intern_reset(void);
/* the notes and modules of an analysis freed (each stage frees what it made: ta_load_free...) */
void ta_model_free(ta_an *a);
int ta_module_intern(ta_an *a, const char *path, const char *build_id);
uint64_t ta_hash64(uint64_t h, uint64_t v);
int64_t ta_median64(int64_t *v, int64_t n);    /* median of v[0..n) (sorts v); n > 0 */
const char *ta_signame(int sig);
char *ta_end_text(const ta_an *a, const ta_trace *t);
char *ta_missing_text(const ta_an *a, int i);   /* missing rank i: "no trace" or "write failed (...)" */
char *ta_call_text(const ta_an *a, const ta_trace *t, int64_t ci);   /* "AllReduce #5 on comm 0x..." */
char *ta_call_sig(const ta_trace *t, int64_t ci);                    /* "AllReduce(16 x float32, sum)" */
const ta_callx *ta_callx_of(const ta_trace *t, int64_t ci);          /* the call's XF_* details, NULL */
const ta_collcfg *ta_call_cfg(const ta_trace *t, int64_t ci);        /* a *Config call's config, NULL: plain/unknown */
const char *ta_config_entry(int op);                                  /* "ncclAllReduceConfig", NULL */
char *ta_cfg_text(const ta_collcfg *c);                               /* "maxCTAs=4, algSelection=ring" */
int ta_cfg_equal(const ta_collcfg *x, const ta_collcfg *y);
char *ta_nccl_version_text(int64_t code);                             /* 23203 -> "2.32.3" */
int ta_comm_suspended(const ta_trace *t, int lc);                    /* lc is suspended on t */
/* " 2026-01-02 10:00:00 UTC" of monotonic time ns of trace t; "" when unknown */
void ta_wall_text(const ta_trace *t, int64_t ns, char *out, size_t cap);
char *ta_ranks_text(const int *r, int n);                            /* "0-3, 5" */
int ta_trace_of_rank(const ta_an *a, int rank);
uint64_t ta_hash_bytes(const char *s, size_t n);                     /* FNV-1a */
/* the value of variable name[0..nl) in t's env ("NAME=value"), NULL when unset */
const char *ta_env_value(const ta_trace *t, const char *name, size_t nl);                     /* index in a->tr (by rank), -1 */
void ta_ints_sort(int *v, int n);
int ta_last_call(const ta_trace *t, int64_t *out);                   /* last NCCL call (not group) */
double ta_wall(const ta_trace *t, int64_t ns);
int ta_comm_local(const ta_trace *t, int g);                         /* local comm index of g, -1 */
const char *ta_comm_name(const ta_an *a, int g);                     /* "0x..." */

/* a communicator family as a bit of a mask (families past 62 share the top bit) */
static inline uint64_t ta_fam_bit(int family) { return family < 63 ? 1ull << family : 1ull << 63; }

/* the folder's other parts: outside model/, this header is the one to include */
#include "ta_esc.h"
#include "ta_seq.h"

#endif
