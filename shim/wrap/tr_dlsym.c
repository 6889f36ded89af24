/* dlsym and dlvsym of the shim.
 *
 * Why: a library reached through dlopen() + dlsym() on its own handle
 * (ctypes.CDLL("libnccl.so.2"), vLLM's PyNccl, a plugin) never meets a
 * preloaded wrapper. The shim's dlsym asks the real one, and when what it
 * found is exactly the function one of the shim's wrappers forwards to
 * (tr_lookup_wrapper), hands out the wrapper instead. Everything else gets
 * exactly what the real dlsym returns.
 *
 * The caller matters to glibc's dlsym: RTLD_NEXT searches the objects after
 * the caller's, RTLD_DEFAULT the caller's scope (a library loaded with
 * RTLD_LOCAL also sees its own dependencies), and glibc finds the caller
 * from the return address dlsym was called with. A wrapper that called the
 * real dlsym would make the shim the caller. So the exported dlsym and
 * dlvsym are small trampolines (below, x86-64 and aarch64): they ask
 * tr_dlsym_target() where to go, restore the arguments and the stack as
 * they were at entry and jump there. For RTLD_DEFAULT and RTLD_NEXT that is
 * the real function itself, which returns straight to the application and
 * sees the application's return address: the lookup is exactly the one the
 * application made, the shim is never the caller. For any other handle
 * glibc ignores the caller (except to report bindings to LD_AUDIT
 * auditors), and the jump goes to tr_dlsym_handle(), which calls the real
 * function and then decides; its own return address is the application's,
 * so it knows who asked (tr_lookup_may_wrap: the CUDA runtime, the driver
 * and NCCL finding their own functions get them unwrapped).
 *
 * The real dlsym and dlvsym, for the shim's own lookups: tr_dlreal.c.
 *
 * Before the process is initialised: a sanitizer runtime (ASan, TSan)
 * looks up every function it intercepts with dlsym(RTLD_NEXT, ...) and
 * dlvsym while it initialises, from the program's preinit array (before
 * any constructor, the shim's included), when its interceptors of the C
 * library's string functions (and more) would still jump to address 0.
 * Those lookups, and any other lookup of a name the shim does not wrap, run
 * on the shim's own code only, at any time (no "initialised" flag: a
 * constructor that runs before the shim's still gets wrappers): the
 * trampoline, tr_dlsym_target, the real functions found without the C
 * library (tr_dlreal.c, tr_dynsym.c), and for a library's handle the real
 * lookup and name_family(). Only a successful lookup of a name the shim
 * could wrap (nccl*, cuda*, cu[A-Z]*, which no sanitizer runtime looks up)
 * goes on to getenv, dladdr and the rest (lookup_done).
 *
 * Other architectures: the trampolines are not built and dlsym/dlvsym are
 * not interposed (the entry-point lookups of tr_entry.c still are). */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tr_core.h"
#include "tr_dlsym.h"

#if defined(__x86_64__) || defined(__aarch64__)
#define TR_DLSYM_TRAMPOLINES 1
#endif

/* ---- which lookups get wrappers --------------------------------------------- */

/* name starts with prefix (the shim's own code: see above) */
static int has_prefix(const char *name, const char *prefix)
{
    while (*prefix)
        if (*name++ != *prefix++) return 0;
    return 1;
}

/* TRSHIM=0 (pure forwarding): lookups return what the real ones return.
 * Read here, not from tr_cfg(): a lookup may come before the shim's
 * constructor has read the settings. */
static int lookups_enabled(void)
{
    static atomic_int state;     /* 0 unknown, 1 on, 2 off */
    int s = atomic_load_explicit(&state, memory_order_relaxed);
    if (!s) {
        const char *v = getenv("TRSHIM");
        s = v && v[0] == '0' && v[1] == 0 ? 2 : 1;
        atomic_store_explicit(&state, s, memory_order_relaxed);
    }
    return s == 1;
}

int tr_lookup_may_wrap(const void *caller)
{
    if (!lookups_enabled() || tr_depth() > 0) return 0;
    struct link_map *lm = tr_map_of(caller);
    if (!lm) return 1;    /* code of no object (generated at run time): the application's */
    return lm != tr_self_map() && tr_lib_families(lm) == 0;
}

