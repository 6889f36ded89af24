/* Findings that do not come from the wait-for graph: out-of-memory failures,
 * memory imbalance, divergences on communicators that did not hang (a
 * collective whose members disagree), and matched send/recv pairs of
 * different count or datatype. Also the constructors the root-cause pass
 * uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ta.h"

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

static char *human(int64_t b)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int k = 0;
    while (v >= 1024 && k < 4) { v /= 1024; k++; }
    return k ? xasprintf("%.1f %s", v, u[k]) : xasprintf("%lld B", (long long)b);
}

static int64_t rank_peak(const ta_trace *t, int *dev_out)
{
    int64_t best = -1;
    for (int i = 0; i < t->nmdev; i++)
        if (t->mdev[i].peak > best) { best = t->mdev[i].peak; if (dev_out) *dev_out = i; }
    return best;
}

static int cmp64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The last collective the rank issued before time t_ns (-1 none). */
static int64_t call_before(const ta_trace *t, int64_t t_ns)
{
    int64_t lo = 0, hi = t->ncalls - 1, best = -1;
    while (lo <= hi) {       /* calls are in entry order */
        int64_t mid = (lo + hi) / 2;
        if (t->calls[mid].enter_ns <= t_ns) { best = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    while (best >= 0 && !(ta_op_is_coll(t->calls[best].op) || ta_op_is_p2p(t->calls[best].op))) best--;
    return best;
}

void ta_findings_memory(ta_an *a)
{
    /* out of memory */
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        if (!t->nmfail) continue;
        /* the first out-of-memory failure, else the first failure */
        const ta_memfail *m = &t->mfail[0];
        for (int k = 0; k < t->nmfail; k++)
            if (strstr(t->mfail[k].error, "Memory") || strstr(t->mfail[k].error, "MEMORY") ||
                t->mfail[k].error_code == 2) { m = &t->mfail[k]; break; }
        ta_finding *f = ta_finding_new(a, K_OOM);
        int r = t->rank;
        ta_side_set(&f->culprit, &r, 1, ti, -1);
        f->culprit.stack = m->stack;
        f->culprit.pystack = m->pystack;
        f->bytes = m->bytes;
        f->live = m->live;
        int dv = -1;
        f->peak = rank_peak(t, &dv);
        if (dv >= 0) {
            f->stack2 = t->mdev[dv].peak_stack;
            f->pystack2 = t->mdev[dv].peak_pystack;
            f->peak_ns = t->mdev[dv].peak_ns;
        }
        f->t = ta_wall(t, m->t_ns);
        int64_t ci = call_before(t, m->t_ns);
        if (ci >= 0) {
            const ta_call *c = &t->calls[ci];
            f->g = t->comms[c->comm].g;
            f->seq = c->seq;
        }
        /* the other ranks of the job */
        int *o = xmalloc(sizeof(int) * (size_t)a->ntr);
        int no = 0;
        for (int k = 0; k < a->ntr; k++) if (k != ti) o[no++] = a->tr[k]->rank;
        ta_side_set(&f->other, o, no, -1, -1);
        free(o);
        char *req = human(m->bytes), *live = human(m->live), *pk = human(f->peak > 0 ? f->peak : 0);
        char *after = NULL;
        if (ci >= 0) {
            char *c = ta_call_text(a, t, ci);
            after = xasprintf("; the last NCCL call before it was %s", c);
            free(c);
        }
        char *site = ta_site_text(a, t, m->stack, m->pystack);
        char *when = xstrdup("");
        if (dv >= 0 && t->mdev[dv].has_peak_after) {
            free(when);
            when = xasprintf(", reached after collective #%lld of comm 0x%016llx", (long long)t->mdev[dv].peak_after_seq,
                             (unsigned long long)t->mdev[dv].peak_after_comm);
        }
        f->message = xasprintf("rank %d ran out of device memory: %s(%lld bytes = %s) failed at %s while %s were held "
                               "(peak %s%s)%s",
                               r, m->api, (long long)m->bytes, req, site, live, pk, when, after ? after : "");
        free(when);
        f->hint = xstrdup("see what holds the memory at the peak stack; reduce the batch or sequence length, shard "
                          "optimizer state (ZeRO), enable activation checkpointing, or free caches before this point");
        free(req); free(live); free(pk); free(after); free(site);
    }

    /* imbalance: peak above the median of the others by more than the threshold */
    int n = 0;
    for (int ti = 0; ti < a->ntr; ti++) n += rank_peak(a->tr[ti], NULL) > 0;
    if (n < 2) return;
    int64_t *v = xmalloc(sizeof(int64_t) * (size_t)a->ntr);
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        int dv = -1;
        int64_t pk = rank_peak(t, &dv);
        if (pk <= 0) continue;
        int k = 0;
        for (int j = 0; j < a->ntr; j++) {
            int64_t p = j == ti ? -1 : rank_peak(a->tr[j], NULL);
            if (p > 0) v[k++] = p;
        }
        if (!k) continue;
        if (k > 1) qsort(v, (size_t)k, sizeof *v, cmp64);
        int64_t med = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
        if ((double)pk <= (double)med * (1.0 + a->imbalance) || pk - med < a->imbalance_min) continue;
        ta_finding *f = ta_finding_new(a, K_IMBALANCE);
        int r = t->rank;
        ta_side_set(&f->culprit, &r, 1, ti, -1);
        f->culprit.stack = f->stack2 = t->mdev[dv].peak_stack;
        f->culprit.pystack = f->pystack2 = t->mdev[dv].peak_pystack;
        f->peak = pk;
        f->median = med;
        f->peak_ns = t->mdev[dv].peak_ns;
        f->t = ta_wall(t, f->peak_ns == TA_NULL64 ? 0 : f->peak_ns);
        if (t->mdev[dv].has_peak_after) {
            for (int g = 0; g < a->ngc; g++)
                if (a->gc[g].id == t->mdev[dv].peak_after_comm) { f->g = g; f->seq = t->mdev[dv].peak_after_seq; }
        }
        int *o = xmalloc(sizeof(int) * (size_t)a->ntr);
        int no = 0;
        for (int j = 0; j < a->ntr; j++) if (j != ti && rank_peak(a->tr[j], NULL) > 0) o[no++] = a->tr[j]->rank;
        ta_side_set(&f->other, o, no, -1, -1);
        free(o);
        char *p = human(pk), *md = human(med), *site = ta_site_text(a, t, f->stack2, f->pystack2);
        f->message = xasprintf("rank %d peaks at %s of device memory, %.0f%% above the median of the other ranks (%s); "
                               "its peak was reached at %s",
                               r, p, 100.0 * ((double)pk / (double)(med ? med : 1) - 1.0), md, site);
        f->hint = xstrdup("look at what this rank allocates that the others do not (uneven partitioning, state kept "
                          "only on this rank, a gather onto one rank); balance it or give this rank less");
        free(p); free(md); free(site);
    }
    free(v);
}

