/* tranalyze's inputs: the trace and ring files a folder holds or the
 * command line names, opened safely; and the shim's write-failed markers
 * (where a trace write failed), placed against the job's ranks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "load/ring/ta_ring.h"
#include "load_int.h"
#include "site/ta_site.h"
#include "trshim/trace_format.h"

static void fv_push(ta_filevec *s, char *p, int follow)
{
    if (s->n == s->cap) { s->cap = s->cap ? s->cap * 2 : 64; s->v = xrealloc(s->v, sizeof *s->v * (size_t)s->cap); }
    s->v[s->n++] = (ta_infile){p, follow};
}
int ta_has_suffix(const char *n, const char *suf)
{
    size_t l = strlen(n), k = strlen(suf);
    return l >= k && !strcmp(n + l - k, suf);
}
static int is_trace_name(const char *n)
{
    size_t l = strlen(n);
    return !strncmp(n, TRSHIM_TRACE_PREFIX, strlen(TRSHIM_TRACE_PREFIX)) && l > 12 && !strcmp(n + l - 5, ".json");
}
static int is_marker_name(const char *n)
{
    size_t pl = strlen(TRSHIM_TRACE_PREFIX);
    return !strncmp(n, TRSHIM_TRACE_PREFIX, pl) && strlen(n) > pl + strlen(TRSHIM_WRITE_FAILED_SUFFIX) &&
           ta_has_suffix(n, TRSHIM_WRITE_FAILED_SUFFIX);
}
static const char *file_kind(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISSOCK(m) ? "a socket" : S_ISDIR(m) ? "a folder" : S_ISLNK(m) ? "a symbolic link" : "not a plain file";
}
static void walk(ta_an *a, const char *dir, ta_filevec *out, ta_filevec *markers, int depth)
{
    DIR *d = opendir(dir);
    if (!d) { ta_note_add(a, dir, 0, "cannot read the folder: %s", strerror(errno)); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = xasprintf("%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0) { free(p); continue; }
        int trace = is_trace_name(e->d_name) || ta_ring_name(e->d_name), marker = !trace && is_marker_name(e->d_name);
        if (S_ISDIR(st.st_mode)) {
            if (depth < 16) walk(a, p, out, markers, depth + 1);
            free(p);
        } else if ((trace || marker) && S_ISREG(st.st_mode)) {
            fv_push(marker ? markers : out, p, 0);
        } else if ((trace || marker) && S_ISLNK(st.st_mode)) {
            /* inside a folder, links are not followed: one could lead anywhere (a FIFO, a device) */
            ta_note_add(a, p, 1, "a symbolic link: links inside a folder are not followed (name the file on the command "
                        "line to read it)");
            free(p);
        } else if (trace || marker) {
            ta_note_add(a, p, 1, "not a regular file (%s)", file_kind(st.st_mode));
            free(p);
        } else if (!strncmp(e->d_name, TRSHIM_TRACE_PREFIX, strlen(TRSHIM_TRACE_PREFIX)) && strstr(e->d_name, ".json.tmp.")) {
            ta_note_add(a, p, 0, "an unfinished write (the process stopped while writing); the last complete trace of that rank is used");
            free(p);
        } else {
            free(p);
        }
    }
    closedir(d);
}
static int cmp_infile(const void *x, const void *y) { return strcmp(((const ta_infile *)x)->path, ((const ta_infile *)y)->path); }

/* Opens an input for reading. Never blocks (a FIFO named like a trace would
 * wait for a writer forever: O_NONBLOCK), follows a symbolic link only for
 * a file named on the command line, and reads regular files only (checked
 * again on the open file: it may have been replaced since it was listed).
 * -1 with a note naming the file. */
