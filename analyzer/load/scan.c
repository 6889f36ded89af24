/* The scanner of a trace's big arrays ("calls" in version 1, "checks"):
 * they are nearly all of a trace (tens of values per row, 10,000s of rows
 * per rank), and a general JSON tree costs too much there (an allocation
 * per value, a locale lookup per number). The rest of the file goes through
 * cJSON. The scanner accepts exactly JSON (RFC 8259) values. Also the
 * members of an object found without parsing their values (ta_find_members). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scan_int.h"
#include "ta_calls.h"

static inline size_t ws(const char *b, size_t n, size_t i)
{
    while (i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')) i++;
    return i;
}

/* end of the string starting at the quote b[i] (after its closing quote);
 * (size_t)-1 when unterminated */
static size_t str_end(const char *b, size_t n, size_t i)
{
    i++;
    while (i < n) {
        /* a trace's strings are short (names, hex numbers): a loop before memchr's call */
        size_t k = i, stop = n - i > 32 ? i + 32 : n;
        while (k < stop && b[k] != '"') k++;
        if (k == stop) {
            const char *q = memchr(b + k, '"', n - k);
            if (!q) return (size_t)-1;
            k = (size_t)(q - b);
        }
        size_t bs = 0;
        while (k - bs > i && b[k - bs - 1] == '\\') bs++;
        if (!(bs & 1)) return k + 1;
        i = k + 1;
    }
    return (size_t)-1;
}

static const unsigned char structural[256] = {['"'] = 1, ['['] = 1, [']'] = 1, ['{'] = 1, ['}'] = 1};

/* end of any value at b[i] (structure only; the content of scalars is
 * checked where they are used). (size_t)-1 on a structural error. */
