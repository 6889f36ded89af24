/* --markdown: a summary to paste into a bug report. GitHub takes an issue
 * body of 65,536 characters; this document stays within TA_MD_LIMIT
 * (60,000) at any number of ranks or findings, by design:
 *   - each part has a budget (B_* below, together under the limit) and is
 *     made of items that are bounded in number and in length;
 *   - ranks are written as ranges ("0-511, 513-1023"), a strided list as
 *     its stride ("0, 8, 16, ..., 1016 (every 8th, 128 in all)"), any other
 *     long list as its first elements and "... and K more" (also inside the
 *     findings' own lines, which the kinds' writers make: compact());
 *   - a list that grows with the ranks or the findings shows its first N
 *     and "... and K more" (findings, consequences, warnings, input
 *     problems, other jobs, rows);
 *   - the rank table: one row per rank up to MD_PER_RANK ranks; beyond,
 *     ranks that ended alike (the same last seq on each communicator, the
 *     same end, root cause or not) share one row, with their ranks as
 *     ranges, the number of hosts and the range of peak memory;
 *   - the environment: versions and command line once when every rank
 *     agrees, else each value with its ranks; the variables every rank
 *     shares once (a table in <details>), then only the variables that
 *     differ, each value with its ranks;
 *   - long tables sit in <details>.
 * A part that would still pass its budget (a crafted trace's enormous
 * strings) is cut at a line, and says so: --json has everything. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ta_crash.h"
#include "ta_out.h"
#include "ta_tx.h"

/* budgets of the parts, in bytes (a character is at least one): 59,000 in all */
enum { B_HEAD = 1500, B_FIND = 24000, B_WARN = 2500, B_RANKS = 14000, B_ENV = 13000, B_NOTES = 4000 };
_Static_assert(B_HEAD + B_FIND + B_WARN + B_RANKS + B_ENV + B_NOTES < TA_MD_LIMIT, "the parts fit the limit");
enum {
    MD_ELEMS = 12,          /* elements of a rank list in running text */
    MD_CELL_ELEMS = 8,      /* ... in a table cell */
    MD_ROOTS = 4,           /* root causes shown */
    MD_OTHERS_OPEN = 3,     /* other findings shown open, */
    MD_OTHERS = 15,         /* ... in all (the rest of them in <details>) */
    B_ROOT = 8000,          /* one root cause's lines */
    B_OTHER = 3000,         /* one other finding's */
    MD_WARNS = 5,
    MD_NOTES = 12,
    MD_OTHER_JOBS = 8,
    MD_PER_RANK = 24,       /* up to this many ranks: a row each */
    MD_ROWS = 24,           /* rows of ranks that ended alike */
    MD_MISSING_ROWS = 8,    /* rows of ranks without a trace */
    MD_DETAILS_ROWS = 12,   /* a longer rank table goes in <details> */
    MD_ENV_SHARED = 40,     /* variables every rank shares */
    MD_ENV_DIFF = 16,       /* variables that differ */
    MD_ENV_VALUES = 3,      /* other values of one that differs */
};

/* ---- buffers: each part is written to memory, then placed within its budget */
typedef struct { char *s; size_t n; FILE *f; } mbuf;

static FILE *mb_open(mbuf *m)
{
    m->s = NULL;
    m->n = 0;
    m->f = open_memstream(&m->s, &m->n);
    if (!m->f) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    return m->f;
}
static void mb_close(mbuf *m) { fclose(m->f); m->f = NULL; }

/* the length of s's first max bytes that does not split a UTF-8 sequence */
static size_t utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max) return n;
    size_t k = max;
    while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80) k--;
    return k;
}

/* s[0, n) into o, at most cap bytes: cut after a line when longer, saying so */
static size_t put_capped(FILE *o, const char *s, size_t n, size_t cap)
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
static size_t put_part(FILE *o, mbuf *m, size_t cap)
{
    mb_close(m);
    size_t n = put_capped(o, m->s, m->n, cap);
    free(m->s);
    return n;
}

/* s as text of a line or a table cell: at most max bytes ("..." when cut), one line,
 * '|' escaped in a table, '<' never starting HTML */
static void put_text(FILE *o, const char *s, size_t max, int cell)
{
    if (!s) s = "";
    size_t n = strlen(s), k = utf8_cut(s, n, max);
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n' || c == '\r' || c == '\t' || c < 0x20 || c == 0x7f) fputc(' ', o);
        else if (c == '|' && cell) fputs("\\|", o);
        else if (c == '<') fputs("&lt;", o);
        else fputc(c, o);
    }
    if (k < n) fputs("...", o);
}

