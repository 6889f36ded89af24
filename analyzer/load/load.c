/* Input: parsing trace files (cJSON, one file at a time, two threads),
 * validating every field, converting to the compact model, then grouping
 * by job, choosing the job, and dealing with duplicated and missing ranks.
 * A damaged file gives one note naming the file and the problem; the rest
 * is analysed. Finding the files and the write-failed markers is
 * load_files.c's; the field checks and the converters of a trace's
 * sections are load_fields.c's (load_int.h). */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "load/ring/ta_ring.h"
#include "load_int.h"
#include "site/ta_site.h"
#include "ta_bounds.h"
#include "ta_calls.h"
#include "ta_crash.h"
#include "ta_load.h"
#include "trshim/ring_format.h"
#include "trshim/trace_format.h"

#ifndef TRSHIM_WRITE_FAILED_SUFFIX     /* include/trshim/trace_format.h of a shim that leaves them */
#define TRSHIM_WRITE_FAILED_SUFFIX ".write-failed"
#define TRSHIM_WRITE_FAILED_FORMAT "trshim-write-failed"
#define TRSHIM_WRITE_FAILED_VERSION 1
#endif

/* ---- a per-thread arena for cJSON: parsing allocates hundreds of thousands
 * of small nodes per file; they all die together. ---- */
typedef struct chunk { struct chunk *next; size_t used, cap; } chunk;
static __thread chunk *arena_head, *arena_cur;

static void *arena_malloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    chunk *c = arena_cur;
    while (c && c->used + n > c->cap) c = c->next;
    if (!c) {
        size_t cap = n > (8u << 20) ? n : (8u << 20);
        c = malloc(sizeof(chunk) + 16 + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = NULL;
        if (arena_cur) { c->next = arena_cur->next; arena_cur->next = c; }
        else arena_head = c;
    }
    arena_cur = c;
    void *p = (char *)(c + 1) + 16 + c->used;
    c->used += n;
    return p;
}
static void arena_free(void *p) { (void)p; }
static void arena_reset(void)
{
    for (chunk *c = arena_head; c; c = c->next) c->used = 0;
    arena_cur = arena_head;
}
static void arena_release(void)
{
    for (chunk *c = arena_head, *n; c; c = n) { n = c->next; free(c); }
    arena_head = arena_cur = NULL;
}

static char *dup_or(const char *s, const char *d) { return xstrdup(s ? s : d); }

/* The bytes of the JSON trace open at fd (a regular file of n bytes), read
 * with pread (never mapped: a file cut short meanwhile, or a hole of a full
 * filesystem, would be SIGBUS); NULL with a note naming the file when they
 * cannot all be had or cannot be a trace. What one file may cost is
 * bounded: a hole (bytes never written) is found without reading the file,
 * and a file larger than a->max_trace_bytes is not read. */
static char *read_trace_bytes(ta_an *a, const char *path, int fd, uint64_t n)
{
    /* a JSON trace holds no NUL byte: where the file has a hole that reads
     * as zeros, it is not a trace, whatever its size (an 8 GiB sparse file
     * costs one lseek) */
    off_t hole = lseek(fd, 0, SEEK_HOLE);
    if (hole >= 0 && (uint64_t)hole < n) {
        unsigned char z[256];
        size_t want = n - (uint64_t)hole < sizeof z ? (size_t)(n - (uint64_t)hole) : sizeof z;
        ssize_t k = pread(fd, z, want, hole);
        int zeros = k > 0;
        for (ssize_t i = 0; i < k && zeros; i++) zeros = !z[i];
        if (zeros) {
            ta_note_add(a, path, 1, "never written from byte %lld of its %llu on (a hole in the file: the disk filled "
                        "up while it was written, or a damaged copy): not a trace", (long long)hole,
                        (unsigned long long)n);
            return NULL;
        }
    }
    if (n > a->max_trace_bytes) {
        ta_note_add(a, path, 1, "%llu bytes: more than a trace may be (%llu MiB; --max-trace-mb raises it)",
                    (unsigned long long)n, (unsigned long long)(a->max_trace_bytes >> 20));
        return NULL;
    }
    char *buf = n < SIZE_MAX ? malloc((size_t)n + 1) : NULL;
    if (!buf) {
        ta_note_add(a, path, 1, "cannot read: no memory for its %llu bytes", (unsigned long long)n);
        return NULL;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, buf + got, (size_t)n - got, (off_t)got);
        if (k > 0) { got += (size_t)k; continue; }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) ta_note_add(a, path, 1, "cannot read: %s", strerror(errno));
        else ta_note_add(a, path, 1, "the file became shorter while it was read (%zu of %llu bytes)", got,
                         (unsigned long long)n);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* The calls, their positions by name from call_fields: read from
 * buf[vs, ve) where the scanner found them (have_calls), else printed back
 * from cJSON's tree. -1 (why in x->err) when they cannot be read. */
