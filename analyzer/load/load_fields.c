/* Field access with type checks, and the conversion of a JSON trace's
 * sections (identity, informative fields, communicators, stacks, Python
 * stacks, memory, NaN/Inf checks) into the compact model. load.c reads the file, checks its identity and
 * calls these in order; they are apart only to keep each file readable. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "load_int.h"
#include "site/ta_site.h"
#include "ta_calls.h"
#include "trshim/trace_format.h"

/* ---- field access with type checks ---- */
int BAD(pctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, sizeof x->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* 0 ok, 1 null (when allowed), -1 problem (written into ctx->err) */
int get_i64(pctx *x, const cJSON *o, const char *name, int64_t *out, int nullable, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v) return BAD(x, "field %s%s is missing", where, name);
    if (cJSON_IsNull(v)) {
        if (nullable) { *out = TA_NULL64; return 1; }
        return BAD(x, "field %s%s is null, expected an integer", where, name);
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 9.2e18)
        return BAD(x, "field %s%s is not an integer", where, name);
    *out = (int64_t)v->valuedouble;
    return 0;
}
int get_int(pctx *x, const cJSON *o, const char *name, int *out, int nullable, const char *where)
{
    int64_t v;
    int r = get_i64(x, o, name, &v, nullable, where);
    if (r == 1) { *out = -1; return 1; }
    if (r < 0) return r;
    if (v < -2147483647LL || v > 2147483647LL) return BAD(x, "field %s%s is out of range", where, name);
    *out = (int)v;
    return 0;
}
int get_num(pctx *x, const cJSON *o, const char *name, double *out, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v) return BAD(x, "field %s%s is missing", where, name);
    if (!cJSON_IsNumber(v)) return BAD(x, "field %s%s is not a number", where, name);
    *out = v->valuedouble;
    return 0;
}
int get_str(pctx *x, const cJSON *o, const char *name, const char **out, int nullable, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v) return BAD(x, "field %s%s is missing", where, name);
    if (cJSON_IsNull(v) && nullable) { *out = NULL; return 1; }
    if (!cJSON_IsString(v) || !v->valuestring) return BAD(x, "field %s%s is not a string", where, name);
    *out = v->valuestring;
    return 0;
}
int get_bool(pctx *x, const cJSON *o, const char *name, int *out, const char *where)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v) return BAD(x, "field %s%s is missing", where, name);
    if (!cJSON_IsBool(v)) return BAD(x, "field %s%s is not a boolean", where, name);
    *out = cJSON_IsTrue(v);
    return 0;
}
static int get_hex(pctx *x, const cJSON *o, const char *name, uint64_t *out, int nullable, const char *where)
{
    const char *s;
    int r = get_str(x, o, name, &s, nullable, where);
    if (r) return r;
    if (ta_parse_hex(s, out)) return BAD(x, "field %s%s is not a \"0x...\" hexadecimal string", where, name);
    return 0;
}

static int int_in(const cJSON *v, double lo, double hi);

/* comms[i].fingerprint (newer shims): 0, -1 (in x->err) */
static int conv_fingerprint(pctx *x, const cJSON *fp, ta_comm *m, const char *w)
{
    char w2[64];
    snprintf(w2, sizeof w2, "%sfingerprint.", w);
    if (!cJSON_IsObject(fp)) return BAD(x, "field %sfingerprint is not an object", w);
    int64_t seq, step;
    uint64_t hash;
    if (get_i64(x, fp, "seq", &seq, 0, w2) < 0 || get_hex(x, fp, "hash", &hash, 0, w2) < 0 ||
        get_i64(x, fp, "step", &step, 0, w2) < 0)
        return -1;
    if (seq < 0 || step < 0 || step > UINT32_MAX) return BAD(x, "field %sseq or %sstep is out of range", w2, w2);
    const cJSON *ck = cJSON_GetObjectItemCaseSensitive(fp, "checkpoints");
    if (!cJSON_IsArray(ck)) return BAD(x, "field %scheckpoints is not an array", w2);
    int n = cJSON_GetArraySize(ck), k = 0;
    if (n > 4096) return BAD(x, "field %scheckpoints has %d entries (at most 4096)", w2, n);
    m->ckp = xmalloc(sizeof *m->ckp * ((size_t)n + 1));
    m->nckp = 0;
    uint64_t prev = 0;
    for (const cJSON *e = ck->child; e; e = e->next, k++) {
        const cJSON *cs = cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 ? e->child : NULL;
        const cJSON *ch = cs ? cs->next : NULL;
        uint64_t hv;
        if (!cs || !cJSON_IsNumber(cs) || cs->valuedouble != floor(cs->valuedouble) || cs->valuedouble < 1 ||
            cs->valuedouble > 9e15 || !cJSON_IsString(ch) || ta_parse_hex(ch->valuestring, &hv))
            return BAD(x, "field %scheckpoints[%d] is not a [seq, \"0x...\"] pair", w2, k);
        uint64_t sv = (uint64_t)cs->valuedouble;
        if (sv <= prev || (sv > (uint64_t)seq && sv > (uint64_t)m->colls))
            return BAD(x, "field %scheckpoints[%d] is not in ascending order within 1..seq", w2, k);
        m->ckp[m->nckp++] = (struct ta_ckpt){sv, hv};
        prev = sv;
    }
    m->fp_seq = (uint64_t)seq;
    m->fp_hash = hash;
    m->fp_step = (uint32_t)step;
    return 0;
}

