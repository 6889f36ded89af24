/* The ring header's live fields (tr_ring.h, include/trshim/ring_format.h):
 * what a watcher reading a running rank's ring needs besides its records.
 *
 *   - the hang watchdog's current hang (stall_ns, stall_rec,
 *     stall_since_ns, stalls), stored by the poller thread (tr_watchdog.c);
 *   - the GPU operations pending at the completion poller's last pass
 *     (pending, pending_since_ns, pass_ns; tr_complete.c);
 *   - device memory (mem[], mem_devices_dropped): the memory wrappers'
 *     counters of a device are its slot's (tr_memory.c, tr_memory_int.h),
 *     its first failure is stored here.
 *
 * Plain atomics into the mapped header: no lock, no system call, nothing
 * an application thread waits for. A memory slot is claimed once per
 * device: a compare-and-swap on g_claim (device + 1, in slot order: two
 * threads claiming one device agree on its slot), then `device`, then
 * `used` = 1 (release); the lookup table tr_ring_mem_of makes every later
 * call one load. */
#include <stdio.h>

#include "tr_ring_int.h"

trr_mem *tr_ring_mem_of[TR_RING_MEM_LOOKUP];
static int32_t g_claim[TRR_MEM_DEVICES];        /* device + 1 of each header slot, 0: free */
static uint8_t g_dropped[TR_RING_MEM_LOOKUP];   /* 1: the device has no slot (for good) */

/* ---- the hang watchdog ------------------------------------------------------------ */

void tr_ring_stall(uint64_t rec1, uint64_t since_ns, uint64_t now_ns)
{
    trr_header *h = tr_ring_header();
    if (!h) return;
    __atomic_store_n(&h->stall_rec, rec1, __ATOMIC_RELAXED);
    __atomic_store_n(&h->stall_since_ns, since_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&h->stall_ns, now_ns ? now_ns : 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&h->stalls, 1, __ATOMIC_RELEASE);
}

void tr_ring_stall_over(void)
{
    trr_header *h = tr_ring_header();
    if (h) __atomic_store_n(&h->stall_ns, 0, __ATOMIC_RELEASE);
}

/* ---- the completion poller ---------------------------------------------------------- */

void tr_ring_pending(uint32_t n, uint64_t since_ns, uint64_t now_ns)
{
    trr_header *h = tr_ring_header();
    if (!h) return;
    __atomic_store_n(&h->pending, n, __ATOMIC_RELAXED);
    __atomic_store_n(&h->pending_since_ns, n ? since_ns : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&h->pass_ns, now_ns, __ATOMIC_RELAXED);
}

/* ---- device memory ------------------------------------------------------------------- */

trr_mem *tr_ring_mem_claim(int device)
{
    if (device < 0 || device >= TR_RING_MEM_LOOKUP || __atomic_load_n(&g_dropped[device], __ATOMIC_RELAXED))
        return NULL;
    trr_header *h = tr_ring_header();
    if (!h) {                       /* no ring: never one for this device (its counts stay in one place) */
        __atomic_store_n(&g_dropped[device], 1, __ATOMIC_RELAXED);
        return NULL;
    }
    int32_t want = device + 1;
    for (int k = 0; k < TRR_MEM_DEVICES; k++) {
        int32_t cur = 0;
        if (__atomic_compare_exchange_n(&g_claim[k], &cur, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            trr_mem *m = &h->mem[k];
            __atomic_store_n(&m->device, device, __ATOMIC_RELAXED);
            __atomic_store_n(&m->used, 1, __ATOMIC_RELEASE);
            __atomic_store_n(&tr_ring_mem_of[device], m, __ATOMIC_RELEASE);
            return m;
        }
        if (cur == want) {          /* another thread claimed it (its counts add up in the same slot) */
            __atomic_store_n(&tr_ring_mem_of[device], &h->mem[k], __ATOMIC_RELEASE);
            return &h->mem[k];
        }
    }
    uint8_t no = 0;
    if (__atomic_compare_exchange_n(&g_dropped[device], &no, 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        __atomic_fetch_add(&h->mem_devices_dropped, 1, __ATOMIC_RELAXED);
    return NULL;
}

void tr_ring_mem_failed(trr_mem *m, const char *api, int code, uint64_t bytes, uint64_t live,
                        uint64_t free_bytes, uint64_t total_bytes, uint64_t t_ns, int32_t stack,
                        int32_t pystack)
{
    m->fail_bytes = bytes;
    m->fail_live = live;
    m->fail_free = free_bytes;
    m->fail_total = total_bytes;
    m->fail_stack = stack;
    m->fail_pystack = pystack;
    m->fail_code = code;
    snprintf(m->fail_api, sizeof m->fail_api, "%.*s", (int)sizeof m->fail_api - 1, api ? api : "");
    /* last: a reader that sees fail_ns sees the rest */
    __atomic_store_n(&m->fail_ns, t_ns ? t_ns : 1, __ATOMIC_RELEASE);
}
