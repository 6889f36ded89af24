/* Call sites without elfutils (tranalyze built with -Dlibdw=disabled, as in
 * the wheel): the symbol the shim recorded for each frame, with the module
 * and offset, and one note saying that file:line needs a tranalyze built
 * with libdw. Same interface as symbolize.c (ta_site.h). */
#include <string.h>

#include "ta_site.h"

static int used;

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

char *ta_symbolize_frame(ta_an *a, const ta_frame *fr, int innermost)
{
    (void)innermost;
    used = 1;
    const char *modname = fr->module >= 0 && fr->module < a->nmods ? base_name(a->mods[fr->module].path) : "?";
    return xasprintf("%s (%s+0x%llx)", fr->symbol ? fr->symbol : "??", modname, (unsigned long long)fr->offset);
}

char *ta_native_site_text(ta_an *a, const ta_trace *t, int stack)
{
    if (stack < 0 || stack >= t->nstacks || !t->stacks[stack].nframes) return xstrdup("an unknown call site");
    return ta_symbolize_frame(a, &t->stacks[stack].frames[0], 1);
}

const char *ta_native_site_function(ta_an *a, const ta_trace *t, int stack)
{
    (void)a;
    if (stack < 0 || stack >= t->nstacks || !t->stacks[stack].nframes) return NULL;
    return t->stacks[stack].frames[0].symbol;
}

void ta_module_notes(ta_an *a)
{
    if (used)
        ta_note_add(a, NULL, 0, "this tranalyze was built without elfutils (libdw): call sites show the symbol names "
                    "the shim recorded (none for calls read from a ring file), without file:line; a tranalyze built "
                    "with libdw (meson install, or the build folder) gives file:line");
}

void ta_symbolize_done(void)
{
    used = 0;
}