/* comms[i].grow, .suspended, .suspends (newer shims; optional): damage is
 * named and that part ignored */
static void conv_comm_grow(pctx *x, const cJSON *o, ta_comm *m, const char *w)
{
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(o, "grow");
    if (gr && !cJSON_IsNull(gr)) {
        const cJSON *u = cJSON_IsObject(gr) ? cJSON_GetObjectItemCaseSensitive(gr, "uid") : NULL;
        const cJSON *n = cJSON_IsObject(gr) ? cJSON_GetObjectItemCaseSensitive(gr, "ranks") : NULL;
        uint64_t uid = 0;
        if (!cJSON_IsObject(gr) || !n || !int_in(n, 1, TA_COMM_PLACES_MAX) ||
            !(!u || cJSON_IsNull(u) || (cJSON_IsString(u) && !ta_parse_hex(u->valuestring, &uid))))
            ta_note_add(x->a, x->file, 0, "field %sgrow is not an object with a \"0x...\" or null uid and a number "
                        "of ranks; it is not used", w);
        else {
            m->grow_uid = uid;
            m->grow_ranks = (int)n->valuedouble;
        }
    }
    const cJSON *su = cJSON_GetObjectItemCaseSensitive(o, "suspended");
    const cJSON *sn = cJSON_GetObjectItemCaseSensitive(o, "suspends");
    if (su && !cJSON_IsNull(su)) {
        if (!cJSON_IsBool(su)) ta_note_add(x->a, x->file, 0, "field %ssuspended is not a boolean; it is not used", w);
        else m->suspended = cJSON_IsTrue(su);
    }
    if (sn && !cJSON_IsNull(sn)) {
        if (!int_in(sn, 0, 9e15)) ta_note_add(x->a, x->file, 0, "field %ssuspends is not a count; it is not used", w);
        else m->suspends = (int64_t)sn->valuedouble;
    }
}

int conv_comm(pctx *x, const cJSON *o, ta_comm *m, int i)
{
    char w[32];
    snprintf(w, sizeof w, "comms[%d].", i);
    const char *s;
    memset(m, 0, sizeof *m);
    if (!cJSON_IsObject(o)) return BAD(x, "%s is not an object", w);
    if (get_hex(x, o, "id", &m->id, 0, w) < 0) return -1;
    int r = get_hex(x, o, "parent", &m->parent, 1, w);
    if (r < 0) return -1;
    m->has_parent = r == 0;
    if (get_str(x, o, "kind", &s, 0, w) < 0) return -1;
    snprintf(m->kind, sizeof m->kind, "%s", s);
    if (get_int(x, o, "size", &m->size, 1, w) < 0) return -1;
    if (get_int(x, o, "rank", &m->rank, 0, w) < 0) return -1;
    if (m->rank < 0 || m->rank >= TA_COMM_PLACES_MAX) return BAD(x, "field %srank is out of range", w);
    if (m->size > TA_COMM_PLACES_MAX) return BAD(x, "field %ssize is out of range", w);
    if (get_int(x, o, "device", &m->device, 1, w) < 0) return -1;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "init");
    if (!cJSON_IsObject(in)) return BAD(x, "field %sinit is not an object", w);
    char w2[48];
    snprintf(w2, sizeof w2, "%sinit.", w);
    if (get_i64(x, in, "enter_ns", &m->init_enter, 0, w2) < 0) return -1;
    if (get_i64(x, in, "exit_ns", &m->init_exit, 1, w2) < 0) return -1;
    if (get_i64(x, in, "rc", &m->init_rc, 1, w2) < 0) return -1;
    if (get_int(x, in, "stack", &m->init_stack, 0, w2) < 0) return -1;
    m->init_pystack = -1;     /* init.pystack: read once the Python stacks are (parse_file) */
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "end");
    m->end_enter = m->end_exit = TA_NULL64;
    if (e && cJSON_IsObject(e)) {
        if (get_str(x, e, "kind", &s, 0, w) == 0) snprintf(m->end_kind, sizeof m->end_kind, "%s", s);
        int64_t v;
        if (get_i64(x, e, "enter_ns", &v, 1, w) >= 0) m->end_enter = v;
        if (get_i64(x, e, "exit_ns", &v, 1, w) >= 0) m->end_exit = v;
        x->err[0] = 0;
    } else if (e && !cJSON_IsNull(e)) {
        return BAD(x, "field %send is not an object or null", w);
    }
    if (get_i64(x, o, "colls", &m->colls, 0, w) < 0) return -1;
    conv_comm_grow(x, o, m, w);
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(o, "fingerprint");
    if (fp && !cJSON_IsNull(fp) && conv_fingerprint(x, fp, m, w) < 0) {
        ta_note_add(x->a, x->file, 0, "%s; the fingerprint of this communicator is not used", x->err);
        x->err[0] = 0;
        free(m->ckp);
        m->ckp = NULL;
        m->nckp = 0;
        m->fp_seq = m->fp_hash = 0;
        m->fp_step = 0;
    }
    m->g = -1;
    m->family = i;
    return 0;
}