/* The shim's dynamic symbols, read once (immutable). */
static tr_dyn g_self_dyn;
static atomic_int g_self_dyn_state;    /* 0 not read, 1 being stored, 2 ready */

void *tr_self_func(const char *name)
{
    int st = atomic_load_explicit(&g_self_dyn_state, memory_order_acquire);
    if (st == 2) return tr_dyn_func(&g_self_dyn, name);
    /* not ready: read into a local copy (no waiting on another thread) */
    tr_dyn d;
    struct link_map *self = tr_self_map();
    if (!self || !tr_dyn_init_map(&d, self)) return NULL;
    int expect = 0;
    if (atomic_compare_exchange_strong(&g_self_dyn_state, &expect, 1)) {
        g_self_dyn = d;
        atomic_store_explicit(&g_self_dyn_state, 2, memory_order_release);
    }
    return tr_dyn_func(&d, name);
}

/* The family of a name the shim could wrap, -1 for any other name. The
 * shim's own code only: every lookup of a library's handle comes here. */
static int name_family(const char *name)
{
    if (has_prefix(name, "nccl")) return TR_LIB_NCCL;
    if (has_prefix(name, "cuda")) return TR_LIB_CUDART;
    if (name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z') return TR_LIB_CUDA;
    return -1;
}

void *tr_lookup_wrapper(const char *name, void *p, int warn)
{
    int fam = name_family(name);
    if (fam < 0 || !p) return NULL;
    void *w = tr_self_func(name);
    if (!w || w == p) return NULL;
    struct link_map *lm = tr_map_of(p);
    if (!lm || lm == tr_self_map() || !(tr_lib_families(lm) & (1u << fam))) return NULL;
    void *r = tr_real(name, (tr_lib)fam);
    if (r != p) {
        if (!warn) return NULL;
        /* another copy of the library (a second libnccl.so.2 loaded by
         * path), or a definition the wrapper does not reach: calling the
         * wrapper would call something else than what was asked for */
        tr_warn("lookups: %s found in %s is not the function the shim forwards to; calls through "
                "that pointer are not recorded", name, lm->l_name && lm->l_name[0] ? lm->l_name : "?");
        return NULL;
    }
    return w;
}

/* A successful lookup p of name by caller: p, or the shim's wrapper. Leaves
 * errno and dlerror() as the real lookup left them (it succeeded: no
 * error). */
static void *lookup_done(const char *name, void *p, const void *caller)
{
    if (!p || !name || name_family(name) < 0 || !lookups_enabled()) return p;
    if (!tr_self_func(name)) return p;   /* not a function the shim wraps */
    int saved = errno;
    if (tr_lookup_may_wrap(caller)) {
        void *w = tr_lookup_wrapper(name, p, 1);
        if (w) p = w;
    }
    errno = saved;
    return p;
}

#ifdef TR_DLSYM_TRAMPOLINES

/* Returns NULL, as dlsym does for what it cannot find (used only when the C
 * library has no dlsym, which cannot happen with glibc). */
static void *no_dlsym(void *handle, const char *name)
{
    (void)handle;
    (void)name;
    tr_warn("lookups: the C library's dlsym was not found");
    return NULL;
}

static void *no_dlvsym(void *handle, const char *name, const char *version)
{
    (void)handle;
    (void)name;
    (void)version;
    tr_warn("lookups: the C library's dlvsym was not found");
    return NULL;
}

/* Reached by a jump from the trampoline: the return address is the
 * application's, as if it had called this function itself. */
__attribute__((used, noinline)) void *tr_dlsym_handle(void *handle, const char *name)
{
    const void *caller = __builtin_return_address(0);
    tr_dlsym_fn real = tr_dlsym_real();
    void *p = real ? real(handle, name) : no_dlsym(handle, name);
    return lookup_done(name, p, caller);
}

__attribute__((used, noinline)) void *tr_dlvsym_handle(void *handle, const char *name, const char *version)
{
    const void *caller = __builtin_return_address(0);
    tr_dlvsym_fn real = tr_dlvsym_real();
    void *p = real ? real(handle, name, version) : no_dlvsym(handle, name, version);
    return lookup_done(name, p, caller);
}

/* Where the trampoline of dlsym (versioned 0) or dlvsym (1) jumps for
 * handle. */
__attribute__((used)) void *tr_dlsym_target(void *handle, int versioned)
{
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) {
        if (versioned) {
            tr_dlvsym_fn f = tr_dlvsym_real();
            return f ? (void *)f : (void *)no_dlvsym;
        }
        tr_dlsym_fn f = tr_dlsym_real();
        return f ? (void *)f : (void *)no_dlsym;
    }
    return versioned ? (void *)tr_dlvsym_handle : (void *)tr_dlsym_handle;
}

