/* --anonymize: what tranalyze prints, with the names that say whose job it
 * was replaced, consistently within one run, whatever the document (text,
 * --json, --markdown): host names (host1, host2, ... in order of first rank;
 * hosts of other jobs, write-failed markers and trace file names after
 * them), home folders (/home/<user>/..., /Users/<user>/... and /root/...
 * become ~/...) and the names of those users wherever they appear as a
 * whole word (user1, user2, ...; also the values of USER and LOGNAME).
 *
 * The program's standard output and error are held back in a memory file
 * while it runs (ta_anon_begin) and written, replaced, at its end
 * (ta_anon_end): every writer is covered without knowing of this option.
 * In text, a name followed by two spaces (a column of a table), or a host
 * as the text's table cuts it (16 characters), is padded to its length. A name is replaced where it stands as a whole word: a host where neither
 * side continues it ([A-Za-z0-9_-]; a dot ends it, so "node1" is replaced in
 * "node1.40000.json" but a longer known name, "node1.corp", is tried first);
 * a home folder where a path starts (after a space, a quote, '=', ':', '(',
 * ...). In --json the document's keys are left as they are. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/ta_model.h"
#include "ta_out.h"

/* ---- names and what replaces them: one open-addressing table ------------------- */
typedef struct { char *from; size_t n; char *to; int pad; } anon_name;   /* pad: text's table form */
typedef struct {
    anon_name *v; size_t cap, used;
    int nhosts, nusers;
} anon_tab;

static anon_name *tab_find(const anon_tab *t, const char *s, size_t n)
{
    if (!t->cap) return NULL;
    for (size_t k = ta_hash_bytes(s, n) & (t->cap - 1);; k = (k + 1) & (t->cap - 1)) {
        anon_name *e = &t->v[k];
        if (!e->from) return NULL;
        if (e->n == n && !memcmp(e->from, s, n)) return e;
    }
}

static void tab_put(anon_tab *t, const char *s, size_t n, const char *to)
{
    if (2 * (t->used + 1) > t->cap) {
        anon_tab g = {xcalloc(t->cap ? t->cap * 2 : 64, sizeof(anon_name)), t->cap ? t->cap * 2 : 64, 0, 0, 0};
        for (size_t k = 0; k < t->cap; k++)
            if (t->v[k].from) {
                size_t q = ta_hash_bytes(t->v[k].from, t->v[k].n) & (g.cap - 1);
                while (g.v[q].from) q = (q + 1) & (g.cap - 1);
                g.v[q] = t->v[k];
            }
        free(t->v);
        t->v = g.v;
        t->cap = g.cap;
    }
    size_t q = ta_hash_bytes(s, n) & (t->cap - 1);
    while (t->v[q].from) q = (q + 1) & (t->cap - 1);
    t->v[q].from = xmalloc(n + 1);
    memcpy(t->v[q].from, s, n);
    t->v[q].from[n] = 0;
    t->v[q].n = n;
    t->v[q].to = xstrdup(to);
    t->used++;
}

static int word_char(int c) { return isalnum(c) || c == '_' || c == '-'; }

/* a name that can be found as a whole word: dotted words ([A-Za-z0-9_-] parts) with a letter,
 * or an address (digits and dots) of 7 characters or more */
static int findable(const char *s, size_t n)
{
    if (n < 2 || n > 255 || s[0] == '.' || s[n - 1] == '.') return 0;
    int letter = 0, dot = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (s[i + 1] == '.') return 0;
            dot = 1;
        } else if (!word_char(c)) return 0;
        letter |= isalpha(c);
    }
    return letter || (dot && n >= 7);
}

/* host h (its replacement: the one it has, else a new hostN) and its other forms: as trace
 * file names write it (characters outside [A-Za-z0-9._-] made '_'), as the text table cuts it
 * (16 characters) */
