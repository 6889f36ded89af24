/* The rank that died (issue 21): the fatal signal a rank's shim captured
 * at the crash (where, why) and the first CUDA / NCCL errors it saw, read
 * from JSON traces ("crash", "errors") and ring files (CRASH and ERROR
 * blobs), and said in the root cause: "rank 2 crashed with SIGSEGV
 * (address 0xc, SEGV_MAPERR) in read_sample (job.c:47) <- load_batch
 * (job.c:113) <- main"; and the uncaught Python exception a rank exited
 * with (JSON "python_exception", ring PYEXC blob): "rank 2 exited with an
 * uncaught Python exception ValueError: bad batch 6 (raised at train.py:12
 * in load_batch)" (crash_out.c says them). Input is untrusted: a damaged
 * record is a note naming the file, and is not used. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "load/ring/ring_int.h"
#include "site/ta_site.h"
#include "ta_calls.h"
#include "ta_crash.h"

#define ERRS_MAX 8

/* a ring's records, copied out of the file */
struct ring_crash {
    int has_crash;
    trr_crash c;
    trr_error e[ERRS_MAX];
    int ne;
    ta_crash *crash;          /* converted */
    ta_error *errs; int nerrs;
    int has_pyexc;
    trr_pyexc p;
    ta_pyexc *pyexc;          /* converted */
};

/* ---- common ---- */

static void stack_copy(ta_stack *dst, const ta_stack *src)
{
    dst->nframes = 0;
    dst->frames = NULL;
    if (!src || src->nframes <= 0) return;
    dst->frames = xmalloc(sizeof(ta_frame) * (size_t)src->nframes);
    memcpy(dst->frames, src->frames, sizeof(ta_frame) * (size_t)src->nframes);
    dst->nframes = src->nframes;
}

static ta_crash *crash_dup(const ta_crash *c)
{
    ta_crash *o = xmalloc(sizeof *o);
    *o = *c;
    o->message = c->message ? xstrdup(c->message) : NULL;
    stack_copy(&o->stack, &c->stack);
    return o;
}

static void crash_del(ta_crash *c)
{
    if (!c) return;
    free(c->message);
    free(c->stack.frames);
    free(c);
}

static void errs_del(ta_error *e, int n)
{
    for (int i = 0; i < n; i++) { free(e[i].name); free(e[i].api); free(e[i].stack.frames); }
    free(e);
}

static ta_error *errs_dup(const ta_error *e, int n)
{
    ta_error *o = xcalloc((size_t)n + 1, sizeof *o);
    for (int i = 0; i < n; i++) {
        o[i] = e[i];
        o[i].name = xstrdup(e[i].name);
        o[i].api = xstrdup(e[i].api);
        stack_copy(&o[i].stack, &e[i].stack);
    }
    return o;
}

static void pyexc_del(ta_pyexc *p)
{
    if (!p) return;
    free(p->type); free(p->message); free(p->file); free(p->function);
    free(p);
}

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

static ta_pyexc *pyexc_dup(const ta_pyexc *p)
{
    ta_pyexc *o = xmalloc(sizeof *o);
    *o = *p;
    o->type = dup_or_null(p->type);
    o->message = dup_or_null(p->message);
    o->file = dup_or_null(p->file);
    o->function = dup_or_null(p->function);
    return o;
}

void ta_crash_free(ta_trace *t)
{
    pyexc_del(t->pyexc);
    t->pyexc = NULL;
    crash_del(t->crash);
    t->crash = NULL;
    errs_del(t->errs, t->nerrs);
    t->errs = NULL;
    t->nerrs = 0;
}

void ta_crash_adopt(ta_trace *dst, ta_trace *src)
{
    if (!dst->crash && src->crash) {
        dst->crash = src->crash;
        src->crash = NULL;
    }
    if (!dst->pyexc && src->pyexc) {
        dst->pyexc = src->pyexc;
        src->pyexc = NULL;
    }
    if (!dst->nerrs && src->nerrs) {
        dst->errs = src->errs; dst->nerrs = src->nerrs;
        src->errs = NULL; src->nerrs = 0;
    }
}

