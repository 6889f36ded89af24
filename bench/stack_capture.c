/* bench/stack_capture: tr_stack_capture alone (shim/stacks/tr_stack.c linked
 * directly, with the stand-in wrapper of tests/shim_stack), called from 30
 * frames deep: the cost of a capture whose stack was seen before, and (with
 * TRSHIM_STACK_CACHE=0, as bench/run runs it) of a full unwind.
 * Prints "stack_capture NS" (median of rounds, per capture). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tr_core.h"
#include "stack_test.h"
#include "bench_time.h"
#include "tr_stacks.h"

#define ROUNDS 9
static volatile int sink;
static long per_round = 100000;

NOIPA double rounds(void)
{
    double t[ROUNDS];
    for (int r = -1; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < per_round; i++)
            if (tw_capture() < 0) {
                fprintf(stderr, "stack_capture: capture failed\n");
                exit(1);
            }
        double dt = (now_ns() - t0) / per_round;
        if (r >= 0) t[r] = dt;
    }
    return median(t, ROUNDS);
}

NOIPA double deep(int d)
{
    double r = d <= 1 ? rounds() : deep(d - 1);
    sink += 1;
    return r;
}

int main(int argc, char **argv)
{
    if (argc > 1) per_round = atol(argv[1]);
    if (per_round <= 0) return 2;
    double ns = deep(30);
    tr_stack_thread_stats st;
    tr_stack_get_thread_stats(&st);
    printf("stack_capture %.1f\n", ns);
    printf("hits %llu misses %llu\n", (unsigned long long)st.hits, (unsigned long long)st.misses);
    return 0;
}
