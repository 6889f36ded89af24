/* JSON writing (jw.c), for out_json.c and the kinds' writers: a key and
 * its value at a time, commas and nesting kept by the writer.
 * (A part of findings/' boundary header, ta_finding.h, which includes it.) */
#ifndef TA_JW_H
#define TA_JW_H

#include <stdio.h>

#include "ta_finding.h"

typedef struct ta_jw { FILE *o; int first[64]; int depth; } ta_jw;   /* first: {1}, depth 0 */

/* a string value (NULL: null): the true value, escaped as JSON (hidden characters as \uXXXX: ta_esc.h),
 * bytes that are not UTF-8 made U+FFFD */
void jw_string(FILE *o, const char *s);
void jw_sep(ta_jw *w);                      /* the comma before a member or element */
void jw_key(ta_jw *w, const char *k);
void jw_open(ta_jw *w, char c);             /* '{' or '[' */
void jw_close(ta_jw *w, char c);
/* members: key and value */
void jw_str(ta_jw *w, const char *k, const char *v);
void jw_int(ta_jw *w, const char *k, long long v);
void jw_intn(ta_jw *w, const char *k, long long v, int isnull);
void jw_bool(ta_jw *w, const char *k, int v);
void jw_ints(ta_jw *w, const char *k, const int *v, int n);
void jw_dbl(ta_jw *w, const char *k, double v);   /* null when not positive */
/* a native stack (8 frames, --full-stacks all), a Python stack (null: none) */
void jw_stack(ta_jw *w, ta_an *a, const ta_trace *t, int stack, const char *k);
void jw_pystack(ta_jw *w, const ta_trace *t, int p, const char *k);
/* "site", "function" (the Python site when there is a Python stack), "python_stack", "native_site" */
void jw_site(ta_jw *w, ta_an *a, const ta_trace *t, int stack, int pystack);
/* a side's call (op, comm, seq, arguments, entry point, config, signal, site, stack), null: none */
void jw_call(ta_jw *w, ta_an *a, const char *k, const ta_side *s);
void jw_call_at(ta_jw *w, ta_an *a, const char *k, int t, int64_t ci);   /* call ci of trace t (-1: null) */
/* "graph", "replay", "capture_site", "launch_site" of call ci (null: not replayed by a CUDA graph) */
void jw_replay(ta_jw *w, ta_an *a, const ta_trace *t, int64_t ci);
/* graph_launches.c: a finding's "graph_launches" (null: none), the job's "graphs" */
void ta_graph_launches_json(ta_jw *w, ta_an *a, const ta_finding *f);
void ta_graphs_json(ta_jw *w, ta_an *a);

#endif
