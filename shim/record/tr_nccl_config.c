/* The per-call configurations of the *Config collectives (NCCL 2.31+:
 * ncclAllReduceConfig(..., const ncclCollConfig_t *config)): the fields
 * that matter for a diagnosis (CTA bounds, algorithm selection, CTA
 * policy, the profiler tag), each distinct one stored once — a training
 * loop passes the same config every step. NCCL requires the same config on
 * every rank; tranalyze compares them.
 *
 * A config is read like NCCL reads it: nothing unless its magic is NCCL's,
 * and a field only when the struct's declared size covers it (older
 * headers build smaller structs). Lock-free: a slot is claimed with one
 * atomic add and published by a release store of its key; two threads
 * storing the same new config at once make two equal entries, which is
 * harmless. */
#include <stddef.h>
#include <string.h>

#include "tr_core.h"
#include "tr_nccl_int.h"

#define MAX_CONFIGS 256
#define ALG_MAX 64

typedef struct {
    _Atomic uint64_t key;         /* content hash | 1 once published, 0 before */
    trr_collconfig c;
    char alg[ALG_MAX];
} config_slot;

static config_slot g_cfg[MAX_CONFIGS];
static atomic_uint g_ncfg;        /* slots claimed */
static atomic_int g_full_warned;

#define HAS(cfg, field) ((cfg)->size >= offsetof(ncclCollConfig_t, field) + sizeof(cfg)->field)
#define UNSET INT32_MIN

static void read_config(const ncclCollConfig_t *cfg, trr_collconfig *c, char *alg)
{
    *c = (trr_collconfig){.min_ctas = UNSET, .max_ctas = UNSET, .nvls_ctas = UNSET, .cga_cluster_size = UNSET,
                          .force_alg = UNSET, .cta_policy = UNSET};
    alg[0] = 0;
    if (!cfg) {
        c->is_null = 1;
        return;
    }
    if (cfg->magic != NCCL_API_MAGIC) {               /* NCCL rejects it; nothing is trusted */
        c->is_null = 2;
        return;
    }
    if (HAS(cfg, minCTAs)) c->min_ctas = cfg->minCTAs;
    if (HAS(cfg, maxCTAs)) c->max_ctas = cfg->maxCTAs;
    if (HAS(cfg, nvlsCTAs)) c->nvls_ctas = cfg->nvlsCTAs;
    if (HAS(cfg, cgaClusterSize)) c->cga_cluster_size = cfg->cgaClusterSize;
    if (HAS(cfg, CTAPolicy)) c->cta_policy = cfg->CTAPolicy;
    if (HAS(cfg, userProfilerTag)) c->user_tag = cfg->userProfilerTag;
    if (HAS(cfg, algSelection) && cfg->algSelection && cfg->algSelection[0]) {
        /* printable ASCII only, bounded: it goes into JSON and text */
        size_t n = 0;
        for (const char *p = cfg->algSelection; *p && n < ALG_MAX - 1; p++)
            alg[n++] = *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\' ? *p : '?';
        alg[n] = 0;
        c->alg_len = (uint32_t)n + 1;
        if (HAS(cfg, forceAlgSelection)) c->force_alg = cfg->forceAlgSelection;
    }
}

uint32_t tr_config_note(const ncclCollConfig_t *config)
{
    trr_collconfig c;
    char alg[ALG_MAX];
    read_config(config, &c, alg);
    uint64_t key = tr_hash_bytes(tr_hash_bytes(7, &c, sizeof c), alg, c.alg_len) | 1;
    uint32_t n = atomic_load_explicit(&g_ncfg, memory_order_acquire);
    if (n > MAX_CONFIGS) n = MAX_CONFIGS;
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load_explicit(&g_cfg[i].key, memory_order_acquire) == key) return i + 1;
    uint32_t i = atomic_fetch_add(&g_ncfg, 1);
    if (i >= MAX_CONFIGS) {
        if (!atomic_exchange(&g_full_warned, 1))
            tr_warn("more than %d distinct collective configs: later ones are not recorded", MAX_CONFIGS);
        return 0;
    }
    c.index = i;
    g_cfg[i].c = c;
    memcpy(g_cfg[i].alg, alg, sizeof alg);
    tr_ring_add_blob(TRR_BLOB_COLLCONFIG, &c, sizeof c, alg, c.alg_len);
    atomic_store_explicit(&g_cfg[i].key, key, memory_order_release);
    return i + 1;
}

static void int_field(tr_json *j, const char *name, int32_t v)
{
    if (v != UNSET) trj_int(j, name, v);
}

void tr_config_write_json(tr_json *j)
{
    uint32_t n = atomic_load_explicit(&g_ncfg, memory_order_acquire);
    if (n > MAX_CONFIGS) n = MAX_CONFIGS;
    trj_array_begin(j, "coll_configs");
    for (uint32_t i = 0; i < n; i++) {
        trj_object_begin(j, NULL);
        /* a slot claimed but not yet published is written as unknown */
        if (!atomic_load_explicit(&g_cfg[i].key, memory_order_acquire)) {
            trj_bool(j, "unknown", 1);
            trj_object_end(j);
            continue;
        }
        const trr_collconfig *c = &g_cfg[i].c;
        if (c->is_null == 1) trj_bool(j, "null", 1);
        if (c->is_null == 2) trj_bool(j, "invalid", 1);
        int_field(j, "minCTAs", c->min_ctas);
        int_field(j, "maxCTAs", c->max_ctas);
        int_field(j, "nvlsCTAs", c->nvls_ctas);
        int_field(j, "cgaClusterSize", c->cga_cluster_size);
        if (c->alg_len) trj_str(j, "algSelection", g_cfg[i].alg);
        int_field(j, "forceAlgSelection", c->force_alg);
        int_field(j, "CTAPolicy", c->cta_policy);
        if (c->user_tag) trj_uint(j, "userProfilerTag", c->user_tag);
        trj_object_end(j);
    }
    trj_array_end(j);
}
