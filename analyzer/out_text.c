/* Text for people, and --markdown for bug reports: the root cause on top in
 * a few lines, then its consequences, other findings, the per-rank table and
 * what was wrong with the input. */
#include <stdlib.h>
#include <string.h>

#include "ta.h"

static char *human(int64_t b)
{
    if (b < 0) return xstrdup("-");
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int k = 0;
    while (v >= 1024 && k < 4) { v /= 1024; k++; }
    return k ? xasprintf("%.1f %s", v, u[k]) : xasprintf("%lld B", (long long)b);
}

static char *where(ta_an *a, const ta_finding *f)
{
    if (f->g < 0) return xstrdup("");
    int n = 0, *r = xmalloc(sizeof(int) * (size_t)(a->gc[f->g].npos + 1));
    for (int p = 0; p < a->gc[f->g].npos; p++)
        if (a->gc[f->g].member[p] >= 0) r[n++] = a->tr[a->gc[f->g].member[p]]->rank;
    ta_ints_sort(r, n);
    char *rt = ta_ranks_text(r, n);
    free(r);
    int empty = 0;
    for (int p = 0; p < a->gc[f->g].npos; p++) empty += a->gc[f->g].member[p] < 0;
    /* "ranks 0-2", "rank 0; 3 places without a trace": the count of empty
     * places never reads as one more rank */
    char *m = xasprintf("%s%s%s", n ? (n > 1 ? "ranks " : "rank ") : "", rt, n && empty ? "; " : "");
    free(rt);
    if (empty) {
        char *m2 = xasprintf("%s%d place%s without a trace", m, empty, empty > 1 ? "s" : "");
        free(m);
        m = m2;
    }
    char *s;
    if (f->kind == K_INIT) s = xasprintf(" on comm %s (%s), initialisation", ta_comm_name(a, f->g), m);
    else if (f->kind == K_STRAGGLER) s = xasprintf(" on comm %s (%s)", ta_comm_name(a, f->g), m);
    else if (f->kind == K_P2P) s = xasprintf(" on comm %s (%s), send/recv #%lld", ta_comm_name(a, f->g), m, (long long)f->seq);
    else if (f->kind == K_SIGNAL) s = xasprintf(" on comm %s (%s), signal #%lld", ta_comm_name(a, f->g), m, (long long)f->seq);
    else if (f->seq < 0 && f->win_upto > 0)
        s = xasprintf(" on comm %s (%s), collectives #%lld-#%lld", ta_comm_name(a, f->g), m,
                      (long long)f->win_after + 1, (long long)f->win_upto);
    else s = xasprintf(" on comm %s (%s), collective #%lld", ta_comm_name(a, f->g), m, (long long)f->seq);
    free(m);
    return s;
}

static void side_line(ta_an *a, FILE *o, const char *indent, const ta_side *s, int md, const char *label)
{
    if (!s->nranks || s->trace < 0) return;
    const ta_trace *t = a->tr[s->trace];
    int stack = s->stack, py = s->pystack;
    if (s->call >= 0) stack = t->calls[s->call].stack, py = t->calls[s->call].pystack;
    if (stack < 0 && !ta_py_valid(t, py) && s->call < 0) return;
    char *r = ta_ranks_text(s->ranks, s->nranks);
    char *site = ta_site_text(a, t, stack, py);
    char *sig = s->call >= 0 ? ta_call_sig(t, s->call) : xstrdup("");
    if (md) fprintf(o, "%s- rank%s %s%s: `%s` at `%s`\n", indent, s->nranks > 1 ? "s" : "", r, label, sig, site);
    else fprintf(o, "%srank%s %s%s: %s at %s\n", indent, s->nranks > 1 ? "s" : "", r, label, sig, site);
    free(r); free(site); free(sig);
}

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
            if (f->mem[p].call >= 0) what = ta_call_text(a, a->tr[f->mem[p].trace], f->mem[p].call);
    if (!what) what = xasprintf("collective #%lld on comm %s", (long long)f->at_seq, ta_comm_name(a, f->at_g));
    fprintf(o, md ? "%s- at `%s`:\n" : "%sat %s:\n", indent, what);
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

