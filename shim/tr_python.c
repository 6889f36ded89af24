/* Python call sites: the calling thread's CPython frames, read from the
 * interpreter's own structures without the GIL. Interface in tr_python.h.
 *
 * Finding the interpreter
 * -----------------------
 * tr_py_init looks for the data symbol _PyRuntime in the dynamic symbol
 * table of each loaded module (dl_iterate_phdr and the module's GNU or SysV
 * hash table, read here: no dlsym, so no wrapper of dlsym the shim may get
 * and no lock of its own is involved), in the loader's order, the one
 * RTLD_DEFAULT would give. The other symbols (Py_Version, PyCode_Type,
 * PyUnicode_Type, PyBytes_Type, PyFrame_Type, Py_IsNone) are taken from the
 * same module. The version:
 *   3.11+  the Py_Version data symbol (PY_VERSION_HEX of the running library);
 *   3.10   no Py_Version, but Py_IsNone (new in 3.10): the module's path (the
 *          loader's name, or /proc/self/exe for the main program) must name
 *          python3.10 / libpython3.10, or, when it names no version, the size
 *          of _PyRuntime (st_size) must be 3.10's, 672 bytes;
 *   older, newer than 3.14, free-threaded builds: unsupported (one line).
 *
 * Offsets
 * -------
 * 3.13 and 3.14: from _Py_DebugOffsets, the first member of _PyRuntime
 * (cookie "xdebugpy", its version field must equal Py_Version, its
 * free_threaded 0, the sizes it gives must be plausible, and the runtime
 * size it gives must be _PyRuntime's st_size). What the debug offsets do not
 * have comes from tables: the GIL-state TSS key's place in _PyRuntime,
 * _co_firsttraceable, the frame-owner values.
 * 3.10, 3.11, 3.12: from tables (below), printed by an offsetof() program
 * compiled against each version's own headers with Py_BUILD_CORE
 * (internal/pycore_runtime.h, pycore_interp.h, pycore_frame.h, pycore_code.h;
 * 3.10: cpython/frameobject.h), x86-64 gcc 12, CPython 3.10.13, 3.11.7,
 * 3.12.1, 3.13.0 (pyenv builds) -- LP64 and little-endian bitfields, the same
 * on aarch64. Debian's 3.11.2 has the same _PyRuntime size as 3.11.7.
 * What can move between patch releases of one minor version: the ABI
 * promise covers the public structures (PyCodeObject, PyFrameObject,
 * PyASCIIObject, PyThreadState's first members), not the internal ones:
 * _PyRuntimeState (the TSS key's offset in it is the most exposed: any member
 * added before it moves it, and its size -- checked against _PyRuntime's
 * st_size for the versions of the tables -- would change too),
 * _PyInterpreterFrame, _PyCFrame, PyInterpreterState (threads.head), the
 * tail of PyCodeObject (_co_firsttraceable, co_code_adaptive). Hence the
 * check below, and the search for the key when its table offset fails; on
 * 3.13 the debug offsets follow a move (and _co_firsttraceable is taken at
 * its 3.13.0 distance before co_code_adaptive).
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
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tr_core.h"
#include "tr_hash.h"
#include "tr_python.h"

#ifndef PTHREAD_KEYS_MAX
#define PTHREAD_KEYS_MAX 128
#endif

/* ---- offsets --------------------------------------------------------------- */

enum { WALK_310, WALK_311, WALK_313 };

typedef struct {
    int walk;                     /* WALK_* */
    /* _PyRuntime */
    size_t rt_tss;                /* the GIL-state Py_tss_t {int _is_initialized; pthread_key_t _key} */
    size_t rt_interp_head;        /* interpreters.head */
    size_t rt_size;               /* sizeof(_PyRuntimeState) of the table, 0: none */
    /* PyInterpreterState */
    size_t is_next, is_threads_head;
    /* PyThreadState */
    size_t ts_next, ts_interp, ts_thread_id, ts_native_id;   /* ts_native_id 0: none (3.10) */
    size_t ts_frame;              /* 3.10 frame, 3.11/3.12 cframe, 3.13+ current_frame */
    size_t cf_current;            /* _PyCFrame.current_frame (3.11/3.12) */
    /* frames */
    size_t fr_back, fr_code, fr_instr, fr_owner;  /* 3.10: f_back, f_code, f_lasti (int) */
    size_t fr_lineno;             /* 3.10 */
    int owner_generator;          /* FRAME_OWNED_BY_GENERATOR */
    int owner_skip;               /* owner >= this: skipped (C stack, interpreter); 256: none */
    int has_firsttraceable;
    uintptr_t exec_mask;          /* clears _PyStackRef tag bits (3.14) */
    /* PyCodeObject */
    size_t co_firstlineno, co_filename, co_name, co_linetable;
    size_t co_code_adaptive;      /* 3.11+ */
    size_t co_firsttraceable;
    /* PyBytesObject, PyVarObject */
    size_t ob_size, bytes_sval;
    /* PyASCIIObject / PyCompactUnicodeObject / PyUnicodeObject */
    size_t uni_length, uni_state, uni_ascii_size, uni_compact_size, uni_data_any;
    int uni_has_ready;            /* 3.10/3.11: state.ready must be set */
} py_offsets;

/* CPython 3.10 (3.10.13 headers). */
static const py_offsets OFF_310 = {
    .walk = WALK_310,
    .rt_tss = 584, .rt_interp_head = 32, .rt_size = 672,
    .is_next = 0, .is_threads_head = 8,            /* tstate_head */
    .ts_next = 8, .ts_interp = 16, .ts_thread_id = 176, .ts_native_id = 0,
    .ts_frame = 24,
    .fr_back = 24, .fr_code = 32, .fr_instr = 96, .fr_owner = 0,
    .fr_lineno = 100,
    .owner_generator = -1, .owner_skip = 256, .has_firsttraceable = 0, .exec_mask = ~(uintptr_t)0,
    .co_firstlineno = 40, .co_filename = 104, .co_name = 112, .co_linetable = 120,
    .ob_size = 16, .bytes_sval = 32,
    .uni_length = 16, .uni_state = 32, .uni_ascii_size = 48, .uni_compact_size = 72,
    .uni_data_any = 72, .uni_has_ready = 1,
};

