/* The rank that died: the crash site at the fatal signal, why it aborted,
 * and the first CUDA/NCCL errors (tr_crash.h).
 *
 * Signal time
 * -----------
 * tr_crash_signal runs inside the shim's handler for SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL and SIGABRT, on the faulting thread, before anything else
 * the handler does. Everything it touches is preallocated: the ring's crash
 * record (a TRR_BLOB_CRASH reserved at activation; a static one when there
 * is no ring, for the JSON trace), the unwinder's cursor on the handler's
 * stack. It
 *   - takes the record once per process (an atomic flag: a second thread
 *     crashing meanwhile, or the application's handler re-raising, adds
 *     nothing);
 *   - stores signo, si_code, si_addr, the thread and its name (prctl);
 *   - unwinds the faulting thread from the signal's ucontext with the
 *     shim's libunwind (LLVM's: a cursor made for the handler's own frame,
 *     then every register set to the interrupted context's), at most
 *     TRR_CRASH_FRAMES frames. A pc outside any code (a call through a bad
 *     function pointer) restarts the walk at the return address the call
 *     pushed. libunwind looks up unwind tables through dl_iterate_phdr,
 *     whose lock glibc makes recursive: a crash inside the loader itself
 *     does not deadlock on it;
 *   - for SIGABRT: glibc's abort message (__abort_msg: an assertion's text,
 *     "double free or corruption", ...), else, when std::terminate was
 *     reached with an exception, "uncaught C++ exception TYPE: what()":
 *     what the shim's own std::terminate handler recorded on that thread
 *     (installed at activation, chaining to the handler it replaced; it
 *     runs in normal context before abort(), so calling the exception's
 *     what() there is safe), else read here from libstdc++'s exception
 *     state (__cxa_current_exception_type, std::current_exception), what()
 *     only when it is one of libstdc++'s own (they return a pointer);
 *   - and commits (state 2, release).
 * SIGSEGV and SIGBUS are unblocked during the capture, with a per-thread
 * jump buffer set: a fault inside it (a corrupt stack read by the unwinder,
 * an exception object that is not one) jumps back (tr_crash_signal is
 * called first by the handler for the nested fault and siglongjmps) and
 * the capture ends with what it had. The signal mask is restored either
 * way; the handler then carries on as before (trace write, the
 * application's handler or the default action): exit status and
 * application handlers are unchanged. Outside a crash nothing here runs.
 *
 * The writer thread (tr_crash_prepare, before a write) interns the crash
 * frames as a stack (its modules then stored in the ring before it) and
 * writes the stack's index into the record; the JSON trace gets "crash".
 *
 * Errors
 * ------
 * tr_crash_error keeps the first error of each kind (a sticky CUDA error
 * returned to the application or seen by the completion poller, an
 * asynchronous NCCL error): a TRR_BLOB_ERROR in the ring, an entry of
 * "errors" in the JSON trace. */
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <sys/prctl.h>

#include <libunwind.h>

#include "tr_core.h"
#include "tr_crash.h"
#include "tr_ring.h"
#include "tr_stacks.h"

static trr_crash *g_rec;                    /* the ring's crash record, else g_local */
static trr_crash g_local;
static atomic_int g_taken;                  /* a crash was (being) captured */
static atomic_int g_inited;
static _Atomic int32_t g_stack_done;        /* the writer interned the stack: index + 1 */
/* the crashing thread's Python frames (when it ran Python), interned by the writer */
static tr_py_frame g_py[TR_PYSTACK_MAX_DEPTH];
static int g_npy;
static _Atomic int32_t g_pystack_done;      /* index + 1; -1: tried, none */
static __thread sigjmp_buf *t_jmp __attribute__((tls_model("initial-exec")));

