/* The shared-memory segment behind each simulated communicator: layout,
 * attach/detach, the futex doorbell all waits sleep on, and peer liveness. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nccl_internal.h"

static size_t env_bytes(const char *name, size_t dflt, size_t min, size_t max)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || *end || n < min || n > max) {
        trsim_warn("ignoring %s=%s (want %zu..%zu bytes)", name, v, min, max);
        return dflt;
    }
    return (size_t)n;
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

double trsim_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t trsim_hash64(uint64_t h, uint64_t v)
{
    /* splitmix64 of the combination: only needs to spread names apart */
    uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Where the parts of a segment for nranks lie; returns the segment size. */
struct seg_layout { size_t ranks, chans, signals, coll, p2p; };

static size_t seg_layout(int nranks, size_t coll, size_t p2p, struct seg_layout *l)
{
    l->ranks = align_up(sizeof(trsim_shm_hdr), 64);
    l->chans = align_up(l->ranks + (size_t)nranks * sizeof(trsim_shm_rank), 64);
    l->signals = align_up(l->chans + (size_t)nranks * nranks * sizeof(trsim_shm_chan), 64);
    l->coll = align_up(l->signals + (size_t)nranks * nranks * TRSIM_RMA_SLOTS * sizeof(uint64_t), 4096);
    l->p2p = l->coll + (size_t)nranks * coll;
    return align_up(l->p2p + (size_t)nranks * nranks * p2p, 4096);
}

ncclResult_t trsim_shm_attach(trsim_shm *shm, const char *name, int nranks, int rank, int device)
{
    memset(shm, 0, sizeof *shm);
    snprintf(shm->name, sizeof shm->name, "%s", name);
    /* Slots are sized per job: every rank must agree, so they come from the
     * environment the launcher gives all ranks alike. */
    shm->coll_slot_bytes = align_up(env_bytes("TRSIM_CHUNK_BYTES", 1 << 20, 4096, 1 << 30), 64);
    shm->p2p_slot_bytes = align_up(env_bytes("TRSIM_P2P_CHUNK_BYTES", 256 << 10, 4096, 1 << 30), 64);
    /* Large jobs: keep the pairwise channels affordable. */
    while (nranks > 16 && shm->p2p_slot_bytes > 16384 &&
           (size_t)nranks * nranks * shm->p2p_slot_bytes > ((size_t)256 << 20))
        shm->p2p_slot_bytes /= 2;
    struct seg_layout l;
    size_t size = seg_layout(nranks, shm->coll_slot_bytes, shm->p2p_slot_bytes, &l);

    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        trsim_set_last_error("shm_open(%s): %s", name, strerror(errno));
        return ncclSystemError;
    }
    /* Every rank extends the file to the same size: idempotent, so nobody
     * has to be "the creator". A size that disagrees means another job. */
    struct stat st;
    if (fstat(fd, &st) != 0 || ((size_t)st.st_size != size && st.st_size != 0) ||
        (st.st_size == 0 && ftruncate(fd, (off_t)size) != 0)) {
        trsim_set_last_error("shared segment %s has the wrong size for %d ranks "
                             "(nranks or TRSIM_CHUNK_BYTES differ between ranks?)", name, nranks);
        close(fd);
        return ncclInvalidUsage;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        trsim_set_last_error("mmap(%s, %zu): %s", name, size, strerror(errno));
        return ncclSystemError;
    }
    unsigned char *b = base;
    shm->base = base;
    shm->size = size;
    shm->nranks = nranks;
    shm->hdr = (trsim_shm_hdr *)b;
    shm->ranks = (trsim_shm_rank *)(b + l.ranks);
    shm->chans = (trsim_shm_chan *)(b + l.chans);
    shm->signals = (_Atomic uint64_t *)(b + l.signals);
    shm->coll_slots = b + l.coll;
    shm->p2p_slots = b + l.p2p;

    trsim_shm_hdr *h = shm->hdr;
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&h->magic, &zero, TRSIM_SHM_MAGIC);
    uint32_t z32 = 0;
    atomic_compare_exchange_strong(&h->nranks, &z32, (uint32_t)nranks);
    if (atomic_load(&h->magic) != TRSIM_SHM_MAGIC || atomic_load(&h->nranks) != (uint32_t)nranks) {
        trsim_set_last_error("shared segment %s belongs to a communicator of %u ranks, not %d",
                             name, atomic_load(&h->nranks), nranks);
        goto fail;
    }
    int32_t none = 0;
    if (!atomic_compare_exchange_strong(&shm->ranks[rank].pid, &none, (int32_t)getpid())) {
        trsim_set_last_error("rank %d of communicator %s joined twice", rank, name);
        goto fail;
    }
    atomic_store(&shm->ranks[rank].device, device);
    if (atomic_fetch_add(&h->attached, 1) + 1 == (uint32_t)nranks) {
        /* Everyone holds a mapping now: the name is no longer needed, and
         * removing it here means a job killed later leaves nothing behind. */
        shm_unlink(name);
        atomic_store(&h->unlinked, 1);
    }
    trsim_shm_ring(shm);
    return ncclSuccess;
fail:
    munmap(base, size);
    shm->base = NULL;
    return ncclInvalidUsage;
}

void trsim_shm_detach(trsim_shm *shm)
{
    if (!shm->base) return;
    if (!atomic_load(&shm->hdr->unlinked)) shm_unlink(shm->name);
    munmap(shm->base, shm->size);
    shm->base = NULL;
}

unsigned char *trsim_shm_coll_slot(const trsim_shm *shm, int rank)
{
    return shm->coll_slots + (size_t)rank * shm->coll_slot_bytes;
}

trsim_shm_chan *trsim_shm_chan_at(const trsim_shm *shm, int from, int to)
{
    return &shm->chans[(size_t)from * shm->nranks + to];
}

unsigned char *trsim_shm_p2p_slot(const trsim_shm *shm, int from, int to)
{
    return shm->p2p_slots + ((size_t)from * shm->nranks + to) * shm->p2p_slot_bytes;
}

_Atomic uint64_t *trsim_shm_signal(const trsim_shm *shm, int to, int from, int slot)
{
    return &shm->signals[((size_t)to * shm->nranks + from) * TRSIM_RMA_SLOTS + slot];
}

size_t trsim_shm_fixed_bytes(const trsim_shm *shm)
{
    return (size_t)(shm->coll_slots - (unsigned char *)shm->base);
}

void trsim_shm_ring(trsim_shm *shm)
{
    atomic_fetch_add_explicit(&shm->hdr->doorbell, 1, memory_order_release);
    syscall(SYS_futex, &shm->hdr->doorbell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

void trsim_shm_wait(trsim_shm *shm, uint32_t seen, long timeout_ns)
{
    struct timespec ts = {timeout_ns / 1000000000L, timeout_ns % 1000000000L};
    syscall(SYS_futex, &shm->hdr->doorbell, FUTEX_WAIT, seen, &ts, NULL, 0);
}

int trsim_shm_rank_dead(const trsim_shm *shm, int rank)
{
    int32_t pid = atomic_load(&shm->ranks[rank].pid);
    if (pid <= 0 || pid == (int32_t)getpid()) return 0;
    return kill(pid, 0) != 0 && errno == ESRCH;
}
