/* Small helpers of the model: allocation, notes, interning, names and texts
 * describing calls, ranks and how a process ended. */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ta_model.h"
#include "trshim/ring_format.h"

#define TA_OP_NAME_(suffix, name, flags, alias) name,
const char *const ta_op_names[OP_N] = {TR_NCCL_OPS(TA_OP_NAME_)};
#undef TA_OP_NAME_
#define TA_DT_NAME_(suffix, name, bytes, kind) name,
const char *const ta_dtype_names[DT_N] = {"none", TR_NCCL_DTYPES(TA_DT_NAME_) "invalid"};
#undef TA_DT_NAME_
#define TA_DT_BYTES_(suffix, name, bytes, kind) bytes,
static const int dtype_sizes[DT_N] = {0, TR_NCCL_DTYPES(TA_DT_BYTES_) 0};
#undef TA_DT_BYTES_
enum { TA_DTK_INT, TA_DTK_FLOAT };
#define TA_DT_FLOAT_(suffix, name, bytes, kind) TA_DTK_##kind,
static const unsigned char dtype_float[DT_N] = {0, TR_NCCL_DTYPES(TA_DT_FLOAT_) 0};
#undef TA_DT_FLOAT_
#define TA_RO_NAME_(suffix, name) name,
const char *const ta_redop_names[RO_N] = {"none", TR_NCCL_REDOPS(TA_RO_NAME_) "premulsum"};
#undef TA_RO_NAME_
const char *const ta_ck_status_names[4] = {"clean", "nonfinite", "not_checked", "pending"};
const char *const ta_nm_names[5] = {NULL, "off", "output", "all", "other"};
int ta_lane_parse(const char *s)
{
    for (int i = 0; i < TRR_LANE_N; i++)
        if (!strcmp(s, trr_lane_names[i])) return i;
    return -1;
}
/* a collective is numbered per communicator; a send, receive, signal or
 * wait per peer and direction (PutSignal and Signal share one numbering) */
int ta_lane_of(int op)
{
    if (ta_op_is_coll(op)) return TRR_LANE_COLL;
    if (op == OP_SEND) return TRR_LANE_SEND;
    if (op == OP_RECV) return TRR_LANE_RECV;
    if (op == OP_PUTSIGNAL || op == OP_SIGNAL) return TRR_LANE_SIGNAL;
    if (op == OP_WAITSIGNAL) return TRR_LANE_WAIT;
    return -1;
}
void ta_first_seqs(ta_trace *t)
{
    for (int c = 0; c < t->ncomms; c++) t->comms[c].first_seq = 0;
    for (int64_t i = 0; i < t->ncalls; i++) {
        const ta_call *c = &t->calls[i];
        if (!c->seq || c->comm < 0 || c->comm >= t->ncomms || !ta_op_is_coll(c->op)) continue;
        uint32_t *f = &t->comms[c->comm].first_seq;
        if (!*f || c->seq < *f) *f = c->seq;
    }
}

void ta_graphs_free(ta_graph *g, int n)
{
    for (int i = 0; i < n; i++) free(g[i].calls);
    free(g);
}
const char *const ta_end_names[] = {"exited", "signal", "comm_end", "snapshot", "no_trace", "unknown", "killed", "hang"};

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    return p;
}
void *xcalloc(size_t n, size_t m)
{
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (!p) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    return p;
}
void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    return p;
}
char *xstrdup(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *d = xmalloc(n);
    memcpy(d, s ? s : "", n);
    return d;
}
static char *xvasprintf(const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    char one[1];
    int n = vsnprintf(one, sizeof one, fmt, aq);
    va_end(aq);
    char *s = xmalloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}
char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;

/* the note, its text made (taken over) */
static void note_push(ta_an *a, const char *file, int fatal, int64_t bytes, char *text)
{
    pthread_mutex_lock(&note_lock);
    a->notes = xrealloc(a->notes, sizeof *a->notes * (size_t)(a->nnotes + 1));
    a->notes[a->nnotes++] = (ta_note){file ? xstrdup(file) : NULL, text, fatal, bytes};
    pthread_mutex_unlock(&note_lock);
}

void ta_note_add(ta_an *a, const char *file, int fatal, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    note_push(a, file, fatal, -1, s);
}

