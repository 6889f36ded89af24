/* The identity of trshim's trace files, shared by the writer (libtrshim.so)
 * and the reader (tranalyze) so the two can never disagree. The format
 * itself is documented in docs/trace-format.md; a change that an older
 * reader would misread bumps TRSHIM_TRACE_VERSION. */
#ifndef TRSHIM_TRACE_FORMAT_H
#define TRSHIM_TRACE_FORMAT_H

#define TRSHIM_TRACE_FORMAT "trshim-trace"
#define TRSHIM_TRACE_VERSION 1
/* Trace file names: TRSHIM_TRACE_PREFIX<job>.r<rank>.<host>.<pid>.json */
#define TRSHIM_TRACE_PREFIX "trshim."

#endif
