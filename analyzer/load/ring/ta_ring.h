/* Ring files, read by load.c next to the JSON traces: ring.c reads and
 * checks one, ring_trace.c makes its traces and pairs them with JSON ones.
 * (Private to load/: its boundary header is ta_load.h.) */
#ifndef TA_RING_H
#define TA_RING_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "model/ta_model.h"

/* What load.c needs to pair a ring with the JSON traces of its process, and
 * the ring's notes that only matter when its traces are used (torn records,
 * stacks the shim could not store, ...). */
typedef struct {
    char *host;
    int64_t pid;
    double start_time;    /* Unix time: with host and pid, the process */
    uint64_t head;        /* records handed out: the JSON's ring.next when nothing came after its write */
    int state, signo;     /* TRR_RUNNING, TRR_EXITED, TRR_SIGNALED; other: unknown */
    int alive;            /* RUNNING, and the process runs on this host with a fresh heartbeat */
    int64_t last_ns;      /* last sign of life (CLOCK_MONOTONIC), TA_NULL64 */
    char **notes; int nnotes;
} ta_ring_info;

/* What one input file gave (load.c reads them in parallel): a JSON trace,
 * or the traces of a ring file. */
typedef struct {
    ta_trace **tr; int ntr;
    int is_ring;
    ta_ring_info ri;          /* a ring */
    int64_t ring_next;        /* a JSON trace: its ring.next, -1 none */
} ta_file_traces;

/* ring.c: trshim.*.ring; the file open at fd starts with the ring magic */
int ta_ring_name(const char *name);
int ta_ring_sniff(int fd);
void ta_ring_info_free(ta_ring_info *info);
/* ring_trace.c: Reads the ring file at path (open at fd, a regular file: st its fstat)
 * into one trace per rank of its process (a process driving several
 * devices: one per device, as the shim writes its JSON traces). Returns the
 * number of traces, or -1 with a note naming the file when it is not
 * usable. modlk guards a->mods. */
int ta_ring_read(ta_an *a, const char *path, int fd, const struct stat *st, pthread_mutex_t *modlk, ta_trace ***out,
                 ta_ring_info *info);
/* Each ring of res against the JSON traces of its process (same host, pid,
 * start time): the JSON is used when the ring holds nothing newer, else
 * the ring's calls. Traces not used are freed (tr[k] NULL,
 * or ntr 0); the notes of the rings whose traces are used are added. */
void ta_ring_pair(ta_an *a, char **files, ta_file_traces *res, int nfiles);
/* load_env.c: frees a trace's "system" and "env_changes" (ta_trace_free calls it) */
void ta_env_free(ta_trace *t);

#endif
