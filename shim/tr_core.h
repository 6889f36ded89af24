/* Internal interfaces of libtrshim.so shared by its parts, and the layers
 * the parts form. A file calls into its own layer or the layers below it,
 * never up: no two files call each other, directly or through others
 * (tests/shim's shim-no-call-circles checks it on the objects with
 * tests/common/callgraph.py). Upward needs go through state a lower layer
 * owns: the wrappers and the watchdog ask for a trace write by posting to
 * the ground's write queue (tr_write_request), which the writer thread
 * serves; the first recorded call activates the shim through tr_enter
 * (tr_init.h), which the wrappers, above the init room, call.
 *
 *  7 entry    what the application calls: the wrappers, tr_nccl.c
 *             (collectives, send/recv, one-sided, groups; and the link-time
 *             check that every WRAP row of trshim/nccl_calls.h has a
 *             wrapper), tr_lifecycle.c (communicators' init, split, shrink,
 *             grow, suspend, end), tr_memory.c (allocations), tr_graph_api.c (CUDA
 *             graphs), tr_sync.c (the application's synchronizations); tr_dlsym.c and
 *             tr_entry.c (dlsym, dlvsym and the CUDA entry-point lookups,
 *             which hand out the wrappers; they use the ground only)
 *  6 init     tr_init.c: activation on the first recorded call (trace
 *             folder, ring, Python stacks, completion poller, writer, exit
 *             handler), tr_enter (tr_init.h)
 *  5 writer   tr_writer.c: trace files from every part's JSON, the signal
 *             handlers, the exit write; it serves the write queue
 *  4 JSON     tr_calls_json.c ("calls"), tr_comm_json.c ("comms"),
 *             tr_memjson.c ("memory")
 *  3 parts    what the wrappers keep and the writer reads: tr_comm.c
 *             (communicators, groups, the last collective), tr_envsnap.c
 *             (the environment each communicator was created in),
 *             tr_sysinfo.c (versions, devices, frameworks, launchers),
 *             tr_vocab.c
 *             (operation names, the loaded NCCL), tr_nccl_config.c,
 *             tr_nancheck.c over tr_nanresults.c, tr_nanscan.c,
 *             tr_nangpu.c (NaN/Inf checks), tr_complete.c over
 *             tr_watchdog.c (GPU completion, hang watchdog), tr_memcount.c
 *             and tr_memtable.c (memory accounting)
 *  2 stacks   tr_stack.c, tr_symbols.c (modules, symbols, JSON of
 *             stacks); tr_pystack.c over tr_python.c, tr_python_init.c,
 *             tr_python_read.c (Python stacks), tr_pyroots.c (the
 *             interpreter's install folders; the writer collects them) and
 *             tr_pyexit.c (the uncaught Python exception, an audit hook)
 *  1 ring     tr_ring.c: the ring file (tr_ring.h), its records and
 *             communicators; tr_ring_blobs.c over it: the blob area;
 *             tr_ring_live.c over it: the header's live fields (hang,
 *             pending operations, device memory)
 *  0 ground   tr_core.c (settings, process, clocks, per-thread depth,
 *             warnings, threads, the write queue), tr_json.c (streaming JSON),
 *             tr_redact.c (secrets kept off disk),
 *             tr_hash.h, tr_files.c (the trace folder, safe files, the host
 *             name in file names), tr_real.c over tr_dlreal.c, tr_dynsym.c
 *             (the real function behind each wrapper), tr_cuda.c (every
 *             optional CUDA runtime and driver function, asked without
 *             disturbing the application's error state: tr_cuda.h),
 *             tr_modules.c (ELF modules: build ids, paths)
 *
 * Everything is hidden; only the wrapped API functions, and the lookups
 * that could bypass them, are exported (shim/trshim.map). Internal names
 * start with tr_. */
#ifndef TR_CORE_H
#define TR_CORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

#include "tr_json.h"

