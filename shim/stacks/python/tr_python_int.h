/* What the three files of the CPython frame reader (tr_python.h) share;
 * included by them only. They were one file, split by what each part does:
 *   tr_python_init.c  finding the interpreter, its version and its structure
 *                     offsets (tables, _Py_DebugOffsets): tr_py_init,
 *                     tr_py_state, tr_py_describe;
 *   tr_python_read.c  safe reads (process_vm_readv, /proc/self/mem) and the
 *                     strings of code objects: tr_py_code_info;
 *   tr_python.c       the hot path (thread state, frame walk, line tables,
 *                     per-thread line cache) and the one-time check of the
 *                     offsets: tr_py_capture.
 * The state they share is named tr_py_off (the running interpreter's
 * offsets) and tr_py_g_* (the rest); like every symbol of the shim it is
 * hidden (-fvisibility=hidden). */
#ifndef TR_PYTHON_INT_H
#define TR_PYTHON_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tr_python.h"


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
    /* PyTupleObject (tr_py_exception_info): ob_size, ob_item; 3.13+ from the debug offsets */
    size_t tuple_size, tuple_item;
} py_offsets;

/* ---- process-wide state (defined in tr_python_init.c, safe reads' in
 * tr_python_read.c; see there) ---------------------------------------------- */

extern py_offsets tr_py_off;                  /* the running interpreter's offsets */
extern const py_offsets tr_py_off_313;      /* search_tss: 3.13.0's TSS key place, also 3.14's hint */
extern _Atomic int tr_py_g_state;           /* TR_PY_* */
extern uintptr_t tr_py_g_runtime;
extern size_t tr_py_g_runtime_size;
extern uintptr_t tr_py_g_code_type, tr_py_g_unicode_type, tr_py_g_bytes_type, tr_py_g_frame_type;
/* tr_py_exception_info: PyTuple_Type, PyTraceBack_Type, &PyExc_BaseException (0: not found) */
extern uintptr_t tr_py_g_tuple_type, tr_py_g_tb_type, tr_py_g_base_exc;
extern char tr_py_g_version_str[16];
extern int tr_py_g_minor;                   /* 10..14 */
extern int tr_py_g_tss_searched;            /* the check searched for the TSS key's place */
extern _Atomic int tr_py_g_vm_ok;           /* process_vm_readv works (TR_PY_TEST_HOOKS: "novm") */

/* ---- safe reads (tr_python_read.c) ------------------------------------------- */


/* Copies n bytes at address src of this process into dst without faulting:
 * 1 when all were read, 0 otherwise (unmapped, unreadable). */
int tr_py_safe_read(void *dst, uintptr_t src, size_t n);

/* Reads through safe_read (safe != 0: the check, the writer's strings) or
 * directly (the hot path, after the check). */
__attribute__((always_inline)) static inline int rd(int safe, void *dst, uintptr_t src, size_t n)
{
    if (!safe) {
        memcpy(dst, (const void *)src, n);
        return 1;
    }
    return tr_py_safe_read(dst, src, n);
}

__attribute__((always_inline)) static inline int rd_ptr(int safe, uintptr_t src, uintptr_t *out)
{
    return rd(safe, out, src, sizeof *out);
}

__attribute__((always_inline)) static inline int rd_i32(int safe, uintptr_t src, int32_t *out)
{
    return rd(safe, out, src, sizeof *out);
}

/* ---- strings (tr_python_read.c) ---------------------------------------------- */

/* The str object at obj as UTF-8 into out (cap > 0), safe reads. Returns the
 * length written, -1 if obj is not a readable str. */
int tr_py_unicode_utf8(uintptr_t obj, char *out, size_t cap);

#endif
