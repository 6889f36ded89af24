/* Findings: the constructors every detector uses, the message and hint of
 * a divergence, missing call, send/recv or signal from its sides, and the
 * warning about NCCL functions trshim does not record. The kinds' own
 * detectors and writers are in their files (ta_kinds.h). */
#include <stdlib.h>
#include <string.h>

#include "site/ta_site.h"
#include "ta_finding.h"

#define TA_KIND_NAME_(id, name, rank, flags, detect, json, text, drop) [K_##id] = name,
const char *const ta_kind_names[K_N] = {TA_KINDS(TA_KIND_NAME_)};
#define TA_SUBKIND_NAME_(id, name) name,
const char *const ta_subkind_names[SK_N] = {TA_SUBKINDS(TA_SUBKIND_NAME_)};
#undef TA_SUBKIND_NAME_
#undef TA_KIND_NAME_

ta_finding *ta_finding_new(ta_an *a, int kind)
{
    ta_finding f;
    ta_finding_init(&f, kind);
    return ta_finding_add(a, &f);
}

ta_finding *ta_finding_add(ta_an *a, const ta_finding *f)
{
    a->f = xrealloc(a->f, sizeof *a->f * (size_t)(a->nf + 1));
    a->f[a->nf] = *f;
    return &a->f[a->nf++];
}

void ta_finding_init(ta_finding *f, int kind)
{
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->g = f->stop_g = -1;
    f->seq = f->stop_seq = -1;
    f->culprit.trace = f->other.trace = -1;
    f->culprit.call = f->other.call = -1;
    f->culprit.stack = f->other.stack = -1;
    f->culprit.pystack = f->other.pystack = -1;
    f->stack2 = f->pystack2 = -1;
    f->at_g = -1;
    f->at_seq = f->win_after = f->win_upto = -1;
    f->gap_before = f->mis_call = f->mis_prev = f->mis_peer_prev = -1;
}

/* ranks: global ranks (sorted here); trace/call: the representative call */
void ta_side_set(ta_side *s, const int *ranks, int n, int trace, int64_t call)
{
    free(s->ranks);
    s->ranks = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    if (n) memcpy(s->ranks, ranks, sizeof(int) * (size_t)n);
    s->nranks = n;
    ta_ints_sort(s->ranks, n);
    s->trace = trace;
    s->call = call;
    s->stack = -1;
    s->pystack = -1;
}

/* "AllReduce(...) #5 on comm 0x... at fn (file:line)" of a side's call, NULL
 * when it has none; the side's stacks become that call's */
static char *side_call_text(ta_an *a, ta_side *sd)
{
    if (sd->trace < 0 || sd->call < 0) return NULL;
    ta_trace *t = a->tr[sd->trace];
    sd->stack = t->calls[sd->call].stack;
    sd->pystack = t->calls[sd->call].pystack;
    char *c = ta_call_text(a, t, sd->call), *s = ta_call_site_text(a, t, sd->call);
    char *r = xasprintf("%s at %s", c, s);
    free(c); free(s);
    return r;
}

/* "AllReduce #12 on comm 0x... at fn (file:line)" */
static char *call_at_text(ta_an *a, const ta_trace *t, int64_t ci)
{
    char *c = ta_call_text(a, t, ci), *s = ta_call_site_text(a, t, ci);
    char *r = xasprintf("%s at %s", c, s);
    free(c); free(s);
    return r;
}

/* skipped_call: the culprit's calls around the gap, and the silent
 * mis-pairing that followed when it issued the skipped (comm, seq) later */
