/* Streaming JSON writer (see tr_json.h). */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>

#include "tr_json.h"

void trj_init(tr_json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->has_items[0] = 0;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);   /* UTF-8 passes through; invalid bytes are the reader's to reject */
    }
    fputc('"', f);
}

/* Comma and key before a value at the current level. */
static void member(tr_json *j, const char *key)
{
    if (j->has_items[j->depth]) fputc(',', j->f);
    j->has_items[j->depth] = 1;
    if (key) {
        put_string(j->f, key);
        fputc(':', j->f);
    }
}

static void open_level(tr_json *j, const char *key, char c)
{
    member(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < TR_JSON_MAX_DEPTH) j->depth++;
    j->has_items[j->depth] = 0;
}

static void close_level(tr_json *j, char c)
{
    fputc(c, j->f);
    if (j->depth > 0) j->depth--;
    if (j->depth == 0) fputc('\n', j->f);
}

void trj_object_begin(tr_json *j, const char *key) { open_level(j, key, '{'); }
void trj_object_end(tr_json *j) { close_level(j, '}'); }
void trj_array_begin(tr_json *j, const char *key) { open_level(j, key, '['); }
void trj_array_end(tr_json *j) { close_level(j, ']'); }

void trj_str(tr_json *j, const char *key, const char *value)
{
    member(j, key);
    if (value) put_string(j->f, value);
    else fputs("null", j->f);
}

void trj_int(tr_json *j, const char *key, int64_t value)
{
    member(j, key);
    fprintf(j->f, "%" PRId64, value);
}

void trj_uint(tr_json *j, const char *key, uint64_t value)
{
    member(j, key);
    fprintf(j->f, "%" PRIu64, value);
}

void trj_double(tr_json *j, const char *key, double value)
{
    member(j, key);
    if (isfinite(value)) fprintf(j->f, "%.17g", value);
    else fputs("null", j->f);
}

void trj_bool(tr_json *j, const char *key, int value)
{
    member(j, key);
    fputs(value ? "true" : "false", j->f);
}

void trj_null(tr_json *j, const char *key)
{
    member(j, key);
    fputs("null", j->f);
}

void trj_hex(tr_json *j, const char *key, uint64_t value)
{
    member(j, key);
    fprintf(j->f, "\"0x%" PRIx64 "\"", value);
}

void trj_raw_row(tr_json *j, const char *buf, size_t len)
{
    member(j, NULL);
    fwrite(buf, 1, len, j->f);
}

void trj_b64_begin(tr_json *j, const char *key, trj_b64 *b)
{
    member(j, key);
    fputc('"', j->f);
    b->j = j;
    b->ncarry = 0;
}

static const char b64_abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_group(char *o, const uint8_t *g, int n)
{
    uint32_t q = (uint32_t)g[0] << 16 | (n > 1 ? (uint32_t)g[1] << 8 : 0) | (n > 2 ? g[2] : 0);
    *o++ = b64_abc[q >> 18];
    *o++ = b64_abc[q >> 12 & 63];
    *o++ = n > 1 ? b64_abc[q >> 6 & 63] : '=';
    *o++ = n > 2 ? b64_abc[q & 63] : '=';
    return o;
}

void trj_b64_put(trj_b64 *b, const uint8_t *data, size_t n)
{
    char out[1024];
    char *o = out;
    while (n) {
        if (b->ncarry || n < 3) {
            b->carry[b->ncarry++] = *data++;
            n--;
            if (b->ncarry < 3) continue;
            o = b64_group(o, b->carry, 3);
            b->ncarry = 0;
        } else {
            o = b64_group(o, data, 3);
            data += 3;
            n -= 3;
        }
        if (o - out > (ptrdiff_t)sizeof out - 4) {
            fwrite(out, 1, (size_t)(o - out), b->j->f);
            o = out;
        }
    }
    if (o > out) fwrite(out, 1, (size_t)(o - out), b->j->f);
}

void trj_b64_end(trj_b64 *b)
{
    char out[4];
    if (b->ncarry) fwrite(out, 1, (size_t)(b64_group(out, b->carry, b->ncarry) - out), b->j->f);
    b->ncarry = 0;
    fputc('"', b->j->f);
}

/* Replaces, in place, every byte that is not part of valid UTF-8 with '?':
 * command lines and environments may hold anything, a trace must parse. */
char *tr_utf8_clean(char *str)
{
    unsigned char *p = (unsigned char *)str;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : -1;
        int ok = n >= 0 && !(n == 1 && *p < 0xc2) && !(n == 3 && *p > 0xf4);
        for (int k = 1; ok && k <= n; k++) ok = (p[k] & 0xc0) == 0x80;
        if (ok && n == 2) {
            unsigned cp = (unsigned)(p[0] & 0x0f) << 12 | (unsigned)(p[1] & 0x3f) << 6;
            ok = cp >= 0x800 && !(cp >= 0xd800 && cp <= 0xdfff);
        }
        if (ok && n == 3) {
            unsigned cp = (unsigned)(p[0] & 0x07) << 18 | (unsigned)(p[1] & 0x3f) << 12;
            ok = cp >= 0x10000 && cp <= 0x10ffff;
        }
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n + 1;
    }
    return str;
}
