/* Internal interfaces of the simulated NCCL.
 *
 * Ranks are processes (or threads of one process) that share one POSIX
 * shared-memory segment per communicator. Data never moves between private
 * address spaces directly: each collective is cut into steps; at each step
 * every rank publishes its contribution in its own slot of the segment, waits
 * until all peers have published the same step, computes its own output from
 * the slots, and marks the step consumed. Send/recv use one single-slot
 * channel per ordered (sender, receiver) pair. All waiting is on atomic
 * counters in the segment plus a futex doorbell, never on locks, so a rank that
 * dies cannot leave the others with a lock held or half-published data. */
#ifndef TRSIM_NCCL_INTERNAL_H
#define TRSIM_NCCL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <nccl.h>

#include "sim_internal.h"
#include "dtype.h"

#define TRSIM_ID_MAGIC 0x64692d6d69737274ULL   /* "trsim-id" */
#define TRSIM_SHM_MAGIC 0x6d68732d6d697274ULL
#define TRSIM_COMM_MAGIC 0x6d6d6f632d6d6973ULL
#define TRSIM_MAX_RANKS 1024
#define TRSIM_BOOT_BYTES 64          /* per-rank bootstrap exchange payload */

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
    _Atomic int pending_splits;     /* non-blocking splits still exchanging */
    _Atomic int attached;           /* shm is mapped and the fields above are set */
    char last_error[256];
};

int trsim_comm_valid(const struct ncclComm *comm);
/* Blocks until every rank attached (or the comm is aborted / timed out). */
ncclResult_t trsim_comm_wait_init(struct ncclComm *comm);
/* All ranks exchange TRSIM_BOOT_BYTES each over the segment, on the host.
 * out receives nranks * TRSIM_BOOT_BYTES. */
ncclResult_t trsim_comm_allgather_boot(struct ncclComm *comm, const void *in, void *out);
/* Resolves a reduction op handle (built-in or PreMulSum) for datatype.
 * A PreMulSum whose scalar lives in device memory sets *dev_scalar: the
 * scalar is read when the collective runs, as NCCL does. */
ncclResult_t trsim_comm_redop(struct ncclComm *comm, int op, int datatype, trsim_redop *out,
                              const void **dev_scalar);
/* Reads one element of datatype as a double (PreMulSum scalars). */
double trsim_scalar_value(const void *p, int datatype);
void trsim_comm_set_error(struct ncclComm *comm, ncclResult_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Thread-local last error text (ncclGetLastError). */
void trsim_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* TRSIM_TIMEOUT_SEC, 0 = wait forever (the default, like a GPU). */
double trsim_timeout_sec(void);

/* ---- operations (nccl_ops.c) --------------------------------------------- */

/* Inside ncclGroupStart/End: inits whose wait is deferred to GroupEnd. */
int trsim_group_depth(void);
void trsim_group_defer_init(struct ncclComm *comm);
struct trsim_split;
void trsim_group_defer_split(struct trsim_split *job);
/* Runs a split's exchange and attach (nccl_comm.c); sets job->result. */
ncclResult_t trsim_split_run(struct trsim_split *job);
/* Frees a split that has run and returns its result; on failure the child
 * handle stays, reporting the error as its init state. */
ncclResult_t trsim_split_free(struct trsim_split *job);

#endif
