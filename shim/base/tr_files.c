/* The trace folder and the files the shim writes in it (tr_core.h).
 *
 * The folder may be shared with other users (/tmp), so nothing here trusts
 * a name in it:
 *   - the folder (TRSHIM_DIR made absolute at activation) is opened once per
 *     use and every file is made relative to that descriptor (openat,
 *     renameat, unlinkat), so a folder swapped under the shim after the
 *     check is not written into;
 *   - the folder must be owned by this process's effective user or by
 *     root, and not be writable by group or others unless it has the
 *     sticky bit (a 1777 /tmp is fine: nobody else can remove or replace
 *     our files there); a symbolic link on the way to it must be owned by
 *     this user or root (a link another user planted in a shared folder is
 *     never followed). Otherwise the folder is refused for the rest of the
 *     process: one "trshim:" line, no file is written, the job goes on;
 *   - folders the shim makes itself are 0700;
 *   - every file is created with O_CREAT | O_EXCL | O_NOFOLLOW (never through
 *     a planted link, never truncating an existing file), mode 0600, under a
 *     name with a random part (tr_create_unique, as mkostemp does) when it
 *     is a temporary one; the final name is given by renameat, which
 *     replaces whatever stood at that name (a planted link included)
 *     instead of writing through it.
 *
 * File-size limit (RLIMIT_FSIZE, `ulimit -f`): the kernel sends SIGXFSZ,
 * whose default action kills the process, to the thread whose write(),
 * ftruncate() or fallocate() goes past the limit. The shim checks the limit
 * before it writes instead (tr_fsize_fdopen: a write that would cross it
 * fails with EFBIG and writes nothing; the ring is sized to fit, tr_ring.c),
 * so no write of the shim crosses the limit and no SIGXFSZ is ever raised,
 * whichever thread writes (the writer thread, or the application's thread
 * at exit): blocking SIGXFSZ would only cover the threads that block it,
 * and the signal would stay pending on them. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "tr_core.h"

static char g_dir[2100];            /* the folder, absolute, no trailing '/' */
static atomic_int g_refused;        /* the folder was found unsafe: nothing is written */

void tr_dir_setup(void)
{
    const char *dir = tr_cfg()->dir;
    char cwd[1024];
    while (dir[0] == '.' && dir[1] == '/') dir += 2;      /* "./traces": cwd/traces */
    if (dir[0] != '/' && getcwd(cwd, sizeof cwd)) {
        if (!dir[0] || !strcmp(dir, ".")) snprintf(g_dir, sizeof g_dir, "%s", cwd);
        else snprintf(g_dir, sizeof g_dir, "%s/%s", cwd, dir);
    } else {
        snprintf(g_dir, sizeof g_dir, "%s", dir[0] ? dir : ".");
    }
    for (size_t n = strlen(g_dir); n > 1 && g_dir[n - 1] == '/'; n--) g_dir[n - 1] = 0;
}

const char *tr_dir_path(void) { return g_dir; }
int tr_dir_refused(void) { return atomic_load(&g_refused); }

/* ---- names of the files ------------------------------------------------------------ */

void tr_host_name(char *out, size_t cap)
{
    if (!cap) return;
    out[0] = 0;
    gethostname(out, cap - 1);
    out[cap - 1] = 0;
}

void tr_clean_name(char *out, size_t cap, const char *in, size_t max, int keep_dot)
{
    size_t n = 0;
    for (; in[n] && n < max && n + 1 < cap; n++) {
        char c = in[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '-' || (keep_dot && c == '.');
        out[n] = ok ? c : '_';
    }
    out[n] = 0;
}

void tr_job_id(char *out, size_t cap, const char **source, uint64_t first_comm)
{
    const tr_process *proc = tr_proc();
    if (proc->job_source) {
        snprintf(out, cap, "%s", proc->job_id);
        *source = proc->job_source;
    } else if (first_comm) {
        snprintf(out, cap, "0x%llx", (unsigned long long)first_comm);   /* as comms[].id */
        *source = "comm";
    } else {
        char host[256];
        tr_host_name(host, sizeof host);
        snprintf(out, cap, "%s-%d", host, (int)getpid());
        *source = "process";
    }
}

void tr_job_file_part(char *out, size_t cap, const char *job_id)
{
    tr_clean_name(out, cap, job_id, 48, 0);
}

/* a folder only its owner can change the entries of (others may add their
 * own to a sticky one, never remove or replace ours) */
static int private_mode(mode_t m)
{
    return !(m & (S_IWGRP | S_IWOTH)) || (m & S_ISVTX);
}

/* The reason a folder (or a link on the way to it) is unsafe, or NULL. */
static const char *unsafe_path(const char *dir, char *why, size_t cap)
{
    uid_t me = geteuid();
    char path[sizeof g_dir];
    snprintf(path, sizeof path, "%s", dir);
    /* every link on the way, the last component included */
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p) continue;
        char c = *p;
        *p = 0;
        struct stat st;
        if (lstat(path, &st) != 0) break;       /* missing: made below by us */
        if (S_ISLNK(st.st_mode) && st.st_uid != me && st.st_uid != 0) {
            snprintf(why, cap, "%s is a symbolic link owned by uid %u, not by this user (uid %u) or root", path,
                     (unsigned)st.st_uid, (unsigned)me);
            return why;
        }
        *p = c;
        if (!c) break;
    }
    return NULL;
}