#define TR_API __attribute__((visibility("default")))
#define TR_VERSION "0.1.0"

/* ---- settings (tr_core.c) -------------------------------------------------
 * Read once from the environment at start-up; a bad value gives one
 * "trshim:" line and the default. */
typedef struct {
    int enabled;              /* TRSHIM=0 turns the shim into pure forwarding */
    char dir[1024];           /* TRSHIM_DIR, default "./traces" */
    int stack_depth;          /* TRSHIM_STACK_DEPTH, frames kept, default 64 (0: no stacks) */
    int pystack_depth;        /* TRSHIM_PYSTACK_DEPTH, Python frames kept, default 64 (0: no Python stacks) */
    uint64_t ring;            /* TRSHIM_RING, record slots of the ring file (newest kept), default 131072 */
    int hang_sec;             /* TRSHIM_HANG_SEC, watchdog: seconds a collective may stay incomplete, 0 off, default 300 */
    int snapshot_signal;      /* TRSHIM_SNAPSHOT_SIGNAL: signal that writes the trace and goes on (0: none), default SIGUSR1 */
    int completion;           /* TRSHIM_COMPLETION=0 turns off GPU completion events, default 1 */
    int keep_ring;            /* TRSHIM_KEEP_RING=1 keeps the ring file after a clean exit wrote the traces, default 0 */
    int quiet;                /* TRSHIM_QUIET=1: no "recording to" line at activation, default 0 */
    int nancheck;             /* TRSHIM_NANCHECK: TR_NAN_OFF, TR_NAN_OUTPUT, TR_NAN_ALL (default) */
    int nancheck_engine;      /* TRSHIM_NANCHECK_ENGINE: TR_NAN_ENGINE_AUTO (default), _HOST, _GPU */
    uint64_t nancheck_max_bytes;   /* TRSHIM_NANCHECK_MAX_MB, MiB checked per buffer, default 64 */
    uint64_t nancheck_pool_bytes;  /* TRSHIM_NANCHECK_POOL_MB, pinned staging, default 4 x max */
} tr_settings;

enum { TR_NAN_OFF, TR_NAN_OUTPUT, TR_NAN_ALL };
enum { TR_NAN_ENGINE_AUTO, TR_NAN_ENGINE_HOST, TR_NAN_ENGINE_GPU };

const tr_settings *tr_cfg(void);

/* What the process learnt at start-up (constructor, from the environment and
 * the clocks): read-only afterwards. job_id is "" and the sources NULL when
 * unset. */
typedef struct {
    double start_realtime;        /* Unix time at start (s) */
    uint64_t start_mono_ns;       /* CLOCK_MONOTONIC read together with it */
    int env_rank;                 /* -1 unset */
    const char *env_rank_source;  /* "RANK", "OMPI_COMM_WORLD_RANK", ... or NULL */
    int world_size, local_rank;   /* -1 unset */
    char job_id[256];             /* from the first job variable set, "" if none */
    const char *job_source;       /* its name, NULL if none */
} tr_process;
const tr_process *tr_proc(void);

/* ---- clocks and threads (tr_core.c) --------------------------------------- */

uint64_t tr_now_ns(void);          /* CLOCK_MONOTONIC */
int tr_tid(void);                  /* OS thread id, cached per thread */

/* The nesting depth of wrapped calls on this thread. tr_nest raises it
 * (every tr_nest is paired with a tr_leave) and says whether the call must
 * be recorded: 0 no (a wrapped call is already in progress on this thread,
 * so NCCL's own public calls inside a call, and allocations the runtime
 * makes inside one, are not the application's; the shim is disabled; a
 * forked child of a recording process), 1 yes, 2 yes but the shim is not
 * activated yet. Wrappers call tr_enter (tr_init.h), which activates; the
 * shim's own threads call tr_nest once and never leave (nothing they call
 * is the application's). */
