/* Stack-capture scenarios for check_stack.py. Captures through tw_capture
 * (a stand-in wrapper) from known call chains, then writes one JSON object
 * to the file argv[1]: {"results": {...}, "modules": [...], "stacks": [...]}
 * (the last two from tr_stack_write_json). "stack_prog OUT cap" runs only
 * the table-cap case. Built twice: with and without
 * frame pointers (the application's code may be either).
 *
 * Every function on a checked path is noipa and does work after its call, so
 * the frames the checker names exist exactly. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_core.h"
#include "stack_test.h"
#include "tr_stacks.h"

static _Thread_local volatile int sink;   /* thread-local: no race between the test threads */

/* ---- a plain chain, with a static function in it ---- */
NOIPA int32_t leaf_d(void)
{
    int32_t r = tw_capture();
    sink += 1;
    return r;
}
static NOIPA int32_t stat_c(void)
{
    int32_t r = leaf_d();
    sink += 1;
    return r;
}
NOIPA int32_t level_b(void)
{
    int32_t r = stat_c();
    sink += 1;
    return r;
}
NOIPA int32_t level_a(void)
{
    int32_t r = level_b();
    sink += 1;
    return r;
}

/* ---- recursion: rec_bottom under 30 frames of recurse ---- */
NOIPA int32_t rec_bottom(void)
{
    int32_t r = tw_capture();
    sink += 1;
    return r;
}
NOIPA int32_t recurse(int n)
{
    int32_t r = n == 0 ? rec_bottom() : recurse(n - 1);
    sink += 1;
    return r;
}

/* ---- one key, two stacks: f_shared reached from g1 and g2, which have the
 * same frame size and are called by pick at the same stack depth, so the
 * wrapper's caller (f_shared) has the same return address and stack pointer
 * on both paths ---- */
NOIPA int32_t f_shared(void)
{
    int32_t r = tw_capture();
    sink += 1;
    return r;
}
NOIPA int32_t g1(void)
{
    int32_t r = f_shared();
    sink += 1;
    return r;
}
NOIPA int32_t g2(void)
{
    int32_t r = f_shared();
    sink += 2;
    return r;
}
NOIPA int32_t pick(int which)
{
    int32_t r = which == 1 ? g1() : g2();
    sink += 3;
    return r;
}

/* ---- one key, two stacks, through a frame of variable size: vla_mid's
 * frame grows with n. Reached from vla_p1 (small frame) and vla_p2 (a big
 * frame it never writes), with n chosen so that vla_leaf runs at the same
 * stack pointer. The slot where vla_mid's return address was on the
 * vla_p1 path then lies in vla_p2's unwritten frame and still holds the
 * old return address into vla_p1: only the frame-pointer check tells the
 * two stacks apart. ---- */
static volatile uintptr_t vla_frame;
NOIPA int32_t vla_leaf(void)
{
    int32_t r = tw_capture();
    sink += 1;
    return r;
}
NOIPA int32_t vla_mid(size_t n)
{
    volatile char buf[n];
    buf[0] = 1;
    vla_frame = (uintptr_t)__builtin_frame_address(0);
    int32_t r = vla_leaf();
    sink += buf[0];
    return r;
}
NOIPA int32_t vla_p1(size_t n)
{
    int32_t r = vla_mid(n);
    sink += 1;
    return r;
}
NOIPA int32_t vla_p2(size_t n)
{
    char pad[512];
    __asm__ volatile("" : : "r"(pad) : "memory");
    int32_t r = vla_mid(n);
    sink += 1;
    return r;
}
NOIPA int32_t vla_via(int32_t (*p)(size_t), size_t n)
{
    int32_t r = p(n);
    sink += 1;
    return r;
}

/* ---- scenarios ----
 * Repeated captures go through one call site in a loop whose count the
 * compiler cannot see (no unrolling into several call sites). */
static volatile int reps = 6;
static int32_t idx_chain[6], idx_chain_other, idx_recursive[2][6], idx_helper;
static int32_t idx_shared[6], idx_vla[6];
static int shared_same_key, vla_same_key;

NOIPA void scenario_chain(void)
{
    for (int i = 0; i < reps; i++) idx_chain[i] = level_a();   /* the same stack 6 times */
    idx_chain_other = level_a();                                /* another call site */
    sink += 1;
}

NOIPA void scenario_recursive(void)
{
    for (int i = 0; i < reps; i++) idx_recursive[0][i] = recurse(29);
    /* differs from the above only in this outermost-but-two frame */
    for (int i = 0; i < reps; i++) idx_recursive[1][i] = recurse(29);
    sink += 1;
}

