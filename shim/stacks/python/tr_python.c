/* Python call sites: the calling thread's CPython frames, read from the
 * interpreter's own structures without the GIL. Interface in tr_python.h.
 * This file: the hot path and the check; finding the interpreter and its
 * offsets: tr_python_init.c; safe reads and strings: tr_python_read.c;
 * what they share: tr_python_int.h.
 *
 * The thread state
 * ----------------
 * The calling thread's PyThreadState is pthread_getspecific() of the
 * GIL-state TSS key (_PyRuntime.gilstate.autoTSSkey on 3.10/3.11,
 * _PyRuntime.autoTSSkey on 3.12+): CPython binds it when the thread state is
 * made or bound to its thread and leaves it set while the thread has
 * released the GIL (PyEval_SaveThread, Py_BEGIN_ALLOW_THREADS: ctypes,
 * PyTorch). Not _Py_tss_tstate / the "current" thread state, which is NULL
 * while the GIL is released (3.12+). The Py_tss_t is re-read from _PyRuntime
 * at every capture: it must still be initialized and hold the key the check
 * found, and the thread state it gives must name the calling thread
 * (thread_id == pthread_self()); otherwise no frames (after Py_Finalize, a
 * thread whose state is gone).
 *
 * The check (once, against the first thread that captures with a thread
 * state and Python frames)
 * ----------
 * All with safe reads (process_vm_readv on our own pid, else pread of
 * /proc/self/mem): the thread's PyThreadState is found a second way, by
 * walking the interpreters' thread lists for the thread_id ==
 * pthread_self() (and native_thread_id == gettid() where it exists); it
 * must be the one the TSS key gives (otherwise _PyRuntime is searched for
 * the Py_tss_t whose key gives it and that sits where the key does, nearest
 * the table's offset: search_tss); the frame
 * chain is walked: every code object's type must be PyCode_Type, the first
 * frame's co_filename a readable str, its line table a bytes object, its
 * co_firstlineno positive; and the walk with direct reads (the hot path)
 * must give the same frames and lines. Only then are direct reads used.
 * A failure turns Python capture off (one "trshim:" line). A thread without
 * a thread state or without frames defers the check to a later capture.
 *
 * The walk
 * --------
 * 3.10: PyThreadState.frame, PyFrameObject.f_back; f_code; the line of
 *       f_lasti (code units) from co_linetable (3.10 format), or f_lineno
 *       when it is not 0, as 3.10's PyFrame_GetLineNumber does (ceval sets
 *       it around a trace function's call and clears it after; a jump from
 *       a debugger sets it).
 * 3.11, 3.12: PyThreadState.cframe->current_frame, _PyInterpreterFrame
 *       .previous; f_code; prev_instr - _PyCode_CODE(code) is the offset.
 * 3.13: PyThreadState.current_frame; f_executable; instr_ptr.
 * 3.14: the same, f_executable is a _PyStackRef (low tag bits cleared).
 * Skipped as CPython skips them (_PyFrame_IsIncomplete): frames owned by the
 * C stack (3.12+: FRAME_OWNED_BY_CSTACK, the entry frame of each
 * _PyEval_EvalFrameDefault; 3.14: also FRAME_OWNED_BY_INTERPRETER, the
 * thread's base frame), and frames not started yet (owner not a generator,
 * offset before _co_firsttraceable; 3.11-3.13, 3.14 has no table entry for
 * it). 3.11 has no C-stack frames (its entry frames are marked by is_entry
 * and are real Python frames).
 * Each frame pointer must be non-null and 8-aligned, each code object's
 * ob_type PyCode_Type (3.10: each frame's ob_type PyFrame_Type), the chain
 * may not loop (Brent's cycle check) and is followed for at most 2*max+64
 * frames; a frame that fails ends the walk (the frames before it are kept).
 *
 * Lines
 * -----
 * CPython's own algorithm (Objects/codeobject.c, PyCode_Addr2Line): 3.10's
 * co_linetable is (bytes delta, signed line delta) pairs, -128 = no line;
 * 3.11+'s co_linetable is the location table: entries of a first byte
 * 1CCCCLLL (code, length-1 in code units) and varints; codes 13 and 14 carry
 * a signed varint line delta, 10/11/12 deltas 0/1/2, 15 no line, 0-9 the
 * same line. Offset < 0: co_firstlineno. Each thread caches lines by (code
 * object, line table object, offset): 512 entries, 4-way, fixed size, so
 * repeated captures of the same stack cost a few loads per frame. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tr_core.h"
#include "tr_python.h"
#include "tr_python_int.h"


#ifndef PTHREAD_KEYS_MAX
#define PTHREAD_KEYS_MAX 128
#endif

/* ---- state of the check ------------------------------------------------------ */

