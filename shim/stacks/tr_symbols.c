/* Modules and symbols of the call stacks captured by tr_stack.c, and the
 * trace's "modules" and "stacks". See docs/trace-format.md for the output.
 *
 * tr_stack_write_json (writer thread) maps every distinct return address to
 * its module (dl_iterate_phdr: path, load base, GNU build id read from the
 * PT_NOTE in memory; the main program's path from /proc/self/exe) and to the
 * function containing address - 1 (a return address points after the call,
 * which may be past the end of a function that ends in a call), read from
 * the module file's .symtab, else the .symtab of its separate debug file
 * (/usr/lib/debug/.build-id/), else its .dynsym, so static functions are
 * named too ("name@VERSION" becomes "name"). The file's build id must match
 * the loaded one; symbol tables are read once per module and kept. dladdr is
 * the fallback when no file can be read. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_core.h"
#include "tr_symbols.h"
#include "tr_stacks.h"

/* ---- modules and symbols (writer side) ------------------------------------------ */

typedef struct {
    uint64_t addr;
    uint32_t size;
    uint32_t name;               /* offset in the string table */
    uint8_t rank;                /* preference among aliases: lower wins */
} sym_t;

/* Symbol table of one module file, kept for the process's life. */
typedef struct symfile {
    struct symfile *next;
    char *path;                  /* key, with base */
    uintptr_t base;
    int ok;                      /* 0: unreadable, use dladdr */
    void *map;
    size_t map_len;
    const char *strtab;
    size_t strtab_len;
    sym_t *syms;
    size_t nsyms;
} symfile;

typedef struct {
    char *path;
    uintptr_t base;
    char build_id[81];           /* hex, "" if none */
    int out;                     /* index in "modules", -1 until referenced */
    symfile *sf;
} module_t;

typedef struct {
    uintptr_t start, end;
    int mod;
} seg_t;

typedef struct {
    module_t *mods;
    int nmods, capmods;
    seg_t *segs;
    int nsegs, capsegs;
    int nout;
    int *outmods;                /* output order -> module */
} snapshot;

static pthread_mutex_t g_sym_mu = PTHREAD_MUTEX_INITIALIZER;
static symfile *g_symfiles;

static int snap_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    snapshot *s = data;
    if (s->nmods == s->capmods) {
        int cap = s->capmods ? s->capmods * 2 : 32;
        module_t *m = realloc(s->mods, cap * sizeof *m);
        if (!m) return 1;
        s->mods = m;
        s->capmods = cap;
    }
    module_t *m = &s->mods[s->nmods];
    memset(m, 0, sizeof *m);
    m->base = info->dlpi_addr;
    m->out = -1;
    char exe[4096];
    m->path = strdup(tr_module_path(info, s->nmods == 0, exe, sizeof exe));
    if (!m->path) return 1;
    tr_module_build_id(info, m->build_id, sizeof m->build_id);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (s->nsegs == s->capsegs) {
            int cap = s->capsegs ? s->capsegs * 2 : 128;
            seg_t *g = realloc(s->segs, cap * sizeof *g);
            if (!g) return 1;
            s->segs = g;
            s->capsegs = cap;
        }
        s->segs[s->nsegs++] = (seg_t){info->dlpi_addr + ph->p_vaddr,
                                      info->dlpi_addr + ph->p_vaddr + ph->p_memsz, s->nmods};
    }
    s->nmods++;
    return 0;
}

