/* The ring file (tr_ring.h): one MAP_SHARED mapping per process holding the
 * header, the communicator slots, the record slots and the blobs (stacks,
 * modules), laid out as include/trshim/ring_format.h says.
 *
 * Opened once, at activation, on the thread of the first recorded call
 * (the only file work an application thread does for the shim). The file
 * is made sparse by ftruncate at its full size, and each area is backed on
 * disk (posix_fallocate) as it fills, so a typical rank's file takes a few
 * hundred KiB of disk however large the ring is, and no store into the
 * mapping ever lands in a hole: on a full disk such a store would be
 * SIGBUS in the application. Record slots are backed REC_STEP at a time,
 * ahead of use by the completion poller (tr_ring_grow_ahead), by the
 * recording thread itself only when a burst outruns it; communicator slots
 * COMM_STEP at a time at creation; the blob area as stacks arrive
 * (tr_ring_blobs.c). When the disk cannot back more, the rest of the record or
 * communicator area is replaced by anonymous memory (one line): the
 * traces keep everything, a SIGKILL loses what the file could not hold.
 * The file is created exclusively, mode 0600, in the checked trace folder
 * (tr_files.c), and made no larger than the file-size limit allows
 * (fit_limit). When the file cannot be had, the same layout lives in
 * anonymous memory: the JSON traces work as before, only a SIGKILL loses
 * them. A clean exit that wrote every trace removes the file
 * (tr_ring_retire; TRSHIM_KEEP_RING=1 keeps it).
 *
 * Records: the writer takes an index with one atomic add on the header's
 * head, clears the slot's stamp, fills the slot and stores stamp = index + 1
 * (release); a reader trusts a slot only when its stamp is the index it
 * expects there, before and after copying it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tr_core.h"
#include "tr_ring_int.h"
#include "trshim/trace_format.h"

#define RING_MAX_COMMS 1024
#define RING_FP_INTERVAL 64                 /* a power of two (tr_nccl.c masks with it) */
#define RING_BLOB_BYTES (32ull << 20)
#define PAGE_BYTES 4096ull                  /* areas start on a page: one can become anonymous memory */
#define REC_STEP 2048ull                    /* record slots backed on disk at a time (256 KiB) */
#define COMM_STEP 16u                       /* communicator slots backed at a time (16 KiB) */

_Static_assert((RING_FP_INTERVAL & (RING_FP_INTERVAL - 1)) == 0, "fp interval is a power of two");

static trr_header *g_hdr;                   /* NULL: no ring */
static char *g_comm_area;                  /* comm slots */
static trr_record *g_rec;
static tr_blob_area g_blob_area;
static uint64_t g_cap, g_mask;              /* g_mask: capacity - 1 when a power of two, else 0 */
static char g_path[2400];                   /* "" when in anonymous memory */
static char g_name[600];                    /* its name in the trace folder */
static char g_name_job[64];                 /* the job part of g_name ("" once it cannot change) */
static int g_fd = -1;                       /* the file, for backing areas as they fill */
static int g_no_fallocate;                  /* the file system has none: holes are its business (atomic) */

/* record and comm slots backed (file) or in memory: below these a store
 * cannot fault. g_rec_backed is UINT64_MAX once every slot is. Raised
 * under g_back_mu. */
