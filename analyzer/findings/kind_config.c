/* config_mismatch: ranks of one job that run a different NCCL, CUDA or
 * framework version, or with different values of the variables that change
 * how NCCL works. Every rank must agree on algorithm, protocol, transports
 * and buffer sizes; a rank with another NCCL_ALGO or NCCL_PROTO, another
 * NCCL_IB_* or NCCL_NET_* setting, or another NCCL, can hang collectives
 * that look right on every side, or slow the whole job down silently.
 *
 * Compared, per rank, over the traces that carry an environment: the
 * versions ("system": nccl, cuda_runtime, cuda_driver, and the packages
 * torch, deepspeed, colossalai...; the integers of "versions" for older
 * traces), and every NCCL_* and TORCH_NCCL_* variable of "env" (as when
 * the first communicator was made) except those that only change logging
 * or dumps (g_benign); a variable set on some ranks only differs too. For
 * each item the most common value is the job's (a tie: the value of the
 * lowest rank); the ranks with another value are the odd ones. One finding
 * names every item that differs (the first MAX_ITEMS in its message, all
 * in --json) with the odd ranks as culprits. When the job hung, the
 * finding says it may explain the hang. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_tx.h"

#define MAX_ITEMS 8

/* NCCL variables that change only what NCCL prints or dumps */
static const char *const g_benign[] = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
                                       "NCCL_DEBUG_TIMESTAMP_FORMAT", "NCCL_TOPO_DUMP_FILE",
                                       "NCCL_GRAPH_DUMP_FILE", "NCCL_DEBUG_TIMESTAMP_LEVELS"};

typedef struct {
    char *name;              /* "NCCL_ALGO", "nccl version", "torch version" */
    char *usual;             /* the job's value ("(unset)" for a variable most ranks lack) */
    int *odd; int nodd;      /* ranks with another value */
    char *odd_value;         /* the first odd rank's value */
    int nvalues;             /* distinct values */
} ta_cfgitem;

typedef struct {
    ta_cfgitem *it; int n;
} ta_cfgmis;

static int compared_var(const char *var)
{
    if (strncmp(var, "NCCL_", 5) != 0 && strncmp(var, "TORCH_NCCL_", 11) != 0) return 0;
    size_t nl = strcspn(var, "=");
    for (size_t i = 0; i < sizeof g_benign / sizeof g_benign[0]; i++)
        if (strlen(g_benign[i]) == nl && !strncmp(var, g_benign[i], nl)) return 0;
    return 1;
}

/* the value of item name on trace t (NULL: not known on this rank, not compared) */
typedef const char *(*value_fn)(const ta_trace *t, const char *name, char *buf, size_t cap);

static const char *var_value(const ta_trace *t, const char *name, char *buf, size_t cap)
{
    (void)buf; (void)cap;
    if (!t->nenv && !t->sys.present) return NULL;     /* no environment recorded */
    const char *v = ta_env_value(t, name, strlen(name));
    return v ? v : "(unset)";
}

static const char *version_value(const ta_trace *t, const char *name, char *buf, size_t cap)
{
    const ta_system *s = &t->sys;
    if (!strcmp(name, "NCCL version")) {
        /* an older trace's integer written as the shim writes "system" ("2.28.9"): comparable */
        if (s->nccl) return s->nccl;
        if (t->v_nccl == TA_NULL64 || t->v_nccl <= 0) return NULL;
        char *v = ta_nccl_version_text(t->v_nccl);
        snprintf(buf, cap, "%s", v);
        free(v);
        return buf;
    }
    if (!strcmp(name, "CUDA runtime version")) {
        if (s->cuda_runtime) return s->cuda_runtime;       /* "13.0", as the shim writes it */
        if (t->v_cuda_rt == TA_NULL64 || t->v_cuda_rt <= 0) return NULL;
        snprintf(buf, cap, "%lld.%lld", (long long)(t->v_cuda_rt / 1000), (long long)(t->v_cuda_rt % 1000 / 10));
        return buf;
    }
    if (!strcmp(name, "CUDA driver version")) return s->cuda_driver;
    /* "<package> version" */
    size_t pl = strlen(name) - strlen(" version");
    if (!s->present) return NULL;
    for (int i = 0; i < s->npackages; i++)
        if (!strncmp(s->packages[i], name, pl) && s->packages[i][pl] == '=') return s->packages[i] + pl + 1;
    return "(not loaded)";
}

