/* The scanner of the "calls" array (calls.c) and of "checks" (checks.c), used by load.c.
 * (Private to load/: its boundary header is ta_load.h.) */
#ifndef TA_CALLS_H
#define TA_CALLS_H
#include <stddef.h>
#include <stdint.h>
#include "model/ta_model.h"
#include "trshim/trace_format.h"

/* A call's and a check's fields: the tables of trshim/trace_format.h (the
 * writer's too), numbered TRSHIM_CALL_* and TRSHIM_CHECK_*; the REQUIRED
 * ones as a mask of those numbers (a row's scanner checks it). */
#define TA_FIELD_REQ_(id, name, read, since) | (TRSHIM_FIELD_##read == TRSHIM_FIELD_REQUIRED ? 1 << TRSHIM_CALL_##id : 0)
enum { TA_CALL_REQUIRED = 0 TRSHIM_CALL_FIELDS(TA_FIELD_REQ_) };
#undef TA_FIELD_REQ_
#define TA_FIELD_REQ_(id, name, read, since) | (TRSHIM_FIELD_##read == TRSHIM_FIELD_REQUIRED ? 1 << TRSHIM_CHECK_##id : 0)
enum { TA_CHECK_REQUIRED = 0 TRSHIM_CHECK_FIELDS(TA_FIELD_REQ_) };
#undef TA_FIELD_REQ_
/* the names and READ of each (load.c, load_fields.c) */
typedef struct { const char *name; int read; } ta_field;
extern const ta_field ta_call_fields[TRSHIM_CALL_FIELD_N], ta_check_fields[TRSHIM_CHECK_FIELD_N];
/* the number of tab's field named name; -1 when none is, or it is UNREAD */
int ta_field_find(const ta_field *tab, int n, const char *name);
/* the name of the first REQUIRED field of tab not in the mask have; NULL none */
const char *ta_field_missing(const ta_field *tab, int n, unsigned have);

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
