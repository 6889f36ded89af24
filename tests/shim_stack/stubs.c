/* What tr_stack.c needs from tr_core.c, for the stack tests: settings
 * (TRSHIM_STACK_DEPTH as the shim reads it) and warnings; and from
 * tr_ring.c: nothing (no ring file in these tests). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tr_core.h"
#include "tr_ring.h"

const tr_settings *tr_cfg(void)
{
    static tr_settings s;
    static int done;
    if (!done) {
        const char *v = getenv("TRSHIM_STACK_DEPTH");
        s.enabled = 1;
        s.stack_depth = v && *v ? atoi(v) : 64;
        done = 1;
    }
    return &s;
}

void tr_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("trshim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void tr_ring_add_stack(uint32_t idx, const uintptr_t *ip, uint32_t n)
{
    (void)idx;
    (void)ip;
    (void)n;
}
