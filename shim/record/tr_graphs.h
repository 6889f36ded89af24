/* CUDA graphs that hold NCCL calls (tr_graphs.c): the captures in
 * progress, the graphs they made, the executable graphs instantiated from
 * them, and the lanes a launch numbers (docs/trace-format.md, "CUDA
 * graphs"). The wrappers of the capture and graph API (tr_graph_api.c) and
 * the NCCL wrappers (tr_nccl.c) feed it; the writer reads it. Handles are
 * keys only: nothing here calls CUDA. Part of record/'s boundary: included
 * through tr_record.h. */
#ifndef TR_GRAPHS_H
#define TR_GRAPHS_H

#include <stdint.h>

#include "tr_nccl_int.h"

/* One lane of a graph: what one launch numbers on one communicator. */
typedef struct {
    int32_t comm;                  /* comm index (== ring slot) */
    ncclComm_t handle;             /* its handle as captured */
    uint8_t lane;                  /* TRR_LANE_* */
    int32_t peer;                  /* per-peer lanes; NONE for TRR_LANE_COLL */
    uint64_t total;                /* numbers taken per replay */
    uint32_t *colls;               /* TRR_LANE_COLL: indexes into the graph's calls, in order */
    uint32_t ncolls;
} tr_graph_lane;

/* A graph whose capture recorded NCCL calls. Immutable once published. */
typedef struct {
    trr_graph head;                /* as stored in the ring's TRR_BLOB_GRAPH */
    trr_graph_call *calls;         /* head.ncalls */
    ncclComm_t *handles;           /* the communicator handle of each call */
    tr_graph_lane *lanes;
    uint32_t nlanes;
} tr_graph;

/* A capture began on stream s (its CUDA capture id) at stack/pystack;
 * base: the cudaGraph_t it appends to (cudaStreamBeginCaptureToGraph), 0. */
void tr_graph_capture_begun(uint64_t capture_id, cudaStream_t s, int32_t stack, int32_t pystack, uintptr_t base);
/* An NCCL call on a stream of capture capture_id returned success: it is
 * the capture's next call (h: its communicator). */
void tr_graph_capture_call(uint64_t capture_id, const trr_graph_call *call, ncclComm_t h);
/* The capture ended: ok with graph (its calls become a tr_graph, stored in
 * the ring), or failed (forgotten). */
void tr_graph_capture_ended(uint64_t capture_id, int ok, uintptr_t graph, int32_t stack, int32_t pystack);

/* Executable graphs: instantiated from graph, updated to graph, destroyed;
 * a cudaGraph_t destroyed (its handle may be given out again). */
void tr_graph_exec_set(uintptr_t exec, uintptr_t graph, int instantiated);
void tr_graph_exec_forget(uintptr_t exec);
void tr_graph_forget(uintptr_t graph);

/* The graph a launch of exec replays, NULL when it holds no recorded NCCL
 * call; *replay: this launch's replay number (counted here). Cheap when no
 * graph was ever recorded (one load). */
const tr_graph *tr_graph_launching(uintptr_t exec, uint64_t *replay);

/* "graphs" of the trace (only when there is one), comm indexes through map
 * (the view's, -1 outside it; n entries). */
void tr_graph_write_json(tr_json *j, const int32_t *map, int n);

#endif
