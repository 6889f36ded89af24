/* The rank that died (issue 21): the fatal signal a rank's shim captured
 * at the crash (where, why) and the first CUDA / NCCL errors it saw, read
 * from JSON traces ("crash", "errors") and ring files (CRASH and ERROR
 * blobs), and said in the root cause: "rank 2 crashed with SIGSEGV
 * (address 0xc, SEGV_MAPERR) in read_sample (job.c:47) <- load_batch
 * (job.c:113) <- main"; and the uncaught Python exception a rank exited
 * with (JSON "python_exception", ring PYEXC blob): "rank 2 exited with an
 * uncaught Python exception ValueError: bad batch 6 (raised at train.py:12
 * in load_batch)". Input is untrusted: a damaged record is a note
 * naming the file, and is not used. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ring_int.h"
#include "ta_crash.h"
#include "ta_jw.h"
#include "ta_site.h"

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
    if (!cJSON_IsString(v) || strncmp(v->valuestring, "0x", 2) || !v->valuestring[2] || strlen(v->valuestring) > 18)
        return 0;
    char *end;
    *out = strtoull(v->valuestring + 2, &end, 16);
    *has = 1;
    return *end == 0;
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

/* ---- what is said ---- */

static const char *code_name(int sig, int code)
{
    static const char *const segv[] = {NULL, "SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR"};
    static const char *const bus[] = {NULL, "BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"};
    static const char *const fpe[] = {NULL, "FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND",
                                      "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB"};
    static const char *const ill[] = {NULL, "ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC",
                                      "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK"};
    if (code <= 0) return code == -6 ? "SI_TKILL" : code == 0 ? "SI_USER" : NULL;
    if (sig == SIGSEGV && code < 5) return segv[code];
    if (sig == SIGBUS && code < 6) return bus[code];
    if (sig == SIGFPE && code < 9) return fpe[code];
    if (sig == SIGILL && code < 9) return ill[code];
    return NULL;
}

/* a frame in the C library's or the C++ runtime's abort path */
static int runtime_frame(const ta_an *a, const ta_frame *f)
{
    if (f->module < 0 || f->module >= a->nmods || !a->mods[f->module].path) return 0;
    const char *p = strrchr(a->mods[f->module].path, '/');
    p = p ? p + 1 : a->mods[f->module].path;
    return !strncmp(p, "libc.so", 7) || !strncmp(p, "libstdc++", 9) || !strncmp(p, "libgcc_s", 8) ||
           !strncmp(p, "libc-", 5);
}

/* an uncaught C++ exception's stack: the frame where it was thrown (or left
 * a noexcept function) follows the C++ runtime's throw: after
 * __cxa_throw, __cxa_rethrow or __cxa_call_terminate; frames before it are
 * std::terminate's (the program's own terminate handler among them). -1 none */
static int throw_frame(ta_an *a, const ta_stack *s)
{
    static const char *const marks[] = {"__cxa_throw ", "__cxa_rethrow ", "__cxa_call_terminate ", "_Unwind_Resume "};
    for (int f = 0; f < s->nframes - 1 && f < 48; f++) {
        if (!runtime_frame(a, &s->frames[f])) continue;
        char *fr = ta_symbolize_frame(a, &s->frames[f], f == 0);
        int hit = 0;
        for (size_t m = 0; m < sizeof marks / sizeof marks[0] && !hit; m++)
            hit = !strncmp(fr, marks[m], strlen(marks[m]));
        free(fr);
        if (hit) return f + 1;
    }
    return -1;
}

/* "read_sample (job.c:47) <- load_batch (job.c:113) <- main (job.c:150)":
 * up to 3 frames; for an abort, from the first frame outside the runtime
 * (cxx: an uncaught C++ exception, from where it was thrown) */
