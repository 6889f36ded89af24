/* The identity of trshim's trace files, shared by the writer (libtrshim.so)
 * and the reader (tranalyze) so the two can never disagree. The format
 * itself is documented in docs/trace-format.md; a change that an older
 * reader would misread bumps TRSHIM_TRACE_VERSION. */
#ifndef TRSHIM_TRACE_FORMAT_H
#define TRSHIM_TRACE_FORMAT_H

#define TRSHIM_TRACE_FORMAT "trshim-trace"
#define TRSHIM_TRACE_VERSION 2
/* the oldest version tranalyze reads (1: calls and checks as JSON arrays) */
#define TRSHIM_TRACE_VERSION_MIN 1
/* version 2's "calls" and "checks": {"encoding": TRSHIM_ROWS_ENCODING, "rows", "strings", "data"} */
#define TRSHIM_ROWS_ENCODING "trshim-rows-1"
/* a packed row holds at most this many values */
#define TRSHIM_ROWS_MAX_VALUES 64
/* the tags of packed values (docs/trace-format.md, "Packed rows") */
enum { TRSHIM_PK_NULL, TRSHIM_PK_BOOL, TRSHIM_PK_INT, TRSHIM_PK_ADDR, TRSHIM_PK_STR, TRSHIM_PK_PAIR };
/* Trace file names: TRSHIM_TRACE_PREFIX<job>.r<rank>.<host>.<pid>.json */
#define TRSHIM_TRACE_PREFIX "trshim."

/* A trace write that failed (disk full, quota, file-size limit...) leaves,
 * where it can, TRSHIM_TRACE_PREFIX<job>.r<rank>.<host>.<pid>.write-failed
 * (the trace's name with this suffix instead of ".json"): one line of JSON,
 * {"format": TRSHIM_WRITE_FAILED_FORMAT, "version": 1, ...}; see
 * docs/trace-format.md. Removed by the next successful write of that trace. */
#define TRSHIM_WRITE_FAILED_SUFFIX ".write-failed"
#define TRSHIM_WRITE_FAILED_FORMAT "trshim-write-failed"
#define TRSHIM_WRITE_FAILED_VERSION 1

#endif
