/* The Python exception a rank exits with (tr_pyexit.h, issue 21).
 *
 * When a Python program ends with an uncaught exception, the interpreter's
 * main calls PyErr_Print, which raises the audit event "sys.excepthook"
 * with (hook, type, value, traceback) before it calls sys.excepthook (the
 * traceback on stderr). By the time the shim writes its exit trace (a C
 * atexit handler, after Py_FinalizeEx) sys.last_exc and the thread state's
 * exception are gone, and PyErr_Print, inside the python executable, cannot
 * be interposed; sys.excepthook belongs to the application. So:
 *
 *   - the shim's constructor (tr_core.c calls tr_pyexit_early) looks up
 *     PySys_AddAuditHook and Py_IsInitialized with the real dlsym; only
 *     when both exist and Py_IsInitialized() is 0 (a python executable
 *     before its main: CPython documents PySys_AddAuditHook as callable
 *     before Py_Initialize) does it register a C audit hook, once. It is
 *     never registered after initialization (the "sys.addaudithook" event
 *     would run the application's Python hooks), nor in a process without
 *     an interpreter, nor with TRSHIM=0 or TRSHIM_PYSTACK_DEPTH=0. An
 *     interpreter initialized before the shim's constructor ran, or
 *     started later from a library loaded with dlopen (embedded Python),
 *     gets no hook: no exception is recorded there.
 *   - the hook returns 0 (never aborts an event, never sets an exception)
 *     and calls no interpreter function. For every event but
 *     "sys.excepthook" it does one strcmp. Its cost is elsewhere: once any
 *     hook exists CPython builds each audited operation's argument tuple
 *     (docs/performance.md: measured).
 *   - on "sys.excepthook", from the thread that prints (the GIL held), in
 *     a process that activated the shim and is not a forked child, it
 *     reads the exception with tr_py_exception_info (tr_python.c:
 *     safe reads by the running version's offsets; no interpreter call)
 *     into a static record and into the ring's record (reserved at
 *     activation, filled in place: state 1, the fields, state 2 release).
 *     A later event overwrites both (the interactive interpreter prints
 *     every error through PyErr_Print) and counts.
 * SystemExit does not reach the event (PyErr_Print exits first): sys.exit()
 * is not an uncaught exception. KeyboardInterrupt does (the process then
 * kills itself with SIGINT). Exceptions of other threads go to
 * threading.excepthook, not this event; those a program catches and prints
 * itself (traceback.print_exc, multiprocessing's workers) are not seen. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tr_core.h"
#include "tr_pyexit.h"
#include "tr_python.h"
#include "tr_ring.h"

_Static_assert(sizeof(((tr_py_exc_info *)0)->type) == TRR_PYEXC_TYPE &&
               sizeof(((tr_py_exc_info *)0)->message) == TRR_CRASH_MESSAGE &&
               sizeof(((tr_py_exc_info *)0)->file) == TRR_PYEXC_FILE &&
               sizeof(((tr_py_exc_info *)0)->function) == TRR_PYEXC_FUNCTION,
               "the reader's buffers are the ring record's");

typedef int (*audit_hook_fn)(const char *event, void *args, void *user);

static atomic_int g_registered;
static atomic_int g_active;                 /* tr_pyexit_init ran: record events */
static trr_pyexc *g_ring;                   /* the ring's record, NULL */
static trr_pyexc g_rec;                     /* the JSON trace's copy */
static atomic_int g_state;                  /* g_rec: 0 none, 1 being written, 2 valid */

static void store(trr_pyexc *r, const tr_py_exc_info *e, uint32_t count, int32_t tid, uint64_t now)
{
    __atomic_store_n(&r->state, 1, __ATOMIC_RELEASE);
    r->line = e->line;
    r->tid = tid;
    r->count = count;
    r->time_ns = now;
    memcpy(r->type, e->type, sizeof r->type);
    memcpy(r->message, e->message, sizeof r->message);
    memcpy(r->file, e->file, sizeof r->file);
    memcpy(r->function, e->function, sizeof r->function);
    __atomic_store_n(&r->state, 2, __ATOMIC_RELEASE);
}

static __attribute__((noinline)) void on_excepthook(void *args)
{
    if (!atomic_load_explicit(&g_active, memory_order_acquire) || tr_is_forked_child()) return;
    static tr_py_exc_info e;                /* under the GIL: one thread at a time */
    if (tr_py_exception_info((uintptr_t)args, &e) != 0 || !e.type[0]) return;
    uint32_t count = g_rec.count + 1;
    int32_t tid = tr_tid();
    uint64_t now = tr_now_ns();
    atomic_store_explicit(&g_state, 1, memory_order_release);
    store(&g_rec, &e, count, tid, now);
    atomic_store_explicit(&g_state, 2, memory_order_release);
    if (g_ring) store(g_ring, &e, count, tid, now);
}

