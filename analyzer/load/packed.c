/* Version 2's packed rows (docs/trace-format.md, "Packed rows"): a calls
 * or checks object's string table and base64 rows, decoded into the same jv
 * values the JSON scanner makes of a version-1 row, so that one conversion
 * (calls.c, checks.c) checks both. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/ta_model.h"
#include "scan_int.h"
#include "ta_calls.h"
#include "trshim/trace_format.h"

typedef struct {
    char s[sizeof ((jv *)0)->s];
    size_t len;
} pk_str;

__attribute__((format(printf, 3, 4))) static int say(char *err, size_t errn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
    return -1;
}

/* a base64 character's value + 1; 0: not one */
static const uint8_t b64_value[256] = {
    ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8, ['I'] = 9, ['J'] = 10,
    ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19,
    ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28,
    ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37,
    ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46,
    ['u'] = 47, ['v'] = 48, ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55,
    ['3'] = 56, ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
};

/* base64 (RFC 4648, padded) of b[0..n) into a new buffer; NULL when it is not */
static uint8_t *unbase64(const char *b, size_t n, size_t *out_n, size_t *bad_at)
{
    if (n % 4) { *bad_at = n; return NULL; }
    uint8_t *out = xmalloc(n / 4 * 3 + 1);
    const unsigned char *u = (const unsigned char *)b;
    size_t o = 0, full = n && u[n - 1] == '=' ? n - 4 : n;   /* the padded group last, alone */
    for (size_t i = 0; i < full; i += 4) {
        uint32_t v0 = b64_value[u[i]], v1 = b64_value[u[i + 1]], v2 = b64_value[u[i + 2]], v3 = b64_value[u[i + 3]];
        if (!v0 || !v1 || !v2 || !v3) {
            *bad_at = i + (!v0 ? 0 : !v1 ? 1 : !v2 ? 2 : 3);
            free(out);
            return NULL;
        }
        uint32_t q = (v0 - 1) << 18 | (v1 - 1) << 12 | (v2 - 1) << 6 | (v3 - 1);
        out[o] = (uint8_t)(q >> 16);
        out[o + 1] = (uint8_t)(q >> 8);
        out[o + 2] = (uint8_t)q;
        o += 3;
    }
    if (full < n) {   /* "xx==" or "xxx=" */
        const unsigned char *g = u + full;
        uint32_t v0 = b64_value[g[0]], v1 = b64_value[g[1]], v2 = g[2] == '=' ? 1 : b64_value[g[2]];
        if (!v0 || !v1 || !v2 || (g[2] == '=' && g[3] != '=')) {
            *bad_at = full + (!v0 ? 0 : !v1 ? 1 : 2);
            free(out);
            return NULL;
        }
        uint32_t q = (v0 - 1) << 18 | (v1 - 1) << 12 | (v2 - 1) << 6;
        out[o++] = (uint8_t)(q >> 16);
        if (g[2] != '=') out[o++] = (uint8_t)(q >> 8);
    }
    *out_n = o;
    return out;
}

/* The rest of an LEB128 payload at d[*i], its bits below shift in *acc
 * already: 0; -1 when the data ends; -2 past 64 bits */
static int leb128_more(const uint8_t *d, size_t n, size_t *i, uint64_t *acc, int shift)
{
    for (;; shift += 7) {
        if (*i >= n) return -1;
        uint8_t c = d[(*i)++];
        if (shift + 7 > 64 && (c & (0xff << (64 - shift)) & 0xff)) return -2;
        *acc |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 0;
    }
}

/* an unsigned LEB128 varint of at most 64 bits at d[*i] */
static int leb128(const uint8_t *d, size_t n, size_t *i, uint64_t *v)
{
    *v = 0;
    return leb128_more(d, n, i, v, 0);
}

/* one value: its tag and payload (4 bits in the tag byte, then 7 per byte) */
static int value(const uint8_t *d, size_t n, size_t *i, unsigned *tag, uint64_t *pay)
{
    if (*i >= n) return -1;
    uint8_t b = d[(*i)++];
    *tag = b & 7;
    *pay = b >> 4;
    return b & 8 ? leb128_more(d, n, i, pay, 4) : 0;
}

static inline uint64_t unzigzag(uint64_t u) { return (u >> 1) ^ (0 - (u & 1)); }

