/* Two analyses in one process give the same answer, and an analysis leaves
 * nothing behind (issue 34, item 3): tranalyze's own sources, its main
 * renamed ta_twice_main (as the fuzzer's harness does), run on each folder
 * named, in each output form, in three passes over all of them. Fails when
 *   - a folder's output in a later pass differs from its first (state left
 *     by an earlier analysis, of this folder or another, changed the answer);
 *   - the heap in use after pass 3 is more than after pass 2 (what one
 *     analysis of every folder left allocated, with nothing to free it):
 *     exactly, under AddressSanitizer (its count of bytes allocated); within
 *     SLACK bytes with the C library's allocator, whose thread caches hold
 *     freed blocks as in use.
 *
 *     analyze_twice "[OPTION...] DIR"...
 *
 * Each argument is one analysis: tranalyze's options and the folder, separated
 * by spaces (tests/analyzer/check_twice.py gives them; the build's paths hold none).
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TWICE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TWICE_ASAN 1
#endif
#endif
#ifdef TWICE_ASAN
#include <sanitizer/common_interface_defs.h>
/* the sanitizer runtime's (gcc ships no allocator_interface.h: declared here) */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

int ta_twice_main(int argc, char **argv);

#define PASSES 3
#define SLACK (64 * 1024)

static const char *const g_modes[] = {"--json", NULL, "--markdown"};
#define NMODES (int)(sizeof g_modes / sizeof g_modes[0])

static int g_out = -1, g_err = -1;   /* memfds behind standard output and standard error */

static FILE *g_say;   /* this program's own messages: the standard error it was given */

static void die(const char *what)
{
    fprintf(g_say ? g_say : stderr, "analyze_twice: %s: %s\n", what, strerror(errno));
    exit(2);
}

static size_t heap_in_use(void)
{
#ifdef TWICE_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
#endif
}

#define MAX_WORDS 16

/* what fd holds, malloc'd; emptied */
static char *take(int fd, size_t *len)
{
    off_t n = lseek(fd, 0, SEEK_END);
    if (n < 0) die("lseek");
    char *text = malloc((size_t)n + 1);
    if (!text) die("malloc");
    if (pread(fd, text, (size_t)n, 0) != n) die("pread");
    text[n] = 0;
    *len = (size_t)n;
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) die("truncate");
    return text;
}

/* tranalyze [MODE] SPEC's words: its standard output, then its standard error (malloc'd), and status */
static char *run(const char *mode, const char *spec, int *rc, size_t *len)
{
    char *argv[MAX_WORDS + 3], words[4096];
    int argc = 0;
    argv[argc++] = (char *)"tranalyze";
    if (mode) argv[argc++] = (char *)mode;
    snprintf(words, sizeof words, "%s", spec);
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w && argc < MAX_WORDS + 2; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    optind = 0;
    *rc = ta_twice_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    size_t no, ne;
    char *out = take(g_out, &no), *err = take(g_err, &ne);
    char *both = malloc(no + ne + 32);
    if (!both) die("malloc");
    memcpy(both, out, no);
    memcpy(both + no, "\n-- standard error --\n", 22);
    memcpy(both + no + 22, err, ne + 1);
    free(out);
    free(err);
    *len = no + ne;
    return both;
}

/* the first line where x and y differ, on stderr */
static void show_difference(FILE *say, const char *x, const char *y)
{
    int line = 1;
    const char *lx = x, *ly = y;
    for (; *x && *x == *y; x++, y++)
        if (*x == '\n') { line++; lx = x + 1; ly = y + 1; }
    fprintf(say, "  line %d, first:  %.*s\n", line, (int)strcspn(lx, "\n"), lx);
    fprintf(say, "  line %d, later:  %.*s\n", line, (int)strcspn(ly, "\n"), ly);
}

int main(int argc, char **argv)
{
    if (argc < 2) { fputs("usage: analyze_twice \"[OPTION...] DIR\"...\n", stderr); return 2; }
    int ndirs = argc - 1;
    g_out = memfd_create("tranalyze-stdout", 0);
    g_err = memfd_create("tranalyze-stderr", 0);
    if (g_out < 0 || g_err < 0) die("memfd_create");
    int keep = dup(STDOUT_FILENO);
    fflush(stdout);
    if (keep < 0 || dup2(g_out, STDOUT_FILENO) < 0 || dup2(g_err, STDERR_FILENO) < 0) die("dup2");
    FILE *say = fdopen(keep, "w");
    if (!say) die("fdopen");
    setvbuf(say, NULL, _IOLBF, 0);
    g_say = say;

    char **first = calloc((size_t)(ndirs * NMODES), sizeof *first);
    int *first_rc = calloc((size_t)(ndirs * NMODES), sizeof *first_rc);
    if (!first || !first_rc) die("calloc");
    int failed = 0;
    size_t heap[PASSES] = {0};
    for (int pass = 0; pass < PASSES; pass++) {
        for (int d = 0; d < ndirs; d++)
            for (int m = 0; m < NMODES; m++) {
                int rc;
                size_t len;
                char *text = run(g_modes[m], argv[1 + d], &rc, &len);
                int k = d * NMODES + m;
                if (pass == 0) {
                    first[k] = text;
                    first_rc[k] = rc;
                    if (!len) {
                        fprintf(say, "FAIL: %s %s: no output (status %d)\n", argv[1 + d], g_modes[m] ? g_modes[m] : "(text)", rc);
                        failed++;
                    }
                    continue;
                }
                if (rc != first_rc[k] || strcmp(text, first[k])) {
                    fprintf(say, "FAIL: %s %s: pass %d gave status %d and %zu bytes, pass 1 status %d and %zu bytes\n",
                            argv[1 + d], g_modes[m] ? g_modes[m] : "(text)", pass + 1, rc, strlen(text), first_rc[k],
                            strlen(first[k]));
                    show_difference(say, first[k], text);
                    failed++;
                }
                free(text);
            }
        heap[pass] = heap_in_use();
    }
    fprintf(say, "heap in use after each pass: %zu, %zu, %zu bytes (%s)\n", heap[0], heap[1], heap[2],
#ifdef TWICE_ASAN
            "AddressSanitizer's count, exact");
    size_t slack = 0;
#else
            "the C library's, within 64 KiB");
    size_t slack = SLACK;
#endif
    if (heap[2] > heap[1] + slack) {
        fprintf(say, "FAIL: one analysis of each folder in each form left %zu bytes allocated\n", heap[2] - heap[1]);
        failed++;
#ifdef TWICE_ASAN
        fflush(stderr);
        dup2(keep, STDERR_FILENO);     /* where the live heap's allocations come from */
        __sanitizer_print_memory_profile(100, 20);
#endif
    }
    for (int k = 0; k < ndirs * NMODES; k++) free(first[k]);
    free(first);
    free(first_rc);
    if (!failed)
        fprintf(say, "ok: %d folders x %d output forms, %d passes: the same answers, nothing left allocated\n", ndirs,
                NMODES, PASSES);
    fclose(say);
    return failed ? 1 : 0;
}
