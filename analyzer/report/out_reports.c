/* --reports PREFIX: the three documents of one analysis written whole
 * beside the traces, PREFIX.txt (the text report), PREFIX.json (--json) and
 * PREFIX.md (--markdown), as tranalyze --watch and trshim run leave them in
 * the trace folder (docs/live.md). The folder may be shared with other
 * users: each file is made new (O_EXCL, O_NOFOLLOW, mode 0600) under a
 * temporary name and renamed over the final one, so that a link planted at
 * either name is never followed and a reader never sees half a report. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/ta_model.h"
#include "ta_out.h"

/* text: the text document as stdout got it (the writer numbers root causes as it writes them: once) */
typedef void (*report_fn)(ta_an *, FILE *, const char *text);

static void write_text(ta_an *a, FILE *o, const char *text)
{
    if (text) fputs(text, o);
    else ta_out_text(a, o);
}
static void write_json(ta_an *a, FILE *o, const char *text) { (void)text; ta_out_json(a, o); }
static void write_md(ta_an *a, FILE *o, const char *text) { (void)text; ta_out_markdown(a, o); }

static const struct { const char *ext; report_fn fn; } reports[] = {
    {".txt", write_text}, {".json", write_json}, {".md", write_md}};

static int write_one(ta_an *a, const char *prefix, const char *ext, report_fn fn, const char *text)
{
    size_t n = strlen(prefix) + strlen(ext) + 32;
    char *path = xmalloc(n), *tmp = xmalloc(n);
    snprintf(path, n, "%s%s", prefix, ext);
    snprintf(tmp, n, "%s%s.tmp%ld", prefix, ext, (long)getpid());
    int rc = -1, fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *o = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!o) {
        ta_esc_printf(stderr, "tranalyze: --reports: cannot write %s: %s\n", tmp, strerror(errno));
        if (fd >= 0) close(fd), unlink(tmp);
        goto out;
    }
    int json = a->json, md = a->markdown;   /* the writers read the format from the analysis */
    a->json = fn == write_json;
    a->markdown = fn == write_md;
    fn(a, o, text);
    a->json = json;
    a->markdown = md;
    errno = 0;                              /* (a failed write leaves its data in the buffer: errno anew) */
    int bad = fflush(o) != 0 || ferror(o), e = bad ? (errno ? errno : EIO) : 0;
    if (fclose(o) != 0 && !bad) bad = 1, e = errno;
    if (bad) {
        ta_esc_printf(stderr, "tranalyze: --reports: cannot write %s: %s\n", path, strerror(e));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        ta_esc_printf(stderr, "tranalyze: --reports: cannot put %s in place: %s\n", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(path);
    free(tmp);
    return rc;
}

int ta_out_reports(ta_an *a, const char *prefix, const char *text)
{
    int rc = 0;
    for (size_t i = 0; i < sizeof reports / sizeof *reports; i++)
        if (write_one(a, prefix, reports[i].ext, reports[i].fn, text) < 0) rc = -1;
    return rc;
}
