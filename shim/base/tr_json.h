/* A small streaming JSON writer for trace files: values go straight to a
 * FILE*, commas are managed per nesting level. Not thread-safe (one writer).
 * Part of base/'s boundary: included through tr_core.h. */
#ifndef TR_JSON_H
#define TR_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TR_JSON_MAX_DEPTH 32

typedef struct {
    FILE *f;
    int depth;
    unsigned char has_items[TR_JSON_MAX_DEPTH];
} tr_json;

void trj_init(tr_json *j, FILE *f);
/* key is the member name inside an object, NULL inside an array. */
void trj_object_begin(tr_json *j, const char *key);
void trj_object_end(tr_json *j);
void trj_array_begin(tr_json *j, const char *key);
void trj_array_end(tr_json *j);
void trj_str(tr_json *j, const char *key, const char *value);   /* NULL -> null */
void trj_int(tr_json *j, const char *key, int64_t value);
void trj_uint(tr_json *j, const char *key, uint64_t value);
void trj_double(tr_json *j, const char *key, double value);     /* non-finite -> null */
void trj_bool(tr_json *j, const char *key, int value);
void trj_null(tr_json *j, const char *key);
void trj_hex(tr_json *j, const char *key, uint64_t value);      /* "0x..." string */
/* One value inside an array, already formatted as JSON (len bytes of buf:
 * the compact rows of "calls", "checks" and "pystacks", built with the
 * trj_put_* helpers below): the comma before it is the writer's. */
void trj_raw_row(tr_json *j, const char *buf, size_t len);

/* A string value written in pieces: the base64 (RFC 4648, padded) of the
 * bytes given, streamed (version 2's packed calls, tr_calls_json.c). */
typedef struct {
    tr_json *j;
    uint8_t carry[3];
    int ncarry;
} trj_b64;
void trj_b64_begin(tr_json *j, const char *key, trj_b64 *b);
void trj_b64_put(trj_b64 *b, const uint8_t *data, size_t n);
void trj_b64_end(trj_b64 *b);

/* Formatting into a buffer the caller sized, without checks: for the hot
 * writers that build one array per record (tr_calls_json.c, tr_nanresults.c)
 * and hand it to trj_raw_row. */
static inline char *trj_put_lit(char *p, const char *s)
{
    while (*s) *p++ = *s++;
    return p;
}

/* s between quotes: JSON-safe strings only (names from tables) */
static inline char *trj_put_str(char *p, const char *s)
{
    *p++ = '"';
    p = trj_put_lit(p, s);
    *p++ = '"';
    return p;
}

static inline char *trj_put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do tmp[n++] = (char)('0' + v % 10); while ((v /= 10));
    while (n) *p++ = tmp[--n];
    return p;
}

static inline char *trj_put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return trj_put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return trj_put_u64(p, (uint64_t)v);
}

/* "0x…" with its quotes */
static inline char *trj_put_hex(char *p, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    int n = 0;
    do tmp[n++] = digits[v & 15]; while ((v >>= 4));
    p = trj_put_lit(p, "\"0x");
    while (n) *p++ = tmp[--n];
    *p++ = '"';
    return p;
}

/* Replaces, in place, every byte that is not part of valid UTF-8 with '?'
 * (command lines and environments may hold anything, a trace must parse);
 * returns str. */
char *tr_utf8_clean(char *str);

#endif