static int seg_cmp(const void *a, const void *b)
{
    const seg_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Module holding address a (a return address minus 1), or -1. */
static int find_module(const snapshot *s, uintptr_t a)
{
    int lo = 0, hi = s->nsegs - 1, best = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (s->segs[mid].start <= a) { best = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    return best >= 0 && a < s->segs[best].end ? s->segs[best].mod : -1;
}

static int sym_cmp(const void *a, const void *b)
{
    const sym_t *x = a, *y = b;
    if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
    return (int)x->rank - (int)y->rank;
}

/* The GNU build id of an ELF file image, hex, "" if none. */
static void file_build_id(const unsigned char *f, size_t len, const ElfW(Ehdr) *eh, char *out, size_t outlen)
{
    out[0] = 0;
    if (eh->e_phoff == 0 || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
        eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(ElfW(Phdr)) > len) return;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(f + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_offset + ph[i].p_filesz > len) continue;
        if (tr_note_build_id(f + ph[i].p_offset, ph[i].p_filesz, out, outlen)) return;
    }
}

/* Reads the function symbols of file: .symtab, else (dynsym_too) .dynsym.
 * Returns 0 if the file is unreadable, not an ELF file with the build id
 * wanted, or has no such table. */
static int symfile_load(symfile *sf, const char *file, const char *want_build_id, int dynsym_too)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(ElfW(Ehdr))) {
        close(fd);
        return 0;
    }
    size_t len = (size_t)st.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return 0;
    const unsigned char *f = map;
    const ElfW(Ehdr) *eh = map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shoff == 0 ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)) > len)
        goto fail;
    if (want_build_id && *want_build_id) {
        char fid[81];
        file_build_id(f, len, eh, fid, sizeof fid);
        if (*fid && strcmp(fid, want_build_id) != 0) goto fail;   /* file replaced since */
    }
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(f + eh->e_shoff);
    const ElfW(Shdr) *tab = NULL;
    for (int pass = 0; pass < 1 + !!dynsym_too && !tab; pass++)
        for (int i = 0; i < eh->e_shnum; i++)
            if (sh[i].sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) && sh[i].sh_size > 0) {
                tab = &sh[i];
                break;
            }
    if (!tab || tab->sh_link >= eh->e_shnum || tab->sh_entsize != sizeof(ElfW(Sym)) ||
        tab->sh_offset + tab->sh_size > len)
        goto fail;
    const ElfW(Shdr) *strs = &sh[tab->sh_link];
    if (strs->sh_offset + strs->sh_size > len || strs->sh_size == 0) goto fail;
    const ElfW(Sym) *sym = (const ElfW(Sym) *)(f + tab->sh_offset);
    size_t nsym = tab->sh_size / sizeof *sym, n = 0;
    sym_t *out = malloc((nsym ? nsym : 1) * sizeof *out);
    if (!out) goto fail;
    for (size_t i = 0; i < nsym; i++) {
        int type = ELF64_ST_TYPE(sym[i].st_info), bind = ELF64_ST_BIND(sym[i].st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym[i].st_shndx == SHN_UNDEF ||
            sym[i].st_value == 0 || sym[i].st_name == 0 || sym[i].st_name >= strs->sh_size)
            continue;
        uint8_t rank = (sym[i].st_size ? 0 : 4) + (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2);
        out[n++] = (sym_t){sym[i].st_value, sym[i].st_size > UINT32_MAX ? UINT32_MAX : (uint32_t)sym[i].st_size,
                           sym[i].st_name, rank};
    }
    qsort(out, n, sizeof *out, sym_cmp);
    /* keep the preferred alias per address */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || out[m - 1].addr != out[i].addr) out[m++] = out[i];
    sf->map = map;
    sf->map_len = len;
    sf->strtab = (const char *)(f + strs->sh_offset);
    sf->strtab_len = strs->sh_size;
    sf->syms = out;
    sf->nsyms = m;
    return 1;
fail:
    munmap(map, len);
    return 0;
}

static symfile *symfile_get(const module_t *m, int is_exe)
{
    for (symfile *sf = g_symfiles; sf; sf = sf->next)
        if (sf->base == m->base && strcmp(sf->path, m->path) == 0) return sf;
    symfile *sf = calloc(1, sizeof *sf);
    if (!sf) return NULL;
    sf->path = strdup(m->path);
    sf->base = m->base;
    if (!sf->path) { free(sf); return NULL; }
    /* the main program through /proc/self/exe: works even if the file was
     * deleted or replaced since */
    const char *file = is_exe ? "/proc/self/exe" : m->path[0] == '/' ? m->path : NULL;
    if (file) sf->ok = symfile_load(sf, file, m->build_id, 0);
    if (!sf->ok && m->build_id[0]) {
        /* a stripped library: its separate debug file (Debian's *-dbg
         * packages, debuginfod caches laid out the same way) has .symtab */
        char dbg[256];
        snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id/%.2s/%s.debug", m->build_id, m->build_id + 2);
        sf->ok = symfile_load(sf, dbg, m->build_id, 0);
    }
    if (!sf->ok && file) sf->ok = symfile_load(sf, file, m->build_id, 1);
    sf->next = g_symfiles;
    g_symfiles = sf;
    return sf;
}

