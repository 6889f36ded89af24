/* The files tranalyze writes where it is told (--html FILE, --timeline
 * FILE, and --anonymize's filtered copies of them) are made as the shim
 * makes the traces and out_reports.c the reports: new, under a temporary
 * name beside the final one (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600
 * whatever the umask), then renamed over it once whole. A link planted at
 * either name is never followed, an existing file is replaced rather than
 * written through, and a reader never sees half a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

int ta_file_commit(FILE *o, const char *path, char *tmp)
{
    int bad = ferror(o), e = bad ? (errno ? errno : EIO) : 0;
    if (fclose(o) != 0 && !bad) bad = 1, e = errno;
    if (!bad && rename(tmp, path) != 0) bad = 1, e = errno;
    if (bad) unlink(tmp);
    free(tmp);
    errno = e;
    return bad ? -1 : 0;
}
