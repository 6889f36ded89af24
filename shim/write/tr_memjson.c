/* The "memory" member of the trace (docs/trace-format.md, "memory"), from
 * the counters, peaks and failures kept by tr_memory.c's wrappers
 * (tr_memory_int.h). */
#include <stdatomic.h>
#include <stdint.h>

#include "tr_core.h"
#include "tr_record.h"
#include "tr_memjson.h"

/* ---- trace output ---------------------------------------------------------- */

static void mt_write_counters(tr_json *j, const char *key, mt_counters *c)
{
    uint64_t live = atomic_load_explicit(&c->live, memory_order_relaxed);
    uint64_t peak = atomic_load_explicit(&c->peak, memory_order_relaxed);
    trj_object_begin(j, key);
    trj_uint(j, "live_bytes", live);
    trj_uint(j, "peak_bytes", peak > live ? peak : live);
    trj_uint(j, "allocs", atomic_load_explicit(&c->allocs, memory_order_relaxed));
    trj_uint(j, "frees", atomic_load_explicit(&c->frees, memory_order_relaxed));
    trj_object_end(j);
}

static void mt_write_failure(tr_json *j, const mt_failure *f)
{
    trj_object_begin(j, NULL);
    trj_str(j, "api", f->api);
    if (f->device >= 0)
        trj_int(j, "device", f->device);
    else
        trj_null(j, "device");
    trj_uint(j, "bytes", f->bytes);
    trj_uint(j, "live_bytes", f->live);
    if (f->has_info) {
        trj_uint(j, "free_bytes", f->free_bytes);
        trj_uint(j, "total_bytes", f->total_bytes);
    } else {
        trj_null(j, "free_bytes");
        trj_null(j, "total_bytes");
    }
    trj_str(j, "error", f->error);
    trj_int(j, "error_code", f->code);
    trj_uint(j, "t_ns", f->t_ns);
    trj_int(j, "stack", f->stack);
    trj_int(j, "pystack", f->pystack);
    trj_object_end(j);
}

/* Copies the failure numbered n (0-based) if its slot still holds it. */
static int mt_fail_get(uint64_t n, mt_failure *out)
{
    mt_fail_slot *s = n < MT_FAIL_HEAD ? &mt_fail_slots[n]
                                       : &mt_fail_slots[MT_FAIL_HEAD + (n - MT_FAIL_HEAD) % MT_FAIL_TAIL];
    int locked = mt_lock_bounded(&s->lock);
    int ok = s->number == n + 1;
    if (ok)
        *out = s->f;
    if (locked)
        mt_unlock(&s->lock);
    out->error[sizeof out->error - 1] = '\0';   /* read without the lock: maybe torn */
    return ok;
}

void tr_memory_write_json(tr_json *j, int device)
{
    trj_object_begin(j, "memory");

    trj_array_begin(j, "devices");
    for (int d = 0; d < MT_MAX_DEVICES; d++) {
        mt_device *md = &mt_devs[d];
        mt_counters *c = mt_dev_counters_peek(d);   /* the ring header's, or md->c */
        if ((device >= 0 && d != device) || !atomic_load_explicit(&c->allocs, memory_order_acquire))
            continue;
        uint64_t live = atomic_load_explicit(&c->live, memory_order_relaxed);
        int locked = mt_lock_bounded(&md->plock);
        uint64_t p_bytes = md->p_bytes, p_ns = md->p_ns, p_comm = md->p_comm, p_seq = md->p_seq;
        int32_t p_stack = md->p_stack, p_pystack = md->p_pystack;
        int p_has_coll = md->p_has_coll;
        if (locked)
            mt_unlock(&md->plock);
        /* p_bytes lags the peak counter only while a new peak is being
         * noted: then live may be ahead of it */
        uint64_t peak = p_bytes > live ? p_bytes : live;
        trj_object_begin(j, NULL);
        trj_int(j, "device", d);
        trj_uint(j, "live_bytes", live);
        trj_uint(j, "peak_bytes", peak);
        trj_uint(j, "allocs", atomic_load_explicit(&c->allocs, memory_order_relaxed));
        trj_uint(j, "frees", atomic_load_explicit(&c->frees, memory_order_relaxed));
        trj_uint(j, "peak_ns", p_ns);
        trj_int(j, "peak_stack", p_stack);   /* -1 also while the stack is being taken */
        trj_int(j, "peak_pystack", p_pystack);
        if (p_has_coll) {
            trj_object_begin(j, "peak_after");
            trj_hex(j, "comm", p_comm);
            trj_uint(j, "seq", p_seq);
            trj_object_end(j);
        } else {
            trj_null(j, "peak_after");
        }
        trj_object_end(j);
    }
    trj_array_end(j);

    mt_write_counters(j, "pinned", device >= 0 && device < MT_MAX_DEVICES ? &mt_pinned_dev[device]
                                                                            : &mt_pinned_all);

    /* The first MT_FAIL_HEAD failures and the last MT_FAIL_TAIL, in order;
     * with a device, that device's and those of unknown device. */
    uint64_t total = atomic_load_explicit(&mt_fail_count, memory_order_acquire);
    uint64_t of_view = device < 0 ? total
                       : atomic_load_explicit(&mt_failures_nodev, memory_order_relaxed) +
                             (device < MT_MAX_DEVICES
                                  ? atomic_load_explicit(&mt_devs[device].failures, memory_order_relaxed)
                                  : 0);
    uint64_t listed = 0;
    trj_array_begin(j, "failures");
    uint64_t head_end = total < MT_FAIL_HEAD ? total : MT_FAIL_HEAD;
    uint64_t tail_start = total > MT_FAIL_HEAD + MT_FAIL_TAIL ? total - MT_FAIL_TAIL : head_end;
    for (uint64_t n = 0; n < total; n = n + 1 == head_end ? tail_start : n + 1) {
        mt_failure f;
        if (!mt_fail_get(n, &f))
            continue;
        if (device >= 0 && mt_device_ok(f.device) && f.device != device)
            continue;
        mt_write_failure(j, &f);
        listed++;
    }
    trj_array_end(j);
    trj_uint(j, "failures_dropped", of_view > listed ? of_view - listed : 0);

    trj_object_end(j);
}