/* glibc's struct abort_msg_s */
struct abort_msg { unsigned int size; char msg[]; };
static struct abort_msg **g_abort_msg;
/* libstdc++ */
typedef _Bool (*do_catch_t)(const void *self, const void *thrown_type, void **obj, unsigned outer);
typedef const char *(*what_t)(const void *self);
typedef void (*term_fn)(void);
/* std::exception_ptr returned by value: a non-trivial class, returned
 * through a hidden pointer (rdi on x86-64, x8 on AArch64), as a C struct
 * of more than 16 bytes is; the callee stores the one pointer it holds */
typedef struct { void *obj; void *pad[3]; } eptr_ret;
static void *(*g_cur_type)(void);           /* __cxa_current_exception_type: const std::type_info * */
static eptr_ret (*g_current_exception)(void);   /* std::current_exception(): the thrown object, a reference */
static void (*g_eptr_release)(void *);      /* std::exception_ptr::~exception_ptr(): drops it */
static const void *g_std_exception_ti;      /* typeinfo for std::exception (_ZTISt9exception) */
#define N_PURE_WHAT 10
static const void *g_pure_what[N_PURE_WHAT];    /* libstdc++'s own what()s: return a pointer, nothing more */
static term_fn g_prev_terminate;            /* the terminate handler the shim's replaced (chained to) */
static atomic_int g_term_state;             /* 0, 1 being recorded, 2 g_term_msg holds it */
static int32_t g_term_tid;
static char g_term_msg[TRR_CRASH_MESSAGE];  /* "uncaught C++ exception TYPE: what()" */

static void copy_str(char *dst, size_t cap, size_t *at, const char *s, size_t max)
{
    for (size_t i = 0; i < max && s[i] && *at + 1 < cap; i++) dst[(*at)++] = s[i];
    dst[*at] = 0;
}

/* ---- uncaught C++ exceptions ------------------------------------------------------ */

/* A class's mangled name as C++ spells it, for the names a thrown class
 * has ("St13runtime_error", "N5train9BadBatchE", abi tags "B5cxx11"
 * dropped): async-signal-safe, no allocation. 0 when it is something else
 * (a template, a local class): the caller keeps the mangled name. */
static int demangle(const char *m, char *out, size_t cap)
{
    size_t o = 0;
    int nested = *m == 'N', parts = 0;
    const char *p = m + nested;
    out[0] = 0;
    if (p[0] == 'S' && p[1] == 't') {
        copy_str(out, cap, &o, "std", 3);
        parts = 1;
        p += 2;
    }
    for (;;) {
        if (nested && *p == 'E' && parts) {
            p++;
            break;
        }
        if (!nested && parts && (*p == 0 || (parts > 1 && *p != 'B'))) break;
        int tag = *p == 'B';
        if (tag && !parts) return 0;
        p += tag;
        if (*p < '1' || *p > '9') return 0;
        size_t len = 0;
        while (*p >= '0' && *p <= '9' && len < 4096) len = len * 10 + (size_t)(*p++ - '0');
        for (size_t i = 0; i < len; i++)
            if (!p[i]) return 0;
        if (!tag) {
            if (parts) copy_str(out, cap, &o, "::", 2);
            copy_str(out, cap, &o, p, len);
            parts += 1 + !nested;     /* a plain name: only abi tags may follow */
        }
        p += len;
    }
    return *p == 0 && o + 1 < cap;
}

static int pure_what(const void *fn)
{
    for (int i = 0; i < N_PURE_WHAT; i++)
        if (fn && g_pure_what[i] == fn) return 1;
    return 0;
}

/* "uncaught C++ exception TYPE: what()" for the exception being handled
 * (std::terminate reached through an uncaught one), "" when none. what()
 * is called when the exception is a std::exception (the type_info's
 * __do_catch adjusts the object to that base, as a catch clause would) and,
 * at_signal, only when it is one of libstdc++'s own (they return a pointer):
 * an application's what() may allocate. */
