/* The ring file (tr_ring.h): one MAP_SHARED mapping per process holding the
 * header, the communicator slots, the record slots and the blobs (stacks,
 * modules), laid out as include/trshim/ring_format.h says.
 *
 * Opened once, at activation, on the thread of the first recorded call
 * (the only file work an application thread does for the shim). The file
 * is made sparse by ftruncate, then header, comm slots and record slots are
 * allocated on disk (posix_fallocate) so that no store into the mapping on a
 * hot path has to allocate a block, and a full disk cannot turn such a store
 * into SIGBUS. The blob area grows on disk 1 MiB at a time as stacks arrive
 * (a stack seen for the first time costs a full unwind anyway). The file is
 * created exclusively, mode 0600, in the checked trace folder (tr_files.c),
 * and made no larger than the file-size limit allows (fit_limit). When the
 * file cannot be had, the same layout lives in anonymous memory: the JSON
 * traces work as before, only a SIGKILL loses them.
 *
 * Records: the writer takes an index with one atomic add on the header's
 * head, clears the slot's stamp, fills the slot and stores stamp = index + 1
 * (release); a reader trusts a slot only when its stamp is the index it
 * expects there, before and after copying it. */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tr_core.h"
#include "tr_ring.h"
#include "tr_symbols.h"
#include "trshim/trace_format.h"

#define RING_MAX_COMMS 1024
#define RING_FP_INTERVAL 64                 /* a power of two (tr_nccl.c masks with it) */
#define RING_BLOB_BYTES (32ull << 20)
#define BLOB_GROW (1ull << 20)              /* blob area allocated on disk in these steps */

_Static_assert((RING_FP_INTERVAL & (RING_FP_INTERVAL - 1)) == 0, "fp interval is a power of two");

static trr_header *g_hdr;                   /* NULL: no ring */
static char *g_comm_area;                  /* comm slots */
static trr_record *g_rec;
static char *g_blobs;
static uint64_t g_cap, g_mask;              /* g_mask: capacity - 1 when a power of two, else 0 */
static char g_path[2400];                   /* "" when in anonymous memory */
static int g_fd = -1;                       /* the file, for growing the blob area */
static uint32_t g_max_comms = RING_MAX_COMMS; /* comm slots (fewer under a file-size limit) */
static uint64_t g_blob_bytes = RING_BLOB_BYTES; /* blob area (smaller under a file-size limit) */

/* blobs: appended under g_blob_mu */
static pthread_mutex_t g_blob_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_blob_end;                 /* bytes used */
static uint64_t g_blob_disk;                /* bytes allocated on disk (file only) */
static int g_blob_full;                     /* no more room: every later stack is dropped */
typedef struct { uint64_t lo, hi; } mod_range;
static mod_range *g_mods;                   /* modules stored, by [lo, hi) */
static uint32_t g_nmods, g_capmods;

/* ---- small helpers ------------------------------------------------------------ */

static inline trr_record *slot_of(uint64_t i)
{
    return &g_rec[g_mask ? (i & g_mask) : i % g_cap];
}

/* src cut to the field (cap - 1 bytes and its NUL) */
static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%.*s", (int)(cap - 1), src ? src : "");
}

/* ---- opening -------------------------------------------------------------------- */

/* The file: created in the trace folder dfd (tr_dir_open) under name (and
 * g_path), sized, its fixed part allocated on disk, mapped. Returns the
 * mapping, or NULL with *why set (errno kept).
 *
 * The name is trshim.<host>.<pid>.ring. A file of that name that is this
 * user's own regular file is an older process's (pid reused): it is
 * replaced, not truncated, so that a reader holding it keeps what it read.
 * Anything else there (another user's file, a link) is left alone and the
 * ring takes the name trshim.<host>.<pid>.<8 random characters>.ring
 * instead (still trshim.*.ring for tranalyze, which pairs a ring with its
 * traces by the host, pid and start time in its header), with one line. */