/* Communicators where members disagree at some seq although nothing hung
 * there (or it was not explained by a root cause): the first such seq of
 * each communicator. covered_g[g] != 0 skips a communicator. */
void ta_findings_divergence_scan(ta_an *a, const int *covered_g)
{
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        if (covered_g[g]) continue;
        for (uint32_t si = 0; si < n->nseqs; si++) {
            if (!n->sigbad[si]) continue;
            uint32_t s = ta_gseq_at(n, si);
            /* partition by signature: biggest group is the reference */
            int np = n->npos;
            int *grp = xmalloc(sizeof(int) * (size_t)np), ng = 0;
            int64_t *rep = xmalloc(sizeof(int64_t) * (size_t)np);
            int *rept = xmalloc(sizeof(int) * (size_t)np), *cnt = xcalloc((size_t)np, sizeof(int));
            for (int p = 0; p < np; p++) {
                grp[p] = -1;
                if (n->member[p] < 0) continue;
                ta_trace *t = a->tr[n->member[p]];
                int64_t ci = ta_comm_call(&t->comms[n->local[p]], s);
                if (ci < 0) continue;
                const ta_call *c = &t->calls[ci];
                int j;
                for (j = 0; j < ng; j++)
                    if (ta_sig_equal(&a->tr[rept[j]]->calls[rep[j]], c)) break;
                if (j == ng) { rept[ng] = n->member[p]; rep[ng] = ci; ng++; }
                grp[p] = j;
                cnt[j]++;
            }
            int ref = 0;
            for (int j = 1; j < ng; j++)
                if (cnt[j] > cnt[ref] || (cnt[j] == cnt[ref] && a->tr[rept[j]]->rank > a->tr[rept[ref]]->rank)) ref = j;
            int *cu = xmalloc(sizeof(int) * (size_t)np), *ot = xmalloc(sizeof(int) * (size_t)np), nc = 0, no = 0;
            int ct = -1;
            for (int p = 0; p < np; p++) {
                if (grp[p] < 0) continue;
                if (grp[p] == ref) ot[no++] = a->tr[n->member[p]]->rank;
                else { cu[nc++] = a->tr[n->member[p]]->rank; if (ct < 0) ct = p; }
            }
            ta_finding *f = ta_finding_new(a, K_DIVERGENCE);
            snprintf(f->subkind, sizeof f->subkind, "different_call");
            f->g = g;
            f->seq = s;
            int cti = n->member[ct];
            ta_side_set(&f->culprit, cu, nc, cti, ta_comm_call(&a->tr[cti]->comms[n->local[ct]], s));
            ta_side_set(&f->other, ot, no, rept[ref], rep[ref]);
            f->t = ta_wall(a->tr[cti], a->tr[cti]->calls[f->culprit.call].enter_ns);
            ta_finding_describe(a, f);
            free(grp); free(rep); free(rept); free(cnt); free(cu); free(ot);
            break;
        }
    }
}

