/* Internal interfaces of the simulated NCCL.
 *
 * Ranks are processes (or threads of one process) that share one POSIX
 * shared-memory segment per communicator. Data never moves between private
 * address spaces directly: each collective is cut into steps; at each step
 * every rank publishes its contribution in its own slot of the segment, waits
 * until all peers have published the same step, computes its own output from
 * the slots, and marks the step consumed. Send/recv use one single-slot
 * channel per ordered (sender, receiver) pair. One-sided signals are counters
 * per ordered pair, signal index and context; windows are the ranks' own
 * memory, shared with the peers (nccl_win.c). All waiting is on atomic
 * counters in the segment plus a futex doorbell, never on locks, so a rank that
 * dies cannot leave the others with a lock held or half-published data.
 *
 * The NCCL API is NCCL 2.32.3's, from trshim/nccl_abi.h (not the installed
 * nccl.h). Of ncclConfig_t only size, magic, version and blocking are read. */
#ifndef TRSIM_NCCL_INTERNAL_H
#define TRSIM_NCCL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "trshim/nccl_abi.h"

#include "sim_internal.h"
#include "dtype.h"

#define TRSIM_ID_MAGIC 0x64692d6d69737274ULL   /* "trsim-id" */
#define TRSIM_SHM_MAGIC 0x6d68732d6d697274ULL
#define TRSIM_COMM_MAGIC 0x6d6d6f632d6d6973ULL
#define TRSIM_MAX_RANKS 1024
#define TRSIM_BOOT_BYTES 64          /* per-rank bootstrap exchange payload */
/* One-sided signals: signal indexes 0..TRSIM_RMA_SIGS-1 and contexts
 * 0..TRSIM_RMA_CTXS-1 (NCCL bounds them by the config's numRmaSig and
 * numRmaCtx, which the simulator does not read). */
#define TRSIM_RMA_SIGS 4
#define TRSIM_RMA_CTXS 4
#define TRSIM_RMA_SLOTS (TRSIM_RMA_SIGS * TRSIM_RMA_CTXS)

/* The ncclUniqueId as the simulator fills it (fits in 128 bytes). */
typedef struct {
    uint64_t magic;
    uint64_t key;        /* random; names the shared-memory segment */
    char tag[96];        /* TRSIM_SHM_TAG of the job, so launchers can clean up */
} trsim_id;
_Static_assert(sizeof(trsim_id) <= sizeof(ncclUniqueId), "id too large");

/* ---- the shared segment (nccl_shm.c) ------------------------------------ */

typedef struct {
    _Atomic int32_t pid;            /* 0 until the rank attached */
    _Atomic int32_t device;
    _Atomic uint64_t boot_posted;   /* bootstrap exchanges published */
    _Atomic uint64_t boot_consumed; /* bootstrap exchanges read */
    _Atomic uint64_t posted;        /* collective steps published */
    _Atomic uint64_t consumed;      /* collective steps read */
    uint64_t sig[4];                /* signature of the posted step */
    unsigned char boot[2][TRSIM_BOOT_BYTES];
} trsim_shm_rank;

typedef struct {
    _Atomic uint64_t sent;          /* chunks written into the slot */
    _Atomic uint64_t acked;         /* chunks read out of the slot */
    uint64_t msg;                   /* message number of the chunk in the slot */
    uint64_t msg_bytes;             /* total bytes of that message */
    uint64_t chunk_bytes;           /* bytes of the chunk in the slot */
} trsim_shm_chan;

typedef struct {
    _Atomic uint64_t magic;
    _Atomic uint32_t nranks;
    _Atomic uint32_t attached;
    _Atomic uint32_t doorbell;      /* futex word, bumped on every publish */
    _Atomic uint32_t unlinked;
} trsim_shm_hdr;