int conv_stacks(pctx *x, const cJSON *root, ta_trace *t, ta_an *a, pthread_mutex_t *lk)
{
    const cJSON *mods = cJSON_GetObjectItemCaseSensitive(root, "modules");
    const cJSON *stacks = cJSON_GetObjectItemCaseSensitive(root, "stacks");
    if (!cJSON_IsArray(mods)) return BAD(x, "field modules is not an array");
    if (!cJSON_IsArray(stacks)) return BAD(x, "field stacks is not an array");
    int nm = cJSON_GetArraySize(mods), i = 0;
    int *gid = xcalloc((size_t)nm + 1, sizeof *gid);
    for (const cJSON *m = mods->child; m; m = m->next, i++) {
        const char *path, *bid;
        char w[32];
        snprintf(w, sizeof w, "modules[%d].", i);
        if (!cJSON_IsObject(m) || get_str(x, m, "path", &path, 0, w) < 0 || get_str(x, m, "build_id", &bid, 1, w) < 0) {
            if (!x->err[0]) BAD(x, "%s is not an object", w);
            free(gid);
            return -1;
        }
        pthread_mutex_lock(lk);
        gid[i] = ta_module_intern(a, path, bid);
        pthread_mutex_unlock(lk);
    }
    t->nstacks = cJSON_GetArraySize(stacks);
    t->stacks = xcalloc((size_t)t->nstacks, sizeof *t->stacks);
    i = 0;
    for (const cJSON *s = stacks->child; s; s = s->next, i++) {
        const cJSON *fr = cJSON_IsObject(s) ? cJSON_GetObjectItemCaseSensitive(s, "frames") : NULL;
        if (!cJSON_IsArray(fr)) { free(gid); return BAD(x, "field stacks[%d].frames is not an array", i); }
        ta_stack *st = &t->stacks[i];
        st->nframes = cJSON_GetArraySize(fr);
        st->frames = xcalloc((size_t)st->nframes, sizeof *st->frames);
        int j = 0;
        for (const cJSON *f = fr->child; f; f = f->next, j++) {
            char w[48];
            snprintf(w, sizeof w, "stacks[%d].frames[%d].", i, j);
            int mi;
            const char *sym;
            ta_frame *o = &st->frames[j];
            if (!cJSON_IsObject(f)) { free(gid); return BAD(x, "%s is not an object", w); }
            if (get_int(x, f, "module", &mi, 0, w) < 0 || get_hex(x, f, "offset", &o->offset, 0, w) < 0 ||
                get_str(x, f, "symbol", &sym, 1, w) < 0 || get_i64(x, f, "symbol_offset", &o->symbol_offset, 1, w) < 0) {
                free(gid);
                return -1;
            }
            if (mi < -1 || mi >= nm) { free(gid); return BAD(x, "field %smodule is not an index into modules", w); }
            o->module = mi < 0 ? -1 : gid[mi];
            o->symbol = sym ? ta_intern(sym) : NULL;
        }
    }
    free(gid);
    return 0;
}

/* an integer JSON value in [lo, hi] */
static int int_in(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= lo && v->valuedouble <= hi;
}

/* an optional index field (newer shims): its value when it is an index
 * below n, else -1 (absent, null, or damaged: that site is unknown) */
int opt_index(const cJSON *o, const char *name, int n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && int_in(v, 0, (double)n - 1) ? (int)v->valuedouble : -1;
}

/* ---- the sections, in the order load.c converts them ---- */
/* The trace's identity (format, version, job, rank, host, end, clock):
 * -1 (why in x->err) when the file cannot be placed. *packed: version 2. */