static void exception_text(char *msg, size_t cap, int at_signal)
{
    size_t at = 0;
    msg[0] = 0;
    if (!g_cur_type) return;
    const void *ti = g_cur_type();
    if (!ti) return;
    /* std::type_info: vtable, then the mangled name */
    const char *name = ((const char *const *)ti)[1];
    if (!name) return;
    if (*name == '*') name++;
    copy_str(msg, cap, &at, "uncaught C++ exception ", 64);
    char plain[256];
    copy_str(msg, cap, &at, demangle(name, plain, sizeof plain) ? plain : name, 200);
    if (!g_current_exception || !g_std_exception_ti) return;
    eptr_ret ref = g_current_exception();
    if (!ref.obj) return;
    /* std::type_info::__do_catch is the vtable's slot 4, std::exception::what slot 2 */
    void *base = ref.obj;
    const do_catch_t do_catch = (*(do_catch_t *const *)g_std_exception_ti)[4];
    if (do_catch(g_std_exception_ti, ti, &base, 1)) {
        const what_t what = (*(what_t *const *)base)[2];
        const char *w = !at_signal || pure_what((const void *)what) ? what(base) : NULL;
        if (w) {
            copy_str(msg, cap, &at, ": ", 2);
            copy_str(msg, cap, &at, w, cap);
        }
    }
    if (g_eptr_release) g_eptr_release(&ref);
}

/* The shim's std::terminate handler: the uncaught exception's type and
 * what(), recorded in normal context (what() may run any code there),
 * then the handler it replaced, unchanged (libstdc++'s verbose one by
 * default: its message, then abort()). An application that installs its
 * own handler afterwards replaces this one (the SIGABRT capture then reads
 * the type, and what() of libstdc++'s own exceptions). */
static void on_terminate(void)
{
    int zero = 0;
    if (atomic_compare_exchange_strong(&g_term_state, &zero, 1)) {
        exception_text(g_term_msg, sizeof g_term_msg, 0);
        g_term_tid = tr_tid();
        atomic_store_explicit(&g_term_state, 2, memory_order_release);
    }
    if (g_prev_terminate) g_prev_terminate();
    /* a handler that returns: libstdc++ calls abort() itself */
}

static void install_terminate(tr_dlsym_fn dls)
{
    term_fn (*set)(term_fn) = (term_fn(*)(term_fn))dls(RTLD_DEFAULT, "_ZSt13set_terminatePFvvE");
    if (!set || !g_cur_type) return;
    g_prev_terminate = set(on_terminate);
    if (g_prev_terminate == on_terminate) g_prev_terminate = NULL;
}

/* ---- activation ------------------------------------------------------------------ */

void tr_crash_init(void)
{
    if (atomic_exchange(&g_inited, 1)) return;
    trr_crash *c = tr_ring_reserve_blob(TRR_BLOB_CRASH, sizeof(trr_crash));
    if (c) {
        c->stack = c->pystack = -1;
        g_rec = c;
    } else {
        g_local.stack = g_local.pystack = -1;
        g_rec = &g_local;
    }
    tr_dlsym_fn dls = tr_dlsym_real();
    if (!dls) return;
    g_abort_msg = dls(RTLD_DEFAULT, "__abort_msg");
    g_cur_type = (void *(*)(void))dls(RTLD_DEFAULT, "__cxa_current_exception_type");
    g_current_exception = (eptr_ret(*)(void))dls(RTLD_DEFAULT, "_ZSt17current_exceptionv");
    g_eptr_release = (void (*)(void *))dls(RTLD_DEFAULT, "_ZNSt15__exception_ptr13exception_ptrD1Ev");
    g_std_exception_ti = dls(RTLD_DEFAULT, "_ZTISt9exception");
    static const char *const pure[N_PURE_WHAT] = {
        "_ZNKSt9exception4whatEv", "_ZNKSt13runtime_error4whatEv", "_ZNKSt11logic_error4whatEv",
        "_ZNKSt9bad_alloc4whatEv", "_ZNKSt20bad_array_new_length4whatEv", "_ZNKSt8bad_cast4whatEv",
        "_ZNKSt10bad_typeid4whatEv", "_ZNKSt13bad_exception4whatEv", "_ZNKSt17bad_function_call4whatEv",
        "_ZNKSt12bad_weak_ptr4whatEv"};
    for (int i = 0; i < N_PURE_WHAT; i++) g_pure_what[i] = dls(RTLD_DEFAULT, pure[i]);
    install_terminate(dls);
}

