/* Simulated NCCL windows (ncclCommWindowRegister & co): the memory that
 * ncclPutSignal writes into on another rank, with no action of that rank.
 *
 * On a GPU a window is the rank's device memory made reachable by its peers
 * (NVLink, or the network). Here ranks are processes with private memory, so
 * a window's pages must be shared memory: a file of /dev/shm mapped at the
 * buffer's address. ncclMemAlloc's memory (which NCCL wants for windows) is
 * such a file from the start; a cudaMalloc'ed block of 1 MiB or more (a
 * mapping of its own, no other data on its pages) is moved into one when it
 * is registered: once the device's queued work is done, its pages are
 * copied into the file, which is then mapped over them (MAP_FIXED), same
 * address, same contents. Anything else is refused loudly. Every peer of the
 * registration maps the file too, so a put is a plain copy into the peer's
 * memory and the owner sees it at once.
 *
 * Registration and deregistration are collective, as in NCCL: the ranks
 * exchange where their windows are over the communicator's segment, in
 * call order. The same pages registered twice (two communicators, or
 * nested windows) share one file. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nccl_internal.h"

/* Pages of this process made shared memory for windows: an unnamed file
 * of /dev/shm (O_TMPFILE), so that a process killed at any moment leaves
 * nothing behind. A registration gives it a name for as long as the peers
 * take to map it (linkat through /proc/self/fd). Where /dev/shm has no
 * O_TMPFILE, the file is named from the start and the name removed when
 * the region goes, or at exit. */
struct trsim_region {
    uintptr_t start;
    size_t len;
    int fd;                   /* the file, kept open */
    int named;                /* fallback: the file has a name (key) until released */
    uint64_t key;
    int refs;                 /* windows using it, and its ncclMemAlloc allocation */
    struct trsim_region *next;
};

static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;
static struct trsim_region *regions;

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static uint64_t random_key(uint64_t salt)
{
    uint64_t key;
    if (getrandom(&key, sizeof key, 0) != (ssize_t)sizeof key)
        key = trsim_hash64((uint64_t)getpid(), (uint64_t)(trsim_now() * 1e9) ^ salt);
    return key;
}

/* Named by the job's tag (trsim-launch removes what a killed job left). */
static void region_name(char *out, size_t n, uint64_t key)
{
    char tag[96];
    trsim_job_tag(tag, sizeof tag);
    snprintf(out, n, "/trsim.%s.win.%016llx", tag, (unsigned long long)key);
}

static void unlink_named_regions(void)
{
    pthread_mutex_lock(&regions_lock);
    for (struct trsim_region *r = regions; r; r = r->next)
        if (r->named) {
            char name[160];
            region_name(name, sizeof name, r->key);
            shm_unlink(name);
            r->named = 0;
        }
    pthread_mutex_unlock(&regions_lock);
}

/* Makes the pages holding [buff, buff+size) shared (or finds them shared
 * already) and takes a reference. Caller holds regions_lock. */
static ncclResult_t region_acquire(void *buff, size_t size, struct trsim_region **out)
{
    size_t page = page_size();
    uintptr_t start = (uintptr_t)buff / page * page;
    uintptr_t end = ((uintptr_t)buff + size + page - 1) / page * page;
    for (struct trsim_region *r = regions; r; r = r->next) {
        if (start >= r->start && end <= r->start + r->len) {
            r->refs++;
            *out = r;
            return ncclSuccess;
        }
        if (start < r->start + r->len && r->start < end) {
            trsim_warn("ncclCommWindowRegister(%p, %zu): overlaps the window pages [%p, %p) without lying "
                       "inside them, which the simulator does not support", buff, size, (void *)r->start,
                       (void *)(r->start + r->len));
            trsim_set_last_error("window overlaps another window partly (not supported by the simulator)");
            return ncclInvalidUsage;
        }
    }
    struct trsim_region *r = calloc(1, sizeof *r);
    if (!r) return ncclSystemError;
    r->start = start;
    r->len = end - start;
    r->fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (r->fd < 0) {
        char name[160];
        r->key = random_key(start);
        region_name(name, sizeof name, r->key);
        r->fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (r->fd < 0) {
            trsim_set_last_error("shm_open(%s): %s", name, strerror(errno));
            free(r);
            return ncclSystemError;
        }
        r->named = 1;
        static int exit_hook;
        if (!exit_hook) {
            exit_hook = 1;
            atexit(unlink_named_regions);
        }
    }
    void *copy = MAP_FAILED;
    if (ftruncate(r->fd, (off_t)r->len) != 0 ||
        (copy = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0)) == MAP_FAILED) {
        trsim_set_last_error("window memory (%zu bytes): %s", r->len, strerror(errno));
        goto fail;
    }
    /* The current contents move into the file. Pages that read as zeros are
     * left out: the file's pages start as zeros, and untouched memory stays
     * unbacked. */
    static const unsigned char zeros[65536];
    for (size_t off = 0; off < r->len; off += page) {
        const unsigned char *src = (const unsigned char *)start + off;
        int zero = 1;
        for (size_t k = 0; k < page && zero; k += sizeof zeros) {
            size_t len = page - k < sizeof zeros ? page - k : sizeof zeros;
            zero = memcmp(src + k, zeros, len) == 0;
        }
        if (!zero) memcpy((unsigned char *)copy + off, src, page);
    }
    munmap(copy, r->len);
    if (mmap((void *)start, r->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, r->fd, 0) == MAP_FAILED) {
        trsim_set_last_error("mapping window memory at %p: %s", (void *)start, strerror(errno));
        goto fail;
    }
    r->refs = 1;
    r->next = regions;
    regions = r;
    *out = r;
    return ncclSuccess;
