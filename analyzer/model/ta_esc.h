/* Escaping (esc.c): the strings of the traces as each output format writes
 * them. The model and the messages hold the true strings; each writer
 * escapes a string once, as it writes it (esc.c's first comment, and
 * docs/analysis-format.md, "Strings from the traces").
 * (A part of model/'s boundary header, ta_model.h, which includes it.) */
#ifndef TA_ESC_H
#define TA_ESC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* how: one of TEXT, MD, CODE, HTML (CELL with MD or CODE; DOC with TEXT or HTML) */
#define TA_ESC_TEXT 0    /* text: control characters (C0, DEL, C1), bidi controls (U+061C, U+200E-F,
                          * U+202A-E, U+2066-9), line and paragraph separators and bytes that are not
                          * UTF-8 written visibly: \n \r \t \x1b \u202e \xff; everything else as it is */
#define TA_ESC_DOC 1     /* a document of escaped strings: its line breaks kept */
#define TA_ESC_MD 2      /* Markdown running text: also \ ` * [ ] ~ and _ (not inside a word) with a
                          * backslash, & < > as entities, # with a backslash at the string's start */
#define TA_ESC_CELL 4    /* ... in a table cell: | as \| */
#define TA_ESC_CODE 8    /* the inside of a Markdown code span (ta_esc_code writes the span) */
#define TA_ESC_HTML 16   /* HTML text and attribute values: also & < > " ' as entities */

/* the UTF-8 character at p (left bytes): its length, *cp its code point; 0 when not valid UTF-8 */
int ta_utf8_cp(const unsigned char *p, size_t left, unsigned *cp);
/* a character no output writes as it is (TA_ESC_TEXT's list; jw_string writes it \uXXXX) */
int ta_esc_hidden(unsigned cp);

void ta_esc_write(FILE *o, const char *s, size_t n, int how);
void ta_esc_puts(FILE *o, const char *s, int how);      /* NULL: nothing */
char *ta_esc(const char *s, int how);                   /* allocated; NULL: "" */
/* s[0, len) as a Markdown code span (`s`, `` s `` when it holds a backtick), at most max bytes
 * ("..." when cut), (empty) when empty; cell: in a table cell */
void ta_esc_code(FILE *o, const char *s, size_t len, size_t max, int cell);
/* fprintf whose %s arguments are escaped (how; ta_esc_printf: TA_ESC_TEXT), the format as it is:
 * each argument is escaped as one string, so a line break or Markdown of the writer's own belongs in
 * the format, never in an argument */
void ta_esc_vprintf(FILE *o, int how, const char *fmt, va_list ap);
void ta_esc_printf(FILE *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ta_esc_fmt(FILE *o, int how, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
