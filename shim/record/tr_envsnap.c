/* The environment NCCL and the frameworks read (tr_core.h, "environment"),
 * as it was when each communicator was created: taken from the process's
 * live environment (`environ`), so that what Python set before init
 * (os.environ["NCCL_ALGO"] = ...) is there, unlike /proc/self/environ,
 * which holds only what the process started with.
 *
 * A snapshot is the variables of g_prefixes/g_names, sorted by name, each
 * value redacted (tr_redact.c) before it is kept: secrets never reach the
 * trace. Snapshots are kept only when they differ from the one before
 * (a hash of the text), so a job creating thousands of communicators in
 * the same environment keeps one. The trace's "env" is the snapshot of the
 * first communicator (the live environment at the write when there is
 * none), "env_changes" what later communicators saw differently. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tr_core.h"
#include "tr_envsnap.h"

extern char **environ;

static const char *const g_prefixes[] = {"NCCL_", "TORCH_", "PYTORCH_", "CUDA_", "CUBLAS_", "CUDNN_", "NVIDIA_",
                                         "FI_", "UCX_", "OMPI_MCA_", "OMPI_COMM_WORLD_", "MASTER_", "TRSHIM_",
                                         "TORCHELASTIC_", "DS_", "DEEPSPEED_", "NVSHMEM_", "PMIX_", "PMI_"};
/* the launchers' own, by full name (SLURM_ has a hundred more) */
static const char *const g_names[] = {"RANK",          "WORLD_SIZE",    "LOCAL_RANK",       "LOCAL_WORLD_SIZE",
                                      "GROUP_RANK",    "ROLE_RANK",     "NODE_RANK",        "CROSS_RANK",
                                      "CROSS_SIZE",    "LOCAL_SIZE",    "SLURM_JOB_ID",     "SLURM_STEP_ID",
                                      "SLURM_PROCID",  "SLURM_LOCALID", "SLURM_NTASKS",     "SLURM_NODEID",
                                      "SLURM_JOB_NUM_NODES", "SLURM_CPUS_PER_TASK", "SLURM_JOB_NAME",
                                      "KUBERNETES_SERVICE_HOST", "OMP_NUM_THREADS", "LD_PRELOAD"};

#define MAX_SNAPS 64
typedef struct {
    uint64_t comm;          /* the communicator that saw it first (0: not known) */
    uint64_t hash;
    char **vars;            /* "NAME=value", sorted */
    int n;
} snapshot;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static snapshot g_snaps[MAX_SNAPS];
static int g_nsnaps, g_dropped;
static uint64_t g_last_raw;             /* raw_hash at the last capture: unchanged, nothing to redo */

static int wanted(const char *var, size_t name_len)
{
    for (size_t i = 0; i < sizeof g_prefixes / sizeof g_prefixes[0]; i++)
        if (!strncmp(var, g_prefixes[i], strlen(g_prefixes[i]))) return 1;
    for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; i++)
        if (strlen(g_names[i]) == name_len && !strncmp(var, g_names[i], name_len)) return 1;
    return 0;
}

static int cmp_var(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The wanted variables of the live environment, redacted, sorted; NULL (n 0) when none or no memory. */
static char **take(int *n)
{
    *n = 0;
    int cap = 0;
    char **out = NULL;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !wanted(*e, (size_t)(eq - *e))) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 32;
            char **grown = realloc(out, (size_t)cap * sizeof *grown);
            if (!grown) break;
            out = grown;
        }
        size_t nl = (size_t)(eq - *e);
        char *value = tr_redact_name(*e, nl) ? strdup("<redacted>") : tr_redact_value(eq + 1);
        char *var = value ? malloc(nl + 2 + strlen(value)) : NULL;
        if (var) {
            memcpy(var, *e, nl + 1);
            strcpy(var + nl + 1, value);
            out[(*n)++] = tr_utf8_clean(var);
        }
        free(value);
    }
    if (*n > 1) qsort(out, (size_t)*n, sizeof *out, cmp_var);
    return out;
}

static void free_vars(char **vars, int n)
{
    for (int i = 0; i < n; i++) free(vars[i]);
    free(vars);
}

