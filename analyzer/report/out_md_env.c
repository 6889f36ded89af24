/* --markdown's ### System and ### Environment (out_md.c writes the rest;
 * out_md_int.h): the versions a maintainer asks for first, as PyTorch's
 * collect_env and DeepSpeed's ds_report print them, once when every rank
 * agrees, else each value with its ranks; the command line and the
 * environment variables. */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "model/ta_model.h"
#include "out_md_int.h"

/* ---- the environment ------------------------------------------------------------------- */
/* one rank's value of a variable or of a version: name[0, nl) = val */
typedef struct { const char *name; size_t nl; const char *val; int tr; } kv;

static int cmp_kv(const void *x, const void *y)
{
    const kv *p = x, *q = y;
    size_t n = p->nl < q->nl ? p->nl : q->nl;
    int c = memcmp(p->name, q->name, n);
    if (c) return c;
    if (p->nl != q->nl) return p->nl < q->nl ? -1 : 1;
    c = strcmp(p->val, q->val);
    return c ? c : (p->tr > q->tr) - (p->tr < q->tr);
}

typedef struct { const char *val; int *r; int n; } vgroup;   /* one value and its ranks; val NULL: not set */
static int cmp_vgroup(const void *x, const void *y)
{
    const vgroup *p = x, *q = y;
    if (p->n != q->n) return p->n > q->n ? -1 : 1;
    return (p->r[0] > q->r[0]) - (p->r[0] < q->r[0]);
}

/* the values of one name, kvs v[0, n) sorted by value then trace: groups, most ranks first, with
 * the ranks that lack it as a group of val NULL; returns their number */
static int value_groups(ta_an *a, const kv *v, int n, vgroup **out)
{
    vgroup *g = xcalloc((size_t)n + 2, sizeof *g);
    int ng = 0;
    char *has = xcalloc((size_t)a->ntr + 1, 1);
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && !strcmp(v[j].val, v[i].val)) j++;
        g[ng].val = v[i].val;
        g[ng].r = xmalloc(sizeof(int) * (size_t)(j - i));
        for (int k = i; k < j; k++)
            if (!has[v[k].tr]) { has[v[k].tr] = 1; g[ng].r[g[ng].n++] = a->tr[v[k].tr]->rank; }
        if (g[ng].n) ng++;
        else free(g[ng].r);
        i = j;
    }
    int unset = 0;
    for (int i = 0; i < a->ntr; i++) unset += !has[i];
    if (unset) {
        g[ng].r = xmalloc(sizeof(int) * (size_t)unset);
        for (int i = 0; i < a->ntr; i++) if (!has[i]) g[ng].r[g[ng].n++] = a->tr[i]->rank;
        ng++;
    }
    free(has);
    qsort(g, (size_t)ng, sizeof *g, cmp_vgroup);
    *out = g;
    return ng;
}
static void free_groups(vgroup *g, int ng)
{
    for (int k = 0; k < ng; k++) free(g[k].r);
    free(g);
}

/* "2.28.9 on 1022 ranks; 2.27.3 on ranks 5, 9; ... and 2 more values" */
static void values_text(FILE *f, const vgroup *g, int ng, int ntr, int code, size_t max, int nmax)
{
    for (int k = 0; k < ng && k <= nmax; k++) {
        if (k) fputs("; ", f);
        if (!g[k].val) fputs("(not known)", f);
        else if (code) ta_md_code(f, g[k].val, strlen(g[k].val), max, 0);
        else ta_md_text(f, g[k].val, max, 0);
        if (!k && 2 * g[k].n > ntr) fprintf(f, " on %d ranks", g[k].n);   /* most of them */
        else {
            char *rt = ta_md_ranks(g[k].r, g[k].n, MD_CELL_ELEMS);
            fprintf(f, " on rank%s %s", g[k].n > 1 ? "s" : "", rt);
            free(rt);
        }
    }
    if (ng > nmax + 1) fprintf(f, "; ... and %d more values", ng - nmax - 1);
}

static char *cuda_version_text(int64_t v)
{
    if (v == TA_NULL64 || v <= 0) return NULL;
    return xasprintf("%lld.%lld", (long long)(v / 1000), (long long)(v % 1000 / 10));
}

/* a package's version in a trace's system.packages ("name=version"), NULL */
static const char *package_of(const ta_trace *t, const char *name, size_t nl)
{
    for (int k = 0; k < t->sys.npackages; k++)
        if (!strncmp(t->sys.packages[k], name, nl) && t->sys.packages[k][nl] == '=') return t->sys.packages[k] + nl + 1;
    return NULL;
}

