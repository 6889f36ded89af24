/* The ring file's blob area (tr_ring.h): modules, native and Python
 * stacks, Python code objects and any other blob, appended under one lock
 * in the order the format promises (a module before the first stack that
 * needs it, a code object before the first Python stack that uses it). The
 * area is backed on disk BLOB_GROW at a time as it fills; when that fails
 * (or the area is full) every later blob is dropped and counted. */
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_core.h"
#include "tr_ring_int.h"

#define BLOB_GROW (64ull << 10)             /* blob area backed on disk in these steps */

/* appended under g_blob_mu */
static pthread_mutex_t g_blob_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_blob_end;                 /* bytes used */
static uint64_t g_blob_disk;                /* bytes backed on disk (or that need no backing) */
static int g_blob_full;                     /* no more room: every later stack is dropped */
typedef struct { uint64_t lo, hi; } mod_range;
static mod_range *g_mods;                   /* modules stored, by [lo, hi) */
static uint32_t g_nmods, g_capmods;

/* ---- the area ------------------------------------------------------------------------ */

/* Room for a blob of payload bytes (g_blob_mu held): its header, or NULL
 * when the area is full (or cannot grow on disk). */
static trr_blob *blob_reserve(size_t payload)
{
    const tr_blob_area *a = tr_ring_blob_area();
    uint64_t need = sizeof(trr_blob) + ((payload + 7) & ~(size_t)7);
    if (g_blob_full || g_blob_end + need > a->bytes) {
        g_blob_full = 1;
        return NULL;
    }
    if (g_blob_end + need > g_blob_disk) {
        uint64_t want = (g_blob_end + need + BLOB_GROW - 1) / BLOB_GROW * BLOB_GROW;
        if (want > a->bytes) want = a->bytes;
        int e = tr_ring_back_file(a->hdr->off_blobs + g_blob_disk, want - g_blob_disk);
        if (e) {
            /* a store into a hole of a full disk would be SIGBUS: stop here */
            int full = tr_ring_folder_full(e);
            if (full == 1)
                tr_warn("the trace folder %s is full (%s): the ring file's stack area cannot grow: later stacks are "
                        "not kept in it (a trace that cannot be written leaves a .write-failed marker)",
                        tr_dir_path(), strerror(e));
            else if (full < 0)
                tr_warn("the ring file's stack area cannot grow (%s): later stacks are not kept in it", strerror(e));
            g_blob_full = 1;
            return NULL;
        }
        g_blob_disk = want;
    }
    trr_blob *b = (trr_blob *)(a->base + g_blob_end);
    b->bytes = (uint32_t)(need - sizeof(trr_blob));
    return b;
}

static void blob_commit(trr_blob *b, uint32_t kind)
{
    __atomic_store_n(&b->kind, kind, __ATOMIC_RELEASE);
    g_blob_end += sizeof *b + b->bytes;
    __atomic_store_n(&tr_ring_blob_area()->hdr->blob_used, g_blob_end, __ATOMIC_RELEASE);
}

/* ---- stacks and modules ------------------------------------------------------------ */

static int module_known(uint64_t a)
{
    for (uint32_t m = 0; m < g_nmods; m++)
        if (a >= g_mods[m].lo && a < g_mods[m].hi) return 1;
    return 0;
}

/* A module an address of a new stack falls in, found outside every lock. */
typedef struct {
    uint64_t base, lo, hi;
    char build_id[sizeof ((trr_module *)0)->build_id];
    char *path;
} found_mod;

typedef struct {
    const uint64_t *want;       /* addresses in no stored module */
    uint32_t nwant;
    found_mod *mods;
    uint32_t nmods;
    int first;                  /* the next module reported is the first (the main program) */
} find_ctx;

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    find_ctx *x = data;
    int first = x->first;
    x->first = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo) lo = a;
        if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
    if (lo >= hi) return 0;
    int hit = 0;
    for (uint32_t k = 0; k < x->nwant && !hit; k++) hit = x->want[k] >= lo && x->want[k] < hi;
    if (!hit || x->nmods >= x->nwant) return 0;
    found_mod *m = &x->mods[x->nmods];
    char exe[4096];
    m->path = strdup(tr_module_path(info, first, exe, sizeof exe));
    if (!m->path) return 0;
    m->base = info->dlpi_addr;
    m->lo = lo;
    m->hi = hi;
    tr_module_build_id(info, m->build_id, sizeof m->build_id);
    x->nmods++;
    return x->nmods == x->nwant;     /* every address placed: stop (at most one module each) */
}

static void store_module(const found_mod *f)
{
    if (module_known(f->lo)) return;          /* another thread stored it meanwhile */
    if (g_nmods == g_capmods) {
        uint32_t cap = g_capmods ? 2 * g_capmods : 64;
        mod_range *grown = realloc(g_mods, cap * sizeof *grown);
        if (!grown) return;
        g_mods = grown;
        g_capmods = cap;
    }
    size_t plen = strlen(f->path) + 1;
    trr_blob *b = blob_reserve(sizeof(trr_module) + plen);
    if (!b) return;
    trr_module *m = (trr_module *)(b + 1);
    m->index = g_nmods;
    m->path_len = (uint32_t)plen;
    m->base = f->base;
    m->lo = f->lo;
    m->hi = f->hi;
    memcpy(m->build_id, f->build_id, sizeof m->build_id);
    memcpy(m + 1, f->path, plen);
    blob_commit(b, TRR_BLOB_MODULE);
    g_mods[g_nmods++] = (mod_range){f->lo, f->hi};
}

