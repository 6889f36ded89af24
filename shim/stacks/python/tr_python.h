/* Python call sites: the calling thread's CPython frames, read directly from
 * the interpreter's structures (tr_python.c), without the GIL.
 *
 * Never calls into the interpreter, never takes or checks the GIL, never
 * allocates Python objects. The thread's PyThreadState comes from the GIL-state
 * TSS key, which stays set while the thread has released the GIL (ctypes,
 * PyTorch and pybind11 release it around foreign calls); its frames cannot
 * change while the thread itself is inside this call.
 *
 * Supported: CPython 3.10, 3.11, 3.12, 3.13, 3.14 (default build, not the
 * free-threaded one) on LP64 Linux (x86-64, aarch64); the version is the
 * running interpreter's, found at run time. Anything else (no interpreter,
 * another version, offsets that fail the check against the first Python
 * thread that captures): every capture gives 0 frames, with one "trshim:"
 * line at most.
 *
 * Self-contained: needs tr_warn() (tr_core.h) and libc only, so it can be
 * linked on its own (tests/python/pyprobe.c).
 *
 * stacks/python/'s boundary, the one header of the folder a file outside it
 * includes: also the deduplicated Python stacks (tr_pystack.c, below), the
 * exiting exception (tr_pyexit.h) and the install folders (tr_pyroots.h);
 * tr_python_int.h is private. */
#ifndef TR_PYTHON_H
#define TR_PYTHON_H

#include <stddef.h>
#include <stdint.h>

#include "tr_core.h"

/* One Python frame, innermost first. */
typedef struct {
    uintptr_t code;        /* address of the PyCodeObject */
    uint64_t code_key;     /* identifies the code object for caching its strings:
                            * a hash of the code object's address and of its
                            * filename, qualname and line table objects, so that
                            * a code object freed and another allocated at the
                            * same address get different keys. Never 0. */
    int32_t line;          /* source line, -1 unknown (no line for that instruction) */
    int32_t lasti;         /* instruction offset in code units, -1 before the first */
} tr_py_frame;

/* Looks for a CPython interpreter in the process (the _PyRuntime symbol),
 * its version and the structure offsets of that version. Once per process
 * (later calls return at once); tr_py_capture calls it if nobody did. Takes
 * the loader's lock (dl_iterate_phdr): call it at activation, not from a
 * signal handler. */
void tr_py_init(void);

/* The calling thread's Python frames, innermost first, up to max (a deeper
 * stack is cut to its innermost max frames). Returns the number written, 0
 * when the thread runs no Python code or Python capture is off. Frames of
 * CPython's own (C-stack entry frames, frames not started yet) are skipped
 * as CPython's tracebacks skip them. The first capture from a thread that has
 * Python frames checks the offsets with safe reads (process_vm_readv or
 * /proc/self/mem) before any direct read; a failed check turns Python
 * capture off for good (one "trshim:" line). A frame chain that looks wrong
 * (bad pointer, not a code object, a loop) ends the walk there.
 * Cost (bench/py_capture.py): ~6 ns per frame when the frame's line is in
 * the thread's line cache (bounded: 512 entries of 32 bytes per thread,
 * 4-way, freed at thread exit), ~20-90 ns more for a line not cached (its
 * line table decoded); ~15 ns fixed. Thread-safe; not async-signal-safe
 * (the first capture of a thread allocates its cache). */
int tr_py_capture(tr_py_frame *out, int max);

/* tr_py_capture for a fatal signal's handler (tr_crash.c): async-signal-
 * safe (no allocation, no lock, no line cache: each frame's line decoded
 * from its line table), only once the offsets were checked (else 0). Direct
 * reads of a crashing process's memory: the caller guards against a fault. */
int tr_py_capture_signal(tr_py_frame *out, int max);

/* The strings of a code object, for the writer (not the hot path; safe
 * reads, so a code object freed since the capture gives -1, not a crash):
 * co_filename and co_qualname (co_name on 3.10) as UTF-8, NUL-terminated,
 * cut to the capacity on a character boundary (a NULL buffer or 0 capacity:
 * not wanted), and co_firstlineno (NULL: not wanted). Returns 0, or -1 when
 * code is not a readable code object. */
int tr_py_code_info(uintptr_t code, char *file, size_t file_cap, char *qualname, size_t qual_cap,
                    int *firstlineno);
/* Whether code is still the code object a capture gave key for (safe reads):
 * 1 yes, 0 no (freed, or another object now at that address). */
int tr_py_code_matches(uintptr_t code, uint64_t key);