static void *map_file(int dfd, char *name, size_t cap, uint64_t bytes, uint64_t fixed, const char **why)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
        unlinkat(dfd, name, 0);
    *why = "cannot create";
    int fd = tr_create_at(dfd, name, O_RDWR);
    if (fd < 0 && errno == EEXIST) {
        char prefix[600], other[600];
        /* trshim.<host>.<pid>.ring -> trshim.<host>.<pid>. */
        snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(name) - strlen(TRSHIM_RING_SUFFIX) + 1), name);
        fd = tr_create_unique(dfd, prefix, TRSHIM_RING_SUFFIX, other, sizeof other, O_RDWR);
        if (fd >= 0) {
            tr_warn("%s is taken by a file this process did not make: its ring file is %s/%s", g_path,
                    tr_dir_path(), other);
            snprintf(g_path, sizeof g_path, "%s/%s", tr_dir_path(), other);
            snprintf(name, cap, "%s", other);
        }
    }
    if (fd < 0) return NULL;
    /* bytes fits the file-size limit (tr_ring_open): neither call below
     * can raise SIGXFSZ */
    *why = "cannot size";
    if (ftruncate(fd, (off_t)bytes) != 0) goto fail;
    int e = posix_fallocate(fd, 0, (off_t)fixed);
    if (e != 0 && e != EOPNOTSUPP && e != EINVAL) {
        errno = e;
        *why = "cannot allocate";
        goto fail;
    }
    *why = "cannot map";
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) goto fail;
    g_fd = fd;
    g_blob_disk = e == 0 ? 0 : UINT64_MAX;   /* not supported: never asked again */
    return m;
fail:;
    int saved = errno;
    close(fd);
    unlinkat(dfd, name, 0);
    errno = saved;
    return NULL;
}

/* The smallest ring file kept under a file-size limit: below it, none. */
#define RING_MIN_COMMS 8
#define RING_MIN_RECORDS 64
#define RING_MIN_BLOBS (64u << 10)

/* Sizes the areas (record slots *cap, *comms slots, *blob bytes) so that the
 * file fits limit: the largest area is halved until it does (the blob area
 * goes to 0 below RING_MIN_BLOBS). 0, or -1 when even the smallest ring
 * does not fit. */
static int fit_limit(uint64_t limit, uint64_t *cap, uint64_t *comms, uint64_t *blob)
{
    for (;;) {
        uint64_t rec = *cap * TRR_RECORD_BYTES, com = *comms * TRR_COMM_BYTES;
        if (TRR_HEADER_BYTES + com + rec + *blob <= limit) return 0;
        if (*blob && *blob >= rec && *blob >= com) *blob = *blob / 2 >= RING_MIN_BLOBS ? *blob / 2 : 0;
        else if (*cap > RING_MIN_RECORDS && rec >= com) *cap = *cap / 2 > RING_MIN_RECORDS ? *cap / 2 : RING_MIN_RECORDS;
        else if (*comms > RING_MIN_COMMS) *comms = *comms / 2 > RING_MIN_COMMS ? *comms / 2 : RING_MIN_COMMS;
        else if (*cap > RING_MIN_RECORDS) *cap = *cap / 2 > RING_MIN_RECORDS ? *cap / 2 : RING_MIN_RECORDS;
        else if (*blob) *blob = 0;
        else return -1;
    }
}