/* s as code: `s` (`` s `` when it holds a backtick), at most max bytes */
static void put_code(FILE *o, const char *s, size_t len, size_t max, int cell)
{
    size_t k = utf8_cut(s, len, max);
    if (!len) { fputs("(empty)", o); return; }
    int tick = memchr(s, '`', k) != NULL;
    fputs(tick ? "`` " : "`", o);
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n' || c == '\r' || c == '\t' || c < 0x20 || c == 0x7f) fputc(' ', o);
        else if (c == '|' && cell) fputs("\\|", o);
        else if (c == '`' && i + 1 < k && s[i + 1] == '`') fputc('\'', o);   /* `` would close the span */
        else fputc(c, o);
    }
    if (k < len) fputs("...", o);
    fputs(tick ? " ``" : "`", o);
}

/* ---- rank lists ------------------------------------------------------------ */
static const char *ordinal(int d)
{
    if (d % 100 >= 11 && d % 100 <= 13) return "th";
    return d % 10 == 1 ? "st" : d % 10 == 2 ? "nd" : d % 10 == 3 ? "rd" : "th";
}

/* ranks r[0..n) (ascending) as ta_ranks_text writes them ("0-3, 5, 7"), within
 * maxp elements: a list of one stride "0, 8, 16, ..., 1016 (every 8th, 128 in
 * all)", else the first maxp elements and "... and K more" */
static char *md_ranks(const int *r, int n, int maxp)
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

/* ---- long lists inside the findings' own lines ----------------------------- */
static int list_glued(int c) { return isalnum(c) || c == '.' || c == '#' || c == '-' || c == '_'; }

/* one element of a list at s[i]: "N" or "N-M" (N <= M), followed by ", " and a
 * digit (more: 1) or by what cannot continue a word (the last: 0); -1: none */
static int list_elem(const char *s, size_t n, size_t i, long *lo, long *hi, size_t *end)
{
    long v = 0, w;
    size_t k = i;
    if (k >= n || !isdigit((unsigned char)s[k])) return -1;
    while (k < n && isdigit((unsigned char)s[k]) && v < 100000000) v = v * 10 + (s[k++] - '0');
    w = v;
    if (k + 1 < n && s[k] == '-' && isdigit((unsigned char)s[k + 1])) {
        w = 0;
        k++;
        while (k < n && isdigit((unsigned char)s[k]) && w < 100000000) w = w * 10 + (s[k++] - '0');
        if (w < v) return -1;
    }
    if (k < n && isdigit((unsigned char)s[k])) return -1;    /* too long for a rank */
    *lo = v, *hi = w, *end = k;
    if (k + 2 < n && s[k] == ',' && s[k + 1] == ' ' && isdigit((unsigned char)s[k + 2])) return 1;
    if (k < n && list_glued((unsigned char)s[k])) return -1;
    return 0;
}

/* s[0, n) into o with every list of more than maxp numbers and ranges
 * ("0, 8, 16, 24, ...": ranks, as ta_ranks_text writes them) made short by md_ranks */
static void compact(FILE *o, const char *s, size_t n, int maxp)
{
    long *lv = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < n;) {
        if (!isdigit((unsigned char)s[i]) || (i > 0 && list_glued((unsigned char)s[i - 1]))) {
            fputc(s[i++], o);
            continue;
        }
        /* the elements from here, as (lo, hi) pairs */
        size_t k = i, last_end = i, nel = 0;
        long lo, hi;
        size_t end;
        int more;
        while ((more = list_elem(s, n, k, &lo, &hi, &end)) >= 0) {
            if (2 * nel + 2 > cap) { cap = cap ? cap * 2 : 64; lv = xrealloc(lv, cap * sizeof *lv); }
            lv[2 * nel] = lo, lv[2 * nel + 1] = hi;
            nel++;
            last_end = end;
            if (!more) break;
            k = end + 2;
        }
        if (nel <= (size_t)maxp) {     /* short, or no list: as it is, up to the first element's end */
            size_t stop = nel ? last_end : i + 1;
            while (stop < n && isdigit((unsigned char)s[stop])) stop++;
            fwrite(s + i, 1, stop - i, o);
            i = stop;
            continue;
        }
        long total = 0;
        for (size_t e = 0; e < nel; e++) total += lv[2 * e + 1] - lv[2 * e] + 1;
        if (total > 1 << 26) {          /* not ranks */
            fwrite(s + i, 1, last_end - i, o);
            i = last_end;
            continue;
        }
        int *r = xmalloc(sizeof(int) * (size_t)total), m = 0;
        for (size_t e = 0; e < nel; e++)
            for (long v = lv[2 * e]; v <= lv[2 * e + 1]; v++) r[m++] = (int)v;
        char *t = md_ranks(r, m, maxp);
        fputs(t, o);
        free(t);
        free(r);
        i = last_end;
    }
    free(lv);
}

