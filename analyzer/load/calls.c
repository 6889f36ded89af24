/* The calls of a trace, row by row from the scanner (scan.c: version 1's
 * JSON arrays) or the packed rows (packed.c: version 2), each validated
 * field by field with the same rules as every other field: a wrong call is
 * skipped and counted; a syntax error or damaged packed data makes the whole
 * file unusable. */
#include <stdlib.h>
#include <string.h>

#include "scan_int.h"
#include "ta_calls.h"
#include "trshim/ring_format.h"


/* The few distinct strings of a column (operations, datatypes, streams),
 * remembered per loading thread: a call's names are then one strcmp, not a
 * search of the vocabulary (a tenth of the time of a large job's loading) */
#define MEMO_N 8
typedef struct { char s[MEMO_N][24]; int64_t v[MEMO_N]; int next; } memo;
#define FIELD_ROW(id, name, read, since) {name, TRSHIM_FIELD_##read},
const ta_field ta_call_fields[TRSHIM_CALL_FIELD_N] = {TRSHIM_CALL_FIELDS(FIELD_ROW)};
const ta_field ta_check_fields[TRSHIM_CHECK_FIELD_N] = {TRSHIM_CHECK_FIELDS(FIELD_ROW)};
#undef FIELD_ROW

int ta_field_find(const ta_field *tab, int n, const char *name)
{
    for (int r = 0; r < n; r++)
        if (!strcmp(name, tab[r].name)) return tab[r].read == TRSHIM_FIELD_UNREAD ? -1 : r;
    return -1;
}

const char *ta_field_missing(const ta_field *tab, int n, unsigned have)
{
    for (int r = 0; r < n; r++)
        if (tab[r].read == TRSHIM_FIELD_REQUIRED && !(have & (1u << r))) return tab[r].name;
    return NULL;
}

static _Thread_local memo memo_op, memo_dtype, memo_redop, memo_stream, memo_gpu;

static int memo_find(const memo *m, const char *s, int64_t *v)
{
    for (int k = 0; k < MEMO_N; k++)
        if (m->s[k][0] && !strcmp(m->s[k], s)) { *v = m->v[k]; return 1; }
    return 0;
}

static void memo_put(memo *m, const char *s, int64_t v)
{
    if (strlen(s) >= sizeof m->s[0]) return;
    strcpy(m->s[m->next], s);
    m->v[m->next] = v;
    m->next = (m->next + 1) % MEMO_N;
}

/* parse(s) through memo m: -1 when s is not known */
static int memo_parse(memo *m, const char *s, int (*parse)(const char *))
{
    int64_t v;
    if (memo_find(m, s, &v)) return (int)v;
    int r = parse(s);
    if (r >= 0) memo_put(m, s, r);
    return r;
}

/* A packed trace's string (by its index, the first SID_MEMO_N) parsed
 * once per trace per column: no comparison at all for most calls */
#define SID_MEMO_N 64
enum { SID_OP, SID_DTYPE, SID_REDOP, SID_GPU, SID_COLUMNS };
typedef int16_t sid_memo[SID_COLUMNS][SID_MEMO_N];   /* value + 2; 0: not parsed yet */

static int sid_parse(sid_memo sm, int col, const jv *v, memo *m, int (*parse)(const char *))
{
    if (v->sid < 0 || v->sid >= SID_MEMO_N) return memo_parse(m, v->s, parse);
    int16_t *e = &sm[col][v->sid];
    if (!*e) *e = (int16_t)(memo_parse(m, v->s, parse) + 2);
    return *e - 2;
}

static int gpu_parse(const char *s)
{
    return !strcmp(s, "done")      ? GPU_DONE
           : !strcmp(s, "pending") ? GPU_PENDING
           : !strcmp(s, "error")   ? GPU_ERROR
           : !strcmp(s, "aborted") ? GPU_ABORTED
                                   : -1;
}