typedef struct {
    void *base;
    size_t size;
    int nranks;
    trsim_shm_hdr *hdr;
    trsim_shm_rank *ranks;          /* [nranks] */
    trsim_shm_chan *chans;          /* [nranks * nranks], sender-major */
    _Atomic uint64_t *signals;      /* [nranks * nranks * TRSIM_RMA_SLOTS], receiver-major:
                                       signals delivered from a sender per (ctx, sigIdx) */
    unsigned char *coll_slots;      /* nranks * coll_slot_bytes */
    unsigned char *p2p_slots;       /* nranks * nranks * p2p_slot_bytes */
    size_t coll_slot_bytes;
    size_t p2p_slot_bytes;
    char name[160];
} trsim_shm;

/* Maps (creating if needed) the segment for nranks and registers rank in it.
 * ncclInvalidUsage when the segment was made for another size or the rank is
 * taken. The last rank to attach removes the name from /dev/shm. */
ncclResult_t trsim_shm_attach(trsim_shm *shm, const char *name, int nranks, int rank, int device);
void trsim_shm_detach(trsim_shm *shm);
unsigned char *trsim_shm_coll_slot(const trsim_shm *shm, int rank);
trsim_shm_chan *trsim_shm_chan_at(const trsim_shm *shm, int from, int to);
unsigned char *trsim_shm_p2p_slot(const trsim_shm *shm, int from, int to);
/* The count of signals rank `from` delivered to rank `to` on slot
 * ctx * TRSIM_RMA_SIGS + sigIdx. */
_Atomic uint64_t *trsim_shm_signal(const trsim_shm *shm, int to, int from, int slot);
/* Bytes of the segment before the data slots (kept for the whole life of
 * the communicator), and bytes of the data slots. */
size_t trsim_shm_fixed_bytes(const trsim_shm *shm);
/* Publishes progress: bumps the doorbell and wakes every waiter. */
void trsim_shm_ring(trsim_shm *shm);
/* Waits up to timeout_ns for the doorbell to move away from seen. */
void trsim_shm_wait(trsim_shm *shm, uint32_t seen, long timeout_ns);
/* Rank r's process has gone (it attached and its pid no longer exists). */
int trsim_shm_rank_dead(const trsim_shm *shm, int rank);
uint64_t trsim_hash64(uint64_t h, uint64_t v);
double trsim_now(void);             /* seconds, CLOCK_MONOTONIC */

/* ---- communicators (nccl_comm.c) ----------------------------------------- */

struct trsim_comm_redop {
    int in_use;
    int datatype;
    double scalar;                  /* host-immediate scalar */
    const void *dev_scalar;         /* device-resident scalar, or NULL */
};

struct ncclComm {
    uint64_t magic;
    trsim_shm shm;
    trsim_id id;
    int nranks, rank, device;
    int blocking;
    _Atomic int init_state;         /* ncclInProgress until every rank attached */
    _Atomic int async_error;        /* ncclSuccess, or the error the comm is in */
    _Atomic int aborted;
    _Atomic int inflight;           /* queued ops not yet finished */
    pthread_mutex_t lock;           /* enqueue-side counters below */
    uint64_t next_step;             /* collective steps assigned so far */
    uint64_t coll_seq;              /* collectives issued so far */
    uint64_t *send_msgs, *recv_msgs;/* [nranks] messages issued per peer */
    _Atomic uint64_t *send_turn, *recv_turn; /* [nranks] messages finished */
    uint64_t boot_seq;              /* bootstrap exchanges done */
    uint64_t splits;                /* splits/shrinks issued on this comm */
    struct trsim_comm_redop *redops;/* ops created by ncclRedOpCreatePreMulSum */
    int nredops;
    _Atomic int finalizing;
    _Atomic int pending_jobs;       /* non-blocking jobs (splits, grows, windows) still running */
    _Atomic int attached;           /* shm is mapped and the fields above are set */
    _Atomic int suspended;          /* ncclCommSuspend(NCCL_SUSPEND_MEM) until ncclCommResume */
    uint64_t *sig_expected;         /* [nranks * TRSIM_RMA_SLOTS] signals waited for so far (lock) */
    uint64_t waits;                 /* ncclWaitSignal calls issued (lock) */
    int grow_id_pending;            /* ncclCommGetUniqueId's id not yet consumed by a grow */
    uint64_t grow_key;
    struct ncclWindow_vidmem *windows; /* registered windows (lock) */
    _Atomic int rma_ready;          /* a symmetric window was registered (NCCL's RMA init) */
    char last_error[256];
};

