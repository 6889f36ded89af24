/* Loading (load.c): the files named or found below a folder, read in
 * parallel (JSON traces, ring files, write-failed markers), checked, and
 * grouped by job; the analysed job's traces by rank in a->tr. */
#ifndef TA_LOAD_H
#define TA_LOAD_H

#include "ta_model.h"

int ta_load(ta_an *a, char **paths, int npaths);   /* 0 ok, -1 nothing usable */

/* graphs.c: CUDA graph launches replaced by the calls they replay (each
 * trace once read, JSON or ring alike), and the job's graphs identified
 * across ranks (once the job's traces are known) */
void ta_graphs_expand(ta_an *a, ta_trace *t);
void ta_graphs_identify(ta_an *a);

#endif
