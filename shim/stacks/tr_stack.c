/* Call stacks: capture and deduplication; modules and symbols (in the
 * writer) are in tr_symbols.c. See tr_core.h for the interface,
 * docs/trace-format.md for the output, docs/performance.md for the costs.
 *
 * Capture
 * -------
 * A full unwind with LLVM libunwind costs ~150-270 ns per frame here (every
 * step looks up the module and parses its CFI), ~9 us for 35 frames: far too
 * much per NCCL call. So each thread keeps a small cache keyed by the
 * application's call site, (return address, stack pointer) of the frame that
 * called the wrapper. The first capture with a key unwinds fully and
 * remembers, for every frame, the stack address its return address was read
 * from (the callee's CFA - 8). A later capture with the same key re-reads
 * those words from the live stack: when all still hold the remembered return
 * addresses, the stack is the same one and its index is returned without
 * unwinding (about one load per frame, no lock, no atomic).
 *
 * Why that is exact: the CFA of a frame is a function of its pc and sp,
 * except in a function whose frame size varies at a call site (alloca, VLAs,
 * stack realignment); such functions address their frame through rbp. By
 * induction from the key (pc and sp of frame 0), every remembered slot is the
 * real slot of the current stack as long as each earlier frame's CFA is the
 * same, so matching return addresses mean matching frames. A frame whose rbp
 * is its frame pointer (rbp = CFA - 16, "push rbp; mov rbp, rsp") may have a
 * variable size, so its rbp is checked too, at the stack address it was saved
 * at: by the callee's "push rbp", or by the shim's own wrapper for frame 0,
 * or, when the frames below did not touch rbp, where it was saved for them.
 * A frame pointer that cannot be located that way, or a gcc realigned frame
 * (CFA = *(rbp - 8)), makes the stack uncacheable: it is unwound every time.
 * An rbp that points into the frame otherwise is a pointer to a local, not
 * a frame base (such frames have a fixed size). Without the rbp check, a
 * stale return address left in a stack slot by an earlier call could pass
 * for the current one (tests/shim_stack: the "vla" case, and its "hazard"
 * test with the check compiled out).
 *
 * Stacks that differ only in frames beyond TRSHIM_STACK_DEPTH are the same
 * stack (truncated), and only the kept frames are checked.
 *
 * The cache is per thread (keys contain stack addresses, which are per
 * thread anyway): 256 entries, 4-way probing, a key may hold several stacks
 * (e.g. f() reached from g1() and g2() at the same depth), replacement round
 * robin; entries are freed when the thread exits. At most ~20 KB + 256
 * entries of 16 bytes per checked word (~0.5 MB at depth 64) per thread.
 * Only addresses inside the thread's own stack (pthread_getattr_np, once per
 * thread) and above the wrapper's frame are ever read; a stack elsewhere
 * (signal stack, coroutine) is unwound every time. TRSHIM_STACK_CACHE=0
 * disables the cache: every capture unwinds (tests compare both).
 *
 * Distinct stacks are interned in one process-wide table (mutex, taken only
 * on cache misses); at most TR_STACK_MAX_STACKS, beyond that -1 (and a
 * refused stack is cached as -1, so that it is not unwound again). The stack
 * records are immutable and published through an atomic count, so the
 * writer reads them without the lock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libunwind.h>

#include "tr_core.h"
#include "tr_ring.h"
#include "tr_symbols.h"
#include "tr_stacks.h"

#define MAX_FRAMES TR_STACK_MAX_DEPTH
#define CACHE_SIZE 256u          /* entries per thread (power of two) */
#define CACHE_WAYS 4u            /* probes per key */
#define FIND_STEPS 32            /* unwind steps allowed to reach the application's frame */
#define CHUNK_BITS 10
#define CHUNK_SIZE (1u << CHUNK_BITS)

/* One word of the live stack, in any of the application's frames: in a
 * program built with AddressSanitizer that may be a redzone between its
 * locals, which the check reads on purpose (as the unwinder does); never
 * instrumented, so a sanitized shim does not report it. */
