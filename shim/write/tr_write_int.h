/* The "comms" and "calls" of a trace (tr_calls_json.c over tr_comm_json.c),
 * which the writer (tr_writer.c) puts together with the other parts' JSON.
 * Private to write/. */
#ifndef TR_WRITE_INT_H
#define TR_WRITE_INT_H

#include <stdint.h>

#include "tr_core.h"
#include "tr_record.h"

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

/* Views (tr_comm_json.c): whether a communicator belongs to the rank of view;
 * whether its init or teardown call has not returned; writes "comms" and
 * fills map[i] = the view's index of communicator i (-1 when not in it),
 * returns 1 when the init or teardown of one of them had not returned. */
int tr_comm_in_view(const tr_comm *c, const tr_rank_view *view);
int tr_comm_busy(const tr_comm *c);
int tr_comm_write_json(tr_json *j, const tr_rank_view *view, int32_t *map, int n);

#endif