static pthread_mutex_t g_check_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_tss_key;                  /* the key the check found (READY) */

/* ---- line tables ------------------------------------------------------------------ */

/* 3.10: co_linetable pairs; addr in bytes. */
static int line_310(const uint8_t *t, size_t len, int first, int addr)
{
    if (addr < 0) return first;
    int line = first, end = 0;
    for (size_t i = 0; i + 1 < len; i += 2) {
        int start = end;
        end += t[i];
        int ld = (int8_t)t[i + 1];
        int ar_line = -1;
        if (ld != -128) {
            line += ld;
            ar_line = line;
        }
        if (start != end && addr < end) return ar_line;
    }
    return -1;
}

static int svarint(const uint8_t *t, size_t len, size_t i)
{
    if (i >= len) return 0;
    unsigned v = t[i] & 63, shift = 0;
    while ((t[i] & 64) && i + 1 < len && shift < 24) {
        i++;
        shift += 6;
        v |= (unsigned)(t[i] & 63) << shift;
    }
    return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

/* 3.11+: the location table; addr in bytes. */
static int line_311(const uint8_t *t, size_t len, int first, int addr)
{
    if (addr < 0) return first;
    int line = first, end = 0;
    size_t i = 0;
    while (i < len) {
        uint8_t b = t[i];
        if (!(b & 0x80)) return -1;     /* not an entry's first byte */
        int code = (b >> 3) & 15;
        if (code == 13 || code == 14) line += svarint(t, len, i + 1);
        else if (code == 11) line += 1;
        else if (code == 12) line += 2;
        int ar_line = code == 15 ? -1 : line;
        end += ((b & 7) + 1) * 2;
        for (i++; i < len && !(t[i] & 0x80); i++) {}
        if (addr < end) return ar_line;
    }
    return -1;
}

/* ---- per-thread line cache --------------------------------------------------------- */

#define LC_SIZE 512u                 /* entries (power of two) */
#define LC_WAYS 4u                   /* a key's set: 4 entries */

typedef struct {
    uintptr_t code, table;
    int32_t lasti, line;
    uint64_t key;
} lc_ent;

typedef struct {
    lc_ent ent[LC_SIZE];
    tr_py_stats st;
    uint32_t check_wait;         /* captures to let pass before this thread tries the check again */
} py_tls;

#define CHECK_RETRY 256          /* a thread the check could not use (no Python) retries after that many captures */

static __thread py_tls *tls_py __attribute__((tls_model("initial-exec")));
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_tls_key;
static int g_tls_key_ok;

static void tls_free(void *p)
{
    if (tls_py == p) tls_py = NULL;
    free(p);
}

static void key_once(void)
{
    g_tls_key_ok = pthread_key_create(&g_tls_key, tls_free) == 0;
}

static py_tls *tls_get(void)
{
    py_tls *t = tls_py;
    if (__builtin_expect(t != NULL, 1)) return t;
    pthread_once(&g_key_once, key_once);
    t = calloc(1, sizeof *t);
    if (!t) return NULL;
    tls_py = t;
    if (g_tls_key_ok) pthread_setspecific(g_tls_key, t);
    return t;
}

static inline unsigned lc_slot(uintptr_t code, int32_t lasti)
{
    return (unsigned)(tr_fmix64(code ^ ((uint64_t)(uint32_t)lasti << 40)) & (LC_SIZE - 1));
}

/* ---- the walk --------------------------------------------------------------------- */

/* The line and key of a frame whose line is not cached: reads the code
 * object's strings' addresses, line table and first line. 0 when the code
 * object looks wrong. */
__attribute__((always_inline)) static inline int frame_line(int safe, uintptr_t code, uintptr_t table,
                                                            int32_t lasti, int32_t *line, uint64_t *key)
{
    uintptr_t fname = 0, qual = 0, ttype = 0;
    int32_t first = 0;
    uint64_t tlen = 0;
    if (!rd_ptr(safe, code + tr_py_off.co_filename, &fname) || !rd_ptr(safe, code + tr_py_off.co_name, &qual) ||
        !rd_i32(safe, code + tr_py_off.co_firstlineno, &first))
        return 0;
    if (!table || (table & 7) || !rd_ptr(safe, table + 8, &ttype) || ttype != tr_py_g_bytes_type ||
        !rd(safe, &tlen, table + tr_py_off.ob_size, sizeof tlen) || tlen > (1u << 26))
        return 0;
    *key = tr_mix64(tr_mix64(tr_mix64(tr_fmix64(code), fname), qual), table) | 1;
    const uint8_t *t = (const uint8_t *)(table + tr_py_off.bytes_sval);
    uint8_t *copy = NULL;
    if (safe) {
        copy = malloc(tlen ? tlen : 1);
        if (!copy || !tr_py_safe_read(copy, table + tr_py_off.bytes_sval, tlen)) {
            free(copy);
            return 0;
        }
        t = copy;
    }
    int addr = lasti < 0 ? -1 : lasti * 2;
    *line = tr_py_off.walk == WALK_310 ? line_310(t, tlen, first, addr) : line_311(t, tlen, first, addr);
    free(copy);
    return 1;
}

/* The line of code object code at instruction lasti (code units), safe
 * reads; -1 unknown (tr_py_exception_info). */
static int code_line(uintptr_t code, int32_t lasti)
{
    uintptr_t table = 0;
    int32_t line = -1;
    uint64_t key;
    if (!code || (code & 7) || !rd_ptr(1, code + tr_py_off.co_linetable, &table) ||
        !frame_line(1, code, table, lasti, &line, &key))
        return -1;
    return line;
}

typedef struct {
    py_tls *tls;        /* NULL: no cache, no counters (the check's safe walk) */
    int bad, cut;
} walk_ctx;

/* The first frame of thread state ts (0: none). */
__attribute__((always_inline)) static inline int first_frame(int safe, uintptr_t ts, uintptr_t *f)
{
    *f = 0;
    if (!rd_ptr(safe, ts + tr_py_off.ts_frame, f)) return 0;
    if (tr_py_off.walk == WALK_311 && *f) {
        uintptr_t cf = *f;
        *f = 0;
        if ((cf & 7) || !rd_ptr(safe, cf + tr_py_off.cf_current, f)) return 0;
    }
    return 1;
}

/* Walks thread state ts's frames into out[0..max). */
__attribute__((always_inline)) static inline int walk_frames(int safe, uintptr_t ts, tr_py_frame *out,
                                                             int max, walk_ctx *cx)
{
    uintptr_t f;
    int n = 0;
    if (!first_frame(safe, ts, &f)) {
        cx->bad = 1;
        return 0;
    }
    uintptr_t tortoise = f;
    unsigned power = 1, lam = 0;
    int steps = 2 * max + 64;
    py_tls *tl = cx->tls;
    while (f) {
        if ((f & 7) || --steps < 0) {
            cx->bad = 1;
            break;
        }
        if (n >= max) {
            cx->cut = 1;
            break;
        }
        uintptr_t code = 0, ctype = 0, instr = 0, table = 0;
        int32_t lasti = -1;
        int skip = 0;
        uint8_t owner = 0;
        if (tr_py_off.walk == WALK_310) {
            uintptr_t ftype = 0;
            if (!rd_ptr(safe, f + 8, &ftype) || ftype != tr_py_g_frame_type) {
                cx->bad = 1;
                break;
            }
        } else {
            if (!rd(safe, &owner, f + tr_py_off.fr_owner, 1)) {
                cx->bad = 1;
                break;
            }
            skip = owner >= tr_py_off.owner_skip;
        }
        if (!skip) {
            if (!rd_ptr(safe, f + tr_py_off.fr_code, &code)) {
                cx->bad = 1;
                break;
            }
            code &= tr_py_off.exec_mask;
            if (!code || (code & 7) || !rd_ptr(safe, code + 8, &ctype) || ctype != tr_py_g_code_type ||
                !rd_ptr(safe, code + tr_py_off.co_linetable, &table)) {
                cx->bad = 1;
                break;
            }
            if (tr_py_off.walk == WALK_310) {
                if (!rd_i32(safe, f + tr_py_off.fr_instr, &lasti)) {
                    cx->bad = 1;
                    break;
                }
                if (lasti < -1) lasti = -1;
            } else {
                if (!rd_ptr(safe, f + tr_py_off.fr_instr, &instr)) {
                    cx->bad = 1;
                    break;
                }
                intptr_t d = (intptr_t)(instr - (code + tr_py_off.co_code_adaptive));
                lasti = d < -2 ? -1 : (int32_t)(d >> 1);
                if (d > ((intptr_t)1 << 30)) lasti = INT32_MAX;
                if (tr_py_off.has_firsttraceable && owner != tr_py_off.owner_generator) {
                    int32_t ft = 0;
                    if (!rd_i32(safe, code + tr_py_off.co_firsttraceable, &ft)) {
                        cx->bad = 1;
                        break;
                    }
                    skip = lasti < ft;   /* not started yet */
                }
            }
        }
        if (!skip) {
            int32_t line = -1;
            uint64_t key = 0;
            lc_ent *e = NULL;
            if (tl) {
                lc_ent *set = &tl->ent[lc_slot(code, lasti) & ~(LC_WAYS - 1)], *empty = NULL;
                for (unsigned w = 0; w < LC_WAYS; w++) {
                    lc_ent *c = &set[w];
                    if (c->code == code && c->lasti == lasti && c->table == table) {
                        e = c;
                        break;
                    }
                    if (!c->code && !empty) empty = c;
                }
                if (e) {
                    line = e->line;
                    key = e->key;
                    tl->st.line_hits++;
                } else {
                    /* an empty way, else one in turn */
                    e = empty ? empty : &set[tl->st.line_misses & (LC_WAYS - 1)];
                }
            }
            if (!key) {
                if (!frame_line(safe, code, table, lasti, &line, &key)) {
                    cx->bad = 1;
                    break;
                }
                if (tl) {
                    tl->st.line_misses++;
                    e->code = code;
                    e->table = table;
                    e->lasti = lasti;
                    e->line = line;
                    e->key = key;
                }
            }
            if (tr_py_off.walk == WALK_310) {
                /* 3.10's PyFrame_GetLineNumber: f_lineno when it is not 0
                 * (set while a trace function runs, or by a jump) */
                int32_t lineno = 0;
                if (rd_i32(safe, f + tr_py_off.fr_lineno, &lineno) && lineno > 0) line = lineno;
            }
            out[n].code = code;
            out[n].code_key = key;
            out[n].line = line;
            out[n].lasti = lasti;
            n++;
        }
        uintptr_t next = 0;
        if (!rd_ptr(safe, f + tr_py_off.fr_back, &next)) {
            cx->bad = 1;
            break;
        }
        f = next;
        if (f && f == tortoise) {
            cx->bad = 1;
            break;
        }
        if (++lam == power) {
            tortoise = f;
            power <<= 1;
            lam = 0;
        }
    }
    return n;
}

static __attribute__((noinline)) int walk_safe(uintptr_t ts, tr_py_frame *out, int max, walk_ctx *cx)
{
    return walk_frames(1, ts, out, max, cx);
}

static int walk_fast(uintptr_t ts, tr_py_frame *out, int max, walk_ctx *cx)
{
    return walk_frames(0, ts, out, max, cx);
}

/* ---- the thread state ---------------------------------------------------------------- */

/* Through the GIL-state TSS key at offset off of _PyRuntime (direct reads:
 * inside _PyRuntime); *key: the key. */
static inline uintptr_t tss_tstate(size_t off, uint32_t *key)
{
    const int32_t *tss = (const int32_t *)(tr_py_g_runtime + off);
    *key = (uint32_t)tss[1];
    if (tss[0] != 1 || *key >= PTHREAD_KEYS_MAX) return 0;
    return (uintptr_t)pthread_getspecific((pthread_key_t)*key);
}

/* The calling thread's PyThreadState found through the interpreters' thread
 * lists (safe reads), 0 if none. */
static uintptr_t list_tstate(void)
{
    uintptr_t me = (uintptr_t)pthread_self();
    long tid = syscall(SYS_gettid);
    uintptr_t interp = 0;
    if (!tr_py_safe_read(&interp, tr_py_g_runtime + tr_py_off.rt_interp_head, sizeof interp)) return 0;
    for (int ni = 0; interp && ni < 256; ni++) {
        uintptr_t ts = 0;
        if (!tr_py_safe_read(&ts, interp + tr_py_off.is_threads_head, sizeof ts)) return 0;
        for (int nt = 0; ts && nt < 100000; nt++) {
            uintptr_t id = 0;
            if (!tr_py_safe_read(&id, ts + tr_py_off.ts_thread_id, sizeof id)) return 0;
            if (id == me) {
                unsigned long nid = 0;
                if (!tr_py_off.ts_native_id) return ts;
                if (tr_py_safe_read(&nid, ts + tr_py_off.ts_native_id, sizeof nid) && (long)nid == tid) return ts;
            }
            if (!tr_py_safe_read(&ts, ts + tr_py_off.ts_next, sizeof ts)) return 0;
        }
        if (!tr_py_safe_read(&interp, interp + tr_py_off.is_next, sizeof interp)) return 0;
    }
    return 0;
}

/* Whether the Py_tss_t at offset off of _PyRuntime sits where the GIL-state
 * key does: 3.10/3.11, last in _gilstate_runtime_state {int check_enabled
 * (1); tstate_current; autoInterpreterState (the thread's interpreter);
 * autoTSSkey}; 3.12+, right before trashTSSkey (another initialized Py_tss_t
 * with another key). Either way 8-aligned (it follows pointers), and after
 * the runtime's first members (flags, interpreters {mutex, head, main,
 * next_id}). */
static int tss_in_place(size_t off, uintptr_t ts)
{
    const int32_t *t = (const int32_t *)(tr_py_g_runtime + off);
    if ((off & 7) || off < tr_py_off.rt_interp_head + 24) return 0;
    if (tr_py_g_minor <= 11) {
        uintptr_t auto_interp, interp = 0;
        int32_t check_enabled;
        memcpy(&auto_interp, (const void *)(tr_py_g_runtime + off - 8), 8);
        memcpy(&check_enabled, (const void *)(tr_py_g_runtime + off - 24), 4);
        return check_enabled == 1 && tr_py_safe_read(&interp, ts + tr_py_off.ts_interp, 8) && interp &&
               auto_interp == interp;
    }
    return off + 16 <= tr_py_g_runtime_size && t[2] == 1 && t[3] != t[1] && (uint32_t)t[3] < PTHREAD_KEYS_MAX;
}

/* Where in _PyRuntime the Py_tss_t giving ts is; SIZE_MAX if nowhere. The
 * key is the same for every int pair (1, key) that gives ts: with key 0
 * (often: the GIL-state key is the process's first), _initialized followed
 * by preinitializing = 0 gives ts too. So: a pair in place (tss_in_place),
 * the nearest to the table's offset (a member added or removed in a patch
 * release moves it a little; 3.14, no table: 3.13's). 3.14 without a pair in
 * place (if trashTSSkey went away): the nearest pair past the runtime's
 * first members. Whichever is taken, every capture requires the key found
 * here (g_tss_key), so a pair that changes later gives no frames, never the
 * value of another key. */
static size_t search_tss(uintptr_t ts, size_t hint)
{
    size_t best = SIZE_MAX, any = SIZE_MAX;
    uint32_t key;
    if (hint == SIZE_MAX) hint = tr_py_off_313.rt_tss;
#define DIST(o) ((o) > hint ? (o) - hint : hint - (o))
    for (size_t off = 0; off + 8 <= tr_py_g_runtime_size; off += 4) {
        if (tss_tstate(off, &key) != ts) continue;
        if (tss_in_place(off, ts)) {
            if (best == SIZE_MAX || DIST(off) < DIST(best)) best = off;
        } else if (!(off & 7) && off >= tr_py_off.rt_interp_head + 24) {
            if (any == SIZE_MAX || DIST(off) < DIST(any)) any = off;
        }
    }
#undef DIST
    if (best != SIZE_MAX) return best;
    return tr_py_g_minor >= 14 ? any : SIZE_MAX;
}


/* The check (g_check_mu held, state PENDING). Returns the new state: READY,
 * DISABLED, or PENDING (this thread cannot tell: try again later). */
static int check_offsets(void)
{
    const char *why = NULL;
    uint32_t key = 0;
    uintptr_t ts_key = tr_py_off.rt_tss != SIZE_MAX ? tss_tstate(tr_py_off.rt_tss, &key) : 0;
    uintptr_t ts_list = list_tstate();
    if (!ts_list) {
        if (!ts_key) return TR_PY_PENDING;     /* not a Python thread (or nothing to compare) */
        why = "the thread state of the GIL-state key is not in the interpreter's thread list";
        goto fail;
    }
    if (ts_key != ts_list) {
        size_t off = search_tss(ts_list, tr_py_off.rt_tss);
        if (off == SIZE_MAX) {
            why = "no GIL-state TSS key in _PyRuntime gives the thread's state";
            goto fail;
        }
        tr_py_off.rt_tss = off;
        tr_py_g_tss_searched = 1;
        tss_tstate(off, &key);
    }
    enum { N = 256 };
    tr_py_frame *a = calloc(2 * N, sizeof *a), *b = a + N;
    if (!a) return TR_PY_PENDING;
    walk_ctx ca = {0}, cb = {0};
    int na = walk_safe(ts_list, a, N, &ca);
    if (ca.bad) {
        free(a);
        why = "the frame chain does not look right";
        goto fail;
    }
    if (na == 0) {
        free(a);
        return TR_PY_PENDING;               /* a thread state without frames */
    }
    /* the innermost frame's code object in detail */
    uintptr_t code = a[0].code, fname = 0, table = 0, ttype = 0;
    int32_t first = 0;
    char name[64];
    if (!tr_py_safe_read(&fname, code + tr_py_off.co_filename, 8) ||
        !tr_py_safe_read(&table, code + tr_py_off.co_linetable, 8) ||
        !tr_py_safe_read(&ttype, table + 8, 8) || ttype != tr_py_g_bytes_type ||
        !tr_py_safe_read(&first, code + tr_py_off.co_firstlineno, 4) || first <= 0 ||
        tr_py_unicode_utf8(fname, name, sizeof name) <= 0) {
        free(a);
        why = "the innermost frame's code object does not look right";
        goto fail;
    }
    int nb = walk_fast(ts_list, b, N, &cb);
    int same = nb == na && !cb.bad;
    for (int i = 0; same && i < na; i++)
        same = a[i].code == b[i].code && a[i].line == b[i].line && a[i].lasti == b[i].lasti &&
               a[i].code_key == b[i].code_key;
    free(a);
    if (!same) {
        why = "direct reads disagree with safe reads";
        goto fail;
    }
    g_tss_key = key;
    return TR_PY_READY;
fail:
    tr_warn("no Python call sites: CPython %s: %s (Python stacks off)", tr_py_g_version_str, why);
    return TR_PY_DISABLED;
}

/* ---- capture ------------------------------------------------------------------------ */

int tr_py_capture(tr_py_frame *out, int max)
{
    int st = atomic_load_explicit(&tr_py_g_state, memory_order_acquire);
    if (__builtin_expect(st != TR_PY_READY, 0)) {
        if (st == TR_PY_UNINIT) {
            tr_py_init();
            st = atomic_load_explicit(&tr_py_g_state, memory_order_acquire);
        }
        if (st == TR_PY_PENDING) {
            /* the check costs tens of microseconds (safe reads): a thread it
             * could not use (no thread state, no frames) tries again only
             * every CHECK_RETRY captures */
            py_tls *tl = tls_get();
            if (tl && tl->check_wait) {
                tl->check_wait--;
                return 0;
            }
            pthread_mutex_lock(&g_check_mu);
            st = atomic_load_explicit(&tr_py_g_state, memory_order_acquire);
            if (st == TR_PY_PENDING) {
                st = check_offsets();
                atomic_store_explicit(&tr_py_g_state, st, memory_order_release);
            }
            pthread_mutex_unlock(&g_check_mu);
            if (st == TR_PY_PENDING && tl) tl->check_wait = CHECK_RETRY;
        }
        if (st != TR_PY_READY) return 0;
    }
    if (max <= 0) return 0;
    uint32_t key;
    uintptr_t ts = tss_tstate(tr_py_off.rt_tss, &key);
    /* the key the check found, and a thread state of this thread */
    if (!ts || (ts & 7) || key != g_tss_key ||
        *(const uintptr_t *)(ts + tr_py_off.ts_thread_id) != (uintptr_t)pthread_self())
        return 0;
    py_tls *tl = tls_get();
    walk_ctx cx = {tl, 0, 0};
    int n = walk_fast(ts, out, max, &cx);
    if (tl) {
        tl->st.captures++;
        tl->st.frames += (uint64_t)n;
        tl->st.cut += (uint64_t)cx.cut;
        tl->st.bad_chain += (uint64_t)cx.bad;
    }
    return n;
}


void tr_py_get_thread_stats(tr_py_stats *out)
{
    py_tls *t = tls_py;
    if (t) *out = t->st;
    else memset(out, 0, sizeof *out);
}

void tr_py_flush_thread_cache(void)
{
    py_tls *t = tls_py;
    if (t) memset(t->ent, 0, sizeof t->ent);
}

/* ---- at a fatal signal (tr_crash.c) ---------------------------------------------------- */

int tr_py_capture_signal(tr_py_frame *out, int max)
{
    if (atomic_load_explicit(&tr_py_g_state, memory_order_acquire) != TR_PY_READY || max <= 0) return 0;
    uint32_t key;
    uintptr_t ts = tss_tstate(tr_py_off.rt_tss, &key);
    if (!ts || (ts & 7) || key != g_tss_key ||
        *(const uintptr_t *)(ts + tr_py_off.ts_thread_id) != (uintptr_t)pthread_self())
        return 0;
    walk_ctx cx = {NULL, 0, 0};     /* no line cache: nothing allocated, nothing shared written */
    return walk_fast(ts, out, max, &cx);
}

/* ---- an exception (tr_pyexit.c) ------------------------------------------------------- */

/* A C string at p (safe reads, a page at a time) into out; its length, -1. */
static int safe_cstr(uintptr_t p, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    if (!p || cap < 2) return -1;
    while (n + 1 < cap) {
        size_t page_left = 4096 - ((p + n) & 4095), k = cap - 1 - n;
        if (k > page_left) k = page_left;
        if (!tr_py_safe_read(out + n, p + n, k)) {
            out[n] = 0;
            return n ? (int)n : -1;
        }
        for (size_t i = 0; i < k; i++)
            if (!out[n + i]) return (int)(n + i);
        n += k;
    }
    out[n] = 0;
    return (int)n;
}

static int obj_type(uintptr_t obj, uintptr_t *type)
{
    return obj && !(obj & 7) && tr_py_safe_read(type, obj + 8, 8);
}

/* item i of tuple obj (its size checked), 0 */
static uintptr_t tuple_item(uintptr_t obj, int64_t i, int64_t *size)
{
    uintptr_t type = 0, item = 0;
    int64_t n = -1;
    if (!tr_py_off.tuple_item || !tr_py_off.tuple_size || !tr_py_g_tuple_type || !obj_type(obj, &type) ||
        type != tr_py_g_tuple_type || !tr_py_safe_read(&n, obj + tr_py_off.tuple_size, 8) || n < 0)
        return 0;
    if (size) *size = n;
    if (i >= n || !tr_py_safe_read(&item, obj + tr_py_off.tuple_item + 8 * (uintptr_t)i, 8)) return 0;
    return item;
}

int tr_py_exception_info(uintptr_t args, tr_py_exc_info *out)
{
    /* public structures, the same from 3.10 to 3.14 on LP64: PyTypeObject's
     * tp_name at 24 and tp_str at 136; PyBaseExceptionObject's args at 24
     * (after dict); PyTracebackObject's tb_next, tb_frame, tb_lasti,
     * tb_lineno at 16, 24, 32, 36; PyFrameObject's f_frame (3.11+) at 24 */
    enum { TP_NAME = 24, TP_STR = 136, EXC_ARGS = 24, TB_NEXT = 16, TB_FRAME = 24, TB_LASTI = 32, TB_LINENO = 36,
           F_FRAME = 24 };
    memset(out, 0, sizeof *out);
    out->line = -1;
    int st = tr_py_state();
    if (st != TR_PY_READY && st != TR_PY_PENDING) return -1;
    uintptr_t type = tuple_item(args, 1, NULL), value = tuple_item(args, 2, NULL), tb = tuple_item(args, 3, NULL);
    if (!type) return -1;
    uintptr_t name = 0;
    if (tr_py_safe_read(&name, type + TP_NAME, 8)) safe_cstr(name, out->type, sizeof out->type);
    /* the message: BaseException's str() of a single str argument */
    uintptr_t vtype = 0, base = 0, base_str = 0, tp_str = 0;
    if (obj_type(value, &vtype) && vtype == type && tr_py_g_base_exc && tr_py_safe_read(&base, tr_py_g_base_exc, 8) &&
        tr_py_safe_read(&base_str, base + TP_STR, 8) && tr_py_safe_read(&tp_str, type + TP_STR, 8) &&
        tp_str == base_str && base_str) {
        uintptr_t a = 0;
        int64_t n = -1;
        if (tr_py_safe_read(&a, value + EXC_ARGS, 8)) {
            uintptr_t s = tuple_item(a, 0, &n);
            if (n == 1 && s && tr_py_unicode_utf8(s, out->message, sizeof out->message) < 0) out->message[0] = 0;
        }
    }
    /* the raise site: the innermost traceback entry */
    uintptr_t t = 0, tt = 0;
    for (int k = 0; tb && k < 100000 && obj_type(tb, &tt) && tt == tr_py_g_tb_type && tr_py_g_tb_type; k++) {
        t = tb;
        if (!tr_py_safe_read(&tb, tb + TB_NEXT, 8)) break;
    }
    if (!t) return 0;
    uintptr_t frame = 0, code = 0, ftype = 0;
    int32_t lasti = -1, lineno = -1;
    if (!tr_py_safe_read(&frame, t + TB_FRAME, 8) || !tr_py_safe_read(&lasti, t + TB_LASTI, 4) ||
        !tr_py_safe_read(&lineno, t + TB_LINENO, 4) || !obj_type(frame, &ftype) ||
        (tr_py_g_frame_type && ftype != tr_py_g_frame_type))
        return 0;
    if (tr_py_off.walk == WALK_310) {
        if (!tr_py_safe_read(&code, frame + tr_py_off.fr_code, 8)) return 0;
    } else {
        uintptr_t iframe = 0;
        if (!tr_py_safe_read(&iframe, frame + F_FRAME, 8) || !iframe ||
            !tr_py_safe_read(&code, iframe + tr_py_off.fr_code, 8))
            return 0;
        code &= tr_py_off.exec_mask;
    }
    if (tr_py_code_info(code, out->file, sizeof out->file, out->function, sizeof out->function, NULL) != 0) {
        out->file[0] = out->function[0] = 0;
        return 0;
    }
    /* 3.10: tb_lineno; 3.11+: -1 until asked for, tb_lasti in bytes */
    out->line = lineno >= 0 ? lineno : lasti >= 0 ? code_line(code, lasti / 2) : -1;
    return 0;
}