static size_t skip_value(const char *b, size_t n, size_t i)
{
    if (i >= n) return (size_t)-1;
    char c = b[i];
    if (c == '"') return str_end(b, n, i);
    if (c == '[' || c == '{') {
        int depth = 0;
        char stack[1024];
        while (i < n) {
            /* most of a calls array is digits, commas and names: past them at once */
            while (i < n && !structural[(unsigned char)b[i]]) i++;
            if (i >= n) break;
            c = b[i];
            if (c == '"') {
                size_t e = str_end(b, n, i);
                if (e == (size_t)-1) return (size_t)-1;
                i = e;
                continue;
            }
            if (c == '[' || c == '{') {
                if (depth >= 1024) return (size_t)-1;
                stack[depth++] = c;
            } else if (c == ']' || c == '}') {
                if (!depth || (c == ']') != (stack[depth - 1] == '[')) return (size_t)-1;
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return (size_t)-1;
    }
    while (i < n && b[i] != ',' && b[i] != ']' && b[i] != '}' && b[i] != ' ' && b[i] != '\n' &&
           b[i] != '\r' && b[i] != '\t')
        i++;
    return i;
}

int ta_find_members(const char *b, size_t n, const char *const *names, int k, size_t *vs, size_t *ve, int *found)
{
    int left = k;
    for (int j = 0; j < k; j++) found[j] = 0;
    size_t i = ws(b, n, 0);
    if (i >= n || b[i] != '{') return -1;
    i = ws(b, n, i + 1);
    if (i < n && b[i] == '}') return 0;
    for (;;) {
        if (i >= n || b[i] != '"') return -1;
        size_t ke = str_end(b, n, i);
        if (ke == (size_t)-1) return -1;
        int match = -1;
        for (int j = 0; j < k; j++)
            if (!found[j] && ke - i - 2 == strlen(names[j]) && !memcmp(b + i + 1, names[j], ke - i - 2)) match = j;
        i = ws(b, n, ke);
        if (i >= n || b[i] != ':') return -1;
        i = ws(b, n, i + 1);
        size_t e = skip_value(b, n, i);
        if (e == (size_t)-1 || e > n) return -1;
        if (match >= 0) {
            vs[match] = i;
            ve[match] = e;
            found[match] = 1;
            if (!--left) return 0;
        }
        i = ws(b, n, e);
        if (i >= n) return -1;
        if (b[i] == '}') return 0;
        if (b[i] != ',') return -1;
        i = ws(b, n, i + 1);
    }
}

int ta_find_member(const char *b, size_t n, const char *name, size_t *vs, size_t *ve)
{
    int found;
    if (ta_find_members(b, n, &name, 1, vs, ve, &found) < 0 || !found) return -1;
    return 0;
}

/* one scalar at b[i]; returns the end, (size_t)-1 on a syntax error */
static size_t scalar(const char *b, size_t n, size_t i, jv *v)
{
    char c = b[i];
    if (c == '"') {
        size_t e = str_end(b, n, i);
        if (e == (size_t)-1) return (size_t)-1;
        size_t k = 0;
        for (size_t j = i + 1; j < e - 1 && k < sizeof v->s - 1; j++) {
            unsigned char ch = (unsigned char)b[j];
            if (ch < 0x20) return (size_t)-1;
            if (ch == '\\') {
                j++;
                char x = b[j];
                if (x == 'u') { if (j + 4 >= e - 1) return (size_t)-1; j += 4; v->s[k++] = '?'; continue; }
                if (!x || !strchr("\"\\/bfnrt", x)) return (size_t)-1;
                v->s[k++] = x == 'n' ? '\n' : x == 't' ? '\t' : x == 'r' ? '\r' : x == 'b' ? '\b' : x == 'f' ? '\f' : x;
                continue;
            }
            v->s[k++] = (char)ch;
        }
        v->s[k] = 0;
        v->type = JV_STR;
        v->sid = -1;
        return e;
    }
    if (c == 'n' && n - i >= 4 && !memcmp(b + i, "null", 4)) { v->type = JV_NULL; return i + 4; }
    if (c == 't' && n - i >= 4 && !memcmp(b + i, "true", 4)) { v->type = JV_BOOL; v->i = 1; return i + 4; }
    if (c == 'f' && n - i >= 5 && !memcmp(b + i, "false", 5)) { v->type = JV_BOOL; v->i = 0; return i + 5; }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t j = i;
        int neg = 0;
        if (b[j] == '-') { neg = 1; j++; }
        if (j >= n || b[j] < '0' || b[j] > '9') return (size_t)-1;
        if (b[j] == '0' && j + 1 < n && b[j + 1] >= '0' && b[j + 1] <= '9') return (size_t)-1;
        uint64_t acc = 0;
        size_t d0 = j;
        while (j < n && b[j] >= '0' && b[j] <= '9') { acc = acc * 10 + (uint64_t)(b[j] - '0'); j++; }
        int isint = j - d0 <= 18;
        if (j < n && (b[j] == '.' || b[j] == 'e' || b[j] == 'E')) {
            isint = 0;
            if (b[j] == '.') {
                j++;
                if (j >= n || b[j] < '0' || b[j] > '9') return (size_t)-1;
                while (j < n && b[j] >= '0' && b[j] <= '9') j++;
            }
            if (j < n && (b[j] == 'e' || b[j] == 'E')) {
                j++;
                if (j < n && (b[j] == '+' || b[j] == '-')) j++;
                if (j >= n || b[j] < '0' || b[j] > '9') return (size_t)-1;
                while (j < n && b[j] >= '0' && b[j] <= '9') j++;
            }
        }
        if (isint) {
            v->type = JV_INT;
            v->i = neg ? -(int64_t)acc : (int64_t)acc;
        } else {
            char tmp[64];
            size_t l = j - i < 63 ? j - i : 63;
            memcpy(tmp, b + i, l);
            tmp[l] = 0;
            v->type = JV_DBL;
            v->d = strtod(tmp, NULL);
        }
        return j;
    }
    return (size_t)-1;
}

/* [a, b] of two integers at b[i] (a call's "signal"): its end, with
 * v->type JV_PAIR; (size_t)-1 when it is anything else (not an error: the
 * caller reads it as a value of another type) */
static size_t int_pair(const char *b, size_t n, size_t i, jv *v)
{
    jv x, y;
    i = ws(b, n, i + 1);
    if (i >= n || (b[i] != '-' && (b[i] < '0' || b[i] > '9'))) return (size_t)-1;
    i = scalar(b, n, i, &x);
    if (i == (size_t)-1 || x.type != JV_INT) return (size_t)-1;
    i = ws(b, n, i);
    if (i >= n || b[i] != ',') return (size_t)-1;
    i = ws(b, n, i + 1);
    if (i >= n || (b[i] != '-' && (b[i] < '0' || b[i] > '9'))) return (size_t)-1;
    i = scalar(b, n, i, &y);
    if (i == (size_t)-1 || y.type != JV_INT) return (size_t)-1;
    i = ws(b, n, i);
    if (i >= n || b[i] != ']') return (size_t)-1;
    v->type = JV_PAIR;
    v->i = x.i;
    v->i2 = y.i;
    return i + 1;
}

int ta_scan_num(const jv *v, int64_t *out)
{
    if (v->type == JV_INT) { *out = v->i; return 1; }
    if (v->type == JV_DBL && v->d == floor(v->d) && fabs(v->d) < 9.2e18) { *out = (int64_t)v->d; return 1; }
    return 0;
}
int ta_parse_hex(const char *s, uint64_t *out)
{
    if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !s[2]) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s + 2, &end, 16);
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