/* CPython 3.11 (3.11.7 headers; Debian's 3.11.2 agrees on the runtime size). */
static const py_offsets OFF_311 = {
    .walk = WALK_311,
    .rt_tss = 592, .rt_interp_head = 40, .rt_size = 166688,
    .is_next = 0, .is_threads_head = 16,
    .ts_next = 8, .ts_interp = 16, .ts_thread_id = 152, .ts_native_id = 160,
    .ts_frame = 56, .cf_current = 8,
    .fr_back = 48, .fr_code = 32, .fr_instr = 56, .fr_owner = 69,
    .owner_generator = 1, .owner_skip = 256, .has_firsttraceable = 1, .exec_mask = ~(uintptr_t)0,
    .co_firstlineno = 72, .co_filename = 112, .co_name = 128 /* co_qualname */, .co_linetable = 136,
    .co_code_adaptive = 184, .co_firsttraceable = 168,
    .ob_size = 16, .bytes_sval = 32,
    .uni_length = 16, .uni_state = 32, .uni_ascii_size = 48, .uni_compact_size = 72,
    .uni_data_any = 72, .uni_has_ready = 1,
};

/* CPython 3.12 (3.12.1 headers). */
static const py_offsets OFF_312 = {
    .walk = WALK_311,
    .rt_tss = 1544, .rt_interp_head = 40, .rt_size = 459944,
    .is_next = 0, .is_threads_head = 72,
    .ts_next = 8, .ts_interp = 16, .ts_thread_id = 136, .ts_native_id = 144,
    .ts_frame = 56, .cf_current = 0,
    .fr_back = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70,
    .owner_generator = 1, .owner_skip = 3 /* FRAME_OWNED_BY_CSTACK */, .has_firsttraceable = 1,
    .exec_mask = ~(uintptr_t)0,
    .co_firstlineno = 68, .co_filename = 112, .co_name = 128 /* co_qualname */, .co_linetable = 136,
    .co_code_adaptive = 192, .co_firsttraceable = 176,
    .ob_size = 16, .bytes_sval = 32,
    .uni_length = 16, .uni_state = 32, .uni_ascii_size = 40, .uni_compact_size = 56,
    .uni_data_any = 56, .uni_has_ready = 0,
};

/* CPython 3.13 (3.13.0 headers): what the debug offsets replace is
 * overwritten from them at init; rt_tss and co_firsttraceable stay. */
static const py_offsets OFF_313 = {
    .walk = WALK_313,
    .rt_tss = 2160, .rt_interp_head = 632, .rt_size = 283320,
    .is_next = 7264, .is_threads_head = 7344,
    .ts_next = 8, .ts_interp = 16, .ts_thread_id = 152, .ts_native_id = 160,
    .ts_frame = 72,
    .fr_back = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70,
    .owner_generator = 1, .owner_skip = 3 /* FRAME_OWNED_BY_CSTACK */, .has_firsttraceable = 1,
    .exec_mask = ~(uintptr_t)0,
    .co_firstlineno = 68, .co_filename = 112, .co_name = 128 /* co_qualname */, .co_linetable = 136,
    .co_code_adaptive = 200, .co_firsttraceable = 184,
    .ob_size = 16, .bytes_sval = 32,
    .uni_length = 16, .uni_state = 32, .uni_ascii_size = 40, .uni_compact_size = 56,
    .uni_data_any = 56, .uni_has_ready = 0,
};

/* _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h), 584 bytes. */
typedef struct {
    char cookie[8];
    uint64_t version, free_threaded;
    struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
    struct {
        uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
            gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
            gil_runtime_state_holder;
    } interpreter_state;
    struct {
        uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
            datastack_chunk, status;
    } thread_state;
    struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive;
    } code_object;
    struct { uint64_t size, ob_type; } pyobject;
    struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
    struct { uint64_t size, ob_item, ob_size; } tuple_object;
    struct { uint64_t size, ob_item, ob_size; } list_object;
    struct { uint64_t size, ma_keys, ma_values; } dict_object;
    struct { uint64_t size, ob_fval; } float_object;
    struct { uint64_t size, lv_tag, ob_digit; } long_object;
    struct { uint64_t size, ob_size, ob_sval; } bytes_object;
    struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
    struct { uint64_t size, collecting; } gc;
} dbg_offsets_313;
_Static_assert(sizeof(dbg_offsets_313) == 584, "3.13's _Py_DebugOffsets is 584 bytes");

/* _Py_DebugOffsets of 3.14 (Include/internal/pycore_debug_offsets.h), up to
 * the members used here (more follow). NOT checked against a real 3.14 (none
 * was available): taken from the header's text in a 3.14-era source tree,
 * not a release tag. What it adds to 3.13's: interpreter_state.threads_main,
 * .code_object_generation, .tlbc_generation; interpreter_frame.stackpointer,
 * .tlbc_index; code_object.co_tlbc; set_object before dict_object. A layout
 * that differs fails the sanity checks or the check (no frames, one line). */
