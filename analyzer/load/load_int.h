/* Internals shared by load.c (reading a trace file,
 * the reader threads, jobs and ranks) and load_fields.c (field access with
 * type checks, and the converters of a trace's sections). */
#ifndef LOAD_INT_H
#define LOAD_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "model/ta_model.h"

/* one file being converted */
typedef struct {
    ta_an *a;
    const char *file;
    char err[512];       /* first fatal problem */
} pctx;

/* writes the problem into x->err; returns -1 */
int BAD(pctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 0 ok, 1 null (when allowed), -1 problem (written into ctx->err) */
int get_i64(pctx *x, const cJSON *o, const char *name, int64_t *out, int nullable, const char *where);
int get_int(pctx *x, const cJSON *o, const char *name, int *out, int nullable, const char *where);
int get_num(pctx *x, const cJSON *o, const char *name, double *out, const char *where);
int get_str(pctx *x, const cJSON *o, const char *name, const char **out, int nullable, const char *where);
int get_bool(pctx *x, const cJSON *o, const char *name, int *out, const char *where);
/* an optional index field below n, else -1 */
int opt_index(const cJSON *o, const char *name, int n);

/* the sections of a trace, in the order load.c calls them */
/* format, version, job, rank, host, end, clock: -1 (why in x->err) when the
 * file cannot be placed; *packed: version 2 */
int conv_identity(pctx *x, const cJSON *root, ta_trace *t, int *packed);
/* versions, command line, environment, dropped, the ring's window
 * (*ring_next): noted, never fatal */
void conv_informative(pctx *x, const cJSON *root, ta_trace *t, int64_t *ring_next);
int conv_comm(pctx *x, const cJSON *o, ta_comm *m, int i);
int conv_stacks(pctx *x, const cJSON *root, ta_trace *t, ta_an *a, pthread_mutex_t *lk);
void conv_python(pctx *x, const cJSON *root, ta_trace *t);
/* load_env.c: "system" and "env_changes", optional, never fatal */
void conv_env_sections(const cJSON *root, ta_trace *t);
int conv_nan(pctx *x, const cJSON *root, ta_trace *t, const char *buf, size_t n, int packed, int have_checks,
             size_t vs, size_t ve);
int conv_memory(pctx *x, const cJSON *root, ta_trace *t);
void conv_configs(pctx *x, const cJSON *root, ta_trace *t);   /* "coll_configs", before the calls */
void conv_nccl(pctx *x, const cJSON *root, ta_trace *t);      /* "nccl" */
void conv_graphs(pctx *x, const cJSON *root, ta_trace *t);    /* load_graphs.c: "graphs", before the calls */

/* load_files.c: the inputs. An input file was found in a folder (a
 * symbolic link is not followed) or named on the command line (follow: the
 * user's choice). */
typedef struct { char *path; int follow; } ta_infile;
typedef struct { ta_infile *v; int n, cap; } ta_filevec;
void ta_list_inputs(ta_an *a, char **paths, int npaths, ta_filevec *files, ta_filevec *markers);
int ta_has_suffix(const char *n, const char *suf);
/* Opens an input for reading: never blocks, follows a symbolic link only
 * for a file named on the command line, regular files only. -1 with a
 * note naming the file. */
int ta_open_input(ta_an *a, const ta_infile *f, struct stat *st);
void ta_read_marker(ta_an *a, const ta_infile *f);
void ta_markers_place(ta_an *a);

#endif
