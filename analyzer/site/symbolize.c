/* Call sites: module path + build id + offset -> "function (file:line)".
 *
 * The module file is opened with elfutils (libdwfl, offline reporting), on
 * this machine: the path from the trace, else a file of the same name in a
 * --modules folder. Its build id must be the one in the trace, else the
 * module counts as different. Every frame of a trace is a return address
 * (the shim records the application's call into NCCL and its callers), so
 * 1 is subtracted before the line lookup. Without a usable module the
 * symbol the shim recorded is printed with the module and offset, and a note
 * says which module is missing or different. */
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ta_site.h"

enum { MS_UNTRIED, MS_OK, MS_UNVERIFIED, MS_MISSING, MS_DIFFERENT, MS_BAD };

typedef struct {
    int state;
    int used;
    Dwfl *dwfl;
    Dwfl_Module *mod;
    GElf_Addr bias;
    char *found_path;
    char found_id[130];
} modst;

static modst *ms;
static int nms;

static const Dwfl_Callbacks offline_cb = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int try_open(modst *m, const char *path, const char *want_id)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    Dwfl *d = dwfl_begin(&offline_cb);
    if (!d) return 0;
    dwfl_report_begin(d);
    Dwfl_Module *mod = dwfl_report_offline(d, base_name(path), path, -1);
    dwfl_report_end(d, NULL, NULL);
    if (!mod) { dwfl_end(d); return 0; }
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    char id[130] = "";
    for (int i = 0; i < len && i < 64; i++) snprintf(id + 2 * i, 3, "%02x", bits[i]);
    if (want_id && *want_id && strcasecmp(id, want_id) != 0) {
        if (!m->found_path) {
            m->found_path = xstrdup(path);
            snprintf(m->found_id, sizeof m->found_id, "%s", len > 0 ? id : "none");
        }
        dwfl_end(d);
        return -1;
    }
    free(m->found_path);
    m->found_path = xstrdup(path);
    snprintf(m->found_id, sizeof m->found_id, "%s", id);
    m->dwfl = d;
    m->mod = mod;
    Elf *elf = dwfl_module_getelf(mod, &m->bias);
    if (!elf) { dwfl_end(d); m->dwfl = NULL; return 0; }
    return 1;
}

static modst *module(ta_an *a, int gid)
{
    if (gid < 0 || gid >= a->nmods) return NULL;
    if (nms < a->nmods) {
        ms = xrealloc(ms, sizeof *ms * (size_t)a->nmods);
        memset(ms + nms, 0, sizeof *ms * (size_t)(a->nmods - nms));
        nms = a->nmods;
    }
    modst *m = &ms[gid];
    m->used = 1;
    if (m->state != MS_UNTRIED) return m;
    const ta_module *tm = &a->mods[gid];
    int r = try_open(m, tm->path, tm->build_id);
    for (int i = 0; r != 1 && i < a->nmodule_dirs; i++) {
        char *p = xasprintf("%s/%s", a->module_dirs[i], base_name(tm->path));
        int r2 = try_open(m, p, tm->build_id);
        if (r2 != 0) r = r2;
        free(p);
    }
    if (r == 1) m->state = tm->build_id ? MS_OK : MS_UNVERIFIED;
    else if (r < 0) m->state = MS_DIFFERENT;
    else m->state = MS_MISSING;
    return m;
}

/* innermost function name at addr from DWARF scopes (inlined functions
 * included), else from the symbol table */
static const char *func_name(modst *m, Dwarf_Addr addr)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(m->mod, addr, &bias);
    if (cu) {
        Dwarf_Die *scopes = NULL;
        int n = dwarf_getscopes(cu, addr - bias, &scopes);
        for (int i = 0; i < n; i++) {
            int tag = dwarf_tag(&scopes[i]);
            if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
                const char *nm = dwarf_diename(&scopes[i]);
                if (!nm) {
                    Dwarf_Attribute at;
                    Dwarf_Die origin;
                    if (dwarf_attr_integrate(&scopes[i], DW_AT_abstract_origin, &at) &&
                        dwarf_formref_die(&at, &origin))
                        nm = dwarf_diename(&origin);
                }
                if (nm) { free(scopes); return nm; }
            }
        }
        free(scopes);
    }
    return dwfl_module_addrname(m->mod, addr);
}