typedef struct {
    char cookie[8];
    uint64_t version, free_threaded;
    struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
    struct {
        uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins,
            ceval_gil, gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
            gil_runtime_state_holder, code_object_generation, tlbc_generation;
    } interpreter_state;
    struct {
        uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
            datastack_chunk, status;
    } thread_state;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
    } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive, co_tlbc;
    } code_object;
    struct { uint64_t size, ob_type; } pyobject;
    struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
    struct { uint64_t size, ob_item, ob_size; } tuple_object;
    struct { uint64_t size, ob_item, ob_size; } list_object;
    struct { uint64_t size, used, table, mask; } set_object;
    struct { uint64_t size, ma_keys, ma_values; } dict_object;
    struct { uint64_t size, ob_fval; } float_object;
    struct { uint64_t size, lv_tag, ob_digit; } long_object;
    struct { uint64_t size, ob_size, ob_sval; } bytes_object;
    struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
} dbg_offsets_314_head;

/* ---- process-wide state ------------------------------------------------------ */

static _Atomic int g_state;                 /* TR_PY_* */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_check_mu = PTHREAD_MUTEX_INITIALIZER;
static py_offsets O;
static uintptr_t g_runtime;
static size_t g_runtime_size;
static uintptr_t g_code_type, g_unicode_type, g_bytes_type, g_frame_type;
static uint32_t g_version;
static char g_version_str[16];
static char g_module[512];                  /* basename of the module holding _PyRuntime */
static int g_minor;                         /* 10..14 */
static uint32_t g_tss_key;                  /* the key the check found (READY) */
static int g_from_debug_offsets;            /* 3.13+: offsets from _Py_DebugOffsets */
static int g_tss_searched;                  /* the TSS key's place was searched for */
static int g_dbg_diff = -1;                 /* 3.13: fields where the debug offsets differ from OFF_313 */
static int g_free_threaded;
static int g_size_differs;                  /* 3.10-3.12: _PyRuntime's size is not the table's */

int tr_py_state(void)
{
    return atomic_load_explicit(&g_state, memory_order_acquire);
}

uint32_t tr_py_version(void)
{
    return tr_py_state() == TR_PY_UNINIT ? 0 : g_version;
}

const char *tr_py_version_str(void)
{
    return tr_py_state() == TR_PY_UNINIT ? "" : g_version_str;
}

/* ---- safe reads ----------------------------------------------------------------- */

static int g_mem_fd = -2;   /* /proc/self/mem: -2 not opened yet, -1 unavailable */
static pid_t g_mem_pid;     /* the process that opened it (a forked child reopens) */
static pthread_mutex_t g_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_vm_ok = 1;

/* Copies n bytes at address src of this process into dst without faulting:
 * 1 when all were read, 0 otherwise (unmapped, unreadable). */
static int safe_read(void *dst, uintptr_t src, size_t n)
{
    if (!n) return 1;
    if (!src || src + n < src) return 0;
    if (atomic_load_explicit(&g_vm_ok, memory_order_relaxed)) {
        struct iovec l = {dst, n}, r = {(void *)src, n};
        ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
        if (got == (ssize_t)n) return 1;
        if (got >= 0 || errno == EFAULT) return 0;
        /* ENOSYS, EPERM (seccomp, ptrace policy): /proc/self/mem from now on */
        atomic_store_explicit(&g_vm_ok, 0, memory_order_relaxed);
    }
    pthread_mutex_lock(&g_mem_mu);
    if (g_mem_fd != -2 && g_mem_pid != getpid()) {
        /* opened by the parent: that file reads the parent's memory */
        if (g_mem_fd >= 0) close(g_mem_fd);
        g_mem_fd = -2;
    }
    if (g_mem_fd == -2) {
        g_mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
        g_mem_pid = getpid();
    }
    int fd = g_mem_fd;
    ssize_t got = -1;
    if (fd >= 0 && src <= (uintptr_t)INT64_MAX) got = pread(fd, dst, n, (off_t)src);
    pthread_mutex_unlock(&g_mem_mu);
    return got == (ssize_t)n;
}

/* Reads through safe_read (safe != 0: the check, the writer's strings) or
 * directly (the hot path, after the check). */
__attribute__((always_inline)) static inline int rd(int safe, void *dst, uintptr_t src, size_t n)
{
    if (!safe) {
        memcpy(dst, (const void *)src, n);
        return 1;
    }
    return safe_read(dst, src, n);
}

__attribute__((always_inline)) static inline int rd_ptr(int safe, uintptr_t src, uintptr_t *out)
{
    return rd(safe, out, src, sizeof *out);
}

__attribute__((always_inline)) static inline int rd_i32(int safe, uintptr_t src, int32_t *out)
{
    return rd(safe, out, src, sizeof *out);
}

/* ---- finding the interpreter: ELF dynamic symbols ------------------------------- */

typedef struct {
    uintptr_t base;
    const ElfW(Sym) *symtab;
    const char *strtab;
    const uint32_t *gnu_hash, *sysv_hash;
    char path[512];
    /* the result */
    uintptr_t runtime;
    size_t runtime_size;
} py_module;

static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) p)
{
    /* the loader relocates these entries in place on most targets; when it
     * did not, they are still module-relative */
    return p < base ? base + p : p;
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++) h = h * 33 + (unsigned char)*s;
    return h;
}