/* a fixed-size char array as a safe string (up to its first NUL) */
static char *safe_str(const char *s, size_t cap)
{
    return xstrdup(ta_py_intern(s, strnlen(s, cap)));
}

/* ---- ring files ---- */

int ring_crash_blob(rd *r, uint32_t kind, const uint8_t *q, uint32_t n)
{
    if (!r->crash) r->crash = xcalloc(1, sizeof *r->crash);
    struct ring_crash *x = r->crash;
    if (kind == TRR_BLOB_PYEXC) {
        if (!q || n < sizeof(trr_pyexc)) return 0;
        trr_pyexc p;
        memcpy(&p, q, sizeof p);
        if (p.state == 0 || p.state == 1) return 1;     /* reserved, none; or being written when it ended */
        if (p.state != 2 || p.line < -1 || p.tid < 0 || !p.type[0]) return 0;
        if (!x->has_pyexc) {
            x->p = p;
            x->has_pyexc = 1;
        }
        return 1;
    }
    if (kind == TRR_BLOB_CRASH) {
        if (!q || n < sizeof(trr_crash)) return 0;
        trr_crash c;
        memcpy(&c, q, sizeof c);
        if (c.state == 0) return 1;                 /* reserved, no crash */
        if (c.state > 2 || c.signo <= 0 || c.signo >= 128 || c.n > TRR_CRASH_FRAMES) return 0;
        if (!x->has_crash) {
            x->c = c;
            x->has_crash = 1;
        }
        return 1;
    }
    if (!q || n < sizeof(trr_error)) return 0;
    trr_error e;
    memcpy(&e, q, sizeof e);
    if ((e.kind != TRR_ERR_CUDA && e.kind != TRR_ERR_NCCL) || e.stack < -1 || e.comm < -1) return 0;
    if (x->ne < ERRS_MAX) x->e[x->ne++] = e;
    return 1;
}

void ring_crash_finish(rd *r, void (*frame_of)(const void *ctx, uint64_t ip, ta_frame *fr), const void *ctx)
{
    struct ring_crash *x = r->crash;
    if (!x) return;
    if (x->has_crash) {
        const trr_crash *c = &x->c;
        ta_crash *o = xcalloc(1, sizeof *o);
        o->signo = c->signo;
        o->code = c->code;
        o->tid = c->tid;
        o->sender = c->sender;
        o->has_addr = c->signo != SIGABRT;
        o->addr = c->addr;
        char *th = safe_str(c->thread, sizeof c->thread);
        snprintf(o->thread, sizeof o->thread, "%s", th);
        free(th);
        if (c->state >= 2 && c->message[0]) o->message = safe_str(c->message, sizeof c->message);
        o->pystack = c->state >= 2 && c->pystack >= 0 && c->pystack < r->npystacks ? c->pystack : -1;
        if (c->state >= 2 && c->stack >= 0 && c->stack < r->nstacks && r->stacks[c->stack].nframes) {
            stack_copy(&o->stack, &r->stacks[c->stack]);   /* the writer's copy: its modules are stored */
        } else if (c->state >= 2 && c->n) {
            o->stack.frames = xcalloc(c->n, sizeof(ta_frame));
            o->stack.nframes = (int)c->n;
            for (uint32_t f = 0; f < c->n; f++) frame_of(ctx, c->ip[f], &o->stack.frames[f]);
        }
        x->crash = o;
    }
    if (x->has_pyexc) {
        const trr_pyexc *p = &x->p;
        ta_pyexc *o = xcalloc(1, sizeof *o);
        o->type = safe_str(p->type, sizeof p->type);
        o->message = p->message[0] ? safe_str(p->message, sizeof p->message) : NULL;
        o->file = p->file[0] ? safe_str(p->file, sizeof p->file) : NULL;
        o->function = p->function[0] ? safe_str(p->function, sizeof p->function) : NULL;
        o->line = p->line;
        o->tid = p->tid;
        x->pyexc = o;
    }
    if (x->ne) {
        x->errs = xcalloc((size_t)x->ne, sizeof *x->errs);
        for (int i = 0; i < x->ne; i++) {
            const trr_error *e = &x->e[i];
            ta_error *o = &x->errs[x->nerrs++];
            o->kind = e->kind;
            o->code = e->code;
            o->tid = e->tid;
            o->device = e->device;
            o->time_ns = e->time_ns <= (uint64_t)INT64_MAX ? (int64_t)e->time_ns : TA_NULL64;
            o->name = safe_str(e->name, sizeof e->name);
            o->api = safe_str(e->api, sizeof e->api);
            if (e->comm >= 0 && e->comm < r->nslots && r->slots[e->comm].ok) {
                o->has_comm = 1;
                o->comm = r->slots[e->comm].c.id;
            }
            if (e->stack >= 0 && e->stack < r->nstacks) stack_copy(&o->stack, &r->stacks[e->stack]);
        }
    }
}

