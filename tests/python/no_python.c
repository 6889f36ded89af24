/* tr_python.c in a process without CPython: tr_py_init finds no
 * interpreter, captures give 0 frames, nothing is printed (a C or C++ NCCL
 * program must not see a line about Python). Exit status 0 when so. */
#include <stdarg.h>
#include <stdio.h>

#include "tr_core.h"
#include "tr_python.h"

static int g_warnings;

void tr_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "trshim: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    g_warnings++;
}

int main(void)
{
    tr_py_frame fr[8];
    int n = tr_py_capture(fr, 8);        /* initializes lazily */
    int n2 = tr_py_capture(fr, 8);
    char d[256];
    tr_py_describe(d, sizeof d);
    printf("frames %d %d, state %d, version \"%s\", %s, warnings %d\n", n, n2, tr_py_state(),
           tr_py_version_str(), d, g_warnings);
    int ok = n == 0 && n2 == 0 && tr_py_state() == TR_PY_NONE && tr_py_version() == 0 && g_warnings == 0 &&
             tr_py_code_info(0x1000, d, sizeof d, d, sizeof d, NULL) == -1;
    puts(ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}
