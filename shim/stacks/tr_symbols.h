/* Shared by tr_stack.c (capture, the per-thread cache, the stacks table)
 * and tr_symbols.c (symbols, and the trace's "modules" and "stacks",
 * tr_stack_write_json); the watchdog names a call site with
 * tr_symbols_site. Part of stacks/'s boundary: included through
 * tr_stacks.h. */
#ifndef TR_SYMBOLS_H
#define TR_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

/* A distinct stack: return addresses, innermost first. Immutable once
 * published. */
typedef struct {
    uint64_t hash;
    uint32_t n;
    uintptr_t ip[];
} tr_stack_rec;

/* tr_stack.c: the number of stacks published so far (the records below it
 * are complete: read without the lock), and the record of index idx, which
 * must be below that number. */
uint32_t tr_stack_count(void);
const tr_stack_rec *tr_stack_rec_at(uint32_t idx);

/* tr_symbols.c, for the hang watchdog (tr_watchdog.c, on its own thread,
 * never in a signal handler): the innermost frame of stack index stack as
 * "function+0xoff (module basename)" ("0xoff (module)" without a symbol,
 * "0xaddr" outside any module, "an unknown call site" without a stack).
 * Returns out. */
char *tr_symbols_site(int32_t stack, char *out, size_t cap);

#endif
