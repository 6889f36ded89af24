/* The environment in --json (docs/analysis-format.md, "environment"):
 * what every rank shares once at the top ("environment": the variables
 * with the same value on every rank that recorded an environment), and per
 * rank only what differs from it, with the rank's system (versions,
 * devices, frameworks, launchers) and the changes later communicators saw.
 * Kept apart from the findings: a mismatch that matters is a
 * config_mismatch finding (kind_config.c). */
#include <stdlib.h>
#include <string.h>

#include "findings/ta_finding.h"
#include "ta_env.h"
#include "ta_out.h"

/* the shared variables: those of the first trace with an environment whose
 * "NAME=value" every other such trace has */
char **ta_env_shared(ta_an *a, int *n)
{
    *n = 0;
    const ta_trace *first = NULL;
    for (int i = 0; i < a->ntr && !first; i++) if (a->tr[i] && a->tr[i]->nenv) first = a->tr[i];
    if (!first) return NULL;
    char **out = xcalloc((size_t)first->nenv + 1, sizeof *out);
    for (int k = 0; k < first->nenv; k++) {
        int all = 1;
        for (int i = 0; i < a->ntr && all; i++) {
            const ta_trace *t = a->tr[i];
            if (!t || !t->nenv || t == first) continue;
            int has = 0;
            for (int j = 0; j < t->nenv && !has; j++) has = !strcmp(t->env[j], first->env[k]);
            all = has;
        }
        if (all) out[(*n)++] = first->env[k];
    }
    return out;
}

static void pair(ta_jw *w, const char *nv)
{
    size_t nl = strcspn(nv, "=");
    char *name = xasprintf("%.*s", (int)nl, nv);
    jw_str(w, name, nv[nl] ? nv + nl + 1 : "");
    free(name);
}

static int in_list(char **v, int n, const char *s)
{
    for (int i = 0; i < n; i++) if (!strcmp(v[i], s)) return 1;
    return 0;
}

void ta_json_env_shared(ta_jw *w, char **sh, int n)
{
    jw_key(w, "environment");
    jw_open(w, '{');
    for (int i = 0; i < n; i++) pair(w, sh[i]);
    jw_close(w, '}');
}

static void system_json(ta_jw *w, const ta_system *s)
{
    jw_key(w, "system");
    if (!s->present) { fputs("null", w->o); return; }
    jw_open(w, '{');
    jw_str(w, "nccl", s->nccl);
    jw_str(w, "cuda_runtime", s->cuda_runtime);
    jw_str(w, "cuda_driver", s->cuda_driver);
    jw_str(w, "kernel_driver", s->kernel_driver);
    jw_key(w, "gpus");
    jw_open(w, '[');
    for (int i = 0; i < s->ngpus; i++) {
        jw_sep(w);
        jw_open(w, '{');
        jw_int(w, "device", s->gpus[i].device);
        jw_str(w, "name", s->gpus[i].name);
        jw_str(w, "uuid", s->gpus[i].uuid);
        jw_str(w, "pci_bus_id", s->gpus[i].pci);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_key(w, "packages");
    jw_open(w, '{');
    for (int i = 0; i < s->npackages; i++) pair(w, s->packages[i]);
    jw_close(w, '}');
    jw_key(w, "launchers");
    jw_open(w, '[');
    for (int i = 0; i < s->nlaunchers; i++) {
        jw_sep(w);
        jw_open(w, '{');
        size_t nl = strcspn(s->launchers[i], "=");
        char *name = xasprintf("%.*s", (int)nl, s->launchers[i]);
        jw_str(w, "name", name);
        jw_str(w, "job_id", s->launchers[i][nl] ? s->launchers[i] + nl + 1 : NULL);
        free(name);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

void ta_json_env_rank(ta_jw *w, const ta_trace *t, char **sh, int n)
{
    jw_key(w, "environment");
    jw_open(w, '{');
    system_json(w, &t->sys);
    /* this rank's variables not shared by all, and the shared ones it lacks */
    jw_key(w, "env");
    jw_open(w, '{');
    for (int j = 0; j < t->nenv; j++) if (!in_list(sh, n, t->env[j])) pair(w, t->env[j]);
    jw_close(w, '}');
    jw_key(w, "unset");
    jw_open(w, '[');
    for (int i = 0; i < n && t->nenv; i++)
        if (!ta_env_value(t, sh[i], strcspn(sh[i], "="))) {
            char *name = xasprintf("%.*s", (int)strcspn(sh[i], "="), sh[i]);
            jw_sep(w);
            jw_string(w->o, name);
            free(name);
        }
    jw_close(w, ']');
    jw_key(w, "env_changes");
    jw_open(w, '[');
    for (int c = 0; c < t->nenvchg; c++) {
        const ta_envchg *e = &t->envchg[c];
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "comm", e->comm);
        jw_key(w, "set");
        jw_open(w, '{');
        for (int k = 0; k < e->nset; k++) pair(w, e->set[k]);
        jw_close(w, '}');
        jw_key(w, "unset");
        jw_open(w, '[');
        for (int k = 0; k < e->nunset; k++) { jw_sep(w); jw_string(w->o, e->unset[k]); }
        jw_close(w, ']');
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}
