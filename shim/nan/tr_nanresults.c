/* The table of NaN/Inf checks and the trace's part of it (tr_nanresults.h);
 * the checks themselves are run by tr_nancheck.c.
 *
 * Results are kept per check (ring record index of the call, which buffer,
 * status, counts) in a table that, like the ring of call records, keeps
 * the newest: entry i lives in slot i % (2 x TRSHIM_RING), two checks at
 * most per call, so the checks of every call still in the ring's window
 * are kept. A slot's stamp (i + 1) tells whose it is: a result that arrives
 * for an entry whose slot was taken since is not stored. The writer places
 * them in the trace next to the calls (tr_nan_snapshot, tr_nan_place,
 * tr_nan_write_json); results of calls that left the window are not. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "tr_core.h"
#include "tr_nancheck.h"
#include "tr_nangpu.h"
#include "tr_nanresults.h"

/* ---- the table of checks ------------------------------------------------- */

enum { ST_NONE, ST_PENDING, ST_CLEAN, ST_NONFINITE, ST_NOT_CHECKED };

/* The names of the R_* reasons (tr_nanresults.h), and the kind of code err
 * holds with each. */
static const char *const reason_names[R_COUNT] = {
    NULL, "cuda_error_pending", "stream_capturing", "pool_exhausted", "pinned_alloc_failed", "copy_failed",
    "host_func_failed", "set_device_failed", "no_cuda_runtime", "gpu_unavailable", "gpu_busy",
    "gpu_launch_failed", "call_failed", "group_failed", "comm_error", "comm_ended", "enqueue_timeout",
    "comm_size_unknown", "comm_rank_unknown", "null_buffer", "group_too_large", "no_thread", "exit"};
enum { ERR_NONE, ERR_RT, ERR_DRV, ERR_NC };
static const unsigned char reason_err[R_COUNT] = {
    [R_ERROR_PENDING] = ERR_RT, [R_PINNED_ALLOC] = ERR_RT, [R_COPY] = ERR_RT, [R_HOST_FUNC] = ERR_RT,
    [R_SET_DEVICE] = ERR_RT, [R_GPU_UNAVAILABLE] = ERR_DRV, [R_GPU_LAUNCH] = ERR_DRV,
    [R_CALL_FAILED] = ERR_NC, [R_GROUP_FAILED] = ERR_NC, [R_COMM_ERROR] = ERR_NC};

/* The other fields change after the entry is published (pending, then a
 * result or not checked) while the writer thread may be reading them: each
 * is stored whole after `changes` became odd (SET: release) and loaded
 * whole (GET: acquire), and the writer keeps a copy only when `changes` was
 * the same, and even, before and after (entry_copy). One thread at a time
 * changes an entry. */
typedef struct {
    _Atomic uint64_t stamp;       /* entry index + 1 once the slot is this entry's */
    uint64_t rec;                 /* ring record index of the call */
    _Atomic uint32_t status;      /* ST_*, stored last (release) */
    uint8_t buffer, engine, reason, first_kind;   /* first_kind: 1 NaN, 2 infinity */
    int32_t err;
    _Atomic uint32_t changes;
    uint64_t checked, elems;      /* elements checked (or to be), in the buffer */
    uint64_t nan, inf, first;     /* ST_NONFINITE */
} entry;
#define SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELEASE)
#define GET(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)