static int conv_calls(pctx *x, const cJSON *root, ta_trace *t, int packed, const char *buf, size_t n, int have_calls,
                      size_t vs, size_t ve)
{
    const cJSON *cf = cJSON_GetObjectItemCaseSensitive(root, "call_fields");
    if (!cJSON_IsArray(cf)) { BAD(x, "field call_fields is not an array"); return -1; }
    int npos = cJSON_GetArraySize(cf);
    int8_t *role = xmalloc((size_t)npos + 1);
    unsigned have = 0;
    int p = 0;
    for (const cJSON *e = cf->child; e; e = e->next, p++) {
        if (!cJSON_IsString(e)) { free(role); BAD(x, "field call_fields[%d] is not a string", p); return -1; }
        int r = ta_field_find(ta_call_fields, TRSHIM_CALL_FIELD_N, e->valuestring);
        role[p] = (int8_t)r;
        if (r >= 0) have |= 1u << r;
    }
    const char *lacks = ta_field_missing(ta_call_fields, TRSHIM_CALL_FIELD_N, have);
    if (lacks) { free(role); BAD(x, "field call_fields lacks \"%s\"", lacks); return -1; }
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(root, "calls");
    if (!have_calls && !(packed ? cJSON_IsObject(calls) : cJSON_IsArray(calls))) {
        free(role);
        BAD(x, "field calls is not %s", packed ? "an object (version 2 packs the calls)" : "an array");
        return -1;
    }
    const char *first = NULL;
    int first_i = -1;
    size_t err_at = 0;
    char why[200] = "";
    int r;
    if (have_calls) {
        r = ta_parse_calls(buf + vs, ve - vs, packed, role, npos, t, &err_at, why, sizeof why, &first,
                           &first_i);
        err_at += vs;
    } else {   /* found by cJSON only (an escaped key): print it back */
        char *txt = cJSON_PrintUnformatted(calls);
        r = txt ? ta_parse_calls(txt, strlen(txt), packed, role, npos, t, &err_at, why, sizeof why, &first,
                                 &first_i) : -1;
        cJSON_free(txt);
    }
    free(role);
    if (r == -3) { BAD(x, "%s", why); return -1; }
    if (r == -1) { BAD(x, "not valid JSON: syntax error at byte %zu of %zu (in calls)", err_at, n); return -1; }
    if (r < 0) {
        BAD(x, "field calls is not %s", packed ? "an object (version 2 packs the calls)" : "an array");
        return -1;
    }
    if (t->skipped_records)
        ta_note_add(x->a, x->file, 0, "%lld call record(s) skipped (first: calls[%d] %s)",
                    (long long)t->skipped_records, first_i, first);
    if (t->cfg_badref)
        ta_note_add(x->a, x->file, 0, "%lld call record(s) name a config that is not in coll_configs: their config is "
                    "unknown", (long long)t->cfg_badref);
    if (t->py_badref && t->npycodes)
        ta_note_add(x->a, x->file, 0, "%lld call record(s) name a Python stack that is not in pystacks: those calls have "
                    "native call sites", (long long)t->py_badref);
    return 0;
}