static void finding(ta_an *a, FILE *o, const ta_finding *f, int md, int top)
{
    static int nroot;
    char *w = where(a, f);
    const char *ind = md ? "" : "  ";
    if (md) fprintf(o, "%s **%s%s%s**%s\n\n", top ? "####" : "-", ta_kind_names[f->kind], f->subkind[0] ? " / " : "",
                    f->subkind, w);
    else if (top) {
        if (nroot++) fprintf(o, "ROOT CAUSE (%d): ", nroot);
        else fprintf(o, "ROOT CAUSE: ");
        fprintf(o, "%s%s%s%s\n", ta_kind_names[f->kind], f->subkind[0] ? " / " : "", f->subkind, w);
    } else fprintf(o, "- %s%s%s%s\n", ta_kind_names[f->kind], f->subkind[0] ? " / " : "", f->subkind, w);
    fprintf(o, "%s%s\n", ind, f->message ? f->message : "");
    if (md) fputc('\n', o);
    if (f->kind == K_DIVERGENCE || f->kind == K_MISSING || f->kind == K_P2P) {
        int miss = f->kind == K_MISSING || (f->kind == K_P2P && strcmp(f->subkind, "size_mismatch"));
        side_line(a, o, ind, &f->culprit, md, miss ? " (last call)" : "");
        side_line(a, o, ind, &f->other, md, miss ? " (waiting in)" : "");
    }
    if (f->kind == K_SIGNAL) {
        int queued = !strcmp(f->subkind, "not_run");
        side_line(a, o, ind, &f->culprit, md, queued ? " (the signal, queued)" : f->sig_sent > 0 ?
                  " (its last signal to the waiter)" : " (last call)");
        side_line(a, o, ind, &f->other, md, " (waiting in)");
    }
    if (f->kind == K_NAN && f->nan) {
        const ta_nanev *ev = &f->nan->ev;
        int shown = 0;
        for (int p = 0; p < ev->nmem; p++) {
            const ta_nanmember *m = &ev->mem[p];
            if (m->trace < 0 || m->call < 0) continue;
            const ta_trace *t = a->tr[m->trace];
            int show = ev->cause == NC_INPUT ? m->source : p == ev->ref;
            if (!show) continue;
            if (shown++ >= 8) { fprintf(o, "%s%s...\n", ind, md ? "- " : ""); break; }
            const ta_check kv = ta_check_at(t, ev->cause == NC_INPUT ? m->in : m->out), *k = &kv;
            char *sig = ta_call_sig(t, m->call), *site = ta_call_site_text(a, t, m->call);
            char at[64] = "";
            if (k->first != TA_NULL64)
                snprintf(at, sizeof at, "first %s at element %lld, ", k->first_kind == 2 ? "Inf" : "NaN", (long long)k->first);
            fprintf(o, md ? "%s- rank %d: `%s` at `%s`; %s: %s%lld NaN, %lld Inf in %lld elements checked\n"
                          : "%srank %d: %s at %s; %s: %s%lld NaN, %lld Inf in %lld elements checked\n",
                    ind, m->rank, sig, site, ev->cause == NC_INPUT ? "input" : "output", at, (long long)k->nan,
                    (long long)k->inf, (long long)k->checked);
            free(sig); free(site);
        }
        if (ev->cause != NC_INPUT && ev->nunchecked) {
            char *r = ta_ranks_text(ev->unchecked, ev->nunchecked);
            fprintf(o, "%s%sinputs not known: rank%s %s\n", ind, md ? "- " : "", ev->nunchecked > 1 ? "s" : "", r);
            free(r);
        }
    }
    if (f->kind == K_OOM || f->kind == K_IMBALANCE) {
        char *p = human(f->peak);
        char *site = f->culprit.trace >= 0 ? ta_site_text(a, a->tr[f->culprit.trace], f->stack2, f->pystack2) : xstrdup("?");
        fprintf(o, "%speak %s at %s\n", ind, p, site);
        free(p); free(site);
    }
    if (f->stop_g >= 0)
        fprintf(o, "%sthe job stopped later, at collective #%lld of comm %s\n", ind, (long long)f->stop_seq,
                ta_comm_name(a, f->stop_g));
    members_lines(a, o, ind, f, md);
    if (md) fputc('\n', o);
    if (f->hint) fprintf(o, md ? "%s**Fix:** %s\n" : "%sfix: %s\n", ind, f->hint);
    if (f->ncons) {
        fprintf(o, md ? "\nConsequences (ranks waiting because of this):\n\n" : "%sconsequences (waiting because of this):\n", ind);
        int shown = f->ncons < 12 ? f->ncons : 12;
        for (int k = 0; k < shown; k++) {
            const ta_conseq *c = &f->cons[k];
            char *wr = ta_ranks_text(c->waiting, c->nwaiting), *wf = ta_ranks_text(c->waitfor, c->nwaitfor);
            fprintf(o, "%s  - rank%s %s wait%s in %s for rank%s %s\n", md ? "" : ind, c->nwaiting > 1 ? "s" : "", wr,
                    c->nwaiting > 1 ? "" : "s", c->what ? c->what : "?", c->nwaitfor > 1 ? "s" : "", wf);
            free(wr); free(wf);
        }
        if (shown < f->ncons) fprintf(o, "%s  - ... and %d more\n", md ? "" : ind, f->ncons - shown);
    }
    fputc('\n', o);
    free(w);
}