void ta_note_cut(ta_an *a, const char *file, int64_t bytes, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    note_push(a, file, 1, bytes, s);
}

int ta_op_parse(const char *s)
{
    for (int i = 0; i < OP_N; i++)
        if (!strcmp(s, ta_op_names[i])) return i;
    return -1;
}
int ta_dtype_parse(const char *s)
{
    if (!strncmp(s, "invalid(", 8)) return DT_INVALID;
    for (int i = 1; i < DT_INVALID; i++)
        if (!strcmp(s, ta_dtype_names[i])) return i;
    return -1;
}
int ta_dtype_size(int dt) { return dt >= 0 && dt < DT_N ? dtype_sizes[dt] : 0; }
int ta_dtype_is_float(int dt) { return dt >= 0 && dt < DT_N && dtype_float[dt]; }
int ta_redop_parse(const char *s)
{
    if (!strncmp(s, "premulsum(", 10)) return RO_PREMULSUM;
    for (int i = 1; i < RO_PREMULSUM; i++)
        if (!strcmp(s, ta_redop_names[i])) return i;
    return -1;
}

/* ---- interning (thread-safe; used for symbol names while parsing) ---- */
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static char **itab;
static size_t icap, icount;

uint64_t ta_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t strhash(const char *s) { return ta_hash_bytes(s, strlen(s)); }

const char *ta_intern(const char *s)
{
    if (!s) return NULL;
    pthread_mutex_lock(&intern_lock);
    if (icount * 2 >= icap) {
        size_t ncap = icap ? icap * 2 : 1024;
        char **n = xcalloc(ncap, sizeof *n);
        for (size_t i = 0; i < icap; i++)
            if (itab[i]) {
                size_t j = strhash(itab[i]) & (ncap - 1);
                while (n[j]) j = (j + 1) & (ncap - 1);
                n[j] = itab[i];
            }
        free(itab);
        itab = n;
        icap = ncap;
    }
    size_t j = strhash(s) & (icap - 1);
    while (itab[j] && strcmp(itab[j], s)) j = (j + 1) & (icap - 1);
    if (!itab[j]) { itab[j] = xstrdup(s); icount++; }
    const char *r = itab[j];
    pthread_mutex_unlock(&intern_lock);
    return r;
}

void ta_intern_reset(void)
{
    pthread_mutex_lock(&intern_lock);
    for (size_t i = 0; i < icap; i++) free(itab[i]);
    free(itab);
    itab = NULL;
    icap = icount = 0;
    pthread_mutex_unlock(&intern_lock);
}

void ta_model_free(ta_an *a)
{
    for (int i = 0; i < a->nnotes; i++) { free(a->notes[i].file); free(a->notes[i].text); }
    free(a->notes);
    a->notes = NULL;
    a->nnotes = 0;
    free(a->mods);
    a->mods = NULL;
    a->nmods = 0;
}

int ta_module_intern(ta_an *a, const char *path, const char *build_id)
{
    for (int i = 0; i < a->nmods; i++) {
        const ta_module *m = &a->mods[i];
        if (build_id && m->build_id) {
            if (!strcmp(build_id, m->build_id) && !strcmp(path, m->path)) return i;
        } else if (!build_id && !m->build_id && !strcmp(path, m->path)) {
            return i;
        }
    }
    a->mods = xrealloc(a->mods, sizeof *a->mods * (size_t)(a->nmods + 1));
    a->mods[a->nmods] = (ta_module){ta_intern(path), build_id ? ta_intern(build_id) : NULL};
    return a->nmods++;
}

uint64_t ta_hash64(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

const char *ta_signame(int sig)
{
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGKILL: return "SIGKILL";
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGQUIT: return "SIGQUIT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    default: return NULL;
    }
}

