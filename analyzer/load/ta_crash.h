/* The rank that died (issue 21), read: the crash the shim captured at the
 * fatal signal, the uncaught Python exception (ta_pyexc, ta_model.h) and the
 * first CUDA / NCCL errors, from JSON traces and ring files (crash.c). Said
 * in the root cause and --json by findings/crash_out.c (ta_crash_out.h).
 * (Private to load/: its boundary header is ta_load.h.) */
#ifndef TA_CRASH_H
#define TA_CRASH_H

#include "model/ta_model.h"

struct cJSON;
/* load.c: a JSON trace's "crash" and "errors" (after its stacks); damaged: a note naming path */
void ta_crash_json(ta_an *a, const char *path, const struct cJSON *root, ta_trace *t);
/* ring_trace.c: dst takes src's crash and errors when it has none (the JSON trace of a process, from its ring) */
void ta_crash_adopt(ta_trace *dst, ta_trace *src);
void ta_crash_free(ta_trace *t);

#endif
