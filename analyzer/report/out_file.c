/* The files tranalyze writes where it is told (--html FILE, --timeline
 * FILE, and --anonymize's filtered copies of them) are made as the shim
 * makes the traces and out_reports.c the reports: new, under a temporary
 * name beside the final one (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600
 * whatever the umask), then renamed over it once whole. A link planted at
 * either name is never followed, an existing file is replaced rather than
 * written through, and a reader never sees half a file. Standard output
 * that could not be written whole is said here too (ta_stdout_failed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ta_out.h"

FILE *ta_file_create(const char *path, char **tmp)
{
    *tmp = xasprintf("%s.tmp%ld", path, (long)getpid());
    int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *o = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!o) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        errno = e;
        return NULL;
    }
    fchmod(fd, 0600);          /* (the umask could only take more away; kept for the same rule as the shim's) */
    return o;
}

/* ---- standard output: what could not be written whole is said once ----
 * stdout is a stream of ours over descriptor 1 (glibc lets a program set stdout), so that the
 * errno of the first write that failed is known when it is said, whatever stdio did since */
static int stdout_said, stdout_err;
static ssize_t stdout_write(void *cookie, const char *buf, size_t n)
{
    (void)cookie;
    for (size_t done = 0; done < n;) {
        ssize_t w = write(1, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!stdout_err) stdout_err = w < 0 ? errno : EIO;
            return -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}
void ta_stdout_open(void)
{
    static FILE *ours;         /* (once: tests/analyzer/fuzz runs the program in one process, again and again) */
    if (!ours) ours = fopencookie(NULL, "w", (cookie_io_functions_t){.write = stdout_write});
    if (ours) stdout = ours;   /* (else the C library's: its errors are said as it leaves errno) */
    clearerr(stdout);
    stdout_said = stdout_err = 0;
}
void ta_stdout_said(int err)
{
    if (!stdout_said++)
        fprintf(stderr, "tranalyze: cannot write the report to standard output: %s\n", strerror(err ? err : EIO));
}
int ta_stdout_failed(void)
{
    errno = 0;
    int bad = fflush(stdout) != 0;
    if (!bad && !ferror(stdout) && !stdout_err) return 0;
    ta_stdout_said(stdout_err ? stdout_err : errno);
    return 1;
}
int ta_stdout_done(void)
{
    if (ta_stdout_failed()) return -1;
    /* a file system that reports a failed write at close (NFS: each close flushes): a copy of the
     * descriptor closed, stdout left open */
    int d = dup(1);
    errno = 0;
    if (d >= 0 && close(d) != 0 && errno != EINTR) {
        ta_stdout_said(errno);
        return -1;
    }
    return 0;
}

int ta_file_commit(FILE *o, const char *path, char *tmp)
{
    errno = 0;                              /* (a failed write leaves its data in the buffer: errno anew) */
    int bad = fflush(o) != 0 || ferror(o), e = bad ? (errno ? errno : EIO) : 0;
    if (fclose(o) != 0 && !bad) bad = 1, e = errno;
    if (!bad && rename(tmp, path) != 0) bad = 1, e = errno;
    if (bad) unlink(tmp);
    free(tmp);
    errno = e;
    return bad ? -1 : 0;
}