/* ---- signal time ----------------------------------------------------------------- */

/* The interrupted context's registers into cur (a cursor of this frame). */
static int set_context(unw_cursor_t *cur, const ucontext_t *u)
{
#if defined(__x86_64__)
    static const struct { int unw, greg; } regs[] = {
        {UNW_X86_64_RAX, REG_RAX}, {UNW_X86_64_RDX, REG_RDX}, {UNW_X86_64_RCX, REG_RCX},
        {UNW_X86_64_RBX, REG_RBX}, {UNW_X86_64_RSI, REG_RSI}, {UNW_X86_64_RDI, REG_RDI},
        {UNW_X86_64_RBP, REG_RBP}, {UNW_X86_64_R8, REG_R8},   {UNW_X86_64_R9, REG_R9},
        {UNW_X86_64_R10, REG_R10}, {UNW_X86_64_R11, REG_R11}, {UNW_X86_64_R12, REG_R12},
        {UNW_X86_64_R13, REG_R13}, {UNW_X86_64_R14, REG_R14}, {UNW_X86_64_R15, REG_R15},
    };
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
        unw_set_reg(cur, regs[i].unw, (unw_word_t)u->uc_mcontext.gregs[regs[i].greg]);
    unw_set_reg(cur, UNW_REG_SP, (unw_word_t)u->uc_mcontext.gregs[REG_RSP]);
    return unw_set_reg(cur, UNW_REG_IP, (unw_word_t)u->uc_mcontext.gregs[REG_RIP]) == 0 ? 0 : -1;
#elif defined(__aarch64__)
    for (int r = 0; r <= 30; r++) unw_set_reg(cur, UNW_AARCH64_X0 + r, (unw_word_t)u->uc_mcontext.regs[r]);
    unw_set_reg(cur, UNW_REG_SP, (unw_word_t)u->uc_mcontext.sp);
    return unw_set_reg(cur, UNW_REG_IP, (unw_word_t)u->uc_mcontext.pc) == 0 ? 0 : -1;
#else
    (void)cur; (void)u;
    return -1;
#endif
}

static uintptr_t ctx_sp(const ucontext_t *u)
{
#if defined(__x86_64__)
    return (uintptr_t)u->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    return (uintptr_t)u->uc_mcontext.sp;
#else
    (void)u;
    return 0;
#endif
}

/* The faulting thread's frames into c->ip (c->n kept up to date: a nested
 * fault leaves what was found). */
static void unwind(trr_crash *c, const ucontext_t *u)
{
    unw_context_t ctx;
    unw_cursor_t cur;
    if (unw_getcontext(&ctx) != 0 || unw_init_local(&cur, &ctx) != 0) return;
    if (set_context(&cur, u) != 0) return;
    for (int f = 0; f < TRR_CRASH_FRAMES; f++) {
        unw_word_t ip, sp;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0) break;
        if (f > 0 && ip == 0) break;
        /* frame 0 is the faulting instruction itself: + 1 reads as a return address */
        c->ip[f] = f == 0 ? ip + 1 : ip;
        __atomic_store_n(&c->n, (uint32_t)f + 1, __ATOMIC_RELAXED);
        if (unw_step(&cur) > 0) continue;
        if (f != 0) break;
        /* no unwind information for the pc (a call through a bad pointer):
         * the return address that call pushed is at the stack pointer */
#if defined(__x86_64__)
        sp = ctx_sp(u);
        uintptr_t ra = *(const volatile uintptr_t *)sp;
        if (!ra) break;
        unw_set_reg(&cur, UNW_REG_SP, sp + 8);
        if (unw_set_reg(&cur, UNW_REG_IP, ra) != 0) break;
#elif defined(__aarch64__)
        (void)sp;
        uintptr_t ra = (uintptr_t)u->uc_mcontext.regs[30];
        if (!ra) break;
        if (unw_set_reg(&cur, UNW_REG_IP, ra) != 0) break;
#else
        (void)sp;
        break;
#endif
    }
}

