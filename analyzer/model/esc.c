/* Escaping: every string tranalyze takes from a trace (file names and paths,
 * host names, function and source file names, Python names, environment
 * values, command lines, thread names, NCCL config strings, error strings)
 * and every message built from them, as each output format must write it
 * (ta_esc.h, docs/analysis-format.md "Strings from the traces").
 *
 * The rule: the model and the findings' messages hold the true strings, as
 * the traces had them; a writer escapes a string once, when it writes it, by
 * the rules of its format: text (ta_esc_printf, TA_ESC_TEXT), Markdown
 * (TA_ESC_MD, ta_esc_code), HTML (TA_ESC_HTML), JSON and --timeline
 * (jw_string, jw.c, with ta_esc_hidden). Text's escaping leaves printable
 * characters (backslashes too) as they are, so escaping escaped text changes
 * nothing: the text and Markdown documents are passed through TA_ESC_DOC
 * once more when whole, so that no byte of a string a writer forgot reaches
 * a terminal raw. */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ta_esc.h"

int ta_utf8_cp(const unsigned char *p, size_t left, unsigned *cp)
{
    if (!left) return 0;
    if (p[0] < 0x80) { *cp = p[0]; return 1; }
    int n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 && p[0] < 0xf0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (!n || (size_t)n > left) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;   /* overlong, surrogate */
    if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;   /* overlong, > U+10FFFF */
    unsigned v = p[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) v = (v << 6) | (p[i] & 0x3f);
    *cp = v;
    return n;
}

int ta_esc_hidden(unsigned cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) ||           /* C0, DEL, C1 */
           cp == 0x061c || cp == 0x200e || cp == 0x200f ||      /* bidi marks */
           (cp >= 0x202a && cp <= 0x202e) ||                    /* bidi embeddings and overrides */
           (cp >= 0x2066 && cp <= 0x2069) ||                    /* bidi isolates */
           cp == 0x2028 || cp == 0x2029;                        /* line and paragraph separators */
}

static int word_byte(unsigned char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0x80; }

void ta_esc_write(FILE *o, const char *str, size_t n, int how)
{
    const unsigned char *s = (const unsigned char *)str;
    if (!s) return;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        unsigned cp;
        int k = ta_utf8_cp(s + i, n - i, &cp);
        if (!k) {                            /* not UTF-8: the byte, visibly */
            fprintf(o, "\\x%02x", c);
            i++;
            continue;
        }
        if (ta_esc_hidden(cp)) {
            if (cp == '\n' && (how & TA_ESC_DOC)) fputc('\n', o);
            else if (cp == '\n') fputs("\\n", o);
            else if (cp == '\r') fputs("\\r", o);
            else if (cp == '\t') fputs("\\t", o);
            else if (cp < 0x80) fprintf(o, "\\x%02x", cp);
            else fprintf(o, "\\u%04x", cp);
            i += (size_t)k;
            continue;
        }
        if (k > 1) {
            fwrite(s + i, 1, (size_t)k, o);
            i += (size_t)k;
            continue;
        }
        if (how & TA_ESC_HTML) {
            const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&quot;"
                          : c == '\'' ? "&#39;" : NULL;
            if (e) { fputs(e, o); i++; continue; }
        }
        if ((how & (TA_ESC_MD | TA_ESC_CODE)) && (how & TA_ESC_CELL) && c == '|') { fputs("\\|", o); i++; continue; }
        if (how & TA_ESC_MD) {
            /* what could start emphasis, code, a link, raw HTML, an entity, or (at the start) a
             * heading; '_' inside a word does nothing (GitHub's Markdown). ("- " at the start is left:
             * ta_esc_fmt's writers pass a list's "- " as an argument) */
            const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : NULL;
            if (e) { fputs(e, o); i++; continue; }
            int mark = strchr("\\`*[]~", c) != NULL ||
                       (c == '_' && !(i > 0 && word_byte(s[i - 1]) && i + 1 < n && word_byte(s[i + 1]))) ||
                       (i == 0 && c == '#');
            if (mark && c) fputc('\\', o);
        }
        fputc(c, o);
        i++;
    }
}

void ta_esc_puts(FILE *o, const char *s, int how)
{
    if (s) ta_esc_write(o, s, strlen(s), how);
}