/* Name and start (module offset) of the function containing offset off. */
static const char *sym_lookup(const symfile *sf, uint64_t off, uint64_t *start)
{
    size_t lo = 0, hi = sf->nsyms;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sf->syms[mid].addr <= off) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return NULL;
    const sym_t *s = &sf->syms[lo - 1];
    if (s->size && off >= s->addr + s->size) return NULL;
    const char *name = sf->strtab + s->name;
    if (!memchr(name, 0, sf->strtab_len - s->name)) return NULL;
    *start = s->addr;
    return name;
}

/* What one return address resolves to. */
typedef struct {
    uintptr_t ip;
    int mod;
    const char *sym;             /* into a symfile, or into dladdr's strings */
    uint64_t sym_start;          /* absolute */
} ipinfo;

typedef struct {
    ipinfo *v;
    size_t cap, n;
} ipmap;

static ipinfo *ipmap_find(ipmap *m, uintptr_t ip, int *fresh)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 4096;
        ipinfo *v = calloc(cap, sizeof *v);
        if (!v) return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->v[i].ip) continue;
            size_t p = tr_fmix64(m->v[i].ip) & (cap - 1);
            while (v[p].ip) p = (p + 1) & (cap - 1);
            v[p] = m->v[i];
        }
        free(m->v);
        m->v = v;
        m->cap = cap;
    }
    size_t p = tr_fmix64(ip) & (m->cap - 1);
    while (m->v[p].ip && m->v[p].ip != ip) p = (p + 1) & (m->cap - 1);
    *fresh = !m->v[p].ip;
    if (*fresh) {
        m->v[p].ip = ip;
        m->n++;
    }
    return &m->v[p];
}

static void resolve(snapshot *s, ipinfo *r)
{
    uintptr_t a = r->ip - 1;     /* inside the call instruction */
    r->mod = find_module(s, a);
    r->sym = NULL;
    if (r->mod < 0) return;
    module_t *m = &s->mods[r->mod];
    if (m->out < 0) {
        m->out = s->nout;
        s->outmods[s->nout++] = r->mod;
    }
    if (!m->sf) m->sf = symfile_get(m, r->mod == 0);
    uint64_t start;
    if (m->sf && m->sf->ok) {
        const char *name = sym_lookup(m->sf, a - m->base, &start);
        if (name) {
            r->sym = name;
            r->sym_start = m->base + start;
        }
        return;
    }
    Dl_info di;
    if (dladdr((void *)a, &di) && di.dli_sname && di.dli_saddr) {
        r->sym = di.dli_sname;
        r->sym_start = (uintptr_t)di.dli_saddr;
    }
}

