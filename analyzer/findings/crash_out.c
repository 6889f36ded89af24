/* The rank that died, said (issue 21; crash.c reads it): the crash, the
 * uncaught Python exception and the first CUDA / NCCL errors of a rank as
 * the root cause's text and --json write them. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "site/ta_site.h"
#include "ta_crash_out.h"
#include "ta_jw.h"
#include "trshim/ring_format.h"

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