static void hex(char *out, uintptr_t v)
{
    static const char d[] = "0123456789abcdef";
    char tmp[20];
    int n = 0;
    do tmp[n++] = d[v & 15]; while ((v >>= 4) && n < 16);
    out[0] = '0';
    out[1] = 'x';
    for (int i = 0; i < n; i++) out[2 + i] = tmp[n - 1 - i];
    out[2 + n] = 0;
}

/* Why SIGABRT: glibc's message, else an uncaught C++ exception (what the
 * shim's terminate handler recorded on this thread, else read here). */
static void abort_reason(trr_crash *c)
{
    size_t at = 0;
    if (g_abort_msg) {
        const struct abort_msg *m = *(struct abort_msg *const volatile *)g_abort_msg;
        if (m && m->size > sizeof *m) {
            copy_str(c->message, sizeof c->message, &at, m->msg, m->size - sizeof *m);
            while (at > 0 && c->message[at - 1] == '\n') c->message[--at] = 0;
            if (at) return;
        }
    }
    if (atomic_load_explicit(&g_term_state, memory_order_acquire) == 2 && g_term_tid == c->tid && g_term_msg[0]) {
        copy_str(c->message, sizeof c->message, &at, g_term_msg, sizeof g_term_msg);
        return;
    }
    exception_text(c->message, sizeof c->message, 1);
}

static int crash_signal(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT;
}

void tr_crash_signal(int sig, siginfo_t *si, void *uc)
{
    if (t_jmp) siglongjmp(*t_jmp, 1);       /* a fault inside the capture below */
    if (!crash_signal(sig) || !atomic_load_explicit(&g_inited, memory_order_acquire)) return;
    if (atomic_exchange(&g_taken, 1)) return;
    trr_crash *c = g_rec;
    c->signo = sig;
    c->code = si ? si->si_code : 0;
    c->addr = si && sig != SIGABRT ? (uint64_t)(uintptr_t)si->si_addr : 0;
    c->sender = si && si->si_code <= 0 ? si->si_pid : 0;
    c->tid = tr_tid();
    c->time_ns = tr_now_ns();
    char name[16] = {0};
    if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0) memcpy(c->thread, name, sizeof c->thread - 1);
    __atomic_store_n(&c->state, 1, __ATOMIC_RELEASE);

    sigset_t faults, prev;
    sigemptyset(&faults);
    sigaddset(&faults, SIGSEGV);
    sigaddset(&faults, SIGBUS);
    pthread_sigmask(SIG_BLOCK, NULL, &prev);
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1) == 0) {
        t_jmp = &jb;
        pthread_sigmask(SIG_UNBLOCK, &faults, NULL);
        if (uc) unwind(c, uc);
        if (sig == SIGABRT) abort_reason(c);
        int depth = tr_cfg()->pystack_depth;
        if (depth > 0) g_npy = tr_py_capture_signal(g_py, depth < TR_PYSTACK_MAX_DEPTH ? depth : TR_PYSTACK_MAX_DEPTH);
    }
    t_jmp = NULL;
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    __atomic_store_n(&c->state, 2, __ATOMIC_RELEASE);
}

/* ---- the writer ------------------------------------------------------------------- */

static const trr_crash *crash_rec(void)
{
    if (!atomic_load_explicit(&g_taken, memory_order_acquire) || !g_rec) return NULL;
    return __atomic_load_n(&g_rec->state, __ATOMIC_ACQUIRE) >= 1 ? g_rec : NULL;
}

static void peek_sticky(void);