int tr_ring_open(void)
{
    if (g_hdr) return 0;
    const tr_settings *cfg = tr_cfg();
    const tr_process *proc = tr_proc();
    uint64_t cap = cfg->ring ? cfg->ring : 131072;
    uint64_t comms = RING_MAX_COMMS, blob = RING_BLOB_BYTES;
    char host[256], host_clean[256], name[600];
    tr_host_name(host, sizeof host);
    tr_clean_name(host_clean, sizeof host_clean, host, sizeof host_clean, 1);    /* as the traces' names have it */
    snprintf(name, sizeof name, TRSHIM_TRACE_PREFIX "%s.%d" TRSHIM_RING_SUFFIX, host_clean, (int)getpid());
    snprintf(g_path, sizeof g_path, "%s/%s", tr_dir_path(), name);
    /* the trace folder, checked here once at activation: when refused (one
     * line, from tr_dir_open), no file at all */
    const char *why = NULL;
    int dfd = tr_dir_open(&why);
    int dir_errno = errno;
    int file_ok = !tr_dir_refused();
    /* RLIMIT_FSIZE (ulimit -f): a file past it would kill the process with
     * SIGXFSZ at ftruncate; the file is made smaller instead, or not at all */
    uint64_t limit = tr_fsize_limit();
    if (limit != UINT64_MAX && file_ok) {
        uint64_t c = cap, k = comms, b = blob;
        if (fit_limit(limit, &c, &k, &b) != 0) {
            file_ok = 0;
            tr_warn("the file-size limit (ulimit -f: %llu bytes) is too small for a ring file: records are kept in "
                    "memory only, lost if the process is killed",
                    (unsigned long long)limit);
        } else if (c != cap || k != comms || b != blob) {
            tr_warn("the file-size limit (ulimit -f: %llu bytes) makes the ring file smaller: %llu calls, %llu "
                    "communicators, %llu bytes of stacks",
                    (unsigned long long)limit, (unsigned long long)c, (unsigned long long)k,
                    (unsigned long long)b);
            cap = c;
            comms = k;
            blob = b;
        }
    }
    uint64_t off_comms = TRR_HEADER_BYTES;
    uint64_t off_records = off_comms + comms * TRR_COMM_BYTES;
    uint64_t off_blobs = off_records + cap * TRR_RECORD_BYTES;
    uint64_t bytes = off_blobs + blob;

    char *base = NULL;
    if (file_ok) {
        if (dfd >= 0) base = map_file(dfd, name, sizeof name, bytes, off_blobs, &why);
        else errno = dir_errno;
        if (!base)
            tr_warn("cannot keep the ring file %s (%s: %s): records are kept in memory only, lost if the "
                    "process is killed",
                    g_path, why, strerror(errno));
    }
    if (dfd >= 0) close(dfd);
    if (!base) {
        g_path[0] = 0;
        base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) {
            tr_warn("cannot map %llu bytes for the call records: no records are kept",
                    (unsigned long long)bytes);
            return -1;
        }
    }
    g_max_comms = (uint32_t)comms;
    g_blob_bytes = blob;
    trr_header *h = (trr_header *)base;
    h->version = TRSHIM_RING_VERSION;
    h->header_bytes = TRR_HEADER_BYTES;
    h->record_bytes = TRR_RECORD_BYTES;
    h->comm_bytes = TRR_COMM_BYTES;
    h->capacity = cap;
    h->max_comms = (uint32_t)comms;
    h->fp_interval = RING_FP_INTERVAL;
    h->off_comms = off_comms;
    h->off_records = off_records;
    h->off_blobs = off_blobs;
    h->blob_bytes = blob;
    h->file_bytes = bytes;
    h->pid = (int32_t)getpid();
    h->env_rank = proc->env_rank;
    h->world_size = proc->world_size;
    h->local_rank = proc->local_rank;
    h->start_realtime = proc->start_realtime;
    h->start_mono_ns = proc->start_mono_ns;
    copy_str(h->host, sizeof h->host, host);
    copy_str(h->job_id, sizeof h->job_id, proc->job_id);
    copy_str(h->job_source, sizeof h->job_source, proc->job_source);
    copy_str(h->rank_source, sizeof h->rank_source, proc->env_rank_source);
    copy_str(h->trshim_version, sizeof h->trshim_version, TR_VERSION);
    h->stack_depth = (uint32_t)(cfg->stack_depth > 0 ? cfg->stack_depth : 0);
    h->state = TRR_RUNNING;
    h->heartbeat_ns = tr_now_ns();
    /* magic last: a reader that sees it sees the header complete */
    atomic_thread_fence(memory_order_release);
    memcpy(h->magic, TRSHIM_RING_MAGIC, sizeof h->magic);

    g_comm_area = base + off_comms;
    g_rec = (trr_record *)(base + off_records);
    g_blobs = base + off_blobs;
    g_cap = cap;
    g_mask = (cap & (cap - 1)) == 0 ? cap - 1 : 0;
    atomic_thread_fence(memory_order_release);
    g_hdr = h;
    return 0;
}

const char *tr_ring_path(void) { return g_hdr && g_path[0] ? g_path : NULL; }
uint64_t tr_ring_capacity(void) { return g_hdr ? g_cap : 0; }