int ta_open_input(ta_an *a, const ta_infile *f, struct stat *st)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (f->follow ? 0 : O_NOFOLLOW));
    if (fd < 0) {
        if (errno == ELOOP && !f->follow)
            ta_note_add(a, f->path, 1, "a symbolic link: links inside a folder are not followed (name the file on the "
                        "command line to read it)");
        else
            ta_note_add(a, f->path, 1, "cannot open: %s", strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0) {
        ta_note_add(a, f->path, 1, "cannot open: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        ta_note_add(a, f->path, 1, "not a regular file (%s)", file_kind(st->st_mode));
        close(fd);
        return -1;
    }
    return fd;
}

/* The inputs named: trace and ring files (a folder's, found to 16 levels
 * down; a file named, whatever its name) and write-failed markers, each
 * sorted by path. */
void ta_list_inputs(ta_an *a, char **paths, int npaths, ta_filevec *files, ta_filevec *markers)
{
    for (int i = 0; i < npaths; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) { ta_note_add(a, paths[i], 1, "cannot open: %s", strerror(errno)); continue; }
        if (S_ISDIR(st.st_mode)) {
            int before = files->n;
            walk(a, paths[i], files, markers, 0);
            if (files->n == before) ta_note_add(a, paths[i], 0, "no trace files (trshim.*.json, trshim.*.ring) in this folder");
        } else if (!S_ISREG(st.st_mode)) {
            /* never opened: opening a FIFO waits for a writer, a device may act on it */
            ta_note_add(a, paths[i], 1, "not a regular file (%s)", file_kind(st.st_mode));
        } else {
            const char *base = strrchr(paths[i], '/');
            base = base ? base + 1 : paths[i];
            if (ta_has_suffix(base, TRSHIM_WRITE_FAILED_SUFFIX)) fv_push(markers, xstrdup(paths[i]), 1);
            else fv_push(files, xstrdup(paths[i]), 1);
        }
    }
    if (files->n > 1) qsort(files->v, (size_t)files->n, sizeof *files->v, cmp_infile);
    if (markers->n > 1) qsort(markers->v, (size_t)markers->n, sizeof *markers->v, cmp_infile);
}

/* ---- write-failed markers ---- */
#define MARKER_MAX (64 << 10)     /* bytes: a marker is one short line */

/* a string field of a marker made safe for any output (NULL when absent or not a string) */
static char *marker_str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v)) return NULL;
    return xstrdup(ta_py_intern(v->valuestring, strlen(v->valuestring)));
}
static int64_t marker_int(const cJSON *o, const char *name, int64_t lo, int64_t hi)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= (double)lo && v->valuedouble <= (double)hi) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return INT64_MIN;
    return (int64_t)v->valuedouble;
}

static ta_wfail *wfail_new(ta_an *a, const char *path)
{
    a->wfail = xrealloc(a->wfail, sizeof *a->wfail * (size_t)(a->nwfail + 1));
    ta_wfail *m = &a->wfail[a->nwfail++];
    memset(m, 0, sizeof *m);
    m->file = xstrdup(path);
    return m;
}

/* An empty marker: the shim leaves one when not even the marker's line
 * fits in the folder (tr_writer.c), so only its name says whose it is:
 * trshim.<job>.r<rank>.<host>.<pid>.write-failed, the job as file names
 * write it (no '.'), the rank a number or "x" (unknown). */
static void read_empty_marker(ta_an *a, const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t pl = strlen(TRSHIM_TRACE_PREFIX), n = strlen(b), sl = strlen(TRSHIM_WRITE_FAILED_SUFFIX);
    const char *job = b + pl, *dot = n > pl + sl ? strchr(job, '.') : NULL;
    const char *end = b + n - sl;                       /* the suffix */
    const char *pidp = end;
    while (pidp > b && pidp[-1] >= '0' && pidp[-1] <= '9') pidp--;
    long rank = -1;
    const char *host = NULL;
    if (dot && dot > job && dot[1] == 'r' && pidp < end && pidp[-1] == '.' && end - pidp <= 9) {
        const char *d = dot + 2;
        if (*d == 'x') d++;
        else for (rank = 0; *d >= '0' && *d <= '9' && rank <= INT32_MAX; d++) rank = rank * 10 + (*d - '0');
        if (*d == '.' && d + 1 < pidp - 1 && (d > dot + 2) && rank <= INT32_MAX) host = d + 1;
    }
    if (!host) {
        ta_note_add(a, path, 1, "an empty file named like a write-failed marker, but not as the shim names its "
                    "markers (trshim.<job>.r<rank>.<host>.<pid>.write-failed): not used");
        return;
    }
    ta_wfail *m = wfail_new(a, path);
    m->empty = 1;
    m->job = xasprintf("%.*s", (int)(dot - job), job);
    m->rank = (int)rank;
    m->host = xasprintf("%.*s", (int)(pidp - 1 - host), host);
    m->pid = strtol(pidp, NULL, 10);
    m->bytes = -1;
    m->error = xstrdup("no room in the trace folder: its marker is empty, not even the marker's line could be written");
}

