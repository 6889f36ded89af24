/* Python stacks of the recorded calls: capture (through tr_python.c, which
 * reads the calling thread's CPython frames without the GIL),
 * deduplication, the code objects' strings, the ring file's Python blobs and
 * the trace's "python" (with tr_pyroots.c's "roots"), "pycodes" and "pystacks". Interface in tr_core.h;
 * output in docs/trace-format.md; costs in docs/performance.md.
 *
 * Capture
 * -------
 * tr_py_capture gives the thread's innermost TRSHIM_PYSTACK_DEPTH frames as
 * (code object, code_key, line); a stack is identified by its list of
 * (code_key, line) (code_key tells a code object from another one allocated
 * later at the same address). Its hash is looked up in a process-wide,
 * fixed-size open-addressing table of stack indexes (2 x
 * TR_PYSTACK_MAX_STACKS slots, allocated once, never moved or cleared), so
 * a stack seen before is found with acquire loads only: no lock, no
 * allocation, no atomic read-modify-write. Records are immutable once
 * published (slot stored with release after the record is complete).
 *
 * Interning (a stack not seen before): under g_mu, the stack is looked up
 * again, each code object not seen before gets the next code index and its
 * file, qualified name and first line are read right then with
 * tr_py_code_info (safe reads; the object is alive: its frame is on the
 * calling thread's stack, which cannot change while the thread is in this
 * call); then the stack gets the next stack index. Code and stack blobs go
 * into the ring file under the same lock, so a code blob always precedes
 * the first stack blob that uses it.
 *
 * Bounds: TR_PYSTACK_MAX_STACKS stacks, TR_PYSTACK_MAX_CODES code objects,
 * strings cut to 1023 (file) / 511 (qualname) bytes. A capture that would
 * need more gives -1 and is counted ("python.dropped"); once a table is
 * full, a stack not seen before is refused without taking the lock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_core.h"
#include "tr_pyroots.h"
#include "tr_python.h"
#include "tr_ring.h"

#define TAB_CAP (2u * TR_PYSTACK_MAX_STACKS)     /* stack slots (power of two) */
#define CODE_CAP (2u * TR_PYSTACK_MAX_CODES)     /* code slots (power of two) */
#define CHUNK_BITS 10
#define CHUNK_SIZE (1u << CHUNK_BITS)
#define FILE_CAP 1024
#define NAME_CAP 512

_Static_assert((TAB_CAP & (TAB_CAP - 1)) == 0 && (CODE_CAP & (CODE_CAP - 1)) == 0, "powers of two");
_Static_assert(TR_PYSTACK_MAX_STACKS % CHUNK_SIZE == 0 && TR_PYSTACK_MAX_CODES % CHUNK_SIZE == 0, "chunks");

typedef struct {
    uint64_t key;                /* tr_py_frame.code_key */
    int32_t line;
    uint32_t code;               /* code index */
} ps_frame;

typedef struct {
    uint64_t hash;
    uint32_t n;
    ps_frame f[];
} ps_stack;

typedef struct {
    uint64_t key;
    int32_t firstlineno;
    int in_ring;                 /* its blob was stored in the ring file */
    char *file, *qualname;
} ps_code;

/* stacks: the hot path reads g_tab and the records without the lock */
static _Atomic(_Atomic uint32_t *) g_tab;          /* index + 1, 0 = empty */
static ps_stack **g_chunks[TR_PYSTACK_MAX_STACKS / CHUNK_SIZE];
static _Atomic uint32_t g_nstacks;
static atomic_int g_stacks_full;
/* code objects: under g_mu, except the records the writer reads below g_ncodes */
static uint32_t *g_code_tab;                       /* index + 1, 0 = empty */
static ps_code **g_code_chunks[TR_PYSTACK_MAX_CODES / CHUNK_SIZE];
static _Atomic uint32_t g_ncodes;
static atomic_int g_codes_full;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t g_dropped;

static __thread uint64_t t_hits __attribute__((tls_model("initial-exec")));
static __thread uint64_t t_misses __attribute__((tls_model("initial-exec")));