static uint32_t sysv_hash(const char *s)
{
    uint32_t h = 0;
    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        uint32_t g = h & 0xf0000000u;
        if (g) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

static int sym_ok(const py_module *m, const ElfW(Sym) *s, const char *name)
{
    return s->st_shndx != SHN_UNDEF && s->st_value != 0 && strcmp(m->strtab + s->st_name, name) == 0;
}

/* The definition of name in module m, NULL if none. */
static const ElfW(Sym) *mod_lookup(const py_module *m, const char *name)
{
    if (!m->symtab || !m->strtab) return NULL;
    if (m->gnu_hash) {
        const uint32_t *gh = m->gnu_hash;
        uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
        if (!nbuckets) return NULL;
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gh + 4);
        const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t h = gnu_hash(name);
        uint32_t i = buckets[h % nbuckets];
        if (i < symoffset) return NULL;
        for (;; i++) {
            uint32_t h2 = chain[i - symoffset];
            if ((h | 1) == (h2 | 1) && sym_ok(m, &m->symtab[i], name)) return &m->symtab[i];
            if (h2 & 1) break;
        }
        return NULL;
    }
    if (m->sysv_hash) {
        uint32_t nbucket = m->sysv_hash[0];
        const uint32_t *bucket = m->sysv_hash + 2, *chain = bucket + nbucket;
        if (!nbucket) return NULL;
        for (uint32_t i = bucket[sysv_hash(name) % nbucket]; i; i = chain[i])
            if (sym_ok(m, &m->symtab[i], name)) return &m->symtab[i];
    }
    return NULL;
}

static uintptr_t mod_addr(const py_module *m, const char *name, size_t *size)
{
    const ElfW(Sym) *s = mod_lookup(m, name);
    if (!s) return 0;
    if (size) *size = s->st_size;
    return m->base + s->st_value;
}

static int find_runtime_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    py_module *m = data;
    static const char vdso[] = "linux-vdso";
    if (info->dlpi_name && strncmp(info->dlpi_name, vdso, sizeof vdso - 1) == 0) return 0;
    memset(m, 0, sizeof *m);
    m->base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: m->symtab = (const ElfW(Sym) *)dyn_ptr(m->base, dyn->d_un.d_ptr); break;
        case DT_STRTAB: m->strtab = (const char *)dyn_ptr(m->base, dyn->d_un.d_ptr); break;
        case DT_GNU_HASH: m->gnu_hash = (const uint32_t *)dyn_ptr(m->base, dyn->d_un.d_ptr); break;
        case DT_HASH: m->sysv_hash = (const uint32_t *)dyn_ptr(m->base, dyn->d_un.d_ptr); break;
        default: break;
        }
    }
    size_t rsize = 0;
    uintptr_t rt = mod_addr(m, "_PyRuntime", &rsize);
    if (!rt) return 0;
    m->runtime = rt;
    m->runtime_size = rsize;
    if (info->dlpi_name && info->dlpi_name[0]) {
        snprintf(m->path, sizeof m->path, "%s", info->dlpi_name);
    } else {
        ssize_t k = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
        m->path[k > 0 ? k : 0] = 0;
    }
    return 1;
}

/* The minor version a path names ("python3.10", "libpython3.10.so"), -1. */
static int path_minor(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *p = strstr(base, "python3.");
    if (!p) return -1;
    p += 8;
    if (*p < '0' || *p > '9') return -1;
    int minor = 0;
    for (; *p >= '0' && *p <= '9' && minor < 1000; p++) minor = minor * 10 + (*p - '0');
    return minor;
}

