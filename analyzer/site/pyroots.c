/* Which Python files are a library's (issue 18): by where they were
 * installed, as the shim recorded it, not by folder names.
 *
 * The shim records once per process the interpreter's standard library,
 * its site folders (installed distributions) and editable installs' source
 * trees (trace "python"."roots", ring blob TRR_BLOB_PYROOTS;
 * shim/tr_pyroots.c). A file is then, by the first rule that applies:
 *   1. under a --fold / --no-fold folder (the deepest one when several
 *      hold it): a library's / the user's;
 *   2. under a recorded folder (the deepest): editable -> the user's,
 *      stdlib -> the standard library, site -> a library's;
 *   3. `<frozen ...>`, or under a lib/python3.X/ folder (sysconfig's
 *      layout: the standard library) -> the standard library; under a
 *      site-packages/ or dist-packages/ folder (where installers put
 *      distributions, whatever the process) -> a library's;
 *   4. a trace without recorded folders (older shims) only: in a torch/,
 *      deepspeed/, colossalai/, megatron/ or nanotron/ folder -> a
 *      library's (the rule of those traces, kept so their answers stay);
 *   5. otherwise the user's: a source checkout run from its own tree, a
 *      PYTHONPATH folder, an editable install, whatever its folders are
 *      called.
 * The package of a library file (which frames belong together when every
 * frame is a library's, ta_py_prepare): the folder under the root that
 * holds it (site-packages/torch), else the file itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ta_site.h"

#define ROOTS_MAX 1024        /* folders of one trace */
#define ROOT_LEN_MAX 4096

/* ---- --fold / --no-fold ------------------------------------------------------------- */

typedef struct { char *dir; size_t len; int fold; } fold_opt;
static fold_opt *g_opts;
static int g_nopts;

int ta_py_fold_option(const char *dir, int fold)
{
    size_t n = dir ? strlen(dir) : 0;
    while (n > 1 && dir[n - 1] == '/') n--;
    if (!n || (n == 1 && dir[0] == '/')) return -1;
    char *d = xmalloc(n + 1);
    memcpy(d, dir, n);
    d[n] = 0;
    g_opts = xrealloc(g_opts, sizeof *g_opts * (size_t)(g_nopts + 1));
    g_opts[g_nopts++] = (fold_opt){d, n, fold};
    return 0;
}

void ta_py_fold_reset(void)
{
    for (int i = 0; i < g_nopts; i++) free(g_opts[i].dir);
    free(g_opts);
    g_opts = NULL;
    g_nopts = 0;
}

/* ---- folders --------------------------------------------------------------------------- */

/* where dir ends in f when f lies under it, 0 when not: an absolute dir
 * must begin f, a relative one is whole components anywhere (the deepest) */
static size_t under(const char *f, const char *dir, size_t n)
{
    if (dir[0] == '/') return !strncmp(f, dir, n) && f[n] == '/' ? n : 0;
    size_t best = 0;
    for (const char *p = f; (p = strstr(p, dir)); p++)
        if ((p == f || p[-1] == '/') && p[n] == '/') best = (size_t)(p - f) + n;
    return best;
}

/* where the deepest folder named one of names[] ends in f, 0 */
static size_t under_name(const char *f, const char *const *names, size_t nnames)
{
    size_t best = 0;
    for (size_t i = 0; i < nnames; i++) {
        size_t e = under(f, names[i], strlen(names[i]));
        if (e > best) best = e;
    }
    return best;
}

/* .../lib/python3.N/ or lib64/python3.Nt/ (free-threaded builds): where
 * that folder ends in f, 0 */
static size_t stdlib_dir(const char *f)
{
    for (const char *p = f; (p = strstr(p, "python3.")); p++) {
        int lib = (p - f >= 4 && !strncmp(p - 4, "lib/", 4)) || (p - f >= 6 && !strncmp(p - 6, "lib64/", 6));
        if (!lib) continue;
        const char *q = p + 8;
        if (*q < '0' || *q > '9') continue;
        while (*q >= '0' && *q <= '9') q++;
        if (*q == 't') q++;
        if (*q == '/') return (size_t)(q - f);
    }
    return 0;
}

static const char *const site_names[] = {"site-packages", "dist-packages"};
static const char *const fw_names[] = {"torch", "deepspeed", "colossalai", "megatron", "nanotron"};
#define NSITE (sizeof site_names / sizeof *site_names)
#define NFW (sizeof fw_names / sizeof *fw_names)

/* the rule (above): TA_PY_*, and in *end where the folder that decided
 * ends; *pkg: that folder is the package itself (rule 4), not a root */