static char *frames_text(ta_an *a, const ta_stack *s, int skip_runtime, int cxx)
{
    int f0 = 0;
    if (cxx && (f0 = throw_frame(a, s)) < 0) f0 = 0;
    if (skip_runtime)
        while (f0 < s->nframes - 1 && runtime_frame(a, &s->frames[f0])) f0++;
    char *out = xstrdup("");
    for (int f = f0; f < s->nframes && f < f0 + 3; f++) {
        char *fr = ta_symbolize_frame(a, &s->frames[f], f == 0);
        char *n = xasprintf("%s%s%s", out, f > f0 ? " \xe2\x86\x90 " : "", fr);
        free(fr); free(out);
        out = n;
    }
    return out;
}

/* "job.py:12 in read_sample <- job.py:20 in load_batch <- job.py:31 in main":
 * up to 3 frames from the first one not folded (the Python site) */
static char *py_frames_text(const ta_trace *t, const ta_pystack *s)
{
    char *out = xstrdup("");
    int f0 = s->site >= 0 && s->site < s->nframes ? s->site : 0;
    for (int f = f0; f < s->nframes && f < f0 + 3; f++) {
        const ta_pyframe *fr = &s->frames[f];
        if (fr->code < 0 || fr->code >= t->npycodes) break;
        const ta_pycode *c = &t->pycodes[fr->code];
        char line[16] = "?";
        if (fr->line > 0) snprintf(line, sizeof line, "%d", fr->line);
        char *n = xasprintf("%s%s%s:%s in %s", out, f > f0 ? " \xe2\x86\x90 " : "", c->base, line, c->name);
        free(out);
        out = n;
    }
    return out;
}

char *ta_crash_text(ta_an *a, const ta_trace *t)
{
    const ta_crash *c = t->crash;
    if (!c) return NULL;
    const char *sn = ta_signame(c->signo), *cn = code_name(c->signo, c->code);
    char sig[32], detail[96] = "";
    if (sn) snprintf(sig, sizeof sig, "%s", sn);
    else snprintf(sig, sizeof sig, "signal %d", c->signo);
    if (c->signo == SIGSEGV || c->signo == SIGBUS)
        snprintf(detail, sizeof detail, " (address 0x%llx, %s)", (unsigned long long)c->addr, cn ? cn : "si_code ?");
    else if ((c->signo == SIGFPE || c->signo == SIGILL) && cn)
        snprintf(detail, sizeof detail, " (%s)", cn);
    int cxx = c->signo == SIGABRT && c->message && !strncmp(c->message, "uncaught C++ exception ", 23);
    char *where = c->stack.nframes ? frames_text(a, &c->stack, c->signo == SIGABRT, cxx) : NULL;
    char *thread = c->tid != t->pid && c->thread[0] ? xasprintf(" on thread \"%s\"", c->thread)
                   : c->tid != t->pid ? xasprintf(" on thread %d", c->tid) : xstrdup("");
    char *msg = c->message ? xasprintf(": %s", c->message) : xstrdup("");
    char *py = NULL;
    if (c->pystack >= 0 && ta_py_valid(t, c->pystack)) {
        char *ps = py_frames_text(t, &t->pystacks[c->pystack]);
        py = xasprintf(", in Python at %s", ps);
        free(ps);
    }
    char *r = xasprintf("crashed with %s%s%s%s%s%s%s", sig, detail, where ? " in " : " (its stack is not known)",
                        where ? where : "", py ? py : "", thread, msg);
    free(where); free(thread); free(msg); free(py);
    return r;
}

/* "ValueError: bad batch 6 (raised at train.py:12 in load_batch)" */
static char *pyexc_what(const ta_pyexc *p)
{
    char *site;
    if (p->file) {
        const char *b = strrchr(p->file, '/');
        char line[16] = "?";
        if (p->line > 0) snprintf(line, sizeof line, "%d", p->line);
        site = xasprintf(" (raised at %s:%s%s%s)", b ? b + 1 : p->file, line, p->function ? " in " : "",
                         p->function ? p->function : "");
    } else {
        site = xstrdup("");
    }
    char *r = xasprintf("%s%s%s%s", p->type, p->message ? ": " : "", p->message ? p->message : "", site);
    free(site);
    return r;
}

