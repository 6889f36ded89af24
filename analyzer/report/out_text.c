/* Text for people: the root cause on top in a few lines, then its
 * consequences, other findings, the per-rank table and what was wrong with
 * the input. A finding's lines (ta_out_finding) serve --markdown too
 * (out_md.c, which writes the rest of that document itself).
 * Every string of a trace is written escaped (ta_esc.h): in text by
 * ta_esc_printf, its %s arguments, and the document once more when whole. */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "findings/ta_finding.h"
#include "model/ta_model.h"
#include "site/ta_site.h"
#include "ta_out.h"

/* who issued the stuck collective and is blocked inside it, who never issued it */
static void members_lines(ta_an *a, FILE *o, const char *indent, const ta_finding *f, int md)
{
    if (!f->nmem) return;
    static const char *const label[MS_N] = {"blocked inside it", "never issued it", "completed it", "unknown",
                                            "never issued it, the communicator suspended (ncclCommSuspend, not resumed)"};
    char *what = NULL;
    const ta_gcomm *n = &a->gc[f->at_g];
    if (!ta_sigbad(n, f->at_seq))     /* the members agree: name the call */
        for (int p = 0; p < f->nmem && !what; p++)
            if (f->mem[p].call >= 0) what = ta_call_text_replay(a, a->tr[f->mem[p].trace], f->mem[p].call);
    if (!what) what = xasprintf("collective #%lld on comm %s", (long long)f->at_seq, ta_comm_name(a, f->at_g));
    if (md) {
        fprintf(o, "%s- at ", indent);
        ta_esc_code(o, what, strlen(what), strlen(what), 0);
        fputs(":\n", o);
    } else {
        ta_esc_printf(o, "%sat %s:\n", indent, what);
    }
    free(what);
    int *r = xmalloc(sizeof(int) * (size_t)(f->nmem + 1));
    for (int st = 0; st < MS_N; st++) {
        int n = 0, lost = 0, notrace = 0, timed = 0;
        double lo = 0, hi = 0;
        for (int p = 0; p < f->nmem; p++) {
            const ta_member *m = &f->mem[p];
            if (m->state != st) continue;
            if (m->rank < 0) { notrace++; continue; }
            r[n++] = m->rank;
            lost += m->lost;
            if (m->pending_s >= 0) {
                if (!timed++ || m->pending_s < lo) lo = m->pending_s;
                if (timed == 1 || m->pending_s > hi) hi = m->pending_s;
            }
        }
        if (!n && !notrace) continue;
        ta_ints_sort(r, n);
        char *rt = ta_ranks_text(r, n);
        char extra[160] = "";
        if (timed && timed == n && hi - lo < 0.05)
            snprintf(extra, sizeof extra, " (enqueued on the GPU, not complete for %.1f s)", lo);
        else if (timed && timed == n)
            snprintf(extra, sizeof extra, " (enqueued on the GPU, not complete for %.1f-%.1f s)", lo, hi);
        else if (timed)
            snprintf(extra, sizeof extra, " (%d of them enqueued on the GPU, not complete for %.1f-%.1f s)", timed, lo, hi);
        else if (lost)
            snprintf(extra, sizeof extra, " (older than %s ring window)", n > 1 ? "their traces'" : "its trace's");
        char nt[48] = "";
        if (notrace) snprintf(nt, sizeof nt, "%s%d place%s without a trace", n ? ", " : "", notrace, notrace > 1 ? "s" : "");
        fprintf(o, md ? "%s  - %s: %s%s%s%s\n" : "%s  %s: %s%s%s%s\n", indent, label[st],
                n ? (n > 1 ? "ranks " : "rank ") : "", rt, extra, nt);
        free(rt);
    }
    free(r);
}