static int parse_stream(const char *s, uint64_t *out)
{
    int64_t v;
    if (memo_find(&memo_stream, s, &v)) { *out = (uint64_t)v; return 0; }
    if (ta_parse_hex(s, out)) return -1;
    memo_put(&memo_stream, s, (int64_t)*out);
    return 0;
}

static const char *conv(const jv *vals, int nv, const int8_t *role, ta_trace *t, ta_call *c, uint64_t *streams,
                        int *nstreams, ta_callx *x, sid_memo sm)
{
    memset(c, 0, sizeof *c);
    memset(x, 0, sizeof *x);
    x->cfg = x->lstack = x->lpystack = -1;
    int64_t cfg = INT64_MIN;       /* "config": null */
    int64_t graph = INT64_MIN, replay = INT64_MIN;   /* a GraphLaunch's "graph", "replay": null */
    int lane = -1;
    int has_sig = 0;
    c->rp = c->comm = c->stack = c->pystack = -1;
    c->exit_ns = c->done_ns = TA_NULL64;
    c->rc = INT16_MIN;
    int root = -1, peer = -1, seen = 0;
    for (int p = 0; p < nv; p++) {
        int r = role[p];
        if (r < 0) continue;
        const jv *v = &vals[p];
        seen |= 1 << r;
        int64_t n = 0;
        switch (r) {
        case TRSHIM_CALL_OP: {
            if (v->type != JV_STR) return "op is not a string";
            int op = sid_parse(sm, SID_OP, v, &memo_op, ta_op_parse);
            if (op < 0) return "op is not a known NCCL operation";
            c->op = (uint8_t)op;
            break;
        }
        case TRSHIM_CALL_COMM:
            if (!ta_scan_num(v, &n) || n < -1 || n >= t->ncomms) return "comm is not an index into comms";
            c->comm = (int32_t)n;
            break;
        case TRSHIM_CALL_SEQ:
            if (!ta_scan_num(v, &n) || n < 0 || n > 0x7fffffff) return "seq is not a non-negative integer";
            c->seq = (uint32_t)n;
            break;
        case TRSHIM_CALL_COUNT:
            if (!ta_scan_num(v, &n) || n < 0) return "count is not a non-negative integer";
            c->count = n;
            break;
        case TRSHIM_CALL_DTYPE:
            if (v->type == JV_NULL) break;
            if (v->type != JV_STR) return "dtype is not a string";
            { int d = sid_parse(sm, SID_DTYPE, v, &memo_dtype, ta_dtype_parse); if (d < 0) return "dtype is not a known datatype"; c->dtype = (uint8_t)d; }
            break;
        case TRSHIM_CALL_REDOP:
            if (v->type == JV_NULL) break;
            if (v->type != JV_STR) return "redop is not a string";
            { int d = sid_parse(sm, SID_REDOP, v, &memo_redop, ta_redop_parse); if (d < 0) return "redop is not a known reduction"; c->redop = (uint8_t)d; }
            break;
        case TRSHIM_CALL_ROOT:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n < 0 || n > 0x7fffffff) return "root is not a rank";
            root = (int)n;
            break;
        case TRSHIM_CALL_PEER:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n < 0 || n > 0x7fffffff) return "peer is not a rank";
            peer = (int)n;
            break;
        case TRSHIM_CALL_STREAM: {
            uint64_t s = ~0ull;
            if (v->type == JV_HEX) s = (uint64_t)v->i;
            else if (v->type != JV_NULL && (v->type != JV_STR || parse_stream(v->s, &s)))
                return "stream is not a \"0x...\" string";
            int k;
            for (k = 0; k < *nstreams; k++) if (streams[k] == s) break;
            if (k == *nstreams) {
                if (*nstreams < 254) streams[(*nstreams)++] = s;
                else k = 254;
            }
            c->stream = (uint8_t)k;
            break;
        }
        case TRSHIM_CALL_GROUP:
            if (!ta_scan_num(v, &n) || n < 0 || n > 0xffffffffLL) return "group is not a non-negative integer";
            c->group = (uint32_t)n;
            break;
        case TRSHIM_CALL_ENTER_NS:
            if (!ta_scan_num(v, &n)) return "enter_ns is not an integer";
            c->enter_ns = n;
            break;
        case TRSHIM_CALL_EXIT_NS:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n == TA_NULL64) return "exit_ns is not an integer or null";
            c->exit_ns = n;
            break;
        case TRSHIM_CALL_RC:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n < -32767 || n > 32767) return "rc is not an integer or null";
            c->rc = (int16_t)n;
            break;
        case TRSHIM_CALL_STACK:
            if (!ta_scan_num(v, &n) || n < -1 || n > 0x7fffffff) return "stack is not an index";
            c->stack = (int32_t)n;
            break;
        case TRSHIM_CALL_DONE_NS:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n == TA_NULL64) return "done_ns is not an integer or null";
            c->done_ns = n;
            break;
        case TRSHIM_CALL_PYSTACK:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n < -1 || n > 0x7fffffff) return "pystack is not an index";
            c->pystack = (int32_t)n;
            break;
        case TRSHIM_CALL_CONFIG:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n < -1 || n > 0x7fffffff) return "config is not an index into coll_configs, -1 or null";
            cfg = n;
            break;
        case TRSHIM_CALL_SIGNAL:
            if (v->type == JV_NULL) break;
            if (v->type != JV_PAIR || v->i < INT32_MIN || v->i > UINT32_MAX || v->i2 < INT32_MIN || v->i2 > INT32_MAX)
                return "signal is not a [sigIdx, ctx] pair or null";
            has_sig = 1;
            x->sig_idx = v->i;
            x->sig_ctx = (int32_t)v->i2;
            break;
        /* a GraphLaunch's; checked below when the call is one (others' are null) */
        case TRSHIM_CALL_GRAPH:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n < 0 || n > 0x7fffffff) return "graph is not an index into graphs or null";
            graph = n;
            break;
        case TRSHIM_CALL_REPLAY:
            if (v->type == JV_NULL) break;
            if (!ta_scan_num(v, &n) || n < 1) return "replay is not a replay number (1, 2, ...) or null";
            replay = n;
            break;
        case TRSHIM_CALL_LANE:
            if (v->type == JV_NULL) break;
            if (v->type != JV_STR || (lane = ta_lane_parse(v->s)) < 0)
                return "lane is not \"coll\", \"send\", \"recv\", \"signal\", \"wait\" or null";
            break;
        case TRSHIM_CALL_GPU:
            if (v->type == JV_NULL) break;
            if (v->type != JV_STR) return "gpu is not a string or null";
            { int g = sid_parse(sm, SID_GPU, v, &memo_gpu, gpu_parse); if (g < 0) return "gpu is not \"pending\", \"done\", \"error\" or null"; c->gpu = (uint8_t)g; }
            break;
        }
    }
    if ((seen & TA_CALL_REQUIRED) != TA_CALL_REQUIRED) return "is shorter than call_fields";
    if (ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) c->rp = peer;
    else if (ta_op_rooted(c->op)) c->rp = root;
    if (c->op == OP_GRAPHLAUNCH) {
        /* one lane of one launch: graphs.c replaces it by the calls it replays */
        if (graph == INT64_MIN) return "a GraphLaunch has no graph";
        if (replay == INT64_MIN) return "a GraphLaunch has no replay number";
        if (lane < 0) return "a GraphLaunch has no lane";
        if (c->comm < 0) return "a GraphLaunch has no communicator";
        if (lane != TRR_LANE_COLL && peer < 0) return "a GraphLaunch of a per-peer lane has no peer";
        /* the lane's numbers in the replay: seq .. seq + count - 1 */
        if (c->count > 0x7fffffff || (int64_t)c->seq + c->count > 0x80000000LL)
            return "a GraphLaunch's numbers (seq, count) are out of range";
        c->rp = lane == TRR_LANE_COLL ? -1 : peer;
        c->dtype = DT_NONE;
        c->redop = RO_NONE;
        c->xf |= XF_LAUNCH;
        x->graph = (int32_t)graph;
        x->replay = replay;
        x->node = lane;
    }
    if (ta_op_is_group(c->op)) c->comm = -1;
    if ((ta_op_is_coll(c->op) || ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) && c->seq > 0) {
        if (c->comm < 0) return "a numbered call has no communicator";
        if (ta_op_is_p2p(c->op) && peer < 0) return "a numbered send/recv has no peer";
        if (ta_op_is_onesided(c->op) && peer < 0) return "a numbered signal or wait has no peer";
    }
    /* a collective issued through its *Config entry point (other calls' config is null) */
    if (cfg != INT64_MIN && ta_op_is_coll(c->op)) {
        c->xf |= XF_CONFIG;
        if (cfg >= 0 && cfg < t->ncfgs) x->cfg = (int32_t)cfg;
        else if (cfg >= 0) t->cfg_badref++;
    }
    if (has_sig && ta_op_is_onesided(c->op)) c->xf |= XF_SIGNAL;
    if (c->stack >= t->nstacks) c->stack = -1;
    if (c->pystack >= t->npystacks) {       /* (a damaged stack is kept, empty) */
        c->pystack = -1;
        t->py_badref++;
    }
    if (c->gpu != GPU_DONE) c->done_ns = TA_NULL64;     /* a completion time only with a completion */
    return NULL;
}

