/* --markdown: a summary to paste into a bug report. GitHub takes an issue
 * body of 65,536 characters; this document stays within TA_MD_LIMIT
 * (60,000) at any number of ranks or findings, by design:
 *   - each part has a budget (B_* in out_md_int.h, together under the limit) and is
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
 *   - the system (PyTorch, DeepSpeed, NCCL, CUDA, the kernel driver, the
 *     GPUs, ...) and the command line (out_md_env.c): once when every rank
 *     agrees, else each value with its ranks; the variables every rank
 *     shares once (a table in <details>), then only the variables that
 *     differ, each value with its ranks;
 *   - long tables sit in <details>.
 * A part that would still pass its budget (a crafted trace's enormous
 * strings) is cut at a line, and says so: --json has everything.
 * Strings of the traces are escaped as Markdown (ta_esc.h): running text by
 * ta_md_text, code by ta_md_code, the findings' lines by their writers. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "findings/ta_finding.h"
#include "model/ta_model.h"
#include "out_md_int.h"

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
 * ("0, 8, 16, 24, ...": ranks, as ta_ranks_text writes them) made short by ta_md_ranks */
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
        char *t = ta_md_ranks(r, m, maxp);
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
    FILE *f = ta_md_open(&m);
    compact(f, s, n, MD_ELEMS);
    ta_md_close(&m);
    mbuf c;
    f = ta_md_open(&c);
    ta_md_capped(f, m.s, m.n, max);
    ta_md_close(&c);
    free(m.s);
    *len = c.n;
    return c.s;
}

/* ---- the header --------------------------------------------------------------- */
static void header(ta_an *a, FILE *o)
{
    mbuf m;
    FILE *f = ta_md_open(&m);
    fputs("## tranalyze: job ", f);
    ta_md_code(f, a->job ? a->job : "", a->job ? strlen(a->job) : 0, 100, 0);
    fprintf(f, "\n\n%d of %d ranks traced (%d file%s).", a->ntr, a->world, a->nfiles, a->nfiles == 1 ? "" : "s");
    if (a->nother_jobs) {
        fprintf(f, " The folder holds %d jobs; %s; the other%s: ", a->njobs, a->job_wanted ?
                "this one was asked for with `--job`" : ta_job_choice(a), a->nother_jobs > 1 ? "s" : "");
        for (int i = 0; i < a->nother_jobs && i < MD_OTHER_JOBS; i++) {
            if (i) fputs(", ", f);
            ta_md_text(f, a->other_jobs[i], 64, 0);
        }
        if (a->nother_jobs > MD_OTHER_JOBS) fprintf(f, ", ... and %d more", a->nother_jobs - MD_OTHER_JOBS);
        if (!a->job_wanted) fprintf(f, " (`--job ID` analyses %s)", a->nother_jobs > 1 ? "another" : "it");
        fputc('.', f);
    }
    fputs("\n\n", f);
    ta_md_part(o, &m, B_HEAD);
}

/* ---- findings -------------------------------------------------------------------- */
typedef struct { char *s; size_t n; int i; } block;

static block finding_block(ta_an *a, int i, int top)
{
    mbuf m;
    FILE *f = ta_md_open(&m);
    ta_out_finding(a, f, &a->f[i], 1, top);
    ta_md_close(&m);
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
    FILE *f = ta_md_open(&m);
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
    ta_md_part(o, &m, B_FIND);
}

static void warnings(ta_an *a, FILE *o)
{
    if (!a->nwarns) return;
    mbuf m;
    FILE *f = ta_md_open(&m);
    fputs("### Warnings\n\n", f);
    for (int i = 0; i < a->nwarns && i < MD_WARNS; i++) {
        size_t n;
        const char *t = a->warns[i].text ? a->warns[i].text : "";
        char *c = compact_str(t, strlen(t), 420, &n);
        fputs("- ", f);
        ta_md_text(f, c, 420, 0);
        fputc('\n', f);
        free(c);
    }
    if (a->nwarns > MD_WARNS) fprintf(f, "- ... and %d more (`--json` lists them all)\n", a->nwarns - MD_WARNS);
    fputc('\n', f);
    ta_md_part(o, &m, B_WARN);
}