void ring_crash_view(const rd *r, ta_trace *t)
{
    const struct ring_crash *x = r->crash;
    if (!x) return;
    if (x->crash) t->crash = crash_dup(x->crash);
    if (x->pyexc) t->pyexc = pyexc_dup(x->pyexc);
    if (x->nerrs) {
        t->errs = errs_dup(x->errs, x->nerrs);
        t->nerrs = x->nerrs;
    }
}

void ring_crash_rd_free(rd *r)
{
    struct ring_crash *x = r->crash;
    if (!x) return;
    crash_del(x->crash);
    pyexc_del(x->pyexc);
    errs_del(x->errs, x->nerrs);
    free(x);
    r->crash = NULL;
}

/* ---- JSON traces ---- */

static int get_int(const cJSON *o, const char *k, int64_t lo, int64_t hi, int64_t *out, int nullable)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (nullable && (!v || cJSON_IsNull(v))) { *out = INT64_MIN; return 1; }
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble) return 0;
    *out = (int64_t)v->valuedouble;
    return *out >= lo && *out <= hi;
}

/* "0x..." or null */
static int get_hex(const cJSON *o, const char *k, uint64_t *out, int *has)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    *has = 0;
    if (!v || cJSON_IsNull(v)) return 1;
    if (!cJSON_IsString(v) || strlen(v->valuestring) > 18 || ta_parse_hex(v->valuestring, out)) return 0;
    *has = 1;
    return 1;
}

/* a string field or null (NULL); 0 when neither */
static int get_s(const cJSON *o, const char *k, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 1;
    if (!cJSON_IsString(v)) return 0;
    *out = ta_py_intern(v->valuestring, strlen(v->valuestring));
    return 1;
}

static int json_crash(const cJSON *o, ta_trace *t)
{
    int64_t sig, code, tid, stack, sender, pystack;
    uint64_t addr = 0;
    int has = 0;
    const char *th, *msg;
    if (!cJSON_IsObject(o) || !get_int(o, "signal", 1, 127, &sig, 0) || !get_int(o, "code", INT32_MIN, INT32_MAX, &code, 0) ||
        !get_int(o, "tid", 0, INT32_MAX, &tid, 0) || !get_int(o, "stack", -1, INT32_MAX, &stack, 0) ||
        !get_int(o, "sender", 0, INT32_MAX, &sender, 1) || !get_hex(o, "addr", &addr, &has) ||
        !get_s(o, "thread", &th) || !get_s(o, "message", &msg))
        return 0;
    ta_crash *c = xcalloc(1, sizeof *c);
    c->signo = (int)sig;
    c->code = (int)code;
    c->tid = (int)tid;
    c->sender = sender == INT64_MIN ? 0 : (int)sender;
    c->has_addr = has;
    c->addr = addr;
    snprintf(c->thread, sizeof c->thread, "%s", th ? th : "");
    c->message = msg ? xstrdup(msg) : NULL;
    if (stack >= 0 && stack < t->nstacks) stack_copy(&c->stack, &t->stacks[stack]);
    /* optional; an index the trace's pystacks do not have is unknown */
    c->pystack = get_int(o, "pystack", -1, INT32_MAX, &pystack, 0) && pystack < t->npystacks ? (int)pystack : -1;
    t->crash = c;
    return 1;
}