static char *skipped_text(ta_an *a, const ta_finding *f, const char *cs, const char *cr, const char *os,
                          const char *orr)
{
    if (f->culprit.trace < 0 || f->culprit.call < 0) return xstrdup("");
    const ta_trace *t = a->tr[f->culprit.trace];
    char *gap = xstrdup("");
    if (f->gap_before >= 0) {
        char *b = call_at_text(a, t, f->gap_before);
        free(gap);
        gap = xasprintf("; the gap in %s %s's calls is right after %s", cs, cr, b);
        free(b);
    }
    if (f->mis_call < 0) return gap;
    const ta_trace *o = f->other.trace >= 0 ? a->tr[f->other.trace] : NULL;
    char *mine = ta_call_text(a, t, f->mis_call);
    char *mp = f->mis_prev >= 0 ? call_at_text(a, t, f->mis_prev) : NULL;
    char *op = o && f->mis_peer_prev >= 0 ? call_at_text(a, o, f->mis_peer_prev) : NULL;
    char *mctx = mp ? xasprintf(", issued after its %s,", mp) : xstrdup("");
    char *octx = op ? xasprintf(", issued after %s %s", f->other.nranks > 1 ? "their" : "its", op) : xstrdup("");
    char *r = xasprintf("%s. %s %s's own %s%s was reduced with %s %s's #%lld%s: with the same arguments, NCCL "
                        "reduced calls of different steps together and nothing failed there",
                        gap, f->culprit.nranks > 1 ? "Ranks" : "Rank", cr, mine, mctx, os, orr, (long long)f->seq, octx);
    free(gap); free(mine); free(mp); free(op); free(mctx); free(octx);
    return r;
}

