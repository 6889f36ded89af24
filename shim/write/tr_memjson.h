/* The "memory" of a trace (tr_memjson.c), for the writer (tr_writer.c).
 * Private to write/ (tests/shim_mem checks it on its own). */
#ifndef TR_MEMJSON_H
#define TR_MEMJSON_H

#include "tr_core.h"

/* Writes the "memory" member for device (-1: every device). */
void tr_memory_write_json(tr_json *j, int device);

#endif
