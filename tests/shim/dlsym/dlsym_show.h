/* What the dlsym test programs print about a function pointer: the file
 * name of the object it lies in and the symbol it is ("libtrshim.so
 * cudaMalloc"), so test_dlsym.py can tell the shim's wrapper from the real
 * function and from an unrelated one. */
#ifndef DLSYM_SHOW_H
#define DLSYM_SHOW_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* "<module> <symbol>", "NULL", or "<module> <symbol>+0x.." when p is inside
 * a function rather than at its start. */
static inline const char *dlsym_where(const void *p, char *buf, size_t size)
{
    Dl_info info;
    if (!p) return "NULL";
    if (!dladdr(p, &info) || !info.dli_fname) {
        snprintf(buf, size, "? %p", p);
        return buf;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    const char *mod = slash ? slash + 1 : info.dli_fname;
    if (!info.dli_sname)
        snprintf(buf, size, "%s ?", mod);
    else if (info.dli_saddr == p)
        snprintf(buf, size, "%s %s", mod, info.dli_sname);
    else
        snprintf(buf, size, "%s %s+0x%lx", mod, info.dli_sname,
                 (unsigned long)((const char *)p - (const char *)info.dli_saddr));
    return buf;
}

/* One line: "<tag> <label> -> <where>". */
static inline void dlsym_show(const char *tag, const char *label, const void *p)
{
    char buf[512];
    printf("%s %s -> %s\n", tag, label, dlsym_where(p, buf, sizeof buf));
}

#endif