/* "- label value", once when every rank that has one agrees (code: as code), else "- label differs:
 * v1 on 6 ranks; v2 on ranks 3, 7" (a rank without one: "(not known)"); nothing when no rank has
 * one. vals: per trace, NULL none */
static void item_line(ta_an *a, FILE *f, const char *label, char **vals, int code, size_t max)
{
    kv *v = xmalloc(sizeof *v * ((size_t)a->ntr + 1));
    int n = 0;
    for (int i = 0; i < a->ntr; i++)
        if (vals[i]) v[n++] = (kv){label, 0, vals[i], i};
    if (n) {
        qsort(v, (size_t)n, sizeof *v, cmp_kv);
        vgroup *g;
        int ng = value_groups(a, v, n, &g);
        if (ng == 1) {
            fprintf(f, "- %s%s", label, code ? ": " : " ");
            if (code) ta_md_code(f, g[0].val, strlen(g[0].val), max, 0);
            else ta_md_text(f, g[0].val, max, 0);
        } else {
            fprintf(f, "- %s differs: ", label);
            int cmd = max > 160;        /* the command line */
            values_text(f, g, ng, a->ntr, code, cmd ? 160 : 60, cmd ? MD_ENV_VALUES : MD_SYS_VALUES);
        }
        fputc('\n', f);
        free_groups(g, ng);
    }
    free(v);
}

/* what collect_env and ds_report print first, in that order (then the GPUs, the other frameworks) */
enum { S_TORCH, S_DEEPSPEED, S_NCCL, S_NCCL_LIB, S_CUDA_RT, S_CUDA_DRV, S_KDRV, S_PYTHON, S_TRSHIM, S_N };
static const char *const s_label[S_N] = {"PyTorch", "DeepSpeed", "NCCL", "NCCL library", "CUDA runtime", "CUDA driver",
                                         "NVIDIA kernel driver", "Python", "trshim"};

static char *system_of(const ta_trace *t, int item)
{
    const ta_system *y = &t->sys;
    const char *p;
    switch (item) {
    case S_TORCH: return (p = package_of(t, "torch", 5)) ? xstrdup(p) : NULL;
    case S_DEEPSPEED: return (p = package_of(t, "deepspeed", 9)) ? xstrdup(p) : NULL;
    case S_NCCL: {
        /* the loaded library's (trace "nccl"), else "versions", else "system" */
        int64_t v = t->has_nccl && t->nccl_version > 0 ? t->nccl_version : t->v_nccl != TA_NULL64 ? t->v_nccl : 0;
        return v > 0 ? ta_nccl_version_text(v) : y->nccl ? xstrdup(y->nccl) : NULL;
    }
    case S_NCCL_LIB: return t->has_nccl && t->nccl_lib ? xstrdup(t->nccl_lib) : NULL;
    case S_CUDA_RT: return y->cuda_runtime ? xstrdup(y->cuda_runtime) : cuda_version_text(t->v_cuda_rt);
    case S_CUDA_DRV: return y->cuda_driver ? xstrdup(y->cuda_driver) : cuda_version_text(t->v_cuda_drv);
    case S_KDRV: return y->kernel_driver ? xstrdup(y->kernel_driver) : NULL;
    case S_PYTHON: return t->py_version ? xstrdup(t->py_version) : NULL;
    case S_TRSHIM: return t->v_trshim ? xstrdup(t->v_trshim) : NULL;
    }
    return NULL;
}

/* one GPU of the job: its host and identity (UUID, else PCI bus id, else device number), its name */
typedef struct { const char *host, *id, *name; int device; } gpu_ref;
static int cmp_gpu(const void *x, const void *y)
{
    const gpu_ref *p = x, *q = y;
    int c = strcmp(p->host, q->host);
    if (!c) c = strcmp(p->id, q->id);
    return c ? c : (p->device > q->device) - (p->device < q->device);
}
static int cmp_name_count(const void *x, const void *y)
{
    const gpu_ref *p = x, *q = y;       /* (device: the count here) most first, then by name */
    if (p->device != q->device) return p->device > q->device ? -1 : 1;
    return strcmp(p->name, q->name);
}

/* "- GPUs: 8 x NVIDIA H100 80GB HBM3 on 2 hosts": the devices the ranks made communicators on
 * (system.gpus), each counted once (a process driving several lists them all in each rank's trace) */
