/* Internals shared by ring.c (reading and checking a ring file: header,
 * slots, records), ring_blobs.c (its blob area, for ring.c), ring_mem.c
 * (the header's device memory) and ring_trace.c (the traces a ring gives,
 * and rings next to JSON traces), which calls into ring.c and ring_mem.c,
 * never the other way; ring_io.c (reads, notes, strings) is under them all.
 * (Private to load/: ring/ and crash.c, whose ring_crash_* it declares.) */
#ifndef RING_INT_H
#define RING_INT_H

#include <stdint.h>

#include "model/ta_model.h"
#include "ta_ring.h"
#include "trshim/ring_format.h"

#define RANK_MAX (1 << 24)          /* ranks, sizes: as for JSON traces */
#define COMMS_MAX (1u << 16)        /* communicator slots of a ring (the shim makes 1024) */
#define AREA_MAX (1ull << 56)       /* offsets and lengths beyond it are damage, not data */
#define FRAMES_MAX 65536

/* a communicator slot, copied out of the file */
typedef struct {
    int ok;                 /* a valid, usable slot */
    int counts;             /* its init did not fail: a communicator of the rank (shim: comm_counts) */
    trr_comm c;
} cslot;

/* a record of the window, converted */
typedef struct {
    ta_call c;
    int32_t slot;           /* comm slot, -1 */
    int32_t device;
    ta_callx x;             /* c.xf set: its config / signal (x.call unset) */
} rcall;

/* a ring file being read */
typedef struct {
    ta_an *a;
    const char *path;
    int fd;                 /* read with pread, never mapped: a hole of a full filesystem, a file
                               cut short meanwhile or a read error is a note, not SIGBUS */
    uint64_t n;             /* bytes that may be read: the file's size, at most what its header declares */
    int ioerr;              /* a read came back short (-1: the file shrank since it was opened) or failed (errno) */
    trr_header h;
    ta_ring_info *info;
    char err[300];
    /* contents */
    cslot *slots; int nslots;
    ta_stack *stacks; int nstacks;
    ta_pycode *pycodes; int npycodes;     /* Python code objects by index (file NULL: none) */
    ta_pystack *pystacks; int npystacks;  /* Python stacks by index (nframes 0: none) */
    int64_t py_badref;                    /* records naming a Python stack the ring does not hold */
    ta_pyroots pyroots;                   /* the PYROOTS blob (present 0: none) */
    ta_collcfg *cfgs; int ncfgs;          /* COLLCONFIG blobs by index (state CFG_UNKNOWN: none) */
    int64_t cfg_badref;                   /* records naming a config the ring does not hold */
    ta_graph *graphs; int ngraphs;        /* GRAPH blobs by index (valid 0: none); a call's comm is its slot */
    int graph_bad;                        /* damaged GRAPH blobs */
    /* the NCCLINFO blob (has_nccl 0: none) */
    int has_nccl;
    int64_t nccl_version, nccl_exports;
    char *nccl_lib;
    const char **nccl_unknown; int nnccl_unknown;
    rcall *calls; int64_t ncalls;
    int64_t lost_folder;    /* records of the window in slots past the header's file_records (not in the file) */
    int64_t last_ns;
    uint64_t streams[256]; int nstreams;
    struct ring_crash *crash;             /* CRASH and ERROR blobs (crash.c), NULL */
    /* the header's device memory (ring_mem.c): fixed arrays, one entry per slot at most */
    ta_memdev mdev[TRR_MEM_DEVICES]; int nmdev;       /* devices that allocated */
    ta_memfail mfail[TRR_MEM_DEVICES]; int nmfail;    /* each device's first failure, by time */
} rd;

static inline int64_t max64(int64_t x, int64_t y) { return x > y ? x : y; }

/* ring_io.c: len bytes at off of the file into buf: 0; -1 when they could
 * not all be read (the rest of buf zeros, r->ioerr the first cause) */
int ring_rd_at(rd *r, uint64_t off, void *buf, size_t len);
/* a note kept with the ring: load.c adds it once it knows the ring's traces are used */
void ring_note(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a fixed-size char array of the file as a string, safe for any output */
char *ring_str(const char *s, size_t cap);
/* Reads and checks the ring file at path (open at fd; st its fstat) into r
 * (ring.c): 0, or -1 with a note when it is not usable. ring_rd_free frees
 * what r holds (ring_trace.c makes the traces first: ta_ring_read). */
int ring_read(rd *r, ta_an *a, const char *path, int fd, const struct stat *st, pthread_mutex_t *modlk,
              ta_ring_info *info);
void ring_rd_free(rd *r);
/* ring_blobs.c: the blob area (modules, stacks, Python codes and stacks, configs, the NCCL
 * library; GRAPH, CRASH, ERROR, PYEXC, PYROOTS blobs handed to their readers), with its notes */
void ring_read_blobs(rd *r, pthread_mutex_t *modlk);

/* ring_graph.c: CUDA graphs in a ring (GRAPH blobs, GraphLaunch records);
 * nothing there notes: ring.c counts and notes what is damaged */
int ring_graph_blob(rd *r, const uint8_t *q, uint32_t n);   /* 1 kept (or a repeat), 0 damaged */
void ring_graphs_finish(rd *r);           /* once every blob is read: references checked */
/* a GraphLaunch record's own fields into o: NULL, or why the record is not used */
const char *ring_launch_fields(const rd *r, const trr_record *x, rcall *o);
/* the graphs of a trace of the ring (local: each slot's index in t's comms, -1 not t's) */
void ring_graphs_view(const rd *r, ta_trace *t, const int *local);
/* JSON trace j takes its calls and communicators from the ring's trace rt:
 * the graphs too (the shim's indexes in both; j's, whose communicators are
 * renamed to rt's by id, where the ring lacks one). Before j's comms go. */
void ring_graphs_merge(ta_trace *j, ta_trace *rt);
/* crash.c: CRASH and ERROR blobs (1 kept, 0 damaged); once the stacks are
 * made, the crash's frames (frame_of: an address of the ring as a frame);
 * a copy into each trace of the ring; freed with r */
int ring_crash_blob(rd *r, uint32_t kind, const uint8_t *q, uint32_t n);
void ring_crash_finish(rd *r, void (*frame_of)(const void *ctx, uint64_t ip, ta_frame *fr), const void *ctx);
void ring_crash_view(const rd *r, ta_trace *t);
void ring_crash_rd_free(rd *r);
/* ring_mem.c: the header's device memory, checked (once the blobs are read:
 * stack indexes); a copy into a trace of the ring (dev: its device, -1 all);
 * a JSON trace j merged with the ring's trace rt keeps its own memory,
 * takes rt's when it has none (and rt's failures when it has none: they
 * came after its last write) */
void ring_mem_read(rd *r);
void ring_mem_view(const rd *r, ta_trace *t, int dev);
void ring_mem_merge(ta_trace *j, ta_trace *rt);

#endif
