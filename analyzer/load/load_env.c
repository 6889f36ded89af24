/* A trace's environment sections (ta_model.h): "system" (versions as
 * strings, devices, frameworks, launchers) and "env_changes" (later
 * communicators created in another environment). Both optional: older
 * traces have neither, and a malformed member is skipped, never fatal
 * (the diagnosis does not depend on them). */
#include <stdlib.h>
#include <string.h>

#include "load/ring/ta_ring.h"
#include "load_int.h"

static char *str_or_null(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? xstrdup(v->valuestring) : NULL;
}

/* the string members of object o as "name=value" */
static char **pairs(const cJSON *o, int *n)
{
    *n = 0;
    if (!cJSON_IsObject(o)) return NULL;
    char **out = xcalloc((size_t)cJSON_GetArraySize(o) + 1, sizeof *out);
    for (const cJSON *e = o->child; e; e = e->next)
        if (cJSON_IsString(e) && e->string) out[(*n)++] = xasprintf("%s=%s", e->string, e->valuestring);
    return out;
}

static void load_system(const cJSON *root, ta_system *s)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "system");
    if (!cJSON_IsObject(o)) return;
    s->present = 1;
    s->nccl = str_or_null(o, "nccl");
    s->cuda_runtime = str_or_null(o, "cuda_runtime");
    s->cuda_driver = str_or_null(o, "cuda_driver");
    s->kernel_driver = str_or_null(o, "kernel_driver");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "gpus");
    if (cJSON_IsArray(g)) {
        s->gpus = xcalloc((size_t)cJSON_GetArraySize(g) + 1, sizeof *s->gpus);
        for (const cJSON *e = g->child; e; e = e->next) {
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "device");
            if (!cJSON_IsObject(e) || !cJSON_IsNumber(d)) continue;
            ta_gpu *u = &s->gpus[s->ngpus++];
            u->device = d->valueint;
            u->name = str_or_null(e, "name");
            u->uuid = str_or_null(e, "uuid");
            u->pci = str_or_null(e, "pci_bus_id");
        }
    }
    s->packages = pairs(cJSON_GetObjectItemCaseSensitive(o, "packages"), &s->npackages);
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, "launchers");
    if (cJSON_IsArray(l)) {
        s->launchers = xcalloc((size_t)cJSON_GetArraySize(l) + 1, sizeof *s->launchers);
        for (const cJSON *e = l->child; e; e = e->next) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "job_id");
            if (!cJSON_IsString(nm)) continue;
            s->launchers[s->nlaunchers++] = cJSON_IsString(id) ? xasprintf("%s=%s", nm->valuestring, id->valuestring)
                                                               : xstrdup(nm->valuestring);
        }
    }
}

static void load_changes(const cJSON *root, ta_trace *t)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "env_changes");
    if (!cJSON_IsArray(o)) return;
    t->envchg = xcalloc((size_t)cJSON_GetArraySize(o) + 1, sizeof *t->envchg);
    for (const cJSON *e = o->child; e; e = e->next) {
        if (!cJSON_IsObject(e)) continue;
        ta_envchg *c = &t->envchg[t->nenvchg++];
        c->comm = str_or_null(e, "comm");
        c->set = pairs(cJSON_GetObjectItemCaseSensitive(e, "set"), &c->nset);
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "unset");
        if (cJSON_IsArray(u)) {
            c->unset = xcalloc((size_t)cJSON_GetArraySize(u) + 1, sizeof *c->unset);
            for (const cJSON *n = u->child; n; n = n->next)
                if (cJSON_IsString(n)) c->unset[c->nunset++] = xstrdup(n->valuestring);
        }
    }
}

void conv_env_sections(const cJSON *root, ta_trace *t)
{
    load_system(root, &t->sys);
    load_changes(root, t);
}

static void free_strs(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

void ta_env_free(ta_trace *t)
{
    ta_system *s = &t->sys;
    free(s->nccl); free(s->cuda_runtime); free(s->cuda_driver); free(s->kernel_driver);
    for (int i = 0; i < s->ngpus; i++) { free(s->gpus[i].name); free(s->gpus[i].uuid); free(s->gpus[i].pci); }
    free(s->gpus);
    free_strs(s->packages, s->npackages);
    free_strs(s->launchers, s->nlaunchers);
    for (int i = 0; i < t->nenvchg; i++) {
        free(t->envchg[i].comm);
        free_strs(t->envchg[i].set, t->envchg[i].nset);
        free_strs(t->envchg[i].unset, t->envchg[i].nunset);
    }
    free(t->envchg);
    memset(s, 0, sizeof *s);
    t->envchg = NULL;
    t->nenvchg = 0;
}