/* Message and hint from the sides (divergence, missing, p2p). */
void ta_finding_describe(ta_an *a, ta_finding *f)
{
    char *cr = ta_ranks_text(f->culprit.ranks, f->culprit.nranks);
    char *orr = ta_ranks_text(f->other.ranks, f->other.nranks);
    const char *cs = f->culprit.nranks > 1 ? "ranks" : "rank";
    const char *os = f->other.nranks > 1 ? "ranks" : "rank";
    char *ccall = side_call_text(a, &f->culprit), *ocall = side_call_text(a, &f->other);
    free(f->message); free(f->hint);
    int sk = f->subkind;
    if (f->kind == K_DIVERGENCE && sk == SK_EXTRA_CALL) {
        f->message = xasprintf("%s %s issued %s, a call %s %s never made at this point (an extra collective on %s %s)%s%s",
                               cs, cr, ccall ? ccall : "a collective", os, orr, cs, cr,
                               ocall ? "; they issued instead " : "", ocall ? ocall : "");
        f->hint = xstrdup("make every rank of the communicator issue the same collectives in the same order: move the "
                          "collective out of the rank-specific branch (e.g. `if rank == 0:`), or issue it on every rank");
    } else if (f->kind == K_DIVERGENCE && sk == SK_ONE_SIDED) {
        f->message = xasprintf("only %s %s entered %s; %s %s never did",
                               cs, cr, ccall ? ccall : "this collective", os, orr);
        f->hint = xstrdup("a collective inside code that only some ranks run (saving a checkpoint on rank 0, logging): "
                          "run it on every rank of the communicator or use a communicator of only those ranks");
    } else if (f->kind == K_DIVERGENCE && sk == SK_SKIPPED_CALL) {
        char *ctx = skipped_text(a, f, cs, cr, os, orr);
        f->message = xasprintf("%s %s skipped a collective: %s %s issued %s where %s %s issued %s%s",
                               cs, cr, os, orr, ocall ? ocall : "a collective", cs, cr,
                               ccall ? ccall : "something else", ctx);
        free(ctx);
        f->hint = xstrdup("this rank took a different path (fewer micro-batches, an early return, a skipped module): "
                          "make all ranks issue the same number of collectives (DistributedSampler with drop_last, "
                          "the same number of micro-batches, no rank-dependent early exit)");
    } else if (f->kind == K_DIVERGENCE && sk == SK_ORDER) {
        f->message = xasprintf("%s %s issued %s where %s %s issued %s: the order of calls across communicators differs",
                               cs, cr, ccall ? ccall : "?", os, orr, ocall ? ocall : "?");
        f->hint = xstrdup("issue collectives of different communicators in the same order on every rank");
    } else if (f->kind == K_DIVERGENCE && sk == SK_CONFIG) {
        f->message = xasprintf("%s %s issued %s with a configuration that differs from %s %s's %s: NCCL requires the "
                               "same configuration on every rank", cs, cr, ccall ? ccall : "?", os, orr,
                               ocall ? ocall : "?");
        f->hint = xstrdup("pass the same ncclCollConfig_t (CTA bounds, algorithm selection, CTA policy) to the *Config "
                          "collective on every rank of the communicator: a rank-dependent config is undefined behaviour "
                          "(wrong results or a hang)");
    } else if (f->kind == K_DIVERGENCE) {
        f->message = xasprintf("%s %s issued %s while %s %s issued %s", cs, cr, ccall ? ccall : "?", os, orr,
                               ocall ? ocall : "?");
        f->hint = xstrdup("the ranks' calls at this sequence number differ (operation, count, datatype, reduction, "
                          "root or line of code): the ranks took different paths before this point; make them issue "
                          "the same collectives (uneven data per rank, rank-specific branches)");
    } else if (f->kind == K_SIGNAL) {
        const ta_trace *st = f->culprit.trace >= 0 ? a->tr[f->culprit.trace] : NULL;
        int is_sig = st && f->culprit.call >= 0 && ta_op_sends(st->calls[f->culprit.call].op) &&
                     ta_op_is_onesided(st->calls[f->culprit.call].op);
        char *sent;
        if (sk == SK_NOT_RUN)
            sent = xasprintf("%s %s issued it (%s) but it never ran: it is queued behind an operation of its own that "
                             "never completed", cs, cr, ccall ? ccall : "?");
        else if (f->sig_sent > 0)
            sent = xasprintf("%s %s sent only %lld signal%s to %s %s on that communicator (the last: %s): it never sent "
                             "signal #%lld", cs, cr, (long long)f->sig_sent, f->sig_sent > 1 ? "s" : "", os, orr,
                             is_sig && ccall ? ccall : "?", (long long)f->seq);
        else if (f->sig_sent == 0)
            sent = xasprintf("%s %s never sent a signal to %s %s on that communicator", cs, cr, os, orr);
        else
            sent = xasprintf("%s %s holds no signal to %s %s in its ring window (older calls are lost) and never sent "
                             "signal #%lld", cs, cr, os, orr, (long long)f->seq);
        f->message = xasprintf("%s %s waits in %s for signal #%lld from %s %s, but %s", os, orr, ocall ? ocall : "a "
                               "WaitSignal", (long long)f->seq, cs, cr, sent);
        free(sent);
        f->hint = xstrdup("a WaitSignal completes once the peer's signal of that number (ncclPutSignal or ncclSignal to "
                          "this rank, counted per communicator and peer) was sent: the peer skipped a PutSignal/Signal, "
                          "signalled another rank or communicator, or stopped before it; make every wait match the "
                          "peer's signals");
    } else if (f->kind == K_P2P && sk == SK_SIZE_MISMATCH) {
        f->message = xasprintf("%s %s sent %s but %s %s received it as %s", cs, cr, ccall ? ccall : "?", os, orr,
                               ocall ? ocall : "?");
        f->hint = xstrdup("the send and the matching receive must have the same count and datatype");
    } else if (f->kind == K_P2P) {
        /* several pairs (a pipeline stage that skipped the same send on each rank): rank 2's call stands for them */
        int several = f->other.nranks > 1;
        int recv = f->other.trace >= 0 && a->tr[f->other.trace]->calls[f->other.call].op == OP_RECV;
        f->message = xasprintf("%s %s wait%s in %s%s, but %s %s never issued the matching %s%s",
                               os, orr, several ? "" : "s", several ? (recv ? "receives like " : "sends like ") : "",
                               ocall ? ocall : "a send/recv", cs, cr, recv ? "send" : "receive", several ? "s" : "");
        f->hint = xstrdup("pipeline stages disagree on the sends and receives (a skipped send, a wrong peer, a different "
                          "number of micro-batches): make both sides issue matching send/recv pairs");
    } else {
        f->message = xasprintf("%s %s never issued %s, which %s %s issued and wait%s in", cs, cr,
                               ocall ? ocall : "the collective", os, orr, f->other.nranks > 1 ? "" : "s");
        f->hint = xstrdup("the peers wait for this rank: see how it ended and what it did last; if it exited or "
                          "crashed early, fix that; if it took another path, make all ranks issue the same collectives");
    }
    free(cr); free(orr); free(ccall); free(ocall);
}

