/* Alignment (align.c): the job's communicators (members by global rank),
 * the per-seq tables built (ta_seq.h looks them up), send/recv and
 * signals matched, ring windows; the completion simulation (simulate.c).
 * align/'s boundary header (with its part ta_clock.h): outside align/, the one to include. */
#ifndef TA_ALIGN_H
#define TA_ALIGN_H

#include "model/ta_model.h"
#include "ta_clock.h"

void ta_align(ta_an *a);
void ta_align_free(ta_an *a);      /* what ta_align made (before the traces are freed) */
/* simulate.c: the completion simulation, once per analysis (after ta_align and the clocks):
 * sets a->never_done */
void ta_simulate(ta_an *a);
int64_t ta_p2p_find(const ta_an *a, int t, int lc, int peer, int dir_send, uint32_t seq);
/* signals (PutSignal/Signal) trace t sent to place peer on its comm lc: the first
 * with seq >= seq (its seq in *got), the last one (its seq in *seq); -1 none */
int64_t ta_sig_find_from(const ta_an *a, int t, int lc, int peer, uint32_t seq, uint32_t *got);
int64_t ta_sig_last(const ta_an *a, int t, int lc, int peer, uint32_t *seq);
/* trace st's signal #seq to place `to` of its comm lc was sent: st holds it or a later
 * one, or it is older than st's ring window (wall: when the wait was entered) */
int ta_sig_sent(const ta_an *a, int st, int lc, int to, uint32_t seq, double wall);
int ta_sig_equal(const ta_call *x, const ta_call *y);
/* ring windows: what a trace that lost its oldest records still covers */
uint32_t ta_window_start(const ta_trace *t, int lc);                  /* lowest seq of comm lc covered: 1 all */
/* 1: seq of g is older than t's window, or t numbered it but the full folder kept no record of it */
int ta_coll_lost(const ta_an *a, int t, int g, uint32_t seq);
int ta_p2p_lost(const ta_an *a, int t, int lc, int peer, int dir_send, uint32_t seq, double wall);

#endif
