/* What a bug report needs to know about the system (tr_sysinfo.h): the
 * trace's "system" object. Versions as people write them ("2.30.7",
 * "13.2"), the kernel driver's version (read from /proc, nothing
 * initialised), each device's name, UUID and PCI bus id (asked on the
 * application's thread when a communicator is made on it: the device is
 * in use then), the versions of the Python frameworks that are loaded and
 * the launchers that started the process.
 *
 * Framework versions never call the interpreter: the site folders come
 * from the paths of the loaded libraries (/proc/self/maps) and of the
 * Python code the stacks captured (tr_pystack_code_file), and a
 * framework's version from the name of its distribution's metadata folder
 * there (`torch-2.15.0.dist-info`), for the frameworks whose top-level
 * package one of those paths is in. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_core.h"
#include "tr_sysinfo.h"
#include "tr_stacks.h"

#define MAX_DEVICES 64
static struct {
    atomic_int state;                /* 0 not asked, 1 being asked, 2 known, 3 could not */
    char name[256];
    unsigned char uuid[16];
    char pci[32];
} g_dev[MAX_DEVICES];

void tr_sysinfo_note_device(int dev)
{
    if (dev < 0 || dev >= MAX_DEVICES) return;
    int expect = 0;
    if (!atomic_compare_exchange_strong(&g_dev[dev].state, &expect, 1)) return;
    int ok = tr_cuda_device_identity(dev, g_dev[dev].name, sizeof g_dev[dev].name, g_dev[dev].uuid, g_dev[dev].pci,
                                     sizeof g_dev[dev].pci);
    atomic_store(&g_dev[dev].state, ok ? 2 : 3);
}

/* ---- versions ----------------------------------------------------------------------- */

static void nccl_string(tr_json *j, const char *key, int v)
{
    char s[32];
    /* 2.9 and newer: major * 10000 + minor * 100 + patch; before: * 1000 and * 100 */
    if (v >= 20900) snprintf(s, sizeof s, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else if (v > 0) snprintf(s, sizeof s, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
    if (v > 0) trj_str(j, key, s);
    else trj_null(j, key);
}

static void cuda_string(tr_json *j, const char *key, int v)
{
    char s[32];
    snprintf(s, sizeof s, "%d.%d", v / 1000, v % 1000 / 10);
    if (v > 0) trj_str(j, key, s);
    else trj_null(j, key);
}

/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun ..." -> "580.65.06" */
static void kernel_driver(tr_json *j)
{
    char line[512] = "", *v = NULL;
    FILE *f = fopen("/proc/driver/nvidia/version", "re");
    if (f) {
        if (fgets(line, sizeof line, f)) {
            char *k = strstr(line, "Kernel Module");
            if (k) {
                k += strlen("Kernel Module");
                k += strspn(k, " \t");
                size_t n = strcspn(k, " \t\n");
                if (n) {
                    k[n] = 0;
                    v = k;
                }
            }
        }
        fclose(f);
    }
    if (v) trj_str(j, "kernel_driver", tr_utf8_clean(v));
    else trj_null(j, "kernel_driver");
}

static void devices(tr_json *j)
{
    trj_array_begin(j, "gpus");
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (atomic_load(&g_dev[d].state) != 2) continue;
        const unsigned char *u = g_dev[d].uuid;
        char uuid[64];
        snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
        trj_object_begin(j, NULL);
        trj_int(j, "device", d);
        trj_str(j, "name", tr_utf8_clean(g_dev[d].name));
        trj_str(j, "uuid", uuid);
        if (g_dev[d].pci[0]) trj_str(j, "pci_bus_id", tr_utf8_clean(g_dev[d].pci));
        else trj_null(j, "pci_bus_id");
        trj_object_end(j);
    }
    trj_array_end(j);
}

/* ---- frameworks --------------------------------------------------------------------- */

/* a top-level Python package and the distributions that install it
 * (names as in *.dist-info, '-' and '.' as '_', compared without case) */
static const struct {
    const char *package;
    const char *dists[4];
} g_frameworks[] = {
    {"torch", {"torch"}},
    {"deepspeed", {"deepspeed"}},
    {"colossalai", {"colossalai"}},
    {"megatron", {"megatron_core", "megatron_lm"}},
    {"nanotron", {"nanotron"}},
    {"transformers", {"transformers"}},
    {"accelerate", {"accelerate"}},
    {"flash_attn", {"flash_attn"}},
    {"apex", {"apex"}},
    {"triton", {"triton"}},
    {"vllm", {"vllm"}},
    {"sglang", {"sglang"}},
    {"lightning", {"lightning", "pytorch_lightning"}},
    {"nvidia", {"nvidia_nccl_cu13", "nvidia_nccl_cu12", "nvidia_nccl_cu11"}},
};
#define NFW (sizeof g_frameworks / sizeof g_frameworks[0])
#define MAX_SITES 16

typedef struct {
    char *site[MAX_SITES];       /* ".../site-packages" */
    unsigned used[MAX_SITES];    /* bit f: framework f loaded from this site */
    int nsites;
} sites;

/* path inside a site folder: note its site and the framework it is in */
static void note_path(sites *s, const char *path)
{
    static const char *const marks[] = {"/site-packages/", "/dist-packages/"};
    for (size_t m = 0; m < 2; m++) {
        const char *at = strstr(path, marks[m]);
        if (!at) continue;
        size_t site_len = (size_t)(at - path) + strlen(marks[m]) - 1;
        const char *top = at + strlen(marks[m]);
        size_t top_len = strcspn(top, "/");
        if (!top[top_len]) return;         /* a file of the site itself, in no package */
        int f = -1;
        for (size_t k = 0; k < NFW && f < 0; k++)
            if (strlen(g_frameworks[k].package) == top_len && !strncmp(top, g_frameworks[k].package, top_len))
                f = (int)k;
        if (f < 0) return;
        int i = 0;
        while (i < s->nsites && (strlen(s->site[i]) != site_len || strncmp(s->site[i], path, site_len))) i++;
        if (i == s->nsites) {
            if (s->nsites == MAX_SITES || !(s->site[i] = strndup(path, site_len))) return;
            s->used[i] = 0;
            s->nsites++;
        }
        s->used[i] |= 1u << f;
        return;
    }
}

static void loaded_paths(sites *s)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[4608];
    while (f && fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (!path) continue;
        path[strcspn(path, "\n")] = 0;
        note_path(s, path);
    }
    if (f) fclose(f);
    uint32_t n = tr_pystack_code_count();
    for (uint32_t i = 0; i < n; i++) {
        const char *file = tr_pystack_code_file(i);
        if (file) note_path(s, file);
    }
}