/* "AllReduce(...) #5 on comm 0x... at fn (file:line)" of a side's call, NULL
 * when it has none; the side's stacks become that call's */
static char *side_call_text(ta_an *a, ta_side *sd)
{
    if (sd->trace < 0 || sd->call < 0) return NULL;
    ta_trace *t = a->tr[sd->trace];
    sd->stack = t->calls[sd->call].stack;
    sd->pystack = t->calls[sd->call].pystack;
    char *c = ta_call_text(a, t, sd->call), *s = ta_site_text(a, t, sd->stack, sd->pystack);
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
    const char *sk = f->subkind;
    if (f->kind == K_DIVERGENCE && !strcmp(sk, "extra_call")) {
        f->message = xasprintf("%s %s issued %s, a call %s %s never made at this point (an extra collective on %s %s)%s%s",
                               cs, cr, ccall ? ccall : "a collective", os, orr, cs, cr,
                               ocall ? "; they issued instead " : "", ocall ? ocall : "");
        f->hint = xstrdup("make every rank of the communicator issue the same collectives in the same order: move the "
                          "collective out of the rank-specific branch (e.g. `if rank == 0:`), or issue it on every rank");
    } else if (f->kind == K_DIVERGENCE && !strcmp(sk, "one_sided")) {
        f->message = xasprintf("only %s %s entered %s; %s %s never did",
                               cs, cr, ccall ? ccall : "this collective", os, orr);
        f->hint = xstrdup("a collective inside code that only some ranks run (saving a checkpoint on rank 0, logging): "
                          "run it on every rank of the communicator or use a communicator of only those ranks");
    } else if (f->kind == K_DIVERGENCE && !strcmp(sk, "skipped_call")) {
        char *ctx = skipped_text(a, f, cs, cr, os, orr);
        f->message = xasprintf("%s %s skipped a collective: %s %s issued %s where %s %s issued %s%s",
                               cs, cr, os, orr, ocall ? ocall : "a collective", cs, cr,
                               ccall ? ccall : "something else", ctx);
        free(ctx);
        f->hint = xstrdup("this rank took a different path (fewer micro-batches, an early return, a skipped module): "
                          "make all ranks issue the same number of collectives (DistributedSampler with drop_last, "
                          "the same number of micro-batches, no rank-dependent early exit)");
    } else if (f->kind == K_DIVERGENCE && !strcmp(sk, "order")) {
        f->message = xasprintf("%s %s issued %s where %s %s issued %s: the order of calls across communicators differs",
                               cs, cr, ccall ? ccall : "?", os, orr, ocall ? ocall : "?");
        f->hint = xstrdup("issue collectives of different communicators in the same order on every rank");
    } else if (f->kind == K_DIVERGENCE && !strcmp(sk, "config")) {
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
        if (!strcmp(sk, "not_run"))
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
    } else if (f->kind == K_P2P && !strcmp(sk, "size_mismatch")) {
        f->message = xasprintf("%s %s sent %s but %s %s received it as %s", cs, cr, ccall ? ccall : "?", os, orr,
                               ocall ? ocall : "?");
        f->hint = xstrdup("the send and the matching receive must have the same count and datatype");
    } else if (f->kind == K_P2P) {
        f->message = xasprintf("%s %s waits in %s, but %s %s never issued the matching %s",
                               os, orr, ocall ? ocall : "a send/recv", cs, cr,
                               f->other.trace >= 0 && a->tr[f->other.trace]->calls[f->other.call].op == OP_RECV ? "send" : "receive");
        f->hint = xstrdup("pipeline stages disagree on the sends and receives (a skipped send, a wrong peer, a different "
                          "number of micro-batches): make both sides issue matching send/recv pairs");
    } else {
        f->message = xasprintf("%s %s never issued %s, which %s %s issued and wait in", cs, cr,
                               ocall ? ocall : "the collective", os, orr);
        f->hint = xstrdup("the peers wait for this rank: see how it ended and what it did last; if it exited or "
                          "crashed early, fix that; if it took another path, make all ranks issue the same collectives");
    }
    free(cr); free(orr); free(ccall); free(ocall);
}