static const char *unsafe_folder(const struct stat *st, char *why, size_t cap)
{
    uid_t me = geteuid();
    if (st->st_uid != me && st->st_uid != 0) {
        snprintf(why, cap, "it is owned by uid %u, not by this user (uid %u) or root", (unsigned)st->st_uid,
                 (unsigned)me);
        return why;
    }
    if (!private_mode(st->st_mode)) {
        snprintf(why, cap, "it is writable by %s and has no sticky bit (mode %04o)",
                 (st->st_mode & S_IWGRP) && (st->st_mode & S_IWOTH) ? "group and others"
                 : st->st_mode & S_IWOTH                             ? "others"
                                                                     : "group",
                 (unsigned)(st->st_mode & 07777));
        return why;
    }
    return NULL;
}

int tr_dir_open(const char **why)
{
    char buf[2600];
    if (atomic_load(&g_refused)) {
        *why = "the folder was refused";
        errno = EPERM;
        return -1;
    }
    const char *bad = unsafe_path(g_dir, buf, sizeof buf);
    int fd = -1;
    if (!bad) {
        *why = "cannot create the folder";
        if (tr_mkdir_p(g_dir) != 0) return -1;
        *why = "cannot open the folder";
        fd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return -1;
        struct stat st;
        if (fstat(fd, &st) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        bad = unsafe_folder(&st, buf, sizeof buf);
    }
    if (bad) {
        if (fd >= 0) close(fd);
        if (!atomic_exchange(&g_refused, 1))
            tr_warn("refusing the trace folder %s: %s; no trace is written (the job goes on)", g_dir, bad);
        *why = "the folder was refused";
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* ---- files ------------------------------------------------------------------------ */

int tr_create_at(int dfd, const char *name, int flags)
{
    int fd;
    do fd = openat(dfd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0) fchmod(fd, 0600);       /* whatever the umask took away */
    return fd;
}

int tr_create_unique(int dfd, const char *prefix, const char *suffix, char *name, size_t cap, int flags)
{
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static atomic_ullong counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned char rnd[8];
        if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
            /* no entropy yet (early boot): clock, pid and a counter */
            uint64_t x = tr_now_ns() ^ ((uint64_t)getpid() << 32) ^ atomic_fetch_add(&counter, 0x9e3779b97f4a7c15ull);
            x ^= x >> 29;
            x *= 0xbf58476d1ce4e5b9ull;
            x ^= x >> 32;
            memcpy(rnd, &x, sizeof rnd);
        }
        char part[9];
        for (int i = 0; i < 8; i++) part[i] = set[rnd[i] % (sizeof set - 1)];
        part[8] = 0;
        if (snprintf(name, cap, "%s%s%s", prefix, part, suffix) >= (int)cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = tr_create_at(dfd, name, flags);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

uint64_t tr_fsize_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    return (uint64_t)rl.rlim_cur;
}

/* ---- a FILE that stays below the file-size limit ----------------------------------- */

static ssize_t out_write(void *cookie, const char *buf, size_t n)
{
    tr_out *o = cookie;
    if (o->err) {
        errno = o->err;
        return 0;
    }
    /* past the limit the kernel would send SIGXFSZ: fail the write here */
    if (o->limit != UINT64_MAX && (n > o->limit || o->bytes > o->limit - n)) {
        o->err = errno = EFBIG;
        return 0;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(o->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            o->err = w < 0 ? errno : ENOSPC;
            o->bytes += done;
            errno = o->err;
            return 0;          /* stdio's convention for an error: 0 bytes, errno set */
        }
        done += (size_t)w;
    }
    o->bytes += n;
    return (ssize_t)n;
}

static int out_close(void *cookie)
{
    tr_out *o = cookie;
    int r = close(o->fd);
    o->fd = -1;
    /* EINTR: the file is closed all the same (Linux) */
    if (r != 0 && errno != EINTR) {
        if (!o->err) o->err = errno;
        return -1;
    }
    return 0;
}

FILE *tr_out_open(tr_out *o, int fd)
{
    o->fd = fd;
    o->bytes = 0;
    o->err = 0;
    o->limit = tr_fsize_limit();
    cookie_io_functions_t io = {.read = NULL, .write = out_write, .seek = NULL, .close = out_close};
    FILE *f = fopencookie(o, "w", io);
    if (f) setvbuf(f, NULL, _IOFBF, 1 << 20);
    return f;
}