__attribute__((no_sanitize_address)) static inline uintptr_t stack_word(uintptr_t addr)
{
    return *(const volatile uintptr_t *)addr;
}

/* ---- distinct stacks (process-wide) ----------------------------------------- */

static tr_stack_rec **g_chunks[TR_STACK_MAX_STACKS / CHUNK_SIZE];
static _Atomic uint32_t g_nstacks;          /* published records */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *g_tab;                     /* open addressing: index + 1, 0 = empty */
static uint32_t g_tab_cap;
static _Atomic uint64_t g_dropped, g_unwind_failed, g_uncacheable;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static int g_key_ok;
static int g_cache_on = 1;

static uint64_t hash_ips(const uintptr_t *ip, uint32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    for (uint32_t i = 0; i < n; i++) h = tr_fmix64(h ^ ip[i]) + i;
    return h;
}

static tr_stack_rec *rec_at(uint32_t idx)
{
    return g_chunks[idx >> CHUNK_BITS][idx & (CHUNK_SIZE - 1)];
}

/* Doubles the intern table (g_mu held). Returns 0 without memory. */
static int tab_grow(void)
{
    uint32_t cap = g_tab_cap ? g_tab_cap * 2 : 1024;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return 0;
    uint32_t n = atomic_load_explicit(&g_nstacks, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = (uint32_t)rec_at(i)->hash & (cap - 1);
        while (t[p]) p = (p + 1) & (cap - 1);
        t[p] = i + 1;
    }
    free(g_tab);
    g_tab = t;
    g_tab_cap = cap;
    return 1;
}

/* Index of the stack ip[0..n), added if new; -2 when the table is full,
 * -1 when memory is short. */
static int32_t intern(const uintptr_t *ip, uint32_t n)
{
    uint64_t h = hash_ips(ip, n);
    int32_t result = -1;
    int fresh = 0;
    pthread_mutex_lock(&g_mu);
    uint32_t count = atomic_load_explicit(&g_nstacks, memory_order_relaxed);
    if ((!g_tab || (count + 1) * 2 > g_tab_cap) && !tab_grow() && !g_tab) goto out;
    uint32_t p = (uint32_t)h & (g_tab_cap - 1);
    for (; g_tab[p]; p = (p + 1) & (g_tab_cap - 1)) {
        tr_stack_rec *r = rec_at(g_tab[p] - 1);
        if (r->hash == h && r->n == n && memcmp(r->ip, ip, n * sizeof *ip) == 0) {
            result = (int32_t)(g_tab[p] - 1);
            goto out;
        }
    }
    if (count >= TR_STACK_MAX_STACKS || count + 1 >= g_tab_cap) {
        atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
        result = count >= TR_STACK_MAX_STACKS ? -2 : -1;
        goto out;
    }
    tr_stack_rec **chunk = g_chunks[count >> CHUNK_BITS];
    if (!chunk) {
        chunk = calloc(CHUNK_SIZE, sizeof *chunk);
        if (!chunk) goto out;
        g_chunks[count >> CHUNK_BITS] = chunk;
    }
    tr_stack_rec *r = malloc(sizeof *r + n * sizeof *ip);
    if (!r) goto out;
    r->hash = h;
    r->n = n;
    memcpy(r->ip, ip, n * sizeof *ip);
    chunk[count & (CHUNK_SIZE - 1)] = r;
    g_tab[p] = count + 1;
    atomic_store_explicit(&g_nstacks, count + 1, memory_order_release);
    result = (int32_t)count;
    fresh = 1;
out:
    pthread_mutex_unlock(&g_mu);
    /* into the ring file too (its modules are looked up without g_mu) */
    if (fresh) tr_ring_add_stack((uint32_t)result, ip, n);
    return result;
}

int32_t tr_stack_intern(const uintptr_t *ip, uint32_t n)
{
    if (n == 0 || n > MAX_FRAMES) return -1;
    int32_t idx = intern(ip, n);
    return idx < 0 ? -1 : idx;
}

uint32_t tr_stack_count(void)
{
    return atomic_load_explicit(&g_nstacks, memory_order_acquire);
}