static void add_host(anon_tab *t, const char *h)
{
    if (!h || !*h) return;
    size_t n = strlen(h);
    char *san = xstrdup(h);
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)san[i]) && san[i] != '.' && san[i] != '_' && san[i] != '-') san[i] = '_';
    const anon_name *e = tab_find(t, h, n);
    if (!e) e = tab_find(t, san, n);
    char to[32];
    if (e) snprintf(to, sizeof to, "%s", e->to);
    else if (findable(h, n) || findable(san, n)) snprintf(to, sizeof to, "host%d", ++t->nhosts);
    else { free(san); return; }
    if (findable(h, n) && !tab_find(t, h, n)) tab_put(t, h, n, to);
    if (findable(san, n) && !tab_find(t, san, n)) tab_put(t, san, n, to);
    if (n >= 16 && findable(h, 16) && !tab_find(t, h, 16)) tab_put(t, h, 16, to);
    anon_name *cut = n >= 16 ? tab_find(t, h, 16) : NULL;
    if (cut) cut->pad = 1;
    free(san);
}

/* the host in a trace file's name: trshim.<job>.r<rank>.<host>.<pid>.json[.tmp.X],
 * trshim.<job>.<host>.<pid>[.<random>].ring, trshim.<job>.r<rank>.<host>.<pid>.write-failed */
static void add_host_of_file(anon_tab *t, const char *path)
{
    if (!path) return;
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    if (strncmp(b, "trshim.", 7)) return;
    const char *p = strchr(b + 7, '.');          /* after the job (no dots in it) */
    if (!p) return;
    p++;
    if (p[0] == 'r' && (isdigit((unsigned char)p[1]) || p[1] == 'x')) {   /* r<rank>. */
        const char *q = p + 1;
        while (isdigit((unsigned char)*q) || *q == 'x') q++;
        if (*q == '.') p = q + 1;
    }
    /* the host ends before the last component of digits only that is followed by a suffix */
    const char *pid = NULL;
    for (const char *q = p; *q; q++)
        if (*q == '.' && isdigit((unsigned char)q[1])) {
            const char *e = q + 1;
            while (isdigit((unsigned char)*e)) e++;
            if (*e == '.') pid = q;
        }
    if (!pid || pid == p) return;
    char *h = xasprintf("%.*s", (int)(pid - p), p);
    add_host(t, h);
    free(h);
}

static void add_user(anon_tab *t, const char *u, size_t n)
{
    if (!findable(u, n) || (n == 4 && !memcmp(u, "root", 4)) || tab_find(t, u, n)) return;
    char to[32];
    snprintf(to, sizeof to, "user%d", ++t->nusers);
    tab_put(t, u, n, to);
}

static int path_start(int c) { return isspace(c) || (c && strchr("\"'`=:,;([{<|>", c)); }
static int path_end(int c) { return !c || isspace(c) || strchr("\"'`:;,)]}|<>\\*?", c); }

/* the users of the home folders in s[0, n) */
static void learn_users(anon_tab *t, const char *s, size_t n)
{
    static const char *const homes[] = {"/home/", "/Users/"};
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '/') continue;
        for (int k = 0; k < 2; k++) {
            size_t hl = strlen(homes[k]);
            if (i + hl > n || memcmp(s + i, homes[k], hl)) continue;
            size_t e = i + hl;
            while (e < n && s[e] != '/' && !path_end((unsigned char)s[e])) e++;
            if (e > i + hl) add_user(t, s + i + hl, e - i - hl);
        }
    }
}

/* ---- the replacement -------------------------------------------------------------- */
/* at s[i]: a home folder where a path starts: its length (written as ~), else 0 */
static size_t home_at(const char *s, size_t n, size_t i)
{
    if (s[i] != '/' || (i > 0 && !path_start((unsigned char)s[i - 1]))) return 0;
    static const char *const homes[] = {"/home/", "/Users/"};
    for (int k = 0; k < 2; k++) {
        size_t hl = strlen(homes[k]), e = i + hl;
        if (i + hl > n || memcmp(s + i, homes[k], hl)) continue;
        while (e < n && s[e] != '/' && !path_end((unsigned char)s[e])) e++;
        if (e > i + hl) return e - i;
    }
    if (i + 5 <= n && !memcmp(s + i, "/root", 5) && (i + 5 == n || s[i + 5] == '/' || path_end((unsigned char)s[i + 5])))
        return 5;
    return 0;
}