/* A window (ncclCommWindowRegister, nccl_win.c): the rank's buffer, made
 * shared memory, and every peer's window of the same registration mapped
 * into this process, so that a put is a copy into the peer's memory. */
struct ncclWindow_vidmem {
    uint64_t magic;
    struct ncclComm *comm;
    int nranks;
    _Atomic int refs;               /* the registration, and each put not finished */
    struct ncclWindow_vidmem *next;  /* the communicator's list */
    unsigned char *user;            /* the buffer as registered */
    size_t size;
    int flags;
    struct trsim_region *region;    /* the shared pages holding it */
    unsigned char **peer_base;      /* [nranks] rank q's window, mapped here */
    size_t *peer_size;              /* [nranks] */
    void **peer_map;                /* [nranks] the mappings, to unmap */
    size_t *peer_map_len;
};
#define TRSIM_WIN_MAGIC 0x6e69772d6d697274ULL

int trsim_comm_valid(const struct ncclComm *comm);
/* Blocks until every rank attached (or the comm is aborted / timed out). */
ncclResult_t trsim_comm_wait_init(struct ncclComm *comm);
/* All ranks exchange TRSIM_BOOT_BYTES each over the segment, on the host.
 * out receives nranks * TRSIM_BOOT_BYTES. */
ncclResult_t trsim_comm_allgather_boot(struct ncclComm *comm, const void *in, void *out);
void trsim_comm_set_error(struct ncclComm *comm, ncclResult_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The job's tag (TRSIM_SHM_TAG, else u<uid>) as a file-name part. */
void trsim_job_tag(char *out, size_t n);
/* Thread-local last error text (ncclGetLastError). */
void trsim_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* TRSIM_TIMEOUT_SEC, 0 = wait forever (the default, like a GPU). */
double trsim_timeout_sec(void);
/* A fresh ncclUniqueId: a random key and the launched job's tag (trsim_job_tag). */
ncclResult_t trsim_make_unique_id(ncclUniqueId *uniqueId);
/* ncclInvalidArgument (and the last error) unless config is NULL or made by
 * NCCL_CONFIG_INITIALIZER. Of a ncclConfig_t only the fields every version
 * has are read (size, magic, version, blocking). */
ncclResult_t trsim_check_config(const ncclConfig_t *config);
int trsim_config_blocking(const ncclConfig_t *config);   /* 1 for NULL or unset */
/* A communicator without a place yet (init in progress), and its end. */
struct ncclComm *trsim_comm_new(int blocking);
void trsim_comm_free(struct ncclComm *comm);
/* Gives a new communicator its place and attaches it to its segment (named
 * by id's tag and key), without waiting for the peers. */
ncclResult_t trsim_comm_setup(struct ncclComm *comm, int nranks, const trsim_id *id, uint64_t key,
                              int rank, int device);
/* trsim_comm_new and trsim_comm_setup; *out is NULL on failure. */
ncclResult_t trsim_comm_attach(struct ncclComm **out, int nranks, const trsim_id *id,
                               uint64_t key, int rank, int device, int blocking);
/* ncclCommInitRankConfig: attaches and finishes the init (below). */
ncclResult_t trsim_comm_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *uid, int rank,
                                  const ncclConfig_t *config);
/* The end of an init: ncclInProgress when non-blocking, deferred to the
 * outermost ncclGroupEnd inside a group, else waits for every rank. */
ncclResult_t trsim_comm_finish_init(struct ncclComm *comm);
/* A communicator ready for a call that needs its init done: waits for it
 * when blocking; a non-blocking one reports where its init stands. */