static void rank_table(ta_an *a, FILE *o, int md)
{
    /* families of communicators: one column each (the first 4) */
    int nfam = 0;
    for (int i = 0; i < a->ntr; i++) if (a->tr[i]->ncomms > nfam) nfam = a->tr[i]->ncomms;
    if (nfam > 4) nfam = 4;
    if (md) {
        fprintf(o, "| rank | host | pid | ended |");
        for (int k = 0; k < nfam; k++) fprintf(o, " comm #%d last seq |", k);
        fprintf(o, " peak memory |\n|---|---|---|---|");
        for (int k = 0; k < nfam; k++) fprintf(o, "---|");
        fprintf(o, "---|\n");
    } else {
        fprintf(o, "RANKS (last seq: per communicator, in the order each rank created them)\n");
        fprintf(o, "  %-5s %-16s %-8s %-10s %-24s %s\n", "rank", "host", "pid", "peak", "last seq", "ended");
    }
    int limit = a->ntr > 64 && !md ? 64 : a->ntr;
    for (int i = 0; i < limit; i++) {
        ta_trace *t = a->tr[i];
        int64_t pk = -1;
        for (int k = 0; k < t->nmdev; k++) if (t->mdev[k].peak > pk) pk = t->mdev[k].peak;
        char *p = human(pk), *e = ta_end_text(a, t);
        char seqs[128] = "";
        for (int k = 0; k < t->ncomms && k < nfam; k++)
            snprintf(seqs + strlen(seqs), sizeof seqs - strlen(seqs), "%s%u", k ? " " : "", t->comms[k].nseq);
        if (md) {
            fprintf(o, "| %d%s | %s | %lld | %s |", t->rank, a->root && a->root[i] ? " **(root cause)**" : "", t->host,
                    (long long)t->pid, e);
            for (int k = 0; k < nfam; k++)
                if (k < t->ncomms) fprintf(o, " %u |", t->comms[k].nseq);
                else fprintf(o, " |");
            fprintf(o, " %s |\n", p);
        } else {
            fprintf(o, "  %-5d %-16.16s %-8lld %-10s %-24s %s%s\n", t->rank, t->host, (long long)t->pid, p, seqs, e,
                    a->root && a->root[i] ? "  <- root cause" : "");
        }
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
        if (md) fprintf(o, "| %s | | | %s |%*s\n", rk, e, nfam * 2 + 2, "");
        else fprintf(o, "  %-5s %-16s %-8s %-10s %-24s %s\n", rk, "-", "-", "-", "-", e);
        free(e);
        i = k;
    }
    if (a->missing_unlisted)
        fprintf(o, md ? "| ... | | | %d more ranks without a trace |%*s\n" : "  ... %d more ranks without a trace%*s\n",
                a->missing_unlisted, md ? nfam * 2 + 2 : 0, "");
    fputc('\n', o);
}