static void gpus_line(ta_an *a, FILE *f)
{
    size_t total = 0;
    for (int i = 0; i < a->ntr; i++) total += (size_t)a->tr[i]->sys.ngpus;
    if (!total) return;
    gpu_ref *g = xmalloc(sizeof *g * total);
    size_t n = 0;
    for (int i = 0; i < a->ntr; i++)
        for (int k = 0; k < a->tr[i]->sys.ngpus; k++) {
            const ta_gpu *u = &a->tr[i]->sys.gpus[k];
            g[n++] = (gpu_ref){a->tr[i]->host ? a->tr[i]->host : "", u->uuid ? u->uuid : u->pci ? u->pci : "",
                               u->name ? u->name : "(name not known)", u->uuid || u->pci ? 0 : u->device};
        }
    qsort(g, n, sizeof *g, cmp_gpu);
    size_t m = 0;              /* distinct GPUs, then the hosts they are on */
    int hosts = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && !cmp_gpu(&g[i], &g[m - 1])) continue;
        hosts += !m || strcmp(g[i].host, g[m - 1].host);
        g[m++] = g[i];
    }
    /* by name: counts */
    gpu_ref *names = xmalloc(sizeof *names * m);
    size_t nn = 0;
    for (size_t i = 0; i < m; i++) {
        size_t k = 0;
        while (k < nn && strcmp(names[k].name, g[i].name)) k++;
        if (k == nn) names[nn++] = (gpu_ref){"", "", g[i].name, 0};
        names[k].device++;
    }
    qsort(names, nn, sizeof *names, cmp_name_count);
    fprintf(f, "- GPUs: %zu", m);
    for (size_t k = 0; k < nn && k < 4; k++) {
        fputs(nn == 1 ? " x " : k ? ", " : " (", f);
        if (nn > 1) fprintf(f, "%d x ", names[k].device);
        ta_md_text(f, names[k].name, 60, 0);
    }
    if (nn > 4) fprintf(f, ", ... and %zu more models", nn - 4);
    if (nn > 1) fputc(')', f);
    fprintf(f, " on %d host%s\n", hosts, hosts == 1 ? "" : "s");
    free(names);
    free(g);
}