/* The JSON document of buf[0, n) with the calls and checks arrays (found
 * at [vs[k], ve[k]) where found[k]) cut to "[]" for cJSON: its tree (the
 * cut copy, which it points into, in *docp for the caller to free), NULL
 * with a note naming the file. */
static cJSON *parse_document(ta_an *a, const char *path, const char *buf, size_t n, const size_t *vs,
                             const size_t *ve, const int *found, char **docp)
{
    *docp = NULL;
    /* cut ranges, in file order */
    size_t cut_s[2], cut_e[2];
    int ncut = 0;
    for (int k = 0; k < 2; k++)
        if (found[k]) { cut_s[ncut] = vs[k]; cut_e[ncut] = ve[k]; ncut++; }
    if (ncut == 2 && cut_s[1] < cut_s[0]) {
        size_t ts = cut_s[0], te = cut_e[0];
        cut_s[0] = cut_s[1]; cut_e[0] = cut_e[1];
        cut_s[1] = ts; cut_e[1] = te;
    }
    char *doc = NULL;
    size_t docn = n;
    if (ncut) {
        size_t total = n;
        for (int k = 0; k < ncut; k++) total -= cut_e[k] - cut_s[k] - 2;
        docn = total;
        doc = xmalloc(docn + 1);
        size_t at = 0, from = 0;
        for (int k = 0; k < ncut; k++) {
            memcpy(doc + at, buf + from, cut_s[k] - from);
            at += cut_s[k] - from;
            memcpy(doc + at, "[]", 2);
            at += 2;
            from = cut_e[k];
        }
        memcpy(doc + at, buf + from, n - from);
        doc[docn] = 0;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(doc ? doc : buf, docn, &end, 0);
    if (!root) {
        const char *base = doc ? doc : buf;
        size_t pos = end && end >= base && end <= base + docn ? (size_t)(end - base) : 0;
        if (doc) {    /* back to a position in the file */
            size_t shift = 0;
            for (int k = 0; k < ncut; k++)
                if (pos > cut_s[k] - shift) shift += cut_e[k] - cut_s[k] - 2;
            pos += shift;
        }
        if (pos + 16 >= n)
            ta_note_cut(a, path, (int64_t)n, "truncated: the JSON ends after %zu bytes in the middle of the trace", n);
        else
            ta_note_add(a, path, 1, "not valid JSON: syntax error at byte %zu of %zu", pos, n);
        free(doc);
        return NULL;
    }
    *docp = doc;
    return root;
}

/* The whole file (open at fd, a regular file: st); NULL (with a note) when
 * it is not usable. *ring_next: its ring.next (the ring's head at this
 * write), -1 when it has none. */
static ta_trace *parse_file(ta_an *a, const char *path, int fd, const struct stat *st, pthread_mutex_t *lk,
                            int64_t *ring_next)
{
    *ring_next = -1;
    pctx x = {a, path, ""};
    if (st->st_size == 0) { ta_note_cut(a, path, 0, "empty file (the process may have been killed while writing it)"); return NULL; }
    size_t n = (size_t)st->st_size;
    char *buf = read_trace_bytes(a, path, fd, (uint64_t)st->st_size);
    if (!buf) return NULL;
    arena_reset();
    /* the calls and checks arrays are read by calls.c; cJSON gets the rest */
    static const char *const big[2] = {"calls", "checks"};
    size_t bvs[2] = {0, 0}, bve[2] = {0, 0};
    int bfound[2] = {0, 0};
    if (ta_find_members(buf, n, big, 2, bvs, bve, bfound) < 0) bfound[0] = bfound[1] = 0;
    int have_calls = bfound[0], have_checks = bfound[1];
    char *doc = NULL;
    cJSON *root = parse_document(a, path, buf, n, bvs, bve, bfound, &doc);
    if (!root) {
        free(buf);
        return NULL;
    }
    ta_trace *t = xcalloc(1, sizeof *t);
    t->file = xstrdup(path);
    t->heartbeat_ns = TA_NULL64;
    const cJSON *o;
    int packed = 0;
    if (conv_identity(&x, root, t, &packed) < 0) goto bad;
    conv_informative(&x, root, t, ring_next);
    /* communicators */
    o = cJSON_GetObjectItemCaseSensitive(root, "comms");
    if (!cJSON_IsArray(o)) { BAD(&x, "field comms is not an array"); goto bad; }
    t->ncomms = cJSON_GetArraySize(o);
    t->comms = xcalloc((size_t)t->ncomms, sizeof *t->comms);
    {
        int i = 0;
        for (const cJSON *e = o->child; e; e = e->next, i++)
            if (conv_comm(&x, e, &t->comms[i], i) < 0) goto bad;
    }
    /* stacks before calls (calls point into them) */
    if (conv_stacks(&x, root, t, a, lk) < 0) {
        ta_note_add(a, path, 0, "%s; call sites are unknown", x.err);
        x.err[0] = 0;
    }
    conv_python(&x, root, t);        /* Python stacks, before calls and memory too */
    conv_configs(&x, root, t);       /* the *Config collectives' configs, before calls */
    conv_nccl(&x, root, t);
    conv_graphs(&x, root, t);        /* CUDA graphs, before calls (load_graphs.c) */
    ta_crash_json(a, path, root, t); /* "crash", "errors" (crash.c), after the stacks */
    if (conv_calls(&x, root, t, packed, buf, n, have_calls, bvs[0], bve[0]) < 0) goto bad;
    /* NaN/Inf checks: a problem there is noted, the trace still used (a
     * JSON syntax error inside checks makes the file unusable, like any) */
    {
        int r = conv_nan(&x, root, t, buf, n, packed, have_checks, bvs[1], bve[1]);
        if (r == -1) goto bad;
        x.err[0] = 0;
    }
    for (int i = 0; i < t->ncomms; i++)
        if (t->comms[i].init_stack >= t->nstacks) t->comms[i].init_stack = -1;
    if (t->npystacks) {      /* comms[].init.pystack, once the Python stacks are read */
        int i = 0;
        for (const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "comms")->child; e && i < t->ncomms; e = e->next, i++)
            t->comms[i].init_pystack = opt_index(cJSON_GetObjectItemCaseSensitive(e, "init"), "pystack", t->npystacks);
    }
    if (conv_memory(&x, root, t) < 0) {
        ta_note_add(a, path, 0, "%s; memory not analysed for this rank", x.err);
        t->nmdev = t->nmfail = 0;
        x.err[0] = 0;
    }
    {   /* last: memory's peak_after may name a communicator by its index as written */
        int64_t nd;
        int reps = ta_drop_repeated_comms(t, &nd);
        if (reps)
            ta_note_add(a, path, 0, "%d communicator(s) appear twice in comms (the same id): the second is not used, "
                        "nor its %lld call(s)", reps, (long long)nd);
    }
    if (t->end_state != END_SIGNAL) t->end_signal = -1;
    t->host = t->host ? t->host : dup_or(NULL, "?");
    free(doc);
    free(buf);
    return t;
bad:
    ta_note_add(a, path, 1, "%s", x.err[0] ? x.err : "unusable");
    free(doc);
    free(buf);
    *ring_next = -1;
    ta_trace_free(t);        /* the partly converted trace is dropped */
    return NULL;
}