int conv_identity(pctx *x, const cJSON *root, ta_trace *t, int *packed)
{
    const char *s;
    const cJSON *o;
    int64_t v;
    if (!cJSON_IsObject(root)) { BAD(x, "the top level is not an object"); return -1; }
    if (get_str(x, root, "format", &s, 0, "") < 0) { snprintf(x->err, sizeof x->err, "not a trshim trace (no \"format\": \"trshim-trace\")"); return -1; }
    if (strcmp(s, TRSHIM_TRACE_FORMAT) != 0) { BAD(x, "not a trshim trace (format \"%.60s\")", s); return -1; }
    if (get_i64(x, root, "version", &v, 0, "") < 0) return -1;
    if (v < TRSHIM_TRACE_VERSION_MIN || v > TRSHIM_TRACE_VERSION) {
        BAD(x, "unknown trace format version %lld (this tranalyze reads versions %d to %d)", (long long)v,
            TRSHIM_TRACE_VERSION_MIN, TRSHIM_TRACE_VERSION);
        return -1;
    }
    *packed = v >= 2;     /* version 2: the calls are packed (packed.c) */
    o = cJSON_GetObjectItemCaseSensitive(root, "job");
    if (!cJSON_IsObject(o)) { BAD(x, "field job is not an object"); return -1; }
    if (get_str(x, o, "id", &s, 0, "job.") < 0) return -1;
    t->job_id = xstrdup(s);
    if (get_str(x, o, "source", &s, 0, "job.") < 0) return -1;
    t->job_source = xstrdup(s);
    if (get_int(x, root, "rank", &t->rank, 1, "") < 0) return -1;
    if (t->rank < 0) { BAD(x, "the rank is unknown (rank is null): the trace cannot be placed"); return -1; }
    if (get_str(x, root, "rank_source", &s, 0, "") < 0) return -1;
    t->rank_source = xstrdup(s);
    if (get_int(x, root, "world_size", &t->world_size, 1, "") < 0) return -1;
    if (t->world_size > 1 << 24) { BAD(x, "field world_size is out of range"); return -1; }
    if (get_int(x, root, "local_rank", &t->local_rank, 1, "") < 0) return -1;
    if (get_int(x, root, "device", &t->device, 1, "") < 0) return -1;
    if (get_str(x, root, "host", &s, 0, "") < 0) return -1;
    t->host = xstrdup(s);
    if (get_i64(x, root, "pid", &t->pid, 0, "") < 0) return -1;
    if (get_num(x, root, "start_time", &t->start_time, "") < 0) return -1;
    if (get_num(x, root, "write_time", &t->write_time, "") < 0) return -1;
    o = cJSON_GetObjectItemCaseSensitive(root, "end");
    if (!cJSON_IsObject(o)) { BAD(x, "field end is not an object"); return -1; }
    if (get_str(x, o, "reason", &s, 0, "end.") < 0) return -1;
    if (!strcmp(s, "exit")) t->end_state = END_EXITED;
    else if (!strcmp(s, "signal")) t->end_state = END_SIGNAL;
    else if (!strcmp(s, "comm_end")) t->end_state = END_COMM_END;
    else if (!strcmp(s, "snapshot")) t->end_state = END_SNAPSHOT;
    else if (!strcmp(s, "hang")) t->end_state = END_HANG;
    else { BAD(x, "field end.reason is \"%.40s\", not exit, signal, comm_end, snapshot or hang", s); return -1; }
    if (get_int(x, o, "signal", &t->end_signal, 1, "end.") < 0) return -1;
    if (get_bool(x, o, "in_call", &t->end_in_call, "end.") < 0) return -1;
    o = cJSON_GetObjectItemCaseSensitive(root, "clock");
    if (!cJSON_IsObject(o) || get_num(x, o, "realtime", &t->clock_real, "clock.") < 0 ||
        get_i64(x, o, "monotonic_ns", &t->clock_mono, 0, "clock.") < 0) {
        if (!x->err[0]) BAD(x, "field clock is not an object");
        return -1;
    }
    o = cJSON_GetObjectItemCaseSensitive(root, "clock_write");     /* optional: the sample of this write */
    if (cJSON_IsObject(o)) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "realtime"), *m = cJSON_GetObjectItemCaseSensitive(o, "monotonic_ns");
        if (cJSON_IsNumber(r) && cJSON_IsNumber(m) && isfinite(r->valuedouble) && m->valuedouble >= 0 && m->valuedouble < 9e18) {
            t->clock_real_w = r->valuedouble;
            t->clock_mono_w = (int64_t)m->valuedouble;
            t->has_clock_w = 1;
        }
    }
    return 0;
}

/* The informative fields (versions, command line, environment, dropped,
 * the ring's window): a problem there is noted, the trace still used.
 * *ring_next: the ring's head at this write, when the trace says. */
void conv_informative(pctx *x, const cJSON *root, ta_trace *t, int64_t *ring_next)
{
    const cJSON *o;
    o = cJSON_GetObjectItemCaseSensitive(root, "versions");
    t->v_cuda_rt = t->v_cuda_drv = t->v_nccl = TA_NULL64;
    if (cJSON_IsObject(o)) {
        const char *tv = NULL;
        get_str(x, o, "trshim", &tv, 1, "");
        t->v_trshim = tv ? xstrdup(tv) : NULL;
        get_i64(x, o, "cuda_runtime", &t->v_cuda_rt, 1, "");
        get_i64(x, o, "cuda_driver", &t->v_cuda_drv, 1, "");
        get_i64(x, o, "nccl", &t->v_nccl, 1, "");
        x->err[0] = 0;
    }
    o = cJSON_GetObjectItemCaseSensitive(root, "cmdline");
    if (cJSON_IsArray(o)) {
        size_t len = 0;
        for (const cJSON *e = o->child; e; e = e->next) if (cJSON_IsString(e)) len += strlen(e->valuestring) + 1;
        t->cmdline = xcalloc(len + 1, 1);
        for (const cJSON *e = o->child; e; e = e->next)
            if (cJSON_IsString(e)) {
                if (t->cmdline[0]) strcat(t->cmdline, " ");
                strcat(t->cmdline, e->valuestring);
            }
    }
    o = cJSON_GetObjectItemCaseSensitive(root, "env");
    if (cJSON_IsObject(o)) {
        int ne = cJSON_GetArraySize(o), k = 0;
        t->env = xcalloc((size_t)ne, sizeof *t->env);
        for (const cJSON *e = o->child; e; e = e->next)
            if (cJSON_IsString(e) && e->string) t->env[k++] = xasprintf("%s=%s", e->string, e->valuestring);
        t->nenv = k;
    }
    conv_env_sections(root, t);
    if (get_i64(x, root, "dropped", &t->dropped, 0, "") < 0) { t->dropped = 0; x->err[0] = 0; }
    /* the ring (newer shims; optional): its file, and the window of records
     * this write holds */
    o = cJSON_GetObjectItemCaseSensitive(root, "ring");
    if (o && !cJSON_IsNull(o)) {
        const char *rf = NULL;
        int64_t cap, first, next;
        if (!cJSON_IsObject(o)) {
            BAD(x, "field ring is not an object");
        } else if (get_str(x, o, "file", &rf, 1, "ring.") >= 0 && get_i64(x, o, "capacity", &cap, 0, "ring.") >= 0 &&
                   get_i64(x, o, "first", &first, 0, "ring.") >= 0 && get_i64(x, o, "next", &next, 0, "ring.") >= 0) {
            if (cap < 1 || first < 0 || next < first || next - first > cap)
                BAD(x, "field ring: capacity %lld, first %lld and next %lld do not fit together", (long long)cap,
                    (long long)first, (long long)next);
            else {
                t->ring_capacity = cap;
                t->ring_lost = first;
                t->ring_file = rf ? xstrdup(rf) : NULL;
                *ring_next = next;
            }
        }
        if (x->err[0]) {
            ta_note_add(x->a, x->file, 0, "%s; the ring information is not used", x->err);
            x->err[0] = 0;
        }
    }
}


