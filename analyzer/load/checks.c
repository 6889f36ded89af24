/* The "checks" array (the shim's NaN/Inf checks of reduced buffers), read
 * with the calls' scanner (calls.c): each check validated field by field, a
 * wrong one skipped and counted; kept sorted by call, input first. */
#include <stdlib.h>
#include <string.h>

#include "scan_int.h"
#include "ta_calls.h"

typedef struct {
    ta_trace *t;
    const int8_t *role;
    size_t cap, dcap;
    int64_t nraw;          /* calls in the file (kept + skipped) */
} checks_ctx;

static int64_t kept_call(const ta_trace *t, int64_t raw)
{
    if (!t->call_raw) return raw < t->ncalls ? raw : -1;
    int64_t lo = 0, hi = t->ncalls - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        if (t->call_raw[mid] == raw) return mid;
        if (t->call_raw[mid] < raw) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static int is_count(const jv *v, int64_t *out) { return ta_scan_num(v, out) && *out >= 0; }

static const char *check_row(void *ctx, const jv *vals, int k, int idx)
{
    (void)idx;
    checks_ctx *x = ctx;
    ta_trace *t = x->t;
    ta_check c;
    memset(&c, 0, sizeof c);
    c.first = TA_NULL64;
    int seen = 0;
    for (int p = 0; p < k; p++) {
        int r = x->role[p];
        if (r < 0) continue;
        const jv *v = &vals[p];
        int64_t n = 0;
        seen |= 1 << r;
        switch (r) {
        case TRSHIM_CHECK_CALL:
            if (!ta_scan_num(v, &n) || n < 0 || n >= x->nraw) return "call is not an index into calls";
            c.call = kept_call(t, n);
            if (c.call < 0) return "call refers to a call record that was skipped";
            break;
        case TRSHIM_CHECK_BUFFER:
            if (v->type != JV_STR) return "buffer is not a string";
            if (!strcmp(v->s, "input")) c.buffer = BUF_INPUT;
            else if (!strcmp(v->s, "output")) c.buffer = BUF_OUTPUT;
            else return "buffer is not \"input\" or \"output\"";
            break;
        case TRSHIM_CHECK_STATUS: {
            if (v->type != JV_STR) return "status is not a string";
            int s;
            for (s = 0; s < 4; s++) if (!strcmp(v->s, ta_ck_status_names[s])) break;
            if (s == 4) return "status is not clean, nonfinite, not_checked or pending";
            c.status = (uint8_t)s;
            break;
        }
        case TRSHIM_CHECK_NAN: if (!is_count(v, &c.nan)) return "nan is not a count"; break;
        case TRSHIM_CHECK_INF: if (!is_count(v, &c.inf)) return "inf is not a count"; break;
        case TRSHIM_CHECK_FIRST:
            if (v->type == JV_NULL) break;
            if (!is_count(v, &c.first)) return "first is not an index or null";
            break;
        case TRSHIM_CHECK_FIRST_KIND:
            if (v->type == JV_NULL) break;
            if (v->type != JV_STR || (strcmp(v->s, "nan") && strcmp(v->s, "inf"))) return "first_kind is not \"nan\", \"inf\" or null";
            c.first_kind = v->s[0] == 'n' ? 1 : 2;
            break;
        case TRSHIM_CHECK_ELEMS_CHECKED: if (!is_count(v, &c.checked)) return "elems_checked is not a count"; break;
        case TRSHIM_CHECK_ELEMS: if (!is_count(v, &c.elems)) return "elems is not a count"; break;
        case TRSHIM_CHECK_REASON:
            if (v->type == JV_NULL) break;
            if (v->type != JV_STR) return "reason is not a string or null";
            c.reason = ta_intern(v->s);
            break;
        }
    }
    if ((seen & TA_CHECK_REQUIRED) != TA_CHECK_REQUIRED) return "is shorter than check_fields";
    const ta_call *cl = &t->calls[c.call];
    if (!ta_op_is_coll(cl->op)) return "call is not a collective";
    if (c.status == CK_NONFINITE && c.nan + c.inf == 0 && c.first == TA_NULL64)
        return "is nonfinite without a NaN or an infinity";
    if (c.call > (int64_t)UINT32_MAX - 1) return "call is out of range";
    if ((size_t)t->nchecks >= x->cap) {
        x->cap *= 2;
        t->checks = xrealloc(t->checks, sizeof(ta_ckc) * x->cap);
    }
    ta_ckc *o = &t->checks[t->nchecks++];
    o->call = (uint32_t)c.call;
    o->buffer = c.buffer;
    o->status = c.status;
    o->first_kind = c.first_kind;
    o->pad = 0;
    if (c.status == CK_CLEAN && c.checked == c.elems && c.elems <= (int64_t)UINT32_MAX && !c.reason && !c.nan &&
        !c.inf && c.first == TA_NULL64) {
        o->det = TA_CK_NODET;
        o->elems = (uint32_t)c.elems;
    } else {
        if ((size_t)t->nckdet >= x->dcap) {
            x->dcap = x->dcap ? x->dcap * 2 : 64;
            t->ckdet = xrealloc(t->ckdet, sizeof(ta_ckdet) * x->dcap);
        }
        t->ckdet[t->nckdet] = (ta_ckdet){c.nan, c.inf, c.first, c.checked, c.elems, c.reason};
        o->det = (uint32_t)t->nckdet++;
        o->elems = 0;
    }
    return NULL;
}

static int cmp_check(const void *p, const void *q)
{
    const ta_ckc *a = p, *b = q;
    if (a->call != b->call) return a->call < b->call ? -1 : 1;
    if (a->buffer != b->buffer) return a->buffer < b->buffer ? -1 : 1;
    return 0;
}

static __thread const ta_ckc *sort_base;
static int cmp_ix(const void *p, const void *q)
{
    int64_t i = *(const int64_t *)p, j = *(const int64_t *)q;
    int c = cmp_check(&sort_base[i], &sort_base[j]);
    return c ? c : (i > j) - (i < j);
}

int ta_parse_checks(const char *b, size_t n, int packed, const int8_t *role, int npos, int64_t nraw, ta_trace *t,
                    size_t *err_at, char *err, size_t errn, const char **first_why, int *first_i)
{
    checks_ctx x = {t, role, n / (packed ? 16 : 40) + 16, 0, nraw};
    t->checks = xmalloc(sizeof(ta_ckc) * x.cap);
    t->nchecks = 0;
    int r = packed ? ta_unpack_rows("checks", b, n, npos, check_row, &x, err, errn, first_why, first_i,
                                    &t->skipped_checks)
                   : ta_scan_rows(b, n, npos, check_row, &x, err_at, first_why, first_i, &t->skipped_checks);
    if (packed && r == -1) r = -3;
    if (r < 0) {
        free(t->checks);
        free(t->ckdet);
        t->checks = NULL;
        t->ckdet = NULL;
        t->nchecks = t->nckdet = 0;
        return r;
    }
    /* sorted by call, input first (as written); a second check of the same
     * buffer of a call is dropped */
    int sorted = 1;
    for (int64_t i = 1; i < t->nchecks && sorted; i++) sorted = cmp_check(&t->checks[i - 1], &t->checks[i]) < 0;
    if (!sorted) {
        /* stable: of equal ones the first written stays, the others go */
        int64_t *ix = xmalloc(sizeof(int64_t) * (size_t)(t->nchecks + 1));
        for (int64_t i = 0; i < t->nchecks; i++) ix[i] = i;
        sort_base = t->checks;
        if (t->nchecks > 1) qsort(ix, (size_t)t->nchecks, sizeof *ix, cmp_ix);
        ta_ckc *v = xmalloc(sizeof(ta_ckc) * (size_t)(t->nchecks + 1));
        for (int64_t i = 0; i < t->nchecks; i++) v[i] = t->checks[ix[i]];
        free(ix);
        free(t->checks);
        t->checks = v;
        int64_t w = 0;
        for (int64_t i = 0; i < t->nchecks; i++) {
            if (w && !cmp_check(&v[w - 1], &v[i])) {
                if (!*first_why) { *first_why = "repeats a check of the same buffer of the same call"; *first_i = -1; }
                t->skipped_checks++;
                continue;
            }
            v[w++] = v[i];
        }
        t->nchecks = w;
    }
    return 0;
}