static int cmp_cstr(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

void ta_md_system(ta_an *a, FILE *o)
{
    if (!a->ntr) return;
    mbuf m;
    FILE *f = ta_md_open(&m);
    fputs("### System\n\n", f);
    char **vals = xmalloc(sizeof(char *) * ((size_t)a->ntr + 1));
    for (int item = 0; item < S_N; item++) {
        for (int i = 0; i < a->ntr; i++) vals[i] = system_of(a->tr[i], item);
        item_line(a, f, s_label[item], vals, item == S_NCCL_LIB, 160);
        for (int i = 0; i < a->ntr; i++) free(vals[i]);
        if (item == S_KDRV) gpus_line(a, f);
    }
    /* the other frameworks the ranks loaded (system.packages), by name: MD_SYS_PACKAGES at most */
    size_t total = 0;
    for (int i = 0; i < a->ntr; i++) total += (size_t)a->tr[i]->sys.npackages;
    const char **pk = xmalloc(sizeof(char *) * (total + 1));
    size_t np = 0;
    for (int i = 0; i < a->ntr; i++)
        for (int k = 0; k < a->tr[i]->sys.npackages; k++) pk[np++] = a->tr[i]->sys.packages[k];
    qsort(pk, np, sizeof *pk, cmp_cstr);
    int shown = 0, more = 0;
    for (size_t i = 0; i < np; i++) {
        size_t nl = strcspn(pk[i], "=");
        if (i && strcspn(pk[i - 1], "=") == nl && !strncmp(pk[i - 1], pk[i], nl)) continue;
        if ((nl == 5 && !strncmp(pk[i], "torch", 5)) || (nl == 9 && !strncmp(pk[i], "deepspeed", 9))) continue;
        if (shown == MD_SYS_PACKAGES) { more++; continue; }
        char *label = xasprintf("%.*s", (int)(nl > 64 ? 64 : nl), pk[i]);
        for (int t = 0; t < a->ntr; t++) {
            const char *p = package_of(a->tr[t], pk[i], nl);
            vals[t] = p ? xstrdup(p) : NULL;
        }
        item_line(a, f, label, vals, 0, 80);
        for (int t = 0; t < a->ntr; t++) free(vals[t]);
        free(label);
        shown++;
    }
    if (more) fprintf(f, "- ... and %d more packages (`--json`: `ranks[].environment.system.packages`)\n", more);
    char *ck = ta_clocks_text(a);        /* how the ranks' clocks were put on one (clocks.c): last, the first the budget cuts */
    if (ck) ta_esc_fmt(f, TA_ESC_MD, "- %s\n", ck);
    free(ck);
    fputc('\n', f);
    free(pk);
    free(vals);
    ta_md_part(o, &m, B_SYS);
}

/* the command line */
static void versions(ta_an *a, FILE *f)
{
    char **vals = xmalloc(sizeof(char *) * ((size_t)a->ntr + 1));
    for (int i = 0; i < a->ntr; i++) vals[i] = a->tr[i]->cmdline ? xstrdup(a->tr[i]->cmdline) : NULL;
    item_line(a, f, "command", vals, 1, 300);
    for (int i = 0; i < a->ntr; i++) free(vals[i]);
    free(vals);
}

void ta_md_environment(ta_an *a, FILE *o)
{
    if (!a->ntr) return;
    mbuf m;
    FILE *f = ta_md_open(&m);
    fputs("### Environment\n\n", f);
    versions(a, f);
    fputc('\n', f);
    size_t total = 0;
    for (int i = 0; i < a->ntr; i++) total += (size_t)a->tr[i]->nenv;
    kv *v = xmalloc(sizeof *v * (total + 1));
    int n = 0;
    for (int i = 0; i < a->ntr; i++)
        for (int k = 0; k < a->tr[i]->nenv; k++) {
            const char *e = a->tr[i]->env[k], *eq = e ? strchr(e, '=') : NULL;
            if (!eq) continue;
            v[n++] = (kv){e, (size_t)(eq - e), eq + 1, i};
        }
    qsort(v, (size_t)n, sizeof *v, cmp_kv);
    /* each name: shared by every rank (one value), or not */
    mbuf sh, df;
    FILE *fs = ta_md_open(&sh), *fd = ta_md_open(&df);
    int nshared = 0, ndiff = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && v[j].nl == v[i].nl && !memcmp(v[j].name, v[i].name, v[i].nl)) j++;
        vgroup *g;
        int ng = value_groups(a, v + i, j - i, &g);
        if (ng == 1) {
            if (nshared++ < MD_ENV_SHARED) {
                fputs("| ", fs);
                ta_md_code(fs, v[i].name, v[i].nl, 64, 1);
                fputs(" | ", fs);
                ta_md_code(fs, g[0].val, strlen(g[0].val), 100, 1);
                fputs(" |\n", fs);
            }
        } else if (ndiff++ < MD_ENV_DIFF) {
            fputs("| ", fd);
            ta_md_code(fd, v[i].name, v[i].nl, 64, 1);
            fputs(" | ", fd);
            for (int k = 0; k < ng && k <= MD_ENV_VALUES; k++) {
                if (k > 1) fputs("; ", fd);
                if (g[k].val) ta_md_code(fd, g[k].val, strlen(g[k].val), k ? 60 : 100, 1);
                else fputs("(not set)", fd);
                if (!k && 2 * g[k].n > a->ntr) fprintf(fd, " on %d ranks", g[k].n);   /* most of them */
                else {
                    char *rt = ta_md_ranks(g[k].r, g[k].n, MD_CELL_ELEMS);
                    fprintf(fd, " on rank%s %s", g[k].n > 1 ? "s" : "", rt);
                    free(rt);
                }
                if (!k) fputs(" | ", fd);
            }
            if (ng > MD_ENV_VALUES + 1) fprintf(fd, "; ... and %d more values", ng - MD_ENV_VALUES - 1);
            fputs(" |\n", fd);
        }
        free_groups(g, ng);
        i = j;
    }
    ta_md_close(&sh);
    ta_md_close(&df);
    if (!n) fputs("No environment variables were recorded.\n\n", f);
    if (nshared) {
        fprintf(f, "<details><summary>Environment variables the same on every rank (%d)</summary>\n\n"
                "| variable | value |\n|---|---|\n", nshared);
        fwrite(sh.s, 1, sh.n, f);
        if (nshared > MD_ENV_SHARED) fprintf(f, "| ... | %d more |\n", nshared - MD_ENV_SHARED);
        fputs("\n</details>\n\n", f);
    }
    if (ndiff) {
        fprintf(f, "Environment variables that differ between ranks (%d):\n\n"
                "| variable | most common value | other values |\n|---|---|---|\n", ndiff);
        fwrite(df.s, 1, df.n, f);
        if (ndiff > MD_ENV_DIFF) fprintf(f, "| ... | %d more variables differ | |\n", ndiff - MD_ENV_DIFF);
        fputc('\n', f);
    } else if (n) {
        fputs("Every rank has the same environment variables.\n\n", f);
    }
    free(sh.s);
    free(df.s);
    free(v);
    ta_md_part(o, &m, B_ENV);
}