const tr_stack_rec *tr_stack_rec_at(uint32_t idx)
{
    return rec_at(idx);
}

/* ---- per-thread cache ------------------------------------------------------- */

typedef struct {
    uintptr_t addr, val;         /* the word at addr must be val */
} check_t;

typedef struct {
    int32_t idx;
    int32_t depth;               /* the depth it was captured with */
    uint32_t nchk;
    check_t chk[];
} cache_rec;

typedef struct {
    uintptr_t ra, sp;
    cache_rec *rec;
} cache_ent;

typedef struct {
    uintptr_t lo, hi;            /* this thread's stack; hi = 0: unknown */
    uint32_t victim;
    tr_stack_thread_stats st;
    cache_ent ent[CACHE_SIZE];
    /* unwind scratch: ip, sp, rbp of each frame */
    uintptr_t ip[MAX_FRAMES], sp[MAX_FRAMES], bp[MAX_FRAMES];
    check_t chk[2 * MAX_FRAMES];
} tstate;

static __thread tstate *tls_ts __attribute__((tls_model("initial-exec")));

static void tstate_free(void *p)
{
    tstate *ts = p;
    for (unsigned i = 0; i < CACHE_SIZE; i++) free(ts->ent[i].rec);
    if (tls_ts == ts) tls_ts = NULL;
    free(ts);
}

static void global_init(void)
{
    const char *v = getenv("TRSHIM_STACK_CACHE");
    if (v && *v) {
        if (strcmp(v, "0") == 0) g_cache_on = 0;
        else if (strcmp(v, "1") != 0)
            tr_warn("TRSHIM_STACK_CACHE=%s is not 0 or 1: stack cache stays on", v);
    }
    g_key_ok = pthread_key_create(&g_key, tstate_free) == 0;
}

static tstate *tstate_new(void)
{
    pthread_once(&g_once, global_init);
    tstate *ts = calloc(1, sizeof *ts);
    if (!ts) return NULL;
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        void *addr;
        size_t size;
        if (pthread_attr_getstack(&a, &addr, &size) == 0) {
            ts->lo = (uintptr_t)addr;
            ts->hi = (uintptr_t)addr + size;
        }
        pthread_attr_destroy(&a);
    }
    tls_ts = ts;
    if (g_key_ok) pthread_setspecific(g_key, ts);
    return ts;
}

static inline unsigned key_slot(uintptr_t ra, uintptr_t sp)
{
    return (unsigned)(tr_fmix64(ra ^ (sp << 20) ^ (sp >> 4)) & (CACHE_SIZE - 1));
}

/* Unwinds the calling thread with libunwind and keeps, from the frame with
 * (ip, sp) = (ra, sp0) on, up to depth frames in ts->ip/sp/bp. Returns the
 * number kept, 0 if that frame was not found. */
static __attribute__((noinline)) int unwind_from(tstate *ts, uintptr_t ra, uintptr_t sp0, int depth)
{
    unw_context_t ctx;
    unw_cursor_t cur;
    unw_word_t ip, sp, bp;
    if (unw_getcontext(&ctx) != 0 || unw_init_local(&cur, &ctx) != 0) return 0;
    int found = 0;
    for (int k = 0; k < FIND_STEPS && !found; k++) {
        if (unw_step(&cur) <= 0) break;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || unw_get_reg(&cur, UNW_REG_SP, &sp) != 0) break;
        if (sp > sp0) break;
        found = sp == sp0 && ip == ra;
    }
    if (!found) return 0;
    int n = 0;
    for (;;) {
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0) break;
        if (unw_get_reg(&cur, UNW_REG_SP, &sp) != 0) break;
        if (unw_get_reg(&cur, UNW_X86_64_RBP, &bp) != 0) bp = 0;
        ts->ip[n] = ip;
        ts->sp[n] = sp;
        ts->bp[n] = bp;
        if (++n >= depth) break;
        if (unw_step(&cur) <= 0) break;
    }
    return n;
}

