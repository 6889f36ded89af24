/* The ring header's memory mirror (shim/ring/tr_ring_live.c, trr_mem), checked
 * by unit_memory.c against the trace's "memory" object: every device the
 * JSON lists has its header slot with exactly the same live, peak,
 * allocations, frees and peak time, and every slot with allocations is
 * listed. The header is the stand-ins' (standins.c: tr_ring_header). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "tr_ring_int.h"
#include "unit_mirror.h"

static double field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

#define MCHECK(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); bad++; } } while (0)

int mirror_check(const cJSON *m, int view)
{
    int bad = 0, listed[TR_RING_MEM_LOOKUP] = {0};
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(m, "devices")) {
        int dev = (int)field(d, "device");
        if (dev < 0 || dev >= TR_RING_MEM_LOOKUP) continue;
        listed[dev] = 1;
        const trr_mem *s = tr_ring_mem_of[dev];
        MCHECK(s && s->used == 1 && s->device == dev, "device %d has no header slot", dev);
        if (!s) continue;
        MCHECK(s->live == (uint64_t)field(d, "live_bytes") && s->peak == (uint64_t)field(d, "peak_bytes") &&
               s->allocs == (uint64_t)field(d, "allocs") && s->frees == (uint64_t)field(d, "frees") &&
               s->peak_ns == (uint64_t)field(d, "peak_ns"),
               "device %d: header live %llu peak %llu allocs %llu frees %llu peak_ns %llu, JSON %s", dev,
               (unsigned long long)s->live, (unsigned long long)s->peak, (unsigned long long)s->allocs,
               (unsigned long long)s->frees, (unsigned long long)s->peak_ns, cJSON_PrintUnformatted(d));
    }
    const trr_header *h = tr_ring_header();
    for (int k = 0; k < TRR_MEM_DEVICES; k++) {
        const trr_mem *s = &h->mem[k];
        if (!s->used || (view >= 0 && s->device != view)) continue;
        MCHECK(s->device >= 0 && s->device < TR_RING_MEM_LOOKUP && tr_ring_mem_of[s->device] == s,
               "slot %d: device %d is not looked up there", k, s->device);
        MCHECK(!s->allocs || (s->device < TR_RING_MEM_LOOKUP && listed[s->device]),
               "slot %d: device %d with %llu allocations is not in the JSON", k, s->device,
               (unsigned long long)s->allocs);
    }
    MCHECK(h->mem_devices_dropped == 0, "%llu devices without a slot", (unsigned long long)h->mem_devices_dropped);
    return bad;
}

int mirror_check_failure(int device, uint64_t failures, const cJSON *first)
{
    int bad = 0;
    const trr_mem *s = device >= 0 && device < TR_RING_MEM_LOOKUP ? tr_ring_mem_of[device] : NULL;
    MCHECK(s && s->used == 1 && s->device == device, "device %d has no header slot", device);
    if (!s) return bad;
    const cJSON *api = cJSON_GetObjectItemCaseSensitive(first, "api");
    uint64_t fr = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(first, "free_bytes"))
                      ? UINT64_MAX : (uint64_t)field(first, "free_bytes");
    uint64_t tot = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(first, "total_bytes"))
                       ? UINT64_MAX : (uint64_t)field(first, "total_bytes");
    MCHECK(s->failures == failures && s->fail_ns == (uint64_t)field(first, "t_ns") && s->fail_ns != 0 &&
               s->fail_bytes == (uint64_t)field(first, "bytes") && s->fail_live == (uint64_t)field(first, "live_bytes") &&
               s->fail_free == fr && s->fail_total == tot && s->fail_code == (int)field(first, "error_code") &&
               s->fail_stack == (int)field(first, "stack") && s->fail_pystack == (int)field(first, "pystack") &&
               cJSON_IsString(api) && !strcmp(s->fail_api, api->valuestring),
           "device %d: header failures %llu, first %s of %llu bytes (live %llu, free %llu, total %llu, code %d, "
           "stack %d, pystack %d, at %llu); expected %llu failures, the first %s", device,
           (unsigned long long)s->failures, s->fail_api, (unsigned long long)s->fail_bytes,
           (unsigned long long)s->fail_live, (unsigned long long)s->fail_free, (unsigned long long)s->fail_total,
           s->fail_code, s->fail_stack, s->fail_pystack, (unsigned long long)s->fail_ns,
           (unsigned long long)failures, cJSON_PrintUnformatted(first));
    return bad;
}

int mirror_check_unused(void)
{
    int bad = 0;
    const trr_header *h = tr_ring_header();
    for (int k = 0; k < TRR_MEM_DEVICES; k++)
        MCHECK(h->mem[k].used == 0 && h->mem[k].allocs == 0 && h->mem[k].failures == 0, "slot %d used", k);
    return bad;
}