/* Matched send/recv pairs whose count or datatype differ although the pair
 * did not hang (same number of bytes): the first such pair of each
 * (communicator, sender, receiver). Pairs already reported are skipped. */
void ta_findings_p2p_scan(ta_an *a)
{
    int nfirst = a->nf;
    for (int ti = 0; ti < a->ntr; ti++) {
        ta_trace *t = a->tr[ti];
        int *seen_peer = NULL;
        int nseen = 0;
        for (int64_t i = 0; i < t->ncalls; i++) {
            const ta_call *c = &t->calls[i];
            if (c->op != OP_SEND || c->seq == 0 || c->comm < 0 || t->comms[c->comm].g < 0) continue;
            const ta_gcomm *n = &a->gc[t->comms[c->comm].g];
            if (c->rp < 0 || c->rp >= n->npos || n->member[c->rp] < 0) continue;
            int pt = n->member[c->rp];
            int64_t pc = ta_p2p_find(a, pt, n->local[c->rp], t->comms[c->comm].rank, 0, c->seq);
            if (pc < 0) continue;
            const ta_call *r = &a->tr[pt]->calls[pc];
            if (r->count == c->count && r->dtype == c->dtype) continue;
            int key = t->comms[c->comm].g * 65536 + c->rp, dup = 0;
            for (int k = 0; k < nseen; k++) dup |= seen_peer[k] == key;
            if (dup) continue;
            seen_peer = xrealloc(seen_peer, sizeof(int) * (size_t)(nseen + 1));
            seen_peer[nseen++] = key;
            int g = t->comms[c->comm].g;
            for (int k = 0; k < nfirst; k++)
                if (a->f[k].kind == K_P2P && a->f[k].g == g && a->f[k].seq == c->seq) dup = 1;
            if (dup) continue;
            ta_finding *f = ta_finding_new(a, K_P2P);
            snprintf(f->subkind, sizeof f->subkind, "size_mismatch");
            f->g = g;
            f->seq = c->seq;
            int r1 = t->rank, r2 = a->tr[pt]->rank;
            ta_side_set(&f->culprit, &r1, 1, ti, i);
            ta_side_set(&f->other, &r2, 1, pt, pc);
            f->t = ta_wall(t, c->enter_ns);
            ta_finding_describe(a, f);
        }
        free(seen_peer);
    }
}

/* Ranks below the world size without a trace: a root cause when the others
 * were stopped by a signal (they may be waiting for them). */