/* s[0, n) into o, replaced; json: the keys of the document (a string followed by ':') kept */
static void filter(const anon_tab *t, FILE *o, const char *s, size_t n, int json)
{
    int instr = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (json && !instr) {
            if (c == '"') {
                size_t e = i + 1;
                while (e < n && s[e] != '"') e += s[e] == '\\' ? 2 : 1;
                size_t after = e + 1;
                while (after < n && isspace((unsigned char)s[after])) after++;
                if (e < n && after < n && s[after] == ':') {      /* a key */
                    fwrite(s + i, 1, e + 1 - i, o);
                    i = e + 1;
                    continue;
                }
                instr = 1;
            }
            fputc(c, o);
            i++;
            continue;
        }
        if (json && c == '\\') {
            fwrite(s + i, 1, i + 1 < n ? 2 : 1, o);
            i += 2;
            continue;
        }
        if (json && c == '"') {
            instr = 0;
            fputc(c, o);
            i++;
            continue;
        }
        size_t h = home_at(s, n, i);
        if (h) {
            fputc('~', o);
            i += h;
            continue;
        }
        if (word_char(c) && (i == 0 || !word_char((unsigned char)s[i - 1]))) {
            /* the dotted run from here; its prefixes that end a part, longest first */
            size_t ends[8], ne = 0, e = i;
            while (e < n && e - i < 256 && ne < 8) {
                while (e < n && word_char((unsigned char)s[e])) e++;
                ends[ne++] = e;
                if (e + 1 < n && s[e] == '.' && word_char((unsigned char)s[e + 1])) e++;
                else break;
            }
            const anon_name *m = NULL;
            size_t k = ne;
            while (k-- > 0 && !(m = tab_find(t, s + i, ends[k] - i))) {}
            if (m) {
                fputs(m->to, o);
                /* a column of the text (two spaces after it): kept aligned */
                size_t tl = strlen(m->to);
                if (!json && ends[k] + 1 < n && s[ends[k]] == ' ' && (m->pad || s[ends[k] + 1] == ' '))
                    for (size_t p = tl; p < ends[k] - i; p++) fputc(' ', o);
                i = ends[k];
                continue;
            }
            size_t w = i;
            while (w < n && word_char((unsigned char)s[w])) w++;
            fwrite(s + i, 1, w - i, o);
            i = w;
            continue;
        }
        fputc(c, o);
        i++;
    }
}

/* ---- holding the output back ------------------------------------------------------ */
static int held[2] = {-1, -1}, saved[2] = {-1, -1};

static int memory_file(void)
{
    int fd = memfd_create("tranalyze-anonymize", MFD_CLOEXEC);
    if (fd >= 0) return fd;
    FILE *f = tmpfile();                  /* a kernel without memfd_create */
    if (!f) return -1;
    fd = dup(fileno(f));
    fclose(f);
    return fd;
}

static void release(void)
{
    for (int k = 0; k < 2; k++) {
        if (saved[k] >= 0) { dup2(saved[k], k + 1); close(saved[k]); }
        if (held[k] >= 0) close(held[k]);
        held[k] = saved[k] = -1;
    }
}

int ta_anon_begin(void)
{
    fflush(stdout);
    fflush(stderr);
    for (int k = 0; k < 2; k++) {
        held[k] = memory_file();
        saved[k] = held[k] >= 0 ? fcntl(k + 1, F_DUPFD_CLOEXEC, 3) : -1;
        if (held[k] < 0 || saved[k] < 0 || dup2(held[k], k + 1) < 0) {
            int err = errno;
            if (saved[k] >= 0 && dup2(saved[k], k + 1) < 0) {}
            release();
            fprintf(stderr, "tranalyze: --anonymize: cannot hold the output back (%s)\n", strerror(err));
            return -1;
        }
    }
    return 0;
}