/* The rows of data[0..n) to fn, as ta_scan_rows gives a JSON array's. */
static int unpack_rows(const char *what, const uint8_t *d, size_t n, const pk_str *strs, size_t nstrs, int64_t rows,
                       int npos, row_fn fn, void *ctx, char *err, size_t errn, const char **first_why, int *first_i,
                       int64_t *skipped)
{
    jv vals[TRSHIM_ROWS_MAX_VALUES];
    uint64_t prev[TRSHIM_ROWS_MAX_VALUES] = {0};
    size_t i = 0;
    int64_t idx = 0;
    for (; i < n; idx++) {
        size_t row_at = i;
        uint64_t k;
        int r = leb128(d, n, &i, &k);
        if (r == -1) goto cut;
        if (r < 0 || k > TRSHIM_ROWS_MAX_VALUES)
            return say(err, errn, "%s data is damaged at row %lld (byte %zu of the data): a row of more than %d "
                       "values", what, (long long)idx, row_at, TRSHIM_ROWS_MAX_VALUES);
        for (int p = 0; p < (int)k; p++) {
            unsigned tag;
            uint64_t pay, b;
            size_t at = i;
            jv *v = &vals[p];
            r = value(d, n, &i, &tag, &pay);
            if (r == -1) goto cut;
            if (r < 0)
                return say(err, errn, "%s data is damaged at row %lld (byte %zu of the data): a value of more "
                           "than 64 bits", what, (long long)idx, at);
            switch (tag) {
            case TRSHIM_PK_NULL:
            case TRSHIM_PK_BOOL:
                if (pay > (tag == TRSHIM_PK_BOOL))
                    return say(err, errn, "%s data is damaged at row %lld (byte %zu of the data): a %s with "
                               "payload %llu", what, (long long)idx, at, tag ? "bool" : "null", (unsigned long long)pay);
                v->type = tag ? JV_BOOL : JV_NULL;
                v->i = (int64_t)pay;
                break;
            case TRSHIM_PK_INT:
            case TRSHIM_PK_ADDR:
                prev[p] += unzigzag(pay);
                v->type = tag == TRSHIM_PK_INT ? JV_INT : JV_HEX;
                v->i = (int64_t)prev[p];
                break;
            case TRSHIM_PK_STR:
                if (pay >= nstrs)
                    return say(err, errn, "%s data is damaged at row %lld (byte %zu of the data): string index "
                               "%llu outside strings (%zu)", what, (long long)idx, at, (unsigned long long)pay, nstrs);
                v->type = JV_STR;
                v->sid = (int32_t)pay;
                memcpy(v->s, strs[pay].s, strs[pay].len + 1);
                break;
            case TRSHIM_PK_PAIR:
                r = leb128(d, n, &i, &b);
                if (r == -1) goto cut;
                if (r < 0)
                    return say(err, errn, "%s data is damaged at row %lld (byte %zu of the data): a value of "
                               "more than 64 bits", what, (long long)idx, at);
                v->type = JV_PAIR;
                v->i = (int64_t)unzigzag(pay);
                v->i2 = (int64_t)unzigzag(b);
                break;
            default:
                return say(err, errn, "%s data is damaged at row %lld (byte %zu of the data): unknown tag %u", what,
                           (long long)idx, at, tag);
            }
        }
        const char *why = (int)k > npos ? "has more positions than its fields list" : fn(ctx, vals, (int)k, (int)idx);
        if (why) {
            if (!*first_why) { *first_why = why; *first_i = (int)idx; }
            (*skipped)++;
        }
    }
    if (idx != rows)
        return say(err, errn, "%s data holds %lld rows, rows says %lld", what, (long long)idx, (long long)rows);
    return 0;
cut:
    return say(err, errn, "%s data is damaged at row %lld: it ends inside a row (byte %zu of %zu)", what,
               (long long)idx, i, n);
}

int ta_unpack_rows(const char *what, const char *b, size_t n, int npos, row_fn fn, void *ctx, char *err, size_t errn,
                   const char **first_why, int *first_i, int64_t *skipped)
{
    static const char *const names[4] = {"encoding", "rows", "strings", "data"};
    size_t vs[4], ve[4];
    int found[4];
    size_t i = 0;
    while (i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')) i++;
    if (i >= n || b[i] != '{') {
        say(err, errn, "field %s is not an object (version 2 packs the %s)", what, what);
        return -2;
    }
    if (ta_find_members(b, n, names, 4, vs, ve, found) < 0)
        return say(err, errn, "field %s is not a well-formed object", what);
    for (int k = 0; k < 4; k++)
        if (!found[k]) return say(err, errn, "field %s has no \"%s\"", what, names[k]);
    /* encoding, rows, strings: small; cJSON reads them */
    uint8_t *data = NULL;
    pk_str *strs = NULL;
    cJSON *enc = cJSON_ParseWithLength(b + vs[0], ve[0] - vs[0]);
    cJSON *rows = cJSON_ParseWithLength(b + vs[1], ve[1] - vs[1]);
    cJSON *sa = cJSON_ParseWithLength(b + vs[2], ve[2] - vs[2]);
    int ret = -1;
    if (!cJSON_IsString(enc) || strcmp(enc->valuestring, TRSHIM_ROWS_ENCODING)) {
        say(err, errn, "field %s has an unknown encoding %.60s (this tranalyze reads \"%s\")", what,
            cJSON_IsString(enc) ? enc->valuestring : "(not a string)", TRSHIM_ROWS_ENCODING);
        goto done;
    }
    if (!cJSON_IsNumber(rows) || rows->valuedouble < 0 || rows->valuedouble > 9e15 ||
        rows->valuedouble != (double)(int64_t)rows->valuedouble) {
        say(err, errn, "field %s.rows is not a non-negative integer", what);
        goto done;
    }
    if (!cJSON_IsArray(sa)) { say(err, errn, "field %s.strings is not an array of strings", what); goto done; }
    size_t nstrs = (size_t)cJSON_GetArraySize(sa), k = 0;
    strs = xcalloc(nstrs + 1, sizeof *strs);
    for (const cJSON *e = sa->child; e; e = e->next, k++) {
        if (!cJSON_IsString(e)) { say(err, errn, "field %s.strings[%zu] is not a string", what, k); goto done; }
        snprintf(strs[k].s, sizeof strs[k].s, "%s", e->valuestring);
        strs[k].len = strlen(strs[k].s);
    }
    /* data: a string of base64 characters only (no escapes to undo) */
    if (ve[3] - vs[3] < 2 || b[vs[3]] != '"') { say(err, errn, "field %s.data is not a string", what); goto done; }
    size_t dn = 0, bad_at = 0;
    data = unbase64(b + vs[3] + 1, ve[3] - vs[3] - 2, &dn, &bad_at);
    if (!data) { say(err, errn, "field %s.data is not base64 (at its character %zu)", what, bad_at); goto done; }
    ret = unpack_rows(what, data, dn, strs, nstrs, (int64_t)rows->valuedouble, npos, fn, ctx, err, errn, first_why,
                      first_i, skipped);
done:
    free(data);
    free(strs);
    cJSON_Delete(enc);
    cJSON_Delete(rows);
    cJSON_Delete(sa);
    return ret;
}