void ta_read_marker(ta_an *a, const ta_infile *f)
{
    struct stat st;
    int fd = ta_open_input(a, f, &st);
    if (fd < 0) return;
    char *buf = NULL;
    if (st.st_size > MARKER_MAX) {
        ta_note_add(a, f->path, 1, "%lld bytes: too large for a write-failed marker (one line of JSON): not read",
                    (long long)st.st_size);
    } else {
        size_t n = (size_t)st.st_size, got = 0;
        buf = xmalloc(n + 1);
        while (got < n) {
            ssize_t k = pread(fd, buf + got, n - got, (off_t)got);
            if (k > 0) got += (size_t)k;
            else if (!(k < 0 && errno == EINTR)) break;
        }
        buf[got] = 0;
        if (got < n) { ta_note_add(a, f->path, 1, "cannot read the write-failed marker"); free(buf); buf = NULL; }
    }
    close(fd);
    if (!buf) return;
    if (!buf[0] && st.st_size == 0) {
        free(buf);
        read_empty_marker(a, f->path);
        return;
    }
    cJSON *o = cJSON_ParseWithLength(buf, strlen(buf));
    free(buf);
    const cJSON *fmt = o ? cJSON_GetObjectItemCaseSensitive(o, "format") : NULL;
    int64_t ver = o ? marker_int(o, "version", 0, INT32_MAX) : INT64_MIN;
    const cJSON *job = o ? cJSON_GetObjectItemCaseSensitive(o, "job") : NULL;
    const cJSON *rk = o ? cJSON_GetObjectItemCaseSensitive(o, "rank") : NULL;
    int64_t rank = o ? marker_int(o, "rank", 0, INT32_MAX) : INT64_MIN;
    const char *why = NULL;
    if (!cJSON_IsObject(o)) why = "not a write-failed marker (not a JSON object)";
    else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, TRSHIM_WRITE_FAILED_FORMAT))
        why = "not a write-failed marker (no \"format\": \"" TRSHIM_WRITE_FAILED_FORMAT "\")";
    else if (ver != TRSHIM_WRITE_FAILED_VERSION) why = "a write-failed marker of an unknown version";
    else if (!cJSON_IsString(job)) why = "a write-failed marker without a job";
    else if (!cJSON_IsNull(rk) && rank == INT64_MIN) why = "a write-failed marker whose rank is not a rank";
    if (why) {
        ta_note_add(a, f->path, 1, "%s: not used", why);
        cJSON_Delete(o);
        return;
    }
    ta_wfail *m = wfail_new(a, f->path);
    m->job = xstrdup(job->valuestring);
    m->rank = rank == INT64_MIN ? -1 : (int)rank;
    m->host = marker_str(o, "host");
    m->pid = marker_int(o, "pid", 0, INT32_MAX);
    m->bytes = marker_int(o, "bytes", 0, INT64_MAX / 2);
    if (m->pid == INT64_MIN) m->pid = -1;
    if (m->bytes == INT64_MIN) m->bytes = -1;
    int64_t e = marker_int(o, "errno", 1, 4095);
    m->err = e == INT64_MIN ? 0 : (int)e;
    m->error = marker_str(o, "error");
    if (!m->error || !m->error[0]) {
        free(m->error);
        m->error = xstrdup(m->err ? strerror(m->err) : "the error is not known");
    }
    cJSON_Delete(o);
}

/* The job's markers against its ranks: a rank without a trace whose write
 * failed is told apart from one that left nothing; a rank with a trace
 * whose later write failed is noted. */
/* the index of rank in missing_ranks (ascending), -1 */
static int missing_at(const ta_an *a, int rank)
{
    int lo = 0, hi = a->nmissing - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (a->missing_ranks[mid] == rank) return mid;
        if (a->missing_ranks[mid] < rank) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* the length of the job's part in a file name (the job as the shim writes it in names: [A-Za-z0-9_-], 48
 * characters at most) when name starts with it, else 0 */
static size_t job_part(const char *name, const char *job)
{
    size_t jl = 0;
    for (; job[jl] && jl < 48; jl++) {
        char c = job[jl];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        if (name[jl] != (ok ? c : '_')) return 0;
    }
    return jl;
}

/* the rank a trace file's name gives (trshim.<job>.r<rank>.<host>.<pid>.json, the job as the shim
 * writes it in names: [A-Za-z0-9_-], 48 characters at most) when it is of job, else -1 */