static inline ps_stack *stack_at(uint32_t idx)
{
    return g_chunks[idx >> CHUNK_BITS][idx & (CHUNK_SIZE - 1)];
}

static inline ps_code *code_at(uint32_t idx)
{
    return g_code_chunks[idx >> CHUNK_BITS][idx & (CHUNK_SIZE - 1)];
}

static inline uint64_t hash_frames(const tr_py_frame *fr, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= fr[i].code_key ^ ((uint64_t)(uint32_t)fr[i].line * 0xc2b2ae3d27d4eb4full);
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    h ^= h >> 29;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 32);
}

static inline int same_stack(const ps_stack *s, uint64_t h, const tr_py_frame *fr, int n)
{
    if (s->hash != h || s->n != (uint32_t)n) return 0;
    for (int i = 0; i < n; i++)
        if (s->f[i].key != fr[i].code_key || s->f[i].line != fr[i].line) return 0;
    return 1;
}

/* Index of the stack in tab, or -1 (acquire loads only). */
static inline int32_t lookup(_Atomic uint32_t *tab, uint64_t h, const tr_py_frame *fr, int n)
{
    for (uint32_t p = (uint32_t)h & (TAB_CAP - 1);; p = (p + 1) & (TAB_CAP - 1)) {
        uint32_t v = atomic_load_explicit(&tab[p], memory_order_acquire);
        if (!v) return -1;
        if (same_stack(stack_at(v - 1), h, fr, n)) return (int32_t)(v - 1);
    }
}

/* ---- interning (g_mu held) ----------------------------------------------------------- */

/* The index of code object fr's code, added with its strings if new; -1 when
 * the table is full or memory short. */
static int32_t code_index(const tr_py_frame *fr)
{
    uint32_t p = (uint32_t)(fr->code_key ^ (fr->code_key >> 29)) & (CODE_CAP - 1);
    for (; g_code_tab[p]; p = (p + 1) & (CODE_CAP - 1))
        if (code_at(g_code_tab[p] - 1)->key == fr->code_key) return (int32_t)(g_code_tab[p] - 1);
    uint32_t idx = atomic_load_explicit(&g_ncodes, memory_order_relaxed);
    if (idx >= TR_PYSTACK_MAX_CODES) {
        atomic_store_explicit(&g_codes_full, 1, memory_order_relaxed);
        return -1;
    }
    ps_code **chunk = g_code_chunks[idx >> CHUNK_BITS];
    if (!chunk) {
        chunk = calloc(CHUNK_SIZE, sizeof *chunk);
        if (!chunk) return -1;
        g_code_chunks[idx >> CHUNK_BITS] = chunk;
    }
    char file[FILE_CAP], name[NAME_CAP];
    int first = 0;
    if (tr_py_code_info(fr->code, file, sizeof file, name, sizeof name, &first) != 0) {
        /* cannot happen for a live code object; keep the frame anyway */
        snprintf(file, sizeof file, "?");
        snprintf(name, sizeof name, "?");
        first = 0;
    }
    ps_code *c = malloc(sizeof *c);
    char *f = strdup(file), *q = strdup(name);
    if (!c || !f || !q) {
        free(c);
        free(f);
        free(q);
        return -1;
    }
    c->key = fr->code_key;
    c->firstlineno = first;
    c->file = f;
    c->qualname = q;
    c->in_ring = tr_ring_add_pycode(idx, first, f, q);
    chunk[idx & (CHUNK_SIZE - 1)] = c;
    g_code_tab[p] = idx + 1;
    atomic_store_explicit(&g_ncodes, idx + 1, memory_order_release);
    return (int32_t)idx;
}

static int tables_ready(void)
{
    if (atomic_load_explicit(&g_tab, memory_order_relaxed)) return 1;
    _Atomic uint32_t *tab = calloc(TAB_CAP, sizeof *tab);
    uint32_t *ctab = calloc(CODE_CAP, sizeof *ctab);
    if (!tab || !ctab) {
        free(tab);
        free(ctab);
        return 0;
    }
    g_code_tab = ctab;
    atomic_store_explicit(&g_tab, tab, memory_order_release);
    return 1;
}

