/* The NCCL parameter API (2.30+: ncclParamBind, ncclParamGet*, ...) over
 * the environment, as NCCL reads its parameters: a parameter is known when
 * it is one of the few NCCL parameters listed below (with NCCL's default) or
 * when an NCCL_* variable of that name is set; its value is the variable's
 * when set, else the default. Lookups are live (the environment is read on
 * every access). Integers are read as NCCL reads them (strtoll, base 0);
 * booleans as 1/T/TRUE or 0/F/FALSE. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl_internal.h"

extern char **environ;

enum param_type { PARAM_INT, PARAM_STR, PARAM_BOOL };

struct param_def {
    const char *key;
    enum param_type type;
    const char *dflt;       /* NULL: no default (unset) */
};

/* A few parameters every NCCL has, with their documented defaults. */
static const struct param_def known[] = {
    {"NCCL_DEBUG", PARAM_STR, NULL},
    {"NCCL_DEBUG_SUBSYS", PARAM_STR, "INIT,BOOTSTRAP,ENV"},
    {"NCCL_DEBUG_FILE", PARAM_STR, NULL},
    {"NCCL_BUFFSIZE", PARAM_INT, "4194304"},
    {"NCCL_P2P_DISABLE", PARAM_INT, "0"},
    {"NCCL_SHM_DISABLE", PARAM_INT, "0"},
    {"NCCL_IB_DISABLE", PARAM_INT, "0"},
    {"NCCL_COMM_BLOCKING", PARAM_INT, NULL},
    {"NCCL_ALGO", PARAM_STR, NULL},
    {"NCCL_PROTO", PARAM_STR, NULL},
    {"NCCL_SOCKET_IFNAME", PARAM_STR, NULL},
    {"NCCL_CHECK_POINTERS", PARAM_INT, "0"},
    {"NCCL_RUNTIME_CONNECT", PARAM_INT, "1"},
    {"NCCL_GDRCOPY_ENABLE", PARAM_INT, "0"},
    {"NCCL_PARAM_DUMP_ALL", PARAM_BOOL, "FALSE"},
};
#define NKNOWN ((int)(sizeof known / sizeof known[0]))

/* Handles live as long as the process (NCCL: the module's lifetime). */
struct ncclParamHandle {
    char *key;
    const struct param_def *def;     /* NULL: known from the environment only */
    struct ncclParamHandle *next;
};

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclParamHandle *handles;

static const struct param_def *known_def(const char *key)
{
    for (int i = 0; i < NKNOWN; i++)
        if (!strcmp(known[i].key, key)) return &known[i];
    return NULL;
}

static int is_param_name(const char *key)
{
    return key && !strncmp(key, "NCCL_", 5) && key[5];
}

/* The value now, or NULL when unset without a default. */
static const char *param_value(const char *key, const struct param_def *def, int *from_env)
{
    const char *v = getenv(key);
    if (from_env) *from_env = v != NULL;
    if (v) return v;
    return def ? def->dflt : NULL;
}

TRSIM_API ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key)
{
    if (!out || !is_param_name(key)) {
        trsim_set_last_error("ncclParamBind: no parameter %s", key ? key : "(null)");
        return ncclInvalidArgument;
    }
    const struct param_def *def = known_def(key);
    if (!def && !getenv(key)) {
        trsim_set_last_error("ncclParamBind: no parameter %s", key);
        return ncclInvalidArgument;
    }
    pthread_mutex_lock(&handles_lock);
    struct ncclParamHandle *h = handles;
    while (h && strcmp(h->key, key)) h = h->next;
    if (!h && (h = calloc(1, sizeof *h)) && (h->key = strdup(key))) {
        h->def = def;
        h->next = handles;
        handles = h;
    } else if (h && !h->key) {
        free(h);
        h = NULL;
    }
    pthread_mutex_unlock(&handles_lock);
    if (!h) return ncclSystemError;
    *out = h;
    return ncclSuccess;
}

/* The value as an integer in [lo, hi] (unsigned: [0, uhi]). */
static ncclResult_t param_int(ncclParamHandle_t h, long long lo, long long hi, unsigned long long uhi,
                              int is_unsigned, long long *sv, unsigned long long *uv)
{
    if (!h) return ncclInvalidArgument;
    const char *v = param_value(h->key, h->def, NULL);
    if (!v) {
        trsim_set_last_error("ncclParamGet: %s is unset", h->key);
        return ncclInvalidArgument;
    }
    if (!strcasecmp(v, "T") || !strcasecmp(v, "TRUE")) v = "1";
    else if (!strcasecmp(v, "F") || !strcasecmp(v, "FALSE")) v = "0";
    char *end;
    errno = 0;
    if (is_unsigned) {
        const char *p = v;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '-') goto bad;
        unsigned long long n = strtoull(v, &end, 0);
        if (errno || end == v || *end || n > uhi) goto bad;
        *uv = n;
    } else {
        long long n = strtoll(v, &end, 0);
        if (errno || end == v || *end || n < lo || n > hi) goto bad;
        *sv = n;
    }
    return ncclSuccess;
bad:
    trsim_set_last_error("ncclParamGet: %s=%s does not fit the type asked for", h->key, v);
    return ncclInvalidArgument;
}

