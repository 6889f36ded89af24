/* Python's install folders ("roots"), recorded once per process (issue 18).
 * Interface in tr_pyroots.h; the trace's python.roots and the ring's
 * TRR_BLOB_PYROOTS are described in docs/trace-format.md.
 *
 * tranalyze folds a Python frame whose file is a library's. Which files
 * are a library's is decided by where they were installed, which only the
 * process knows: its interpreter's standard library, its site folders
 * (installed distributions) and the source trees of editable installs.
 * They are found here without calling the interpreter (it may be stuck,
 * hold its GIL, or be the thread we run on), from the file system, the
 * way CPython's getpath and site modules find them:
 *
 *   stdlib    from the module holding _PyRuntime (libpython3.X.so or the
 *             executable), symlinks resolved: the nearest folder above it
 *             (4 levels at most) holding lib/python3.X/os.py (or lib64/) is
 *             the base prefix and lib/python3.X its standard library (also
 *             lib/python3X.zip when present); a source build's Lib/ folder
 *             likewise.
 *   site      under the base prefix and under the virtual environment's
 *             prefix: lib/python3.X/site-packages (lib64/ too),
 *             lib/python3.X/dist-packages, lib/python3/dist-packages and
 *             local/lib/python3.X/dist-packages (Debian), those that
 *             exist. The virtual environment is the folder holding
 *             pyvenv.cfg next to the interpreter as started (argv[0] from
 *             /proc/self/cmdline, looked up in PATH when it has no slash;
 *             not resolved) or one level above it. The user site
 *             ($PYTHONUSERBASE or ~/.local, lib/python3.X/site-packages).
 *             A PYTHONPATH entry is user code unless it holds *.dist-info
 *             folders (pip install --target): then a site folder.
 *   editable  each site folder's .pth files name folders added to sys.path:
 *             a line that is neither a comment nor an import, naming an
 *             existing folder, is an editable install's source tree when the
 *             .pth is pip's/setuptools' (__editable__*.pth, easy-install.pth)
 *             or the folder (or its parent) is a source checkout
 *             (pyproject.toml, setup.py, setup.cfg, .git); otherwise a
 *             .pth-installed library tree (site). setuptools' editable
 *             finders (__editable___*_finder.py) map packages to source
 *             folders: each folder of their MAPPING is editable.
 *
 * Each folder is kept as found and, when it differs, as its real path
 * (co_filename keeps the path sys.path gave). Bounded: 64 folders of at
 * most 1023 bytes, 4096 entries read per site folder, 64 .pth/finder files
 * per site folder, 16 KiB read of each file. A folder whose path the
 * redaction rules would change is left out. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_core.h"
#include "tr_python.h"
#include "tr_pyroots.h"
#include "tr_ring.h"
#include "trshim/ring_format.h"

#define ROOTS_MAX 64
#define ROOT_CAP 1024
#define DIR_ENTRIES_MAX 4096
#define FILES_MAX 64
#define FILE_BYTES_MAX 16384

typedef struct {
    char kind;                  /* 's' stdlib, 'p' site, 'e' editable */
    char path[ROOT_CAP];
} root;

static root g_roots[ROOTS_MAX];
static int g_n;
static atomic_int g_ready;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_minor;

static int exists(const char *p, int want_dir)
{
    struct stat st;
    if (stat(p, &st) != 0) return 0;
    return want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
}

/* out = a "/" b; 0 when it does not fit */
static int join(char *out, const char *a, const char *b)
{
    int n = snprintf(out, ROOT_CAP, "%s/%s", a, b);
    return n > 0 && n < ROOT_CAP;
}

/* join with b's "%d" (at most one, from this file's constants) the minor version */
static int join_v(char *out, const char *a, const char *b)
{
    char tail[128];
    snprintf(tail, sizeof tail, b, g_minor);
    return join(out, a, tail);
}

static void parent(char *p)
{
    char *s = strrchr(p, '/');
    if (s && s != p) *s = 0;
    else if (s) p[1] = 0;
}

static void put(char kind, const char *p)
{
    for (int i = 0; i < g_n; i++)
        if (g_roots[i].kind == kind && !strcmp(g_roots[i].path, p)) return;
    if (g_n == ROOTS_MAX) return;
    char *r = tr_redact_value(p);       /* a path the rules would change, or not UTF-8: left out */
    int same = r && !strcmp(r, p) && !strcmp(tr_utf8_clean(r), p);
    free(r);
    if (!same) return;
    g_roots[g_n].kind = kind;
    snprintf(g_roots[g_n].path, ROOT_CAP, "%s", p);
    g_n++;
}

/* an existing absolute folder (or, for the standard library, a zip file),
 * as given and as its real path */
static void add(char kind, const char *path)
{
    char p[ROOT_CAP], real[PATH_MAX];
    size_t n = strlen(path);
    if (path[0] != '/' || n >= ROOT_CAP) return;
    memcpy(p, path, n + 1);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    if (n < 2 || !(exists(p, 1) || (kind == 's' && exists(p, 0)))) return;
    put(kind, p);
    if (realpath(p, real) && strlen(real) < ROOT_CAP && strcmp(real, p) && strcmp(real, "/")) put(kind, real);
}

