#ifndef STACK_TEST_H
#define STACK_TEST_H
#include <stdint.h>

/* no inlining, cloning, identical-code folding or tail calls: the frames the
 * checker expects are there */
#define NOIPA __attribute__((noipa))
#define NOTAIL __asm__ volatile("" ::: "memory")

int32_t tw_capture(void);         /* a wrapper: stack of its caller */
int32_t tw_capture_helper(void);  /* a wrapper capturing from a helper */
#endif
