/* Python call sites, finding the interpreter: its version and the offsets
 * of its structures. Interface in tr_python.h; the frame walk and the check
 * are tr_python.c's, the safe reads tr_python_read.c's (tr_python_int.h).
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
 * check (tr_python.c), and the search for the key when its table offset fails; on
 * 3.13 the debug offsets follow a move (and _co_firsttraceable is taken at
 * its 3.13.0 distance before co_code_adaptive). */
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tr_core.h"
#include "tr_python.h"
#include "tr_python_int.h"

/* ---- offsets (py_offsets: tr_python_int.h) ------------------------------------ */


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
const py_offsets tr_py_off_313 = {
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

/* Those without static are shared with tr_python.c and tr_python_read.c
 * (declared in tr_python_int.h, under tr_py_ names). */
_Atomic int tr_py_g_state;                        /* TR_PY_* */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
py_offsets tr_py_off;
uintptr_t tr_py_g_runtime;
size_t tr_py_g_runtime_size;
uintptr_t tr_py_g_code_type, tr_py_g_unicode_type, tr_py_g_bytes_type, tr_py_g_frame_type;
uintptr_t tr_py_g_tuple_type, tr_py_g_tb_type, tr_py_g_base_exc;
static uint32_t g_version;
char tr_py_g_version_str[16];
static char g_module[512];                  /* basename of the module holding _PyRuntime */
static char g_module_path[512];             /* its path (the loader's name, or /proc/self/exe) */
int tr_py_g_minor;                                /* 10..14 */
static int g_from_debug_offsets;            /* 3.13+: offsets from _Py_DebugOffsets */
int tr_py_g_tss_searched;                         /* the TSS key's place was searched for */
static int g_dbg_diff = -1;                 /* 3.13: fields where the debug offsets differ from tr_py_off_313 */
static int g_free_threaded;
static int g_size_differs;                  /* 3.10-3.12: _PyRuntime's size is not the table's */

int tr_py_state(void)
{
    return atomic_load_explicit(&tr_py_g_state, memory_order_acquire);
}

uint32_t tr_py_version(void)
{
    return tr_py_state() == TR_PY_UNINIT ? 0 : g_version;
}

const char *tr_py_version_str(void)
{
    return tr_py_state() == TR_PY_UNINIT ? "" : tr_py_g_version_str;
}

const char *tr_py_module_path(void)
{
    return tr_py_state() == TR_PY_UNINIT ? "" : g_module_path;
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
        snprintf(tr_py_g_version_str, sizeof tr_py_g_version_str, "%u.%u.%u", v >> 24, (v >> 16) & 0xff,
                 (v >> 8) & 0xff);
    else
        snprintf(tr_py_g_version_str, sizeof tr_py_g_version_str, "%u.%u", v >> 24, (v >> 16) & 0xff);
}

/* Fills O from the debug offsets of 3.13 / 3.14; 0 when they look wrong. */
static int load_debug_offsets(int minor)
{
    char cookie[8];
    memcpy(cookie, (const void *)tr_py_g_runtime, 8);
    if (memcmp(cookie, "xdebugpy", 8) != 0) return 0;
    tr_py_off = tr_py_off_313;
    uint64_t ver, ft, rt_size;
    uint64_t rt_head, is_size, is_next, is_threads, ts_size, ts_next, ts_interp, ts_frame, ts_tid,
        ts_ntid, fr_size, fr_prev, fr_exec, fr_instr, fr_owner, co_size, co_file, co_qual, co_lt,
        co_first, co_adaptive, ob_type, by_size, by_sval, un_state, un_len, un_ascii, tu_size, tu_item;
#define TAKE(D)                                                                              \
    do {                                                                                     \
        const D *d = (const D *)tr_py_g_runtime;                                                   \
        if (tr_py_g_runtime_size < sizeof *d) return 0;                                            \
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
        tu_size = d->tuple_object.ob_size; tu_item = d->tuple_object.ob_item;                \
    } while (0)
    if (minor == 13) TAKE(dbg_offsets_313);
    else TAKE(dbg_offsets_314_head);
#undef TAKE
    if (ft != 0) g_free_threaded = 1;
    if (ver != g_version || ft != 0) return 0;
    if (rt_size != tr_py_g_runtime_size) return 0;
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
    tr_py_off.rt_interp_head = rt_head;
    tr_py_off.rt_size = rt_size;
    tr_py_off.is_next = is_next;
    tr_py_off.is_threads_head = is_threads;
    tr_py_off.ts_next = ts_next;
    tr_py_off.ts_interp = ts_interp;
    tr_py_off.ts_thread_id = ts_tid;
    tr_py_off.ts_native_id = ts_ntid;
    tr_py_off.ts_frame = ts_frame;
    tr_py_off.fr_back = fr_prev;
    tr_py_off.fr_code = fr_exec;
    tr_py_off.fr_instr = fr_instr;
    tr_py_off.fr_owner = fr_owner;
    tr_py_off.co_filename = co_file;
    tr_py_off.co_name = co_qual;
    tr_py_off.co_linetable = co_lt;
    tr_py_off.co_firstlineno = co_first;
    tr_py_off.co_code_adaptive = co_adaptive;
    tr_py_off.ob_size = by_size;
    tr_py_off.bytes_sval = by_sval;
    tr_py_off.uni_state = un_state;
    tr_py_off.uni_length = un_len;
    tr_py_off.uni_ascii_size = un_ascii;
    tr_py_off.uni_compact_size = un_ascii + 16;     /* + utf8_length, utf8 */
    tr_py_off.uni_data_any = un_ascii + 16;
    /* only tr_py_exception_info uses them: implausible ones turn that off, nothing else */
    tr_py_off.tuple_size = tu_size == 16 ? tu_size : 0;
    tr_py_off.tuple_item = tu_item >= 24 && tu_item <= 64 ? tu_item : 0;
    if (minor == 13) {
        /* the table (3.13.0's headers) against what this 3.13 says */
        const py_offsets *t = &tr_py_off_313;
        g_dbg_diff = (tr_py_off.rt_interp_head != t->rt_interp_head) + (tr_py_off.rt_size != t->rt_size) +
                     (tr_py_off.is_next != t->is_next) + (tr_py_off.is_threads_head != t->is_threads_head) +
                     (tr_py_off.ts_next != t->ts_next) + (tr_py_off.ts_interp != t->ts_interp) +
                     (tr_py_off.ts_thread_id != t->ts_thread_id) + (tr_py_off.ts_native_id != t->ts_native_id) +
                     (tr_py_off.ts_frame != t->ts_frame) + (tr_py_off.fr_back != t->fr_back) +
                     (tr_py_off.fr_code != t->fr_code) +
                     (tr_py_off.fr_instr != t->fr_instr) + (tr_py_off.fr_owner != t->fr_owner) +
                     (tr_py_off.co_filename != t->co_filename) + (tr_py_off.co_name != t->co_name) +
                     (tr_py_off.co_linetable != t->co_linetable) + (tr_py_off.co_firstlineno != t->co_firstlineno) +
                     (tr_py_off.co_code_adaptive != t->co_code_adaptive) + (tr_py_off.ob_size != t->ob_size) +
                     (tr_py_off.bytes_sval != t->bytes_sval) + (tr_py_off.uni_state != t->uni_state) +
                     (tr_py_off.uni_length != t->uni_length) + (tr_py_off.uni_ascii_size != t->uni_ascii_size);
        /* _co_firsttraceable (not in the debug offsets) sits 16 bytes before
         * co_code_adaptive in 3.13.0 (co_extra between): follow a move */
        tr_py_off.co_firsttraceable = tr_py_off.co_code_adaptive - (t->co_code_adaptive - t->co_firsttraceable);
    }
    if (minor == 14) {
        /* 3.14: FRAME_OWNED_BY_INTERPRETER = 3, FRAME_OWNED_BY_CSTACK = 4 are
         * both incomplete; f_executable is a tagged _PyStackRef; the TSS
         * key's place is searched for at the check; _co_firsttraceable's
         * place is not known here */
        tr_py_off.owner_skip = 3;
        tr_py_off.exec_mask = ~(uintptr_t)7;
        tr_py_off.has_firsttraceable = 0;
        tr_py_off.rt_tss = SIZE_MAX;
    }
    return 1;
}

static void py_init_once(void)
{
    py_module m;
    int state = TR_PY_NONE;
    if (!dl_iterate_phdr(find_runtime_cb, &m) || !m.runtime) goto out;
    tr_py_g_runtime = m.runtime;
    tr_py_g_runtime_size = m.runtime_size;
    {
        const char *b = strrchr(m.path, '/');
        snprintf(g_module, sizeof g_module, "%s", b ? b + 1 : m.path);
        snprintf(g_module_path, sizeof g_module_path, "%s", m.path);
    }
    tr_py_g_code_type = mod_addr(&m, "PyCode_Type", NULL);
    tr_py_g_unicode_type = mod_addr(&m, "PyUnicode_Type", NULL);
    tr_py_g_bytes_type = mod_addr(&m, "PyBytes_Type", NULL);
    tr_py_g_frame_type = mod_addr(&m, "PyFrame_Type", NULL);
    tr_py_g_tuple_type = mod_addr(&m, "PyTuple_Type", NULL);
    tr_py_g_tb_type = mod_addr(&m, "PyTraceBack_Type", NULL);
    tr_py_g_base_exc = mod_addr(&m, "PyExc_BaseException", NULL);
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
        minor = has_isnone && (pm == 10 || (pm < 0 && tr_py_g_runtime_size == OFF_310.rt_size)) ? 10 : pm;
        g_version = minor >= 0 ? 0x03000000u | ((uint32_t)minor << 16) : 0;
        if (minor >= 0) set_version_str(g_version, 0);
        if (minor == 10 && !has_isnone) minor = -1;
    }
    if (!tr_py_g_code_type || !tr_py_g_unicode_type || !tr_py_g_bytes_type || (minor == 10 && !tr_py_g_frame_type)) {
        tr_warn("no Python call sites: CPython %s in %s lacks PyCode_Type/PyUnicode_Type/PyBytes_Type",
                tr_py_g_version_str[0] ? tr_py_g_version_str : "?", m.path);
        goto out;
    }
    tr_py_g_minor = minor;
    switch (minor) {
    case 10: tr_py_off = OFF_310; tr_py_off.tuple_size = 16; tr_py_off.tuple_item = 24; break;
    case 11: tr_py_off = OFF_311; tr_py_off.tuple_size = 16; tr_py_off.tuple_item = 24; break;
    case 12: tr_py_off = OFF_312; tr_py_off.tuple_size = 16; tr_py_off.tuple_item = 24; break;
    case 13:
    case 14:
        g_from_debug_offsets = 1;
        if (!load_debug_offsets(minor)) {
            if (g_free_threaded)
                tr_warn("no Python call sites: CPython %s is a free-threaded build (not supported)",
                        tr_py_g_version_str);
            else
                tr_warn("no Python call sites: CPython %s: its _Py_DebugOffsets (_PyRuntime) do not look right",
                        tr_py_g_version_str);
            goto out;
        }
        break;
    default:
        tr_warn("no Python call sites: CPython %s (%s) is not supported (3.10 to 3.14 are)",
                tr_py_g_version_str[0] ? tr_py_g_version_str : "of an unknown version", m.path);
        goto out;
    }
#ifdef TR_PY_TEST_HOOKS
    /* tests/python/test_break.py: offsets made wrong on purpose */
    const char *brk = getenv("TR_PY_TEST_BREAK");
    if (brk && strcmp(brk, "tss") == 0 && tr_py_off.rt_tss != SIZE_MAX) tr_py_off.rt_tss += 8;
    if (brk && strcmp(brk, "notss") == 0) tr_py_off.rt_tss = SIZE_MAX;      /* as on 3.14: searched */
    if (brk && strcmp(brk, "novm") == 0) atomic_store(&tr_py_g_vm_ok, 0);  /* /proc/self/mem reads */
    if (brk && strcmp(brk, "frame") == 0) tr_py_off.fr_back += 8;
    if (brk && strcmp(brk, "code") == 0) tr_py_off.co_linetable += 8;
    if (brk && strcmp(brk, "version") == 0) {
        tr_warn("no Python call sites: CPython %s (%s) is not supported (3.10 to 3.14 are)", "3.99", m.path);
        goto out;
    }
#endif
    if (!g_from_debug_offsets) g_size_differs = tr_py_off.rt_size != tr_py_g_runtime_size;
    if (tr_py_off.rt_tss != SIZE_MAX && tr_py_off.rt_tss + 8 > tr_py_g_runtime_size) tr_py_off.rt_tss = SIZE_MAX;
    state = TR_PY_PENDING;
out:
    atomic_store_explicit(&tr_py_g_state, state, memory_order_release);
}

void tr_py_init(void)
{
    pthread_once(&g_once, py_init_once);
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
        snprintf(out, cap, "CPython %s (%s): unsupported", tr_py_g_version_str, g_module);
        return;
    }
    char tss[64];
    if (tr_py_off.rt_tss == SIZE_MAX) snprintf(tss, sizeof tss, "TSS key not found yet");
    else snprintf(tss, sizeof tss, "TSS key at _PyRuntime+%zu (%s)", tr_py_off.rt_tss,
                  tr_py_g_tss_searched ? "searched" : "table");
    char src[64];
    if (!g_from_debug_offsets)
        snprintf(src, sizeof src, "table offsets%s", g_size_differs ? " (_PyRuntime's size differs)" : "");
    else if (g_dbg_diff >= 0) snprintf(src, sizeof src, "debug offsets (%d differ from 3.13.0's table)", g_dbg_diff);
    else snprintf(src, sizeof src, "debug offsets");
    snprintf(out, cap, "CPython %s (%s): %s, %s, %s", tr_py_g_version_str, g_module, src, tss, names[st]);
}