void tr_crash_prepare(void)
{
    peek_sticky();
    const trr_crash *c = crash_rec();
    if (!c || __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) < 2) return;
    if (!atomic_load(&g_pystack_done)) {
        int32_t pi = g_npy > 0 ? tr_pystack_intern_frames(g_py, g_npy) : -1;
        if (pi >= 0) g_rec->pystack = pi;
        atomic_store(&g_pystack_done, pi >= 0 ? pi + 1 : -1);
    }
    if (atomic_load(&g_stack_done)) return;
    uint32_t n = c->n;
    if (n == 0 || n > TRR_CRASH_FRAMES) return;
    uintptr_t ip[TRR_CRASH_FRAMES];
    for (uint32_t i = 0; i < n; i++) ip[i] = (uintptr_t)c->ip[i];
    int32_t idx = tr_stack_intern(ip, n);
    if (idx < 0) return;
    g_rec->stack = idx;
    atomic_store(&g_stack_done, idx + 1);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return NULL;
    }
}

/* ---- errors ---------------------------------------------------------------------- */

#define MAX_ERRORS 2
static trr_error g_err[MAX_ERRORS];         /* by kind - 1 */
static atomic_int g_err_state[MAX_ERRORS];  /* 0 none, 1 being filled, 2 done */

int tr_crash_cuda_sticky(int code)
{
    switch (code) {
    case 700:   /* cudaErrorIllegalAddress */
    case 701:   /* cudaErrorLaunchOutOfResources: not sticky, but kills the launch */
    case 702:   /* cudaErrorLaunchTimeout */
    case 710:   /* cudaErrorAssert */
    case 714:   /* cudaErrorHardwareStackError */
    case 715:   /* cudaErrorIllegalInstruction */
    case 716:   /* cudaErrorMisalignedAddress */
    case 717:   /* cudaErrorInvalidAddressSpace */
    case 718:   /* cudaErrorInvalidPc */
    case 719:   /* cudaErrorLaunchFailure */
    case 214:   /* cudaErrorECCUncorrectable */
    case 999:   /* cudaErrorUnknown */
        return code != 701;
    default: return 0;
    }
}

void tr_crash_error(int kind, int code, const char *name, const char *api, int32_t stack, int32_t pystack,
                    int32_t comm)
{
    if (code == 0 || kind < 1 || kind > MAX_ERRORS) return;
    if (kind == TRR_ERR_CUDA && !tr_crash_cuda_sticky(code)) return;
    /* NCCL: ncclUnhandledCudaError 1, ncclSystemError 2, ncclInternalError 3,
     * ncclInvalidArgument 4, ncclInvalidUsage 5, ncclRemoteError 6; ncclInProgress 7 is not an error */
    if (kind == TRR_ERR_NCCL && (code == 7 || code < 0 || code > 6)) return;
    if (atomic_load_explicit(&g_err_state[kind - 1], memory_order_relaxed)) return;
    int zero = 0;
    if (!atomic_compare_exchange_strong(&g_err_state[kind - 1], &zero, 1)) return;
    trr_error *e = &g_err[kind - 1];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->code = code;
    e->stack = stack;
    e->pystack = pystack;
    e->tid = tr_tid();
    e->comm = comm;
    e->device = kind == TRR_ERR_CUDA ? tr_cuda_device() : -1;
    e->time_ns = tr_now_ns();
    if (!name && kind == TRR_ERR_CUDA) name = tr_cuda_error_name(code);
    if (!name && kind == TRR_ERR_NCCL) {
        static const char *const nn[] = {"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
                                         "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage",
                                         "ncclRemoteError"};
        name = nn[code];
    }
    snprintf(e->api, sizeof e->api, "%s", api ? api : "");
    snprintf(e->name, sizeof e->name, "%s", name ? name : "");
    tr_ring_add_blob(TRR_BLOB_ERROR, e, sizeof *e, NULL, 0);
    atomic_store_explicit(&g_err_state[kind - 1], 2, memory_order_release);
}

