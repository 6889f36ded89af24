/* Divergence: ranks whose calls differ from their peers'. The hang
 * analysis finds those a hang comes from (rootcause.c, diverge.c); the
 * detector here, on communicators that did not hang: a collective whose
 * members disagree (the per-call scan), members passing different *Config
 * configs, then silent mis-pairing (mispair.c) and divergences older than
 * the ring windows (fingerprint.c), which defer to every finding of the
 * first look. And the kind's writers. */
#include <stdlib.h>
#include <string.h>

#include "align/ta_align.h"
#include "model/ta_model.h"
#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_tx.h"

/* Communicators where members disagree at some seq although nothing hung
 * there (or it was not explained by a root cause): the first such seq of
 * each communicator. covered_g[g] != 0 skips a communicator. */
static void scan(ta_an *a, const int *covered_g)
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
            f->subkind = SK_DIFFERENT_CALL;
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

/* Collectives issued through a *Config entry point whose members passed
 * different configs (NCCL requires the same on every rank): the first such
 * seq of each communicator, a divergence / config finding. Plain calls and
 * configs not known are left out of the comparison (a plain call is the
 * same collective; ranks may mix them). */
static void configs(ta_an *a)
{
    int any = 0;
    for (int t = 0; t < a->ntr && !any; t++) any = a->tr[t]->ncfgs > 0;
    if (!any) return;
    int nfirst = a->nf;
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        int dup = 0;
        for (int k = 0; k < nfirst && !dup; k++) dup = a->f[k].kind == K_DIVERGENCE && a->f[k].subkind == SK_CONFIG && a->f[k].g == g;
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
            f->subkind = SK_CONFIG;
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

void ta_detect_divergence(ta_an *a, int look)
{
    if (look == TA_LOOK_CALLS) {
        /* communicators a finding made so far (the hang analysis', a memory failure's) explains */
        int *covered = xcalloc((size_t)a->ngc + 1, sizeof(int));
        for (int i = 0; i < a->nf; i++) {
            if (a->f[i].g >= 0) covered[a->f[i].g] = 1;
            if (a->f[i].stop_g >= 0) covered[a->f[i].stop_g] = 1;
            for (int k = 0; k < a->f[i].ncons; k++) covered[a->f[i].cons[k].g] = 1;
        }
        scan(a, covered);
        free(covered);
        configs(a);
    } else {
        ta_findings_mispair(a);
        ta_findings_fingerprint(a);   /* after the per-call scans: only what they cannot see */
    }
}

/* skipped_call: the culprit's call before the gap; the culprit's own call at
 * (comm, seq) that NCCL paired with the others' of another step */
static void skipped_json(ta_jw *w, ta_an *a, const ta_finding *f)
{
    jw_call_at(w, a, "gap_before", f->culprit.trace, f->gap_before);
    jw_key(w, "mispaired");
    if (f->mis_call < 0) { fputs("null", w->o); return; }
    jw_open(w, '{');
    jw_call_at(w, a, "call", f->culprit.trace, f->mis_call);
    jw_call_at(w, a, "after", f->culprit.trace, f->mis_prev);
    jw_call_at(w, a, "others_after", f->other.trace, f->mis_peer_prev);
    jw_close(w, '}');
}

/* --json: skipped_call's calls around the gap; before_window's seqs and fingerprint groups */
void ta_json_divergence(ta_jw *w, ta_an *a, const ta_finding *f)
{
    if (f->subkind == SK_SKIPPED_CALL) skipped_json(w, a, f);
    if (f->win_upto > 0) {
        jw_key(w, "seq_window");
        fprintf(w->o, "[%lld,%lld]", (long long)f->win_after, (long long)f->win_upto);
        jw_key(w, "fingerprints");
        jw_open(w, '[');
        for (int k = 0; k < f->nfpg; k++) {
            jw_sep(w);
            jw_open(w, '{');
            jw_ints(w, "ranks", f->fpg[k].ranks, f->fpg[k].nranks);
            char h[24];
            snprintf(h, sizeof h, "0x%016llx", (unsigned long long)f->fpg[k].hash);
            jw_str(w, "hash", h);
            jw_close(w, '}');
        }
        jw_close(w, ']');
        jw_bool(w, "tie", f->fp_tie);
    }
}

/* text: the seqs of before_window in the heading; the culprit's call and the others' */
void ta_text_divergence(ta_tx *x, const ta_finding *f)
{
    char *at = f->seq < 0 && f->win_upto > 0
                   ? xasprintf("collectives #%lld-#%lld", (long long)f->win_after + 1, (long long)f->win_upto)
                   : NULL;
    ta_tx_head_sides(x, f, at);
    free(at);
    ta_tx_side(x, &f->culprit, "");
    ta_tx_side(x, &f->other, "");
}
