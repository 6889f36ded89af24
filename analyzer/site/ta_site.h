/* Call sites: Python stacks (pystack.c) and native frames named with
 * libdw (symbolize.c).
 * site/'s boundary header. */
#ifndef TA_SITE_H
#define TA_SITE_H

#include "model/ta_model.h"

/* symbolize.c */
char *ta_symbolize_frame(ta_an *a, const ta_frame *fr, int innermost);  /* "fn (file:line)" */
char *ta_native_site_text(ta_an *a, const ta_trace *t, int stack);      /* innermost frame */
const char *ta_native_site_function(ta_an *a, const ta_trace *t, int stack);
void ta_symbolize_done(void);
void ta_module_notes(ta_an *a);     /* notes about missing/different modules */

/* pystack.c: Python call sites */
/* call sites: a native stack and a Python stack (-1: none) of a trace; the
 * Python stacks decide when both calls have one, else the native ones */
int ta_site_equal(const ta_an *a, const ta_trace *t1, int s1, int p1, const ta_trace *t2, int s2, int p2);
void ta_py_prepare(ta_trace *t);             /* folded flags, each stack's site and key */
int ta_py_valid(const ta_trace *t, int pystack);   /* a Python stack with frames */
/* a string of a trace (s[0..n), up to a NUL) made safe for any output, interned */
const char *ta_py_intern(const char *s, size_t n);
void ta_py_code_set(ta_pycode *c, const char *file, size_t flen, const char *name, size_t nlen, int firstline);
void ta_py_free(ta_trace *t);                /* pycodes and pystacks */
#define TA_PY_FRAMES_MAX 4096                /* frames of a Python stack (the shim keeps at most 256) */
#define TA_PY_TABLE_MAX (1 << 22)            /* Python codes or stacks of a trace */
/* "train.py:212 in train_step" (--full-stacks: every Python frame, innermost
 * first, then the native site); without a Python stack, the native site */
char *ta_site_text(ta_an *a, const ta_trace *t, int stack, int pystack);
/* the function alone: the Python qualified name, else the native function */
const char *ta_site_function(ta_an *a, const ta_trace *t, int stack, int pystack);

/* pyroots.c: which files are a library's (issue 18), by the install
 * folders the shim recorded (trace python.roots, ring PYROOTS blob) */
enum { TA_PY_USER = 0, TA_PY_LIB = 1, TA_PY_STDLIB = 2 };
int ta_py_class(const ta_trace *t, const char *file);    /* TA_PY_*; t NULL: no recorded folders */
int ta_py_folded(const char *file);          /* ta_py_class(NULL, file) != TA_PY_USER */
/* how much of a library file's path names its package (site-packages/torch) */
size_t ta_py_package_len(const ta_trace *t, const char *file);
/* --fold DIR (fold 1) / --no-fold DIR (0): files under DIR (absolute: a
 * prefix; relative: whole folders anywhere) are a library's / the user's;
 * the deepest such folder decides, before what the trace recorded. -1: no DIR */
int ta_py_fold_option(const char *dir, int fold);
void ta_py_fold_reset(void);                 /* no --fold / --no-fold (tests) */
struct cJSON;
/* python.roots of a trace's "python" object (a note when damaged: not used) */
void ta_pyroots_json(ta_an *a, const char *file, ta_trace *t, const struct cJSON *python);
/* a TRR_BLOB_PYROOTS payload into out (the first one counts): 0 when damaged */
int ta_pyroots_blob(ta_pyroots *out, const void *payload, uint32_t bytes);
void ta_pyroots_copy(ta_pyroots *dst, const ta_pyroots *src);   /* when dst has none */
void ta_pyroots_free(ta_pyroots *r);

/* replay.c: how a call replayed by a CUDA graph launch is named */
/* ta_site_text of a call; a replayed call's with " (replay 42 of graph G1,
 * captured at train.py:88 in main, launched at train.py:95 in main)" */
char *ta_call_site_text(ta_an *a, const ta_trace *t, int64_t ci);
/* ta_call_text, a replayed call's with " (replay 42 of graph G1, captured at ..., launched at ...)" */
char *ta_call_text_replay(ta_an *a, const ta_trace *t, int64_t ci);
/* "replay 42 of graph G1, captured at ..., launched at ..."; NULL: not a replay */
char *ta_replay_text(ta_an *a, const ta_trace *t, int64_t ci);
const char *ta_graph_name(const ta_an *a, int gid);        /* "G1"; "G?" unknown (thread-local, 8 at a time) */
char *ta_graph_id(const ta_an *a, int gid);                /* "0x..." of its key; NULL unknown */
int ta_graph_gid(const ta_trace *t, int gi);               /* the job-wide graph of graph gi of t, -1 */
char *ta_capture_site_text(ta_an *a, const ta_trace *t, int gi);   /* where graph gi's capture began */
char *ta_launch_site_text(ta_an *a, const ta_trace *t, const ta_callx *x);   /* where a replay was launched */

#endif