/* The checks that prove a later stack with the same key is this one (see
 * the top of the file); 0 if the stack cannot be proven that way. wfp is
 * the wrapper's frame: wfp[0] = frame 0's rbp, wfp[1] = frame 0's ip. */
static uint32_t make_checks(tstate *ts, int n, const uintptr_t *wfp)
{
    uintptr_t lo = (uintptr_t)wfp, hi = ts->hi;
    if (!hi || lo < ts->lo || ts->sp[0] != lo + 16) return 0;
    uint32_t nchk = 0;
    uintptr_t rloc = wfp[0] == ts->bp[0] ? lo : 0;     /* where frame i's rbp is saved */
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            uintptr_t slot = ts->sp[i] - 8;
            if (slot < lo || slot + 8 > hi || stack_word(slot) != ts->ip[i]) return 0;
            ts->chk[nchk++] = (check_t){slot, ts->ip[i]};
            uintptr_t pushed = ts->sp[i] - 16;   /* the callee's "push rbp" */
            if (ts->bp[i] == ts->bp[i - 1] && rloc) {
                /* rbp went through frame i-1 untouched: same place */
            } else if (pushed >= lo && stack_word(pushed) == ts->bp[i]) {
                rloc = pushed;
            } else {
                rloc = 0;
            }
        }
#ifndef TR_STACK_TEST_NO_FP_CHECK   /* defined only by a test, to show the check matters */
        uintptr_t bp = ts->bp[i];
        if (i + 1 < n && bp >= ts->sp[i] && bp < ts->sp[i + 1]) {
            /* rbp points into frame i: a frame pointer, or a pointer to a local */
            if (bp + 16 == ts->sp[i + 1]) {
                /* "push rbp; mov rbp, rsp": CFA = rbp + 16, and the frame's
                 * size may vary (alloca, VLA, realignment): rbp must be the
                 * same as well */
                if (!rloc) return 0;
                if (!(nchk && ts->chk[nchk - 1].addr == rloc && ts->chk[nchk - 1].val == bp))
                    ts->chk[nchk++] = (check_t){rloc, bp};
            } else if (bp >= ts->sp[i] + 8 && stack_word(bp - 8) == ts->sp[i + 1]) {
                return 0;   /* gcc's realigned frame: CFA = *(rbp - 8) */
            }
            /* else rbp is not the frame's base: the frame has a fixed size */
        }
#endif
    }
    return nchk ? nchk : UINT32_MAX;   /* UINT32_MAX: one frame, nothing to check */
}

static void cache_put(tstate *ts, unsigned h, uintptr_t ra, uintptr_t sp, int32_t idx, int depth,
                      uint32_t nchk)
{
    if (nchk == UINT32_MAX) nchk = 0;
    cache_rec *r = malloc(sizeof *r + nchk * sizeof(check_t));
    if (!r) return;
    r->idx = idx;
    r->depth = depth;
    r->nchk = nchk;
    memcpy(r->chk, ts->chk, nchk * sizeof(check_t));
    cache_ent *e = NULL;
    for (unsigned k = 0; k < CACHE_WAYS && !e; k++)
        if (!ts->ent[(h + k) & (CACHE_SIZE - 1)].rec) e = &ts->ent[(h + k) & (CACHE_SIZE - 1)];
    if (!e) {
        e = &ts->ent[(h + ts->victim++ % CACHE_WAYS) & (CACHE_SIZE - 1)];
        free(e->rec);
    }
    e->ra = ra;
    e->sp = sp;
    e->rec = r;
}