int tr_nest(void);
void tr_leave(void);
/* Nesting depth of wrapped calls on this thread (0 outside any). */
int tr_depth(void);
/* Activation is done (tr_init.c): a child forked from now on never records. */
void tr_mark_active(void);
/* The warnings about settings, held back until activation (a process that
 * never records stays silent): printed once, by tr_init.c. */
void tr_print_setting_warnings(void);

/* One line "trshim: ..." on stderr; each distinct format string is printed
 * at most once per process. Never blocks on a lock held elsewhere. */
void tr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The process forked: in the child, recording stops for good. */
int tr_is_forked_child(void);

/* A detached background thread of the shim named name, that takes no
 * signal but a fault of its own (SIGSEGV, SIGBUS, SIGFPE, SIGILL: so the
 * shim's fault handler still marks the ring when one of ours crashes).
 * Returns 0 or the pthread_create error. */
int tr_thread_start(void *(*fn)(void *), const char *name);
/* mkdir -p, each folder made 0700: 0, or -1 with errno (ENOTDIR when a
 * part is not a folder). */
int tr_mkdir_p(const char *dir);

/* ---- the trace folder and its files (tr_files.c) ----------------------------
 * Nothing in the folder is trusted: it is checked each time it is opened,
 * files are made relative to the folder's descriptor, exclusively (O_EXCL,
 * O_NOFOLLOW), mode 0600, and no write goes past RLIMIT_FSIZE. */
/* TRSHIM_DIR made absolute against the current folder, once (at
 * activation: tr_init.c); tr_dir_path is that folder, the only form of it
 * the other parts use (the ring's path, warnings). */
void tr_dir_setup(void);
const char *tr_dir_path(void);
/* The host name (gethostname, NUL-terminated, "" when unknown). */
void tr_host_name(char *out, size_t cap);
/* in as a part of a file name: at most max bytes, each byte outside
 * [A-Za-z0-9_-], and each '.' unless keep_dot, made '_' (the host in the
 * ring's and the traces' names, the job in the traces'). */
void tr_clean_name(char *out, size_t cap, const char *in, size_t max, int keep_dot);
/* The job a process's files are named after: the first job variable set
 * (TRSHIM_JOB_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID...), else the id of its
 * first communicator (first_comm, 0 when none yet), else "<host>-<pid>";
 * *source says which ("comm", "process" or the variable). The traces are
 * named when written and the ring at activation, so a ring made before the
 * first communicator is renamed by the writer (tr_ring_name_job). */
void tr_job_id(char *out, size_t cap, const char **source, uint64_t first_comm);
/* job_id as a part of a file name (tr_clean_name, at most 48 bytes). */
void tr_job_file_part(char *out, size_t cap, const char *job_id);
/* The folder, created if missing (0700), opened (O_DIRECTORY) and checked:
 * owned by this user or root, not writable by group or others unless
 * sticky, no link of another user on the way. -1 with errno and *why set
 * when it cannot be had; when it is unsafe, one "trshim:" line the first
 * time and tr_dir_refused() is 1 from then on (nothing is written). */
int tr_dir_open(const char **why);
int tr_dir_refused(void);
/* A new file name in folder dfd, opened with flags | O_CREAT | O_EXCL |
 * O_NOFOLLOW | O_CLOEXEC, mode 0600; -1 with errno (EEXIST: the name is
 * taken). */
int tr_create_at(int dfd, const char *name, int flags);
/* The same under the name prefix + 8 random characters [A-Za-z0-9] +
 * suffix (written to name), another one tried while the name is taken. */
int tr_create_unique(int dfd, const char *prefix, const char *suffix, char *name, size_t cap, int flags);
/* RLIMIT_FSIZE's soft limit in bytes, UINT64_MAX when unlimited. */
uint64_t tr_fsize_limit(void);
/* A FILE writing to fd (closed by fclose) that never writes past the file-
 * size limit: a write that would cross it fails with EFBIG instead of the
 * kernel's SIGXFSZ. o records the bytes written and the first error. */
