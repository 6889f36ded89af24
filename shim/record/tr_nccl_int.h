/* The NCCL side of the shim: shared by the wrappers (tr_nccl.c: call
 * records, collective/p2p/one-sided/group wrappers; tr_lifecycle.c: the
 * communicators' lifecycle), the state they keep (tr_comm.c: communicators,
 * groups, the last collective; tr_vocab.c: the vocabulary and the loaded
 * library; tr_nccl_config.c: *Config collectives' configs) and the parts
 * that read it (tr_calls_json.c, tr_comm_json.c, tr_watchdog.c;
 * tr_nancheck.c: is a communicator going away). Part of record/'s boundary:
 * included through tr_record.h. */
#ifndef TR_NCCL_INT_H
#define TR_NCCL_INT_H

#include <stdatomic.h>
#include <stdint.h>
#include "trshim/nccl_abi.h"
#include "trshim/nccl_calls.h"

#include "tr_core.h"
#include "tr_ring.h"

enum { TR_KIND_INITRANK, TR_KIND_INITRANKCONFIG, TR_KIND_INITRANKSCALABLE, TR_KIND_INITALL,
       TR_KIND_SPLIT, TR_KIND_SHRINK, TR_KIND_GROW };
enum { TR_END_NONE, TR_END_FINALIZE, TR_END_DESTROY, TR_END_ABORT, TR_END_REVOKE };
_Static_assert((int)TR_KIND_GROW == (int)TRR_KIND_GROW && (int)TR_END_REVOKE == (int)TRR_END_REVOKE,
               "the ring file numbers kinds and ends as the shim does");

/* One communicator as this process saw it created. Fields above `handle`
 * are set before the record is published and never change. */
typedef struct {
    uint64_t id, parent_id;        /* parent_id 0: none */
    int32_t parent;                /* index of the parent, -1 */
    int kind;
    int blocking;
    int has_color, color, key;
    uint32_t group;                /* outermost group it was created in, 0 */
    uint64_t init_enter;
    int32_t init_stack;
    uint64_t grow_uid;             /* Grow: hash of the ncclUniqueId it was given, 0 */
    int grow_ranks;
    /* its ring file slot (slot index == this index, -1: none, then a
     * private copy of the same layout): mirrors the fields below as they
     * change and holds the fingerprint (tr_nccl.c) */
    int32_t slot;
    trr_comm *ring;

    _Atomic uintptr_t handle;      /* ncclComm_t once init returned it */
    _Atomic int32_t device;        /* -1 unknown */
    _Atomic int32_t size;          /* -1 unknown */
    _Atomic int32_t rank;          /* -1 unknown */
    atomic_int resolved;           /* size and rank known */
    atomic_int resolve_tries;      /* NCCL asked (bounded: a broken comm is not asked forever) */
    atomic_int init_done;          /* init returned */
    _Atomic uint64_t init_exit;
    atomic_int init_rc;
    atomic_int dead;               /* destroyed or aborted: never call NCCL on it */

    atomic_int suspended;          /* a successful ncclCommSuspend not followed by a resume */
    atomic_uint suspends;
    atomic_int end_kind;           /* TR_END_* of the last lifecycle call */
    _Atomic uint64_t end_enter, end_exit;  /* end_exit 0: not returned */
    atomic_int end_rc;

    _Atomic uint64_t colls;        /* collectives numbered */
    _Atomic uint32_t splits;       /* splits and shrinks issued on it */
    _Atomic(_Atomic uint64_t *) p2p;   /* [TR_P2P_DIRS * p2p_n]: per direction, per peer */
    _Atomic int32_t p2p_n;
} tr_comm;

#define TR_MAX_COMMS 65536