char *ta_esc(const char *s, int how)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    ta_esc_puts(m, s, how);
    if (fclose(m) != 0 || !buf) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    return buf;
}

/* the length of s's first max bytes that does not split a UTF-8 sequence */
static size_t utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max) return n;
    size_t k = max;
    while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80) k--;
    return k;
}

void ta_esc_code(FILE *o, const char *s, size_t len, size_t max, int cell)
{
    if (!s || !len) { fputs("(empty)", o); return; }
    size_t k = utf8_cut(s, len, max);
    int tick = memchr(s, '`', k) != NULL;
    fputs(tick ? "`` " : "`", o);
    int how = TA_ESC_CODE | (cell ? TA_ESC_CELL : 0);
    size_t from = 0;
    for (size_t i = 0; i < k; i++)
        if (s[i] == '`' && i + 1 < k && s[i + 1] == '`') {   /* `` would close the span */
            ta_esc_write(o, s + from, i - from, how);
            fputc('\'', o);
            from = i + 1;
        }
    ta_esc_write(o, s + from, k - from, how);
    if (k < len) fputs("...", o);
    fputs(tick ? " ``" : "`", o);
}

/* ---- printf with its %s arguments escaped ------------------------------------------------ */
void ta_esc_vprintf(FILE *o, int how, const char *fmt, va_list ap)
{
    for (const char *p = fmt; *p;) {
        if (*p != '%') {
            const char *q = strchr(p, '%');
            size_t n = q ? (size_t)(q - p) : strlen(p);
            fwrite(p, 1, n, o);
            p += n;
            continue;
        }
        if (p[1] == '%') { fputc('%', o); p += 2; continue; }
        /* one conversion: %[flags][width][.precision][length]conversion */
        char spec[32];
        size_t sl = 0;
        const char *q = p + 1;
        int star[2] = {0, 0}, nstar = 0, lng = 0, sz = 0;
        while (*q && strchr("-+ #0", *q)) q++;
        if (*q == '*') star[nstar++] = va_arg(ap, int), q++;
        while (*q >= '0' && *q <= '9') q++;
        if (*q == '.') {
            q++;
            if (*q == '*') star[nstar++] = va_arg(ap, int), q++;
            while (*q >= '0' && *q <= '9') q++;
        }
        while (*q && strchr("hlLzjt", *q)) {
            if (*q == 'l') lng++;
            if (*q == 'z' || *q == 'j' || *q == 't') sz = 1;
            q++;
        }
        if (!*q || (size_t)(q - p) + 2 > sizeof spec) { fputs(p, o); return; }   /* not a format this file writes */
        sl = (size_t)(q - p) + 1;
        memcpy(spec, p, sl);
        spec[sl] = 0;
        char c = *q;
        p = q + 1;
#define ONE(v) (nstar == 2 ? fprintf(o, spec, star[0], star[1], v) : nstar == 1 ? fprintf(o, spec, star[0], v) \
                                                                   : fprintf(o, spec, v))
        switch (c) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            char *e = ta_esc(s ? s : "(null)", how);
            ONE(e);
            free(e);
            break;
        }
        case 'd': case 'i': case 'c':
            if (sz) ONE(va_arg(ap, intmax_t));       /* (z, j, t: 64-bit on the platforms tranalyze builds for) */
            else if (lng >= 2) ONE(va_arg(ap, long long));
            else if (lng == 1) ONE(va_arg(ap, long));
            else ONE(va_arg(ap, int));
            break;
        case 'u': case 'x': case 'X': case 'o':
            if (sz) ONE(va_arg(ap, uintmax_t));
            else if (lng >= 2) ONE(va_arg(ap, unsigned long long));
            else if (lng == 1) ONE(va_arg(ap, unsigned long));
            else ONE(va_arg(ap, unsigned));
            break;
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'a': case 'A':
            if (strchr(spec, 'L')) ONE(va_arg(ap, long double));
            else ONE(va_arg(ap, double));
            break;
        case 'p': ONE(va_arg(ap, void *)); break;
        default: fputs(spec, o); break;
        }
#undef ONE
    }
}

void ta_esc_printf(FILE *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ta_esc_vprintf(o, TA_ESC_TEXT, fmt, ap);
    va_end(ap);
}

void ta_esc_fmt(FILE *o, int how, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ta_esc_vprintf(o, how, fmt, ap);
    va_end(ap);
}
