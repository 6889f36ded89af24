/* Version 2's packed rows (docs/trace-format.md, "Packed rows"): one
 * value is a tag byte holding 4 bits of its payload, then 7 bits a byte;
 * integers and addresses are deltas from the previous value at the same
 * position. Built into a buffer the caller sized (at most 11 bytes a value).
 * Part of base/'s boundary: included through tr_core.h. */
#ifndef TR_PACKED_H
#define TR_PACKED_H

#include <stdint.h>

#include "tr_json.h"
#include "trshim/trace_format.h"

typedef struct {
    uint64_t prev[TRSHIM_ROWS_MAX_VALUES];
    int pos;             /* the position of the next value in its row */
} trp_rows;

/* u as an unsigned LEB128 varint */
static inline uint8_t *trp_leb128(uint8_t *p, uint64_t u)
{
    while (u >= 0x80) {
        *p++ = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    *p++ = (uint8_t)u;
    return p;
}

static inline uint8_t *trp_value(uint8_t *p, unsigned tag, uint64_t pay)
{
    uint8_t b = (uint8_t)(tag | (pay & 15) << 4);
    if (pay < 16) {
        *p++ = b;
        return p;
    }
    *p++ = b | 8;
    return trp_leb128(p, pay >> 4);
}

static inline uint64_t trp_zigzag(uint64_t d) { return d << 1 ^ (0 - (d >> 63)); }

/* a row of k values begins (k < 128: one byte) */
static inline uint8_t *trp_row(trp_rows *w, uint8_t *p, int k)
{
    w->pos = 0;
    *p++ = (uint8_t)k;
    return p;
}

static inline uint8_t *trp_null(trp_rows *w, uint8_t *p)
{
    w->pos++;
    return trp_value(p, TRSHIM_PK_NULL, 0);
}

static inline uint8_t *trp_bool(trp_rows *w, uint8_t *p, int v)
{
    w->pos++;
    return trp_value(p, TRSHIM_PK_BOOL, v != 0);
}

static inline uint8_t *trp_delta(trp_rows *w, uint8_t *p, unsigned tag, uint64_t v)
{
    uint64_t d = v - w->prev[w->pos];
    w->prev[w->pos++] = v;
    return trp_value(p, tag, trp_zigzag(d));
}

static inline uint8_t *trp_int(trp_rows *w, uint8_t *p, int64_t v) { return trp_delta(w, p, TRSHIM_PK_INT, (uint64_t)v); }
static inline uint8_t *trp_addr(trp_rows *w, uint8_t *p, uint64_t v) { return trp_delta(w, p, TRSHIM_PK_ADDR, v); }

static inline uint8_t *trp_str(trp_rows *w, uint8_t *p, int index)
{
    w->pos++;
    return trp_value(p, TRSHIM_PK_STR, (uint64_t)index);
}

static inline uint8_t *trp_pair(trp_rows *w, uint8_t *p, int64_t a, int64_t b)
{
    w->pos++;
    p = trp_value(p, TRSHIM_PK_PAIR, trp_zigzag((uint64_t)a));
    return trp_leb128(p, trp_zigzag((uint64_t)b));
}

/* One packed object ("calls", "checks"): its strings, each once, and its
 * data streamed as base64 (tr_packed.c). */
typedef struct {
    tr_json *j;
    trj_b64 b64;
    char **s;
    int n, cap;
    uint64_t rows;
    trp_rows w;
} trp_section;

/* opens "key": {"encoding", "data": ... */
void trp_begin(trp_section *sec, tr_json *j, const char *key);
/* index of s in the section's strings; -1 without memory */
int trp_intern(trp_section *sec, const char *s);
/* s as the next value of the row: its index, kept in *slot (-1: not known
 * yet; slot NULL: not kept), so a name of a vocabulary costs no search
 * after its first row; null without memory */
uint8_t *trp_name(trp_section *sec, uint8_t *p, int *slot, const char *s);
/* rows built in buf[0..n), nrows of them, to the data */
void trp_put(trp_section *sec, const uint8_t *buf, size_t n, uint64_t nrows);
/* ends the data, writes "rows" and "strings", closes the object */
void trp_end(trp_section *sec);

#endif
