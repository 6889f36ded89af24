/* The vocabulary in the shim (trshim/nccl_calls.h): operation names and
 * flags, and what the loaded NCCL library exports that the vocabulary does
 * not know. (The check that every WRAP function has a wrapper is tr_nccl.c's:
 * it references the wrappers, so it belongs on top of them.)
 *
 * The library is read once, at the first communicator: its version
 * (ncclGetVersion), its path, and its exported host functions (its dynamic
 * symbol table, read from memory: no file I/O, no allocation beyond the
 * result). A function in neither list of the vocabulary is "unknown": a
 * newer NCCL added it, and calls through it are not recorded — the trace
 * says so ("nccl" in JSON, a TRR_BLOB_NCCLINFO blob in the ring) and
 * tranalyze warns. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tr_core.h"
#include "tr_nccl_int.h"

#define OP_NAME_(suffix, name, flags, alias) name,
const char *const tr_op_names[TR_OP_N] = {TR_NCCL_OPS(OP_NAME_)};
#undef OP_NAME_
#define OP_FLAGS_(suffix, name, flags, alias) flags,
const unsigned char tr_op_flags[TR_OP_N] = {TR_NCCL_OPS(OP_FLAGS_)};
#undef OP_FLAGS_

#define DTYPE_NAME_(suffix, name, bytes, kind) name,
static const char *const dtype_names[TR_DTYPE_NAMED] = {TR_NCCL_DTYPES(DTYPE_NAME_)};
#undef DTYPE_NAME_
#define REDOP_NAME_(suffix, name) name,
static const char *const redop_names[TR_REDOP_NAMED] = {TR_NCCL_REDOPS(REDOP_NAME_)};
#undef REDOP_NAME_
_Static_assert(TR_REDOP_NAMED == (int)ncclNumOps && TR_DTYPE_NAMED == (int)ncclNumTypes,
               "the tables of nccl_calls.h against ncclRedOp_t and ncclDataType_t");

const char *tr_dtype_name(int32_t dt, char *tmp)
{
    if (dt == NONE) return NULL;
    if (dt >= 0 && dt < TR_DTYPE_NAMED) return dtype_names[dt];
    *trj_put_lit(trj_put_i64(trj_put_lit(tmp, "invalid("), dt), ")") = 0;
    return tmp;
}

const char *tr_redop_name(int32_t op, char *tmp)
{
    if (op == NONE) return NULL;
    if (op >= 0 && op < TR_REDOP_NAMED) return redop_names[op];
    *trj_put_lit(trj_put_i64(trj_put_lit(tmp, op > 0 ? "premulsum(" : "invalid("), op), ")") = 0;
    return tmp;
}

static char *put_name(char *p, const char *name)
{
    return name ? trj_put_str(p, name) : trj_put_lit(p, "null");
}

char *tr_put_dtype(char *p, int32_t dt)
{
    char tmp[TR_NAME_TMP];
    return put_name(p, tr_dtype_name(dt, tmp));
}

char *tr_put_redop(char *p, int32_t op)
{
    char tmp[TR_NAME_TMP];
    return put_name(p, tr_redop_name(op, tmp));
}

#define NAME_ROW(name, op, kind, since, action) #name,
static const char *const known_names[] = {TR_NCCL_FUNCS(NAME_ROW)};
#define N_KNOWN (sizeof known_names / sizeof known_names[0])

static int is_known(const char *name)
{
    for (size_t i = 0; i < N_KNOWN; i++)
        if (!strcmp(name, known_names[i])) return 1;
    return 0;
}

/* ---- the loaded library ---------------------------------------------------------- */

static pthread_once_t g_scan_once = PTHREAD_ONCE_INIT;
static tr_nccl_library g_lib;      /* set once by scan() */

typedef ncclResult_t (*ver_fn)(int *);

static ver_fn get_version_fn(void)
{
    TR_REAL_OPT(getver, ver_fn, "ncclGetVersion", TR_LIB_NCCL);
    return getver;
}

int tr_nccl_version(void)
{
    ver_fn getver = get_version_fn();
    int v = 0;
    if (!getver || getver(&v) != ncclSuccess) return 0;
    return v;
}

static void scan(void)
{
    ver_fn getver = get_version_fn();
    if (!getver) return;
    int v = 0;
    if (getver(&v) == ncclSuccess) g_lib.version = v;
    Dl_info info;
    struct link_map *lm = tr_map_of((void *)getver);
    if (dladdr((void *)getver, &info) && info.dli_fname)
        snprintf(g_lib.path, sizeof g_lib.path, "%s", info.dli_fname);
    tr_dyn d;
    if (!lm || !tr_dyn_init_map(&d, lm)) return;
    uint32_t n = tr_dyn_count(&d);
    size_t used = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *name = tr_dyn_func_at(&d, i);
        if (!name || strncmp(name, "nccl", 4) != 0) continue;   /* pnccl*: NCCL's profiling aliases */
        g_lib.exports++;
        if (is_known(name)) continue;
        size_t len = strlen(name) + 1;
        if (used + len + 1 > sizeof g_lib.unknown) {
            g_lib.unknown_dropped++;
            continue;
        }
        memcpy(g_lib.unknown + used, name, len);
        used += len;
        g_lib.nunknown++;
    }
    g_lib.unknown_len = (uint32_t)(used + 1);     /* the list ends with an empty name */
    g_lib.scanned = 1;
    if (g_lib.nunknown)
        tr_warn("the loaded NCCL (%d) exports %u function(s) trshim does not know (first: %s): calls through "
                "them are not recorded",
                g_lib.version, g_lib.nunknown, g_lib.unknown);
    trr_ncclinfo head = {.version = g_lib.version, .exports = g_lib.exports,
                         .path_len = (uint32_t)strlen(g_lib.path) + 1, .unknown_len = g_lib.unknown_len};
    char tail[sizeof g_lib.path + sizeof g_lib.unknown];
    memcpy(tail, g_lib.path, head.path_len);
    memcpy(tail + head.path_len, g_lib.unknown, head.unknown_len);
    tr_ring_add_blob(TRR_BLOB_NCCLINFO, &head, sizeof head, tail, head.path_len + head.unknown_len);
}

const tr_nccl_library *tr_nccl_library_info(int scan_now)
{
    if (scan_now) pthread_once(&g_scan_once, scan);
    return g_lib.scanned ? &g_lib : NULL;
}

void tr_nccl_library_write_json(tr_json *j)
{
    const tr_nccl_library *l = tr_nccl_library_info(0);
    if (!l) {
        trj_null(j, "nccl");
        return;
    }
    trj_object_begin(j, "nccl");
    trj_int(j, "version", l->version);
    trj_str(j, "library", l->path);
    trj_uint(j, "exports", l->exports);
    trj_array_begin(j, "unknown_functions");
    for (const char *p = l->unknown; *p; p += strlen(p) + 1) trj_str(j, NULL, p);
    trj_array_end(j);
    if (l->unknown_dropped) trj_uint(j, "unknown_not_listed", l->unknown_dropped);
    trj_object_end(j);
}
