/* What the hang analysis (rootcause.c) says about a root finding's sides,
 * in hang_sides.c: how its culprits ended and what they did last, which
 * members of a stuck collective issued it (the "others" of a missing
 * finding) and which had not issued it either.
 * (Private to findings/: its boundary header is ta_finding.h.) */
#ifndef TA_HANG_H
#define TA_HANG_H

#include "ta_finding.h"

/* appends to f's message, per culprit trace (4 at most): how it ended (its
 * crash, Python exception or end), its errors, its last call; then the
 * others' NCCL errors */
void ta_hang_end_info(ta_an *a, ta_finding *f, const int *cul_t, int ncul);
/* f (missing, at f->g/f->seq, its culprits set): its others are
 * the members of f->g that issued f->seq (rep_t/rep_c: their call), never a
 * member that did not; those that did not and are not culprits (each waits
 * in an earlier call: their trace was written before the others went on,
 * or they wait on something else) are said in the message, after
 * ta_finding_describe: ta_hang_behind_text */
void ta_hang_missing_others(ta_an *a, ta_finding *f, int rep_t, int64_t rep_c);
/* "; ranks 1, 2 had not issued it either: each waits in an earlier call
 * (their last seq on this communicator: 192-200)", NULL when every member
 * is a culprit or issued it */
char *ta_hang_behind_text(ta_an *a, const ta_finding *f);

#endif
