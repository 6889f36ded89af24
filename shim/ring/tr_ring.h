/* The ring file (tr_ring.c): records, communicators, stacks and modules
 * stored as they happen in a MAP_SHARED mapping of
 * TRSHIM_DIR/trshim.<job>.<host>.<pid>.ring, so that a killed process leaves them
 * behind. Layout and commit protocol: include/trshim/ring_format.h. When the
 * file cannot be made (unwritable folder, full disk), the same layout lives
 * in anonymous memory: one "trshim:" line, everything else unchanged.
 * ring/'s boundary: the one header of the folder a file outside it
 * includes (tr_ring_int.h is private). */
#ifndef TR_RING_H
#define TR_RING_H

#include <stdint.h>

#include "trshim/ring_format.h"

/* Maps the ring (at activation, tr_init.c, before any record is taken); returns 0,
 * or -1 when not even anonymous memory could be had (then no records). */
int tr_ring_open(void);
/* The file's path, NULL when the ring is in anonymous memory or not open. */
const char *tr_ring_path(void);
uint64_t tr_ring_capacity(void);
/* Records handed out so far (the next record's index). */
uint64_t tr_ring_head(void);

/* A new record: the slot of index *index, its stamp cleared and every other
 * field zeroed; the caller fills the entry fields and calls
 * tr_ring_commit. NULL when there is no ring. */
trr_record *tr_ring_alloc(uint64_t *index);
void tr_ring_commit(trr_record *r, uint64_t index);
/* The record of index, NULL when it was not committed yet or was overwritten
 * by a newer one (a reader must recheck the stamp after reading if it needs
 * a consistent copy: tr_ring_read). */
trr_record *tr_ring_get(uint64_t index);
/* A consistent copy of record index (stamp checked before and after): 1, or
 * 0 when it is gone or not committed. */
int tr_ring_read(uint64_t index, trr_record *out);

/* A new communicator slot (NULL: none left, counted in comms_dropped). */
trr_comm *tr_ring_comm_new(int32_t *slot);
/* The slot of a given index, for the shim's communicator table (tr_comm.c),
 * whose index is the slot index (so concurrent creations cannot make the
 * two disagree): cleared (parent, init_stack, size, rank, device -1,
 * fp_step = the header's fp_interval), ncomms raised to cover it; NULL when
 * slot >= max_comms (counted in comms_dropped) or there is no ring. The
 * caller writes the identity fields, then valid = 1 (release). Not to be
 * mixed with tr_ring_comm_new. */
trr_comm *tr_ring_comm_claim(int32_t slot);
/* A slot handed out (below ncomms), NULL otherwise; check `valid`. */
trr_comm *tr_ring_comm_at(int32_t slot);
/* The first checkpoint interval (header fp_interval; a power of two). */
uint32_t tr_ring_fp_interval(void);

/* A new stack of index idx (tr_stack.c, right after it interned the stack,
 * outside its table lock): appends the modules its addresses fall in that
 * were not stored yet, then the stack; counted in stacks_dropped when the
 * blob area is full. Stack blobs of different threads may come out of index
 * order; a module blob always precedes the first stack that needs it. */
void tr_ring_add_stack(uint32_t idx, const uintptr_t *ip, uint32_t n);

/* Python code object idx and Python stack idx (tr_pystack.c, with its
 * table lock held, so that a code blob always precedes the first stack
 * blob that uses it): appended, or counted as dropped (return 0) when the
 * blob area is full. A stack is stored only after every code it uses was. */
int tr_ring_add_pycode(uint32_t idx, int32_t firstlineno, const char *file, const char *qualname);
int tr_ring_add_pystack(uint32_t idx, const trr_pyframe *frames, uint32_t n);
/* Any other blob: a fixed part then tail_len bytes (kind TRR_BLOB_*;
 * tr_nccl_config.c, tr_vocab.c). 1 when stored. */
int tr_ring_add_blob(uint32_t kind, const void *head, size_t head_len, const void *tail, size_t tail_len);
/* A blob of kind whose payload (bytes, zeroed) the caller fills in later,
 * in place (tr_crash.c: the crash record, reserved at activation so that a
 * signal handler can fill it without a lock): the payload, NULL when there
 * is no ring or no room. */