static pthread_mutex_t g_back_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_rec_backed;
static uint32_t g_comm_backed;
static uint32_t g_max_comms = RING_MAX_COMMS; /* comm slots (fewer under a file-size limit) */


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
 * The name is trshim.<job>.<host>.<pid>.ring. A file of that name that is this
 * user's own regular file is an older process's (pid reused): it is
 * replaced, not truncated, so that a reader holding it keeps what it read.
 * Anything else there (another user's file, a link) is left alone and the
 * ring takes the name trshim.<job>.<host>.<pid>.<8 random characters>.ring
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
        /* trshim.<job>.<host>.<pid>.ring -> trshim.<job>.<host>.<pid>. */
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
    g_no_fallocate = e != 0;     /* not supported: never asked again */
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
static uint64_t page_up(uint64_t n) { return (n + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES; }

/* The areas' offsets for cap records and comms slots, each on a page; the
 * file's size with blob bytes of blobs. */
static uint64_t layout(uint64_t cap, uint64_t comms, uint64_t blob, uint64_t *off_records, uint64_t *off_blobs)
{
    *off_records = page_up(TRR_HEADER_BYTES + comms * TRR_COMM_BYTES);
    *off_blobs = page_up(*off_records + cap * TRR_RECORD_BYTES);
    return *off_blobs + blob;
}

static int fit_limit(uint64_t limit, uint64_t *cap, uint64_t *comms, uint64_t *blob)
{
    for (;;) {
        uint64_t rec = *cap * TRR_RECORD_BYTES, com = *comms * TRR_COMM_BYTES, o1, o2;
        if (layout(*cap, *comms, *blob, &o1, &o2) <= limit) return 0;
        if (*blob && *blob >= rec && *blob >= com) *blob = *blob / 2 >= RING_MIN_BLOBS ? *blob / 2 : 0;
        else if (*cap > RING_MIN_RECORDS && rec >= com) *cap = *cap / 2 > RING_MIN_RECORDS ? *cap / 2 : RING_MIN_RECORDS;
        else if (*comms > RING_MIN_COMMS) *comms = *comms / 2 > RING_MIN_COMMS ? *comms / 2 : RING_MIN_COMMS;
        else if (*cap > RING_MIN_RECORDS) *cap = *cap / 2 > RING_MIN_RECORDS ? *cap / 2 : RING_MIN_RECORDS;
        else if (*blob) *blob = 0;
        else return -1;
    }
}

/* Backs [off, off + len) of the file on disk: 0 (also when the file
 * system cannot: g_no_fallocate), or the error. The range is within the
 * file's size, but a file-size limit lowered since the file was made
 * would turn glibc's emulation of fallocate (a write per block, where the
 * file system has none) into SIGXFSZ: EFBIG instead. */
static int back_file(uint64_t off, uint64_t len)
{
    if (g_fd < 0 || __atomic_load_n(&g_no_fallocate, __ATOMIC_RELAXED) || !len) return 0;
    if (off + len > tr_fsize_limit()) return EFBIG;
    int e = posix_fallocate(g_fd, (off_t)off, (off_t)len);
    if (e == EOPNOTSUPP || e == EINVAL) {
        __atomic_store_n(&g_no_fallocate, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return e;
}

int tr_ring_back_file(uint64_t off, uint64_t len) { return back_file(off, len); }

/* [off, end) of the mapping (pages) becomes anonymous memory: stores there
 * can no longer fault, and no longer reach the file. 0, or -1. */
static int to_memory(uint64_t off, uint64_t end)
{
    if (end <= off) return 0;
    void *at = (char *)g_hdr + off;
    void *m = mmap(at, end - off, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return m == at ? 0 : -1;
}

static uint32_t first_comms(uint64_t comms) { return comms < COMM_STEP ? (uint32_t)comms : COMM_STEP; }
static uint64_t first_records(uint64_t cap) { return cap < REC_STEP ? cap : REC_STEP; }

/* The header's note of what the folder could not take: lost_errno once (the
 * first error), after the area's limit (file_records, file_comms) when the
 * file stopped growing. */
static void note_lost(int err)
{
    uint32_t none = 0;
    __atomic_compare_exchange_n(&g_hdr->lost_errno, &none, (uint32_t)err, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static atomic_int g_full_said;       /* the folder-full line was given */

int tr_ring_folder_full(int err)
{
    if (g_hdr) note_lost(err);
    if (err != ENOSPC && err != EDQUOT) return -1;
    return !atomic_exchange(&g_full_said, 1);
}

/* The file cannot grow (error e): one line, "the folder is full" when it is
 * (once per process, whatever failed first); what stays in memory says what. */
static void cannot_grow(int e, const char *what)
{
    int full = tr_ring_folder_full(e);
    if (full == 1)
        tr_warn("the trace folder %s is full (%s): the ring file %s cannot grow: newer %s are kept in memory only, "
                "lost unless room is made before this process's traces are written (a trace that cannot be written "
                "leaves a .write-failed marker)",
                tr_dir_path(), strerror(e), g_path, what);
    else if (full < 0)
        tr_warn("the ring file %s cannot grow (%s): newer %s are kept in memory only, lost if the process is killed",
                g_path, strerror(e), what);
}

/* Record slots up to slot `upto` (exclusive, at most the capacity) backed,
 * g_back_mu held. 1, or 0 when they can be had in no way. */
static int back_records_locked(uint64_t upto)
{
    if (g_rec_backed >= upto) return 1;
    uint64_t want = (upto + REC_STEP - 1) / REC_STEP * REC_STEP;
    if (want > g_cap) want = g_cap;
    int e = back_file(g_hdr->off_records + g_rec_backed * TRR_RECORD_BYTES, (want - g_rec_backed) * TRR_RECORD_BYTES);
    if (e) {
        __atomic_store_n(&g_hdr->file_records, g_rec_backed, __ATOMIC_RELAXED);
        cannot_grow(e, "calls");
        if (to_memory(g_hdr->off_records + g_rec_backed * TRR_RECORD_BYTES, g_hdr->off_blobs) != 0) return 0;
        want = g_cap;
    }
    __atomic_store_n(&g_rec_backed, want == g_cap ? UINT64_MAX : want, __ATOMIC_RELEASE);
    return 1;
}

/* The slot of record index i can be stored into: 1, or 0 (no record). */
static int back_record(uint64_t i)
{
    pthread_mutex_lock(&g_back_mu);
    int ok = back_records_locked(i < g_cap ? i + 1 : g_cap);
    pthread_mutex_unlock(&g_back_mu);
    return ok;
}

void tr_ring_grow_ahead(void)
{
    uint64_t backed = g_hdr ? __atomic_load_n(&g_rec_backed, __ATOMIC_ACQUIRE) : UINT64_MAX;
    if (backed == UINT64_MAX || __atomic_load_n(&g_hdr->head, __ATOMIC_RELAXED) + REC_STEP / 2 < backed) return;
    pthread_mutex_lock(&g_back_mu);
    back_records_locked(backed + REC_STEP < g_cap ? backed + REC_STEP : g_cap);
    pthread_mutex_unlock(&g_back_mu);
}

/* Communicator slot `slot` can be stored into: 1, or 0. */
static int back_comm(int32_t slot)
{
    if ((uint32_t)slot < __atomic_load_n(&g_comm_backed, __ATOMIC_ACQUIRE)) return 1;
    pthread_mutex_lock(&g_back_mu);
    int ok = 1;
    uint32_t backed = g_comm_backed;
    if ((uint32_t)slot >= backed) {
        uint32_t want = ((uint32_t)slot / COMM_STEP + 1) * COMM_STEP;
        if (want > g_max_comms) want = g_max_comms;
        int e = back_file(g_hdr->off_comms + (uint64_t)backed * TRR_COMM_BYTES, (uint64_t)(want - backed) * TRR_COMM_BYTES);
        if (e) {
            __atomic_store_n(&g_hdr->file_comms, backed, __ATOMIC_RELAXED);
            cannot_grow(e, "communicators");
            ok = to_memory(g_hdr->off_comms + (uint64_t)backed * TRR_COMM_BYTES, g_hdr->off_records) == 0;
            want = g_max_comms;
        }
        if (ok) __atomic_store_n(&g_comm_backed, want, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_back_mu);
    return ok;
}

/* trshim.<job>.<host>.<pid>.ring, the host cleaned as the traces' names have it */
static void ring_name(char *out, size_t cap, const char *job_part)
{
    char host[256], host_clean[256];
    tr_host_name(host, sizeof host);
    tr_clean_name(host_clean, sizeof host_clean, host, sizeof host_clean, 1);
    snprintf(out, cap, TRSHIM_TRACE_PREFIX "%s.%s.%d" TRSHIM_RING_SUFFIX, job_part, host_clean, (int)getpid());
}

/* The file at name in folder dfd is the ring's own (not replaced since). */
static int is_own_file(int dfd, const char *name)
{
    struct stat a, b;
    return g_fd >= 0 && fstat(g_fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void tr_ring_name_job(int dfd, const char *job_part)
{
    if (!g_hdr || !g_path[0] || !g_name_job[0] || !strcmp(job_part, g_name_job)) return;
    char canonical[sizeof g_name], name[sizeof g_name];
    ring_name(canonical, sizeof canonical, g_name_job);
    g_name_job[0] = 0;           /* renamed once, or never when this fails */
    if (strcmp(canonical, g_name) != 0 || !is_own_file(dfd, g_name)) return;   /* a name of its own (map_file) */
    ring_name(name, sizeof name, job_part);
    /* no replace: a file of another there stays, and so does our name */
    if (renameat2(dfd, g_name, dfd, name, RENAME_NOREPLACE) != 0) return;
    snprintf(g_name, sizeof g_name, "%s", name);
    snprintf(g_path, sizeof g_path, "%s/%s", tr_dir_path(), name);
}

void tr_ring_retire(void)
{
    if (!g_hdr || !g_path[0]) return;
    const char *why;
    int dfd = tr_dir_open(&why);
    if (dfd < 0) return;
    if (is_own_file(dfd, g_name)) unlinkat(dfd, g_name, 0);
    close(dfd);
}

int tr_ring_open(void)
{
    if (g_hdr) return 0;
    const tr_settings *cfg = tr_cfg();
    const tr_process *proc = tr_proc();
    uint64_t cap = cfg->ring ? cfg->ring : 131072;
    uint64_t comms = RING_MAX_COMMS, blob = RING_BLOB_BYTES;
    char host[256], job[300];
    const char *job_source;
    tr_host_name(host, sizeof host);
    tr_job_id(job, sizeof job, &job_source, 0);
    tr_job_file_part(g_name_job, sizeof g_name_job, job);
    ring_name(g_name, sizeof g_name, g_name_job);
    char *name = g_name;
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
    uint64_t off_comms = TRR_HEADER_BYTES, off_records, off_blobs;
    uint64_t bytes = layout(cap, comms, blob, &off_records, &off_blobs);

    char *base = NULL;
    if (file_ok) {
        if (dfd >= 0) base = map_file(dfd, name, sizeof g_name, bytes, TRR_HEADER_BYTES, &why);
        else errno = dir_errno;
        /* the first slots of each area, so that activation fails here, with
         * its line, when the disk is full */
        int e = 0;
        if (base && ((e = back_file(off_comms, (uint64_t)first_comms(comms) * TRR_COMM_BYTES)) ||
                     (e = back_file(off_records, first_records(cap) * TRR_RECORD_BYTES)))) {
            errno = e;
            why = "cannot allocate";
            munmap(base, bytes);
            close(g_fd);
            g_fd = -1;
            unlinkat(dfd, name, 0);
            base = NULL;
        }
        if (!base)
            tr_warn("cannot keep the ring file %s (%s: %s): records are kept in memory only, lost if the "
                    "process is killed",
                    g_path, why, strerror(errno));
    }
    if (dfd >= 0) close(dfd);
    if (base) {
        g_comm_backed = first_comms(comms);
        g_rec_backed = first_records(cap) == cap ? UINT64_MAX : first_records(cap);
    } else {
        g_name_job[0] = 0;
        g_comm_backed = (uint32_t)comms;
        g_rec_backed = UINT64_MAX;
        g_path[0] = 0;
        base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) {
            tr_warn("cannot map %llu bytes for the call records: no records are kept",
                    (unsigned long long)bytes);
            return -1;
        }
    }
    g_max_comms = (uint32_t)comms;
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
    h->hang_sec = (uint32_t)(cfg->hang_sec > 0 ? cfg->hang_sec : 0);   /* the watchdog's, for a watcher */
    h->state = TRR_RUNNING;
    h->heartbeat_ns = tr_now_ns();
    /* magic last: a reader that sees it sees the header complete */
    atomic_thread_fence(memory_order_release);
    memcpy(h->magic, TRSHIM_RING_MAGIC, sizeof h->magic);

    g_comm_area = base + off_comms;
    g_rec = (trr_record *)(base + off_records);
    g_blob_area = (tr_blob_area){.hdr = h, .base = base + off_blobs, .bytes = blob};
    g_cap = cap;
    g_mask = (cap & (cap - 1)) == 0 ? cap - 1 : 0;
    atomic_thread_fence(memory_order_release);
    g_hdr = h;
    return 0;
}

trr_header *tr_ring_header(void) { return g_hdr; }

const tr_blob_area *tr_ring_blob_area(void)
{
    return g_hdr ? &g_blob_area : NULL;
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
    if (__builtin_expect(i >= __atomic_load_n(&g_rec_backed, __ATOMIC_ACQUIRE), 0) && !back_record(i)) return NULL;
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
    if (!back_comm(*slot)) {
        __atomic_fetch_add(&g_hdr->comms_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    return comm_init_slot((int32_t)n);
}

trr_comm *tr_ring_comm_claim(int32_t slot)
{
    if (!g_hdr || slot < 0) return NULL;
    if ((uint32_t)slot >= g_max_comms || !back_comm(slot)) {
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