/* compares item name across the traces; adds it to m when ranks differ */
static void compare(ta_an *a, ta_cfgmis *m, const char *name, value_fn fn)
{
    const char **val = xcalloc((size_t)a->ntr + 1, sizeof *val);
    char (*buf)[32] = xcalloc((size_t)a->ntr + 1, sizeof *buf);
    const char *distinct[64];
    int count[64], nd = 0, known = 0;
    for (int i = 0; i < a->ntr; i++) {
        if (!a->tr[i]) continue;
        val[i] = fn(a->tr[i], name, buf[i], sizeof buf[i]);
        if (!val[i]) continue;
        known++;
        int d = 0;
        while (d < nd && strcmp(distinct[d], val[i])) d++;
        if (d == nd && nd < 64) { distinct[nd] = val[i]; count[nd++] = 0; }
        if (d < nd) count[d]++;
    }
    if (nd > 1 && known > 1) {
        int best = 0;    /* the most common; ties: the first seen, the lowest rank's */
        for (int d = 1; d < nd; d++) if (count[d] > count[best]) best = d;
        ta_cfgitem it = {.name = xstrdup(name), .usual = xstrdup(distinct[best]), .nvalues = nd};
        it.odd = xcalloc((size_t)a->ntr + 1, sizeof *it.odd);
        for (int i = 0; i < a->ntr; i++) {
            if (!val[i] || !strcmp(val[i], distinct[best])) continue;
            if (!it.odd_value) it.odd_value = xstrdup(val[i]);
            it.odd[it.nodd++] = a->tr[i]->rank;
        }
        ta_ints_sort(it.odd, it.nodd);
        m->it = xrealloc(m->it, sizeof *m->it * (size_t)(m->n + 1));
        m->it[m->n++] = it;
    }
    free(val);
    free(buf);
}

static int cmp_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* the names of every compared variable or package on any rank, sorted, unique */
static char **names_of(ta_an *a, int packages, int *n)
{
    int cap = 0;
    char **out = NULL;
    *n = 0;
    for (int i = 0; i < a->ntr; i++) {
        const ta_trace *t = a->tr[i];
        if (!t) continue;
        int cnt = packages ? t->sys.npackages : t->nenv;
        for (int k = 0; k < cnt; k++) {
            const char *v = packages ? t->sys.packages[k] : t->env[k];
            if (!packages && !compared_var(v)) continue;
            if (*n == cap) { cap = cap ? 2 * cap : 32; out = xrealloc(out, sizeof *out * (size_t)cap); }
            out[(*n)++] = packages ? xasprintf("%.*s version", (int)strcspn(v, "="), v)
                                   : xasprintf("%.*s", (int)strcspn(v, "="), v);
        }
    }
    if (*n) qsort(out, (size_t)*n, sizeof *out, cmp_str);
    int u = 0;
    for (int k = 0; k < *n; k++) {
        if (u && !strcmp(out[u - 1], out[k])) { free(out[k]); continue; }
        out[u++] = out[k];
    }
    *n = u;
    return out;
}

static int hung(const ta_an *a)
{
    for (int i = 0; i < a->nf; i++)
        if (a->f[i].root && a->f[i].nmem > 0) return 1;
    return 0;
}