NOIPA void scenario_helper(void)
{
    idx_helper = tw_capture_helper();
    sink += 1;
}

NOIPA void scenario_shared(void)
{
    tr_stack_thread_stats st;
    uintptr_t key[2][2] = {{0}};
    for (int i = 0; i < reps; i++) {
        idx_shared[i] = pick(1 + i % 2);
        tr_stack_get_thread_stats(&st);
        key[i % 2][0] = st.last_ra;
        key[i % 2][1] = st.last_sp;
    }
    shared_same_key = key[0][0] == key[1][0] && key[0][1] == key[1][1];
    sink += 1;
}

NOIPA int32_t vla_call(int which, size_t n)
{
    int32_t r = vla_via(which ? vla_p2 : vla_p1, n);
    sink += 1;
    return r;
}

NOIPA void scenario_vla(void)
{
    tr_stack_thread_stats st;
    const size_t n1 = 2048;
    /* where each path puts vla_mid's frame, for the same n */
    (void)vla_call(0, n1);
    uintptr_t f1 = vla_frame;
    (void)vla_call(1, n1);
    uintptr_t f2 = vla_frame;
    size_t n2 = n1 - (f1 - f2);      /* vla_p2's path: the same stack pointer at the leaf */
    uintptr_t key[2][2] = {{0}};
    for (int i = 0; i < reps; i++) {
        idx_vla[i] = vla_call(i % 2, i % 2 ? n2 : n1);
        tr_stack_get_thread_stats(&st);
        key[i % 2][0] = st.last_ra;
        key[i % 2][1] = st.last_sp;
    }
    vla_same_key = f2 < f1 && key[0][0] == key[1][0] && key[0][1] == key[1][1];
    sink += 1;
}

/* ---- threads: each runs the scenarios many times, concurrently ---- */
#define NTHREADS 4
#define ITERS 400
typedef struct {
    int32_t chain, recursive, g1, g2;
    int consistent;
    tr_stack_thread_stats st;
} thread_out;
static thread_out touts[NTHREADS];
static pthread_barrier_t barrier;

NOIPA void *thread_main(void *arg)
{
    thread_out *o = arg;
    pthread_barrier_wait(&barrier);
    o->consistent = 1;
    for (int i = 0; i < ITERS; i++) {
        int32_t c = level_a(), r = recurse(29), a = pick(1), b = pick(2);
        if (i == 0) {
            o->chain = c;
            o->recursive = r;
            o->g1 = a;
            o->g2 = b;
        } else if (c != o->chain || r != o->recursive || a != o->g1 || b != o->g2) {
            o->consistent = 0;
        }
    }
    tr_stack_get_thread_stats(&o->st);
    sink += 1;
    return NULL;
}

NOIPA int scenario_threads(void)
{
    pthread_t t[NTHREADS];
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, thread_main, &touts[i]) != 0) return 0;
    for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);
    sink += 1;
    return 1;
}

/* ---- the table's cap: 70000 distinct stacks through a binary tree of
 * calls (17 levels, tree_a or tree_b at each, by the bits of path); every one
 * has the same key (one leaf call site, one depth), which also exercises the
 * per-thread cache's replacement ---- */
NOIPA int32_t tree_b(unsigned path, int level);
NOIPA int32_t tree_a(unsigned path, int level)
{
    int32_t r = level == 0 ? tw_capture() : (path & 1) ? tree_a(path >> 1, level - 1)
                                                      : tree_b(path >> 1, level - 1);
    sink += 1;
    return r;
}
NOIPA int32_t tree_b(unsigned path, int level)
{
    int32_t r = level == 0 ? tw_capture() : (path & 1) ? tree_a(path >> 1, level - 1)
                                                      : tree_b(path >> 1, level - 1);
    sink += 2;
    return r;
}

NOIPA int32_t cap_capture(unsigned path)
{
    int32_t r = tree_a(path, 17);
    sink += 1;
    return r;
}

#define CAP_PATHS 70000

