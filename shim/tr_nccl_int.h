/* Shared by tr_nccl.c (call records, collective/p2p/group wrappers) and
 * tr_comm.c (communicator table and lifecycle wrappers); tr_nancheck.c
 * reads the communicator table (is a communicator going away). */
#ifndef TR_NCCL_INT_H
#define TR_NCCL_INT_H

#include <stdatomic.h>
#include <stdint.h>
#include <nccl.h>

#include "tr_core.h"
#include "tr_ring.h"

enum { TR_KIND_INITRANK, TR_KIND_INITRANKCONFIG, TR_KIND_INITRANKSCALABLE, TR_KIND_INITALL,
       TR_KIND_SPLIT, TR_KIND_SHRINK };
enum { TR_END_NONE, TR_END_FINALIZE, TR_END_DESTROY, TR_END_ABORT, TR_END_REVOKE };
_Static_assert((int)TR_KIND_SHRINK == (int)TRR_KIND_SHRINK && (int)TR_END_REVOKE == (int)TRR_END_REVOKE,
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

    atomic_int end_kind;           /* TR_END_* of the last lifecycle call */
    _Atomic uint64_t end_enter, end_exit;  /* end_exit 0: not returned */
    atomic_int end_rc;

    _Atomic uint64_t colls;        /* collectives numbered */
    _Atomic uint32_t splits;       /* splits and shrinks issued on it */
    _Atomic(_Atomic uint64_t *) p2p;   /* [2 * p2p_n]: sends then receives per peer */
    _Atomic int32_t p2p_n;
} tr_comm;

#define TR_MAX_COMMS 65536

/* Index of the communicator behind a handle, -1 if never seen. */
int32_t tr_comm_lookup(ncclComm_t h);
tr_comm *tr_comm_at(int32_t idx);          /* NULL past the end */
int32_t tr_comm_count(void);
/* Learns size and rank of a split communicator from NCCL; only called from
 * an application thread that is using the communicator (so it is alive and,
 * for a correct program, ready). */
void tr_comm_resolve(tr_comm *c, ncclComm_t h);
/* Next send (dir 0) or receive (dir 1) number for peer, without taking it
 * (take = 0), or taking it (take = 1). 0 when the peer is out of range. */
uint64_t tr_comm_p2p(tr_comm *c, ncclComm_t h, int peer, int dir, int take);

/* Views (tr_comm.c): whether a communicator belongs to the rank of view;
 * whether its init or teardown call has not returned; writes "comms" and
 * fills map[i] = the view's index of communicator i (-1 when not in it),
 * returns 1 when the init or teardown of one of them had not returned. */
int tr_comm_in_view(const tr_comm *c, const tr_rank_view *view);
int tr_comm_busy(const tr_comm *c);
int tr_comm_write_json(tr_json *j, const tr_rank_view *view, int32_t *map, int n);

/* Groups (tr_nccl.c): number of the current outermost group of this thread, 0. */
uint32_t tr_group_current(void);
/* Called by the GroupEnd wrapper when the outermost group ended (tr_comm.c):
 * comms created in it can now be asked for their size. */
void tr_comm_group_ended(ncclResult_t r);

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