void ta_detect_config(ta_an *a, int look)
{
    if (look != TA_LOOK_CALLS || a->ntr < 2) return;
    ta_cfgmis m = {0};
    static const char *const versions[] = {"NCCL version", "CUDA runtime version", "CUDA driver version"};
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) compare(a, &m, versions[v], version_value);
    int n;
    char **names = names_of(a, 1, &n);
    for (int k = 0; k < n; k++) { compare(a, &m, names[k], version_value); free(names[k]); }
    free(names);
    int nversions = m.n;
    names = names_of(a, 0, &n);
    for (int k = 0; k < n; k++) { compare(a, &m, names[k], var_value); free(names[k]); }
    free(names);
    if (!m.n) return;

    ta_finding *f = ta_finding_new(a, K_CONFIG);
    f->subkind = nversions ? SK_VERSION : SK_ENV;
    f->data = xcalloc(1, sizeof m);
    *(ta_cfgmis *)f->data = m;
    /* culprits: every odd rank of any item */
    int *r = xcalloc((size_t)a->ntr + 1, sizeof *r), nr = 0;
    for (int i = 0; i < m.n; i++)
        for (int k = 0; k < m.it[i].nodd; k++) {
            int dup = 0;
            for (int j = 0; j < nr && !dup; j++) dup = r[j] == m.it[i].odd[k];
            if (!dup) r[nr++] = m.it[i].odd[k];
        }
    ta_ints_sort(r, nr);
    int rep = -1;
    for (int i = 0; i < a->ntr && rep < 0; i++) if (a->tr[i] && a->tr[i]->rank == r[0]) rep = i;
    ta_side_set(&f->culprit, r, nr, rep, -1);
    free(r);
    /* the message: each item, "NCCL_ALGO=Tree on rank 3 (the others: Ring)" */
    size_t cap = 256, len = 0;
    char *msg = xcalloc(cap, 1);
    for (int i = 0; i < m.n && i < MAX_ITEMS; i++) {
        const ta_cfgitem *it = &m.it[i];
        char *rt = ta_ranks_text(it->odd, it->nodd);
        char *part = xasprintf("%s%s is %s on rank%s %s, %s on the others%s", i ? "; " : "", it->name,
                               it->odd_value, it->nodd > 1 ? "s" : "", rt, it->usual,
                               it->nvalues > 2 ? " (more values: see --json)" : "");
        size_t pl = strlen(part);
        if (len + pl + 1 > cap) { cap = 2 * (len + pl + 1); msg = xrealloc(msg, cap); }
        memcpy(msg + len, part, pl + 1);
        len += pl;
        free(part);
        free(rt);
    }
    if (m.n > MAX_ITEMS) {
        char *more = xasprintf("%s; and %d more", msg, m.n - MAX_ITEMS);
        free(msg);
        msg = more;
    }
    f->message = xasprintf("%s%s", msg, hung(a) ? " (this may explain the hang: every rank must run the same NCCL "
                                                  "with the same settings)" : "");
    free(msg);
    f->hint = xstrdup("give every rank the same NCCL, CUDA and framework versions and the same NCCL_* settings "
                      "(the launcher's environment, the container image, per-node profiles)");
}

void ta_json_config(ta_jw *w, ta_an *a, const ta_finding *f)
{
    (void)a;
    const ta_cfgmis *m = f->data;
    if (!m) return;
    jw_key(w, "mismatches");
    jw_open(w, '[');
    for (int i = 0; i < m->n; i++) {
        const ta_cfgitem *it = &m->it[i];
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "name", it->name);
        jw_str(w, "value", it->usual);
        jw_str(w, "odd_value", it->odd_value);
        jw_ints(w, "odd_ranks", it->odd, it->nodd);
        jw_int(w, "values", it->nvalues);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

void ta_text_config(ta_tx *x, const ta_finding *f) { ta_tx_head(x, f, ""); }

void ta_drop_config(void *data)
{
    ta_cfgmis *m = data;
    for (int i = 0; i < m->n; i++) { free(m->it[i].name); free(m->it[i].usual); free(m->it[i].odd); free(m->it[i].odd_value); }
    free(m->it);
    free(m);
}