/* a string (a finding's lines, a warning) with long lists made short, at most max bytes */
static char *compact_str(const char *s, size_t n, size_t max, size_t *len)
{
    mbuf m;
    FILE *f = mb_open(&m);
    compact(f, s, n, MD_ELEMS);
    mb_close(&m);
    mbuf c;
    f = mb_open(&c);
    put_capped(f, m.s, m.n, max);
    mb_close(&c);
    free(m.s);
    *len = c.n;
    return c.s;
}

/* ---- the header --------------------------------------------------------------- */
static void header(ta_an *a, FILE *o)
{
    mbuf m;
    FILE *f = mb_open(&m);
    fputs("## tranalyze: job ", f);
    put_code(f, a->job ? a->job : "", a->job ? strlen(a->job) : 0, 100, 0);
    fprintf(f, "\n\n%d of %d ranks traced (%d files).", a->ntr, a->world, a->nfiles);
    if (a->nother_jobs) {
        fprintf(f, " The folder holds %d jobs; this is the newest (others: ", a->njobs);
        for (int i = 0; i < a->nother_jobs && i < MD_OTHER_JOBS; i++) {
            if (i) fputs(", ", f);
            put_text(f, a->other_jobs[i], 64, 0);
        }
        if (a->nother_jobs > MD_OTHER_JOBS) fprintf(f, ", ... and %d more", a->nother_jobs - MD_OTHER_JOBS);
        fputs("; `--job ID` analyses another)", f);
    }
    fputs("\n\n", f);
    put_part(o, &m, B_HEAD);
}

/* ---- findings -------------------------------------------------------------------- */
typedef struct { char *s; size_t n; int i; } block;

static block finding_block(ta_an *a, int i, int top)
{
    mbuf m;
    FILE *f = mb_open(&m);
    ta_out_finding(a, f, &a->f[i], 1, top);
    mb_close(&m);
    block b = {NULL, 0, i};
    b.s = compact_str(m.s, m.n, top ? B_ROOT : B_OTHER, &b.n);
    free(m.s);
    return b;
}

/* the job's end by an abort that released operations (aborted_out.c): numbers and ranks only */
static void abort_line(ta_an *a, FILE *f)
{
    char *ab = ta_abort_text(a);
    if (ab) fprintf(f, "**Ended by abort:** %s.\n\n", ab);
    free(ab);
}

static void findings(ta_an *a, FILE *o)
{
    mbuf m;
    FILE *f = mb_open(&m);
    int nroot = 0;
    for (int i = 0; i < a->nf; i++) nroot += a->f[i].root;
    if (!a->nf) fputs("**No problem found.**\n\n", f);
    if (a->nf && !nroot) fputs("**Nothing hung or failed.**\n\n", f);   /* only stragglers */
    size_t room = B_FIND - 600;      /* the headings, <details> and the line about the rest */
    int *unshown = xcalloc((size_t)K_N + 1, sizeof(int)), nunshown = 0;
    block *shown = xcalloc((size_t)(MD_ROOTS + MD_OTHERS), sizeof *shown);
    int nroot_shown = 0, nshown = 0;
    for (int pass = 0; pass < 2; pass++)       /* root causes, then the others */
        for (int i = 0; i < a->nf; i++) {
            if (a->f[i].root != !pass) continue;
            block b = {NULL, 0, i};
            if (pass ? nshown - nroot_shown < MD_OTHERS : nroot_shown < MD_ROOTS) b = finding_block(a, i, !pass);
            if (b.s && b.n <= room) {
                room -= b.n;
                shown[nshown++] = b;
                nroot_shown += !pass;
            } else {
                free(b.s);
                int k = a->f[i].kind >= 0 && a->f[i].kind < K_N ? a->f[i].kind : K_N;
                unshown[k]++;
                nunshown++;
            }
        }
    if (nroot_shown) fputs("### Root cause\n\n", f);
    int nother = nshown - nroot_shown;
    for (int k = 0; k < nshown; k++) {
        if (k == nroot_shown) {
            abort_line(a, f);      /* right after the root cause */
            fprintf(f, "### Other findings (%d)\n\n", a->nf - nroot);
        }
        if (k == nroot_shown + MD_OTHERS_OPEN)
            fprintf(f, "<details><summary>%d more findings</summary>\n\n", nother - MD_OTHERS_OPEN);
        fwrite(shown[k].s, 1, shown[k].n, f);
        free(shown[k].s);
    }
    if (nother > MD_OTHERS_OPEN) fputs("</details>\n\n", f);
    if (nshown == nroot_shown) abort_line(a, f);
    if (nunshown) {
        fprintf(f, "- ... and %d more finding%s not shown here (", nunshown, nunshown > 1 ? "s" : "");
        int first = 1;
        for (int k = 0; k <= K_N; k++)
            if (unshown[k]) {
                fprintf(f, "%s%s: %d", first ? "" : ", ", k < K_N ? ta_kind_names[k] : "?", unshown[k]);
                first = 0;
            }
        fputs("): `--json` lists them all\n\n", f);
    }
    free(unshown);
    free(shown);
    put_part(o, &m, B_FIND);
}