typedef struct {
    int fd;
    uint64_t bytes, limit;
    int err;
} tr_out;
FILE *tr_out_open(tr_out *o, int fd);

/* ---- redaction (tr_redact.c) ------------------------------------------------
 * Secrets never reach a file: every value from the environment or the
 * command line passes through here before it is kept. */
/* 1 when a variable or option named name[0..len) must have its value hidden. */
int tr_redact_name(const char *name, size_t len);
/* A copy of value (malloc) with credentials in URLs and token-shaped words
 * replaced by "<redacted>"; NULL without memory. */
char *tr_redact_value(const char *value);
/* argv[0..argc) (each malloc'd, replaced in place): secret options' values
 * ("--token=X", "--password X") and secrets inside any argument hidden. */
void tr_redact_argv(char **argv, int argc);

/* ---- real functions (tr_real.c) --------------------------------------------
 * The next definition of name after the shim (dlsym RTLD_NEXT); when the
 * library was loaded privately, the one in the already-loaded library of
 * that family (found by soname with RTLD_NOLOAD, else a loaded library that
 * defines the family's version query). NULL when none exists. Never the
 * shim's own; leaves errno as it was and dlerror() clear. */
typedef enum { TR_LIB_CUDART, TR_LIB_CUDA, TR_LIB_NCCL } tr_lib;
void *tr_real(const char *name, tr_lib lib);