void tr_stack_write_json(tr_json *j)
{
    pthread_mutex_lock(&g_sym_mu);
    uint32_t n = tr_stack_count();
    snapshot s = {0};
    ipmap map = {0};
    int ok = 1;
    dl_iterate_phdr(snap_cb, &s);
    qsort(s.segs, s.nsegs, sizeof *s.segs, seg_cmp);
    s.outmods = malloc((s.nmods ? s.nmods : 1) * sizeof *s.outmods);
    if (!s.outmods) ok = 0;
    /* pass 1: resolve every distinct address, number the modules used */
    for (uint32_t i = 0; i < n && ok; i++) {
        const tr_stack_rec *r = tr_stack_rec_at(i);
        for (uint32_t f = 0; f < r->n && ok; f++) {
            int fresh;
            ipinfo *p = ipmap_find(&map, r->ip[f], &fresh);
            if (!p) ok = 0;
            else if (fresh) resolve(&s, p);
        }
    }
    trj_array_begin(j, "modules");
    for (int i = 0; i < s.nout && ok; i++) {
        const module_t *m = &s.mods[s.outmods[i]];
        trj_object_begin(j, NULL);
        trj_str(j, "path", m->path);
        trj_str(j, "build_id", m->build_id[0] ? m->build_id : NULL);
        trj_hex(j, "base", m->base);
        trj_object_end(j);
    }
    trj_array_end(j);
    trj_array_begin(j, "stacks");
    for (uint32_t i = 0; i < n; i++) {
        const tr_stack_rec *r = tr_stack_rec_at(i);
        trj_object_begin(j, NULL);
        trj_array_begin(j, "frames");
        for (uint32_t f = 0; f < r->n; f++) {
            int fresh;
            ipinfo *p = ok ? ipmap_find(&map, r->ip[f], &fresh) : NULL;
            trj_object_begin(j, NULL);
            if (p && p->mod >= 0) {
                const module_t *m = &s.mods[p->mod];
                trj_int(j, "module", m->out);
                trj_hex(j, "offset", r->ip[f] - m->base);
            } else {
                trj_int(j, "module", -1);
                trj_hex(j, "offset", r->ip[f]);
            }
            if (p && p->sym) {
                /* "name@@VERSION" in .symtab: the name */
                const char *at = strchr(p->sym, '@');
                char buf[512];
                if (at && at > p->sym && (size_t)(at - p->sym) < sizeof buf) {
                    memcpy(buf, p->sym, at - p->sym);
                    buf[at - p->sym] = 0;
                    trj_str(j, "symbol", buf);
                } else {
                    trj_str(j, "symbol", p->sym);
                }
                trj_int(j, "symbol_offset", (int64_t)(r->ip[f] - p->sym_start));
            } else {
                trj_null(j, "symbol");
                trj_null(j, "symbol_offset");
            }
            trj_object_end(j);
        }
        trj_array_end(j);
        trj_object_end(j);
    }
    trj_array_end(j);
    for (int i = 0; i < s.nmods; i++) free(s.mods[i].path);
    free(s.mods);
    free(s.segs);
    free(s.outmods);
    free(map.v);
    pthread_mutex_unlock(&g_sym_mu);
}

/* ---- one call site, as text (the watchdog's line) ------------------------------------ */

char *tr_symbols_site(int32_t stack, char *out, size_t cap)
{
    snprintf(out, cap, "an unknown call site");
    if (stack < 0 || (uint32_t)stack >= tr_stack_count()) return out;
    const tr_stack_rec *rec = tr_stack_rec_at((uint32_t)stack);
    if (!rec->n) return out;
    pthread_mutex_lock(&g_sym_mu);
    snapshot s = {0};
    dl_iterate_phdr(snap_cb, &s);
    qsort(s.segs, s.nsegs, sizeof *s.segs, seg_cmp);
    s.outmods = malloc((s.nmods ? s.nmods : 1) * sizeof *s.outmods);
    if (s.outmods) {
        ipinfo p = {.ip = rec->ip[0]};
        resolve(&s, &p);
        if (p.mod < 0) {
            snprintf(out, cap, "0x%llx", (unsigned long long)p.ip);
        } else {
            const module_t *m = &s.mods[p.mod];
            const char *base = strrchr(m->path, '/');
            base = base ? base + 1 : m->path;
            if (p.sym) {
                /* "name@@VERSION" in .symtab: the name */
                const char *at = strchr(p.sym, '@');
                int len = at && at > p.sym ? (int)(at - p.sym) : (int)strlen(p.sym);
                if (len > 200) len = 200;
                snprintf(out, cap, "%.*s+0x%llx (%s)", len, p.sym, (unsigned long long)(p.ip - p.sym_start), base);
            } else {
                snprintf(out, cap, "0x%llx (%s)", (unsigned long long)(p.ip - m->base), base);
            }
        }
    }
    for (int i = 0; i < s.nmods; i++) free(s.mods[i].path);
    free(s.mods);
    free(s.segs);
    free(s.outmods);
    pthread_mutex_unlock(&g_sym_mu);
    return out;
}