static void warnings(ta_an *a, FILE *o)
{
    if (!a->nwarns) return;
    mbuf m;
    FILE *f = mb_open(&m);
    fputs("### Warnings\n\n", f);
    for (int i = 0; i < a->nwarns && i < MD_WARNS; i++) {
        size_t n;
        const char *t = a->warns[i].text ? a->warns[i].text : "";
        char *c = compact_str(t, strlen(t), 420, &n);
        fputs("- ", f);
        put_text(f, c, 420, 0);
        fputc('\n', f);
        free(c);
    }
    if (a->nwarns > MD_WARNS) fprintf(f, "- ... and %d more (`--json` lists them all)\n", a->nwarns - MD_WARNS);
    fputc('\n', f);
    put_part(o, &m, B_WARN);
}

static void notes(ta_an *a, FILE *o)
{
    if (!a->nnotes) return;
    mbuf m;
    FILE *f = mb_open(&m);
    fputs("#### Input problems\n\n", f);
    for (int i = 0; i < a->nnotes && i < MD_NOTES; i++) {
        const ta_note *n = &a->notes[i];
        fputs("- ", f);
        if (n->file) {
            put_code(f, n->file, strlen(n->file), 160, 0);
            fputs(": ", f);
        }
        size_t len;
        const char *t = n->text ? n->text : "";
        char *c = compact_str(t, strlen(t), 300, &len);
        put_text(f, c, 300, 0);
        free(c);
        fputs(n->fatal ? " (skipped)\n" : "\n", f);
    }
    if (a->nnotes > MD_NOTES) fprintf(f, "- ... and %d more (`--json` lists them all)\n", a->nnotes - MD_NOTES);
    fputc('\n', f);
    put_part(o, &m, B_NOTES);
}

/* ---- the rank table ------------------------------------------------------------------ */
typedef struct {
    char *key;           /* what makes ranks alike: root cause, last seqs, end */
    char *end;
    int64_t peak;
} rank_info;

static rank_info *g_ri;  /* for the sort below (tranalyze is single-threaded here) */
static int cmp_alike(const void *x, const void *y)
{
    int i = *(const int *)x, j = *(const int *)y;
    int c = strcmp(g_ri[i].key, g_ri[j].key);
    return c ? c : (i > j) - (i < j);
}
static int cmp_str(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }
static int distinct(const char **v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    int d = 0;
    for (int i = 0; i < n; i++) d += !i || strcmp(v[i], v[i - 1]);
    return d;
}

static void empty_cells(FILE *f, int n)
{
    for (int k = 0; k < n; k++) fputs(" |", f);
    fputc('\n', f);
}

typedef struct { int first, n; int *idx; int root; } rgroup;   /* ranks alike: trace indices */
static int cmp_group_first(const void *x, const void *y)
{
    const rgroup *p = x, *q = y;
    return (p->first > q->first) - (p->first < q->first);
}

static char **g_mtext;   /* for cmp_missing */
static const int *g_mranks;
static int cmp_missing(const void *x, const void *y)
{
    int i = *(const int *)x, j = *(const int *)y;
    int c = strcmp(g_mtext[i], g_mtext[j]);
    return c ? c : (g_mranks[i] > g_mranks[j]) - (g_mranks[i] < g_mranks[j]);
}
typedef struct { int at, n; int *r; } mgroup;   /* ranks without a trace of one text: morder[at, at + n) */
static int cmp_mgroup(const void *x, const void *y)
{
    const mgroup *p = x, *q = y;
    return (p->r[0] > q->r[0]) - (p->r[0] < q->r[0]);
}

static void group_row(ta_an *a, FILE *f, const rgroup *g, const rank_info *ri, int nfam)
{
    int *r = xmalloc(sizeof(int) * (size_t)g->n);
    const char **hosts = xmalloc(sizeof(char *) * (size_t)g->n);
    int64_t lo = INT64_MAX, hi = -1;
    for (int k = 0; k < g->n; k++) {
        const ta_trace *t = a->tr[g->idx[k]];
        r[k] = t->rank;
        hosts[k] = t->host ? t->host : "";
        int64_t p = ri[g->idx[k]].peak;
        if (p >= 0 && p < lo) lo = p;
        if (p > hi) hi = p;
    }
    char *rt = md_ranks(r, g->n, MD_CELL_ELEMS);
    const ta_trace *t0 = a->tr[g->idx[0]];
    fprintf(f, "| %s%s | ", rt, g->root ? " **(root cause)**" : "");
    if (distinct(hosts, g->n) == 1) put_text(f, hosts[0], 64, 1);
    else fprintf(f, "%d hosts", distinct(hosts, g->n));
    if (g->n == 1) fprintf(f, " | %lld | ", (long long)t0->pid);
    else fputs(" | | ", f);
    put_text(f, ri[g->idx[0]].end, 240, 1);
    fputs(" |", f);
    for (int k = 0; k < nfam; k++)
        if (k < t0->ncomms) fprintf(f, " %u |", t0->comms[k].nseq);
        else fputs(" |", f);
    char *pl = ta_human(hi < 0 ? -1 : lo), *ph = ta_human(hi);
    if (hi < 0 || !strcmp(pl, ph)) fprintf(f, " %s |\n", ph);
    else fprintf(f, " %s - %s |\n", pl, ph);
    free(pl); free(ph); free(rt); free(r); free(hosts);
}