typedef struct {
    ta_trace *t;
    const int8_t *role;
    size_t cap, used;
    uint64_t streams[256];
    int nstreams;
    size_t xcap;
    sid_memo sm;
} calls_ctx;

static const char *call_row(void *ctx, const jv *vals, int k, int idx)
{
    calls_ctx *x = ctx;
    ta_trace *t = x->t;
    if (x->used >= x->cap) {
        x->cap *= 2;
        t->calls = xrealloc(t->calls, sizeof(ta_call) * x->cap);
        if (t->call_raw) t->call_raw = xrealloc(t->call_raw, sizeof(int64_t) * x->cap);
    }
    ta_callx cx;
    const char *why = conv(vals, k, x->role, t, &t->calls[x->used], x->streams, &x->nstreams, &cx, x->sm);
    if (why) {
        if (!t->call_raw) {      /* indices shift from here on: keep the file's */
            t->call_raw = xmalloc(sizeof(int64_t) * x->cap);
            for (size_t j = 0; j < x->used; j++) t->call_raw[j] = (int64_t)j;
        }
        return why;
    }
    if (t->call_raw) t->call_raw[x->used] = idx;
    if (t->calls[x->used].xf) {
        if ((size_t)t->ncallx >= x->xcap) {
            x->xcap = x->xcap ? x->xcap * 2 : 64;
            t->callx = xrealloc(t->callx, sizeof *t->callx * x->xcap);
        }
        cx.call = (int64_t)x->used;
        t->callx[t->ncallx++] = cx;
    }
    /* the comm's lowest collective seq kept (calls come in order: nearly
     * always the first one) */
    const ta_call *c = &t->calls[x->used];
    if (c->seq && c->comm >= 0 && ta_op_is_coll(c->op)) {
        uint32_t *f = &t->comms[c->comm].first_seq;
        if (!*f || c->seq < *f) *f = c->seq;
    }
    x->used++;
    return NULL;
}

