/* Loading (load.c): the files named or found below a folder, read in
 * parallel (JSON traces, ring files, write-failed markers), checked, and
 * grouped by job; the analysed job's traces by rank in a->tr.
 * load/'s boundary header: outside load/, the one to include. */
#ifndef TA_LOAD_H
#define TA_LOAD_H

#include "model/ta_model.h"

int ta_load(ta_an *a, char **paths, int npaths);   /* 0 ok, -1 nothing usable */
void ta_load_free(ta_an *a);                       /* what ta_load made: the traces, jobs, markers */
/* ring/ring_trace.c: everything a trace owns, and the trace */
void ta_trace_free(ta_trace *t);

/* graphs.c: CUDA graph launches replaced by the calls they replay (each
 * trace once read, JSON or ring alike), and the job's graphs identified
 * across ranks (once the job's traces are known) */
void ta_graphs_expand(ta_an *a, ta_trace *t);
void ta_graphs_identify(ta_an *a);

/* aborted.c: operations a communicator's abort released (recorded "aborted",
 * or an older shim's "done" at or after the abort began) made pending,
 * counted in aborted_ops; abort_enter the trace's first abort (each trace
 * once read, before its graph launches are expanded) */
void ta_aborts_resolve(ta_trace *t);

/* budget.c: the call budget. Each trace keeps at most its share of the
 * job's --max-calls (never fewer than TA_BUDGET_FLOOR), its newest calls;
 * the older ones count as lost from its window. */
#define TA_BUDGET_FLOOR 64
#define TA_BUDGET_DEFAULT 8000000
int64_t ta_budget_share(int64_t max_calls, int nfiles);   /* 0: no budget */
void ta_budget_trim(const ta_an *a, ta_trace *t, int64_t share);
void ta_budget_note(ta_an *a, int64_t share);

#endif