typedef struct {
    ta_an *a;
    ta_infile *files; int nfiles;
    ta_file_traces *out;
    int64_t share;        /* the call budget's share of each trace, 0: none */
    int next;
    pthread_mutex_t lk, modlk;
} work;

/* ring files by name; a file named on the command line by its magic */
static int is_ring_file(const char *path, int fd)
{
    if (ta_has_suffix(path, TRSHIM_RING_SUFFIX)) return 1;
    if (ta_has_suffix(path, ".json")) return 0;
    return ta_ring_sniff(fd);
}

static void *worker(void *arg)
{
    work *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lk);
        int i = w->next++;
        pthread_mutex_unlock(&w->lk);
        if (i >= w->nfiles) break;
        ta_file_traces *o = &w->out[i];
        o->ring_next = -1;
        const char *path = w->files[i].path;
        struct stat st;
        int fd = ta_open_input(w->a, &w->files[i], &st);
        if (fd < 0) continue;
        if (is_ring_file(path, fd)) {
            o->is_ring = 1;
            int n = ta_ring_read(w->a, path, fd, &st, &w->modlk, &o->tr, &o->ri);
            o->ntr = n > 0 ? n : 0;
            for (int k = 0; k < o->ntr; k++) ta_budget_trim(w->a, o->tr[k], w->share);
        } else {
            ta_trace *t = parse_file(w->a, path, fd, &st, &w->modlk, &o->ring_next);
            if (t) {
                ta_budget_trim(w->a, t, w->share);     /* at once: the peak is the budget, not the job */
                o->tr = xmalloc(sizeof *o->tr);
                o->tr[0] = t;
                o->ntr = 1;
            }
        }
        close(fd);
    }
    arena_release();
    return NULL;
}