char *ta_pyexc_text(ta_an *a, const ta_trace *t)
{
    const ta_pyexc *p = t->pyexc;
    if (!p) return NULL;
    char *w = pyexc_what(p), *r;
    if (t->end_state == END_EXITED) {
        r = xasprintf("exited with an uncaught Python exception %s", w);
    } else {
        char *e = ta_end_text(a, t);
        r = xasprintf("%s, after an uncaught Python exception %s", e, w);
        free(e);
    }
    free(w);
    return r;
}

const ta_error *ta_first_error(const ta_trace *t, int kind)
{
    for (int i = 0; i < t->nerrs; i++)
        if (t->errs[i].kind == kind) return &t->errs[i];
    return NULL;
}

char *ta_error_text(ta_an *a, const ta_trace *t, const ta_error *e)
{
    (void)t;
    char *site = e->stack.nframes ? ta_symbolize_frame(a, &e->stack.frames[0], 1) : NULL;
    char *r = xasprintf("%s %s (%d) returned by %s%s%s", e->kind == TRR_ERR_CUDA ? "CUDA error" : "NCCL error",
                        e->name[0] ? e->name : "?", e->code, e->api[0] ? e->api : "a call", site ? " at " : "",
                        site ? site : "");
    free(site);
    return r;
}

char *ta_errors_suffix(ta_an *a, const ta_trace *t)
{
    char *out = xstrdup("");
    for (int kind = TRR_ERR_CUDA; kind <= TRR_ERR_NCCL; kind++) {
        const ta_error *e = ta_first_error(t, kind);
        if (!e) continue;
        char *x = ta_error_text(a, t, e);
        char *n = xasprintf("%s, after %s", out, x);
        free(x); free(out);
        out = n;
    }
    return out;
}

/* "a remote error (ncclRemoteError)" */
static char *nccl_error_phrase(const ta_error *e)
{
    const char *what = e->code == 6 ? "a remote error" : e->code == 2 ? "a system error"
                       : e->code == 3 ? "an internal error" : e->code == 1 ? "a CUDA error" : "an error";
    return xasprintf("%s (%s)", what, e->name && e->name[0] ? e->name : "?");
}

char *ta_peer_errors_text(ta_an *a, const int *cul_t, int ncul)
{
    if (ncul <= 0) return xstrdup("");
    int died = 0;
    for (int k = 0; k < ncul; k++) {
        const ta_trace *t = a->tr[cul_t[k]];
        died |= t->crash || t->end_state == END_SIGNAL || t->end_state == END_EXITED || t->end_state == END_KILLED;
    }
    int *cr = xmalloc(sizeof(int) * (size_t)ncul);
    for (int k = 0; k < ncul; k++) cr[k] = a->tr[cul_t[k]]->rank;
    ta_ints_sort(cr, ncul);
    char *crt = ta_ranks_text(cr, ncul);
    free(cr);
    char *out = xstrdup("");
    int *ranks = xmalloc(sizeof(int) * (size_t)(a->ntr + 1));
    char *done = xcalloc((size_t)a->ntr + 1, 1);
    for (int i = 0; i < a->ntr; i++) {
        const ta_error *e = ta_first_error(a->tr[i], TRR_ERR_NCCL);
        int culprit = 0;
        for (int k = 0; k < ncul && !culprit; k++) culprit = cul_t[k] == i;
        if (!e || culprit || done[i]) continue;
        /* the other ranks with the same error: one sentence */
        int n = 0;
        for (int j = i; j < a->ntr; j++) {
            const ta_error *f = ta_first_error(a->tr[j], TRR_ERR_NCCL);
            int cj = 0;
            for (int k = 0; k < ncul && !cj; k++) cj = cul_t[k] == j;
            if (!f || cj || done[j] || f->code != e->code) continue;
            done[j] = 1;
            ranks[n++] = a->tr[j]->rank;
        }
        ta_ints_sort(ranks, n);
        char *rt = ta_ranks_text(ranks, n), *ph = nccl_error_phrase(e);
        char *site = e->stack.nframes ? ta_symbolize_frame(a, &e->stack.frames[0], 1) : NULL;
        char *x = xasprintf("%s; rank%s %s's NCCL reported %s %s rank%s %s%s: %s%s%s", out, n > 1 ? "s" : "", rt, ph,
                            died ? "after" : "while it waited for", ncul > 1 ? "s" : "", crt,
                            died ? " died" : "", e->api && e->api[0] ? e->api : "a call",
                            site ? " at " : "", site ? site : "");
        free(rt); free(ph); free(site); free(out);
        out = x;
    }
    free(ranks); free(done); free(crt);
    return out;
}