static __attribute__((noinline)) int32_t intern(const tr_py_frame *fr, int n, uint64_t h)
{
    int32_t result = -1;
    trr_pyframe rf[TR_PYSTACK_MAX_DEPTH];
    pthread_mutex_lock(&g_mu);
    if (!tables_ready()) goto drop;
    _Atomic uint32_t *tab = atomic_load_explicit(&g_tab, memory_order_relaxed);
    uint32_t p = (uint32_t)h & (TAB_CAP - 1);
    for (uint32_t v; (v = atomic_load_explicit(&tab[p], memory_order_relaxed)); p = (p + 1) & (TAB_CAP - 1))
        if (same_stack(stack_at(v - 1), h, fr, n)) {
            result = (int32_t)(v - 1);       /* another thread interned it meanwhile */
            goto out;
        }
    uint32_t idx = atomic_load_explicit(&g_nstacks, memory_order_relaxed);
    if (idx >= TR_PYSTACK_MAX_STACKS) {
        atomic_store_explicit(&g_stacks_full, 1, memory_order_relaxed);
        goto drop;
    }
    ps_stack **chunk = g_chunks[idx >> CHUNK_BITS];
    if (!chunk) {
        chunk = calloc(CHUNK_SIZE, sizeof *chunk);
        if (!chunk) goto drop;
        g_chunks[idx >> CHUNK_BITS] = chunk;
    }
    ps_stack *s = malloc(sizeof *s + (size_t)n * sizeof(ps_frame));
    if (!s) goto drop;
    int in_ring = 1;
    for (int i = 0; i < n; i++) {
        int32_t ci = code_index(&fr[i]);
        if (ci < 0) {
            free(s);
            goto drop;
        }
        s->f[i] = (ps_frame){fr[i].code_key, fr[i].line, (uint32_t)ci};
        rf[i] = (trr_pyframe){(uint32_t)ci, fr[i].line};
        in_ring &= code_at((uint32_t)ci)->in_ring;
    }
    s->hash = h;
    s->n = (uint32_t)n;
    chunk[idx & (CHUNK_SIZE - 1)] = s;
    atomic_store_explicit(&tab[p], idx + 1, memory_order_release);
    atomic_store_explicit(&g_nstacks, idx + 1, memory_order_release);
    result = (int32_t)idx;
    /* a stack whose code blobs are not all there would not be readable */
    if (in_ring) tr_ring_add_pystack(idx, rf, (uint32_t)n);
    else tr_ring_stack_dropped();
    goto out;
drop:
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
out:
    pthread_mutex_unlock(&g_mu);
    return result;
}

/* ---- capture ----------------------------------------------------------------------- */

void tr_pystack_init(void)
{
    if (tr_cfg()->pystack_depth > 0) tr_py_init();
}