fail:
    close(r->fd);
    if (r->named) {
        char name[160];
        region_name(name, sizeof name, r->key);
        shm_unlink(name);
    }
    free(r);
    return ncclSystemError;
}

/* A name the peers can open the region by (*key): its own when it has one,
 * else a new link to the unnamed file, which region_unpublish removes. */
static ncclResult_t region_publish(struct trsim_region *r, uint64_t *key)
{
    if (r->named) {
        *key = r->key;
        return ncclSuccess;
    }
    char name[160], path[200], self[64];
    *key = random_key(r->start);
    region_name(name, sizeof name, *key);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    snprintf(self, sizeof self, "/proc/self/fd/%d", r->fd);
    if (linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) != 0) {
        trsim_set_last_error("naming window memory %s: %s", path, strerror(errno));
        return ncclSystemError;
    }
    return ncclSuccess;
}

static void region_unpublish(struct trsim_region *r, uint64_t key)
{
    if (r->named) return;
    char name[160];
    region_name(name, sizeof name, key);
    shm_unlink(name);
}

/* Whether shared pages hold [buff, buff+size) already. */
static int region_holding(const void *buff, size_t size)
{
    uintptr_t lo = (uintptr_t)buff, hi = lo + size;
    int found = 0;
    pthread_mutex_lock(&regions_lock);
    for (struct trsim_region *r = regions; r && !found; r = r->next)
        found = r->len && lo >= r->start && hi <= r->start + r->len;
    pthread_mutex_unlock(&regions_lock);
    return found;
}

/* Drops a reference; the last one closes the file (and removes a fallback
 * name). The pages stay mapped, shared with nobody, until the memory is
 * freed. Caller holds regions_lock. */
static void region_release(struct trsim_region *r)
{
    if (!r || --r->refs > 0) return;
    if (r->named) {
        char name[160];
        region_name(name, sizeof name, r->key);
        shm_unlink(name);
    }
    close(r->fd);
    struct trsim_region **p = &regions;
    while (*p && *p != r) p = &(*p)->next;
    if (*p) *p = r->next;
    free(r);
}

void trsim_window_memory_freed(void *base, size_t len)
{
    /* The pages go (with any window still registered on them, which NCCL
     * forbids); later memory at the same addresses is not theirs. */
    uintptr_t lo = (uintptr_t)base, hi = lo + len;
    pthread_mutex_lock(&regions_lock);
    for (struct trsim_region *r = regions; r; r = r->next)
        if (r->len && r->start < hi && lo < r->start + r->len) r->start = r->len = 0;
    pthread_mutex_unlock(&regions_lock);
}

/* ---- the windows of a communicator ---------------------------------------------- */

/* Unmaps the peers' windows and releases the pages. Never touches the
 * communicator: the last put holding a window may finish after the
 * communicator was destroyed. */
static void window_free(struct ncclWindow_vidmem *w)
{
    if (!w) return;
    if (w->peer_map)
        for (int q = 0; q < w->nranks; q++)
            if (w->peer_map[q]) munmap(w->peer_map[q], w->peer_map_len[q]);
    pthread_mutex_lock(&regions_lock);
    region_release(w->region);
    pthread_mutex_unlock(&regions_lock);
    free(w->peer_base);
    free(w->peer_size);
    free(w->peer_map);
    free(w->peer_map_len);
    w->magic = 0;
    free(w);
}

void trsim_window_hold(struct ncclWindow_vidmem *win)
{
    atomic_fetch_add(&win->refs, 1);
}

void trsim_window_release(struct ncclWindow_vidmem *win)
{
    if (win && atomic_fetch_sub(&win->refs, 1) == 1) window_free(win);
}

