/* Text and Markdown writing (tx.c), for out_text.c and the kinds' text
 * writers: a finding's heading, its sides' calls, byte counts.
 * (A part of findings/' boundary header, ta_finding.h, which includes it.) */
#ifndef TA_TX_H
#define TA_TX_H

#include <stdio.h>

#include "ta_finding.h"

typedef struct ta_tx {
    ta_an *a;
    FILE *o;
    int md;                  /* Markdown */
    int top;                 /* a root cause, at the top: which (1 the first; text: "ROOT CAUSE: ",
                                then "ROOT CAUSE (2): "...), 0 not one */
    const char *ind;         /* indent of a finding's lines: "  " in text, "" in Markdown */
} ta_tx;

char *ta_human(int64_t b);   /* "1.5 GiB", "512 B"; "-" below 0 */
/* The heading ("kind / subkind on comm X (ranks), <at>") and the message.
 * at: what on the communicator: NULL "collective #seq", "" nothing, else
 * ", " and at; no communicator (g < 0): nothing. */
void ta_tx_head(ta_tx *x, const ta_finding *f, const char *at);
/* ... for a writer that then writes both sides' lines (ta_tx_side): the message names each side's
 * call briefly ("AllReduce(1 x float32, sum) #4"), its communicator and site left to the heading and
 * the side's line (the message of --json is whole) */
void ta_tx_head_sides(ta_tx *x, const ta_finding *f, const char *at);
/* a side's call and site: "rank 3<label>: AllReduce(...) at train.py:12 in step"; nothing
 * without ranks, a trace, or a call or site */
void ta_tx_side(ta_tx *x, const ta_side *s, const char *label);

#endif