int ta_last_call(const ta_trace *t, int64_t *out)
{
    for (int64_t i = t->ncalls - 1; i >= 0; i--)
        if (!ta_op_is_group(t->calls[i].op)) { *out = i; return 1; }
    return 0;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

int64_t ta_median64(int64_t *v, int64_t n)
{
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

double ta_wall(const ta_trace *t, int64_t ns)
{
    if (ns == TA_NULL64) return 0;
    if (t->clk_set) return (double)ns / 1e9 + (double)t->clk_off_ns / 1e9;   /* the job's one clock (clocks.c) */
    return t->clock_real + (double)(ns - t->clock_mono) / 1e9;
}

int ta_comm_local(const ta_trace *t, int g)
{
    for (int i = 0; i < t->ncomms; i++)
        if (t->comms[i].g == g) return i;
    return -1;
}

const char *ta_comm_name(const ta_an *a, int g)
{
    static __thread char buf[8][24];
    static __thread int k;
    if (g < 0 || g >= a->ngc) return "?";
    char *b = buf[k++ & 7];
    snprintf(b, 24, "0x%016llx", (unsigned long long)a->gc[g].id);
    return b;
}

const ta_callx *ta_callx_of(const ta_trace *t, int64_t ci)
{
    if (ci < 0 || ci >= t->ncalls || !t->calls[ci].xf || !t->ncallx) return NULL;
    int64_t lo = 0, hi = t->ncallx - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (t->callx[mid].call == ci) return &t->callx[mid];
        if (t->callx[mid].call < ci) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const ta_collcfg *ta_call_cfg(const ta_trace *t, int64_t ci)
{
    const ta_callx *x = ta_callx_of(t, ci);
    if (!x || !(t->calls[ci].xf & XF_CONFIG) || x->cfg < 0 || x->cfg >= t->ncfgs) return NULL;
    return &t->cfgs[x->cfg];
}

/* the *Config entry point of each operation, from the vocabulary */
#define TA_FN_(name, op, kind, since, action) {#name, TR_OP_##op},
static const struct { const char *name; int op; } nccl_funcs[] = {TR_NCCL_FUNCS(TA_FN_)};
#undef TA_FN_

const char *ta_config_entry(int op)
{
    op = ta_op_norm(op);
    for (size_t i = 0; i < sizeof nccl_funcs / sizeof nccl_funcs[0]; i++) {
        size_t l = strlen(nccl_funcs[i].name);
        if (nccl_funcs[i].op == op && l > 6 && !strcmp(nccl_funcs[i].name + l - 6, "Config")) return nccl_funcs[i].name;
    }
    return NULL;
}

char *ta_cfg_text(const ta_collcfg *c)
{
    if (!c || c->state == CFG_UNKNOWN) return xstrdup("config not recorded");
    if (c->state == CFG_NULL) return xstrdup("config NULL");
    if (c->state == CFG_INVALID) return xstrdup("a config NCCL rejects: bad magic");
    char b[512] = "";
    size_t n = 0;
#define CF_(field, name) \
    if (c->field != TA_CFG_UNSET && n < sizeof b) \
        n += (size_t)snprintf(b + n, sizeof b - n, "%s" name "=%d", n ? ", " : "", c->field);
    CF_(min_ctas, "minCTAs")
    CF_(max_ctas, "maxCTAs")
    CF_(nvls_ctas, "nvlsCTAs")
    CF_(cga_cluster_size, "cgaClusterSize")
#undef CF_
    if (c->alg && n < sizeof b) n += (size_t)snprintf(b + n, sizeof b - n, "%salgSelection=%s", n ? ", " : "", c->alg);
    if (c->force_alg != TA_CFG_UNSET && n < sizeof b)
        n += (size_t)snprintf(b + n, sizeof b - n, "%sforceAlgSelection=%d", n ? ", " : "", c->force_alg);
    if (c->cta_policy != TA_CFG_UNSET && n < sizeof b)
        n += (size_t)snprintf(b + n, sizeof b - n, "%sCTAPolicy=%d", n ? ", " : "", c->cta_policy);
    if (c->user_tag && n < sizeof b)
        n += (size_t)snprintf(b + n, sizeof b - n, "%suserProfilerTag=%llu", n ? ", " : "", (unsigned long long)c->user_tag);
    return xstrdup(n ? b : "default config");
}

int ta_cfg_equal(const ta_collcfg *x, const ta_collcfg *y)
{
    if (x->state != y->state) return 0;
    if (x->state != CFG_SET) return 1;
    /* the profiler tag is the rank's own business: not compared */
    return x->min_ctas == y->min_ctas && x->max_ctas == y->max_ctas && x->nvls_ctas == y->nvls_ctas &&
           x->cga_cluster_size == y->cga_cluster_size && x->force_alg == y->force_alg &&
           x->cta_policy == y->cta_policy && (x->alg == y->alg || (x->alg && y->alg && !strcmp(x->alg, y->alg)));
}

char *ta_nccl_version_text(int64_t v)
{
    if (v <= 0) return xstrdup("(version unknown)");
    if (v >= 10000) return xasprintf("%lld.%lld.%lld", (long long)(v / 10000), (long long)(v / 100 % 100), (long long)(v % 100));
    return xasprintf("%lld.%lld.%lld", (long long)(v / 1000), (long long)(v / 100 % 10), (long long)(v % 100));
}

int ta_comm_suspended(const ta_trace *t, int lc)
{
    return lc >= 0 && lc < t->ncomms && t->comms[lc].suspended;
}

char *ta_call_sig(const ta_trace *t, int64_t ci)
{
    const ta_call *c = &t->calls[ci];
    if (ta_op_is_onesided(c->op)) {
        const ta_callx *x = ta_callx_of(t, ci);
        char more[64] = "";
        if (x && (c->xf & XF_SIGNAL) && (x->sig_idx || x->sig_ctx))
            snprintf(more, sizeof more, ", signal index %lld, context %d", (long long)x->sig_idx, x->sig_ctx);
        if (c->op == OP_PUTSIGNAL)
            return xasprintf("%s(%lld x %s to %d%s)", ta_op_names[c->op], (long long)c->count, ta_dtype_names[c->dtype],
                             c->rp, more);
        if (c->op == OP_WAITSIGNAL)
            return xasprintf("%s(%lld signal%s from %d%s)", ta_op_names[c->op], (long long)c->count,
                             c->count == 1 ? "" : "s", c->rp, more);
        return xasprintf("%s(to %d%s)", ta_op_names[c->op], c->rp, more);
    }
    char extra[64] = "";
    if (c->redop != RO_NONE) snprintf(extra, sizeof extra, ", %s", ta_redop_names[c->redop]);
    if (ta_op_rooted(c->op) && c->rp >= 0)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", root %d", c->rp);
    if (ta_op_is_p2p(c->op))
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", %s %d",
                 c->op == OP_SEND ? "to" : "from", c->rp);
    char *via = xstrdup("");
    if (c->xf & XF_CONFIG) {
        const ta_collcfg *cf = ta_call_cfg(t, ci);
        const char *ep = ta_config_entry(c->op);
        char *ct = cf ? ta_cfg_text(cf) : NULL;
        free(via);
        via = xasprintf(" via %s%s%s%s", ep ? ep : "its *Config entry point", ct ? " (" : "", ct ? ct : "", ct ? ")" : "");
        free(ct);
    }
    char *r = xasprintf("%s(%lld x %s%s)%s", ta_op_names[c->op], (long long)c->count,
                        ta_dtype_names[c->dtype], extra, via);
    free(via);
    return r;
}

char *ta_call_text(const ta_an *a, const ta_trace *t, int64_t ci)
{
    const ta_call *c = &t->calls[ci];
    char *sig = ta_call_sig(t, ci);
    char *r;
    if (c->comm >= 0 && c->comm < t->ncomms)
        r = xasprintf("%s #%u on comm %s", sig, c->seq, ta_comm_name(a, t->comms[c->comm].g));
    else
        r = xasprintf("%s", sig);
    free(sig);
    return r;
}

static int cmpint(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}
void ta_ints_sort(int *v, int n) { if (n > 1) qsort(v, (size_t)n, sizeof *v, cmpint); }

char *ta_ranks_text(const int *r, int n)
{
    size_t cap = 64, len = 0;
    char *s = xmalloc(cap);
    s[0] = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1) j++;
        char part[48];
        if (j - i >= 2) snprintf(part, sizeof part, "%s%d-%d", len ? ", " : "", r[i], r[j]);
        else if (j == i + 1) snprintf(part, sizeof part, "%s%d, %d", len ? ", " : "", r[i], r[j]);
        else snprintf(part, sizeof part, "%s%d", len ? ", " : "", r[i]);
        size_t pl = strlen(part);
        if (len + pl + 1 > cap) { cap = (len + pl + 1) * 2; s = xrealloc(s, cap); }
        memcpy(s + len, part, pl + 1);
        len += pl;
        i = j + 1;
    }
    return s;
}