static void warnings(ta_an *a, FILE *o, int md)
{
    if (!a->nwarns) return;
    fprintf(o, md ? "### Warnings\n\n" : "WARNINGS\n");
    for (int i = 0; i < a->nwarns; i++) fprintf(o, md ? "- %s\n" : "  %s\n", a->warns[i].text);
    fputc('\n', o);
}

static void notes(ta_an *a, FILE *o, int md)
{
    if (!a->nnotes) return;
    fprintf(o, md ? "#### Input problems\n\n" : "INPUT PROBLEMS\n");
    for (int i = 0; i < a->nnotes; i++) {
        const ta_note *n = &a->notes[i];
        if (md) fprintf(o, "- %s%s%s%s\n", n->file ? "`" : "", n->file ? n->file : "", n->file ? "`: " : "", n->text);
        else fprintf(o, "  %s%s%s%s\n", n->file ? n->file : "", n->file ? ": " : "", n->text, n->fatal ? " (skipped)" : "");
    }
    fputc('\n', o);
}

static void header(ta_an *a, FILE *o, int md)
{
    if (md) fprintf(o, "## tranalyze: job `%s`\n\n%d of %d ranks traced (%d files).", a->job, a->ntr, a->world, a->nfiles);
    else fprintf(o, "tranalyze: job %s: %d of %d ranks traced (%d files)", a->job, a->ntr, a->world, a->nfiles);
    if (a->nother_jobs) {
        fprintf(o, md ? " The folder holds %d jobs; this is the newest (others: " : "\n  the folder holds %d jobs; this is the newest (use --job ID for ", a->njobs);
        for (int i = 0; i < a->nother_jobs; i++) fprintf(o, "%s%s", i ? ", " : "", a->other_jobs[i]);
        fputc(')', o);
    }
    fputs(md ? "\n\n" : "\n\n", o);
}

static void out(ta_an *a, FILE *o, int md)
{
    header(a, o, md);
    int nroot = 0;
    for (int i = 0; i < a->nf; i++) nroot += a->f[i].root;
    if (!a->nf) fprintf(o, md ? "**No problem found.**\n\n" : "No problem found: every collective and send/recv matched.\n\n");
    if (a->nf && !nroot)       /* only stragglers: slow, but nothing hung or failed */
        fprintf(o, md ? "**Nothing hung or failed.**\n\n" : "Nothing hung or failed.\n\n");
    if (md && nroot) fprintf(o, "### Root cause\n\n");
    for (int i = 0; i < a->nf; i++)
        if (a->f[i].root) finding(a, o, &a->f[i], md, 1);
    if (a->nf > nroot) {
        fprintf(o, md ? "### Other findings\n\n" : "OTHER FINDINGS\n");
        for (int i = 0; i < a->nf; i++)
            if (!a->f[i].root) finding(a, o, &a->f[i], md, 0);
    }
    warnings(a, o, md);
    if (md) fprintf(o, "### Ranks\n\n");
    rank_table(a, o, md);
    if (md && a->ntr) {
        const ta_trace *t = a->tr[0];
        fprintf(o, "#### Environment (rank %d)\n\n", t->rank);
        fprintf(o, "- command: `%s`\n- host: %s\n", t->cmdline ? t->cmdline : "?", t->host);
        if (t->v_nccl != TA_NULL64) fprintf(o, "- NCCL %lld\n", (long long)t->v_nccl);
        if (t->v_cuda_rt != TA_NULL64) fprintf(o, "- CUDA runtime %lld, driver %lld\n", (long long)t->v_cuda_rt,
                                               (long long)(t->v_cuda_drv == TA_NULL64 ? 0 : t->v_cuda_drv));
        if (t->v_trshim) fprintf(o, "- trshim %s\n", t->v_trshim);
        for (int i = 0; i < t->nenv && i < 40; i++) fprintf(o, "- `%s`\n", t->env[i]);
        fputc('\n', o);
    }
    notes(a, o, md);
}

void ta_out_text(ta_an *a, FILE *o) { out(a, o, 0); }
void ta_out_markdown(ta_an *a, FILE *o) { out(a, o, 1); }
