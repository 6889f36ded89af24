/* The scanner's rows (calls.c) shared with the checks' reader (checks.c)
 * and the packed calls (packed.c): one value of a row, and the loops over
 * the rows. */
#ifndef TA_SCAN_INT_H
#define TA_SCAN_INT_H
#include <stddef.h>
#include <stdint.h>

/* JV_HEX: a packed address (tag 3), version 1's "0x..." string, in i */
enum { JV_NULL, JV_BOOL, JV_INT, JV_DBL, JV_STR, JV_OTHER, JV_PAIR, JV_HEX };
typedef struct {
    int type;
    int64_t i, i2;        /* JV_PAIR: [i, i2], two integers */
    double d;
    int32_t sid;          /* JV_STR: its index in a packed trace's strings, -1 in JSON */
    char s[64];
} jv;

/* Iterates the array of arrays b[0..n); each row's scalars (up to npos)
 * go to fn, which returns NULL (kept) or why the row is skipped; a row that
 * is not an array or is longer than npos is skipped here. 0, -1 syntax
 * error at *err_at, -2 not an array. */
typedef const char *(*row_fn)(void *ctx, const jv *vals, int k, int idx);
int ta_scan_rows(const char *b, size_t n, int npos, row_fn fn, void *ctx, size_t *err_at, const char **first_why,
                 int *first_i, int64_t *skipped);
/* The rows of version 2's packed object b[0..n) (what: "calls", "checks",
 * for the messages) to fn, as ta_scan_rows gives a JSON array's. 0; -1
 * with why in err: the object or its data is damaged; -2: not an object. */
int ta_unpack_rows(const char *what, const char *b, size_t n, int npos, row_fn fn, void *ctx, char *err, size_t errn,
                   const char **first_why, int *first_i, int64_t *skipped);
/* an integer (or a float without fraction), into *out */
int ta_scan_num(const jv *v, int64_t *out);

#endif