static void ranks_table(ta_an *a, FILE *o)
{
    mbuf m;
    FILE *f = mb_open(&m);
    fputs("### Ranks\n\n", f);
    int nfam = 0;
    for (int i = 0; i < a->ntr; i++) if (a->tr[i]->ncomms > nfam) nfam = a->tr[i]->ncomms;
    if (nfam > 4) nfam = 4;
    rank_info *ri = xcalloc((size_t)a->ntr + 1, sizeof *ri);
    for (int i = 0; i < a->ntr; i++) {
        ta_trace *t = a->tr[i];
        ri[i].peak = -1;
        for (int k = 0; k < t->nmdev; k++) if (t->mdev[k].peak > ri[i].peak) ri[i].peak = t->mdev[k].peak;
        ri[i].end = ta_end_text(a, t);
    }
    int per_rank = a->ntr <= MD_PER_RANK;
    /* groups of ranks alike (a group per rank when there are few) */
    rgroup *gs = xcalloc((size_t)a->ntr + 1, sizeof *gs);
    int *order = xmalloc(sizeof(int) * ((size_t)a->ntr + 1)), ng = 0;
    for (int i = 0; i < a->ntr; i++) {
        order[i] = i;
        if (per_rank) continue;
        const ta_trace *t = a->tr[i];      /* root cause, the last seq on every communicator, the end */
        mbuf kb;
        FILE *k = mb_open(&kb);
        fprintf(k, "%d|%d|", a->root && a->root[i], t->ncomms);
        for (int c = 0; c < t->ncomms; c++) fprintf(k, "%u ", t->comms[c].nseq);
        fprintf(k, "|%s", ri[i].end);
        mb_close(&kb);
        ri[i].key = kb.s;
    }
    if (!per_rank) {
        g_ri = ri;
        qsort(order, (size_t)a->ntr, sizeof *order, cmp_alike);
    }
    for (int i = 0; i < a->ntr;) {
        int j = i + 1;
        if (!per_rank)
            while (j < a->ntr && !strcmp(ri[order[j]].key, ri[order[i]].key)) j++;
        gs[ng].idx = order + i;
        gs[ng].n = j - i;
        gs[ng].first = a->tr[order[i]]->rank;
        gs[ng].root = a->root && a->root[order[i]];
        ng++;
        i = j;
    }
    /* the rows shown: root causes' first, then by first rank; in rank order */
    int limit = per_rank ? MD_PER_RANK : MD_ROWS, nshow = 0, hidden_ranks = 0;
    rgroup *show = xcalloc((size_t)ng + 1, sizeof *show);
    for (int pass = 0; pass < 2; pass++) {
        rgroup *tmp = xmalloc(sizeof *tmp * ((size_t)ng + 1));
        int nt = 0;
        for (int k = 0; k < ng; k++) if (gs[k].root == !pass) tmp[nt++] = gs[k];
        qsort(tmp, (size_t)nt, sizeof *tmp, cmp_group_first);
        for (int k = 0; k < nt; k++) {
            if (nshow < limit) show[nshow++] = tmp[k];
            else hidden_ranks += tmp[k].n;
        }
        free(tmp);
    }
    qsort(show, (size_t)nshow, sizeof *show, cmp_group_first);
    /* ranks without a trace, alike when their text is: sorted by (text, rank) */
    char **mtext = xcalloc((size_t)a->nmissing + 1, sizeof *mtext);
    int *morder = xmalloc(sizeof(int) * ((size_t)a->nmissing + 1)), nmg = 0;
    for (int i = 0; i < a->nmissing; i++) mtext[i] = ta_missing_text(a, i), morder[i] = i;
    g_mtext = mtext;
    g_mranks = a->missing_ranks;
    qsort(morder, (size_t)a->nmissing, sizeof *morder, cmp_missing);
    for (int i = 0; i < a->nmissing; i++) nmg += !i || strcmp(mtext[morder[i]], mtext[morder[i - 1]]);
    int missing_rows = nmg < MD_MISSING_ROWS ? nmg : MD_MISSING_ROWS;
    int rows = nshow + missing_rows + (ng > nshow) + (nmg > missing_rows) + !!a->missing_unlisted;

    if (!per_rank) {
        const char **hosts = xmalloc(sizeof(char *) * ((size_t)a->ntr + 1));
        for (int i = 0; i < a->ntr; i++) hosts[i] = a->tr[i]->host ? a->tr[i]->host : "";
        fprintf(f, "%d ranks on %d hosts. Ranks that ended alike (the same last seq on each communicator, the same "
                "end) share a row: %d row%s.\n\n", a->ntr, distinct(hosts, a->ntr), ng, ng == 1 ? "" : "s");
        free(hosts);
    }
    int details = rows > MD_DETAILS_ROWS;
    if (details) fprintf(f, "<details><summary>The rank table (%d rows)</summary>\n\n", rows);
    fputs(per_rank ? "| rank | host | pid | ended |" : "| ranks | host | pid | ended |", f);
    for (int k = 0; k < nfam; k++) fprintf(f, " comm #%d last seq |", k);
    fputs(" peak memory |\n|---|---|---|---|", f);
    for (int k = 0; k < nfam; k++) fputs("---|", f);
    fputs("---|\n", f);
    for (int k = 0; k < nshow; k++) group_row(a, f, &show[k], ri, nfam);
    if (ng > nshow) {
        fprintf(f, "| ... | | | %d more row%s (%d ranks): `--json` lists every rank |", ng - nshow,
                ng - nshow > 1 ? "s" : "", hidden_ranks);
        empty_cells(f, nfam + 1);
    }
    /* ranks without a trace: a row per text, in the order of their first rank */
    mgroup *mg = xcalloc((size_t)nmg + 1, sizeof *mg);
    for (int i = 0, k = -1; i < a->nmissing; i++) {
        if (!i || strcmp(mtext[morder[i]], mtext[morder[i - 1]])) mg[++k].at = i;
        mg[k].n++;
    }
    for (int k = 0; k < nmg; k++) {
        mg[k].r = xmalloc(sizeof(int) * (size_t)mg[k].n);
        for (int q = 0; q < mg[k].n; q++) mg[k].r[q] = a->missing_ranks[morder[mg[k].at + q]];
        ta_ints_sort(mg[k].r, mg[k].n);
    }
    qsort(mg, (size_t)nmg, sizeof *mg, cmp_mgroup);
    int rest = 0;
    for (int k = 0; k < nmg; k++) {
        if (k >= missing_rows) { rest += mg[k].n; continue; }
        char *rt = md_ranks(mg[k].r, mg[k].n, MD_CELL_ELEMS);
        fprintf(f, "| %s | | | ", rt);
        put_text(f, mtext[morder[mg[k].at]], 240, 1);
        fputs(" |", f);
        empty_cells(f, nfam + 1);
        free(rt);
    }
    if (rest) {
        fprintf(f, "| ... | | | %d more ranks without a trace |", rest);
        empty_cells(f, nfam + 1);
    }
    for (int k = 0; k < nmg; k++) free(mg[k].r);
    free(mg);
    if (a->missing_unlisted) {
        fprintf(f, "| ... | | | %d more ranks without a trace |", a->missing_unlisted);
        empty_cells(f, nfam + 1);
    }
    fputc('\n', f);
    if (details) fputs("</details>\n\n", f);
    for (int i = 0; i < a->nmissing; i++) free(mtext[i]);
    free(mtext); free(morder);
    for (int i = 0; i < a->ntr; i++) { free(ri[i].key); free(ri[i].end); }
    free(ri); free(gs); free(order); free(show);
    put_part(o, &m, B_RANKS);
}

