/* The scanner of the "calls" array (calls.c) and of "checks" (checks.c), used by load.c.
 * (Private to load/: its boundary header is ta_load.h.) */
#ifndef TA_CALLS_H
#define TA_CALLS_H
#include <stddef.h>
#include <stdint.h>
#include "model/ta_model.h"

/* positions of a call, named by call_fields: F_NREQ required ones, then
 * optional ones (absent in older traces) */
enum { F_OP, F_COMM, F_SEQ, F_COUNT, F_DTYPE, F_REDOP, F_ROOT, F_PEER, F_STREAM, F_GROUP,
       F_ENTER, F_EXIT, F_RC, F_STACK, F_NREQ,
       F_DONE = F_NREQ, F_GPU, F_PYSTACK, F_CONFIG, F_SIGNAL, F_GRAPH, F_REPLAY, F_LANE, F_NROLES };

/* "0x..." (hexadecimal, nothing after it) into *out: 0, -1 when it is not */
int ta_parse_hex(const char *s, uint64_t *out);

/* Bounds [*vs, *ve) of the value of the top-level member name of the JSON
 * object in b; -1 when not found or the text is not well-formed there. */
int ta_find_member(const char *b, size_t n, const char *name, size_t *vs, size_t *ve);

/* Reads the calls b[0..n) into t->calls (t->comms and t->stacks must be
 * read already): a JSON array of arrays (version 1), or packed (version 2's
 * object). Calls that break a rule are skipped and counted in
 * t->skipped_records (the first one's reason and index returned). Returns
 * 0, -1 on a JSON syntax error at *err_at, -2 when it is not an array,
 * -3 when the packed calls are damaged (why in err). */
int ta_parse_calls(const char *b, size_t n, int packed, const int8_t *role, int npos, ta_trace *t, size_t *err_at,
                   char *err, size_t errn, const char **first_why, int *first_i);
/* positions of a check, named by check_fields (engine is not used) */
enum { CF_CALL, CF_BUFFER, CF_STATUS, CF_NAN, CF_INF, CF_FIRST, CF_FIRST_KIND, CF_CHECKED, CF_ELEMS, CF_REASON,
       CF_NREQ };

/* Bounds of several top-level members in one pass over the object: for
 * each name, found[k] = 1 and [vs[k], ve[k]) its value. -1 when the text is
 * not well-formed before the end of the object. */
int ta_find_members(const char *b, size_t n, const char *const *names, int k, size_t *vs, size_t *ve, int *found);

/* Reads the checks (an array, or version 2's packed object) into
 * t->checks (t->calls read already; nraw: the number of records of the
 * file's calls, kept or skipped). Same returns as ta_parse_calls; skipped
 * checks in t->skipped_checks. */
int ta_parse_checks(const char *b, size_t n, int packed, const int8_t *role, int npos, int64_t nraw, ta_trace *t,
                    size_t *err_at, char *err, size_t errn, const char **first_why, int *first_i);
/* Drops the repeats of a communicator listed twice in t->comms (the first
 * listing is kept), the calls made on them and their checks; calls and
 * checks are renumbered. Returns the number of repeats, the calls dropped
 * in *ncalls_dropped. */
int ta_drop_repeated_comms(ta_trace *t, int64_t *ncalls_dropped);
#endif