static int rank_of_name(const char *path, const char *job)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t pl = strlen(TRSHIM_TRACE_PREFIX);
    if (strncmp(b, TRSHIM_TRACE_PREFIX, pl)) return -1;
    b += pl;
    size_t jl = job_part(b, job);
    if (!jl || strncmp(b + jl, ".r", 2)) return -1;
    const char *d = b + jl + 2;
    long r = 0;
    int nd = 0;
    for (; *d >= '0' && *d <= '9' && nd < 10; d++, nd++) r = r * 10 + (*d - '0');
    return nd && *d == '.' && r <= INT32_MAX ? (int)r : -1;
}

/* "uid 65534 (nobody)", or "uid N" when the name is not known here */
static char *owner_text(uid_t uid)
{
    struct passwd pw, *found = NULL;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found && found->pw_name)
        return xasprintf("uid %u (%s)", (unsigned)uid, ta_py_intern(found->pw_name, strlen(found->pw_name)));
    return xasprintf("uid %u", (unsigned)uid);
}

/* A file named as a trace of this job that could not be read as one, and
 * that another user owns than the job's own files (another user's file at
 * that name, in a shared folder: the shim never writes through it, never
 * replaces it): said so, instead of what its bytes look like (truncated,
 * not JSON). */
static void foreign_traces(ta_an *a)
{
    struct stat own;
    if (!a->ntr || lstat(a->tr[0]->file, &own) != 0) return;
    for (int k = 0; k < a->nnotes; k++) {
        ta_note *n = &a->notes[k];
        struct stat st;
        if (!n->fatal || !n->file || rank_of_name(n->file, a->job) < 0 || lstat(n->file, &st) != 0 ||
            st.st_uid == own.st_uid)
            continue;
        char *who = owner_text(st.st_uid);
        free(n->text);
        n->text = xasprintf("not written by this job's rank: owned by %s", who);
        n->cut = -1;
        free(who);
    }
}

void ta_markers_place(ta_an *a)
{
    foreign_traces(a);
    a->missing_wfail = xmalloc(sizeof(int) * ((size_t)a->nmissing + 1));
    a->missing_cut = xmalloc(sizeof(int) * ((size_t)a->nmissing + 1));
    for (int i = 0; i < a->nmissing; i++) a->missing_wfail[i] = a->missing_cut[i] = -1;
    /* a rank without a trace whose trace file is there but ends early (skipped, noted): truncated, not
     * killed before a write */
    for (int k = 0; k < a->nnotes; k++) {
        if (a->notes[k].cut < 0 || !a->notes[k].file) continue;
        int at = missing_at(a, rank_of_name(a->notes[k].file, a->job));
        if (at >= 0 && (a->missing_cut[at] < 0 || a->notes[a->missing_cut[at]].cut < a->notes[k].cut))
            a->missing_cut[at] = k;
    }
    for (int k = 0; k < a->nwfail; k++) {
        ta_wfail *m = &a->wfail[k];
        /* another job's (an empty marker names the job as file names write it) */
        if (m->empty ? job_part(m->job, a->job) != strlen(m->job) : strcmp(m->job, a->job) != 0) continue;
        if (m->rank < 0) {
            ta_note_add(a, m->file, 0, "a trace write failed (%s) on a process whose rank is unknown", m->error);
            continue;
        }
        int at = missing_at(a, m->rank);
        if (at >= 0) {
            if (a->missing_wfail[at] < 0) a->missing_wfail[at] = k;
            continue;
        }
        const ta_trace *t = NULL;
        for (int i = 0; i < a->ntr && !t; i++)
            if (a->tr[i]->rank == m->rank) t = a->tr[i];
        if (t && m->empty && m->pid == t->pid && (t->lost_errno == ENOSPC || t->lost_errno == EDQUOT)) {
            /* the ring says why: the folder was full */
            m->err = t->lost_errno;
            free(m->error);
            m->error = xasprintf("%s; its marker is empty, not even the marker's line could be written",
                                 strerror(m->err));
        }
        if (t && t->from_ring && m->pid == t->pid)
            ta_note_add(a, m->file, 0, "a trace write of rank %d failed (%s): its calls are read from its ring file "
                        "%s%s", m->rank, m->error, t->ring_file,
                        t->lost_folder ? ", which lacks the last of them (finding trace_lost)" : "");
        else if (t)
            ta_note_add(a, m->file, 0, "a trace write of rank %d failed (%s): the trace of rank %d that is used (%s) is "
                        "from %s", m->rank, m->error, m->rank, t->file,
                        m->pid == t->pid ? "an earlier write, and lacks what came after it" : "another process");
        else
            ta_note_add(a, m->file, 0, "a trace write of rank %d failed (%s): that rank is not below the job's world "
                        "size %d", m->rank, m->error, a->world);
    }
}