/* The exception of CPython's "sys.excepthook" audit event (tr_pyexit.c):
 * args is the event's argument tuple (hook, type, value, traceback). Read
 * with safe reads and the offsets of the running version only, never
 * calling the interpreter: the class's tp_name; the message when the class
 * prints its arguments as BaseException does (its tp_str is
 * BaseException's) and it has one str argument ("" otherwise: Python
 * prints str(args) or the class's own __str__); the innermost traceback
 * entry's code object (co_filename, co_qualname or 3.10's co_name) and
 * line (tb_lineno, or from tb_lasti and the line table where CPython 3.11+
 * computes it lazily). Strings UTF-8, NUL-terminated, cut to their
 * capacity. Returns 0, or -1 when the interpreter's offsets are not known
 * (tr_py_init not called, unsupported) or args is not such a tuple; what
 * could not be read is left "" / -1. Not async-signal-safe (the line table
 * is copied). */
typedef struct {
    char type[128];
    char message[512];
    char file[512];
    char function[256];
    int32_t line;
} tr_py_exc_info;
int tr_py_exception_info(uintptr_t args, tr_py_exc_info *out);

/* State, for tests, benchmarks and the trace's metadata. */
enum {
    TR_PY_UNINIT = 0,     /* tr_py_init not called yet */
    TR_PY_NONE,           /* no CPython interpreter in the process */
    TR_PY_UNSUPPORTED,    /* an interpreter of a version or build not supported */
    TR_PY_PENDING,        /* offsets known, not checked yet (no Python thread captured yet) */
    TR_PY_READY,          /* checked: captures read frames */
    TR_PY_DISABLED        /* the check failed: captures give 0 frames */
};
int tr_py_state(void);
/* PY_VERSION_HEX of the interpreter (0x030c01f0 for 3.12.1; 3.10: 0x030a0000,
 * the micro version is not known), 0 when none was found. */
uint32_t tr_py_version(void);
/* "3.12.1", "3.10", "" */
const char *tr_py_version_str(void);
/* The path of the module holding _PyRuntime (libpython3.X.so as the loader
 * named it, or the executable from /proc/self/exe), "" when none was found:
 * where tr_pyroots.c starts looking for the interpreter's folders. */
const char *tr_py_module_path(void);
/* How the offsets were obtained and checked, one line for logs and traces,
 * e.g. "CPython 3.12.1 (libpython3.12.so.1.0): table offsets, TSS key at
 * _PyRuntime+1544 (table), checked". */
void tr_py_describe(char *out, size_t cap);

typedef struct {
    uint64_t captures;     /* tr_py_capture calls that found a Python thread state */
    uint64_t frames;       /* frames returned */
    uint64_t line_hits;    /* frames whose line came from the cache */
    uint64_t line_misses;  /* frames whose line was computed from the line table */
    uint64_t cut;          /* captures cut at max */
    uint64_t bad_chain;    /* walks ended by a frame that looked wrong */
} tr_py_stats;
/* The calling thread's counters. */
void tr_py_get_thread_stats(tr_py_stats *out);
/* Empties the calling thread's line cache (benchmarks: the uncached cost). */
void tr_py_flush_thread_cache(void);

/* ---- Python stacks (tr_pystack.c, tr_python.c) ------------------------------------ */

/* TR_PYSTACK_MAX_DEPTH, the Python frames kept at most: tr_core.h (the setting's bound) */
#define TR_PYSTACK_MAX_STACKS 65536  /* distinct Python stacks kept; beyond that captures give -1 */
#define TR_PYSTACK_MAX_CODES 65536   /* distinct code objects kept; a new stack needing more gives -1 */

/* Looks for the CPython interpreter of the process (tr_py_init): at
 * activation (tr_init.c), not from a signal handler (takes the loader's lock). Nothing
 * when TRSHIM_PYSTACK_DEPTH=0. */
void tr_pystack_init(void);
/* The calling thread's Python stack (its innermost tr_cfg()->pystack_depth
 * frames), deduplicated: a dense index >= 0 into the trace's "pystacks",
 * the same for the same (code object, line) list, or -1 (no interpreter,
 * a thread without Python frames, off, tables full, no memory). Never takes
 * the GIL nor calls into the interpreter. A stack seen before costs the
 * frame walk (tr_py_capture) plus a hash and a lock-free lookup, no lock,
 * no allocation; a new one takes a mutex and reads the strings of each code
 * object not seen before (safe reads). Any thread; not async-signal-safe. */
int32_t tr_pystack_capture(void);
/* Writes "python", "pycodes" and "pystacks" into the open top-level object
 * (indexes are process-wide, like "stacks"). Writer thread. */
void tr_pystack_write_json(tr_json *j);
/* The file of Python code object i below tr_pystack_code_count() (the
 * folders the Python code came from: tr_sysinfo.c's packages). */
uint32_t tr_pystack_code_count(void);
const char *tr_pystack_code_file(uint32_t i);

typedef struct {
    uint64_t stacks, codes;   /* distinct Python stacks and code objects kept */
    uint64_t dropped;         /* captures that gave -1 because a table was full (or no memory) */
    uint64_t hits, misses;    /* captures with frames: stack seen before / interned now */
} tr_pystack_stats;
void tr_pystack_get_stats(tr_pystack_stats *out);

/* python/'s other headers, parts of this one */
#include "tr_pyexit.h"
#include "tr_pyroots.h"

#endif
