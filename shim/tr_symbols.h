/* Shared by tr_stack.c (capture, the per-thread cache, the stacks table),
 * tr_symbols.c (modules, symbols, and the trace's "modules" and "stacks",
 * tr_stack_write_json) and tr_modules.c (what a loaded module is); tr_ring.c
 * uses the module helpers. */
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

/* tr_modules.c, used by tr_symbols.c and tr_ring.c (the ring file's module
 * blobs): what dl_iterate_phdr reports of a module. The GNU build id of the
 * loaded module (its PT_NOTE in memory), hex, "" when none; and its path:
 * the loader's name, else the main program's (first: the first module
 * dl_iterate_phdr reports; from /proc/self/exe), "[vdso]", "[unknown]". */
struct dl_phdr_info;
void tr_module_build_id(const struct dl_phdr_info *info, char *out, size_t outlen);
const char *tr_module_path(const struct dl_phdr_info *info, int first, char *buf, size_t cap);
/* Scans the ELF notes p[0..left) for the GNU build id; writes it in hex to
 * out and returns 1 when found. */
int tr_note_build_id(const unsigned char *p, size_t left, char *out, size_t outlen);

/* tr_symbols.c, for the hang watchdog (tr_watchdog.c, on its own thread,
 * never in a signal handler): the innermost frame of stack index stack as
 * "function+0xoff (module basename)" ("0xoff (module)" without a symbol,
 * "0xaddr" outside any module, "an unknown call site" without a stack).
 * Returns out. */
char *tr_symbols_site(int32_t stack, char *out, size_t cap);

#endif