ncclResult_t trsim_comm_ready(struct ncclComm *comm);
/* trsim_comm_allgather_boot of entry (bytes <= TRSIM_BOOT_BYTES of it, then
 * zeros) into *all, nranks * TRSIM_BOOT_BYTES allocated here for the caller
 * to free (NULL, and ncclSystemError, when out of memory: this rank then
 * takes no part). */
ncclResult_t trsim_comm_exchange(struct ncclComm *comm, const void *entry, size_t bytes, unsigned char **all);
/* Every rank of the communicator waits for the others (host side). */
ncclResult_t trsim_comm_barrier(struct ncclComm *comm);

/* ---- user reduction ops (nccl_redop.c) ------------------------------------ */

/* Resolves a reduction op handle (built-in or PreMulSum) for datatype.
 * A PreMulSum whose scalar lives in device memory sets *dev_scalar: the
 * scalar is read when the collective runs, as NCCL does. */
ncclResult_t trsim_comm_redop(struct ncclComm *comm, int op, int datatype, trsim_redop *out,
                              const void **dev_scalar);
/* Reads one element of datatype as a double (PreMulSum scalars). */
double trsim_scalar_value(const void *p, int datatype);

/* ---- operations (nccl_ops.c, nccl_onesided.c) ------------------------------ */

enum trsim_op_kind {
    OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_ALLGATHER, OP_REDUCESCATTER,
    OP_ALLTOALL, OP_GATHER, OP_SCATTER, OP_SEND, OP_RECV,
    OP_PUTSIGNAL, OP_SIGNAL, OP_WAITSIGNAL,
};
/* By kind, NCCL's function names less "nccl" (messages). */
extern const char *const trsim_op_names[];

#define IS_COLL(kind) ((kind) < OP_SEND)
#define IS_P2P(kind) ((kind) == OP_SEND || (kind) == OP_RECV)

/* One descriptor of a ncclWaitSignal: count more signals from peer on slot,
 * that is until the peer's counter reaches target. */
struct trsim_wait_desc {
    int peer, slot;
    uint64_t count, target;
};

typedef struct {
    enum trsim_op_kind kind;
    struct ncclComm *comm;
    trsim_stream *stream;
    const unsigned char *sendbuff;
    unsigned char *recvbuff;
    size_t count;              /* the count argument as the caller gave it */
    int datatype;
    size_t elsize;
    trsim_redop redop;
    const void *dev_scalar;    /* PreMulSum scalar read when the op runs */
    int root;                  /* root, or peer for send/recv; -1 if none */
    uint64_t seq;              /* collective number, or message number per peer */
    /* collectives: the contribution is nblocks blocks of block_count
     * elements; each step carries `chunk` elements of every block */
    int nblocks;
    int contributes;
    size_t block_count, chunk;
    uint64_t step_base, nsteps, steps_done;
    int posted;                /* this step's contribution is published */
    int peers_ready;           /* peers 0..peers_ready-1 seen ready for this phase */
    /* send/recv */
    size_t bytes, bytes_done;
    int awaiting_ack;
    /* one-sided (root is the peer of a put or signal) */
    int slot;                  /* ctx * TRSIM_RMA_SIGS + sigIdx */
    unsigned char *put_dst;    /* where the put lands: the peer's window, mapped here */
    struct ncclWindow_vidmem *win;  /* held until the op is freed */
    int ndesc;
    struct trsim_wait_desc *descs;
    /* ncclCollConfig_t's launchCompletionEvent, recorded when launched */
    cudaEvent_t launch_event;
    /* bookkeeping */
    int finished, warned;
    double started, last_liveness_check;
} trsim_op;

/* The communicator can take an operation now; else the call's error
 * (OP_FAIL). */
ncclResult_t trsim_op_check_comm(struct ncclComm *comm, const char *name);
/* Advances a running operation as far as it can without waiting; 1 once
 * it is done. trsim_onesided_progress: the same for puts, signals and
 * waits. */
int trsim_op_progress(trsim_op *op);
int trsim_onesided_progress(trsim_op *op);