static uint64_t hash_vars(char **vars, int n)
{
    uint64_t h = 0;
    for (int i = 0; i < n; i++) h = tr_hash_bytes(h, vars[i], strlen(vars[i]) + 1);
    return h;
}

/* the wanted variables as they stand in environ (no copy, no redaction):
 * a job making thousands of communicators in one environment pays this only */
static uint64_t raw_hash(void)
{
    uint64_t h = 1;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq && wanted(*e, (size_t)(eq - *e))) h = tr_hash_bytes(h, *e, strlen(*e) + 1);
    }
    return h;
}

void tr_env_capture(uint64_t comm_id)
{
    uint64_t raw = raw_hash();
    pthread_mutex_lock(&g_mu);
    int same = g_nsnaps && raw == g_last_raw;
    g_last_raw = raw;
    pthread_mutex_unlock(&g_mu);
    if (same) return;
    int n;
    char **vars = take(&n);
    uint64_t h = hash_vars(vars, n);
    pthread_mutex_lock(&g_mu);
    if (g_nsnaps && g_snaps[g_nsnaps - 1].hash == h) {
        free_vars(vars, n);
    } else if (g_nsnaps == MAX_SNAPS) {
        g_dropped++;
        free_vars(vars, n);
    } else {
        g_snaps[g_nsnaps++] = (snapshot){.comm = comm_id, .hash = h, .vars = vars, .n = n};
    }
    pthread_mutex_unlock(&g_mu);
}

/* name=value's value when vars hold name, else NULL */
static const char *value_of(char **vars, int n, const char *var)
{
    size_t nl = strcspn(var, "=");
    for (int i = 0; i < n; i++)
        if (!strncmp(vars[i], var, nl + 1)) return vars[i] + nl + 1;
    return NULL;
}

static void write_vars(tr_json *j, const char *key, char **vars, int n)
{
    trj_object_begin(j, key);
    for (int i = 0; i < n; i++) {
        char *eq = strchr(vars[i], '=');
        *eq = 0;
        trj_str(j, vars[i], eq + 1);
        *eq = '=';
    }
    trj_object_end(j);
}

/* One snapshot's differences from the first. */
static void write_change(tr_json *j, const snapshot *first, const snapshot *s)
{
    trj_object_begin(j, NULL);
    char id[24];
    snprintf(id, sizeof id, "0x%llx", (unsigned long long)s->comm);
    if (s->comm) trj_str(j, "comm", id);
    else trj_null(j, "comm");
    trj_object_begin(j, "set");
    for (int i = 0; i < s->n; i++) {
        const char *was = value_of(first->vars, first->n, s->vars[i]);
        char *eq = strchr(s->vars[i], '=');
        if (was && !strcmp(was, eq + 1)) continue;
        *eq = 0;
        trj_str(j, s->vars[i], eq + 1);
        *eq = '=';
    }
    trj_object_end(j);
    trj_array_begin(j, "unset");
    for (int i = 0; i < first->n; i++) {
        if (value_of(s->vars, s->n, first->vars[i])) continue;
        char *eq = strchr(first->vars[i], '=');
        *eq = 0;
        trj_str(j, NULL, first->vars[i]);
        *eq = '=';
    }
    trj_array_end(j);
    trj_object_end(j);
}

void tr_env_write_json(tr_json *j)
{
    /* bounded: a fatal signal may have stopped the thread holding it in
     * tr_env_capture; then the live environment stands in */
    int locked = 0;
    for (int i = 0; i < 200 && !(locked = pthread_mutex_trylock(&g_mu) == 0); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (locked && g_nsnaps) {
        write_vars(j, "env", g_snaps[0].vars, g_snaps[0].n);
        trj_array_begin(j, "env_changes");
        for (int s = 1; s < g_nsnaps; s++) write_change(j, &g_snaps[0], &g_snaps[s]);
        trj_array_end(j);
        trj_int(j, "env_changes_dropped", g_dropped);
    } else {
        int n;
        char **vars = take(&n);
        write_vars(j, "env", vars, n);
        free_vars(vars, n);
        trj_array_begin(j, "env_changes");
        trj_array_end(j);
        trj_int(j, "env_changes_dropped", 0);
    }
    if (locked) pthread_mutex_unlock(&g_mu);
}