/* Writes {"results": {"cap": ...}} (no stacks: too many to write). */
static int run_cap(const char *out)
{
    int dense = 1, refused_ok = 1, again_ok = 1;
    /* one call site: every path, then the first 200 and the last 200 again
     * (the same indexes: some from the cache, most re-unwound) */
    static unsigned paths[CAP_PATHS + 400];
    static int32_t got[CAP_PATHS + 400];
    int n = 0;
    for (int i = 0; i < CAP_PATHS; i++) paths[n++] = (unsigned)i;
    for (int i = 0; i < 200; i++) paths[n++] = (unsigned)i;
    for (int i = 0; i < 200; i++) paths[n++] = (unsigned)(CAP_PATHS - 1 - i);
    for (int i = 0; i < n; i++) got[i] = cap_capture(paths[i]);
    for (int i = 0; i < n; i++) {
        unsigned p = paths[i];
        if (i < CAP_PATHS) {
            if (p < TR_STACK_MAX_STACKS && got[i] != (int32_t)p) dense = 0;
            if (p >= TR_STACK_MAX_STACKS && got[i] != -1) refused_ok = 0;
        } else if (got[i] != got[p]) {
            again_ok = 0;
        }
    }
    tr_stack_stats gs;
    tr_stack_get_stats(&gs);
    tr_stack_thread_stats st;
    tr_stack_get_thread_stats(&st);
    FILE *f = fopen(out, "w");
    if (!f) return 1;
    tr_json j;
    trj_init(&j, f);
    trj_object_begin(&j, NULL);
    trj_object_begin(&j, "results");
    trj_object_begin(&j, "cap");
    trj_bool(&j, "dense", dense);
    trj_bool(&j, "refused", refused_ok);
    trj_bool(&j, "again", again_ok);
    trj_uint(&j, "stacks", gs.stacks);
    trj_uint(&j, "dropped", gs.dropped);
    trj_uint(&j, "hits", st.hits);
    trj_uint(&j, "misses", st.misses);
    trj_object_end(&j);
    trj_object_end(&j);
    trj_object_end(&j);
    return fclose(f) != 0;
}

static void int_array(tr_json *j, const char *key, const int32_t *v, int n)
{
    trj_array_begin(j, key);
    for (int i = 0; i < n; i++) trj_int(j, NULL, v[i]);
    trj_array_end(j);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[2], "cap") == 0) return run_cap(argv[1]);
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.json [cap]\n", argv[0]);
        return 2;
    }
    scenario_chain();
    scenario_recursive();
    scenario_helper();
    scenario_shared();
    scenario_vla();
    tr_stack_thread_stats main_st;
    tr_stack_get_thread_stats(&main_st);
    int threads_ok = scenario_threads();

    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    tr_json j;
    trj_init(&j, f);
    trj_object_begin(&j, NULL);
    trj_object_begin(&j, "results");
    int_array(&j, "chain", idx_chain, reps);
    trj_int(&j, "chain_other", idx_chain_other);
    trj_array_begin(&j, "recursive");
    for (int i = 0; i < 2; i++) int_array(&j, NULL, idx_recursive[i], reps);
    trj_array_end(&j);
    trj_int(&j, "helper", idx_helper);
    int_array(&j, "shared", idx_shared, reps);
    trj_bool(&j, "shared_same_key", shared_same_key);
    int_array(&j, "vla", idx_vla, reps);
    trj_bool(&j, "vla_same_key", vla_same_key);
    trj_object_begin(&j, "main_thread");
    trj_uint(&j, "hits", main_st.hits);
    trj_uint(&j, "misses", main_st.misses);
    trj_uint(&j, "uncacheable", main_st.uncacheable);
    trj_object_end(&j);
    trj_bool(&j, "threads_started", threads_ok);
    trj_array_begin(&j, "threads");
    for (int i = 0; i < NTHREADS; i++) {
        const thread_out *o = &touts[i];
        trj_object_begin(&j, NULL);
        trj_int(&j, "chain", o->chain);
        trj_int(&j, "recursive", o->recursive);
        trj_int(&j, "g1", o->g1);
        trj_int(&j, "g2", o->g2);
        trj_bool(&j, "consistent", o->consistent);
        trj_uint(&j, "hits", o->st.hits);
        trj_uint(&j, "misses", o->st.misses);
        trj_uint(&j, "uncacheable", o->st.uncacheable);
        trj_object_end(&j);
    }
    trj_array_end(&j);
    tr_stack_stats gs;
    tr_stack_get_stats(&gs);
    trj_object_begin(&j, "stats");
    trj_uint(&j, "stacks", gs.stacks);
    trj_uint(&j, "dropped", gs.dropped);
    trj_uint(&j, "unwind_failed", gs.unwind_failed);
    trj_uint(&j, "uncacheable", gs.uncacheable);
    trj_object_end(&j);
    trj_object_end(&j);
    tr_stack_write_json(&j);
    trj_object_end(&j);
    if (fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    return 0;
}