int trsim_window_valid(struct ncclComm *comm, const struct ncclWindow_vidmem *win)
{
    if (!win) return 0;
    pthread_mutex_lock(&comm->lock);
    int found = 0;
    for (const struct ncclWindow_vidmem *w = comm->windows; w && !found; w = w->next) found = w == win;
    pthread_mutex_unlock(&comm->lock);
    return found;
}

struct ncclWindow_vidmem *trsim_window_find(struct ncclComm *comm, const void *p, size_t bytes)
{
    uintptr_t lo = (uintptr_t)p;
    struct ncclWindow_vidmem *found = NULL;
    pthread_mutex_lock(&comm->lock);
    for (struct ncclWindow_vidmem *w = comm->windows; w && !found; w = w->next)
        if (lo >= (uintptr_t)w->user && bytes <= w->size && lo - (uintptr_t)w->user <= w->size - bytes) found = w;
    pthread_mutex_unlock(&comm->lock);
    return found;
}

void trsim_comm_drop_windows(struct ncclComm *comm)
{
    pthread_mutex_lock(&comm->lock);
    struct ncclWindow_vidmem *w = comm->windows;
    comm->windows = NULL;
    pthread_mutex_unlock(&comm->lock);
    while (w) {
        struct ncclWindow_vidmem *next = w->next;
        trsim_window_release(w);
        w = next;
    }
}

/* What each rank publishes when registering. */
struct win_entry {
    int32_t status;
    int32_t pad;
    uint64_t key;           /* its region's object */
    uint64_t region_len;
    uint64_t offset;        /* of the window in the region */
    uint64_t size;
};

