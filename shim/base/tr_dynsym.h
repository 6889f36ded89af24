/* Dynamic symbols of a loaded object, read from its dynamic section in
 * memory (tr_dynsym.c): no dlsym, no lock, no allocation, so usable where
 * dlsym is not (finding the real dlsym; inside dl_iterate_phdr callbacks).
 * Only what the object itself defines is found, never its dependencies. Part
 * of base/'s boundary: included through tr_core.h. */
#ifndef TR_DYNSYM_H
#define TR_DYNSYM_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uintptr_t base;                  /* load bias (l_addr, dlpi_addr) */
    const ElfW(Sym) *symtab;
    const char *strtab;
    size_t strsz;
    const uint32_t *gnu_hash;        /* DT_GNU_HASH, or NULL */
    const uint32_t *sysv_hash;       /* DT_HASH, or NULL */
    const ElfW(Half) *versym;        /* DT_VERSYM, or NULL */
    const char *soname;              /* DT_SONAME, or NULL */
} tr_dyn;

/* Reads the dynamic section dyn of the object loaded at base. Returns 0
 * when it has no usable symbol table. */
int tr_dyn_init(tr_dyn *d, uintptr_t base, const ElfW(Dyn) *dyn);
/* The same for the object a link map describes (l_addr, l_ld). */
int tr_dyn_init_map(tr_dyn *d, const struct link_map *lm);
/* The same from dl_iterate_phdr's description of an object. */
int tr_dyn_init_phdr(tr_dyn *d, const struct dl_phdr_info *info);

/* The address of the function name defined by this object under its
 * default version (what a fresh link would bind), NULL when the object
 * does not define it, defines it only under a hidden version, or defines an
 * indirect function (STT_GNU_IFUNC: its address needs its resolver). */
void *tr_dyn_func(const tr_dyn *d, const char *name);

/* Every function the object exports: entries 0 .. tr_dyn_count() - 1, and
 * the name of entry i when it is a function defined here under its default
 * version (NULL otherwise). */
uint32_t tr_dyn_count(const tr_dyn *d);
const char *tr_dyn_func_at(const tr_dyn *d, uint32_t i);

#endif