/* dlsym(handle, name) and dlvsym(handle, name, version): save the argument
 * registers, ask tr_dlsym_target(handle, versioned), restore everything and
 * jump, so the target runs with the application's arguments, stack and
 * return address. */
#if defined(__x86_64__)
#define TR_TRAMPOLINE(sym, versioned)                                          \
    "    .text\n"                                                              \
    "    .globl " #sym "\n"                                                    \
    "    .type " #sym ", @function\n"                                          \
    "    .p2align 4\n"                                                         \
    #sym ":\n"                                                                 \
    "    .cfi_startproc\n"                                                     \
    "    endbr64\n"                                                            \
    "    pushq %rdi\n"                                                         \
    "    .cfi_adjust_cfa_offset 8\n"                                           \
    "    pushq %rsi\n"                                                         \
    "    .cfi_adjust_cfa_offset 8\n"                                           \
    "    pushq %rdx\n"                                                         \
    "    .cfi_adjust_cfa_offset 8\n"                                           \
    "    movl $" #versioned ", %esi\n"                                         \
    "    call tr_dlsym_target\n"                                               \
    "    popq %rdx\n"                                                          \
    "    .cfi_adjust_cfa_offset -8\n"                                          \
    "    popq %rsi\n"                                                          \
    "    .cfi_adjust_cfa_offset -8\n"                                          \
    "    popq %rdi\n"                                                          \
    "    .cfi_adjust_cfa_offset -8\n"                                          \
    "    jmp *%rax\n"                                                          \
    "    .cfi_endproc\n"                                                       \
    "    .size " #sym ", .-" #sym "\n"
#elif defined(__aarch64__)
#define TR_TRAMPOLINE(sym, versioned)                                          \
    "    .text\n"                                                              \
    "    .globl " #sym "\n"                                                    \
    "    .type " #sym ", %function\n"                                          \
    "    .p2align 4\n"                                                         \
    #sym ":\n"                                                                 \
    "    .cfi_startproc\n"                                                     \
    "    hint #34\n"    /* bti c */                                            \
    "    stp x29, x30, [sp, #-48]!\n"                                          \
    "    .cfi_def_cfa_offset 48\n"                                             \
    "    .cfi_offset 29, -48\n"                                                \
    "    .cfi_offset 30, -40\n"                                                \
    "    mov x29, sp\n"                                                        \
    "    stp x0, x1, [sp, #16]\n"                                              \
    "    str x2, [sp, #32]\n"                                                  \
    "    mov w1, #" #versioned "\n"                                            \
    "    bl tr_dlsym_target\n"                                                 \
    "    mov x16, x0\n"                                                        \
    "    ldp x0, x1, [sp, #16]\n"                                              \
    "    ldr x2, [sp, #32]\n"                                                  \
    "    ldp x29, x30, [sp], #48\n"                                            \
    "    .cfi_def_cfa_offset 0\n"                                              \
    "    .cfi_restore 29\n"                                                    \
    "    .cfi_restore 30\n"                                                    \
    "    br x16\n"                                                             \
    "    .cfi_endproc\n"                                                       \
    "    .size " #sym ", .-" #sym "\n"
#endif

__asm__(TR_TRAMPOLINE(dlsym, 0) TR_TRAMPOLINE(dlvsym, 1));

#endif /* TR_DLSYM_TRAMPOLINES */