int ta_parse_calls(const char *b, size_t n, int packed, const int8_t *role, int npos, ta_trace *t, size_t *err_at,
                   char *err, size_t errn, const char **first_why, int *first_i)
{
    /* capacity: a JSON call is at least 2 + 19 * 2 characters, a packed
     * one at least 20 base64 characters */
    calls_ctx x = {t, role, n / (packed ? 20 : 24) + 16, 0, {0}, 0, 0, {{0}}};
    t->calls = xmalloc(sizeof(ta_call) * x.cap);
    int r = packed ? ta_unpack_rows("calls", b, n, npos, call_row, &x, err, errn, first_why, first_i, &t->skipped_records)
                   : ta_scan_rows(b, n, npos, call_row, &x, err_at, first_why, first_i, &t->skipped_records);
    if (r < 0) {
        free(t->calls);
        free(t->call_raw);
        free(t->callx);
        t->calls = NULL;
        t->call_raw = NULL;
        t->callx = NULL;
        t->ncallx = 0;
        t->ncalls = 0;
        return packed && r == -1 ? -3 : r;
    }
    t->ncalls = (int64_t)x.used;
    return 0;
}

/* A communicator listed twice in one trace (the same id) would hold two
 * places of one communicator for one rank, and the per-communicator tables
 * assume one. As the ring reader does, the first listing is the rank's: the
 * repeats go, with the calls made on them and those calls' checks (the
 * numbering of a second listing cannot be trusted against the first's). */