static char *slurp(int fd, size_t *len)
{
    off_t n = lseek(fd, 0, SEEK_END);
    if (n < 0) n = 0;
    char *s = xmalloc((size_t)n + 1);
    size_t got = 0;
    while (got < (size_t)n) {
        ssize_t r = pread(fd, s + got, (size_t)n - got, (off_t)got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    s[got] = 0;
    *len = got;
    return s;
}

/* file path (written by --html or --timeline) replaced by its filtered copy
 * (json: a JSON document, keys left as they are): -1 when it cannot be */
static int filter_file(const anon_tab *t, const char *path, int json)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t len;
    char *buf = slurp(fd, &len);
    close(fd);
    char *tmp;
    FILE *o = ta_file_create(path, &tmp);      /* mode 0600, as the file it replaces */
    int ok = o != NULL;
    if (o) {
        filter(t, o, buf, len, json);
        ok = ta_file_commit(o, path, tmp) == 0;
    }
    free(buf);
    return ok ? 0 : -1;
}

int ta_anon_end(ta_an *a, int json, const char *html, const char *timeline)
{
    if (held[0] < 0) return 0;
    fflush(stdout);
    fflush(stderr);
    size_t len[2];
    char *buf[2];
    for (int k = 0; k < 2; k++) buf[k] = slurp(held[k], &len[k]);
    release();

    anon_tab t = {0};
    for (int i = 0; i < a->ntr; i++) add_host(&t, a->tr[i]->host);       /* in order of rank */
    for (int i = 0; i < a->nall; i++) add_host(&t, a->all[i]->host);
    for (int i = 0; i < a->nwfail; i++) add_host(&t, a->wfail[i].host);
    for (int i = 0; i < a->nall; i++) { add_host_of_file(&t, a->all[i]->file); add_host_of_file(&t, a->all[i]->ring_file); }
    for (int i = 0; i < a->nwfail; i++) add_host_of_file(&t, a->wfail[i].file);
    for (int i = 0; i < a->nnotes; i++) add_host_of_file(&t, a->notes[i].file);
    /* short names of hosts (node1 of node1.corp.example.com) when no other host has that one */
    anon_tab shorts = {0};
    int nlong = 0;
    for (size_t k = 0; k < t.cap; k++) if (t.v[k].from && strchr(t.v[k].from, '.')) nlong++;
    anon_name *longs = xcalloc((size_t)nlong + 1, sizeof *longs);
    nlong = 0;
    for (size_t k = 0; k < t.cap; k++) if (t.v[k].from && strchr(t.v[k].from, '.')) longs[nlong++] = t.v[k];
    for (int k = 0; k < nlong; k++) {
        size_t sn = (size_t)(strchr(longs[k].from, '.') - longs[k].from);
        anon_name *e = tab_find(&shorts, longs[k].from, sn);
        if (!e) tab_put(&shorts, longs[k].from, sn, longs[k].to);
        else if (strcmp(e->to, longs[k].to)) { free(e->to); e->to = xstrdup(""); }   /* two hosts: not a name */
    }
    for (size_t k = 0; k < shorts.cap; k++) {
        anon_name *e = &shorts.v[k];
        if (e->from && *e->to && findable(e->from, e->n) && !tab_find(&t, e->from, e->n)) tab_put(&t, e->from, e->n, e->to);
        if (e->from) { free(e->from); free(e->to); }
    }
    free(shorts.v);
    free(longs);
    /* users: USER and LOGNAME of the traces, then the home folders printed */
    for (int i = 0; i < a->ntr; i++)
        for (int k = 0; k < a->tr[i]->nenv; k++) {
            const char *e = a->tr[i]->env[k];
            if (!e) continue;
            if (!strncmp(e, "USER=", 5)) add_user(&t, e + 5, strlen(e + 5));
            else if (!strncmp(e, "LOGNAME=", 8)) add_user(&t, e + 8, strlen(e + 8));
            else if (!strncmp(e, "HOME=", 5)) learn_users(&t, e + 5, strlen(e + 5));
        }
    for (int k = 0; k < 2; k++) learn_users(&t, buf[k], len[k]);
    /* the files written besides: the same names, the same replacements */
    const char *files[2] = {html, timeline};
    int rc = 0;
    for (int k = 0; k < 2; k++)
        if (files[k] && filter_file(&t, files[k], k == 1) < 0) {
            ta_esc_printf(stderr, "tranalyze: --anonymize: cannot rewrite %s: %s\n", files[k], strerror(errno));
            rc = -1;
        }

    filter(&t, stdout, buf[0], len[0], json);
    if (ta_stdout_failed()) rc = -1;       /* (said now, while errno tells why) */
    filter(&t, stderr, buf[1], len[1], 0);
    fflush(stderr);
    for (size_t k = 0; k < t.cap; k++) if (t.v[k].from) { free(t.v[k].from); free(t.v[k].to); }
    free(t.v);
    free(buf[0]);
    free(buf[1]);
    return rc;
}