static int cmp_trace_rank(const void *x, const void *y)
{
    const ta_trace *a = *(ta_trace *const *)x, *b = *(ta_trace *const *)y;
    if (a->rank != b->rank) return (a->rank > b->rank) - (a->rank < b->rank);
    /* the most recent write first */
    if (a->write_time != b->write_time) return a->write_time < b->write_time ? 1 : -1;
    return strcmp(a->file, b->file);
}
static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* Ranks and world sizes the traces give are checked against each other
 * before any per-rank table is made (docs/analysis-format.md, "Ranks and
 * world size"): a rank must be below RANKS_MAX; a rank from the environment
 * below its trace's world size (also from the environment), a rank from a
 * communicator (rank_source "comm": a process driving several devices,
 * whose world size counts processes) below the size of one of its
 * communicators; the job's world size is the one most of its traces give
 * (a tie: the smaller), and a trace that gives another is not used. */
#define RANKS_MAX (1 << 24)
/* the ranks without a trace counted one by one: at most this, or 64 per trace */
#define MISSING_LISTED_MIN 4096

/* mine[0..nm) without the traces that cannot be placed (named); returns the
 * number kept; *world: the job's world size, -1 when no trace gives one */
static int place_ranks(ta_an *a, ta_trace **mine, int nm, int *world)
{
    int *ws = xmalloc(sizeof(int) * ((size_t)nm + 1)), nw = 0;
    for (int i = 0; i < nm; i++)
        if (mine[i]->world_size > 0) ws[nw++] = mine[i]->world_size;
    if (nw > 1) qsort(ws, (size_t)nw, sizeof *ws, cmp_int);
    int w = -1, best = 0;
    for (int i = 0; i < nw;) {               /* ascending: a tie keeps the smaller */
        int k = i;
        while (k < nw && ws[k] == ws[i]) k++;
        if (k - i > best) { best = k - i; w = ws[i]; }
        i = k;
    }
    free(ws);
    /* a job grown by ncclCommGrow: its new processes may give the grown world
     * size, its older ones the first one; any size up to the largest grow counts */
    int grown = 0;
    for (int i = 0; i < nm; i++)
        for (int k = 0; k < mine[i]->ncomms; k++)
            if (!strcmp(mine[i]->comms[k].kind, "Grow") && mine[i]->comms[k].grow_ranks > grown)
                grown = mine[i]->comms[k].grow_ranks;
    if (grown > w && w > 0) w = grown;
    int keep = 0;
    for (int i = 0; i < nm; i++) {
        ta_trace *t = mine[i];
        int from_comm = t->rank_source && !strcmp(t->rank_source, "comm"), size = 0;
        for (int k = 0; k < t->ncomms; k++)
            if (t->comms[k].size > size) size = t->comms[k].size;
        if (t->rank >= RANKS_MAX)
            ta_note_add(a, t->file, 1, "rank %d is out of range (ranks are below %d): the trace cannot be placed", t->rank,
                        RANKS_MAX);
        else if (from_comm && size > 0 && t->rank >= size)
            ta_note_add(a, t->file, 1, "rank %d (its place in its first communicator) is not below the size of any of "
                        "its communicators (%d at most): the trace cannot be placed", t->rank, size);
        else if (!from_comm && t->world_size > 0 && t->rank >= t->world_size)
            ta_note_add(a, t->file, 1, "rank %d is not below the world size %d of this trace: the trace cannot be placed",
                        t->rank, t->world_size);
        else if (w > 0 && t->world_size > 0 && t->world_size != w && !(grown && t->world_size < w))
            ta_note_add(a, t->file, 1, "world size %d, where %d of the job's %d traces that give one say %d: the trace "
                        "is not used (another run under the same job id, or damaged)", t->world_size, best, nw, w);
        else if (!from_comm && w > 0 && t->rank >= w)
            ta_note_add(a, t->file, 1, "rank %d is not below the job's world size %d (that %d of its traces give): the "
                        "trace cannot be placed", t->rank, w, best);
        else {
            mine[keep++] = t;
            continue;
        }
    }
    *world = w;
    return keep;
}

/* A process that joined a communicator through ncclCommGrow without a job
 * variable takes its job id from that communicator ("comm": the uniqueId's
 * hash), not the job's: it is the job of the existing root that recorded
 * that uniqueId (grow.uid). */
static void grow_jobs(ta_an *a)
{
    for (int i = 0; i < a->nall; i++) {
        ta_trace *t = a->all[i];
        uint64_t jid;
        if (!t->job_source || strcmp(t->job_source, "comm") || ta_parse_hex(t->job_id, &jid)) continue;
        int joined = 0;
        for (int k = 0; k < t->ncomms && !joined; k++)
            joined = !strcmp(t->comms[k].kind, "Grow") && !t->comms[k].has_parent && t->comms[k].grow_uid == jid;
        if (!joined) continue;
        for (int j = 0; j < a->nall; j++) {
            const ta_trace *u = a->all[j];
            int root = 0;
            for (int k = 0; k < u->ncomms && !root; k++)
                root = !strcmp(u->comms[k].kind, "Grow") && u->comms[k].has_parent && u->comms[k].grow_uid == jid;
            if (!root || !strcmp(u->job_id, t->job_id)) continue;
            free(t->job_id); free(t->job_source);
            t->job_id = xstrdup(u->job_id);
            t->job_source = xstrdup(u->job_source);
            break;
        }
    }
}

void ta_load_free(ta_an *a)
{
    for (int i = 0; i < a->nall; i++) ta_trace_free(a->all[i]);
    free(a->all); free(a->tr);
    a->all = a->tr = NULL;
    a->nall = a->ntr = 0;
    free(a->job);
    a->job = NULL;
    for (int i = 0; i < a->nother_jobs; i++) free(a->other_jobs[i]);
    free(a->other_jobs);
    a->other_jobs = NULL;
    a->nother_jobs = 0;
    free(a->missing_ranks); free(a->missing_wfail); free(a->missing_cut);
    a->missing_ranks = a->missing_wfail = a->missing_cut = NULL;
    a->nmissing = 0;
    for (int i = 0; i < a->nwfail; i++) {
        ta_wfail *m = &a->wfail[i];
        free(m->file); free(m->job); free(m->host); free(m->error);
    }
    free(a->wfail);
    a->wfail = NULL;
    a->nwfail = 0;
    free(a->graphs);
    a->graphs = NULL;
    a->ngraphs = 0;
}

int ta_load(ta_an *a, char **paths, int npaths)
{
    ta_filevec files = {0}, markers = {0};
    ta_list_inputs(a, paths, npaths, &files, &markers);
    a->nfiles = files.n;
    ta_file_traces *out = xcalloc((size_t)files.n + 1, sizeof *out);
    cJSON_Hooks hooks = {arena_malloc, arena_free};
    cJSON_InitHooks(&hooks);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = ncpu < 1 ? 1 : ncpu > 4 ? 4 : (int)ncpu;
    if (nth > files.n) nth = files.n ? files.n : 1;
    int64_t share = ta_budget_share(a->max_calls, files.n);
    work w = {a, files.v, files.n, out, share, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[4];
    int started = 0;
    for (int i = 1; i < nth; i++)
        if (pthread_create(&th[started], NULL, worker, &w) == 0) started++;
    worker(&w);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    cJSON_InitHooks(NULL);
    for (int i = 0; i < markers.n; i++) {
        ta_read_marker(a, &markers.v[i]);
        free(markers.v[i].path);
    }
    free(markers.v);

    char **names = xcalloc((size_t)files.n + 1, sizeof *names);
    for (int i = 0; i < files.n; i++) names[i] = files.v[i].path;
    ta_ring_pair(a, names, out, files.n);
    free(names);
    for (int i = 0; i < files.n; i++)
        for (int k = 0; k < out[i].ntr; k++)
            if (out[i].tr[k]) {
                ta_py_prepare(out[i].tr[k]);
                ta_aborts_resolve(out[i].tr[k]);
                ta_graphs_expand(a, out[i].tr[k]);   /* graph launches: the calls they replay */
                ta_budget_trim(a, out[i].tr[k], share);
            }
    /* usable traces, grouped by job */
    int ntraces = 0;
    for (int i = 0; i < files.n; i++) ntraces += out[i].ntr;
    a->all = xcalloc((size_t)ntraces + 1, sizeof *a->all);
    for (int i = 0; i < files.n; i++) {
        for (int k = 0; k < out[i].ntr; k++)
            if (out[i].tr[k]) a->all[a->nall++] = out[i].tr[k];
        free(out[i].tr);
        if (out[i].is_ring) ta_ring_info_free(&out[i].ri);
    }
    free(out);
    for (int i = 0; i < files.n; i++) free(files.v[i].path);
    free(files.v);
    if (!a->nall) {
        for (int k = 0; k < a->nwfail; k++)      /* e.g. every rank's write failed on a full disk */
            ta_note_add(a, a->wfail[k].file, 0, "a trace write of rank %d of job %s failed (%s)", a->wfail[k].rank,
                        a->wfail[k].job, a->wfail[k].error);
        return -1;
    }

    grow_jobs(a);
    /* jobs: newest = the latest write_time among its traces */
    char **jobs = xcalloc((size_t)a->nall, sizeof *jobs);
    double *newest = xcalloc((size_t)a->nall, sizeof *newest);
    int nj = 0;
    for (int i = 0; i < a->nall; i++) {
        int j;
        for (j = 0; j < nj; j++) if (!strcmp(jobs[j], a->all[i]->job_id)) break;
        if (j == nj) { jobs[nj] = a->all[i]->job_id; newest[nj] = a->all[i]->write_time; nj++; }
        else if (a->all[i]->write_time > newest[j]) newest[j] = a->all[i]->write_time;
    }
    a->njobs = nj;
    int pick = -1;
    if (a->job_wanted) {
        for (int j = 0; j < nj; j++) if (!strcmp(jobs[j], a->job_wanted)) pick = j;
        if (pick < 0) {
            char *list = xstrdup("");
            for (int j = 0; j < nj; j++) { char *n = xasprintf("%s%s%s", list, j ? ", " : "", jobs[j]); free(list); list = n; }
            ta_note_add(a, NULL, 1, "no traces of job \"%s\" (jobs found: %s)", a->job_wanted, list);
            free(list);
            free(jobs); free(newest);
            return -1;
        }
    } else {
        pick = 0;
        for (int j = 1; j < nj; j++) if (newest[j] > newest[pick]) pick = j;
    }
    a->job = xstrdup(jobs[pick]);
    for (int j = 0; j < nj; j++)
        if (j != pick) {
            a->other_jobs = xrealloc(a->other_jobs, sizeof *a->other_jobs * (size_t)(a->nother_jobs + 1));
            a->other_jobs[a->nother_jobs++] = xstrdup(jobs[j]);
        }
    free(jobs); free(newest);

    /* the job's traces by rank (those that can be placed); duplicates: keep the latest write */
    a->tr = xcalloc((size_t)a->nall, sizeof *a->tr);
    ta_trace **mine = xcalloc((size_t)a->nall, sizeof *mine);
    int nm = 0;
    for (int i = 0; i < a->nall; i++)
        if (!strcmp(a->all[i]->job_id, a->job)) mine[nm++] = a->all[i];
    int world = -1;
    nm = place_ranks(a, mine, nm, &world);
    if (nm > 1) qsort(mine, (size_t)nm, sizeof *mine, cmp_trace_rank);
    for (int i = 0; i < nm; i++) {
        if (a->ntr && a->tr[a->ntr - 1]->rank == mine[i]->rank) {
            ta_trace *kept = a->tr[a->ntr - 1];
            ta_note_add(a, mine[i]->file, 1, "duplicated rank %d (also in %s, written %s); that later trace is used",
                        mine[i]->rank, kept->file, kept->write_time > mine[i]->write_time ? "later" : "at the same time");
            continue;
        }
        mine[i]->idx = a->ntr;
        a->tr[a->ntr++] = mine[i];
    }
    free(mine);
    ta_places_bound(a);     /* load_bounds.c: the places its communicators claim, against the input's size */
    if (!a->ntr) {
        ta_note_add(a, NULL, 1, "no trace of job \"%s\" can be placed", a->job);
        return -1;
    }

    /* world size: the value most traces give (place_ranks); else the
     * largest communicator; else the highest rank + 1 */
    int given = world > 0;
    if (world <= 0)
        for (int i = 0; i < a->ntr; i++)
            for (int k = 0; k < a->tr[i]->ncomms; k++)
                if (a->tr[i]->comms[k].size > world) world = a->tr[i]->comms[k].size;
    if (world < a->tr[a->ntr - 1]->rank + 1) {
        /* ranks from communicators: a process driving several devices, whose
         * world size counts processes */
        if (given) ta_note_add(a, NULL, 0, "rank %d is outside the world size %d the traces give",
                                   a->tr[a->ntr - 1]->rank, world);
        world = a->tr[a->ntr - 1]->rank + 1;
    }
    a->world = world;
    /* ranks without a trace, one by one: not past a bound when the world
     * size is far beyond the traces found (one trace that says 16777216 does
     * not make a table, and a listing, of 16 million ranks) */
    int64_t bound = (int64_t)a->ntr * 64 > MISSING_LISTED_MIN ? (int64_t)a->ntr * 64 : MISSING_LISTED_MIN;
    int lim = world < bound ? world : (int)bound;
    a->missing_ranks = xcalloc((size_t)lim + 1, sizeof *a->missing_ranks);
    for (int r = 0, i = 0; r < lim; r++) {
        while (i < a->ntr && a->tr[i]->rank < r) i++;
        if (i >= a->ntr || a->tr[i]->rank != r) a->missing_ranks[a->nmissing++] = r;
    }
    if (lim < world) {
        int beyond = 0;
        for (int i = 0; i < a->ntr; i++) beyond += a->tr[i]->rank >= lim;
        a->missing_unlisted = world - lim - beyond;
        ta_note_add(a, NULL, 0, "the world size %d is far beyond the %d trace(s) found: only ranks below %d are listed "
                    "as without a trace (%d more ranks have none)", world, a->ntr, lim, a->missing_unlisted);
    }
    ta_markers_place(a);
    ta_budget_note(a, share);
    ta_graphs_identify(a);           /* "graph G1" means the same graph on every rank */
    return 0;
}