#define GET_SIGNED(name, type, lo, hi)                                             \
    TRSIM_API ncclResult_t name(ncclParamHandle_t h, type *out)                    \
    {                                                                              \
        long long v;                                                               \
        if (!out) return ncclInvalidArgument;                                      \
        ncclResult_t r = param_int(h, lo, hi, 0, 0, &v, NULL);                     \
        if (r == ncclSuccess) *out = (type)v;                                      \
        return r;                                                                  \
    }
#define GET_UNSIGNED(name, type, hi)                                               \
    TRSIM_API ncclResult_t name(ncclParamHandle_t h, type *out)                    \
    {                                                                              \
        unsigned long long v;                                                      \
        if (!out) return ncclInvalidArgument;                                      \
        ncclResult_t r = param_int(h, 0, 0, hi, 1, NULL, &v);                      \
        if (r == ncclSuccess) *out = (type)v;                                      \
        return r;                                                                  \
    }

GET_SIGNED(ncclParamGetI8, int8_t, INT8_MIN, INT8_MAX)
GET_SIGNED(ncclParamGetI16, int16_t, INT16_MIN, INT16_MAX)
GET_SIGNED(ncclParamGetI32, int32_t, INT32_MIN, INT32_MAX)
GET_SIGNED(ncclParamGetI64, int64_t, INT64_MIN, INT64_MAX)
GET_UNSIGNED(ncclParamGetU8, uint8_t, UINT8_MAX)
GET_UNSIGNED(ncclParamGetU16, uint16_t, UINT16_MAX)
GET_UNSIGNED(ncclParamGetU32, uint32_t, UINT32_MAX)
GET_UNSIGNED(ncclParamGetU64, uint64_t, UINT64_MAX)

/* Valid until the thread's next call of the same function, as NCCL's. */
static _Thread_local char str_value[4096];
static _Thread_local char key_value[4096];

TRSIM_API ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out)
{
    if (!h || !out) return ncclInvalidArgument;
    const char *v = param_value(h->key, h->def, NULL);
    snprintf(str_value, sizeof str_value, "%s", v ? v : "");
    *out = str_value;
    return ncclSuccess;
}

/* The raw value: an integer parameter's int64, any other's string with its
 * terminating zero. */
TRSIM_API ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len)
{
    if (!h || !len || maxLen < 0 || (maxLen > 0 && !out)) return ncclInvalidArgument;
    const char *v = param_value(h->key, h->def, NULL);
    int64_t n;
    const void *src;
    size_t need;
    if (h->def && h->def->type == PARAM_INT) {
        if (!v) return ncclInvalidArgument;
        ncclResult_t r = ncclParamGetI64(h, &n);
        if (r != ncclSuccess) return r;
        src = &n;
        need = sizeof n;
    } else {
        if (!v) v = "";
        src = v;
        need = strlen(v) + 1;
    }
    if (need > INT_MAX) return ncclInvalidArgument;
    *len = (int)need;
    if (need > (size_t)maxLen) {
        trsim_set_last_error("ncclParamGet: %s needs %zu bytes, %d given", h->key, need, maxLen);
        return ncclInvalidArgument;
    }
    memcpy(out, src, need);
    return ncclSuccess;
}

TRSIM_API ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen)
{
    if (!is_param_name(key) || !value) return ncclInvalidArgument;
    const struct param_def *def = known_def(key);
    int from_env;
    const char *v = param_value(key, def, &from_env);
    if (!def && !from_env) {
        trsim_set_last_error("ncclParamGetParameter: no parameter %s", key);
        return ncclInvalidArgument;
    }
    snprintf(key_value, sizeof key_value, "%s", v ? v : "");
    *value = key_value;
    if (valueLen) *valueLen = (int)strlen(key_value);
    return ncclSuccess;
}

/* The known parameters, then the NCCL_* variables set that are not. */
static _Thread_local const char **key_table;
static _Thread_local char *key_names;

TRSIM_API ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen)
{
    if (!table || !tableLen) return ncclInvalidArgument;
    int n = NKNOWN;
    size_t chars = 0;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, "NCCL_", 5) || eq - *e <= 5) continue;
        n++;
        chars += (size_t)(eq - *e) + 1;
    }
    const char **t = malloc(((size_t)n + 1) * sizeof *t);
    char *names = malloc(chars + 1);
    if (!t || !names) {
        free(t);
        free(names);
        return ncclSystemError;
    }
    int k = 0;
    for (int i = 0; i < NKNOWN; i++) t[k++] = known[i].key;
    char *p = names;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, "NCCL_", 5) || eq - *e <= 5) continue;
        size_t len = (size_t)(eq - *e);
        memcpy(p, *e, len);
        p[len] = 0;
        if (!known_def(p)) {
            t[k++] = p;
            p += len + 1;
        }
    }
    t[k] = NULL;
    free(key_table);
    free(key_names);
    key_table = t;
    key_names = names;
    *table = t;
    *tableLen = k;
    return ncclSuccess;
}

/* To NCCL's log output (stdout), one line per parameter. */
TRSIM_API void ncclParamDumpAll(void)
{
    const char **t;
    int n;
    if (ncclParamGetAllParameterKeys(&t, &n) != ncclSuccess) return;
    for (int i = 0; i < n; i++) {
        const struct param_def *def = known_def(t[i]);
        int from_env;
        const char *v = param_value(t[i], def, &from_env);
        const char *d = def && def->dflt ? def->dflt : "<unset>";
        printf("%s Current value=%s set_by=%s default=%s\n", t[i], v ? v : "<unset>",
               from_env ? "Environment" : "Default", d);
    }
    fflush(stdout);
}