static __attribute__((noinline)) int32_t capture_slow(tstate *ts, const uintptr_t *wfp, int depth,
                                                      unsigned h)
{
    uintptr_t ra = wfp[1], sp = (uintptr_t)wfp + 16;
    ts->st.misses++;
    int n = unwind_from(ts, ra, sp, depth);
    if (n <= 0) {
        /* the unwinder lost the frames (no CFI?): keep the call site at least */
        atomic_fetch_add_explicit(&g_unwind_failed, 1, memory_order_relaxed);
        ts->ip[0] = ra;
        int32_t idx = intern(ts->ip, 1);
        return idx < 0 ? -1 : idx;
    }
    int32_t idx = intern(ts->ip, (uint32_t)n);
    /* a stack refused because the table is full stays refused: cached as -1 */
    if (idx == -2) idx = -1;
    else if (idx < 0) return -1;
    if (!g_cache_on) return idx;
    uint32_t nchk = make_checks(ts, n, wfp);
    if (!nchk) {
        ts->st.uncacheable++;
        atomic_fetch_add_explicit(&g_uncacheable, 1, memory_order_relaxed);
        return idx;
    }
    cache_put(ts, h, ra, sp, idx, depth, nchk);
    return idx;
}

/* wfp: frame pointer of the wrapper (its saved rbp, then its return address
 * into the application). */
static inline int32_t capture_at(const uintptr_t *wfp, const void *here)
{
    const tr_settings *cfg = tr_cfg();
    int depth = cfg ? cfg->stack_depth : 64;
    if (depth <= 0) return -1;
    if (depth > MAX_FRAMES) depth = MAX_FRAMES;
    tstate *ts = tls_ts;
    if (__builtin_expect(!ts, 0) && !(ts = tstate_new())) return -1;
    /* the wrapper's frame lies above ours, on the same stack */
    uintptr_t fp = (uintptr_t)wfp, h0 = (uintptr_t)here;
    int on_thread_stack = ts->hi && h0 >= ts->lo && h0 < ts->hi;
    if (fp <= h0 || (fp & 7) || (on_thread_stack ? fp + 16 > ts->hi : fp - h0 > ((uintptr_t)1 << 20))) {
        atomic_fetch_add_explicit(&g_unwind_failed, 1, memory_order_relaxed);
        return -1;
    }
    uintptr_t ra = wfp[1], sp = fp + 16;
    ts->st.last_ra = ra;
    ts->st.last_sp = sp;
    unsigned h = key_slot(ra, sp);
    if (g_cache_on) {
        for (unsigned k = 0; k < CACHE_WAYS; k++) {
            const cache_ent *e = &ts->ent[(h + k) & (CACHE_SIZE - 1)];
            if (e->ra != ra || e->sp != sp || !e->rec || e->rec->depth != depth) continue;
            const cache_rec *r = e->rec;
            uint32_t i = 0;
            while (i < r->nchk && stack_word(r->chk[i].addr) == r->chk[i].val) i++;
            if (i == r->nchk) {
                ts->st.hits++;
                return r->idx;
            }
        }
    }
    return capture_slow(ts, wfp, depth, h);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wframe-address"
__attribute__((noinline)) int32_t tr_stack_capture(void)
{
    /* The wrapper is built with frame pointers: frame 1 is its frame. */
    return capture_at((const uintptr_t *)__builtin_frame_address(1), __builtin_frame_address(0));
}

__attribute__((noinline)) int32_t tr_stack_capture_skip(int skip)
{
    const uintptr_t *fp = (const uintptr_t *)__builtin_frame_address(1);
    const void *here = __builtin_frame_address(0);
    for (int i = 0; i < skip && fp; i++) {
        const uintptr_t *up = (const uintptr_t *)fp[0];
        if (up <= fp) return -1;    /* not a frame chain */
        fp = up;
    }
    return fp ? capture_at(fp, here) : -1;
}
#pragma GCC diagnostic pop

void tr_stack_get_thread_stats(tr_stack_thread_stats *out)
{
    tstate *ts = tls_ts;
    if (ts) *out = ts->st;
    else memset(out, 0, sizeof *out);
}

void tr_stack_get_stats(tr_stack_stats *out)
{
    out->stacks = atomic_load_explicit(&g_nstacks, memory_order_acquire);
    out->dropped = atomic_load_explicit(&g_dropped, memory_order_relaxed);
    out->unwind_failed = atomic_load_explicit(&g_unwind_failed, memory_order_relaxed);
    out->uncacheable = atomic_load_explicit(&g_uncacheable, memory_order_relaxed);
}