/* the vocabulary's operations (trshim/nccl_calls.h): OP_* and their flags */
#define TR_OP_ENUM_(suffix, name, flags, alias) OP_##suffix = TR_OP_##suffix,
enum { TR_NCCL_OPS(TR_OP_ENUM_) };
#undef TR_OP_ENUM_
extern const char *const tr_op_names[TR_OP_N];
extern const unsigned char tr_op_flags[TR_OP_N];
static inline int tr_op_has(int op, int flag) { return op >= 0 && op < TR_OP_N && (tr_op_flags[op] & flag); }
/* JSON values (trj_put_* style, at most 32 bytes) of a dtype and a reduction
 * op as recorded (NONE: null; unknown values "invalid(N)", ops made by
 * ncclRedOpCreatePreMulSum "premulsum(N)") */
/* a datatype's or reduction's name in the trace: the table's, or
 * "invalid(N)" / "premulsum(N)" formatted into tmp (TR_NAME_TMP bytes);
 * NULL for NONE */
#define TR_COUNT_ROW_(...) +1
enum { TR_DTYPE_NAMED = 0 TR_NCCL_DTYPES(TR_COUNT_ROW_), TR_REDOP_NAMED = 0 TR_NCCL_REDOPS(TR_COUNT_ROW_), TR_NAME_TMP = 32 };
#undef TR_COUNT_ROW_
const char *tr_dtype_name(int32_t dt, char *tmp);
const char *tr_redop_name(int32_t op, char *tmp);
char *tr_put_dtype(char *p, int32_t dt);
char *tr_put_redop(char *p, int32_t op);

#define NONE TRR_NONE    /* no reduction op / root / peer */
enum { CAPT_NO = TRR_CAPT_NO, CAPT_YES = TRR_CAPT_YES, CAPT_UNKNOWN = TRR_CAPT_UNKNOWN };

/* ---- the communicator table (tr_comm.c) ---------------------------------------- */

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
/* Id of the first communicator made from a unique id (job identity), 0 if none. */
uint64_t tr_nccl_first_comm_id(void);

/* Index of the communicator behind a handle, -1 if never seen. */
int32_t tr_comm_lookup(ncclComm_t h);
tr_comm *tr_comm_at(int32_t idx);          /* NULL past the end */
int32_t tr_comm_count(void);
/* Learns size and rank of a split communicator from NCCL; only called from
 * an application thread that is using the communicator (so it is alive and,
 * for a correct program, ready). */
void tr_comm_resolve(tr_comm *c, ncclComm_t h);
/* Per-peer numbers: sends, receives, signals sent (PutSignal and Signal),
 * signals waited for. tr_comm_p2p: the count for peer after n more, without
 * taking them (take = 0) or taking them (take = 1); 0 when the peer is out
 * of range. */
enum { TR_P2P_SEND, TR_P2P_RECV, TR_P2P_SIGNAL, TR_P2P_WAIT, TR_P2P_DIRS };
uint64_t tr_comm_p2p(tr_comm *c, ncclComm_t h, int peer, int dir, uint64_t n, int take);
/* Collective number s of c (op, dtype, redop, root as recorded) enters its
 * fingerprint (docs/trace-format.md, "Fingerprints"); the caller numbered it. */
void tr_comm_fp_note(tr_comm *c, uint64_t s, int op, int32_t dtype, int redop, int root, uint64_t count);

/* A communicator whose init call entered (tr_lifecycle.c): what the call
 * tells of it. */
typedef struct {
    int kind;                      /* TR_KIND_* */
    uint64_t id;
    int32_t parent;                /* index, -1 */
    int size, rank, device, blocking;   /* -1 unknown */
    int has_color, color, key;
    uint64_t enter;
    int32_t stack;
    int from_uid;                  /* made from an ncclUniqueId: the first one names the job */
    uint64_t grow_uid;
    int grow_ranks;
} tr_comm_init;
/* Enters it in the table (and the ring); its index, -1 when not recorded. */
int32_t tr_comm_add(const tr_comm_init *in);
/* After the init call returned r with *out the new handle. */
void tr_comm_init_done(int32_t idx, ncclResult_t r, ncclComm_t *out);
/* ncclCommSuspend (suspended 1) or ncclCommResume (0) returned r. */
void tr_comm_suspended(ncclComm_t comm, int suspended, ncclResult_t r);
/* A teardown call (TR_END_*) entered: its "end" noted (end_kind stored
 * sequentially consistent: tr_nan_comm_ending); the communicator, NULL when
 * unknown. Then it returned r: a destroy or abort asks for a trace write. */