static int json_error(const cJSON *o, ta_trace *t, ta_error *e)
{
    const char *kind, *name, *api;
    int64_t code, stack, tid, dev;
    if (!cJSON_IsObject(o) || !get_s(o, "kind", &kind) || !kind || (strcmp(kind, "cuda") && strcmp(kind, "nccl")) ||
        !get_int(o, "code", INT32_MIN, INT32_MAX, &code, 0) || !get_s(o, "name", &name) || !get_s(o, "api", &api) ||
        !get_int(o, "stack", -1, INT32_MAX, &stack, 0) || !get_int(o, "tid", 0, INT32_MAX, &tid, 0) ||
        !get_int(o, "device", -1, INT32_MAX, &dev, 1) || !get_hex(o, "comm", &e->comm, &e->has_comm))
        return 0;
    e->kind = !strcmp(kind, "cuda") ? TRR_ERR_CUDA : TRR_ERR_NCCL;
    e->code = (int)code;
    e->tid = (int)tid;
    e->device = dev == INT64_MIN ? -1 : (int)dev;
    e->name = xstrdup(name ? name : "");
    e->api = xstrdup(api ? api : "");
    e->time_ns = TA_NULL64;
    int64_t tn;
    if (get_int(o, "time_ns", 0, INT64_MAX, &tn, 0)) e->time_ns = tn;
    if (stack >= 0 && stack < t->nstacks) stack_copy(&e->stack, &t->stacks[stack]);
    return 1;
}

static int json_pyexc(const cJSON *o, ta_trace *t)
{
    const char *type, *msg, *file, *fn;
    int64_t line, tid;
    if (!cJSON_IsObject(o) || !get_s(o, "type", &type) || !type || !type[0] || !get_s(o, "message", &msg) ||
        !get_s(o, "file", &file) || !get_s(o, "function", &fn) || !get_int(o, "line", -1, INT32_MAX, &line, 1) ||
        !get_int(o, "tid", 0, INT32_MAX, &tid, 0))
        return 0;
    ta_pyexc *p = xcalloc(1, sizeof *p);
    p->type = xstrdup(type);
    p->message = msg && msg[0] ? xstrdup(msg) : NULL;
    p->file = file && file[0] ? xstrdup(file) : NULL;
    p->function = fn && fn[0] ? xstrdup(fn) : NULL;
    p->line = line == INT64_MIN ? -1 : (int)line;
    p->tid = (int)tid;
    t->pyexc = p;
    return 1;
}

void ta_crash_json(ta_an *a, const char *path, const cJSON *root, ta_trace *t)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "crash");
    if (c && !cJSON_IsNull(c) && !json_crash(c, t))
        ta_note_add(a, path, 0, "field crash is damaged: where this rank crashed is not known from this trace");
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(root, "python_exception");
    if (pe && !cJSON_IsNull(pe) && !json_pyexc(pe, t))
        ta_note_add(a, path, 0, "field python_exception is damaged: the Python exception this rank exited with is "
                    "not known from this trace");
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(root, "errors");
    if (!es || cJSON_IsNull(es)) return;
    if (!cJSON_IsArray(es)) {
        ta_note_add(a, path, 0, "field errors is not an array: the CUDA/NCCL errors of this rank are not known");
        return;
    }
    int n = cJSON_GetArraySize(es), bad = 0;
    if (n > ERRS_MAX) n = ERRS_MAX;
    t->errs = xcalloc((size_t)n + 1, sizeof *t->errs);
    int k = 0;
    for (const cJSON *e = es->child; e && k < n; e = e->next) {
        memset(&t->errs[t->nerrs], 0, sizeof t->errs[0]);
        if (json_error(e, t, &t->errs[t->nerrs])) t->nerrs++;
        else { free(t->errs[t->nerrs].name); free(t->errs[t->nerrs].api); bad++; }
        k++;
    }
    if (bad) ta_note_add(a, path, 0, "%d damaged entr%s of field errors ignored", bad, bad > 1 ? "ies" : "y");
}