uint64_t tr_ring_head(void)
{
    return g_hdr ? __atomic_load_n(&g_hdr->head, __ATOMIC_ACQUIRE) : 0;
}

/* ---- records ------------------------------------------------------------------------ */

trr_record *tr_ring_alloc(uint64_t *index)
{
    trr_header *h = g_hdr;
    if (!h) return NULL;
    uint64_t i = __atomic_fetch_add(&h->head, 1, __ATOMIC_RELAXED);
    *index = i;
    trr_record *r = slot_of(i);
    __atomic_store_n(&r->stamp, 0, __ATOMIC_RELAXED);
    /* the cleared stamp is visible before any field changes (a reader of the
     * older record there sees it torn, never mixed) */
    atomic_thread_fence(memory_order_release);
    memset((char *)r + sizeof r->stamp, 0, sizeof *r - sizeof r->stamp);
    return r;
}

void tr_ring_commit(trr_record *r, uint64_t index)
{
    __atomic_store_n(&r->stamp, index + 1, __ATOMIC_RELEASE);
}

trr_record *tr_ring_get(uint64_t index)
{
    if (!g_hdr) return NULL;
    trr_record *r = slot_of(index);
    return __atomic_load_n(&r->stamp, __ATOMIC_ACQUIRE) == index + 1 ? r : NULL;
}

int tr_ring_read(uint64_t index, trr_record *out)
{
    if (!g_hdr) return 0;
    trr_record *r = slot_of(index);
    if (__atomic_load_n(&r->stamp, __ATOMIC_ACQUIRE) != index + 1) return 0;
    /* word by word, in order, each an acquire load: state before the return
     * fields, gpu before done_ns, as the writer stores them in reverse */
    const uint64_t *src = (const uint64_t *)r;
    uint64_t *dst = (uint64_t *)out;
    for (size_t k = 0; k < sizeof *r / 8; k++) dst[k] = __atomic_load_n(&src[k], __ATOMIC_ACQUIRE);
    atomic_thread_fence(memory_order_acquire);
    return __atomic_load_n(&r->stamp, __ATOMIC_RELAXED) == index + 1 && out->stamp == index + 1;
}

/* ---- communicators ------------------------------------------------------------------ */

/* slots are TRR_COMM_BYTES apart, more than sizeof(trr_comm) */
static inline trr_comm *comm_slot(int32_t slot)
{
    return (trr_comm *)(g_comm_area + (size_t)slot * TRR_COMM_BYTES);
}

static trr_comm *comm_init_slot(int32_t slot)
{
    trr_comm *k = comm_slot(slot);
    memset(k, 0, sizeof *k);
    k->parent = -1;
    k->init_stack = -1;
    k->size = k->rank = k->device = -1;
    k->fp_step = RING_FP_INTERVAL;
    return k;
}