void *tr_ring_reserve_blob(uint32_t kind, size_t bytes);
/* A stack (native or Python) not stored: counted in the header's stacks_dropped. */
void tr_ring_stack_dropped(void);

/* Backs the next record slots on disk ahead of use when the ring file is
 * filling (the completion poller, each turn: one load when nothing to do). */
void tr_ring_grow_ahead(void);
/* The writer named the traces after job_part (tr_job_file_part): the ring
 * file, named at activation, takes the same job (renamed once, in folder
 * dfd; left as it is when that fails). With the writer's lock held. */
void tr_ring_name_job(int dfd, const char *job_part);
/* After a clean exit wrote every trace: the ring file is removed (the
 * mapping stays for whatever still records). */
void tr_ring_retire(void);

/* Something could not be written to the trace folder (err: the ring file
 * could not grow, a trace write failed): the header's lost_errno keeps the
 * first such error. Returns -1 when err is not a full folder (ENOSPC,
 * EDQUOT); else 1 the first time in this process, when the caller says so
 * in its one line, and 0 afterwards (said already: the caller says
 * nothing, whatever else fails for lack of room). */
int tr_ring_folder_full(int err);
/* Process state in the header; async-signal-safe. */
void tr_ring_set_state(int state, int signo);
/* "Still alive": the header's heartbeat_ns := now; async-signal-safe. */
void tr_ring_heartbeat(void);
/* One more JSON trace write completed. */
void tr_ring_count_write(void);

/* ---- the header's live fields (tr_ring_live.c) --------------------------------
 * What a watcher reading the ring of a running rank needs (tranalyze
 * --watch): stores into the mapped header, no lock, no system call. */

/* The hang watchdog (tr_watchdog.c, the poller thread) started a hang:
 * rec1 is the stuck call's record index + 1 (0: a communicator's init or
 * end), since_ns when it began to wait, now_ns when it was found stuck
 * (stall_ns, stored last); stalls counted. */
void tr_ring_stall(uint64_t rec1, uint64_t since_ns, uint64_t now_ns);
/* The hang is over (nothing overdue any more): stall_ns = 0. */
void tr_ring_stall_over(void);
/* The completion poller's pass (tr_complete.c) ended at now_ns with n
 * operations tracked and not complete, the oldest enqueued at since_ns (0:
 * none). Relaxed stores: a watcher reads them as hints. */
void tr_ring_pending(uint32_t n, uint64_t since_ns, uint64_t now_ns);

/* Device memory (tr_memory.c counts into the slot: tr_memory_int.h): the
 * header's slot of device, claimed on first use (the first
 * TRR_MEM_DEVICES devices used get one; each later device is counted once
 * in mem_devices_dropped); NULL when there is none (no ring, no slot,
 * device outside [0, TR_RING_MEM_LOOKUP)), for good: a device's answer
 * never changes once given. The fast path is one load. */
#define TR_RING_MEM_LOOKUP 64
extern trr_mem *tr_ring_mem_of[TR_RING_MEM_LOOKUP];   /* device -> its slot, once claimed */
trr_mem *tr_ring_mem_claim(int device);
static inline trr_mem *tr_ring_mem(int device)
{
    if ((unsigned)device >= TR_RING_MEM_LOOKUP) return NULL;
    trr_mem *m = __atomic_load_n(&tr_ring_mem_of[device], __ATOMIC_ACQUIRE);
    return __builtin_expect(m != NULL, 1) ? m : tr_ring_mem_claim(device);
}
/* The slot of device if it was claimed, NULL otherwise (claims nothing). */
static inline trr_mem *tr_ring_mem_peek(int device)
{
    return (unsigned)device < TR_RING_MEM_LOOKUP ? __atomic_load_n(&tr_ring_mem_of[device], __ATOMIC_ACQUIRE)
                                                  : NULL;
}
/* The first failed allocation of a slot's device, once (the caller counted
 * it in failures and saw 0 before): stack and pystack are the ring's
 * indexes (as records'), -1; free_bytes and total_bytes UINT64_MAX when
 * unknown. */
void tr_ring_mem_failed(trr_mem *m, const char *api, int code, uint64_t bytes, uint64_t live,
                        uint64_t free_bytes, uint64_t total_bytes, uint64_t t_ns, int32_t stack,
                        int32_t pystack);

#endif