char *ta_symbolize_frame(ta_an *a, const ta_frame *fr, int innermost)
{
    (void)innermost;
    modst *m = module(a, fr->module);
    const char *modname = fr->module >= 0 ? base_name(a->mods[fr->module].path) : "?";
    if (m && (m->state == MS_OK || m->state == MS_UNVERIFIED)) {
        Dwarf_Addr addr = fr->offset + m->bias;
        Dwarf_Addr look = addr > 0 ? addr - 1 : addr;    /* return address -> the call */
        const char *fn = func_name(m, look);
        Dwfl_Line *l = dwfl_module_getsrc(m->mod, look);
        int line = 0;
        const char *file = l ? dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
        if (!fn) fn = fr->symbol;
        if (file && line > 0) return xasprintf("%s (%s:%d)", fn ? fn : "??", base_name(file), line);
        return xasprintf("%s (%s+0x%llx)", fn ? fn : "??", modname, (unsigned long long)fr->offset);
    }
    if (fr->symbol) return xasprintf("%s (%s+0x%llx)", fr->symbol, modname, (unsigned long long)fr->offset);
    return xasprintf("?? (%s+0x%llx)", modname, (unsigned long long)fr->offset);
}

char *ta_native_site_text(ta_an *a, const ta_trace *t, int stack)
{
    if (stack < 0 || stack >= t->nstacks || !t->stacks[stack].nframes) return xstrdup("an unknown call site");
    return ta_symbolize_frame(a, &t->stacks[stack].frames[0], 1);
}

/* the function name alone (for JSON "function") */
const char *ta_native_site_function(ta_an *a, const ta_trace *t, int stack)
{
    if (stack < 0 || stack >= t->nstacks || !t->stacks[stack].nframes) return NULL;
    const ta_frame *fr = &t->stacks[stack].frames[0];
    modst *m = module(a, fr->module);
    if (m && (m->state == MS_OK || m->state == MS_UNVERIFIED)) {
        Dwarf_Addr addr = fr->offset + m->bias;
        const char *fn = func_name(m, addr ? addr - 1 : addr);
        if (fn) return ta_intern(fn);
    }
    return fr->symbol;
}

void ta_module_notes(ta_an *a)
{
    for (int i = 0; i < nms; i++) {
        modst *m = &ms[i];
        if (!m->used) continue;
        const ta_module *tm = &a->mods[i];
        if (m->state == MS_MISSING)
            ta_note_add(a, NULL, 0, "module %s (build id %s) is missing on this machine: call sites show the symbol "
                        "names the shim recorded (none for calls read from a ring file), without file:line (copy the "
                        "module here or pass --modules DIR)",
                        tm->path, tm->build_id ? tm->build_id : "unknown");
        else if (m->state == MS_DIFFERENT)
            ta_note_add(a, NULL, 0, "module %s differs from the one that ran (build id %s here, %s in the trace): "
                        "call sites show the recorded symbol names only (none for calls read from a ring file)",
                        m->found_path, m->found_id, tm->build_id);
        else if (m->state == MS_UNVERIFIED)
            ta_note_add(a, NULL, 0, "module %s: the trace has no build id, so the file used for file:line could not "
                        "be checked", tm->path);
    }
}

void ta_symbolize_done(void)
{
    for (int i = 0; i < nms; i++) {
        if (ms[i].dwfl) dwfl_end(ms[i].dwfl);
        free(ms[i].found_path);
    }
    free(ms);
    ms = NULL;
    nms = 0;
}