static void prefix_sites(const char *prefix)
{
    static const char *const sub[] = {"lib/python3.%d/site-packages", "lib64/python3.%d/site-packages",
                                      "lib/python3.%d/dist-packages", "lib/python3/dist-packages",
                                      "local/lib/python3.%d/dist-packages"};
    char p[ROOT_CAP];
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++)
        if (join_v(p, prefix, sub[i])) add('p', p);
}

/* the base prefix: the nearest folder above the interpreter's module with
 * its standard library's landmark */
static void base_prefix(const char *module)
{
    char d[ROOT_CAP], real[PATH_MAX], p[ROOT_CAP];
    const char *m = realpath(module, real) ? real : module;
    if (m[0] != '/' || strlen(m) >= ROOT_CAP) return;
    snprintf(d, sizeof d, "%s", m);
    for (int up = 0; up < 5 && strcmp(d, "/"); up++) {
        parent(d);
        if (join(p, d, "Lib/os.py") && exists(p, 0)) {      /* a source build */
            parent(p);
            add('s', p);
            return;
        }
        for (int l = 0; l < 2; l++) {
            if (!join_v(p, d, l ? "lib64/python3.%d/os.py" : "lib/python3.%d/os.py") || !exists(p, 0)) continue;
            parent(p);
            add('s', p);
            if (join_v(p, d, "lib/python3%d.zip")) add('s', p);
            prefix_sites(d);
            return;
        }
    }
}

/* The interpreter as started (argv[0], searched in PATH when it has no
 * slash), its folder not resolved: the virtual environment holding it. */
static void venv_prefix(void)
{
    char arg0[ROOT_CAP], exe[ROOT_CAP], p[ROOT_CAP];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t k = read(fd, arg0, sizeof arg0 - 1);
    close(fd);
    if (k <= 0) return;
    arg0[k] = 0;
    exe[0] = 0;
    if (strchr(arg0, '/')) {
        char cwd[ROOT_CAP];
        if (arg0[0] == '/') snprintf(exe, sizeof exe, "%s", arg0);
        else if (getcwd(cwd, sizeof cwd) && !join(exe, cwd, arg0)) exe[0] = 0;
    } else {
        const char *path = getenv("PATH");
        for (const char *s = path; s && *s && !exe[0];) {
            size_t n = strcspn(s, ":");
            char dir[ROOT_CAP];
            if (n && n < sizeof dir) {
                memcpy(dir, s, n);
                dir[n] = 0;
                if (dir[0] == '/' && join(p, dir, arg0) && access(p, X_OK) == 0) snprintf(exe, sizeof exe, "%s", p);
            }
            s += n + (s[n] == ':');
        }
    }
    if (!exe[0]) return;
    parent(exe);                          /* .../venv/bin */
    for (int up = 0; up < 2; up++) {
        if (join(p, exe, "pyvenv.cfg") && exists(p, 0)) {
            prefix_sites(exe);
            return;
        }
        parent(exe);
    }
}

/* at most FILE_BYTES_MAX - 1 bytes of a regular file, NUL-terminated; -1 */
static ssize_t read_small(const char *path, char *buf)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    ssize_t got = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        got = 0;
        for (ssize_t r; got < FILE_BYTES_MAX - 1 && (r = read(fd, buf + got, (size_t)(FILE_BYTES_MAX - 1 - got))) > 0;)
            got += r;
        buf[got] = 0;
    }
    close(fd);
    return got;
}

/* a source checkout: the folder or its parent has a project file */
static int checkout(const char *dir)
{
    static const char *const marks[] = {"pyproject.toml", "setup.py", "setup.cfg", ".git"};
    char d[ROOT_CAP], p[ROOT_CAP];
    snprintf(d, sizeof d, "%s", dir);
    for (int up = 0; up < 2; up++, parent(d))
        for (size_t i = 0; i < sizeof marks / sizeof *marks; i++)
            if (join(p, d, marks[i]) && access(p, F_OK) == 0) return 1;
    return 0;
}

static void read_pth(const char *site, const char *name, char *buf)
{
    char path[ROOT_CAP], dir[ROOT_CAP];
    if (!join(path, site, name) || read_small(path, buf) < 0) return;
    int editable = !strncmp(name, "__editable__", 12) || !strcmp(name, "easy-install.pth");
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        line[strcspn(line, "\r")] = 0;
        size_t n = strlen(line);
        while (n && (line[n - 1] == ' ' || line[n - 1] == '\t')) line[--n] = 0;
        if (!n || line[0] == '#' || !strncmp(line, "import ", 7) || !strncmp(line, "import\t", 7)) continue;
        if (line[0] == '/') snprintf(dir, sizeof dir, "%s", line);
        else if (!join(dir, site, line)) continue;
        if (exists(dir, 1)) add(editable || checkout(dir) ? 'e' : 'p', dir);
    }
}