void ta_out_finding(ta_an *a, FILE *o, const ta_finding *f, int md, int top)
{
    const char *ind = md ? "" : "  ";
    ta_tx x = {a, o, md, top, ind};
    if (ta_kinds[f->kind].text) ta_kinds[f->kind].text(&x, f);   /* the heading and the kind's own lines */
    else ta_tx_head(&x, f, NULL);
    if (f->stop_g >= 0)
        ta_esc_printf(o, "%sthe job stopped later, at collective #%lld of comm %s\n", ind, (long long)f->stop_seq,
                ta_comm_name(a, f->stop_g));
    members_lines(a, o, ind, f, md);
    if (md) fputc('\n', o);
    if (f->hint && md) {       /* (a hint is the analyzer's own words, Markdown as they are: `code`) */
        fprintf(o, "%s**Fix:** ", ind);
        ta_esc_puts(o, f->hint, TA_ESC_TEXT);
        fputc('\n', o);
    } else if (f->hint) {
        ta_esc_printf(o, "%sfix: %s\n", ind, f->hint);
    }
    if (f->ncons) {
        fprintf(o, md ? "\nConsequences (ranks waiting because of this):\n\n" : "%sconsequences (waiting because of this):\n", ind);
        int shown = f->ncons < 12 ? f->ncons : 12;
        for (int k = 0; k < shown; k++) {
            const ta_conseq *c = &f->cons[k];
            char *wr = ta_ranks_text(c->waiting, c->nwaiting), *wf = ta_ranks_text(c->waitfor, c->nwaitfor);
            char *what = ta_esc(c->what ? c->what : "?", md ? TA_ESC_MD : TA_ESC_TEXT);
            fprintf(o, "%s  - rank%s %s wait%s in %s for rank%s %s\n", md ? "" : ind, c->nwaiting > 1 ? "s" : "", wr,
                    c->nwaiting > 1 ? "" : "s", what, c->nwaitfor > 1 ? "s" : "", wf);
            free(what);
            free(wr); free(wf);
        }
        if (shown < f->ncons) fprintf(o, "%s  - ... and %d more\n", md ? "" : ind, f->ncons - shown);
    }
    fputc('\n', o);
}

static void rank_table(ta_an *a, FILE *o)
{
    /* families of communicators: one column each (the first 4) */
    int nfam = 0;
    for (int i = 0; i < a->ntr; i++) if (a->tr[i]->ncomms > nfam) nfam = a->tr[i]->ncomms;
    if (nfam > 4) nfam = 4;
    fprintf(o, "RANKS (last seq: per communicator, in the order each rank created them)\n");
    fprintf(o, "  %-5s %-16s %-8s %-10s %-24s %s\n", "rank", "host", "pid", "peak", "last seq", "ended");
    int limit = a->ntr > 64 ? 64 : a->ntr;
    for (int i = 0; i < limit; i++) {
        ta_trace *t = a->tr[i];
        int64_t pk = -1;
        for (int k = 0; k < t->nmdev; k++) if (t->mdev[k].peak > pk) pk = t->mdev[k].peak;
        char *p = ta_human(pk), *e = ta_end_text(a, t);
        char seqs[128] = "";
        for (int k = 0; k < t->ncomms && k < nfam; k++)
            snprintf(seqs + strlen(seqs), sizeof seqs - strlen(seqs), "%s%u", k ? " " : "", t->comms[k].nseq);
        ta_esc_printf(o, "  %-5d %-16.16s %-8lld %-10s %-24s %s%s\n", t->rank, t->host ? t->host : "?", (long long)t->pid, p, seqs, e,
                a->root && a->root[i] ? "  <- root cause" : "");
        free(p); free(e);
    }
    if (limit < a->ntr) fprintf(o, "  ... %d more ranks (--json has them all)\n", a->ntr - limit);
    /* ranks without a trace: a run of consecutive ranks that ended alike on one line */
    for (int i = 0; i < a->nmissing;) {
        char *e = ta_missing_text(a, i);
        int k = i + 1;
        while (k < a->nmissing && a->missing_ranks[k] == a->missing_ranks[k - 1] + 1) {
            char *e2 = ta_missing_text(a, k);
            int same = !strcmp(e, e2);
            free(e2);
            if (!same) break;
            k++;
        }
        char rk[32];
        if (k - i > 1) snprintf(rk, sizeof rk, "%d-%d", a->missing_ranks[i], a->missing_ranks[k - 1]);
        else snprintf(rk, sizeof rk, "%d", a->missing_ranks[i]);
        ta_esc_printf(o, "  %-5s %-16s %-8s %-10s %-24s %s\n", rk, "-", "-", "-", "-", e);
        free(e);
        i = k;
    }
    if (a->missing_unlisted) fprintf(o, "  ... %d more ranks without a trace\n", a->missing_unlisted);
    fputc('\n', o);
}

