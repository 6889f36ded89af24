/* --markdown's text (out_md_int.h), what its parts are written with:
 * parts in memory placed within their budgets, text and code made safe for
 * a line or a table cell (ta_esc.h), rank lists made short. */
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "out_md_int.h"

/* ---- buffers: each part is written to memory, then placed within its budget */

FILE *ta_md_open(mbuf *m)
{
    m->s = NULL;
    m->n = 0;
    m->f = open_memstream(&m->s, &m->n);
    if (!m->f) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    return m->f;
}
void ta_md_close(mbuf *m) { fclose(m->f); m->f = NULL; }

/* the length of s's first max bytes that does not split a UTF-8 sequence */
static size_t utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max) return n;
    size_t k = max;
    while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80) k--;
    return k;
}

/* s[0, n) into o, at most cap bytes: cut after a line when longer, saying so */
size_t ta_md_capped(FILE *o, const char *s, size_t n, size_t cap)
{
    if (n <= cap) {
        fwrite(s, 1, n, o);
        return n;
    }
    char note[160];
    int nl = snprintf(note, sizeof note, "\n*(cut here: this part passed %zu characters; `--json` has all of it)*\n\n",
                      cap);
    size_t room = cap > (size_t)nl + 3 ? cap - (size_t)nl - 3 : 0, keep = room;
    while (keep > 0 && s[keep - 1] != '\n') keep--;
    if (keep < room / 2) {               /* one long line: cut inside it */
        keep = utf8_cut(s, n, room);
        fwrite(s, 1, keep, o);
        fputs("...", o);
        fputs(note, o);
        return keep + 3 + (size_t)nl;
    }
    fwrite(s, 1, keep, o);
    fputs(note, o);
    return keep + (size_t)nl;
}
size_t ta_md_part(FILE *o, mbuf *m, size_t cap)
{
    ta_md_close(m);
    size_t n = ta_md_capped(o, m->s, m->n, cap);
    free(m->s);
    return n;
}

/* s as text of a line or a table cell: at most max bytes ("..." when cut), escaped (ta_esc.h:
 * one line, nothing hidden, no Markdown or HTML of its own, '|' escaped in a table) */
void ta_md_text(FILE *o, const char *s, size_t max, int cell)
{
    if (!s) s = "";
    size_t n = strlen(s), k = utf8_cut(s, n, max);
    ta_esc_write(o, s, k, TA_ESC_MD | (cell ? TA_ESC_CELL : 0));
    if (k < n) fputs("...", o);
}

/* s as code: `s` (`` s `` when it holds a backtick), at most max bytes */
void ta_md_code(FILE *o, const char *s, size_t len, size_t max, int cell) { ta_esc_code(o, s, len, max, cell); }

/* ---- rank lists ------------------------------------------------------------ */
static const char *ordinal(int d)
{
    if (d % 100 >= 11 && d % 100 <= 13) return "th";
    return d % 10 == 1 ? "st" : d % 10 == 2 ? "nd" : d % 10 == 3 ? "rd" : "th";
}

/* ranks r[0..n) (ascending) as ta_ranks_text writes them ("0-3, 5, 7"), within
 * maxp elements: a list of one stride "0, 8, 16, ..., 1016 (every 8th, 128 in
 * all)", else the first maxp elements and "... and K more" */
char *ta_md_ranks(const int *r, int n, int maxp)
{
    int elems = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1) j++;
        elems += j - i >= 2 ? 1 : j - i + 1;
        i = j + 1;
    }
    if (elems <= maxp) return ta_ranks_text(r, n);
    int d = r[1] - r[0], stride = d > 1;
    for (int i = 2; i < n && stride; i++) stride = r[i] - r[i - 1] == d;
    if (stride)
        return xasprintf("%d, %d, %d, ..., %d (every %d%s, %d in all)", r[0], r[1], r[2], r[n - 1], d, ordinal(d), n);
    /* the first maxp elements */
    int i = 0, e = 0;
    while (i < n && e < maxp) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1) j++;
        if (j - i >= 2) { e++; i = j + 1; }
        else { e++; i++; }
    }
    char *head = ta_ranks_text(r, i);
    char *s = xasprintf("%s, ... and %d more", head, n - i);
    free(head);
    return s;
}