/* The host functions the job's NCCL library exports that trshim does not
 * know (trace "nccl".unknown_functions): calls through them are not
 * recorded, so the traces may miss operations. One warning per distinct
 * library and version, with the ranks that loaded it. */
void ta_warnings_nccl(ta_an *a)
{
    for (int i = 0; i < a->ntr; i++) {
        const ta_trace *t = a->tr[i];
        if (!t->has_nccl || (!t->nnccl_unknown && !t->nccl_unknown_more)) continue;
        ta_warning *w = NULL;
        for (int k = 0; k < a->nwarns && !w; k++)
            if (a->warns[k].version == t->nccl_version &&
                ((!a->warns[k].library && !t->nccl_lib) ||
                 (a->warns[k].library && t->nccl_lib && !strcmp(a->warns[k].library, t->nccl_lib))))
                w = &a->warns[k];
        if (!w) {
            a->warns = xrealloc(a->warns, sizeof *a->warns * (size_t)(a->nwarns + 1));
            w = &a->warns[a->nwarns++];
            memset(w, 0, sizeof *w);
            w->kind = xstrdup("nccl_unknown_functions");
            w->library = t->nccl_lib ? xstrdup(t->nccl_lib) : NULL;
            w->version = t->nccl_version;
        }
        w->ranks = xrealloc(w->ranks, sizeof(int) * (size_t)(w->nranks + 1));
        w->ranks[w->nranks++] = t->rank;
        if (t->nccl_unknown_more > w->functions_more) w->functions_more = t->nccl_unknown_more;
        for (int u = 0; u < t->nnccl_unknown; u++) {      /* the union, in the order first seen (interned) */
            int seen = 0;
            for (int k = 0; k < w->nfunctions && !seen; k++) seen = w->functions[k] == t->nccl_unknown[u];
            if (seen) continue;
            w->functions = xrealloc(w->functions, sizeof *w->functions * (size_t)(w->nfunctions + 1));
            w->functions[w->nfunctions++] = t->nccl_unknown[u];
        }
    }
    for (int k = 0; k < a->nwarns; k++) {
        ta_warning *w = &a->warns[k];
        ta_ints_sort(w->ranks, w->nranks);
        char *v = ta_nccl_version_text(w->version), *r = ta_ranks_text(w->ranks, w->nranks);
        size_t cap = 64, len = 0;
        char *fn = xmalloc(cap);
        fn[0] = 0;
        for (int i = 0; i < w->nfunctions; i++) {
            size_t l = strlen(w->functions[i]) + 6;
            if (len + l + 1 > cap) { cap = (len + l + 1) * 2; fn = xrealloc(fn, cap); }
            len += (size_t)sprintf(fn + len, "%s%s", i ? (i + 1 == w->nfunctions && !w->functions_more ? " and " : ", ") : "",
                                   w->functions[i]);
        }
        char more[64] = "";
        if (w->functions_more)
            snprintf(more, sizeof more, "%s%lld more", w->nfunctions ? " and " : "", (long long)w->functions_more);
        int nf = w->nfunctions + (w->functions_more > 0) + (w->functions_more > 1);
        w->text = xasprintf("NCCL %s%s%s%s exports %s%s, which trshim does not record: calls through %s are missing from "
                            "the traces (rank%s %s)", v, w->library ? " (" : "", w->library ? w->library : "",
                            w->library ? ")" : "", fn, more, nf > 1 ? "them" : "it", w->nranks > 1 ? "s" : "", r);
        free(v); free(r); free(fn);
    }
}
