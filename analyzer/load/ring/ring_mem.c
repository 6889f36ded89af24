/* A ring's device memory: the header's per-device slots (trr_header.mem[],
 * include/trshim/ring_format.h), kept by the shim as allocations come and
 * go, as a trace's memory (ta_trace.mdev) and failed allocations
 * (ta_trace.mfail): what a killed rank, or one whose last JSON write came
 * before its out-of-memory failure, says about its memory.
 *
 * The header is hostile input like the rest of the file: a slot counts
 * only when its `used` is 1 and its device in range and not seen before,
 * counts beyond INT64_MAX are damage (a note, the slot unused), a failure
 * only once its fail_ns is set; the slots are a fixed array, nothing is
 * allocated by a count read from the file. A ring of an older shim holds
 * zeros there: no memory ("-", as before). ring_trace.c calls in here
 * (ring_mem_read once ring.c read the file, ring_mem_view per trace,
 * ring_mem_merge next to a JSON trace). */
#include <stdlib.h>
#include <string.h>

#include "ring_int.h"

#define MEM_DEVICE_MAX 65536        /* device numbers beyond it are damage */

static int fits64(uint64_t v) { return v <= (uint64_t)INT64_MAX; }

/* the error's name, as the shim's JSON writes it for the codes that matter
 * (an out-of-memory one), else the kind of code and its number */
static void error_name(char *out, size_t cap, const char *api, int32_t code)
{
    int driver = !strncmp(api, "cu", 2) && strncmp(api, "cuda", 4) != 0;
    int nccl = !strncmp(api, "nccl", 4);
    if (driver) {
        if (code == 2) snprintf(out, cap, "CUDA_ERROR_OUT_OF_MEMORY");
        else snprintf(out, cap, "CUresult(%d)", (int)code);
    } else if (nccl) {
        snprintf(out, cap, "ncclResult(%d)", (int)code);
    } else {
        if (code == 2) snprintf(out, cap, "cudaErrorMemoryAllocation");
        else snprintf(out, cap, "cudaError(%d)", (int)code);
    }
}

static int cmp_fail(const void *x, const void *y)
{
    const ta_memfail *a = x, *b = y;
    return (a->t_ns > b->t_ns) - (a->t_ns < b->t_ns);
}

void ring_mem_read(rd *r)
{
    const trr_header *h = &r->h;
    r->nmdev = r->nmfail = 0;
    int damaged = 0, first_bad = -1, seen[TRR_MEM_DEVICES], nseen = 0;
    const char *why = NULL;
    for (int k = 0; k < TRR_MEM_DEVICES; k++) {
        const trr_mem *m = &h->mem[k];
        if (m->used == 0) continue;
        const char *bad = NULL;
        if (m->used != 1) bad = "its used flag is not 1";
        else if (m->device < 0 || m->device >= MEM_DEVICE_MAX) bad = "its device is out of range";
        else if (!fits64(m->live) || !fits64(m->peak) || !fits64(m->allocs) || !fits64(m->frees))
            bad = "a count is out of range";
        for (int i = 0; i < nseen && !bad; i++)
            if (seen[i] == m->device) bad = "its device has an earlier slot";
        if (bad) {
            if (!damaged++) { first_bad = k; why = bad; }
            continue;
        }
        seen[nseen++] = m->device;
        if (m->allocs) {            /* listed as the JSON trace lists a device: once it allocated */
            ta_memdev *d = &r->mdev[r->nmdev++];
            memset(d, 0, sizeof *d);
            d->device = m->device;
            d->live = (int64_t)m->live;
            /* the peak lags live only while a new peak is being stored (a live process) */
            d->peak = m->peak > m->live ? (int64_t)m->peak : (int64_t)m->live;
            d->allocs = (int64_t)m->allocs;
            d->frees = (int64_t)m->frees;
            d->peak_ns = fits64(m->peak_ns) ? (int64_t)m->peak_ns : TA_NULL64;
            d->peak_stack = -1;     /* the header keeps no stack of the peak */
            d->peak_pystack = -1;
        }
        /* the first failed allocation: complete once fail_ns is set (stored last) */
        if (!m->fail_ns) continue;
        if (!fits64(m->fail_ns) || !fits64(m->fail_bytes) || !fits64(m->fail_live)) {
            if (!damaged++) { first_bad = k; why = "its failure is out of range"; }
            continue;
        }
        ta_memfail *f = &r->mfail[r->nmfail++];
        memset(f, 0, sizeof *f);
        char *api = ring_str(m->fail_api, sizeof m->fail_api);
        snprintf(f->api, sizeof f->api, "%s", api[0] ? api : "?");
        free(api);
        f->device = m->device;
        f->bytes = (int64_t)m->fail_bytes;
        f->live = (int64_t)m->fail_live;
        f->free_bytes = fits64(m->fail_free) ? (int64_t)m->fail_free : TA_NULL64;     /* UINT64_MAX: unknown */
        f->total_bytes = fits64(m->fail_total) ? (int64_t)m->fail_total : TA_NULL64;
        f->t_ns = (int64_t)m->fail_ns;
        f->error_code = m->fail_code;
        error_name(f->error, sizeof f->error, f->api, m->fail_code);
        f->stack = m->fail_stack >= 0 && m->fail_stack < r->nstacks ? m->fail_stack : -1;
        f->pystack = m->fail_pystack >= 0 && m->fail_pystack < r->npystacks ? m->fail_pystack : -1;
    }
    if (r->nmfail > 1) qsort(r->mfail, (size_t)r->nmfail, sizeof *r->mfail, cmp_fail);
    if (damaged)
        ring_note(r, "damaged header: %d device memory slot(s) not used (first: slot %d, %s)", damaged, first_bad,
                  why);
}

void ring_mem_view(const rd *r, ta_trace *t, int dev)
{
    t->mdev = xcalloc((size_t)r->nmdev + 1, sizeof *t->mdev);
    t->mfail = xcalloc((size_t)r->nmfail + 1, sizeof *t->mfail);
    t->nmdev = t->nmfail = 0;
    for (int i = 0; i < r->nmdev; i++)
        if (dev < 0 || r->mdev[i].device == dev) t->mdev[t->nmdev++] = r->mdev[i];
    for (int i = 0; i < r->nmfail; i++)
        if (dev < 0 || r->mfail[i].device == dev) t->mfail[t->nmfail++] = r->mfail[i];
}

/* moves rt's devices (or failures) into j's */
static void take_devices(ta_trace *j, ta_trace *rt)
{
    free(j->mdev);
    j->mdev = rt->mdev; j->nmdev = rt->nmdev;
    rt->mdev = NULL; rt->nmdev = 0;
}

static void take_failures(ta_trace *j, ta_trace *rt)
{
    free(j->mfail);
    j->mfail = rt->mfail; j->nmfail = rt->nmfail;
    rt->mfail = NULL; rt->nmfail = 0;
}

void ring_mem_merge(ta_trace *j, ta_trace *rt)
{
    if (!j->nmdev && !j->nmfail) {          /* no memory in the JSON (none then, or its section damaged) */
        take_devices(j, rt);
        take_failures(j, rt);
    } else if (!j->nmfail && rt->nmfail) {  /* a failure after the JSON's last write: the ring's */
        take_failures(j, rt);
    }
}
