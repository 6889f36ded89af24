/* Loading (load.c): the files named or found below a folder, read in
 * parallel (JSON traces, ring files, write-failed markers), checked, and
 * grouped by job; the analysed job's traces by rank in a->tr. */
#ifndef TA_LOAD_H
#define TA_LOAD_H

#include "ta_model.h"

int ta_load(ta_an *a, char **paths, int npaths);   /* 0 ok, -1 nothing usable */

#endif