static void notes(ta_an *a, FILE *o)
{
    if (!a->nnotes) return;
    mbuf m;
    FILE *f = ta_md_open(&m);
    fputs("#### Input problems\n\n", f);
    for (int i = 0; i < a->nnotes && i < MD_NOTES; i++) {
        const ta_note *n = &a->notes[i];
        fputs("- ", f);
        if (n->file) {
            ta_md_code(f, n->file, strlen(n->file), 160, 0);
            fputs(": ", f);
        }
        size_t len;
        const char *t = n->text ? n->text : "";
        char *c = compact_str(t, strlen(t), 300, &len);
        ta_md_text(f, c, 300, 0);
        free(c);
        fputs(n->fatal ? " (skipped)\n" : "\n", f);
    }
    if (a->nnotes > MD_NOTES) fprintf(f, "- ... and %d more (`--json` lists them all)\n", a->nnotes - MD_NOTES);
    fputc('\n', f);
    ta_md_part(o, &m, B_NOTES);
}

/* ---- the rank table ------------------------------------------------------------------ */
typedef struct {
    char *key;           /* what makes ranks alike: root cause, last seqs, end */
    char *end;
    int64_t peak;
} rank_info;

static int cmp_alike(const void *x, const void *y, void *ctx)
{
    const rank_info *ri = ctx;
    int i = *(const int *)x, j = *(const int *)y;
    int c = strcmp(ri[i].key, ri[j].key);
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

typedef struct { char **text; const int *ranks; } missing_sort;
static int cmp_missing(const void *x, const void *y, void *ctx)
{
    const missing_sort *m = ctx;
    int i = *(const int *)x, j = *(const int *)y;
    int c = strcmp(m->text[i], m->text[j]);
    return c ? c : (m->ranks[i] > m->ranks[j]) - (m->ranks[i] < m->ranks[j]);
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
    char *rt = ta_md_ranks(r, g->n, MD_CELL_ELEMS);
    const ta_trace *t0 = a->tr[g->idx[0]];
    fprintf(f, "| %s%s | ", rt, g->root ? " **(root cause)**" : "");
    if (distinct(hosts, g->n) == 1) ta_md_text(f, hosts[0], 64, 1);
    else fprintf(f, "%d hosts", distinct(hosts, g->n));
    if (g->n == 1) fprintf(f, " | %lld | ", (long long)t0->pid);
    else fputs(" | | ", f);
    ta_md_text(f, ri[g->idx[0]].end, 240, 1);
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
    FILE *f = ta_md_open(&m);
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
        FILE *k = ta_md_open(&kb);
        fprintf(k, "%d|%d|", a->root && a->root[i], t->ncomms);
        for (int c = 0; c < t->ncomms; c++) fprintf(k, "%u ", t->comms[c].nseq);
        fprintf(k, "|%s", ri[i].end);
        ta_md_close(&kb);
        ri[i].key = kb.s;
    }
    if (!per_rank) qsort_r(order, (size_t)a->ntr, sizeof *order, cmp_alike, ri);
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
    qsort_r(morder, (size_t)a->nmissing, sizeof *morder, cmp_missing,
            &(missing_sort){mtext, a->missing_ranks});
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
        char *rt = ta_md_ranks(mg[k].r, mg[k].n, MD_CELL_ELEMS);
        fprintf(f, "| %s | | | ", rt);
        ta_md_text(f, mtext[morder[mg[k].at]], 240, 1);
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
    ta_md_part(o, &m, B_RANKS);
}

/* the parts, then the document escaped once more as a whole (ta_esc.h: TA_ESC_DOC changes nothing
 * the parts escaped) */
void ta_out_markdown(ta_an *a, FILE *o)
{
    mbuf m;
    FILE *f = ta_md_open(&m);
    header(a, f);
    findings(a, f);
    warnings(a, f);
    ta_md_system(a, f);
    ranks_table(a, f);
    ta_md_environment(a, f);
    notes(a, f);
    ta_md_close(&m);
    ta_esc_write(o, m.s, m.n, TA_ESC_DOC);
    free(m.s);
}