/* Declares `static fn_type real_fn` resolved once, thread-safely. */
#define TR_REAL(var, type, name, lib)                                          \
    static _Atomic(type) var##_cache;                                          \
    type var = atomic_load_explicit(&var##_cache, memory_order_acquire);       \
    if (!var) {                                                                \
        var = (type)tr_real(name, lib);                                        \
        atomic_store_explicit(&var##_cache, var, memory_order_release);        \
    }

/* Like TR_REAL, for optional helpers the shim calls besides the wrapped
 * function, which may be missing (the CUDA runtime may not be loaded, an
 * older runtime): a miss is looked up again only every 1024th time, so it
 * costs nothing per call. Until one lookup has completed, every thread
 * looks for itself: a thread racing the first lookup never takes the
 * function for missing. */
#define TR_REAL_OPT(var, type, name, lib)                                              \
    static _Atomic(type) var##_cache;                                                  \
    static atomic_uint var##_miss;                                                     \
    static atomic_int var##_looked;                                                    \
    type var = atomic_load_explicit(&var##_cache, memory_order_acquire);               \
    if (!var && (!atomic_load_explicit(&var##_looked, memory_order_acquire) ||         \
                 (atomic_fetch_add_explicit(&var##_miss, 1, memory_order_relaxed) & 1023) == 0)) { \
        var = (type)tr_real(name, lib);                                                \
        if (var) atomic_store_explicit(&var##_cache, var, memory_order_release);       \
        atomic_store_explicit(&var##_looked, 1, memory_order_release);                 \
    }

/* ---- stacks (tr_stack.c) --------------------------------------------------- */

#define TR_STACK_MAX_DEPTH 256       /* frames kept at most (TRSHIM_STACK_DEPTH is clamped) */
#define TR_STACK_MAX_STACKS 65536    /* distinct stacks kept; beyond that captures give -1 */

/* Captures the calling thread's stack, starting at the application's frame
 * that called the wrapper: the wrapper must call tr_stack_capture directly
 * (it is noinline and finds the wrapper as its caller's frame, which needs
 * the shim's -fno-omit-frame-pointer). Keeps up to tr_cfg()->stack_depth
 * frames, innermost first. Returns a dense index >= 0 into the stacks table,
 * the same for the same stack (content), or -1 (stacks disabled, table full,
 * no memory). A stack seen before at the same call site costs ~1 load per
 * frame, without lock; a new one a full unwind (~150 ns per frame) and a
 * mutex. TRSHIM_STACK_CACHE=0 unwinds every time. Not async-signal-safe. */
int32_t tr_stack_capture(void);
/* The same from a helper the wrapper calls: skip = shim frames between the
 * wrapper and the caller of tr_stack_capture_skip (1: called by a function
 * the wrapper called). tr_stack_capture() == tr_stack_capture_skip(0) when
 * called from the same place. */
int32_t tr_stack_capture_skip(int skip);
/* The stack ip[0..n) (innermost first) interned as if captured (tr_crash.c,
 * from the writer thread: the crash stack the signal handler kept): its
 * index, or -1. Not async-signal-safe. */
int32_t tr_stack_intern(const uintptr_t *ip, uint32_t n);
/* Writes "modules": [...], "stacks": [...] members into the open top-level
 * object: every stack captured so far (indexes are process-wide, so every
 * rank of a process may share them), modules those stacks reference.
 * Symbolization happens here, in the writer, not at capture. */
void tr_stack_write_json(tr_json *j);

/* Counters, for tests and benchmarks. */
typedef struct {
    uint64_t hits, misses, uncacheable;   /* this thread's captures */
    uintptr_t last_ra, last_sp;           /* key of its last capture */
} tr_stack_thread_stats;
void tr_stack_get_thread_stats(tr_stack_thread_stats *out);
typedef struct {
    uint64_t stacks;        /* distinct stacks */
    uint64_t dropped;       /* unwound stacks refused: table full (seen again, from the cache: not counted) */
    uint64_t unwind_failed; /* captures whose frames the unwinder could not follow */
    uint64_t uncacheable;   /* misses whose stack cannot be cached (re-unwound each time) */
} tr_stack_stats;
void tr_stack_get_stats(tr_stack_stats *out);

/* ---- Python stacks (tr_pystack.c, tr_python.c) ------------------------------------ */

#define TR_PYSTACK_MAX_DEPTH 256     /* Python frames kept at most (TRSHIM_PYSTACK_DEPTH is clamped) */
#define TR_PYSTACK_MAX_STACKS 65536  /* distinct Python stacks kept; beyond that captures give -1 */
#define TR_PYSTACK_MAX_CODES 65536   /* distinct code objects kept; a new stack needing more gives -1 */

/* Looks for the CPython interpreter of the process (tr_py_init): at
 * activation (tr_init.c), not from a signal handler (takes the loader's lock). Nothing
 * when TRSHIM_PYSTACK_DEPTH=0. */
void tr_pystack_init(void);
/* The calling thread's Python stack (its innermost tr_cfg()->pystack_depth
 * frames), deduplicated: a dense index >= 0 into the trace's "pystacks",
 * the same for the same (code object, line) list, or -1 (no interpreter,
 * a thread without Python frames, off, tables full, no memory). Never takes
 * the GIL nor calls into the interpreter. A stack seen before costs the
 * frame walk (tr_py_capture) plus a hash and a lock-free lookup, no lock,
 * no allocation; a new one takes a mutex and reads the strings of each code
 * object not seen before (safe reads). Any thread; not async-signal-safe. */
int32_t tr_pystack_capture(void);
/* Writes "python", "pycodes" and "pystacks" into the open top-level object
 * (indexes are process-wide, like "stacks"). Writer thread. */
void tr_pystack_write_json(tr_json *j);
/* The file of Python code object i below tr_pystack_code_count() (the
 * folders the Python code came from: tr_sysinfo.c's packages). */
uint32_t tr_pystack_code_count(void);
const char *tr_pystack_code_file(uint32_t i);

typedef struct {
    uint64_t stacks, codes;   /* distinct Python stacks and code objects kept */
    uint64_t dropped;         /* captures that gave -1 because a table was full (or no memory) */
    uint64_t hits, misses;    /* captures with frames: stack seen before / interned now */
} tr_pystack_stats;
void tr_pystack_get_stats(tr_pystack_stats *out);

/* ---- NCCL state and its trace (tr_comm.c, tr_calls_json.c, tr_vocab.c) ---- */

/* The last collective this process issued on device before now (for the
 * memory peak's "peak_after"). Returns 0 when there is none. */
int tr_nccl_last_collective(int device, uint64_t *comm_id, uint64_t *seq);
/* Ranks of the process: one per device that has communicators whose ids
 * repeat across devices (several ranks in one process), else one. */
typedef struct {
    int device;               /* -1: the whole process (one rank) */
    int rank;                 /* -1 unknown */
    const char *rank_source;
    int trace_device;         /* the trace's "device" field, -1: null */
} tr_rank_view;
int tr_nccl_ranks(tr_rank_view *out, int max);
/* Writes "comms" and "calls" of one rank view; returns 1 if a call of that
 * rank had not returned (the rank is inside a call). Places each call it
 * writes in checks (tr_nan_place; NULL: NaN checks off). */
struct tr_nan_snap;
int tr_nccl_write_json(tr_json *j, const tr_rank_view *view, struct tr_nan_snap *checks);
/* The ring's window the last tr_nccl_write_json wrote: records [first,
 * next) (first = records lost, overwritten by newer ones); writer only. */
void tr_nccl_window(uint64_t *first, uint64_t *next);
/* Records lost before that window (the trace's "dropped" = ring.lost). */
uint64_t tr_nccl_dropped(void);
/* Id of the first communicator made from a unique id (job identity), 0 if none. */
uint64_t tr_nccl_first_comm_id(void);
int tr_nccl_version(void);         /* ncclGetVersion, 0 if unknown (tr_vocab.c) */
/* "nccl": the loaded library once a communicator was made (tr_vocab.c), null before */
void tr_nccl_library_write_json(tr_json *j);

/* ---- memory (tr_memjson.c) ---------------------------------------------------- */

/* Writes the "memory" member for device (-1: every device). */
void tr_memory_write_json(tr_json *j, int device);

/* ---- the write queue (tr_core.c) -----------------------------------------------
 * Whoever wants every rank's trace written now (a communicator's destroy or
 * abort, the watchdog, a signal handler) posts a request here: a bit in the
 * request word and a wake-up of the eventfd the writer thread (tr_writer.c)
 * waits on. Posting never blocks on I/O and is async-signal-safe; requests
 * that arrive together make one write, named after the most telling. */

typedef enum { TR_WRITE_EXIT, TR_WRITE_SIGNAL, TR_WRITE_COMM_END, TR_WRITE_SNAPSHOT, TR_WRITE_HANG } tr_write_reason;
/* Asks for a write; nothing when no writer serves the queue, or in a forked
 * child. errno is kept. */
void tr_write_request(tr_write_reason reason);
/* The request itself, unchecked (the signal handlers check first): returns
 * its number, which tr_write_done_upto reaches once a write covered it. */
unsigned tr_write_post(tr_write_reason reason);
/* The writer's side: opens the queue (0, or -1 with errno), says whether a
 * writer serves it, waits for requests (blocks; 0 with the number of the
 * newest request and the reasons' bits (1 << reason) taken, -1 when the
 * queue broke), and marks the requests up to upto written. */
int tr_write_queue_open(void);
void tr_write_queue_serve(int served);
int tr_write_queue_served(void);
int tr_write_queue_wait(unsigned *upto, int *mask);
void tr_write_done(unsigned upto);
unsigned tr_write_done_upto(void);

/* ---- trace files (tr_writer.c) ------------------------------------------------ */

/* Starts the writer thread, which serves the write queue, and installs the
 * signal handlers (at activation: tr_init.c). */
void tr_writer_start(void);
/* The exit-time write: synchronous, from the exiting thread (tr_init.c's
 * atexit handler). */
void tr_writer_exit(void);

#endif