/* ---- --json ---- */

static void json_frames(ta_jw *w, ta_an *a, const ta_stack *s, const char *k)
{
    jw_key(w, k);
    jw_open(w, '[');
    for (int f = 0; f < s->nframes; f++) {
        char *fr = ta_symbolize_frame(a, &s->frames[f], f == 0);
        jw_sep(w);
        jw_string(w->o, fr);
        free(fr);
    }
    jw_close(w, ']');
}

void ta_crash_json_out(ta_jw *w, ta_an *a, const ta_trace *t)
{
    const ta_crash *c = t->crash;
    jw_key(w, "crash");
    if (!c) {
        fputs("null", w->o);
    } else {
        char hx[24];
        jw_open(w, '{');
        jw_int(w, "signal", c->signo);
        jw_str(w, "signal_name", ta_signame(c->signo));
        jw_int(w, "code", c->code);
        jw_str(w, "code_name", code_name(c->signo, c->code));
        snprintf(hx, sizeof hx, "0x%llx", (unsigned long long)c->addr);
        jw_str(w, "addr", c->has_addr ? hx : NULL);
        jw_intn(w, "sender", c->sender, c->sender <= 0);
        jw_int(w, "tid", c->tid);
        jw_str(w, "thread", c->thread[0] ? c->thread : NULL);
        jw_str(w, "message", c->message);
        json_frames(w, a, &c->stack, "frames");
        jw_pystack(w, t, c->pystack, "python_stack");
        char *tx = ta_crash_text(a, t);
        jw_str(w, "text", tx);
        free(tx);
        jw_close(w, '}');
    }
    const ta_pyexc *p = t->pyexc;
    jw_key(w, "python_exception");
    if (!p) {
        fputs("null", w->o);
    } else {
        jw_open(w, '{');
        jw_str(w, "type", p->type);
        jw_str(w, "message", p->message);
        jw_str(w, "file", p->file);
        jw_str(w, "function", p->function);
        jw_intn(w, "line", p->line, p->line < 0);
        jw_int(w, "tid", p->tid);
        char *tx = ta_pyexc_text(a, t);
        jw_str(w, "text", tx);
        free(tx);
        jw_close(w, '}');
    }
    jw_key(w, "errors");
    jw_open(w, '[');
    for (int i = 0; i < t->nerrs; i++) {
        const ta_error *e = &t->errs[i];
        char hx[24];
        jw_sep(w);
        jw_open(w, '{');
        jw_str(w, "kind", e->kind == TRR_ERR_CUDA ? "cuda" : "nccl");
        jw_int(w, "code", e->code);
        jw_str(w, "name", e->name && e->name[0] ? e->name : NULL);
        jw_str(w, "api", e->api && e->api[0] ? e->api : NULL);
        snprintf(hx, sizeof hx, "0x%llx", (unsigned long long)e->comm);
        jw_str(w, "comm", e->has_comm ? hx : NULL);
        jw_intn(w, "device", e->device, e->device < 0);
        jw_int(w, "tid", e->tid);
        char *site = e->stack.nframes ? ta_symbolize_frame(a, &e->stack.frames[0], 1) : NULL;
        jw_str(w, "site", site);
        free(site);
        json_frames(w, a, &e->stack, "frames");
        char *tx = ta_error_text(a, t, e);
        jw_str(w, "text", tx);
        free(tx);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}