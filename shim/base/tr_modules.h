/* What a loaded module is (tr_modules.c): what dl_iterate_phdr reports of
 * it, for the stacks' symbols (stacks/tr_symbols.c) and the ring file's
 * module blobs (ring/tr_ring_blobs.c). Part of base's boundary: included
 * through tr_core.h. */
#ifndef TR_MODULES_H
#define TR_MODULES_H

#include <stddef.h>

/* What dl_iterate_phdr reports of a module. The GNU build id of the
 * loaded module (its PT_NOTE in memory), hex, "" when none; and its path:
 * the loader's name, else the main program's (first: the first module
 * dl_iterate_phdr reports; from /proc/self/exe), "[vdso]", "[unknown]". */
struct dl_phdr_info;
void tr_module_build_id(const struct dl_phdr_info *info, char *out, size_t outlen);
const char *tr_module_path(const struct dl_phdr_info *info, int first, char *buf, size_t cap);
/* Scans the ELF notes p[0..left) for the GNU build id; writes it in hex to
 * out and returns 1 when found. */
int tr_note_build_id(const unsigned char *p, size_t left, char *out, size_t outlen);

#endif
