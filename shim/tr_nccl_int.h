/* Shared by tr_nccl.c (call records, collective/p2p/group wrappers) and
 * tr_comm.c (communicator table and lifecycle wrappers); tr_nancheck.c
 * reads the communicator table (is a communicator going away). */
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

#define NONE TRR_NONE    /* no reduction op / root / peer */
enum { CAPT_NO = TRR_CAPT_NO, CAPT_YES = TRR_CAPT_YES, CAPT_UNKNOWN = TRR_CAPT_UNKNOWN };

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

/* Views (tr_comm.c): whether a communicator belongs to the rank of view;
 * whether its init or teardown call has not returned; writes "comms" and
 * fills map[i] = the view's index of communicator i (-1 when not in it),
 * returns 1 when the init or teardown of one of them had not returned. */
int tr_comm_in_view(const tr_comm *c, const tr_rank_view *view);
int tr_comm_busy(const tr_comm *c);
int tr_comm_write_json(tr_json *j, const tr_rank_view *view, int32_t *map, int n);

/* Groups (tr_nccl.c): number of the current outermost group of this thread, 0;
 * outermost groups numbered so far. */
uint32_t tr_group_current(void);
uint32_t tr_group_count(void);
/* Called by the GroupEnd wrapper when the outermost group ended (tr_comm.c):
 * comms created in it can now be asked for their size. */
void tr_comm_group_ended(ncclResult_t r);

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

/* *Config collectives (tr_nccl_config.c): the config's number + 1 in the
 * trace's "coll_configs" (stored once per distinct config, with a
 * TRR_BLOB_COLLCONFIG in the ring), 0 when it could not be stored. */
uint32_t tr_config_note(const ncclCollConfig_t *config);
void tr_config_write_json(tr_json *j);

/* The calling thread's current device from the real cudaGetDevice, without
 * disturbing its CUDA error state; -1 when it cannot be asked. */
int tr_cuda_device(void);

/* A wrapper whose real NCCL function was not found: one warning, and the
 * call fails. */
#define NO_REAL(name)                                                                  \
    do {                                                                               \
        tr_warn(name ": the real NCCL function was not found");                        \
        return ncclSystemError;                                                        \
    } while (0)

#endif
