/* Shared by tr_stack.c (capture, the per-thread cache, the stacks table)
 * and tr_symbols.c (modules, symbols, and the trace's "modules" and
 * "stacks", tr_stack_write_json). Not used elsewhere. */
#ifndef TR_SYMBOLS_H
#define TR_SYMBOLS_H

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

#endif