/* "python", "pycodes", "pystacks" (newer shims; all optional). Damage is
 * named in a note: bad pycodes (or either array not an array) and no
 * Python stack of the rank is used; a bad stack is kept empty (those calls
 * have no Python site), counted in one note. */
void conv_python(pctx *x, const cJSON *root, ta_trace *t)
{
    ta_an *a = x->a;
    const char *path = x->file;
    const cJSON *py = cJSON_GetObjectItemCaseSensitive(root, "python");
    const cJSON *pc = cJSON_GetObjectItemCaseSensitive(root, "pycodes");
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(root, "pystacks");
    if (py && !cJSON_IsNull(py)) {
        const cJSON *st = cJSON_IsObject(py) ? cJSON_GetObjectItemCaseSensitive(py, "state") : NULL;
        static const char *const states[] = {"ok", "none", "unsupported", "disabled"};
        int k = 4;
        if (cJSON_IsString(st))
            for (k = 0; k < 4; k++) if (!strcmp(st->valuestring, states[k])) break;
        if (k == 4) {
            ta_note_add(a, path, 0, "field python is not an object with a state of ok, none, unsupported or disabled; "
                        "it is not used");
        } else {
            t->py_state = states[k];
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(py, "version");
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(py, "detail");
            if (cJSON_IsString(v)) t->py_version = ta_py_intern(v->valuestring, 64);
            if (cJSON_IsString(d)) t->py_detail = ta_py_intern(d->valuestring, 1024);
            ta_pyroots_json(a, path, t, py);      /* python.roots (pyroots.c) */
        }
    }
    if ((!pc || cJSON_IsNull(pc)) && (!ps || cJSON_IsNull(ps))) return;
    const char *why = NULL;
    char w[96];
    int nc = 0, ns = 0;
    if (!cJSON_IsArray(pc)) why = "field pycodes is not an array";
    else if (!cJSON_IsArray(ps)) why = "field pystacks is not an array";
    else if ((nc = cJSON_GetArraySize(pc)) > TA_PY_TABLE_MAX || (ns = cJSON_GetArraySize(ps)) > TA_PY_TABLE_MAX)
        why = "fields pycodes/pystacks have too many entries";
    if (!why) {
        t->pycodes = xcalloc((size_t)nc + 1, sizeof *t->pycodes);
        t->npycodes = nc;
        int i = 0;
        for (const cJSON *e = pc->child; e; e = e->next, i++) {
            const cJSON *f = cJSON_IsArray(e) && cJSON_GetArraySize(e) == 3 ? e->child : NULL;
            const cJSON *q = f ? f->next : NULL, *l = q ? q->next : NULL;
            if (!cJSON_IsString(f) || !cJSON_IsString(q) || !int_in(l, INT32_MIN, INT32_MAX)) {
                snprintf(w, sizeof w, "field pycodes[%d] is not a [file, qualname, firstlineno] array", i);
                why = w;
                break;
            }
            ta_py_code_set(&t->pycodes[i], f->valuestring, strlen(f->valuestring), q->valuestring,
                           strlen(q->valuestring), (int)l->valuedouble);
        }
    }
    if (why) {
        ta_note_add(a, path, 0, "%s; the Python call sites of this rank are not used (native call sites instead)", why);
        ta_py_free(t);
        return;
    }
    t->pystacks = xcalloc((size_t)ns + 1, sizeof *t->pystacks);
    t->npystacks = ns;
    int i = 0, bad = 0, bad1 = -1;
    const char *why1 = NULL;
    for (const cJSON *e = ps->child; e; e = e->next, i++) {
        const char *sw = NULL;
        int n = cJSON_IsArray(e) ? cJSON_GetArraySize(e) : -1;
        if (n < 0) sw = "is not an array";
        else if (n > TA_PY_FRAMES_MAX) sw = "has too many frames";
        ta_pystack *o = &t->pystacks[i];
        if (!sw && n) {
            o->frames = xmalloc(sizeof *o->frames * (size_t)n);
            int k = 0;
            for (const cJSON *f = e->child; f && !sw; f = f->next, k++) {
                const cJSON *c = cJSON_IsArray(f) && cJSON_GetArraySize(f) == 2 ? f->child : NULL;
                const cJSON *l = c ? c->next : NULL;
                if (!c || !int_in(c, 0, INT32_MAX) || !int_in(l, INT32_MIN, INT32_MAX)) sw = "has a frame that is not a [code, line] pair";
                else if (c->valuedouble >= nc) sw = "has a frame whose code is not an index into pycodes";
                else o->frames[k] = (ta_pyframe){(int32_t)c->valuedouble, (int32_t)l->valuedouble};
            }
            o->nframes = n;
        }
        if (sw) {
            free(o->frames);
            o->frames = NULL;
            o->nframes = 0;
            if (!bad++) { bad1 = i; why1 = sw; }
        }
    }
    if (bad)
        ta_note_add(a, path, 0, "%d damaged Python stack(s) not used (first: pystacks[%d] %s); those calls have native "
                    "call sites", bad, bad1, why1);
}