/* ---- the environment ------------------------------------------------------------------- */
/* one rank's value of a variable or of a version: name[0, nl) = val */
typedef struct { const char *name; size_t nl; const char *val; int tr; } kv;

static int cmp_kv(const void *x, const void *y)
{
    const kv *p = x, *q = y;
    size_t n = p->nl < q->nl ? p->nl : q->nl;
    int c = memcmp(p->name, q->name, n);
    if (c) return c;
    if (p->nl != q->nl) return p->nl < q->nl ? -1 : 1;
    c = strcmp(p->val, q->val);
    return c ? c : (p->tr > q->tr) - (p->tr < q->tr);
}

typedef struct { const char *val; int *r; int n; } vgroup;   /* one value and its ranks; val NULL: not set */
static int cmp_vgroup(const void *x, const void *y)
{
    const vgroup *p = x, *q = y;
    if (p->n != q->n) return p->n > q->n ? -1 : 1;
    return (p->r[0] > q->r[0]) - (p->r[0] < q->r[0]);
}

/* the values of one name, kvs v[0, n) sorted by value then trace: groups, most ranks first, with
 * the ranks that lack it as a group of val NULL; returns their number */
static int value_groups(ta_an *a, const kv *v, int n, vgroup **out)
{
    vgroup *g = xcalloc((size_t)n + 2, sizeof *g);
    int ng = 0;
    char *has = xcalloc((size_t)a->ntr + 1, 1);
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && !strcmp(v[j].val, v[i].val)) j++;
        g[ng].val = v[i].val;
        g[ng].r = xmalloc(sizeof(int) * (size_t)(j - i));
        for (int k = i; k < j; k++)
            if (!has[v[k].tr]) { has[v[k].tr] = 1; g[ng].r[g[ng].n++] = a->tr[v[k].tr]->rank; }
        if (g[ng].n) ng++;
        else free(g[ng].r);
        i = j;
    }
    int unset = 0;
    for (int i = 0; i < a->ntr; i++) unset += !has[i];
    if (unset) {
        g[ng].r = xmalloc(sizeof(int) * (size_t)unset);
        for (int i = 0; i < a->ntr; i++) if (!has[i]) g[ng].r[g[ng].n++] = a->tr[i]->rank;
        ng++;
    }
    free(has);
    qsort(g, (size_t)ng, sizeof *g, cmp_vgroup);
    *out = g;
    return ng;
}
static void free_groups(vgroup *g, int ng)
{
    for (int k = 0; k < ng; k++) free(g[k].r);
    free(g);
}