/* ---- arrays of arrays (calls, checks): one row at a time ---- */
int ta_scan_rows(const char *b, size_t n, int npos, row_fn fn, void *ctx, size_t *err_at, const char **first_why,
                 int *first_i, int64_t *skipped)
{
    size_t i = ws(b, n, 0);
    if (i >= n || b[i] != '[') { *err_at = i; return -2; }   /* not an array */
    jv *vals = xmalloc(sizeof(jv) * (size_t)(npos + 1));
    i = ws(b, n, i + 1);
    int idx = 0;
    if (i < n && b[i] == ']') goto done;
    for (;; idx++) {
        if (i >= n) { *err_at = i; goto syntax; }
        const char *why = NULL;
        if (b[i] != '[') {
            size_t e = skip_value(b, n, i);
            if (e == (size_t)-1) { *err_at = i; goto syntax; }
            if (b[i] != '-' && (b[i] < '0' || b[i] > '9') && b[i] != '"' && b[i] != '{' && b[i] != 't' &&
                b[i] != 'f' && b[i] != 'n') { *err_at = i; goto syntax; }
            i = e;
            why = "is not an array";
        } else {
            i = ws(b, n, i + 1);
            int k = 0;
            if (i < n && b[i] == ']') {
                i++;
            } else {
                for (;;) {
                    if (i >= n) { *err_at = i; goto syntax; }
                    jv tmp, *v = k < npos ? &vals[k] : &tmp;
                    size_t e;
                    if (b[i] == '[' && (e = int_pair(b, n, i, v)) != (size_t)-1) {
                        /* [int, int]: a call's "signal" */
                    } else if (b[i] == '[' || b[i] == '{') {
                        e = skip_value(b, n, i);
                        v->type = JV_OTHER;
                    } else {
                        e = scalar(b, n, i, v);
                    }
                    if (e == (size_t)-1) { *err_at = i; goto syntax; }
                    k++;
                    i = ws(b, n, e);
                    if (i < n && b[i] == ',') { i = ws(b, n, i + 1); continue; }
                    if (i < n && b[i] == ']') { i++; break; }
                    *err_at = i;
                    goto syntax;
                }
            }
            if (k > npos) why = "has more positions than its fields list";
            else why = fn(ctx, vals, k, idx);
        }
        if (why) {
            if (!*first_why) { *first_why = why; *first_i = idx; }
            (*skipped)++;
        }
        i = ws(b, n, i);
        if (i < n && b[i] == ',') { i = ws(b, n, i + 1); continue; }
        if (i < n && b[i] == ']') break;
        *err_at = i;
        goto syntax;
    }
done:
    free(vals);
    return 0;
syntax:
    free(vals);
    return -1;
}

