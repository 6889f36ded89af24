/* Python call sites (issue 7): which frames of a Python stack are the
 * user's, the text of a site, and whether two calls come from the same
 * site.
 *
 * A call issued from Python has the native stack of the interpreter loop
 * and the framework's C++ (the same for every Python-issued all-reduce), so
 * when a call has a Python stack, that stack names and compares its call
 * site. Frames of libraries are folded: files of the standard library or of
 * installed distributions, by where the shim recorded that they are
 * installed (pyroots.c; --fold, --no-fold). The site is the innermost frame
 * that is not folded. When every frame is folded (issue 18): the program's
 * entry point, the outermost frame that is not the standard library's
 * (runpy's, importlib's and threading's frames skipped), when it is a
 * module's body (`<module>`: the script or `python -m` module the user ran,
 * installed like a library) -- and from it inward, the innermost frame of
 * the same package before the stack enters another one (the line of the
 * user's installed code that called into torch); otherwise (a library's
 * own thread) the innermost frame. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ta_site.h"

int ta_py_valid(const ta_trace *t, int p)
{
    return t && p >= 0 && p < t->npystacks && t->pystacks[p].nframes > 0;
}

/* the site of a stack whose every frame is folded (above) */
static int entry_site(const ta_trace *t, const ta_pystack *s)
{
#define CODE(k) (&t->pycodes[s->frames[k].code])
    int k = s->nframes - 1;
    while (k >= 0 && CODE(k)->folded == TA_PY_STDLIB) k--;
    if (k < 0 || strcmp(CODE(k)->name, "<module>")) return 0;
    const char *pf = CODE(k)->file;
    size_t pn = ta_py_package_len(t, pf);
    int site = k;
    for (int j = k - 1; j >= 0; j--) {
        const ta_pycode *c = CODE(j);
        if (c->folded == TA_PY_STDLIB) continue;
        if (ta_py_package_len(t, c->file) != pn || strncmp(c->file, pf, pn)) break;
        site = j;
    }
    return site;
#undef CODE
}

void ta_py_prepare(ta_trace *t)
{
    for (int i = 0; i < t->npycodes; i++) t->pycodes[i].folded = ta_py_class(t, t->pycodes[i].file);
    for (int i = 0; i < t->npystacks; i++) {
        ta_pystack *s = &t->pystacks[i];
        s->site = 0;
        s->nuser = 0;
        for (int k = s->nframes - 1; k >= 0; k--)
            if (!t->pycodes[s->frames[k].code].folded) { s->nuser++; s->site = k; }
        if (!s->nuser && s->nframes) s->site = entry_site(t, s);
        uint64_t h = (uint64_t)s->nuser;
        for (int k = 0; k < s->nframes; k++) {
            const ta_pycode *c = &t->pycodes[s->frames[k].code];
            if (s->nuser && c->folded) continue;
            /* interned strings: equal text, equal pointer (in every trace) */
            h = ta_hash64(h, (uint64_t)(uintptr_t)c->base);
            h = ta_hash64(h, (uint64_t)(uintptr_t)c->name);
            h = ta_hash64(h, (uint64_t)(uint32_t)s->frames[k].line);
        }
        s->key = h;
    }
}

/* the frames compared are the same: file name, function and line of each
 * frame not folded (every frame when all are folded) */
static int pystack_equal(const ta_trace *t1, const ta_pystack *x, const ta_trace *t2, const ta_pystack *y)
{
    if (x->key != y->key || x->nuser != y->nuser) return 0;
    int i = 0, j = 0;
    for (;;) {
        while (i < x->nframes && x->nuser && t1->pycodes[x->frames[i].code].folded) i++;
        while (j < y->nframes && y->nuser && t2->pycodes[y->frames[j].code].folded) j++;
        if (i >= x->nframes || j >= y->nframes) return i >= x->nframes && j >= y->nframes;
        const ta_pycode *c = &t1->pycodes[x->frames[i].code], *d = &t2->pycodes[y->frames[j].code];
        if (c->base != d->base || c->name != d->name || x->frames[i].line != y->frames[j].line) return 0;
        i++;
        j++;
    }
}

/* Native stacks: the same when their innermost frames are the same offset
 * of the same module; across different modules (another build) the symbol
 * names decide; without either, they are taken as the same. Python stacks,
 * when both calls have one, decide instead. */