/* "2.28.9 on 1022 ranks; 2.27.3 on ranks 5, 9; ... and 2 more values" */
static void values_text(FILE *f, const vgroup *g, int ng, int ntr, int code, size_t max)
{
    for (int k = 0; k < ng && k <= MD_ENV_VALUES; k++) {
        if (k) fputs("; ", f);
        if (!g[k].val) fputs("(not known)", f);
        else if (code) put_code(f, g[k].val, strlen(g[k].val), max, 0);
        else put_text(f, g[k].val, max, 0);
        if (!k && 2 * g[k].n > ntr) fprintf(f, " on %d ranks", g[k].n);   /* most of them */
        else {
            char *rt = md_ranks(g[k].r, g[k].n, MD_CELL_ELEMS);
            fprintf(f, " on rank%s %s", g[k].n > 1 ? "s" : "", rt);
            free(rt);
        }
    }
    if (ng > MD_ENV_VALUES + 1) fprintf(f, "; ... and %d more values", ng - MD_ENV_VALUES - 1);
}

static char *cuda_version_text(int64_t v)
{
    if (v == TA_NULL64 || v <= 0) return NULL;
    return xasprintf("%lld.%lld", (long long)(v / 1000), (long long)(v % 1000 / 10));
}

enum { V_CMD, V_TRSHIM, V_NCCL, V_NCCL_LIB, V_CUDA_RT, V_CUDA_DRV, V_PYTHON, V_N };
static const char *const v_label[V_N] = {"command", "trshim", "NCCL", "NCCL library", "CUDA runtime", "CUDA driver",
                                         "Python"};

static char *version_of(const ta_trace *t, int item)
{
    switch (item) {
    case V_CMD: return t->cmdline ? xstrdup(t->cmdline) : NULL;
    case V_TRSHIM: return t->v_trshim ? xstrdup(t->v_trshim) : NULL;
    case V_NCCL: {
        /* the loaded library's (trace "nccl"), else "versions" */
        int64_t v = t->has_nccl && t->nccl_version > 0 ? t->nccl_version : t->v_nccl != TA_NULL64 ? t->v_nccl : 0;
        return v > 0 ? ta_nccl_version_text(v) : NULL;
    }
    case V_NCCL_LIB: return t->has_nccl && t->nccl_lib ? xstrdup(t->nccl_lib) : NULL;
    case V_CUDA_RT: return cuda_version_text(t->v_cuda_rt);
    case V_CUDA_DRV: return cuda_version_text(t->v_cuda_drv);
    case V_PYTHON: return t->py_version ? xstrdup(t->py_version) : NULL;
    }
    return NULL;
}

static void versions(ta_an *a, FILE *f)
{
    kv *v = xmalloc(sizeof *v * ((size_t)a->ntr + 1));
    char **vals = xmalloc(sizeof(char *) * ((size_t)a->ntr + 1));
    for (int item = 0; item < V_N; item++) {
        int n = 0;
        for (int i = 0; i < a->ntr; i++) {
            vals[i] = version_of(a->tr[i], item);
            if (vals[i]) v[n++] = (kv){v_label[item], 0, vals[i], i};
        }
        if (n) {
            qsort(v, (size_t)n, sizeof *v, cmp_kv);
            vgroup *g;
            int ng = value_groups(a, v, n, &g);
            int code = item == V_CMD || item == V_NCCL_LIB;
            size_t max = item == V_CMD ? 300 : 160;
            if (ng == 1) {
                fprintf(f, "- %s%s", v_label[item], code ? ": " : " ");
                if (code) put_code(f, g[0].val, strlen(g[0].val), max, 0);
                else put_text(f, g[0].val, max, 0);
                fputc('\n', f);
            } else {
                fprintf(f, "- %s differs: ", v_label[item]);
                values_text(f, g, ng, a->ntr, code, item == V_CMD ? 160 : 60);
                fputc('\n', f);
            }
            free_groups(g, ng);
        }
        for (int i = 0; i < a->ntr; i++) free(vals[i]);
    }
    free(v);
    free(vals);
}

