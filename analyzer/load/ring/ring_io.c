/* A ring file's bytes as every part of its reader takes them (ring.c, the
 * header, slots and records; ring_blobs.c, the blob area; ring_mem.c):
 * bytes at an offset by pread, never through a mapping (a short read is
 * zeros and r->ioerr, where a mapping would give SIGBUS); the notes kept
 * with the ring; and a fixed-size char array of the file made a string that
 * is safe in any output. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ring_int.h"

/* len bytes at off of the file into buf: 0; -1 when they could not all be
 * read (the file shrank after it was opened, or a read error): the rest of
 * buf is zeros (a record there is torn, a blob kind there ends the blobs)
 * and r->ioerr keeps the first cause (noted once, ta_ring_read) */
int ring_rd_at(rd *r, uint64_t off, void *buf, size_t len)
{
    uint8_t *b = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t k = pread(r->fd, b + got, len - got, (off_t)(off + got));
        if (k > 0) { got += (size_t)k; continue; }
        if (k < 0 && errno == EINTR) continue;
        if (!r->ioerr) r->ioerr = k < 0 ? (errno ? errno : EIO) : -1;
        memset(b + got, 0, len - got);
        return -1;
    }
    return 0;
}

void ring_note(rd *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char one[1];
    va_list aq;
    va_copy(aq, ap);
    int len = vsnprintf(one, sizeof one, fmt, aq);
    va_end(aq);
    char *s = xmalloc((size_t)len + 1);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    ta_ring_info *i = r->info;
    i->notes = xrealloc(i->notes, sizeof *i->notes * (size_t)(i->nnotes + 1));
    i->notes[i->nnotes++] = s;
}

static int utf8_ok(const unsigned char *s)
{
    while (*s) {
        int k = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2 : (*s & 0xf8) == 0xf0 ? 3 : -1;
        if (k < 0) return 0;
        s++;
        for (int j = 0; j < k; j++, s++)
            if ((*s & 0xc0) != 0x80) return 0;
    }
    return 1;
}

/* a fixed-size char array of the file as a string: cut at its NUL or its
 * end, control characters (and, unless it is valid UTF-8, bytes >= 0x80)
 * replaced, so it can go into any output as it is */
char *ring_str(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    char *o = xmalloc(n + 1);
    memcpy(o, s, n);
    o[n] = 0;
    int ok = utf8_ok((const unsigned char *)o);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)o[i];
        if (c < 0x20 || c == 0x7f || (c >= 0x80 && !ok)) o[i] = '?';
    }
    return o;
}