int conv_memory(pctx *x, const cJSON *root, ta_trace *t)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "memory");
    if (!cJSON_IsObject(m)) return BAD(x, "field memory is not an object");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "devices");
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(m, "failures");
    if (!cJSON_IsArray(d)) return BAD(x, "field memory.devices is not an array");
    if (!cJSON_IsArray(fl)) return BAD(x, "field memory.failures is not an array");
    t->nmdev = cJSON_GetArraySize(d);
    t->mdev = xcalloc((size_t)t->nmdev, sizeof *t->mdev);
    int i = 0;
    for (const cJSON *o = d->child; o; o = o->next, i++) {
        char w[40];
        snprintf(w, sizeof w, "memory.devices[%d].", i);
        ta_memdev *v = &t->mdev[i];
        if (!cJSON_IsObject(o)) return BAD(x, "%s is not an object", w);
        if (get_int(x, o, "device", &v->device, 0, w) < 0 || get_i64(x, o, "live_bytes", &v->live, 0, w) < 0 ||
            get_i64(x, o, "peak_bytes", &v->peak, 0, w) < 0 || get_i64(x, o, "allocs", &v->allocs, 0, w) < 0 ||
            get_i64(x, o, "frees", &v->frees, 0, w) < 0 || get_i64(x, o, "peak_ns", &v->peak_ns, 1, w) < 0 ||
            get_int(x, o, "peak_stack", &v->peak_stack, 0, w) < 0)
            return -1;
        if (v->peak_stack >= t->nstacks || v->peak_stack < -1) v->peak_stack = -1;
        v->peak_pystack = opt_index(o, "peak_pystack", t->npystacks);
        const cJSON *pa = cJSON_GetObjectItemCaseSensitive(o, "peak_after");
        if (cJSON_IsObject(pa)) {
            int64_t s;
            char w2[64];
            snprintf(w2, sizeof w2, "%speak_after.", w);
            const cJSON *cm = cJSON_GetObjectItemCaseSensitive(pa, "comm");
            uint64_t id = 0;
            if (cJSON_IsString(cm)) {
                if (ta_parse_hex(cm->valuestring, &id)) return BAD(x, "field %scomm is not a \"0x...\" string", w2);
            } else if (cJSON_IsNumber(cm) && cm->valuedouble >= 0 && cm->valuedouble < t->ncomms) {
                id = t->comms[(int)cm->valuedouble].id;   /* an index into comms */
            } else {
                return BAD(x, "field %scomm is not a communicator", w2);
            }
            if (get_i64(x, pa, "seq", &s, 0, w2) < 0) return -1;
            v->has_peak_after = 1;
            v->peak_after_comm = id;
            v->peak_after_seq = s;
        }
    }
    t->nmfail = cJSON_GetArraySize(fl);
    t->mfail = xcalloc((size_t)t->nmfail, sizeof *t->mfail);
    i = 0;
    for (const cJSON *o = fl->child; o; o = o->next, i++) {
        char w[40];
        snprintf(w, sizeof w, "memory.failures[%d].", i);
        ta_memfail *v = &t->mfail[i];
        const char *api, *err;
        if (!cJSON_IsObject(o)) return BAD(x, "%s is not an object", w);
        if (get_str(x, o, "api", &api, 0, w) < 0 || get_int(x, o, "device", &v->device, 1, w) < 0 ||
            get_i64(x, o, "bytes", &v->bytes, 0, w) < 0 || get_i64(x, o, "live_bytes", &v->live, 0, w) < 0 ||
            get_i64(x, o, "free_bytes", &v->free_bytes, 1, w) < 0 ||
            get_i64(x, o, "total_bytes", &v->total_bytes, 1, w) < 0 || get_str(x, o, "error", &err, 1, w) < 0 ||
            get_i64(x, o, "error_code", &v->error_code, 1, w) < 0 || get_i64(x, o, "t_ns", &v->t_ns, 0, w) < 0 ||
            get_int(x, o, "stack", &v->stack, 0, w) < 0)
            return -1;
        if (v->stack >= t->nstacks || v->stack < -1) v->stack = -1;
        v->pystack = opt_index(o, "pystack", t->npystacks);
        snprintf(v->api, sizeof v->api, "%s", api);
        snprintf(v->error, sizeof v->error, "%s", err ? err : "");
    }
    const cJSON *pin = cJSON_GetObjectItemCaseSensitive(m, "pinned");
    if (cJSON_IsObject(pin)) get_i64(x, pin, "peak_bytes", &t->pinned_peak, 0, "memory.pinned.");
    x->err[0] = 0;
    return 0;
}

/* nancheck, check_fields, checks. 0 (problems noted), -1 fatal (a syntax
 * error in checks, in x->err). */