/* setuptools' finder: MAPPING: dict[str, str] = {'pkg': '/src/proj/pkg', ...} */
static void read_finder(const char *site, const char *name, char *buf)
{
    char path[ROOT_CAP], dir[ROOT_CAP];
    if (!join(path, site, name) || read_small(path, buf) < 0) return;
    char *m = strstr(buf, "MAPPING"), *open_ = m ? strchr(m, '{') : NULL, *close_ = open_ ? strchr(open_, '}') : NULL;
    if (!close_) return;
    *close_ = 0;
    int nth = 0;
    for (char *s = open_ + 1; *s; s++) {
        if (*s != '\'' && *s != '"') continue;
        char *e = strchr(s + 1, *s);
        if (!e) break;
        if (nth++ % 2 && e - s - 1 < ROOT_CAP) {       /* the values: source folders */
            snprintf(dir, sizeof dir, "%.*s", (int)(e - s - 1), s + 1);
            add('e', dir);
        }
        s = e;
    }
}

static int ends_with(const char *s, const char *sfx)
{
    size_t n = strlen(s), k = strlen(sfx);
    return n >= k && !strcmp(s + n - k, sfx);
}

/* .pth files and editable finders of one site folder */
static void scan_site(const char *site, char *buf)
{
    DIR *d = opendir(site);
    if (!d) return;
    int seen = 0, files = 0;
    for (struct dirent *e; seen < DIR_ENTRIES_MAX && files < FILES_MAX && (e = readdir(d)); seen++) {
        if (ends_with(e->d_name, ".pth")) files++, read_pth(site, e->d_name, buf);
        else if (!strncmp(e->d_name, "__editable__", 12) && ends_with(e->d_name, "_finder.py"))
            files++, read_finder(site, e->d_name, buf);
    }
    closedir(d);
}

/* a folder holding *.dist-info (pip install --target) */
static int holds_dists(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int seen = 0, found = 0;
    for (struct dirent *e; !found && seen < DIR_ENTRIES_MAX && (e = readdir(d)); seen++)
        found = ends_with(e->d_name, ".dist-info");
    closedir(d);
    return found;
}

static void user_and_path_sites(void)
{
    char p[ROOT_CAP];
    const char *base = getenv("PYTHONUSERBASE"), *home = getenv("HOME");
    if (base && base[0] == '/') {
        if (join_v(p, base, "lib/python3.%d/site-packages")) add('p', p);
    } else if (home && home[0] == '/') {
        if (join_v(p, home, ".local/lib/python3.%d/site-packages")) add('p', p);
    }
    const char *pp = getenv("PYTHONPATH");
    for (const char *s = pp; s && *s;) {
        size_t n = strcspn(s, ":");
        if (n && n < sizeof p && s[0] == '/') {
            memcpy(p, s, n);
            p[n] = 0;
            if (holds_dists(p)) add('p', p);
        }
        s += n + (s[n] == ':');
    }
}

static void blob(void)
{
    size_t len = 0;
    for (int i = 0; i < g_n; i++) len += strlen(g_roots[i].path) + 2;
    size_t padded = (len + 7) & ~(size_t)7;
    char *text = calloc(1, padded + 1);
    if (!text) return;
    char *w = text;
    for (int i = 0; i < g_n; i++) {
        *w++ = g_roots[i].kind;
        size_t n = strlen(g_roots[i].path) + 1;
        memcpy(w, g_roots[i].path, n);
        w += n;
    }
    trr_pyroots h = {(uint32_t)g_n, (uint32_t)len};
    tr_ring_add_blob(TRR_BLOB_PYROOTS, &h, sizeof h, text, padded);
    free(text);
}

static void collect_once(void)
{
    int st = tr_py_state();
    if (tr_cfg()->pystack_depth <= 0 || (st != TR_PY_PENDING && st != TR_PY_READY && st != TR_PY_DISABLED)) return;
    g_minor = (int)((tr_py_version() >> 16) & 0xff);
    char *buf = malloc(FILE_BYTES_MAX);
    if (!buf) return;
    base_prefix(tr_py_module_path());
    venv_prefix();
    user_and_path_sites();
    int nsites = g_n;
    for (int i = 0; i < nsites; i++)
        if (g_roots[i].kind == 'p') scan_site(g_roots[i].path, buf);
    free(buf);
    blob();
    atomic_store_explicit(&g_ready, 1, memory_order_release);
}

void tr_pyroots_collect(void)
{
    pthread_once(&g_once, collect_once);
}

void tr_pyroots_write_json(tr_json *j)
{
    if (!atomic_load_explicit(&g_ready, memory_order_acquire)) return;
    static const struct { char kind; const char *name; } kinds[] = {{'s', "stdlib"}, {'p', "site"}, {'e', "editable"}};
    trj_object_begin(j, "roots");
    for (size_t k = 0; k < 3; k++) {
        trj_array_begin(j, kinds[k].name);
        for (int i = 0; i < g_n; i++)
            if (g_roots[i].kind == kinds[k].kind) trj_str(j, NULL, g_roots[i].path);
        trj_array_end(j);
    }
    trj_object_end(j);
}
