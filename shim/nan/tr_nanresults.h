/* The table of NaN/Inf checks (tr_nanresults.c): one entry per check, with
 * its status and counts, written into the trace by tr_nan_snapshot,
 * tr_nan_place and tr_nan_write_json (tr_nancheck.h). Shared by
 * tr_nancheck.c, which runs the checks and records here what became of each,
 * and tr_nanresults.c; not used elsewhere. Private to nan/ (its boundary:
 * tr_nancheck.h). */
#ifndef TR_NANRESULTS_H
#define TR_NANRESULTS_H

#include <stdatomic.h>
#include <stdint.h>

#include "tr_nanscan.h"

enum { ENG_NONE, ENG_HOST, ENG_GPU };
enum { BUF_INPUT, BUF_OUTPUT };

/* Why a check did not run; with some, err holds a CUDA runtime (RT),
 * driver (DRV) or NCCL (NC) code. */
enum {
    R_NONE,
    R_ERROR_PENDING,      /* RT: the application had an error pending */
    R_CAPTURING,
    R_POOL,
    R_PINNED_ALLOC,       /* RT */
    R_COPY,               /* RT */
    R_HOST_FUNC,          /* RT */
    R_SET_DEVICE,         /* RT */
    R_NO_RUNTIME,
    R_GPU_UNAVAILABLE,    /* DRV (TRSHIM_NANCHECK_ENGINE=gpu) */
    R_GPU_BUSY,
    R_GPU_LAUNCH,         /* DRV */
    R_CALL_FAILED,        /* NC */
    R_GROUP_FAILED,       /* NC */
    R_COMM_ERROR,         /* NC */
    R_COMM_ENDED,
    R_ENQUEUE_TIMEOUT,
    R_SIZE_UNKNOWN,
    R_RANK_UNKNOWN,
    R_NULL_BUFFER,
    R_GROUP_TOO_LARGE,
    R_NO_THREAD,
    R_EXIT,
    R_COUNT
};

/* A new reason also needs its name and kind of code in tr_nanresults.c
 * (reason_names, reason_err). */

#define NO_ENTRY UINT64_MAX

/* A new entry: the check of buffer (BUF_*, elems elements) of the call
 * recorded at rec, with no status yet. NO_ENTRY when the table is full or
 * out of memory (the check is counted as dropped). */
uint64_t tr_nan_entry_new(uint64_t rec, int buffer, uint64_t elems);
/* Entry i was not checked: reason (R_*), err (a code, with some reasons). */
void tr_nan_entry_not_checked(uint64_t i, int reason, int err);
/* Entry i is being checked by engine (ENG_*), checked elements of it. */
void tr_nan_entry_pending(uint64_t i, int engine, uint64_t checked);
/* Entry i's result: clean, or its counts and first non-finite element. */
void tr_nan_entry_result(uint64_t i, const tr_nanscan_result *r);

/* Checks enqueued by each engine (the trace's "engine"). */
extern _Atomic uint64_t tr_nan_used_host, tr_nan_used_gpu;

/* Why the GPU engine was not used (the first why seen is kept; err: its
 * CUresult, the last one seen), for the trace. */
void tr_nan_note_gpu_why(const char *why, int err);

#endif