static void warnings(ta_an *a, FILE *o)
{
    if (!a->nwarns) return;
    fprintf(o, "WARNINGS\n");
    for (int i = 0; i < a->nwarns; i++) ta_esc_printf(o, "  %s\n", a->warns[i].text ? a->warns[i].text : "");
    fputc('\n', o);
}

static void notes(ta_an *a, FILE *o)
{
    if (!a->nnotes) return;
    fprintf(o, "INPUT PROBLEMS\n");
    for (int i = 0; i < a->nnotes; i++) {
        const ta_note *n = &a->notes[i];
        ta_esc_printf(o, "  %s%s%s%s\n", n->file ? n->file : "", n->file ? ": " : "", n->text ? n->text : "",
                      n->fatal ? " (skipped)" : "");
    }
    fputc('\n', o);
}

const char *ta_job_choice(const ta_an *a)
{
    return a->job_wanted ? "this one was asked for with --job" : "this one is the newest (its traces were written last)";
}

static void header(ta_an *a, FILE *o)
{
    ta_esc_printf(o, "tranalyze: job %s: %d of %d ranks traced (%d file%s)", a->job ? a->job : "?", a->ntr, a->world, a->nfiles,
            a->nfiles == 1 ? "" : "s");
    if (a->nother_jobs) {
        fprintf(o, "\n  the folder holds %d jobs; %s; the other%s: ", a->njobs, ta_job_choice(a),
                a->nother_jobs > 1 ? "s" : "");
        for (int i = 0; i < a->nother_jobs; i++) ta_esc_printf(o, "%s%s", i ? ", " : "", a->other_jobs[i]);
        if (!a->job_wanted) fprintf(o, " (--job ID analyses %s)", a->nother_jobs > 1 ? "another" : "it");
    }
    char *ck = ta_clocks_text(a);        /* how the ranks' clocks were put on one: NULL when they share one */
    if (ck) ta_esc_printf(o, "\n  %s", ck);
    free(ck);
    fputs("\n\n", o);
}

static void text_doc(ta_an *a, FILE *o)
{
    header(a, o);
    int nroot = 0;
    for (int i = 0; i < a->nf; i++) nroot += a->f[i].root;
    if (!a->nf) fprintf(o, "No problem found: every collective and send/recv matched.\n\n");
    if (a->nf && !nroot)       /* only stragglers: slow, but nothing hung or failed */
        fprintf(o, "Nothing hung or failed.\n\n");
    for (int i = 0, k = 0; i < a->nf; i++)
        if (a->f[i].root) ta_out_finding(a, o, &a->f[i], 0, ++k);
    char *ab = ta_abort_text(a);
    if (ab) ta_esc_printf(o, "ENDED BY ABORT: %s.\n\n", ab);
    free(ab);
    if (a->nf > nroot) {
        fprintf(o, "OTHER FINDINGS\n");
        for (int i = 0; i < a->nf; i++)
            if (!a->f[i].root) ta_out_finding(a, o, &a->f[i], 0, 0);
    }
    warnings(a, o);
    rank_table(a, o);
    notes(a, o);
}

/* the document in memory, then escaped once more as a whole (ta_esc.h: TA_ESC_DOC changes nothing
 * the writers escaped; a string one of them wrote raw cannot reach the terminal but as text) */
void ta_out_text(ta_an *a, FILE *o)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    text_doc(a, m);
    if (fclose(m) != 0) { fputs("tranalyze: out of memory\n", stderr); exit(2); }
    ta_esc_write(o, buf, n, TA_ESC_DOC);
    free(buf);
}