static void set_version_str(uint32_t v, int with_micro)
{
    if (with_micro)
        snprintf(g_version_str, sizeof g_version_str, "%u.%u.%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff);
    else
        snprintf(g_version_str, sizeof g_version_str, "%u.%u", v >> 24, (v >> 16) & 0xff);
}

/* Fills O from the debug offsets of 3.13 / 3.14; 0 when they look wrong. */
static int load_debug_offsets(int minor)
{
    char cookie[8];
    memcpy(cookie, (const void *)g_runtime, 8);
    if (memcmp(cookie, "xdebugpy", 8) != 0) return 0;
    O = OFF_313;
    uint64_t ver, ft, rt_size;
    uint64_t rt_head, is_size, is_next, is_threads, ts_size, ts_next, ts_interp, ts_frame, ts_tid,
        ts_ntid, fr_size, fr_prev, fr_exec, fr_instr, fr_owner, co_size, co_file, co_qual, co_lt,
        co_first, co_adaptive, ob_type, by_size, by_sval, un_state, un_len, un_ascii;
#define TAKE(D)                                                                              \
    do {                                                                                     \
        const D *d = (const D *)g_runtime;                                                   \
        if (g_runtime_size < sizeof *d) return 0;                                            \
        ver = d->version; ft = d->free_threaded; rt_size = d->runtime_state.size;             \
        rt_head = d->runtime_state.interpreters_head;                                        \
        is_size = d->interpreter_state.size; is_next = d->interpreter_state.next;            \
        is_threads = d->interpreter_state.threads_head;                                      \
        ts_size = d->thread_state.size; ts_next = d->thread_state.next;                      \
        ts_interp = d->thread_state.interp; ts_frame = d->thread_state.current_frame;         \
        ts_tid = d->thread_state.thread_id; ts_ntid = d->thread_state.native_thread_id;      \
        fr_size = d->interpreter_frame.size; fr_prev = d->interpreter_frame.previous;        \
        fr_exec = d->interpreter_frame.executable; fr_instr = d->interpreter_frame.instr_ptr; \
        fr_owner = d->interpreter_frame.owner;                                               \
        co_size = d->code_object.size; co_file = d->code_object.filename;                    \
        co_qual = d->code_object.qualname; co_lt = d->code_object.linetable;                 \
        co_first = d->code_object.firstlineno; co_adaptive = d->code_object.co_code_adaptive; \
        ob_type = d->pyobject.ob_type;                                                       \
        by_size = d->bytes_object.ob_size; by_sval = d->bytes_object.ob_sval;                \
        un_state = d->unicode_object.state; un_len = d->unicode_object.length;               \
        un_ascii = d->unicode_object.asciiobject_size;                                       \
    } while (0)
    if (minor == 13) TAKE(dbg_offsets_313);
    else TAKE(dbg_offsets_314_head);
#undef TAKE
    if (ft != 0) g_free_threaded = 1;
    if (ver != g_version || ft != 0) return 0;
    if (rt_size != g_runtime_size) return 0;
    if (is_size < 64 || is_size > (1u << 20) || ts_size < 64 || ts_size > (1u << 16) ||
        fr_size < 32 || fr_size > 1024 || co_size < 64 || co_size > 4096)
        return 0;
    if (rt_head + 8 > rt_size || is_next + 8 > is_size || is_threads + 8 > is_size ||
        ts_next + 8 > ts_size || ts_frame + 8 > ts_size || ts_tid + 8 > ts_size || ts_ntid + 8 > ts_size ||
        ts_interp + 8 > ts_size ||
        fr_prev + 8 > fr_size || fr_exec + 8 > fr_size || fr_instr + 8 > fr_size || fr_owner >= fr_size ||
        co_file + 8 > co_size || co_qual + 8 > co_size || co_lt + 8 > co_size || co_first + 4 > co_size ||
        co_adaptive > co_size || ob_type != 8 || by_size != 16 || by_sval < 24 || by_sval > 64 ||
        un_len + 8 > 64 || un_state + 4 > 64 || un_ascii < 32 || un_ascii > 64)
        return 0;
    O.rt_interp_head = rt_head;
    O.rt_size = rt_size;
    O.is_next = is_next;
    O.is_threads_head = is_threads;
    O.ts_next = ts_next;
    O.ts_interp = ts_interp;
    O.ts_thread_id = ts_tid;
    O.ts_native_id = ts_ntid;
    O.ts_frame = ts_frame;
    O.fr_back = fr_prev;
    O.fr_code = fr_exec;
    O.fr_instr = fr_instr;
    O.fr_owner = fr_owner;
    O.co_filename = co_file;
    O.co_name = co_qual;
    O.co_linetable = co_lt;
    O.co_firstlineno = co_first;
    O.co_code_adaptive = co_adaptive;
    O.ob_size = by_size;
    O.bytes_sval = by_sval;
    O.uni_state = un_state;
    O.uni_length = un_len;
    O.uni_ascii_size = un_ascii;
    O.uni_compact_size = un_ascii + 16;     /* + utf8_length, utf8 */
    O.uni_data_any = un_ascii + 16;
    if (minor == 13) {
        /* the table (3.13.0's headers) against what this 3.13 says */
        const py_offsets *t = &OFF_313;
        g_dbg_diff = (O.rt_interp_head != t->rt_interp_head) + (O.rt_size != t->rt_size) +
                     (O.is_next != t->is_next) + (O.is_threads_head != t->is_threads_head) +
                     (O.ts_next != t->ts_next) + (O.ts_interp != t->ts_interp) +
                     (O.ts_thread_id != t->ts_thread_id) + (O.ts_native_id != t->ts_native_id) +
                     (O.ts_frame != t->ts_frame) + (O.fr_back != t->fr_back) + (O.fr_code != t->fr_code) +
                     (O.fr_instr != t->fr_instr) + (O.fr_owner != t->fr_owner) +
                     (O.co_filename != t->co_filename) + (O.co_name != t->co_name) +
                     (O.co_linetable != t->co_linetable) + (O.co_firstlineno != t->co_firstlineno) +
                     (O.co_code_adaptive != t->co_code_adaptive) + (O.ob_size != t->ob_size) +
                     (O.bytes_sval != t->bytes_sval) + (O.uni_state != t->uni_state) +
                     (O.uni_length != t->uni_length) + (O.uni_ascii_size != t->uni_ascii_size);
        /* _co_firsttraceable (not in the debug offsets) sits 16 bytes before
         * co_code_adaptive in 3.13.0 (co_extra between): follow a move */
        O.co_firsttraceable = O.co_code_adaptive - (t->co_code_adaptive - t->co_firsttraceable);
    }
    if (minor == 14) {
        /* 3.14: FRAME_OWNED_BY_INTERPRETER = 3, FRAME_OWNED_BY_CSTACK = 4 are
         * both incomplete; f_executable is a tagged _PyStackRef; the TSS
         * key's place is searched for at the check; _co_firsttraceable's
         * place is not known here */
        O.owner_skip = 3;
        O.exec_mask = ~(uintptr_t)7;
        O.has_firsttraceable = 0;
        O.rt_tss = SIZE_MAX;
    }
    return 1;
}

static void py_init_once(void)
{
    py_module m;
    int state = TR_PY_NONE;
    if (!dl_iterate_phdr(find_runtime_cb, &m) || !m.runtime) goto out;
    g_runtime = m.runtime;
    g_runtime_size = m.runtime_size;
    {
        const char *b = strrchr(m.path, '/');
        snprintf(g_module, sizeof g_module, "%s", b ? b + 1 : m.path);
    }
    g_code_type = mod_addr(&m, "PyCode_Type", NULL);
    g_unicode_type = mod_addr(&m, "PyUnicode_Type", NULL);
    g_bytes_type = mod_addr(&m, "PyBytes_Type", NULL);
    g_frame_type = mod_addr(&m, "PyFrame_Type", NULL);
    uintptr_t pv = mod_addr(&m, "Py_Version", NULL);
    int has_isnone = mod_addr(&m, "Py_IsNone", NULL) != 0;
    int minor;
    state = TR_PY_UNSUPPORTED;
    if (pv) {
        g_version = (uint32_t) * (const unsigned long *)pv;
        set_version_str(g_version, 1);
        minor = (g_version >> 24) == 3 ? (int)((g_version >> 16) & 0xff) : -1;
    } else {
        int pm = path_minor(m.path);
        minor = has_isnone && (pm == 10 || (pm < 0 && g_runtime_size == OFF_310.rt_size)) ? 10 : pm;
        g_version = minor >= 0 ? 0x03000000u | ((uint32_t)minor << 16) : 0;
        if (minor >= 0) set_version_str(g_version, 0);
        if (minor == 10 && !has_isnone) minor = -1;
    }
    if (!g_code_type || !g_unicode_type || !g_bytes_type || (minor == 10 && !g_frame_type)) {
        tr_warn("no Python call sites: CPython %s in %s lacks PyCode_Type/PyUnicode_Type/PyBytes_Type",
                g_version_str[0] ? g_version_str : "?", m.path);
        goto out;
    }
    g_minor = minor;
    switch (minor) {
    case 10: O = OFF_310; break;
    case 11: O = OFF_311; break;
    case 12: O = OFF_312; break;
    case 13:
    case 14:
        g_from_debug_offsets = 1;
        if (!load_debug_offsets(minor)) {
            if (g_free_threaded)
                tr_warn("no Python call sites: CPython %s is a free-threaded build (not supported)", g_version_str);
            else
                tr_warn("no Python call sites: CPython %s: its _Py_DebugOffsets (_PyRuntime) do not look right",
                        g_version_str);
            goto out;
        }
        break;
    default:
        tr_warn("no Python call sites: CPython %s (%s) is not supported (3.10 to 3.14 are)",
                g_version_str[0] ? g_version_str : "of an unknown version", m.path);
        goto out;
    }
#ifdef TR_PY_TEST_HOOKS
    /* tests/python/test_break.py: offsets made wrong on purpose */
    const char *brk = getenv("TR_PY_TEST_BREAK");
    if (brk && strcmp(brk, "tss") == 0 && O.rt_tss != SIZE_MAX) O.rt_tss += 8;
    if (brk && strcmp(brk, "notss") == 0) O.rt_tss = SIZE_MAX;      /* as on 3.14: searched */
    if (brk && strcmp(brk, "novm") == 0) atomic_store(&g_vm_ok, 0);  /* /proc/self/mem reads */
    if (brk && strcmp(brk, "frame") == 0) O.fr_back += 8;
    if (brk && strcmp(brk, "code") == 0) O.co_linetable += 8;
    if (brk && strcmp(brk, "version") == 0) {
        tr_warn("no Python call sites: CPython %s (%s) is not supported (3.10 to 3.14 are)", "3.99", m.path);
        goto out;
    }
#endif
    if (!g_from_debug_offsets) g_size_differs = O.rt_size != g_runtime_size;
    if (O.rt_tss != SIZE_MAX && O.rt_tss + 8 > g_runtime_size) O.rt_tss = SIZE_MAX;
    state = TR_PY_PENDING;
out:
    atomic_store_explicit(&g_state, state, memory_order_release);
}

void tr_py_init(void)
{
    pthread_once(&g_once, py_init_once);
}

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
    if (!rd_ptr(safe, code + O.co_filename, &fname) || !rd_ptr(safe, code + O.co_name, &qual) ||
        !rd_i32(safe, code + O.co_firstlineno, &first))
        return 0;
    if (!table || (table & 7) || !rd_ptr(safe, table + 8, &ttype) || ttype != g_bytes_type ||
        !rd(safe, &tlen, table + O.ob_size, sizeof tlen) || tlen > (1u << 26))
        return 0;
    *key = tr_mix64(tr_mix64(tr_mix64(tr_fmix64(code), fname), qual), table) | 1;
    const uint8_t *t = (const uint8_t *)(table + O.bytes_sval);
    uint8_t *copy = NULL;
    if (safe) {
        copy = malloc(tlen ? tlen : 1);
        if (!copy || !safe_read(copy, table + O.bytes_sval, tlen)) {
            free(copy);
            return 0;
        }
        t = copy;
    }
    int addr = lasti < 0 ? -1 : lasti * 2;
    *line = O.walk == WALK_310 ? line_310(t, tlen, first, addr) : line_311(t, tlen, first, addr);
    free(copy);
    return 1;
}