static void change_begin(entry *e)
{
    atomic_store_explicit(&e->changes, atomic_load_explicit(&e->changes, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void change_end(entry *e, uint32_t status)
{
    atomic_store_explicit(&e->status, status, memory_order_release);
    atomic_store_explicit(&e->changes, atomic_load_explicit(&e->changes, memory_order_relaxed) + 1,
                          memory_order_release);
}

/* Slots in chunks allocated when first used, lock-free to read. */
#define CHUNK_BITS 12
#define CHUNK (1u << CHUNK_BITS)
#define MAX_CHUNKS (1u << 16)     /* 2^28 slots: 2 x the largest TRSHIM_RING */
static _Atomic(entry *) g_ent[MAX_CHUNKS];
static _Atomic uint64_t g_nent, g_dropped;
_Atomic uint64_t tr_nan_used_host, tr_nan_used_gpu;

/* slots: two per ring record */
static uint64_t nslots(void)
{
    uint64_t n = 2 * tr_cfg()->ring;
    return n < (uint64_t)MAX_CHUNKS * CHUNK ? n : (uint64_t)MAX_CHUNKS * CHUNK;
}

static entry *slot_at(uint64_t i, int make)
{
    uint64_t k = i % nslots();
    _Atomic(entry *) *chunk = &g_ent[k >> CHUNK_BITS];
    entry *c = atomic_load_explicit(chunk, memory_order_acquire);
    if (!c && make) {
        entry *fresh = calloc(CHUNK, sizeof *fresh);
        if (!fresh) return NULL;
        entry *expect = NULL;
        if (atomic_compare_exchange_strong(chunk, &expect, fresh)) c = fresh;
        else {
            free(fresh);
            c = expect;
        }
    }
    return c ? &c[k & (CHUNK - 1)] : NULL;
}

/* Entry i, NULL when its slot holds a newer entry (or none yet). */
static entry *entry_at(uint64_t i)
{
    entry *e = slot_at(i, 0);
    return e && atomic_load_explicit(&e->stamp, memory_order_acquire) == i + 1 ? e : NULL;
}

uint64_t tr_nan_entry_new(uint64_t rec, int buffer, uint64_t elems)
{
    uint64_t i = atomic_fetch_add(&g_nent, 1);
    entry *e = slot_at(i, 1);
    if (!e) {
        atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
        return NO_ENTRY;
    }
    atomic_store_explicit(&e->stamp, 0, memory_order_relaxed);
    change_begin(e);
    SET(e->rec, rec);
    SET(e->buffer, (uint8_t)buffer);
    SET(e->engine, (uint8_t)ENG_NONE);
    SET(e->reason, (uint8_t)R_NONE);
    SET(e->first_kind, (uint8_t)0);
    SET(e->err, 0);
    SET(e->checked, (uint64_t)0);
    SET(e->elems, elems);
    SET(e->nan, (uint64_t)0);
    SET(e->inf, (uint64_t)0);
    SET(e->first, (uint64_t)0);
    change_end(e, ST_NONE);
    atomic_store_explicit(&e->stamp, i + 1, memory_order_release);
    return i;
}

void tr_nan_entry_not_checked(uint64_t i, int reason, int err)
{
    entry *e = entry_at(i);
    if (!e) return;
    change_begin(e);
    SET(e->engine, (uint8_t)ENG_NONE);
    SET(e->reason, (uint8_t)reason);
    SET(e->err, err);
    SET(e->checked, (uint64_t)0);
    change_end(e, ST_NOT_CHECKED);
}

void tr_nan_entry_pending(uint64_t i, int engine, uint64_t checked)
{
    entry *e = entry_at(i);
    if (!e) return;
    change_begin(e);
    SET(e->engine, (uint8_t)engine);
    SET(e->reason, (uint8_t)R_NONE);
    SET(e->checked, checked);
    change_end(e, ST_PENDING);
}

void tr_nan_entry_result(uint64_t i, const tr_nanscan_result *r)
{
    entry *e = entry_at(i);
    if (!e) return;
    change_begin(e);
    if (r->nan || r->inf) {
        SET(e->nan, r->nan);
        SET(e->inf, r->inf);
        SET(e->first, r->first_nan < r->first_inf ? r->first_nan : r->first_inf);
        SET(e->first_kind, (uint8_t)(r->first_nan < r->first_inf ? 1 : 2));
        change_end(e, ST_NONFINITE);
    } else {
        change_end(e, ST_CLEAN);
    }
}

static _Atomic(const char *) g_gpu_why;     /* why the GPU engine was not used, first seen */
static _Atomic int g_gpu_why_err;

void tr_nan_note_gpu_why(const char *why, int err)
{
    const char *expect = NULL;
    atomic_store(&g_gpu_why_err, err);
    atomic_compare_exchange_strong(&g_gpu_why, &expect, why);
}

/* ---- the trace ------------------------------------------------------------------------ */

typedef struct {
    uint64_t rec;
    uint8_t buffer;
    uint64_t idx;       /* entry index */
    int64_t pos;        /* index in "calls", -1: not in this trace */
} snap_item;

struct tr_nan_snap {
    snap_item *v;
    size_t n, cursor;
};

static int cmp_item(const void *a, const void *b)
{
    const snap_item *x = a, *y = b;
    if (x->rec != y->rec) return x->rec < y->rec ? -1 : 1;
    if (x->buffer != y->buffer) return x->buffer < y->buffer ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

tr_nan_snap *tr_nan_snapshot(void)
{
    if (tr_cfg()->nancheck == TR_NAN_OFF) return NULL;
    tr_nan_snap *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    uint64_t end = atomic_load(&g_nent), keep = nslots();
    uint64_t begin = end > keep ? end - keep : 0;
    s->v = end > begin ? malloc((end - begin) * sizeof *s->v) : NULL;
    if (end > begin && !s->v) return s;
    for (uint64_t i = begin; i < end; i++) {
        entry *e = entry_at(i);
        if (!e || atomic_load_explicit(&e->status, memory_order_acquire) == ST_NONE) continue;
        s->v[s->n++] = (snap_item){.rec = GET(e->rec), .buffer = GET(e->buffer), .idx = i, .pos = -1};
    }
    if (s->n > 1) qsort(s->v, s->n, sizeof *s->v, cmp_item);     /* s->v is NULL when empty */
    return s;
}

void tr_nan_place(tr_nan_snap *s, uint64_t rec, uint64_t pos)
{
    if (!s) return;
    while (s->cursor < s->n && s->v[s->cursor].rec < rec) s->cursor++;
    for (size_t k = s->cursor; k < s->n && s->v[k].rec == rec; k++) s->v[k].pos = (int64_t)pos;
}

static const char *const nc_names[] = {"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
                                       "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage",
                                       "ncclRemoteError", "ncclInProgress"};

/* What the writer prints of an entry: a consistent copy. */
typedef struct {
    uint32_t status;
    uint8_t buffer, engine, reason, first_kind;
    int32_t err;
    uint64_t checked, elems, nan, inf, first;
} entry_view;

/* Entry i as it was at one moment (see `changes`); 0 when its slot holds
 * another entry now, or it kept changing. */
static int entry_copy(uint64_t i, entry_view *v)
{
    entry *e = slot_at(i, 0);
    if (!e) return 0;
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t c = atomic_load_explicit(&e->changes, memory_order_acquire);
        if (atomic_load_explicit(&e->stamp, memory_order_acquire) != i + 1) return 0;
        if (c & 1) continue;
        v->status = atomic_load_explicit(&e->status, memory_order_relaxed);
        v->buffer = GET(e->buffer);
        v->engine = GET(e->engine);
        v->reason = GET(e->reason);
        v->first_kind = GET(e->first_kind);
        v->err = GET(e->err);
        v->checked = GET(e->checked);
        v->elems = GET(e->elems);
        v->nan = GET(e->nan);
        v->inf = GET(e->inf);
        v->first = GET(e->first);
        if (atomic_load_explicit(&e->changes, memory_order_relaxed) == c &&
            atomic_load_explicit(&e->stamp, memory_order_relaxed) == i + 1)
            return 1;
    }
    return 0;
}

/* "reason" or "reason: error name" into out (no quotes, JSON-safe) */
static void reason_text(char *out, size_t cap, const entry_view *e)
{
    const char *base = e->reason < R_COUNT ? reason_names[e->reason] : "unknown";
    const char *name = NULL;
    char num[32];
    switch (e->reason < R_COUNT ? reason_err[e->reason] : ERR_NONE) {
    case ERR_RT:
        name = tr_cuda_error_name(e->err);
        break;
    case ERR_DRV:
        name = e->err ? tr_nangpu_error_name(e->err) : NULL;
        break;
    case ERR_NC:
        if (e->err >= 0 && e->err < (int)(sizeof nc_names / sizeof nc_names[0])) name = nc_names[e->err];
        break;
    default:
        snprintf(out, cap, "%s", base);
        return;
    }
    if (!name) {
        snprintf(num, sizeof num, "error %d", e->err);
        name = num;
    }
    if (e->reason == R_GPU_UNAVAILABLE) {
        const char *why = atomic_load(&g_gpu_why);
        snprintf(out, cap, "%s: %s%s%s", base, why ? why : "", why && e->err ? ", " : "", e->err ? name : "");
        return;
    }
    snprintf(out, cap, "%s: %s", base, name);
    /* names are identifiers; anything else would need escaping */
    for (char *q = out; *q; q++)
        if (*q == '"' || *q == '\\' || (unsigned char)*q < 0x20) *q = '?';
}

#define CHECK_FIELD_NAME(id, name, read, since) name,
static const char *const check_fields[TRSHIM_CHECK_FIELD_N] = {TRSHIM_CHECK_FIELDS(CHECK_FIELD_NAME)};

/* the words of a check row (their indices in the section's strings kept
 * by their number: trp_name) */
enum { SX_STATUS = 0, SX_ENGINE = 4, SX_INPUT = 6, SX_OUTPUT, SX_NAN, SX_INF, SX_N };
static const char *const sx_text[SX_N] = {"pending", "clean", "nonfinite", "not_checked", "host", "gpu",
                                          "input", "output", "nan", "inf"};

static uint8_t *word(trp_section *sec, uint8_t *p, int *ix, int k) { return trp_name(sec, p, &ix[k], sx_text[k]); }

void tr_nan_write_json(tr_json *j, tr_nan_snap *s)
{
    const tr_settings *cfg = tr_cfg();
    static const char *const modes[] = {"off", "output", "all"};
    static const char *const settings[] = {"auto", "host", "gpu"};
    uint64_t host = atomic_load(&tr_nan_used_host), gpu = atomic_load(&tr_nan_used_gpu);
    trj_object_begin(j, "nancheck");
    trj_str(j, "mode", modes[cfg->nancheck]);
    trj_str(j, "engine_setting", settings[cfg->nancheck_engine]);
    trj_str(j, "engine", host && gpu ? "mixed" : gpu ? "gpu" : host ? "host" : NULL);
    const char *why = atomic_load(&g_gpu_why);
    if (cfg->nancheck != TR_NAN_OFF && cfg->nancheck_engine == TR_NAN_ENGINE_HOST)
        why = "TRSHIM_NANCHECK_ENGINE=host";
    if (why && cfg->nancheck != TR_NAN_OFF) {
        char buf[256];
        int err = atomic_load(&g_gpu_why_err);
        const char *name = err ? tr_nangpu_error_name(err) : NULL;
        snprintf(buf, sizeof buf, "%s%s%s", why, name ? ": " : "", name ? name : "");
        trj_str(j, "gpu_unused", buf);
    } else {
        trj_null(j, "gpu_unused");
    }
    trj_uint(j, "max_bytes", cfg->nancheck_max_bytes);
    trj_uint(j, "pool_bytes", cfg->nancheck_pool_bytes);
    trj_uint(j, "dropped", atomic_load(&g_dropped));
    trj_object_end(j);
    if (!s) return;

    trj_array_begin(j, "check_fields");
    for (size_t i = 0; i < sizeof check_fields / sizeof check_fields[0]; i++) trj_str(j, NULL, check_fields[i]);
    trj_array_end(j);
    trp_section sec;
    trp_begin(&sec, j, "checks");
    int ix[SX_N];
    for (int k = 0; k < SX_N; k++) ix[k] = -1;
    trp_rows *w = &sec.w;
    uint8_t row[4096];
    uint8_t *p = row;
    uint64_t in_buf = 0;
    char why_txt[200];
    for (size_t k = 0; k < s->n; k++) {
        const snap_item *it = &s->v[k];
        entry_view ev, *e = &ev;
        if (it->pos < 0 || !entry_copy(it->idx, e)) continue;
        uint32_t st = e->status;
        if (st == ST_NONE || st > ST_NOT_CHECKED) continue;
        const entry_view *d = st == ST_NONFINITE ? e : NULL;
        if (p - row > (ptrdiff_t)sizeof row - 11 * TRSHIM_CHECK_FIELD_N - 16) {
            trp_put(&sec, row, (size_t)(p - row), in_buf);
            p = row;
            in_buf = 0;
        }
        p = trp_row(w, p, TRSHIM_CHECK_FIELD_N);
        for (int f = 0; f < TRSHIM_CHECK_FIELD_N; f++) {   /* the fields in the table's order */
            switch (f) {
            case TRSHIM_CHECK_CALL: p = trp_int(w, p, it->pos); break;
            case TRSHIM_CHECK_BUFFER: p = word(&sec, p, ix, e->buffer == BUF_INPUT ? SX_INPUT : SX_OUTPUT); break;
            case TRSHIM_CHECK_STATUS: p = word(&sec, p, ix, SX_STATUS + (int)st - 1); break;
            case TRSHIM_CHECK_NAN: p = trp_int(w, p, d ? (int64_t)d->nan : 0); break;
            case TRSHIM_CHECK_INF: p = trp_int(w, p, d ? (int64_t)d->inf : 0); break;
            case TRSHIM_CHECK_FIRST: p = d ? trp_int(w, p, (int64_t)d->first) : trp_null(w, p); break;
            case TRSHIM_CHECK_FIRST_KIND:
                p = d ? word(&sec, p, ix, d->first_kind == 1 ? SX_NAN : SX_INF) : trp_null(w, p);
                break;
            case TRSHIM_CHECK_ELEMS_CHECKED: p = trp_int(w, p, st == ST_NOT_CHECKED ? 0 : (int64_t)e->checked); break;
            case TRSHIM_CHECK_ELEMS: p = trp_int(w, p, (int64_t)e->elems); break;
            case TRSHIM_CHECK_ENGINE:
                p = e->engine == ENG_HOST || e->engine == ENG_GPU ? word(&sec, p, ix, SX_ENGINE + e->engine - 1)
                                                                  : trp_null(w, p);
                break;
            case TRSHIM_CHECK_REASON:
                if (st == ST_NOT_CHECKED) {
                    reason_text(why_txt, sizeof why_txt, e);
                    p = trp_name(&sec, p, NULL, why_txt);
                } else {
                    p = trp_null(w, p);
                }
                break;
            default: p = trp_null(w, p); break;
            }
        }
        in_buf++;
    }
    trp_put(&sec, row, (size_t)(p - row), in_buf);
    trp_end(&sec);
    free(s->v);
    free(s);
}