trr_comm *tr_ring_comm_new(int32_t *slot)
{
    *slot = -1;
    if (!g_hdr) return NULL;
    uint32_t n = __atomic_fetch_add(&g_hdr->ncomms, 1, __ATOMIC_RELAXED);
    if (n >= g_max_comms) {
        __atomic_store_n(&g_hdr->ncomms, g_max_comms, __ATOMIC_RELAXED);
        __atomic_fetch_add(&g_hdr->comms_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    *slot = (int32_t)n;
    return comm_init_slot((int32_t)n);
}

trr_comm *tr_ring_comm_claim(int32_t slot)
{
    if (!g_hdr || slot < 0) return NULL;
    if ((uint32_t)slot >= g_max_comms) {
        __atomic_fetch_add(&g_hdr->comms_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    uint32_t n = __atomic_load_n(&g_hdr->ncomms, __ATOMIC_RELAXED);
    while (n < (uint32_t)slot + 1 &&
           !__atomic_compare_exchange_n(&g_hdr->ncomms, &n, (uint32_t)slot + 1, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
    return comm_init_slot(slot);
}

trr_comm *tr_ring_comm_at(int32_t slot)
{
    if (!g_hdr || slot < 0 || (uint32_t)slot >= g_max_comms ||
        (uint32_t)slot >= __atomic_load_n(&g_hdr->ncomms, __ATOMIC_ACQUIRE))
        return NULL;
    return comm_slot(slot);
}

uint32_t tr_ring_fp_interval(void) { return RING_FP_INTERVAL; }

/* ---- blobs: stacks and modules ------------------------------------------------------ */

/* Room for a blob of payload bytes (g_blob_mu held): its header, or NULL
 * when the area is full (or cannot grow on disk). */
static trr_blob *blob_reserve(size_t payload)
{
    uint64_t need = sizeof(trr_blob) + ((payload + 7) & ~(size_t)7);
    if (g_blob_full || g_blob_end + need > g_blob_bytes) {
        g_blob_full = 1;
        return NULL;
    }
    if (g_fd >= 0 && g_blob_disk != UINT64_MAX && g_blob_end + need > g_blob_disk) {
        uint64_t want = (g_blob_end + need + BLOB_GROW - 1) / BLOB_GROW * BLOB_GROW;
        if (want > g_blob_bytes) want = g_blob_bytes;
        /* within the file's size, but a file-size limit lowered since the
         * file was made would turn glibc's emulation of fallocate (a write
         * per block, where the file system has none) into SIGXFSZ */
        if (g_hdr->off_blobs + want > tr_fsize_limit()) {
            tr_warn("the file-size limit (ulimit -f) was lowered below the ring file's size: later stacks are "
                    "not kept in it");
            g_blob_full = 1;
            return NULL;
        }
        int e = posix_fallocate(g_fd, (off_t)(g_hdr->off_blobs + g_blob_disk), (off_t)(want - g_blob_disk));
        if (e == EOPNOTSUPP || e == EINVAL) {
            g_blob_disk = UINT64_MAX;
        } else if (e != 0) {
            /* a store into a hole of a full disk would be SIGBUS: stop here */
            tr_warn("the ring file's stack area cannot grow (%s): later stacks are not kept in it", strerror(e));
            g_blob_full = 1;
            return NULL;
        } else {
            g_blob_disk = want;
        }
    }
    trr_blob *b = (trr_blob *)(g_blobs + g_blob_end);
    b->bytes = (uint32_t)(need - sizeof(trr_blob));
    return b;
}

static void blob_commit(trr_blob *b, uint32_t kind)
{
    __atomic_store_n(&b->kind, kind, __ATOMIC_RELEASE);
    g_blob_end += sizeof *b + b->bytes;
    __atomic_store_n(&g_hdr->blob_used, g_blob_end, __ATOMIC_RELEASE);
}

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
    if (!g_hdr) return;
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
    __atomic_fetch_add(&g_hdr->stacks_dropped, 1, __ATOMIC_RELAXED);
    return;
drop:
    free(want);
    free(found);
    __atomic_fetch_add(&g_hdr->stacks_dropped, 1, __ATOMIC_RELAXED);
}

/* ---- blobs: Python code objects and stacks ------------------------------------------ */

int tr_ring_add_pycode(uint32_t idx, int32_t firstlineno, const char *file, const char *qualname)
{
    if (!g_hdr) return 0;
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
    if (!g_hdr) return 0;
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
    if (!g_hdr) return 0;
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
    if (g_hdr) __atomic_fetch_add(&g_hdr->stacks_dropped, 1, __ATOMIC_RELAXED);
}

/* ---- process state -------------------------------------------------------------------- */

void tr_ring_set_state(int state, int signo)
{
    trr_header *h = g_hdr;
    if (!h) return;
    if (state == TRR_EXITED || state == TRR_SIGNALED) __atomic_store_n(&h->end_ns, tr_now_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&h->signo, signo, __ATOMIC_RELAXED);
    __atomic_store_n(&h->state, state, __ATOMIC_RELEASE);
}

void tr_ring_heartbeat(void)
{
    if (g_hdr) __atomic_store_n(&g_hdr->heartbeat_ns, tr_now_ns(), __ATOMIC_RELEASE);
}

void tr_ring_count_write(void)
{
    if (g_hdr) __atomic_fetch_add(&g_hdr->writes, 1, __ATOMIC_RELEASE);
}