/* ---- groups (nccl_group.c) --------------------------------------------------- */

/* Inside ncclGroupStart/End: inits whose wait is deferred to GroupEnd. */
int trsim_group_depth(void);
void trsim_group_defer_init(struct ncclComm *comm);
/* An invalid call inside a group also fails the group's ncclGroupEnd. */
ncclResult_t trsim_group_fail(ncclResult_t r);
/* An operation call fails with r: the thread's last error and the group's. */
#define OP_FAIL(r, ...) (trsim_set_last_error(__VA_ARGS__), trsim_group_fail(r))
/* Takes a validated operation (a copy of proto): into the group, or
 * numbered and launched at once (ncclInProgress on a non-blocking
 * communicator). On success the operation owns proto's descs and win. */
ncclResult_t trsim_op_submit(const trsim_op *proto);

/* ---- jobs (nccl_split.c) ----------------------------------------------------- */

/* A collective host-side job on a communicator: a split, a grow, a window
 * registration or deregistration. It runs at once (blocking communicator),
 * at the outermost ncclGroupEnd (inside a group), or on a thread of its own
 * (non-blocking: the parent reports ncclInProgress until it is done). */
enum trsim_job_kind { TRSIM_JOB_SPLIT, TRSIM_JOB_GROW, TRSIM_JOB_WINREG, TRSIM_JOB_WINDEREG };
struct trsim_job {
    enum trsim_job_kind kind;
    struct ncclComm *parent;
    int color, key, blocking;
    struct ncclComm *child;      /* split/grow: made before the exchange; NULL for NOCOLOR */
    int grow_nranks, grow_root;  /* grow: the new size; this rank passed the unique id */
    uint64_t grow_key;
    void *buff;                  /* window registration */
    size_t size;
    int win_flags;
    ncclWindow_t *win_out;
    struct ncclWindow_vidmem *win;  /* deregistration */
    ncclResult_t result;
};
/* A job of kind on parent (NULL when out of memory). */
struct trsim_job *trsim_job_new(enum trsim_job_kind kind, struct ncclComm *parent, int blocking);
void trsim_group_defer_job(struct trsim_job *job);   /* nccl_group.c */
/* Runs a job's exchange and attach; sets job->result. */
ncclResult_t trsim_job_run(struct trsim_job *job);
/* Frees a job that has run and returns its result; on failure a child
 * handle stays, reporting the error as its init state. */
ncclResult_t trsim_job_free(struct trsim_job *job);
/* Starts a job as its communicator and the group state say (above) and
 * owns it from then on. *newcomm (may be NULL) receives the child: at once
 * when the job is deferred or runs on its thread, on success otherwise.
 * Returns the job's result, ncclSuccess when deferred, ncclInProgress when
 * it runs on its thread. */
ncclResult_t trsim_job_launch(struct trsim_job *job, ncclComm_t *newcomm);

/* ---- windows (nccl_win.c) -------------------------------------------------- */

/* ncclMemAlloc's memory becomes shared memory at once (nothing can write
 * it yet), so that a window on it needs no moving. Best effort: memory that
 * could not be shared is moved when registered. */
/* The collective parts of ncclCommWindowRegister / Deregister. */
ncclResult_t trsim_window_register_run(struct trsim_job *job);
ncclResult_t trsim_window_deregister_run(struct trsim_job *job);
/* Drops every window of a communicator being destroyed (no exchange). */
void trsim_comm_drop_windows(struct ncclComm *comm);
/* A put holds its window (its peers' mappings stay) until it is freed. */
void trsim_window_hold(struct ncclWindow_vidmem *win);
void trsim_window_release(struct ncclWindow_vidmem *win);
/* win is a live window of comm. */
int trsim_window_valid(struct ncclComm *comm, const struct ncclWindow_vidmem *win);
/* A window of comm holding [p, p+bytes) (ncclPutSignal's source), or NULL. */
struct ncclWindow_vidmem *trsim_window_find(struct ncclComm *comm, const void *p, size_t bytes);

#endif