typedef struct {
    py_tls *tls;        /* NULL: no cache, no counters (the check's safe walk) */
    int bad, cut;
} walk_ctx;

/* The first frame of thread state ts (0: none). */
__attribute__((always_inline)) static inline int first_frame(int safe, uintptr_t ts, uintptr_t *f)
{
    *f = 0;
    if (!rd_ptr(safe, ts + O.ts_frame, f)) return 0;
    if (O.walk == WALK_311 && *f) {
        uintptr_t cf = *f;
        *f = 0;
        if ((cf & 7) || !rd_ptr(safe, cf + O.cf_current, f)) return 0;
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
        if (O.walk == WALK_310) {
            uintptr_t ftype = 0;
            if (!rd_ptr(safe, f + 8, &ftype) || ftype != g_frame_type) {
                cx->bad = 1;
                break;
            }
        } else {
            if (!rd(safe, &owner, f + O.fr_owner, 1)) {
                cx->bad = 1;
                break;
            }
            skip = owner >= O.owner_skip;
        }
        if (!skip) {
            if (!rd_ptr(safe, f + O.fr_code, &code)) {
                cx->bad = 1;
                break;
            }
            code &= O.exec_mask;
            if (!code || (code & 7) || !rd_ptr(safe, code + 8, &ctype) || ctype != g_code_type ||
                !rd_ptr(safe, code + O.co_linetable, &table)) {
                cx->bad = 1;
                break;
            }
            if (O.walk == WALK_310) {
                if (!rd_i32(safe, f + O.fr_instr, &lasti)) {
                    cx->bad = 1;
                    break;
                }
                if (lasti < -1) lasti = -1;
            } else {
                if (!rd_ptr(safe, f + O.fr_instr, &instr)) {
                    cx->bad = 1;
                    break;
                }
                intptr_t d = (intptr_t)(instr - (code + O.co_code_adaptive));
                lasti = d < -2 ? -1 : (int32_t)(d >> 1);
                if (d > ((intptr_t)1 << 30)) lasti = INT32_MAX;
                if (O.has_firsttraceable && owner != O.owner_generator) {
                    int32_t ft = 0;
                    if (!rd_i32(safe, code + O.co_firsttraceable, &ft)) {
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
            if (O.walk == WALK_310) {
                /* 3.10's PyFrame_GetLineNumber: f_lineno when it is not 0
                 * (set while a trace function runs, or by a jump) */
                int32_t lineno = 0;
                if (rd_i32(safe, f + O.fr_lineno, &lineno) && lineno > 0) line = lineno;
            }
            out[n].code = code;
            out[n].code_key = key;
            out[n].line = line;
            out[n].lasti = lasti;
            n++;
        }
        uintptr_t next = 0;
        if (!rd_ptr(safe, f + O.fr_back, &next)) {
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
    const int32_t *tss = (const int32_t *)(g_runtime + off);
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
    if (!safe_read(&interp, g_runtime + O.rt_interp_head, sizeof interp)) return 0;
    for (int ni = 0; interp && ni < 256; ni++) {
        uintptr_t ts = 0;
        if (!safe_read(&ts, interp + O.is_threads_head, sizeof ts)) return 0;
        for (int nt = 0; ts && nt < 100000; nt++) {
            uintptr_t id = 0;
            if (!safe_read(&id, ts + O.ts_thread_id, sizeof id)) return 0;
            if (id == me) {
                unsigned long nid = 0;
                if (!O.ts_native_id) return ts;
                if (safe_read(&nid, ts + O.ts_native_id, sizeof nid) && (long)nid == tid) return ts;
            }
            if (!safe_read(&ts, ts + O.ts_next, sizeof ts)) return 0;
        }
        if (!safe_read(&interp, interp + O.is_next, sizeof interp)) return 0;
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
    const int32_t *t = (const int32_t *)(g_runtime + off);
    if ((off & 7) || off < O.rt_interp_head + 24) return 0;
    if (g_minor <= 11) {
        uintptr_t auto_interp, interp = 0;
        int32_t check_enabled;
        memcpy(&auto_interp, (const void *)(g_runtime + off - 8), 8);
        memcpy(&check_enabled, (const void *)(g_runtime + off - 24), 4);
        return check_enabled == 1 && safe_read(&interp, ts + O.ts_interp, 8) && interp &&
               auto_interp == interp;
    }
    return off + 16 <= g_runtime_size && t[2] == 1 && t[3] != t[1] && (uint32_t)t[3] < PTHREAD_KEYS_MAX;
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
    if (hint == SIZE_MAX) hint = OFF_313.rt_tss;
#define DIST(o) ((o) > hint ? (o) - hint : hint - (o))
    for (size_t off = 0; off + 8 <= g_runtime_size; off += 4) {
        if (tss_tstate(off, &key) != ts) continue;
        if (tss_in_place(off, ts)) {
            if (best == SIZE_MAX || DIST(off) < DIST(best)) best = off;
        } else if (!(off & 7) && off >= O.rt_interp_head + 24) {
            if (any == SIZE_MAX || DIST(off) < DIST(any)) any = off;
        }
    }
#undef DIST
    if (best != SIZE_MAX) return best;
    return g_minor >= 14 ? any : SIZE_MAX;
}

static int unicode_utf8(uintptr_t obj, char *out, size_t cap);

/* The check (g_check_mu held, state PENDING). Returns the new state: READY,
 * DISABLED, or PENDING (this thread cannot tell: try again later). */
static int check_offsets(void)
{
    const char *why = NULL;
    uint32_t key = 0;
    uintptr_t ts_key = O.rt_tss != SIZE_MAX ? tss_tstate(O.rt_tss, &key) : 0;
    uintptr_t ts_list = list_tstate();
    if (!ts_list) {
        if (!ts_key) return TR_PY_PENDING;     /* not a Python thread (or nothing to compare) */
        why = "the thread state of the GIL-state key is not in the interpreter's thread list";
        goto fail;
    }
    if (ts_key != ts_list) {
        size_t off = search_tss(ts_list, O.rt_tss);
        if (off == SIZE_MAX) {
            why = "no GIL-state TSS key in _PyRuntime gives the thread's state";
            goto fail;
        }
        O.rt_tss = off;
        g_tss_searched = 1;
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
    if (!safe_read(&fname, code + O.co_filename, 8) || !safe_read(&table, code + O.co_linetable, 8) ||
        !safe_read(&ttype, table + 8, 8) || ttype != g_bytes_type ||
        !safe_read(&first, code + O.co_firstlineno, 4) || first <= 0 ||
        unicode_utf8(fname, name, sizeof name) <= 0) {
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
    tr_warn("no Python call sites: CPython %s: %s (Python stacks off)", g_version_str, why);
    return TR_PY_DISABLED;
}

/* ---- capture ------------------------------------------------------------------------ */

int tr_py_capture(tr_py_frame *out, int max)
{
    int st = atomic_load_explicit(&g_state, memory_order_acquire);
    if (__builtin_expect(st != TR_PY_READY, 0)) {
        if (st == TR_PY_UNINIT) {
            tr_py_init();
            st = atomic_load_explicit(&g_state, memory_order_acquire);
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
            st = atomic_load_explicit(&g_state, memory_order_acquire);
            if (st == TR_PY_PENDING) {
                st = check_offsets();
                atomic_store_explicit(&g_state, st, memory_order_release);
            }
            pthread_mutex_unlock(&g_check_mu);
            if (st == TR_PY_PENDING && tl) tl->check_wait = CHECK_RETRY;
        }
        if (st != TR_PY_READY) return 0;
    }
    if (max <= 0) return 0;
    uint32_t key;
    uintptr_t ts = tss_tstate(O.rt_tss, &key);
    /* the key the check found, and a thread state of this thread */
    if (!ts || (ts & 7) || key != g_tss_key ||
        *(const uintptr_t *)(ts + O.ts_thread_id) != (uintptr_t)pthread_self())
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

void tr_py_describe(char *out, size_t cap)
{
    static const char *names[] = {"not looked for", "no interpreter", "unsupported", "not checked yet",
                                  "checked", "check failed: off"};
    int st = tr_py_state();
    if (!cap) return;
    if (st <= TR_PY_NONE) {
        snprintf(out, cap, "CPython: %s", names[st < 0 ? 0 : st]);
        return;
    }
    if (st == TR_PY_UNSUPPORTED) {
        snprintf(out, cap, "CPython %s (%s): unsupported", g_version_str, g_module);
        return;
    }
    char tss[64];
    if (O.rt_tss == SIZE_MAX) snprintf(tss, sizeof tss, "TSS key not found yet");
    else snprintf(tss, sizeof tss, "TSS key at _PyRuntime+%zu (%s)", O.rt_tss, g_tss_searched ? "searched" : "table");
    char src[64];
    if (!g_from_debug_offsets)
        snprintf(src, sizeof src, "table offsets%s", g_size_differs ? " (_PyRuntime's size differs)" : "");
    else if (g_dbg_diff >= 0) snprintf(src, sizeof src, "debug offsets (%d differ from 3.13.0's table)", g_dbg_diff);
    else snprintf(src, sizeof src, "debug offsets");
    snprintf(out, cap, "CPython %s (%s): %s, %s, %s", g_version_str, g_module, src, tss, names[st]);
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

/* ---- strings ------------------------------------------------------------------------ */

/* Appends code point cp as UTF-8 if it fits (with the final NUL); 0 if not. */
static int put_utf8(char *out, size_t cap, size_t *len, uint32_t cp)
{
    char b[4];
    size_t k;
    if (cp >= 0xd800 && cp <= 0xdfff) cp = '?';    /* lone surrogates (surrogateescape) */
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        k = 3;
    } else if (cp < 0x110000) {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        k = 4;
    } else {
        b[0] = '?';
        k = 1;
    }
    if (*len + k + 1 > cap) return 0;
    memcpy(out + *len, b, k);
    *len += k;
    return 1;
}

/* The str object at obj as UTF-8 into out (cap > 0), safe reads. Returns the
 * length written, -1 if obj is not a readable str. */
static int unicode_utf8(uintptr_t obj, char *out, size_t cap)
{
    uintptr_t type = 0, data = 0;
    int64_t length = 0;
    uint32_t state = 0;
    if (!cap) return -1;
    out[0] = 0;
    if (!obj || (obj & 7) || !safe_read(&type, obj + 8, 8) || type != g_unicode_type ||
        !safe_read(&length, obj + O.uni_length, 8) || !safe_read(&state, obj + O.uni_state, 4) ||
        length < 0)
        return -1;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (O.uni_has_ready && !((state >> 7) & 1)) return -1;     /* a legacy string not made ready */
    if (kind != 1 && kind != 2 && kind != 4) return -1;
    if (ascii && kind != 1) return -1;
    if (compact) data = obj + (ascii ? O.uni_ascii_size : O.uni_compact_size);
    else if (!safe_read(&data, obj + O.uni_data_any, 8) || !data) return -1;
    /* at most cap - 1 characters can be needed */
    size_t nch = (size_t)length < cap - 1 ? (size_t)length : cap - 1;
    size_t len = 0;
    unsigned char buf[1024];
    size_t per = sizeof buf / kind;
    for (size_t done = 0; done < nch;) {
        size_t k = nch - done < per ? nch - done : per;
        if (!safe_read(buf, data + done * kind, k * kind)) return -1;
        for (size_t i = 0; i < k; i++) {
            uint32_t cp;
            if (kind == 1) cp = buf[i];
            else if (kind == 2) cp = (uint32_t)buf[2 * i] | (uint32_t)buf[2 * i + 1] << 8;
            else memcpy(&cp, buf + 4 * i, 4);
            if (ascii && cp >= 0x80) return -1;
            if (!put_utf8(out, cap, &len, cp)) goto done;
        }
        done += k;
    }
done:
    out[len] = 0;
    return (int)len;
}

static int code_ok(uintptr_t code)
{
    int st = tr_py_state();
    uintptr_t type = 0;
    return (st == TR_PY_READY || st == TR_PY_PENDING) && code && !(code & 7) &&
           safe_read(&type, code + 8, 8) && type == g_code_type;
}

int tr_py_code_info(uintptr_t code, char *file, size_t file_cap, char *qualname, size_t qual_cap,
                    int *firstlineno)
{
    if (!code_ok(code)) return -1;
    uintptr_t f = 0, q = 0;
    int32_t first = 0;
    if (!safe_read(&f, code + O.co_filename, 8) || !safe_read(&q, code + O.co_name, 8) ||
        !safe_read(&first, code + O.co_firstlineno, 4))
        return -1;
    if (file && file_cap && unicode_utf8(f, file, file_cap) < 0) return -1;
    if (qualname && qual_cap && unicode_utf8(q, qualname, qual_cap) < 0) return -1;
    if (firstlineno) *firstlineno = first;
    return 0;
}

int tr_py_code_matches(uintptr_t code, uint64_t key)
{
    if (!code_ok(code)) return 0;
    uintptr_t f = 0, q = 0, t = 0;
    if (!safe_read(&f, code + O.co_filename, 8) || !safe_read(&q, code + O.co_name, 8) ||
        !safe_read(&t, code + O.co_linetable, 8))
        return 0;
    return (tr_mix64(tr_mix64(tr_mix64(tr_fmix64(code), f), q), t) | 1) == key;
}