void ta_findings_no_trace(ta_an *a)
{
    /* ranks without a trace */
    if (a->nmissing) {
        ta_finding *f = ta_finding_new(a, K_NO_TRACE);
        ta_side_set(&f->culprit, a->missing_ranks, a->nmissing, -1, -1);
        int *o = xmalloc(sizeof(int) * (size_t)(a->ntr + 1));
        int killed = 0;
        for (int t = 0; t < a->ntr; t++) {
            o[t] = a->tr[t]->rank;
            killed += a->tr[t]->end_state != END_EXITED;
        }
        ta_side_set(&f->other, o, a->ntr, -1, -1);
        free(o);
        /* the communicator with an empty place where the others stopped */
        int bestg = -1;
        uint32_t bests = 0;
        for (int g = 0; g < a->ngc; g++) {
            int empty = 0;
            for (int p = 0; p < a->gc[g].npos; p++) empty += a->gc[g].member[p] < 0;
            if (!empty) continue;
            if (bestg < 0 || a->gc[g].npos > a->gc[bestg].npos) { bestg = g; bests = a->gc[g].maxseq; }
        }
        f->g = bestg;
        f->seq = bestg >= 0 ? (int64_t)bests : -1;
        char *m = ta_ranks_text(a->missing_ranks, a->nmissing);
        if (a->missing_unlisted) {
            char *m2 = xasprintf("%s and %d more", m, a->missing_unlisted);
            free(m);
            m = m2;
        }
        /* ranks whose trace write failed (the shim's marker) are not ranks killed before any write */
        int *wf = xmalloc(sizeof(int) * ((size_t)a->nmissing + 1)), nwf = 0;
        const char *err = NULL;
        int one_err = 1;
        for (int i = 0; i < a->nmissing; i++) {
            int k = a->missing_wfail ? a->missing_wfail[i] : -1;
            if (k < 0) continue;
            wf[nwf++] = a->missing_ranks[i];
            if (!err) err = a->wfail[k].error;
            else one_err &= !strcmp(err, a->wfail[k].error);
        }
        char *why = xstrdup("");
        if (nwf) {
            char *w = ta_ranks_text(wf, nwf);
            free(why);
            why = nwf == a->nmissing && !a->missing_unlisted
                      ? xasprintf(" (%s trace write failed: %s)", nwf > 1 ? "their" : "its", one_err ? err : "see the markers")
                      : xasprintf(" (the trace write of rank%s %s failed: %s)", nwf > 1 ? "s" : "", w,
                                  one_err ? err : "see the markers");
            free(w);
        }
        if (killed && bestg >= 0) {
            int64_t ci = -1;
            int rt = -1;
            for (int p = 0; p < a->gc[bestg].npos && ci < 0; p++)
                if (a->gc[bestg].member[p] >= 0) { rt = a->gc[bestg].member[p]; ci = ta_call_at(a, rt, bestg, bests); }
            f->other.trace = rt;
            f->other.call = ci;
            char *c = ci >= 0 ? ta_call_text(a, a->tr[rt], ci) : xstrdup("their last collective");
            f->message = xasprintf("rank%s %s left no trace%s; the other ranks were stopped by a signal and the last "
                                   "collective they issued on the communicator %s to is %s, which may be "
                                   "waiting for %s",
                                   a->nmissing > 1 ? "s" : "", m, why, a->nmissing > 1 ? "they belong" : "it belongs", c,
                                   a->nmissing > 1 ? "them" : "it");
            free(c);
            f->root = 1;
        } else {
            f->message = xasprintf("rank%s %s of %d left no trace%s", a->nmissing > 1 || a->missing_unlisted ? "s" : "",
                                   m, a->world, why);
        }
        static const char killed_hint[] = "a rank without a trace was killed before the shim could write (SIGKILL, OOM "
                                          "killer, node failure) or did not run with the shim; look at its log and at "
                                          "the launcher's report";
        static const char wf_hint[] = "the shim could not write the trace (its marker trshim.*.write-failed says why): "
                                      "free space where the traces are written (TRSHIM_DIR) or point TRSHIM_DIR at a "
                                      "filesystem with room";
        if (!nwf) f->hint = xstrdup(killed_hint);
        else if (nwf == a->nmissing && !a->missing_unlisted) f->hint = xasprintf("%s", wf_hint);
        else f->hint = xasprintf("%s; the other ranks without a trace were killed before the shim could write (SIGKILL, "
                                 "OOM killer, node failure) or did not run with the shim: look at their logs and at the "
                                 "launcher's report", wf_hint);
        free(wf);
        free(why);
        free(m);
    }
}

