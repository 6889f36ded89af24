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

/* The fields of a call row, in the order of a trace's "call_fields" (the
 * shim writes them so; readers take positions by name). One row each:
 * X(ID, name, READ, SINCE). READ is what tranalyze does with it: REQUIRED
 * (a trace without it is refused), OPTIONAL (older traces lack it), UNREAD
 * (written for people and tools). SINCE: the traces that first had it,
 * oldest first (FIRST, COMPLETION: completion on the GPU, PYSTACK, CONFIG:
 * *Config collectives and one-sided signals, GRAPH: CUDA graph launches);
 * the tests write older traces from it. docs/trace-format.md's table of the
 * fields is checked against this one (suite versions, fields-docs). */
#define TRSHIM_CALL_FIELDS(X)                       \
    X(OP, "op", REQUIRED, FIRST)                    \
    X(COMM, "comm", REQUIRED, FIRST)                \
    X(SEQ, "seq", REQUIRED, FIRST)                  \
    X(COUNT, "count", REQUIRED, FIRST)              \
    X(DTYPE, "dtype", REQUIRED, FIRST)              \
    X(REDOP, "redop", REQUIRED, FIRST)              \
    X(ROOT, "root", REQUIRED, FIRST)                \
    X(PEER, "peer", REQUIRED, FIRST)                \
    X(SENDBUFF, "sendbuff", UNREAD, FIRST)          \
    X(RECVBUFF, "recvbuff", UNREAD, FIRST)          \
    X(STREAM, "stream", REQUIRED, FIRST)            \
    X(CAPTURING, "capturing", UNREAD, FIRST)        \
    X(GROUP, "group", REQUIRED, FIRST)              \
    X(DEPTH, "depth", UNREAD, FIRST)                \
    X(ENTER_NS, "enter_ns", REQUIRED, FIRST)        \
    X(EXIT_NS, "exit_ns", REQUIRED, FIRST)          \
    X(THREAD, "thread", UNREAD, FIRST)              \
    X(RC, "rc", REQUIRED, FIRST)                    \
    X(STACK, "stack", REQUIRED, FIRST)              \
    X(DONE_NS, "done_ns", OPTIONAL, COMPLETION)     \
    X(GPU, "gpu", OPTIONAL, COMPLETION)             \
    X(PYSTACK, "pystack", OPTIONAL, PYSTACK)        \
    X(CONFIG, "config", OPTIONAL, CONFIG)           \
    X(SIGNAL, "signal", OPTIONAL, CONFIG)           \
    X(GRAPH, "graph", OPTIONAL, GRAPH)              \
    X(REPLAY, "replay", OPTIONAL, GRAPH)            \
    X(LANE, "lane", OPTIONAL, GRAPH)

/* The fields of a NaN/Inf check row ("check_fields"), as above. */
#define TRSHIM_CHECK_FIELDS(X)                            \
    X(CALL, "call", REQUIRED, FIRST)                      \
    X(BUFFER, "buffer", REQUIRED, FIRST)                  \
    X(STATUS, "status", REQUIRED, FIRST)                  \
    X(NAN, "nan", REQUIRED, FIRST)                        \
    X(INF, "inf", REQUIRED, FIRST)                        \
    X(FIRST, "first", REQUIRED, FIRST)                    \
    X(FIRST_KIND, "first_kind", REQUIRED, FIRST)          \
    X(ELEMS_CHECKED, "elems_checked", REQUIRED, FIRST)    \
    X(ELEMS, "elems", REQUIRED, FIRST)                    \
    X(ENGINE, "engine", UNREAD, FIRST)                    \
    X(REASON, "reason", REQUIRED, FIRST)

/* what READ says, as numbers */
enum { TRSHIM_FIELD_REQUIRED, TRSHIM_FIELD_OPTIONAL, TRSHIM_FIELD_UNREAD };

#define TRSHIM_FIELD_ENUM_(id, name, read, since) TRSHIM_CALL_##id,
enum { TRSHIM_CALL_FIELDS(TRSHIM_FIELD_ENUM_) TRSHIM_CALL_FIELD_N };
#undef TRSHIM_FIELD_ENUM_
#define TRSHIM_FIELD_ENUM_(id, name, read, since) TRSHIM_CHECK_##id,
enum { TRSHIM_CHECK_FIELDS(TRSHIM_FIELD_ENUM_) TRSHIM_CHECK_FIELD_N };
#undef TRSHIM_FIELD_ENUM_

#endif