static int classify(const ta_trace *t, const char *f, size_t *end, int *pkg)
{
    size_t best = 0, e;
    int v = -1;
    *end = 0;
    *pkg = 0;
    if (!f) return TA_PY_USER;
    if (!strncmp(f, "<frozen ", 8)) return TA_PY_STDLIB;    /* <frozen importlib._bootstrap> & co. */
    for (int i = 0; i < g_nopts; i++)
        if ((e = under(f, g_opts[i].dir, g_opts[i].len)) && e >= best) {
            best = e;
            v = g_opts[i].fold ? TA_PY_LIB : TA_PY_USER;
        }
    if (v < 0 && t && t->pyroots.present)
        for (int i = 0; i < t->pyroots.n; i++) {
            const ta_pyroot *r = &t->pyroots.v[i];
            if ((e = under(f, r->dir, strlen(r->dir))) && e > best) {
                best = e;
                v = r->kind == TA_ROOT_EDITABLE ? TA_PY_USER : r->kind == TA_ROOT_STDLIB ? TA_PY_STDLIB : TA_PY_LIB;
            }
        }
    if (v >= 0) {
        *end = best;
        return v;
    }
    if ((*end = under_name(f, site_names, NSITE))) return TA_PY_LIB;
    if ((*end = stdlib_dir(f))) return TA_PY_STDLIB;
    if (!(t && t->pyroots.present) && (*end = under_name(f, fw_names, NFW))) {
        *pkg = 1;
        return TA_PY_LIB;
    }
    return TA_PY_USER;
}

int ta_py_class(const ta_trace *t, const char *file)
{
    size_t end;
    int pkg;
    return classify(t, file, &end, &pkg);
}

int ta_py_folded(const char *f)
{
    return ta_py_class(NULL, f) != TA_PY_USER;
}

size_t ta_py_package_len(const ta_trace *t, const char *f)
{
    size_t end, n = f ? strlen(f) : 0;
    int pkg;
    if (classify(t, f, &end, &pkg) == TA_PY_USER || !end) {
        const char *s = f ? strrchr(f, '/') : NULL;
        return s ? (size_t)(s - f) : n;
    }
    if (pkg) return end;
    const char *s = strchr(f + end + 1, '/');
    return s ? (size_t)(s - f) : n;
}

/* ---- reading them ------------------------------------------------------------------------ */

/* (only compared with files, never printed: interned as recorded) */
static void add_root(ta_pyroot **v, int *n, const char *dir, size_t len, int kind)
{
    while (len > 1 && dir[len - 1] == '/') len--;
    char *d = xmalloc(len + 1);
    memcpy(d, dir, len);
    d[len] = 0;
    *v = xrealloc(*v, sizeof **v * (size_t)(*n + 1));
    (*v)[(*n)++] = (ta_pyroot){ta_intern(d), kind};
    free(d);
}

void ta_pyroots_json(ta_an *a, const char *file, ta_trace *t, const cJSON *python)
{
    static const char *const keys[] = {"stdlib", "site", "editable"};
    const cJSON *r = cJSON_IsObject(python) ? cJSON_GetObjectItemCaseSensitive(python, "roots") : NULL;
    if (!r || cJSON_IsNull(r)) return;
    ta_pyroot *v = NULL;
    int n = 0, bad = !cJSON_IsObject(r);
    for (int k = 0; k < 3 && !bad; k++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(r, keys[k]);
        if (!arr || cJSON_IsNull(arr)) continue;
        if (!cJSON_IsArray(arr)) { bad = 1; break; }
        for (const cJSON *e = arr->child; e && !bad; e = e->next) {
            size_t len = cJSON_IsString(e) ? strlen(e->valuestring) : 0;
            bad = !len || e->valuestring[0] != '/' || len > ROOT_LEN_MAX || n >= ROOTS_MAX;
            if (!bad) add_root(&v, &n, e->valuestring, len, TA_ROOT_STDLIB + k);
        }
    }
    if (bad) {
        ta_note_add(a, file, 0, "field python.roots is not an object of arrays of absolute folders (at most %d); "
                    "library frames are told by their folders' names instead", ROOTS_MAX);
        free(v);
        return;
    }
    ta_pyroots_free(&t->pyroots);
    t->pyroots = (ta_pyroots){v, n, 1};
}

int ta_pyroots_blob(ta_pyroots *out, const void *payload, uint32_t bytes)
{
    struct { uint32_t n, text_len; } h;
    if (!payload || bytes < sizeof h) return 0;
    memcpy(&h, payload, sizeof h);
    if (h.n > ROOTS_MAX || h.text_len > bytes - sizeof h) return 0;
    const char *p = (const char *)payload + sizeof h, *end = p + h.text_len;
    ta_pyroot *v = NULL;
    int n = 0;
    for (uint32_t i = 0; i < h.n; i++) {
        const char *z = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
        const char *kinds = "spe", *k = p < end && *p ? strchr(kinds, *p) : NULL;
        if (!z || !k || z - p < 2 || p[1] != '/' || z - p - 1 > ROOT_LEN_MAX) {
            free(v);
            return 0;
        }
        add_root(&v, &n, p + 1, (size_t)(z - p - 1), TA_ROOT_STDLIB + (int)(k - kinds));
        p = z + 1;
    }
    if (out->present) { free(v); return 1; }     /* the first one counts */
    *out = (ta_pyroots){v, n, 1};
    return 1;
}

void ta_pyroots_copy(ta_pyroots *dst, const ta_pyroots *src)
{
    if (dst->present || !src->present) return;
    dst->v = xcalloc((size_t)src->n + 1, sizeof *dst->v);
    if (src->n) memcpy(dst->v, src->v, sizeof *dst->v * (size_t)src->n);
    dst->n = src->n;
    dst->present = 1;
}

void ta_pyroots_free(ta_pyroots *r)
{
    free(r->v);
    *r = (ta_pyroots){NULL, 0, 0};
}
