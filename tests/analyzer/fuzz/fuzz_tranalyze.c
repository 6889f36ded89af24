/* libFuzzer harness of tranalyze (issue 12): the whole program, in process,
 * on the trace files of one input. Built only with clang and
 * -fsanitize=fuzzer (tests/analyzer/fuzz/meson.build) together with
 * ASan+UBSan, from tranalyze's own sources; analyzer/main.c comes in with
 * its main renamed ta_fuzz_main.
 *
 * An input is one or more files: the bytes up to the first separator line
 * are the first file, then each separator line
 *     "\n@@ NAME\n"
 * starts another, named NAME (the corpus' seeds are whole jobs: every rank's
 * JSON trace, or ring files among them, tests/analyzer/fuzz/make_corpus.py).
 * A name is used when it is one tranalyze reads (trshim.*.json,
 * trshim.*.ring, trshim.*.write-failed; letters, digits, '.', '_', '-');
 * otherwise, and for the first file, the file is named after what it holds
 * (a ring's magic: .ring, else .json). They are written to a private folder
 * and tranalyze runs on it as `tranalyze --json DIR` (or without --json, or
 * --markdown, by the input's length), its standard output captured.
 *
 * A failure is anything the sanitizers report, a crash, a hang (libFuzzer's
 * -timeout), tranalyze calling exit(), an exit status other than 0, 1 or 2,
 * or --json output that is not one JSON document (status 0 or 1, or 2 with
 * any output): the harness aborts then, and libFuzzer keeps the input. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

int ta_fuzz_main(int argc, char **argv);

#define MAX_FILES 16
#define SEP "\n@@ "

static char g_dir[4096];
static int g_out = -1;        /* memfd behind stdout */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what)
{
    fprintf(stderr, "fuzz_tranalyze: %s: %s\n", what, strerror(errno));
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/trshim-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) die("mkdtemp");
    g_out = memfd_create("tranalyze-stdout", 0);
    if (g_out < 0) die("memfd_create");
    fflush(stdout);
    if (dup2(g_out, STDOUT_FILENO) < 0) die("dup2");
    return 0;
}

/* the folder emptied (flat: the harness writes no subfolder) */
static void clear_dir(void)
{
    DIR *d = opendir(g_dir);
    if (!d) die("opendir");
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlinkat(dirfd(d), e->d_name, 0) != 0)
            die("unlink");
    closedir(d);
}

static int has_suffix(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

/* NAME (n bytes) when tranalyze would read a file of that name, else NULL */
static int name_ok(const char *s, size_t n)
{
    if (n < 8 || n > 200 || memcmp(s, "trshim.", 7) != 0) return 0;
    if (!has_suffix(s, n, ".json") && !has_suffix(s, n, ".ring") && !has_suffix(s, n, ".write-failed")) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

static void write_file(int k, const char *name, size_t nlen, const uint8_t *p, size_t n)
{
    char path[4400];
    if (name && name_ok(name, nlen)) {
        snprintf(path, sizeof path, "%s/%.*s", g_dir, (int)nlen, name);
        if (access(path, F_OK) == 0) name = NULL;    /* the same name twice: the second renamed */
    } else {
        name = NULL;
    }
    if (!name) {
        int ring = n >= 8 && memcmp(p, "TRSHRING", 8) == 0;
        snprintf(path, sizeof path, "%s/trshim.fuzz.r%d.node0.%d.%s", g_dir, k, 40000 + k, ring ? "ring" : "json");
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die("open");
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("write");
        done += (size_t)w;
    }
    close(fd);
}

/* the input's files into g_dir */
static void split(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    const char *name = NULL;
    size_t nlen = 0;
    for (int k = 0; k < MAX_FILES; k++) {
        const uint8_t *next = k + 1 < MAX_FILES ? memmem(p, (size_t)(end - p), SEP, strlen(SEP)) : NULL;
        const uint8_t *stop = next ? next : end;
        if (k > 0 || stop > p) write_file(k, name, nlen, p, (size_t)(stop - p));
        if (!next) return;
        /* the separator line: "\n@@ NAME\n" */
        const uint8_t *nm = next + strlen(SEP);
        const uint8_t *eol = memchr(nm, '\n', (size_t)(end - nm));
        if (!eol) return;
        name = (const char *)nm;
        nlen = (size_t)(eol - nm);
        p = eol + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clear_dir();
    split(data, size);
    static const char *const modes[3] = {"--json", NULL, "--markdown"};
    const char *mode = modes[size % 3];
    char *argv[4];
    int argc = 0;
    argv[argc++] = (char *)"tranalyze";
    if (mode) argv[argc++] = (char *)mode;
    argv[argc++] = g_dir;
    argv[argc] = NULL;

    fflush(stdout);
    if (ftruncate(g_out, 0) != 0 || lseek(g_out, 0, SEEK_SET) != 0) die("truncate stdout");
    optind = 0;     /* getopt_long from scratch */
    int rc = ta_fuzz_main(argc, argv);
    fflush(stdout);
    if (rc < 0 || rc > 2) {
        fprintf(stderr, "fuzz_tranalyze: tranalyze returned %d (want 0, 1 or 2)\n", rc);
        abort();
    }
    if (mode && !strcmp(mode, "--json")) {
        off_t n = lseek(g_out, 0, SEEK_END);
        if (n < 0) die("lseek");
        if (rc != 2 || n > 0) {
            char *text = malloc((size_t)n + 1);
            if (!text) die("malloc");
            if (pread(g_out, text, (size_t)n, 0) != n) die("pread");
            text[n] = 0;
            cJSON *doc = cJSON_ParseWithOpts(text, NULL, 1);
            if (!doc) {
                fprintf(stderr, "fuzz_tranalyze: status %d, --json output is not one JSON document (%lld bytes):\n%.2000s\n",
                        rc, (long long)n, text);
                abort();
            }
            cJSON_Delete(doc);
            free(text);
        }
    }
    return 0;
}