static void environment(ta_an *a, FILE *o)
{
    if (!a->ntr) return;
    mbuf m;
    FILE *f = mb_open(&m);
    fputs("### Environment\n\n", f);
    versions(a, f);
    fputc('\n', f);
    size_t total = 0;
    for (int i = 0; i < a->ntr; i++) total += (size_t)a->tr[i]->nenv;
    kv *v = xmalloc(sizeof *v * (total + 1));
    int n = 0;
    for (int i = 0; i < a->ntr; i++)
        for (int k = 0; k < a->tr[i]->nenv; k++) {
            const char *e = a->tr[i]->env[k], *eq = e ? strchr(e, '=') : NULL;
            if (!eq) continue;
            v[n++] = (kv){e, (size_t)(eq - e), eq + 1, i};
        }
    qsort(v, (size_t)n, sizeof *v, cmp_kv);
    /* each name: shared by every rank (one value), or not */
    mbuf sh, df;
    FILE *fs = mb_open(&sh), *fd = mb_open(&df);
    int nshared = 0, ndiff = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && v[j].nl == v[i].nl && !memcmp(v[j].name, v[i].name, v[i].nl)) j++;
        vgroup *g;
        int ng = value_groups(a, v + i, j - i, &g);
        if (ng == 1) {
            if (nshared++ < MD_ENV_SHARED) {
                fputs("| ", fs);
                put_code(fs, v[i].name, v[i].nl, 64, 1);
                fputs(" | ", fs);
                put_code(fs, g[0].val, strlen(g[0].val), 100, 1);
                fputs(" |\n", fs);
            }
        } else if (ndiff++ < MD_ENV_DIFF) {
            fputs("| ", fd);
            put_code(fd, v[i].name, v[i].nl, 64, 1);
            fputs(" | ", fd);
            for (int k = 0; k < ng && k <= MD_ENV_VALUES; k++) {
                if (k > 1) fputs("; ", fd);
                if (g[k].val) put_code(fd, g[k].val, strlen(g[k].val), k ? 60 : 100, 1);
                else fputs("(not set)", fd);
                if (!k && 2 * g[k].n > a->ntr) fprintf(fd, " on %d ranks", g[k].n);   /* most of them */
                else {
                    char *rt = md_ranks(g[k].r, g[k].n, MD_CELL_ELEMS);
                    fprintf(fd, " on rank%s %s", g[k].n > 1 ? "s" : "", rt);
                    free(rt);
                }
                if (!k) fputs(" | ", fd);
            }
            if (ng > MD_ENV_VALUES + 1) fprintf(fd, "; ... and %d more values", ng - MD_ENV_VALUES - 1);
            fputs(" |\n", fd);
        }
        free_groups(g, ng);
        i = j;
    }
    mb_close(&sh);
    mb_close(&df);
    if (!n) fputs("No environment variables were recorded.\n\n", f);
    if (nshared) {
        fprintf(f, "<details><summary>Environment variables the same on every rank (%d)</summary>\n\n"
                "| variable | value |\n|---|---|\n", nshared);
        fwrite(sh.s, 1, sh.n, f);
        if (nshared > MD_ENV_SHARED) fprintf(f, "| ... | %d more |\n", nshared - MD_ENV_SHARED);
        fputs("\n</details>\n\n", f);
    }
    if (ndiff) {
        fprintf(f, "Environment variables that differ between ranks (%d):\n\n"
                "| variable | most common value | other values |\n|---|---|---|\n", ndiff);
        fwrite(df.s, 1, df.n, f);
        if (ndiff > MD_ENV_DIFF) fprintf(f, "| ... | %d more variables differ | |\n", ndiff - MD_ENV_DIFF);
        fputc('\n', f);
    } else if (n) {
        fputs("Every rank has the same environment variables.\n\n", f);
    }
    free(sh.s);
    free(df.s);
    free(v);
    put_part(o, &m, B_ENV);
}

void ta_out_markdown(ta_an *a, FILE *o)
{
    header(a, o);
    findings(a, o);
    warnings(a, o);
    ranks_table(a, o);
    environment(a, o);
    notes(a, o);
}
