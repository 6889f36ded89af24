/* Version 2's packed objects (docs/trace-format.md, "Packed rows"): the
 * frame around the rows tr_packed.h builds — the encoding, the base64 data,
 * the row count and the strings the rows index. */
#include <stdlib.h>
#include <string.h>

#include "tr_packed.h"

void trp_begin(trp_section *sec, tr_json *j, const char *key)
{
    memset(sec, 0, sizeof *sec);
    sec->j = j;
    trj_object_begin(j, key);
    trj_str(j, "encoding", TRSHIM_ROWS_ENCODING);
    trj_b64_begin(j, "data", &sec->b64);
}

int trp_intern(trp_section *sec, const char *s)
{
    for (int k = 0; k < sec->n; k++)
        if (!strcmp(sec->s[k], s)) return k;
    if (sec->n == sec->cap) {
        int cap = sec->cap ? sec->cap * 2 : 32;
        char **m = realloc(sec->s, sizeof *m * (size_t)cap);
        if (!m) return -1;
        sec->s = m;
        sec->cap = cap;
    }
    char *copy = strdup(s);
    if (!copy) return -1;
    sec->s[sec->n] = copy;
    return sec->n++;
}

uint8_t *trp_name(trp_section *sec, uint8_t *p, int *slot, const char *s)
{
    int k = slot && *slot >= 0 ? *slot : trp_intern(sec, s);
    if (slot) *slot = k;
    return k < 0 ? trp_null(&sec->w, p) : trp_str(&sec->w, p, k);
}

void trp_put(trp_section *sec, const uint8_t *buf, size_t n, uint64_t nrows)
{
    trj_b64_put(&sec->b64, buf, n);
    sec->rows += nrows;
}

void trp_end(trp_section *sec)
{
    trj_b64_end(&sec->b64);
    trj_uint(sec->j, "rows", sec->rows);
    trj_array_begin(sec->j, "strings");
    for (int k = 0; k < sec->n; k++) trj_str(sec->j, NULL, sec->s[k]);
    trj_array_end(sec->j);
    trj_object_end(sec->j);
    for (int k = 0; k < sec->n; k++) free(sec->s[k]);
    free(sec->s);
    sec->s = NULL;
    sec->n = sec->cap = 0;
}