void tr_ring_add_stack(uint32_t idx, const uintptr_t *ip, uint32_t n)
{
    if (!tr_ring_blob_area()) return;
    uint64_t *want = malloc((n ? n : 1) * sizeof *want);
    found_mod *found = malloc((n ? n : 1) * sizeof *found);
    find_ctx x = {.want = want, .mods = found, .first = 1};
    if (!want || !found) goto drop;
    /* addresses in modules not stored yet; the modules themselves are looked
     * up without our lock held (dl_iterate_phdr takes the loader's) */
    pthread_mutex_lock(&g_blob_mu);
    for (uint32_t f = 0; f < n; f++) {
        int dup = 0;
        for (uint32_t k = 0; k < x.nwant && !dup; k++) dup = want[k] == ip[f];
        if (!dup && !module_known(ip[f])) want[x.nwant++] = ip[f];
    }
    int full = g_blob_full;
    pthread_mutex_unlock(&g_blob_mu);
    if (full) goto drop;
    if (x.nwant) dl_iterate_phdr(find_cb, &x);

    pthread_mutex_lock(&g_blob_mu);
    for (uint32_t m = 0; m < x.nmods; m++) store_module(&found[m]);
    trr_blob *b = blob_reserve(sizeof(trr_stack) + (size_t)n * sizeof(uint64_t));
    if (b) {
        trr_stack *s = (trr_stack *)(b + 1);
        s->index = idx;
        s->n = n;
        uint64_t *out = (uint64_t *)(s + 1);
        for (uint32_t f = 0; f < n; f++) out[f] = ip[f];
        blob_commit(b, TRR_BLOB_STACK);
    }
    pthread_mutex_unlock(&g_blob_mu);
    for (uint32_t m = 0; m < x.nmods; m++) free(found[m].path);
    free(want);
    free(found);
    if (b) return;
    __atomic_fetch_add(&tr_ring_blob_area()->hdr->stacks_dropped, 1, __ATOMIC_RELAXED);
    return;
drop:
    free(want);
    free(found);
    __atomic_fetch_add(&tr_ring_blob_area()->hdr->stacks_dropped, 1, __ATOMIC_RELAXED);
}

/* ---- blobs: Python code objects and stacks ------------------------------------------ */

int tr_ring_add_pycode(uint32_t idx, int32_t firstlineno, const char *file, const char *qualname)
{
    if (!tr_ring_blob_area()) return 0;
    size_t flen = strlen(file) + 1, nlen = strlen(qualname) + 1;
    pthread_mutex_lock(&g_blob_mu);
    trr_blob *b = blob_reserve(sizeof(trr_pycode) + flen + nlen);
    if (b) {
        trr_pycode *c = (trr_pycode *)(b + 1);
        c->index = idx;
        c->firstlineno = firstlineno;
        c->file_len = (uint32_t)flen;
        c->name_len = (uint32_t)nlen;
        memcpy((char *)(c + 1), file, flen);
        memcpy((char *)(c + 1) + flen, qualname, nlen);
        blob_commit(b, TRR_BLOB_PYCODE);
    }
    pthread_mutex_unlock(&g_blob_mu);
    return b != NULL;
}

int tr_ring_add_pystack(uint32_t idx, const trr_pyframe *frames, uint32_t n)
{
    if (!tr_ring_blob_area()) return 0;
    pthread_mutex_lock(&g_blob_mu);
    trr_blob *b = blob_reserve(sizeof(trr_pystack) + (size_t)n * sizeof(trr_pyframe));
    if (b) {
        trr_pystack *s = (trr_pystack *)(b + 1);
        s->index = idx;
        s->n = n;
        memcpy(s + 1, frames, (size_t)n * sizeof(trr_pyframe));
        blob_commit(b, TRR_BLOB_PYSTACK);
    }
    pthread_mutex_unlock(&g_blob_mu);
    if (!b) tr_ring_stack_dropped();
    return b != NULL;
}

int tr_ring_add_blob(uint32_t kind, const void *head, size_t head_len, const void *tail, size_t tail_len)
{
    if (!tr_ring_blob_area()) return 0;
    pthread_mutex_lock(&g_blob_mu);
    trr_blob *b = blob_reserve(head_len + tail_len);
    if (b) {
        memcpy(b + 1, head, head_len);
        if (tail_len) memcpy((char *)(b + 1) + head_len, tail, tail_len);
        blob_commit(b, kind);
    }
    pthread_mutex_unlock(&g_blob_mu);
    return b != NULL;
}

void tr_ring_stack_dropped(void)
{
    const tr_blob_area *a = tr_ring_blob_area();
    if (a) __atomic_fetch_add(&a->hdr->stacks_dropped, 1, __ATOMIC_RELAXED);
}

void *tr_ring_reserve_blob(uint32_t kind, size_t bytes)
{
    if (!tr_ring_blob_area()) return NULL;
    pthread_mutex_lock(&g_blob_mu);
    trr_blob *b = blob_reserve(bytes);
    if (b) {
        memset(b + 1, 0, b->bytes);
        blob_commit(b, kind);
    }
    pthread_mutex_unlock(&g_blob_mu);
    return b ? (void *)(b + 1) : NULL;
}