/* Before a write: a sticky error no call the shim sees returned yet (the
 * application's own cudaStreamSynchronize): cudaPeekAtLastError returns it
 * on any thread and clears nothing. */
static void peek_sticky(void)
{
    if (atomic_load_explicit(&g_err_state[TRR_ERR_CUDA - 1], memory_order_acquire)) return;
    typedef int (*peek_t)(void);
    TR_REAL_OPT(peek, peek_t, "cudaPeekAtLastError", TR_LIB_CUDART);
    if (!peek) return;
    int e = peek();
    if (tr_crash_cuda_sticky(e))
        tr_crash_error(TRR_ERR_CUDA, e, NULL, "cudaPeekAtLastError (trshim, before writing the trace)", -1, -1, -1);
}

/* ---- JSON ------------------------------------------------------------------------- */

void tr_crash_write_json(tr_json *j)
{
    const trr_crash *c = crash_rec();
    if (c) {
        int full = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) >= 2;
        char a[24];
        trj_object_begin(j, "crash");
        trj_int(j, "signal", c->signo);
        trj_int(j, "code", c->code);
        hex(a, (uintptr_t)c->addr);
        if (c->signo != SIGABRT) trj_str(j, "addr", a);
        else trj_null(j, "addr");
        if (c->sender) trj_int(j, "sender", c->sender);
        else trj_null(j, "sender");
        trj_int(j, "tid", c->tid);
        char th[sizeof c->thread + 1];
        memcpy(th, c->thread, sizeof c->thread);
        th[sizeof c->thread] = 0;
        trj_str(j, "thread", tr_utf8_clean(th));
        trj_uint(j, "time_ns", c->time_ns);
        int32_t done = atomic_load(&g_stack_done);
        trj_int(j, "stack", full && done > 0 ? done - 1 : -1);
        int32_t pdone = atomic_load(&g_pystack_done);
        trj_int(j, "pystack", full && pdone > 0 ? pdone - 1 : -1);
        char msg[TRR_CRASH_MESSAGE + 1];
        memcpy(msg, c->message, TRR_CRASH_MESSAGE);
        msg[TRR_CRASH_MESSAGE] = 0;
        if (full && msg[0]) trj_str(j, "message", tr_utf8_clean(msg));
        else trj_null(j, "message");
        (void)signal_name;
        trj_object_end(j);
    }
    int any = 0;
    for (int k = 0; k < MAX_ERRORS; k++) any |= atomic_load_explicit(&g_err_state[k], memory_order_acquire) == 2;
    if (!any) return;
    trj_array_begin(j, "errors");
    for (int k = 0; k < MAX_ERRORS; k++) {
        if (atomic_load_explicit(&g_err_state[k], memory_order_acquire) != 2) continue;
        const trr_error *e = &g_err[k];
        char buf[64];
        trj_object_begin(j, NULL);
        trj_str(j, "kind", e->kind == TRR_ERR_CUDA ? "cuda" : "nccl");
        trj_int(j, "code", e->code);
        snprintf(buf, sizeof buf, "%s", e->name);
        trj_str(j, "name", tr_utf8_clean(buf));
        snprintf(buf, sizeof buf, "%s", e->api);
        trj_str(j, "api", tr_utf8_clean(buf));
        trj_int(j, "stack", e->stack);
        trj_int(j, "pystack", e->pystack);
        trj_int(j, "tid", e->tid);
        const trr_comm *cm = e->comm >= 0 ? tr_ring_comm_at(e->comm) : NULL;
        if (cm && __atomic_load_n(&cm->valid, __ATOMIC_ACQUIRE)) {
            hex(buf, (uintptr_t)cm->id);
            trj_str(j, "comm", buf);
        } else {
            trj_null(j, "comm");
        }
        if (e->device >= 0) trj_int(j, "device", e->device);
        else trj_null(j, "device");
        trj_uint(j, "time_ns", e->time_ns);
        trj_object_end(j);
    }
    trj_array_end(j);
}