/* "torch-2.15.0.dist-info": does its distribution name match dist? the version then */
static const char *dist_version(const char *entry, const char *dist, char *ver, size_t cap)
{
    size_t n = strlen(entry), sfx = strlen(".dist-info");
    if (n <= sfx || strcmp(entry + n - sfx, ".dist-info") != 0) return NULL;
    const char *dash = memchr(entry, '-', n - sfx);
    if (!dash || (size_t)(dash - entry) != strlen(dist)) return NULL;
    for (size_t i = 0; i < strlen(dist); i++) {
        char c = entry[i] == '-' || entry[i] == '.' ? '_' : entry[i];
        if ((c | 0x20) != (dist[i] | 0x20)) return NULL;
    }
    snprintf(ver, cap, "%.*s", (int)(n - sfx - (size_t)(dash + 1 - entry)), dash + 1);
    return ver;
}

static void frameworks(tr_json *j)
{
    sites s = {.nsites = 0};
    loaded_paths(&s);
    trj_object_begin(j, "packages");
    for (int i = 0; i < s.nsites; i++) {
        DIR *d = opendir(s.site[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            for (size_t f = 0; f < NFW; f++) {
                if (!(s.used[i] & (1u << f))) continue;
                for (int k = 0; k < 4 && g_frameworks[f].dists[k]; k++) {
                    char ver[128];
                    if (!dist_version(e->d_name, g_frameworks[f].dists[k], ver, sizeof ver)) continue;
                    char name[256];
                    snprintf(name, sizeof name, "%.*s", (int)(strchr(e->d_name, '-') - e->d_name), e->d_name);
                    trj_str(j, tr_utf8_clean(name), tr_utf8_clean(ver));
                }
            }
        }
        if (d) closedir(d);
        free(s.site[i]);
    }
    trj_object_end(j);
}

/* ---- launchers ---------------------------------------------------------------------- */

static void launchers(tr_json *j)
{
    /* outermost first; the variable that names the launcher's job, if any */
    static const struct {
        const char *name, *marker, *job;
    } known[] = {
        {"k8s", "KUBERNETES_SERVICE_HOST", NULL},
        {"slurm", "SLURM_JOB_ID", "SLURM_JOB_ID"},
        {"mpi", "OMPI_COMM_WORLD_RANK", "OMPI_MCA_ess_base_jobid"},
        {"mpi", "PMI_RANK", NULL},
        {"mpi", "PMIX_RANK", "PMIX_NAMESPACE"},
        {"deepspeed", "CROSS_RANK", NULL},
        {"torchelastic", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RUN_ID"},
        {"trshim", "TRSHIM_JOB_ID", "TRSHIM_JOB_ID"},
    };
    trj_array_begin(j, "launchers");
    const char *last = "";
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (!getenv(known[i].marker) || !strcmp(last, known[i].name)) continue;
        last = known[i].name;
        trj_object_begin(j, NULL);
        trj_str(j, "name", known[i].name);
        const char *job = known[i].job ? getenv(known[i].job) : NULL;
        char *clean = job ? tr_redact_value(job) : NULL;
        if (clean) trj_str(j, "job_id", tr_utf8_clean(clean));
        else trj_null(j, "job_id");
        free(clean);
        trj_object_end(j);
    }
    trj_array_end(j);
}

void tr_sysinfo_write_json(tr_json *j, int nccl, int cuda_runtime, int cuda_driver)
{
    trj_object_begin(j, "system");
    nccl_string(j, "nccl", nccl);
    cuda_string(j, "cuda_runtime", cuda_runtime);
    cuda_string(j, "cuda_driver", cuda_driver);
    kernel_driver(j);
    devices(j);
    frameworks(j);
    launchers(j);
    trj_object_end(j);
}