tr_comm *tr_comm_end_begin(ncclComm_t comm, int kind);
void tr_comm_end_finish(tr_comm *c, int kind, ncclResult_t r);

/* ---- groups (tr_comm.c) ---------------------------------------------------------
 * This thread's group nesting and the number of its current outermost group
 * (read on every call: thread-local, no call); outermost groups numbered so
 * far. GroupStart enters a level (tr_group_start: a new number at the
 * outermost), the end of a group (GroupEnd, GroupSimulateEnd) leaves one
 * (tr_group_ended: at the outermost, the communicators created in the group
 * can now be asked for their size). */
extern __thread int tr_t_gdepth __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern __thread uint32_t tr_t_gnum __attribute__((tls_model("initial-exec"), visibility("hidden")));
static inline int tr_group_depth(void) { return tr_t_gdepth; }
static inline uint32_t tr_group_current(void) { return tr_t_gdepth > 0 ? tr_t_gnum : 0; }
void tr_group_start(void);
void tr_group_ended(ncclResult_t r);
uint32_t tr_group_count(void);

/* ---- the last collective of each device (tr_comm.c) -------------------------------
 * For the memory peak's "peak_after" (tr_nccl_last_collective, above):
 * (comm index + 1) << 40 | seq, per device and [0] for any device; stored by
 * the collective wrappers (tr_comm_note_last, inline: every collective). */
#define TR_LAST_DEVICES 64
#define TR_LAST_SEQ_MASK ((1ull << 40) - 1)
extern _Atomic uint64_t tr_g_last[TR_LAST_DEVICES + 1] __attribute__((visibility("hidden")));
static inline void tr_comm_note_last(tr_comm *c, int32_t ci, uint64_t seq)
{
    uint64_t v = ((uint64_t)(ci + 1) << 40) | (seq & TR_LAST_SEQ_MASK);
    int d = atomic_load_explicit(&c->device, memory_order_relaxed);
    atomic_store_explicit(&tr_g_last[0], v, memory_order_release);
    if (d >= 0 && d < TR_LAST_DEVICES) atomic_store_explicit(&tr_g_last[d + 1], v, memory_order_release);
}

/* ---- the vocabulary and the loaded library (tr_vocab.c) ------------------------- */

/* The loaded NCCL library (tr_vocab.c), read once at the first
 * communicator (scan_now = 1); NULL until then. */
typedef struct {
    int scanned;
    int version;                   /* ncclGetVersion, 0 unknown */
    uint32_t exports;              /* nccl* functions it exports */
    uint32_t nunknown, unknown_dropped;
    uint32_t unknown_len;          /* bytes of unknown, the final empty name included */
    char path[512];
    char unknown[2048];            /* names the vocabulary does not know, NUL-separated, "" last */
} tr_nccl_library;
const tr_nccl_library *tr_nccl_library_info(int scan_now);

int tr_nccl_version(void);         /* ncclGetVersion, 0 if unknown (tr_vocab.c) */
/* "nccl": the loaded library once a communicator was made (tr_vocab.c), null before */
void tr_nccl_library_write_json(tr_json *j);

/* *Config collectives (tr_nccl_config.c): the config's number + 1 in the
 * trace's "coll_configs" (stored once per distinct config, with a
 * TRR_BLOB_COLLCONFIG in the ring), 0 when it could not be stored. */
uint32_t tr_config_note(const ncclCollConfig_t *config);
void tr_config_write_json(tr_json *j);

/* A wrapper whose real NCCL function was not found: one warning, and the
 * call fails. */
#define NO_REAL(name)                                                                  \
    do {                                                                               \
        tr_warn(name ": the real NCCL function was not found");                        \
        return ncclSystemError;                                                        \
    } while (0)

#endif