int32_t tr_pystack_capture(void)
{
    int depth = tr_cfg()->pystack_depth;
    if (depth <= 0) return -1;
    if (depth > TR_PYSTACK_MAX_DEPTH) depth = TR_PYSTACK_MAX_DEPTH;
    tr_py_frame fr[TR_PYSTACK_MAX_DEPTH];
    int n = tr_py_capture(fr, depth);
    if (n <= 0) return -1;
    uint64_t h = hash_frames(fr, n);
    _Atomic uint32_t *tab = atomic_load_explicit(&g_tab, memory_order_acquire);
    if (__builtin_expect(tab != NULL, 1)) {
        int32_t idx = lookup(tab, h, fr, n);
        if (__builtin_expect(idx >= 0, 1)) {
            t_hits++;
            return idx;
        }
    }
    if (atomic_load_explicit(&g_stacks_full, memory_order_relaxed) ||
        atomic_load_explicit(&g_codes_full, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
        return -1;
    }
    t_misses++;
    return intern(fr, n, h);
}

/* The frames a fatal signal's handler captured (tr_crash.c), interned by
 * the writer thread as a capture's would be: the stack's index, -1. The
 * crashing thread waits in its handler meanwhile, so its code objects are
 * alive (and their strings are read with safe reads anyway). */
int32_t tr_pystack_intern_frames(const tr_py_frame *fr, int n)
{
    if (n <= 0 || tr_cfg()->pystack_depth <= 0) return -1;
    if (n > TR_PYSTACK_MAX_DEPTH) n = TR_PYSTACK_MAX_DEPTH;
    uint64_t h = hash_frames(fr, n);
    _Atomic uint32_t *tab = atomic_load_explicit(&g_tab, memory_order_acquire);
    int32_t idx = tab ? lookup(tab, h, fr, n) : -1;
    if (idx >= 0) return idx;
    if (atomic_load_explicit(&g_stacks_full, memory_order_relaxed) ||
        atomic_load_explicit(&g_codes_full, memory_order_relaxed))
        return -1;
    return intern(fr, n, h);
}

void tr_pystack_get_stats(tr_pystack_stats *out)
{
    out->stacks = atomic_load_explicit(&g_nstacks, memory_order_acquire);
    out->codes = atomic_load_explicit(&g_ncodes, memory_order_acquire);
    out->dropped = atomic_load_explicit(&g_dropped, memory_order_relaxed);
    out->hits = t_hits;
    out->misses = t_misses;
}

/* ---- trace output (writer) ------------------------------------------------------------ */

static void write_python(tr_json *j)
{
    const tr_settings *cfg = tr_cfg();
    int st = tr_py_state();
    const char *state, *version = NULL, *detail = NULL;
    char desc[600];
    if (cfg->pystack_depth <= 0) {
        state = "disabled";
        detail = "TRSHIM_PYSTACK_DEPTH=0";
    } else {
        tr_py_describe(desc, sizeof desc);
        switch (st) {
        case TR_PY_PENDING:
        case TR_PY_READY: state = "ok"; break;
        case TR_PY_UNSUPPORTED: state = "unsupported"; break;
        case TR_PY_DISABLED: state = "disabled"; break;
        default: state = "none"; break;   /* no interpreter (or never looked for) */
        }
        if (st > TR_PY_NONE) {
            detail = desc;
            version = tr_py_version_str();
            if (!version[0]) version = NULL;
        }
    }
    trj_object_begin(j, "python");
    trj_str(j, "state", state);
    trj_str(j, "version", version);
    trj_str(j, "detail", detail);
    trj_uint(j, "dropped", atomic_load_explicit(&g_dropped, memory_order_relaxed));
    tr_pyroots_write_json(j);            /* "roots" (tr_pyroots.c), once collected */
    trj_object_end(j);
}

uint32_t tr_pystack_code_count(void) { return atomic_load_explicit(&g_ncodes, memory_order_acquire); }

const char *tr_pystack_code_file(uint32_t i)
{
    return i < tr_pystack_code_count() ? code_at(i)->file : NULL;
}

void tr_pystack_write_json(tr_json *j)
{
    write_python(j);
    /* the stack count first: every code a published stack uses was
     * published before it, so it is below the code count read after */
    uint32_t ns = atomic_load_explicit(&g_nstacks, memory_order_acquire);
    uint32_t nc = atomic_load_explicit(&g_ncodes, memory_order_acquire);
    trj_array_begin(j, "pycodes");
    for (uint32_t i = 0; i < nc; i++) {
        const ps_code *c = code_at(i);
        trj_array_begin(j, NULL);
        trj_str(j, NULL, c->file);
        trj_str(j, NULL, c->qualname);
        trj_int(j, NULL, c->firstlineno);
        trj_array_end(j);
    }
    trj_array_end(j);
    trj_array_begin(j, "pystacks");
    char buf[32];
    for (uint32_t i = 0; i < ns; i++) {
        const ps_stack *s = stack_at(i);
        trj_array_begin(j, NULL);
        for (uint32_t k = 0; k < s->n; k++) {
            /* [code, line] as one value */
            int len = snprintf(buf, sizeof buf, "[%u,%d]", s->f[k].code, s->f[k].line);
            trj_raw_row(j, buf, (size_t)len);
        }
        trj_array_end(j);
    }
    trj_array_end(j);
}