int conv_nan(pctx *x, const cJSON *root, ta_trace *t, const char *buf, size_t n, int packed, int have_checks,
             size_t vs, size_t ve)
{
    ta_an *a = x->a;
    const char *path = x->file;
    const cJSON *nc = cJSON_GetObjectItemCaseSensitive(root, "nancheck");
    const cJSON *cf = cJSON_GetObjectItemCaseSensitive(root, "check_fields");
    const cJSON *ck = cJSON_GetObjectItemCaseSensitive(root, "checks");
    t->nan_mode = NM_ABSENT;
    if (!nc) {
        if (cf || ck) ta_note_add(a, path, 0, "checks without a nancheck object; the NaN/Inf checks of this rank are not used");
        return 0;
    }
    if (!cJSON_IsObject(nc)) {
        ta_note_add(a, path, 0, "field nancheck is not an object; the NaN/Inf checks of this rank are not used");
        return 0;
    }
    const char *mode = NULL;
    if (get_str(x, nc, "mode", &mode, 0, "nancheck.") < 0) {
        ta_note_add(a, path, 0, "%s; the NaN/Inf checks of this rank are not used", x->err);
        return 0;
    }
    if (!strcmp(mode, "off")) t->nan_mode = NM_OFF;
    else if (!strcmp(mode, "output")) t->nan_mode = NM_OUTPUT;
    else if (!strcmp(mode, "all")) t->nan_mode = NM_ALL;
    else {
        t->nan_mode = NM_OTHER;
        ta_note_add(a, path, 0, "nancheck.mode is \"%.40s\", not all, output or off; its checks are read as given", mode);
    }
    const char *s = NULL;
    if (get_str(x, nc, "engine", &s, 1, "nancheck.") == 0) t->nan_engine = xstrdup(s);
    s = NULL;
    if (get_str(x, nc, "gpu_unused", &s, 1, "nancheck.") == 0) t->nan_gpu_unused = xstrdup(s);
    if (get_i64(x, nc, "dropped", &t->nan_dropped, 0, "nancheck.") < 0 || t->nan_dropped < 0) t->nan_dropped = 0;
    x->err[0] = 0;
    if (t->nan_dropped > 0)
        ta_note_add(a, path, 0, "%lld NaN/Inf check(s) were not recorded (nancheck.dropped): those buffers are unknown",
                    (long long)t->nan_dropped);
    if (t->nan_mode == NM_OFF) return 0;
    if (!cJSON_IsArray(cf)) {
        ta_note_add(a, path, 0, "field check_fields is %s; the NaN/Inf checks of this rank are not used",
                    cf ? "not an array" : "missing");
        return 0;
    }
    int npos = cJSON_GetArraySize(cf), p = 0;
    unsigned have = 0;
    int8_t *role = xmalloc((size_t)npos + 1);
    for (const cJSON *e = cf->child; e; e = e->next, p++) {
        role[p] = -1;
        if (!cJSON_IsString(e)) {
            free(role);
            ta_note_add(a, path, 0, "field check_fields[%d] is not a string; the NaN/Inf checks of this rank are not used", p);
            return 0;
        }
        int r = ta_field_find(ta_check_fields, TRSHIM_CHECK_FIELD_N, e->valuestring);
        role[p] = (int8_t)r;
        if (r >= 0) have |= 1u << r;
    }
    const char *lacks = ta_field_missing(ta_check_fields, TRSHIM_CHECK_FIELD_N, have);
    if (lacks) {
        free(role);
        ta_note_add(a, path, 0, "field check_fields lacks \"%s\"; the NaN/Inf checks of this rank are not used", lacks);
        return 0;
    }
    /* (found by the scanner, checks is "[]" in the document cJSON read) */
    const char *form = packed ? "an object (version 2 packs the checks)" : "an array";
    if (!ck || (!have_checks && !(packed ? cJSON_IsObject(ck) : cJSON_IsArray(ck)))) {
        free(role);
        ta_note_add(a, path, 0, "field checks is %s%s; the NaN/Inf checks of this rank are not used",
                    ck ? "not " : "missing", ck ? form : "");
        return 0;
    }
    const char *first = NULL;
    int first_i = -1;
    size_t err_at = 0;
    char why[200] = "";
    int64_t nraw = t->ncalls + t->skipped_records;
    int r;
    if (have_checks) {
        r = ta_parse_checks(buf + vs, ve - vs, packed, role, npos, nraw, t, &err_at, why, sizeof why, &first,
                            &first_i);
        err_at += vs;
    } else {   /* found by cJSON only (an escaped key): print it back */
        char *txt = cJSON_PrintUnformatted(ck);
        r = txt ? ta_parse_checks(txt, strlen(txt), packed, role, npos, nraw, t, &err_at, why, sizeof why, &first,
                                  &first_i) : -1;
        cJSON_free(txt);
    }
    free(role);
    if (r == -3) { BAD(x, "%s", why); return -1; }      /* damaged packed data: as a syntax error */
    if (r == -1) { BAD(x, "not valid JSON: syntax error at byte %zu of %zu (in checks)", err_at, n); return -1; }
    if (r < 0) {
        ta_note_add(a, path, 0, "field checks is not %s; the NaN/Inf checks of this rank are not used", form);
        return 0;
    }
    t->nan_usable = 1;
    if (t->skipped_checks) {
        if (first_i >= 0)
            ta_note_add(a, path, 0, "%lld check record(s) skipped (first: checks[%d] %s)", (long long)t->skipped_checks,
                        first_i, first);
        else
            ta_note_add(a, path, 0, "%lld check record(s) skipped (%s)", (long long)t->skipped_checks, first);
    }
    return 0;
}

/* "coll_configs" (newer shims; optional): the configs of the *Config
 * collectives, by index. Not an array: named, none used (the calls that
 * name one keep their entry point, the config unknown); a damaged entry:
 * that config unknown, counted in one note. */