static int audit_hook(const char *event, void *args, void *user)
{
    (void)user;
    if (__builtin_expect(strcmp(event, "sys.excepthook") == 0, 0)) on_excepthook(args);
    return 0;
}

/* The shim's constructor, after tr_core.c's (the settings): the link
 * order (tr_core.c first) is the order of the .init_array entries of one
 * priority; a process where it was not (start_mono_ns still 0) gets no hook. */
__attribute__((constructor)) static void pyexit_ctor(void)
{
    if (tr_proc()->start_mono_ns) tr_pyexit_early();
}

/* Whether the interpreter's raw allocator stays malloc until Py_FinalizeEx.
 * PySys_AddAuditHook allocates its entry with PyMem_RawMalloc (malloc
 * before Py_Initialize) and Py_FinalizeEx frees it with PyMem_RawFree:
 * where the raw allocator changes in between (PYTHONMALLOC=debug or
 * *_debug or mimalloc, PYTHONDEVMODE, -X dev: the debug allocator, which
 * aborts on a block it did not allocate, "Fatal Python error:
 * _PyMem_DebugRawFree: bad ID"; an embedding program's own
 * PyMem_SetAllocator) the hook must not be registered. Only a python
 * executable (its file name starts with "python") with none of those. */
static int raw_allocator_stays(void)
{
    const char *pm = getenv("PYTHONMALLOC"), *dev = getenv("PYTHONDEVMODE");
    if (pm && pm[0] && strcmp(pm, "malloc") != 0 && strcmp(pm, "pymalloc") != 0) return 0;
    if (dev && dev[0]) return 0;
    char buf[4096];
    ssize_t k = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (k <= 0) return 0;
    buf[k] = 0;
    const char *base = strrchr(buf, '/');
    if (strncmp(base ? base + 1 : buf, "python", 6) != 0) return 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t n = 0;
    for (ssize_t got; n < sizeof buf - 1 && (got = read(fd, buf + n, sizeof buf - 1 - n)) > 0;) n += (size_t)got;
    close(fd);
    if (n >= sizeof buf - 1) return 0;      /* a command line too long to look through */
    buf[n] = 0;
    /* -X dev, -Xdev (anywhere: an argument of the script's own that reads so only costs the feature) */
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        const char *a = buf + i;
        if (!strcmp(a, "-Xdev") || (!strcmp(a, "-X") && i + 3 < n && !strcmp(a + 3, "dev"))) return 0;
    }
    return 1;
}

void tr_pyexit_early(void)
{
    const tr_settings *cfg = tr_cfg();
    if (!cfg->enabled || cfg->pystack_depth <= 0 || atomic_load(&g_registered)) return;
    tr_dlsym_fn dls = tr_dlsym_real();
    if (!dls) return;
    int (*add)(audit_hook_fn, void *) = (int (*)(audit_hook_fn, void *))dls(RTLD_DEFAULT, "PySys_AddAuditHook");
    if (!add) return;                       /* no Python here (the usual case): nothing more */
    int (*inited)(void) = (int (*)(void))dls(RTLD_DEFAULT, "Py_IsInitialized");
    if (!inited || inited() || !raw_allocator_stays()) return;
    if (add(audit_hook, NULL) == 0) atomic_store(&g_registered, 1);
}

void tr_pyexit_init(void)
{
    if (!atomic_load(&g_registered) || atomic_load(&g_active)) return;
    g_ring = tr_ring_reserve_blob(TRR_BLOB_PYEXC, sizeof(trr_pyexc));
    atomic_store_explicit(&g_active, 1, memory_order_release);
}

void tr_pyexit_write_json(tr_json *j)
{
    if (atomic_load_explicit(&g_state, memory_order_acquire) != 2) return;
    const trr_pyexc *r = &g_rec;
    char buf[TRR_PYEXC_FILE + 1];
    trj_object_begin(j, "python_exception");
    memcpy(buf, r->type, sizeof r->type);
    buf[sizeof r->type] = 0;
    trj_str(j, "type", tr_utf8_clean(buf));
    memcpy(buf, r->message, sizeof r->message);
    buf[sizeof r->message] = 0;
    if (buf[0]) trj_str(j, "message", tr_utf8_clean(buf));
    else trj_null(j, "message");
    memcpy(buf, r->file, sizeof r->file);
    buf[sizeof r->file] = 0;
    if (buf[0]) trj_str(j, "file", tr_utf8_clean(buf));
    else trj_null(j, "file");
    memcpy(buf, r->function, sizeof r->function);
    buf[sizeof r->function] = 0;
    if (buf[0]) trj_str(j, "function", tr_utf8_clean(buf));
    else trj_null(j, "function");
    if (r->line >= 0) trj_int(j, "line", r->line);
    else trj_null(j, "line");
    trj_int(j, "tid", r->tid);
    trj_uint(j, "count", r->count);
    trj_uint(j, "time_ns", r->time_ns);
    trj_object_end(j);
}
