/* A small streaming JSON writer for trace files: values go straight to a
 * FILE*, commas are managed per nesting level. Not thread-safe (one writer). */
#ifndef TR_JSON_H
#define TR_JSON_H

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

#endif