#define CFG_TABLE_MAX 65536
void conv_configs(pctx *x, const cJSON *root, ta_trace *t)
{
    const cJSON *cc = cJSON_GetObjectItemCaseSensitive(root, "coll_configs");
    if (!cc || cJSON_IsNull(cc)) return;
    int n = cJSON_IsArray(cc) ? cJSON_GetArraySize(cc) : -1;
    if (n < 0 || n > CFG_TABLE_MAX) {
        ta_note_add(x->a, x->file, 0, "field coll_configs is %s; the configs of its *Config collectives are unknown",
                    n < 0 ? "not an array" : "too long");
        return;
    }
    t->cfgs = xcalloc((size_t)n + 1, sizeof *t->cfgs);
    t->ncfgs = n;
    int i = 0, bad = 0, bad1 = -1;
    static const char *const ints[6] = {"minCTAs", "maxCTAs", "nvlsCTAs", "cgaClusterSize", "forceAlgSelection",
                                        "CTAPolicy"};
    for (const cJSON *e = cc->child; e; e = e->next, i++) {
        ta_collcfg *c = &t->cfgs[i];
        int32_t *fld[6] = {&c->min_ctas, &c->max_ctas, &c->nvls_ctas, &c->cga_cluster_size, &c->force_alg,
                           &c->cta_policy};
        c->state = CFG_SET;
        for (int k = 0; k < 6; k++) *fld[k] = TA_CFG_UNSET;
        int ok = cJSON_IsObject(e);
        if (ok && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "unknown"))) c->state = CFG_UNKNOWN;
        else if (ok && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "null"))) c->state = CFG_NULL;
        else if (ok && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "invalid"))) c->state = CFG_INVALID;
        for (int k = 0; k < 6 && ok && c->state == CFG_SET; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, ints[k]);
            if (!v || cJSON_IsNull(v)) continue;
            if (!int_in(v, INT32_MIN + 1.0, INT32_MAX)) ok = 0;
            else *fld[k] = (int32_t)v->valuedouble;
        }
        if (ok && c->state == CFG_SET) {
            const cJSON *al = cJSON_GetObjectItemCaseSensitive(e, "algSelection");
            const cJSON *tag = cJSON_GetObjectItemCaseSensitive(e, "userProfilerTag");
            if (al && !cJSON_IsNull(al)) {
                if (!cJSON_IsString(al)) ok = 0;
                else c->alg = ta_py_intern(al->valuestring, 256);
            }
            if (tag && !cJSON_IsNull(tag)) {
                if (!int_in(tag, 0, 1.8e19)) ok = 0;
                else c->user_tag = (uint64_t)tag->valuedouble;
            }
        }
        if (!ok) {
            memset(c, 0, sizeof *c);
            c->state = CFG_UNKNOWN;
            if (!bad++) bad1 = i;
        }
    }
    if (bad)
        ta_note_add(x->a, x->file, 0, "%d damaged config(s) in coll_configs (first: coll_configs[%d]): the calls "
                    "through them have an unknown config", bad, bad1);
}

/* "nccl" (newer shims; optional): the loaded NCCL library and the host
 * functions it exports that the shim does not know. Damaged: named, not used. */
#define NCCL_UNKNOWN_MAX 4096
void conv_nccl(pctx *x, const cJSON *root, ta_trace *t)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "nccl");
    if (!o || cJSON_IsNull(o)) return;
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "version") : NULL;
    const cJSON *l = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "library") : NULL;
    const cJSON *ex = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "exports") : NULL;
    const cJSON *u = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "unknown_functions") : NULL;
    const cJSON *more = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "unknown_not_listed") : NULL;
    const char *why = NULL;
    if (!cJSON_IsObject(o)) why = "field nccl is not an object";
    else if (v && !cJSON_IsNull(v) && !int_in(v, 0, INT32_MAX)) why = "field nccl.version is not a version code";
    else if (l && !cJSON_IsNull(l) && !cJSON_IsString(l)) why = "field nccl.library is not a string";
    else if (ex && !cJSON_IsNull(ex) && !int_in(ex, 0, 1e9)) why = "field nccl.exports is not a count";
    else if (u && !cJSON_IsNull(u) && !cJSON_IsArray(u)) why = "field nccl.unknown_functions is not an array";
    else if (more && !cJSON_IsNull(more) && !int_in(more, 0, 1e9)) why = "field nccl.unknown_not_listed is not a count";
    if (!why && cJSON_IsArray(u))
        for (const cJSON *e = u->child; e && !why; e = e->next)
            if (!cJSON_IsString(e)) why = "field nccl.unknown_functions holds something that is not a name";
    if (why) {
        ta_note_add(x->a, x->file, 0, "%s; what this rank's NCCL library exports is not known", why);
        return;
    }
    t->has_nccl = 1;
    t->nccl_version = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
    t->nccl_exports = cJSON_IsNumber(ex) ? (int64_t)ex->valuedouble : -1;
    t->nccl_lib = cJSON_IsString(l) ? xstrdup(ta_py_intern(l->valuestring, 4096)) : NULL;
    t->nccl_unknown_more = cJSON_IsNumber(more) ? (int64_t)more->valuedouble : 0;
    int n = cJSON_IsArray(u) ? cJSON_GetArraySize(u) : 0;
    if (n > NCCL_UNKNOWN_MAX) {
        t->nccl_unknown_more += n - NCCL_UNKNOWN_MAX;
        n = NCCL_UNKNOWN_MAX;
    }
    t->nccl_unknown = xcalloc((size_t)n + 1, sizeof *t->nccl_unknown);
    int k = 0;
    for (const cJSON *e = n ? u->child : NULL; e && k < n; e = e->next)
        if (e->valuestring[0]) t->nccl_unknown[k++] = ta_py_intern(e->valuestring, 256);
    t->nnccl_unknown = k;
}