/* Collectives issued through a *Config entry point whose members passed
 * different configs (NCCL requires the same on every rank): the first such
 * seq of each communicator, a divergence / config finding. Plain calls and
 * configs not known are left out of the comparison (a plain call is the
 * same collective; ranks may mix them). */
void ta_findings_config(ta_an *a)
{
    int any = 0;
    for (int t = 0; t < a->ntr && !any; t++) any = a->tr[t]->ncfgs > 0;
    if (!any) return;
    int nfirst = a->nf;
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        int dup = 0;
        for (int k = 0; k < nfirst && !dup; k++) dup = a->f[k].kind == K_DIVERGENCE && !strcmp(a->f[k].subkind, "config") && a->f[k].g == g;
        if (dup) continue;
        int np = n->npos;
        int *grp = xmalloc(sizeof(int) * (size_t)(np + 1)), *cnt = xcalloc((size_t)np + 1, sizeof(int));
        int *rt = xmalloc(sizeof(int) * (size_t)(np + 1));
        int64_t *rc = xmalloc(sizeof(int64_t) * (size_t)(np + 1));
        int *lowest = xmalloc(sizeof(int) * (size_t)(np + 1));
        for (uint32_t si = 0; si < n->nseqs; si++) {
            uint32_t s = ta_gseq_at(n, si);
            int ng = 0;
            for (int p = 0; p < np; p++) {
                grp[p] = -1;
                if (n->member[p] < 0) continue;
                const ta_trace *t = a->tr[n->member[p]];
                int64_t ci = ta_comm_call(&t->comms[n->local[p]], s);
                const ta_collcfg *c = ci >= 0 ? ta_call_cfg(t, ci) : NULL;
                if (!c || c->state == CFG_UNKNOWN || c->state == CFG_NULL) continue;
                int j;
                for (j = 0; j < ng; j++)
                    if (ta_cfg_equal(ta_call_cfg(a->tr[rt[j]], rc[j]), c)) break;
                if (j == ng) { rt[ng] = n->member[p]; rc[ng] = ci; cnt[ng] = 0; lowest[ng] = t->rank; ng++; }
                if (t->rank < lowest[j]) lowest[j] = t->rank;
                grp[p] = j;
                cnt[j]++;
            }
            if (ng < 2) continue;
            /* the largest group is the reference; a tie: the group with the lowest rank is the culprit */
            int ref = 0;
            for (int j = 1; j < ng; j++)
                if (cnt[j] > cnt[ref] || (cnt[j] == cnt[ref] && lowest[j] > lowest[ref])) ref = j;
            int *cu = xmalloc(sizeof(int) * (size_t)np), *ot = xmalloc(sizeof(int) * (size_t)np), nc = 0, no = 0, ct = -1;
            for (int p = 0; p < np; p++) {
                if (grp[p] < 0) continue;
                if (grp[p] == ref) ot[no++] = a->tr[n->member[p]]->rank;
                else { cu[nc++] = a->tr[n->member[p]]->rank; if (ct < 0) ct = p; }
            }
            ta_finding *f = ta_finding_new(a, K_DIVERGENCE);
            snprintf(f->subkind, sizeof f->subkind, "config");
            f->g = g;
            f->seq = s;
            int cti = n->member[ct];
            ta_side_set(&f->culprit, cu, nc, cti, ta_comm_call(&a->tr[cti]->comms[n->local[ct]], s));
            ta_side_set(&f->other, ot, no, rt[ref], rc[ref]);
            f->t = ta_wall(a->tr[cti], a->tr[cti]->calls[f->culprit.call].enter_ns);
            ta_finding_describe(a, f);
            free(cu); free(ot);
            break;
        }
        free(grp); free(cnt); free(rt); free(rc); free(lowest);
    }
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
