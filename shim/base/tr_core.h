/* The base of libtrshim.so (base/: settings, process, clocks, threads,
 * warnings, the write queue, streaming JSON, the trace folder, redaction,
 * the real functions, CUDA's optional functions, ELF modules), and the
 * folders the shim's files form. This header is base/'s boundary: it
 * declares tr_core.c's, tr_files.c's, tr_redact.c's and tr_real.c's
 * functions and includes base's other headers (tr_json.h, tr_packed.h,
 * tr_hash.h, tr_cuda.h, tr_dynsym.h, tr_dlreal.h, tr_modules.h), which no
 * file outside base/ includes itself.
 *
 * Folders, lowest first (shim/meson.build's trshim_folders). A file calls
 * into its own folder or the folders below it, never up (tests/shim:
 * shim-folder-order, tests/common/callgraph.py --order), and no two files
 * call each other, directly or through others (shim-no-call-circles).
 * Each folder has one boundary header, the only one of its headers a file
 * outside the folder includes (shim-boundaries, tests/common/boundaries.py);
 * its other headers are parts of it (it includes them) or private to the
 * folder (_int.h, or a first comment saying so). Every folder is on the
 * include path: headers are included by name alone ("tr_core.h"). Upward
 * needs go through state a lower folder owns: the wrappers and the
 * watchdog ask for a trace write by posting to base's write queue
 * (tr_write_request), which the writer thread serves; the first recorded
 * call activates the shim through tr_enter (tr_init.h), which the
 * wrappers, above tr_init.c, call.
 *
 *  wrap/          what the application calls (no boundary: nothing calls
 *                 it): tr_nccl.c (collectives, send/recv, one-sided,
 *                 groups; and the link-time check that every WRAP row of
 *                 trshim/nccl_calls.h has a wrapper), tr_lifecycle.c
 *                 (communicators' init, split, shrink, grow, suspend, end),
 *                 tr_memory.c (allocations), tr_graph_api.c (CUDA graphs),
 *                 tr_sync.c (the application's synchronizations);
 *                 tr_dlsym.c and tr_entry.c (dlsym, dlvsym and the CUDA
 *                 entry-point lookups, which hand out the wrappers; they
 *                 use base/ only; tr_dlsym.h private)
 *  tr_init.c      activation on the first recorded call (trace folder,
 *                 ring, Python stacks, completion poller, writer, exit
 *                 handler), tr_enter: tr_init.h
 *  write/         tr_write.h: tr_writer.c, trace files from every part's
 *                 JSON, the signal handlers, the exit write; it serves the
 *                 write queue; over tr_calls_json.c ("calls"),
 *                 tr_comm_json.c ("comms"), tr_memjson.c ("memory")
 *                 (tr_write_int.h)
 *  nan/           tr_nancheck.h: tr_nancheck.c over tr_nanresults.c,
 *                 tr_nanscan.c, tr_nangpu.c and its kernel tr_nangpu.cu
 *                 (NaN/Inf checks)
 *  record/        tr_record.h: what the wrappers keep and the writer reads:
 *                 tr_comm.c (communicators, groups, the last collective:
 *                 tr_nccl_int.h), tr_envsnap.c (the environment each
 *                 communicator was created in), tr_sysinfo.c (versions,
 *                 devices, frameworks, launchers), tr_vocab.c (operation
 *                 names, the loaded NCCL), tr_nccl_config.c, tr_complete.c
 *                 over tr_watchdog.c (GPU completion, hang watchdog),
 *                 tr_memcount.c and tr_memtable.c (memory accounting),
 *                 tr_graphs.c (CUDA graphs' captured collectives)
 *  stacks/        tr_stacks.h: tr_stack.c, tr_symbols.c (modules'
 *                 symbols, JSON of stacks), tr_crash.c (the fatal signal's
 *                 site, the first CUDA and NCCL errors)
 *  stacks/python/ tr_python.h: tr_pystack.c over tr_python.c,
 *                 tr_python_init.c, tr_python_read.c (Python stacks),
 *                 tr_pyroots.c (the interpreter's install folders; the
 *                 writer collects them) and tr_pyexit.c (the uncaught
 *                 Python exception, an audit hook)
 *  ring/          tr_ring.h: tr_ring.c, the ring file, its records and
 *                 communicators; tr_ring_blobs.c over it: the blob area;
 *                 tr_ring_live.c over it: the header's live fields (hang,
 *                 pending operations, device memory)
 *  base/          tr_core.h: tr_core.c (settings, process, clocks,
 *                 per-thread depth, warnings, threads, the write queue),
 *                 tr_json.c (streaming JSON), tr_packed.c (packed rows),
 *                 tr_redact.c (secrets kept off disk), tr_hash.h,
 *                 tr_files.c (the trace folder, safe files, the host name
 *                 in file names), tr_real.c over tr_dlreal.c, tr_dynsym.c
 *                 (the real function behind each wrapper), tr_cuda.c (every
 *                 optional CUDA runtime and driver function, asked without
 *                 disturbing the application's error state: tr_cuda.h),
 *                 tr_modules.c (ELF modules: build ids, paths)
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

#define TR_PYSTACK_MAX_DEPTH 256     /* Python frames kept at most (TRSHIM_PYSTACK_DEPTH is clamped) */

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

/* base's other headers, parts of this one */
#include "tr_packed.h"
#include "tr_hash.h"
#include "tr_cuda.h"
#include "tr_dynsym.h"
#include "tr_dlreal.h"
#include "tr_modules.h"

#endif