/* " 2026-01-02 10:00:00 UTC" of a monotonic time of the trace; "" when unknown */
void ta_wall_text(const ta_trace *t, int64_t ns, char *out, size_t cap)
{
    out[0] = 0;
    if (ns == TA_NULL64) return;
    double w = ta_wall(t, ns);
    if (!(w > 0 && w < 1e11)) return;
    time_t s = (time_t)w;
    struct tm tm;
    if (!gmtime_r(&s, &tm)) return;
    strftime(out, cap, " %Y-%m-%d %H:%M:%S UTC", &tm);
}

/* "exited", "killed by SIGTERM", "killed by SIGTERM inside AllReduce #5 on
 * comm 0x..", "no trace", ... */
char *ta_end_text(const ta_an *a, const ta_trace *t)
{
    char *in = NULL;
    if (t->end_in_call) {
        int64_t ci;
        for (ci = t->ncalls - 1; ci >= 0; ci--)
            if (t->calls[ci].exit_ns == TA_NULL64) break;
        if (ci >= 0) {
            char *c = ta_call_text(a, t, ci);
            in = xasprintf(" inside %s", c);
            free(c);
        } else {
            for (int i = 0; i < t->ncomms; i++)
                if (t->comms[i].init_exit == TA_NULL64) {
                    in = xasprintf(" inside %s of comm %s", t->comms[i].kind, ta_comm_name(a, t->comms[i].g));
                    break;
                }
            if (!in) in = xstrdup(" inside a call");
        }
    }
    if (t->nmfail) {
        char *o = xasprintf("%s after a failed allocation (%s of %lld bytes: %s)", in ? in : "", t->mfail[0].api,
                            (long long)t->mfail[0].bytes, t->mfail[0].error[0] ? t->mfail[0].error : "error");
        free(in);
        in = o;
    }
    char *r;
    const char *sn = ta_signame(t->end_signal);
    switch (t->end_state) {
    case END_EXITED: r = xasprintf("exited%s", in ? in : ""); break;
    case END_SIGNAL:
        if (sn) r = xasprintf("killed by %s%s", sn, in ? in : "");
        else r = xasprintf("killed by signal %d%s", t->end_signal, in ? in : "");
        break;
    case END_COMM_END: r = xasprintf("ended without a final write after communicator destroy (SIGKILL?)%s", in ? in : ""); break;
    case END_SNAPSHOT: r = xasprintf("last seen in a snapshot (still running, or SIGKILL)%s", in ? in : ""); break;
    case END_KILLED: {
        char when[48];
        ta_wall_text(t, t->heartbeat_ns, when, sizeof when);
        r = xasprintf("killed without a final write (SIGKILL, the OOM killer, a node failure)%s \xe2\x80\x94 read from "
                      "the ring file%s%s", in ? in : "", when[0] ? "; last sign of life" : "", when);
        break;
    }
    case END_HANG: r = xasprintf("written by the hang watchdog, still running then%s", in ? in : ""); break;
    case END_NO_TRACE: r = xstrdup("no trace"); break;
    default: r = xstrdup("unknown"); break;
    }
    free(in);
    return r;
}

char *ta_missing_text(const ta_an *a, int i)
{
    int k = a->missing_wfail && i < a->nmissing ? a->missing_wfail[i] : -1;
    if (k >= 0) return xasprintf("write failed (%s)", a->wfail[k].error);
    int c = a->missing_cut && i < a->nmissing ? a->missing_cut[i] : -1;
    if (c >= 0 && a->notes[c].cut > 0) return xasprintf("trace truncated at %lld bytes", (long long)a->notes[c].cut);
    if (c >= 0) return xstrdup("trace empty (0 bytes)");
    return xstrdup("no trace");
}

int ta_trace_of_rank(const ta_an *a, int rank)
{
    int lo = 0, hi = a->ntr;      /* a->tr is by rank */
    while (lo < hi) {
        int m = (lo + hi) / 2;
        if (a->tr[m]->rank < rank) lo = m + 1;
        else hi = m;
    }
    return lo < a->ntr && a->tr[lo]->rank == rank ? lo : -1;
}

const char *ta_env_value(const ta_trace *t, const char *name, size_t nl)
{
    for (int i = 0; i < t->nenv; i++)
        if (!strncmp(t->env[i], name, nl) && t->env[i][nl] == '=') return t->env[i] + nl + 1;
    return NULL;
}