int ta_drop_repeated_comms(ta_trace *t, int64_t *ncalls_dropped)
{
    *ncalls_dropped = 0;
    int *map = xmalloc(sizeof(int) * ((size_t)t->ncomms + 1)), kept = 0, reps = 0;
    for (int i = 0; i < t->ncomms; i++) {
        int seen = 0;
        for (int k = 0; k < i && !seen; k++) seen = map[k] >= 0 && t->comms[k].id == t->comms[i].id;
        map[i] = seen ? -1 : kept++;
        reps += seen;
    }
    if (!reps) { free(map); return 0; }
    for (int i = 0; i < t->ncomms; i++) {
        if (map[i] < 0) { free(t->comms[i].ckp); continue; }
        t->comms[map[i]] = t->comms[i];
        t->comms[map[i]].family = map[i];     /* the position in the list, as read */
    }
    t->ncomms = kept;
    /* the CUDA graphs' captured calls: on the kept listing (a repeat's: none) */
    for (int g = 0; g < t->ngraphs; g++)
        for (int k = 0; k < t->graphs[g].ncalls; k++) {
            int32_t *c = &t->graphs[g].calls[k].comm;
            if (*c >= 0) *c = map[*c];
        }
    /* the calls: renumbered; call_raw keeps each one's place in the file */
    int64_t *newix = xmalloc(sizeof(int64_t) * ((size_t)t->ncalls + 1)), w = 0;
    for (int64_t i = 0; i < t->ncalls; i++) {
        ta_call c = t->calls[i];
        if (c.comm >= 0 && map[c.comm] < 0) { newix[i] = -1; continue; }
        if (c.comm >= 0) c.comm = map[c.comm];
        newix[i] = w;
        if (!t->call_raw && w != i) {       /* indices shift from here on: keep the file's */
            t->call_raw = xmalloc(sizeof(int64_t) * ((size_t)t->ncalls + 1));
            for (int64_t j = 0; j < t->ncalls; j++) t->call_raw[j] = j;
        }
        if (t->call_raw) t->call_raw[w] = t->call_raw[i];
        t->calls[w++] = c;
    }
    *ncalls_dropped = t->ncalls - w;
    t->ncalls = w;
    int64_t wc = 0;
    for (int64_t k = 0; k < t->nchecks; k++) {
        int64_t ci = newix[t->checks[k].call];
        if (ci < 0) continue;
        t->checks[wc] = t->checks[k];
        t->checks[wc++].call = (uint32_t)ci;     /* a monotone renumbering: still sorted */
    }
    t->nchecks = wc;
    int64_t wx = 0;
    for (int64_t k = 0; k < t->ncallx; k++) {
        int64_t ci = newix[t->callx[k].call];
        if (ci < 0) continue;
        t->callx[wx] = t->callx[k];
        t->callx[wx++].call = ci;                /* monotone: still sorted */
    }
    t->ncallx = wx;
    free(newix);
    free(map);
    return reps;
}