ncclResult_t trsim_window_register_run(struct trsim_job *job)
{
    struct ncclComm *comm = job->parent;
    ncclResult_t r = trsim_comm_wait_init(comm);
    if (r != ncclSuccess) return r;
    int n = comm->nranks;
    struct win_entry me = {ncclSuccess, 0, 0, 0, 0, job->size};
    int published = 0;
    struct ncclWindow_vidmem *w = calloc(1, sizeof *w);
    unsigned char *all = malloc((size_t)n * TRSIM_BOOT_BYTES);
    if (w) {
        w->comm = comm;
        w->nranks = n;
        atomic_init(&w->refs, 1);
        w->peer_base = calloc((size_t)n, sizeof *w->peer_base);
        w->peer_size = calloc((size_t)n, sizeof *w->peer_size);
        w->peer_map = calloc((size_t)n, sizeof *w->peer_map);
        w->peer_map_len = calloc((size_t)n, sizeof *w->peer_map_len);
    }
    if (!w || !all || !w->peer_base || !w->peer_size || !w->peer_map || !w->peer_map_len) {
        me.status = ncclSystemError;
    } else {
        w->magic = TRSIM_WIN_MAGIC;
        w->user = job->buff;
        w->size = job->size;
        w->flags = job->win_flags;
        if (!trsim_mem_own_mapping(job->buff, job->size, NULL)) {
            trsim_warn("ncclCommWindowRegister(%p, %zu): a window must lie in memory from ncclMemAlloc (or a "
                       "cudaMalloc of 1 MiB or more) in the simulator", job->buff, job->size);
            trsim_set_last_error("ncclCommWindowRegister: the buffer is not memory from ncclMemAlloc");
            me.status = ncclInvalidArgument;
        } else {
            /* Memory to be moved into shared pages may still be written by
             * queued work: let the device finish first. */
            if (!region_holding(job->buff, job->size)) trsim_device_wait_idle(comm->device);
            pthread_mutex_lock(&regions_lock);
            me.status = region_acquire(job->buff, job->size, &w->region);
            if (me.status == ncclSuccess) me.status = region_publish(w->region, &me.key);
            if (me.status == ncclSuccess) {
                published = 1;
                me.region_len = w->region->len;
                me.offset = (uintptr_t)job->buff - w->region->start;
            }
            pthread_mutex_unlock(&regions_lock);
        }
    }
    unsigned char mine[TRSIM_BOOT_BYTES] = {0};
    memcpy(mine, &me, sizeof me);
    if (!all) {
        window_free(w);
        return ncclSystemError;   /* cannot take part: the peers time out or wait, as on a GPU */
    }
    if ((r = trsim_comm_allgather_boot(comm, mine, all)) != ncclSuccess) goto fail;
    /* Any rank's failure fails the registration on all. */
    for (int q = 0; q < n && r == ncclSuccess; q++) {
        struct win_entry e;
        memcpy(&e, all + (size_t)q * TRSIM_BOOT_BYTES, sizeof e);
        if (e.status != ncclSuccess) r = (ncclResult_t)e.status;
    }
    /* Map every peer's window here. */
    int32_t mapped = r;
    for (int q = 0; q < n && mapped == ncclSuccess; q++) {
        struct win_entry e;
        memcpy(&e, all + (size_t)q * TRSIM_BOOT_BYTES, sizeof e);
        w->peer_size[q] = (size_t)e.size;
        if (q == comm->rank) {
            w->peer_base[q] = w->user;
            continue;
        }
        char name[160];
        region_name(name, sizeof name, e.key);
        int fd = shm_open(name, O_RDWR, 0600);
        void *m = fd < 0 ? MAP_FAILED
                         : mmap(NULL, (size_t)e.region_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
        if (m == MAP_FAILED) {
            trsim_set_last_error("mapping rank %d's window %s: %s", q, name, strerror(errno));
            mapped = ncclSystemError;
            break;
        }
        w->peer_map[q] = m;
        w->peer_map_len[q] = (size_t)e.region_len;
        w->peer_base[q] = (unsigned char *)m + e.offset;
    }
    /* Everyone has mapped everyone (or someone failed): agree. */
    memset(mine, 0, sizeof mine);
    memcpy(mine, &mapped, sizeof mapped);
    ncclResult_t r2 = trsim_comm_allgather_boot(comm, mine, all);
    if (r == ncclSuccess) r = r2;
    /* every peer has mapped it (or given up): the name can go */
    if (published) region_unpublish(w->region, me.key);
    published = 0;
    for (int q = 0; q < n && r == ncclSuccess; q++) {
        int32_t st;
        memcpy(&st, all + (size_t)q * TRSIM_BOOT_BYTES, sizeof st);
        if (st != ncclSuccess) r = (ncclResult_t)st;
    }
    if (r != ncclSuccess) goto fail;
    free(all);
    pthread_mutex_lock(&comm->lock);
    w->next = comm->windows;
    comm->windows = w;
    pthread_mutex_unlock(&comm->lock);
    /* NCCL initializes its one-sided machinery at the first symmetric window */
    if (w->flags & NCCL_WIN_COLL_SYMMETRIC) atomic_store(&comm->rma_ready, 1);
    if (job->win_out) *job->win_out = w;
    return ncclSuccess;
fail:
    if (published) region_unpublish(w->region, me.key);
    free(all);
    window_free(w);
    return r;
}

/* The window leaves the communicator (no put can name it any more), the
 * ranks meet, and the registration lets go of it: its mappings go once the
 * puts still queued with it have been done. */
ncclResult_t trsim_window_deregister_run(struct trsim_job *job)
{
    struct ncclComm *comm = job->parent;
    struct ncclWindow_vidmem *w = job->win;
    pthread_mutex_lock(&comm->lock);
    struct ncclWindow_vidmem **p = &comm->windows;
    while (*p && *p != w) p = &(*p)->next;
    int found = *p != NULL;
    if (found) *p = w->next;
    pthread_mutex_unlock(&comm->lock);
    if (!found) {
        trsim_set_last_error("ncclCommWindowDeregister: not a window of this communicator");
        return ncclInvalidArgument;
    }
    ncclResult_t r = trsim_comm_barrier(comm);
    trsim_window_release(w);
    return r;
}

/* ---- the API ----------------------------------------------------------------------- */

TRSIM_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                              int winFlags)
{
    if (!trsim_comm_valid(comm) || !buff || !size || !win) {
        trsim_set_last_error("ncclCommWindowRegister: invalid argument");
        return ncclInvalidArgument;
    }
    *win = NULL;
    struct trsim_job *job = trsim_job_new(TRSIM_JOB_WINREG, comm, comm->blocking);
    if (!job) return ncclSystemError;
    job->buff = buff;
    job->size = size;
    job->win_flags = winFlags;
    job->win_out = win;
    return trsim_job_launch(job, NULL);
}

TRSIM_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    if (!trsim_comm_valid(comm) || !trsim_window_valid(comm, win)) {
        trsim_set_last_error("ncclCommWindowDeregister: not a window of this communicator");
        return ncclInvalidArgument;
    }
    struct trsim_job *job = trsim_job_new(TRSIM_JOB_WINDEREG, comm, comm->blocking);
    if (!job) return ncclSystemError;
    job->win = win;
    return trsim_job_launch(job, NULL);
}

TRSIM_API ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr)
{
    if (!trsim_comm_valid(comm) || !outUserPtr || !trsim_window_valid(comm, win)) return ncclInvalidArgument;
    *outUserPtr = win->user;
    return ncclSuccess;
}
