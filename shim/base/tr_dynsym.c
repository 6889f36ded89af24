/* Dynamic symbols of a loaded object read from memory (tr_dynsym.h).
 *
 * The dynamic linker of glibc rewrites the address entries of a writable
 * dynamic section in place (x86-64, aarch64): they hold run-time addresses;
 * a read-only one (the vDSO, some architectures) keeps link-time offsets.
 * An entry below the load bias is therefore an offset and gets the bias
 * added. Lookups go through the GNU hash table (every object built by a
 * current toolchain has one), else the System V one.
 *
 * Everything here runs on the shim's own code only: no C library function
 * (not even strcmp or memset, and no call the compiler could turn into
 * one), no allocation, no lock, no thread-local state. It finds the real
 * dlsym (tr_dlreal.c), which a sanitizer runtime (ASan, TSan) reaches
 * through the shim's dlsym while it initialises itself, before the
 * constructors: at that point its interceptors of strcmp, memset,
 * dl_iterate_phdr... are not set up and a call to one jumps to address 0. */
#include <elf.h>

#include "tr_dynsym.h"

/* st_info's type and binding (the same in both ELF classes) */
#define SYM_TYPE(info) ((info) & 0xf)
#define SYM_BIND(info) ((info) >> 4)

static uintptr_t dyn_addr(uintptr_t base, ElfW(Addr) v)
{
    return v < base ? base + v : v;
}

/* strcmp(a, b) == 0, without the C library's strcmp (see above) */
static int str_eq(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

/* Field by field: a struct assignment or memset may become a call to the
 * C library's memset. */
static void dyn_clear(tr_dyn *d)
{
    d->base = 0;
    d->symtab = NULL;
    d->strtab = NULL;
    d->strsz = 0;
    d->gnu_hash = NULL;
    d->sysv_hash = NULL;
    d->versym = NULL;
    d->soname = NULL;
}

int tr_dyn_init(tr_dyn *d, uintptr_t base, const ElfW(Dyn) *dyn)
{
    dyn_clear(d);
    d->base = base;
    if (!dyn) return 0;
    size_t soname = (size_t)-1;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: d->symtab = (const ElfW(Sym) *)dyn_addr(base, dyn->d_un.d_ptr); break;
        case DT_STRTAB: d->strtab = (const char *)dyn_addr(base, dyn->d_un.d_ptr); break;
        case DT_STRSZ: d->strsz = dyn->d_un.d_val; break;
        case DT_GNU_HASH: d->gnu_hash = (const uint32_t *)dyn_addr(base, dyn->d_un.d_ptr); break;
        case DT_HASH: d->sysv_hash = (const uint32_t *)dyn_addr(base, dyn->d_un.d_ptr); break;
        case DT_VERSYM: d->versym = (const ElfW(Half) *)dyn_addr(base, dyn->d_un.d_ptr); break;
        case DT_SONAME: soname = dyn->d_un.d_val; break;
        default: break;
        }
    }
    if (!d->symtab || !d->strtab || !d->strsz || (!d->gnu_hash && !d->sysv_hash)) return 0;
    if (soname < d->strsz) d->soname = d->strtab + soname;
    return 1;
}

int tr_dyn_init_map(tr_dyn *d, const struct link_map *lm)
{
    return tr_dyn_init(d, (uintptr_t)lm->l_addr, lm->l_ld);
}

int tr_dyn_init_phdr(tr_dyn *d, const struct dl_phdr_info *info)
{
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            return tr_dyn_init(d, (uintptr_t)info->dlpi_addr,
                               (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr));
    dyn_clear(d);
    return 0;
}

/* Symbol i when it is name, defined here under its default version, and a
 * global or weak function or indirect function; else NULL. */
static const ElfW(Sym) *sym_match(const tr_dyn *d, uint32_t i, const char *name)
{
    const ElfW(Sym) *s = &d->symtab[i];
    if (s->st_name >= d->strsz || !str_eq(d->strtab + s->st_name, name)) return NULL;
    if (s->st_shndx == SHN_UNDEF || s->st_value == 0) return NULL;
    int type = SYM_TYPE(s->st_info), bind = SYM_BIND(s->st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) return NULL;
    if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) return NULL;
    if (d->versym) {
        ElfW(Half) v = d->versym[i];
        if ((v & 0x8000) || (v & 0x7fff) == 0) return NULL;   /* hidden (non-default) or local */
    }
    return s;
}

static const ElfW(Sym) *lookup_gnu(const tr_dyn *d, const char *name)
{
    const uint32_t *gh = d->gnu_hash;
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2], bloom_shift = gh[3];
    if (nbuckets == 0 || bloom_size == 0) return NULL;
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gh + 4);
    const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
    const uint32_t *chain = buckets + nbuckets;
    const unsigned bits = sizeof(ElfW(Addr)) * 8;

    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = h * 33 + *c;
    ElfW(Addr) word = bloom[(h / bits) % bloom_size];
    ElfW(Addr) mask = ((ElfW(Addr))1 << (h % bits)) | ((ElfW(Addr))1 << ((h >> bloom_shift) % bits));
    if ((word & mask) != mask) return NULL;
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset) return NULL;
    for (;; i++) {
        uint32_t h2 = chain[i - symoffset];
        if ((h | 1) == (h2 | 1)) {
            const ElfW(Sym) *s = sym_match(d, i, name);
            if (s) return s;
        }
        if (h2 & 1) return NULL;
    }
}

static const ElfW(Sym) *lookup_sysv(const tr_dyn *d, const char *name)
{
    const uint32_t *hh = d->sysv_hash;
    uint32_t nbucket = hh[0], nchain = hh[1];
    if (nbucket == 0) return NULL;
    const uint32_t *bucket = hh + 2, *chain = bucket + nbucket;
    uint32_t h = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        h = (h << 4) + *c;
        uint32_t g = h & 0xf0000000u;
        if (g) h ^= g >> 24;
        h &= ~g;
    }
    for (uint32_t i = bucket[h % nbucket], n = 0; i != STN_UNDEF && i < nchain && n < nchain; i = chain[i], n++) {
        const ElfW(Sym) *s = sym_match(d, i, name);
        if (s) return s;
    }
    return NULL;
}

void *tr_dyn_func(const tr_dyn *d, const char *name)
{
    if (!d->symtab) return NULL;
    const ElfW(Sym) *s = d->gnu_hash ? lookup_gnu(d, name) : lookup_sysv(d, name);
    if (!s || SYM_TYPE(s->st_info) == STT_GNU_IFUNC) return NULL;
    return (void *)(d->base + s->st_value);
}

/* Symbol-table entries: DT_HASH's nchain, else one past the highest symbol
 * the GNU hash table reaches (the last chain of the fullest bucket). */
uint32_t tr_dyn_count(const tr_dyn *d)
{
    if (!d->symtab) return 0;
    if (d->sysv_hash) return d->sysv_hash[1];
    const uint32_t *gh = d->gnu_hash;
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gh + 4) + bloom_size);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        if (buckets[b] > last) last = buckets[b];
    if (last < symoffset) return symoffset;
    while (!(chain[last - symoffset] & 1)) last++;
    return last + 1;
}

const char *tr_dyn_func_at(const tr_dyn *d, uint32_t i)
{
    const ElfW(Sym) *s = &d->symtab[i];
    if (s->st_name == 0 || s->st_name >= d->strsz) return NULL;
    const char *name = d->strtab + s->st_name;
    return sym_match(d, i, name) ? name : NULL;
}