int ta_site_equal(const ta_an *a, const ta_trace *t1, int s1, int p1, const ta_trace *t2, int s2, int p2)
{
    (void)a;
    if (ta_py_valid(t1, p1) && ta_py_valid(t2, p2))
        return t1 == t2 && p1 == p2 ? 1 : pystack_equal(t1, &t1->pystacks[p1], t2, &t2->pystacks[p2]);
    if (s1 < 0 || s2 < 0 || s1 >= t1->nstacks || s2 >= t2->nstacks) return 1;
    const ta_stack *x = &t1->stacks[s1], *y = &t2->stacks[s2];
    if (!x->nframes || !y->nframes) return 1;
    const ta_frame *f = &x->frames[0], *g = &y->frames[0];
    if (f->module >= 0 && f->module == g->module) return f->offset == g->offset;
    if (f->symbol && g->symbol) return f->symbol == g->symbol;   /* interned */
    return 1;
}

/* "train.py:212 in train_step" */
static char *frame_text(const ta_trace *t, const ta_pyframe *fr)
{
    const ta_pycode *c = &t->pycodes[fr->code];
    if (fr->line > 0) return xasprintf("%s:%d in %s", c->base, fr->line, c->name);
    return xasprintf("%s:? in %s", c->base, c->name);
}

char *ta_site_text(ta_an *a, const ta_trace *t, int stack, int pystack)
{
    if (!ta_py_valid(t, pystack)) return ta_native_site_text(a, t, stack);
    const ta_pystack *s = &t->pystacks[pystack];
    if (!a->full_stacks) return frame_text(t, &s->frames[s->site]);
    size_t cap = 256, len = 0;
    char *o = xmalloc(cap);
    o[0] = 0;
    for (int k = 0; k <= s->nframes; k++) {
        char *part;
        if (k < s->nframes) {
            char *f = frame_text(t, &s->frames[k]);
            part = xasprintf("%s%s", k ? " <- " : "", f);
            free(f);
        } else {
            if (stack < 0 || stack >= t->nstacks || !t->stacks[stack].nframes) break;
            char *n = ta_native_site_text(a, t, stack);
            part = xasprintf("; native: %s", n);
            free(n);
        }
        size_t pl = strlen(part);
        if (len + pl + 1 > cap) { cap = (len + pl + 1) * 2; o = xrealloc(o, cap); }
        memcpy(o + len, part, pl + 1);
        len += pl;
        free(part);
    }
    return o;
}

const char *ta_site_function(ta_an *a, const ta_trace *t, int stack, int pystack)
{
    if (!ta_py_valid(t, pystack)) return ta_native_site_function(a, t, stack);
    const ta_pystack *s = &t->pystacks[pystack];
    return t->pycodes[s->frames[s->site].code].name;
}

/* length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid */
static int utf8_seq(const unsigned char *p, size_t n)
{
    if (p[0] < 0x80) return 1;
    int k = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (!k || (size_t)k > n) return 0;
    for (int i = 1; i < k; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (k == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;
    if (k == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
    return k;
}

/* s[0..n) up to its first NUL as a string safe for any output, interned:
 * control characters and bytes that are not valid UTF-8 become '?', and
 * it is cut (on a character boundary) at TA_PY_STR_MAX bytes with "..." */
#define TA_PY_STR_MAX 4096
const char *ta_py_intern(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = 0;
    while (len < n && p[len]) len++;
    char *o = xmalloc((len < TA_PY_STR_MAX ? len : TA_PY_STR_MAX) + 4);
    size_t w = 0;
    for (size_t i = 0; i < len;) {
        int k = utf8_seq(p + i, len - i);
        if (w + (k ? (size_t)k : 1) > TA_PY_STR_MAX) { memcpy(o + w, "...", 3); w += 3; break; }
        if (!k || p[i] < 0x20 || p[i] == 0x7f) {
            o[w++] = '?';
            i++;
            continue;
        }
        memcpy(o + w, p + i, (size_t)k);
        w += (size_t)k;
        i += (size_t)k;
    }
    o[w] = 0;
    const char *r = ta_intern(o);
    free(o);
    return r;
}

void ta_py_code_set(ta_pycode *c, const char *file, size_t flen, const char *name, size_t nlen, int firstline)
{
    c->file = ta_py_intern(file, flen);
    if (!c->file[0]) c->file = ta_intern("?");
    const char *b = strrchr(c->file, '/');
    c->base = b && b[1] ? ta_intern(b + 1) : c->file;
    c->name = ta_py_intern(name, nlen);
    if (!c->name[0]) c->name = ta_intern("?");
    c->firstline = firstline;
    c->folded = 0;
}

void ta_py_free(ta_trace *t)
{
    ta_pyroots_free(&t->pyroots);
    for (int i = 0; i < t->npystacks; i++) free(t->pystacks[i].frames);
    free(t->pystacks);
    free(t->pycodes);
    t->pystacks = NULL;
    t->pycodes = NULL;
    t->npystacks = t->npycodes = 0;
}
