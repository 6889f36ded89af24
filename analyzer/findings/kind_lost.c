/* trace_lost: calls the shim recorded but the trace folder could not take.
 *
 * When the folder fills (ENOSPC, a quota), the shim's ring file cannot grow:
 * the newer records go to memory instead (a store into a hole of a full
 * disk would be SIGBUS), the header says from which slot (file_records) and
 * why (lost_errno; include/trshim/ring_format.h), and they reach the folder
 * only if a trace can be written later, which on a full folder it cannot
 * (its marker says so, an empty one when not even the marker's line fits).
 * A rank whose calls are read from such a ring (t->lost_folder > 0) lacks
 * its last calls: not torn, not missing, not a rank that stopped there. The
 * analysis treats them as unknown (ta_coll_lost); this finding says that
 * the folder filled, which ranks lost which calls (per communicator, the
 * collective seqs numbered but not recorded, exactly), and that the rest
 * of the report comes from the calls recorded before. Never the root cause
 * of a job (the job itself was not hurt: the shim only kept less). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/ta_model.h"
#include "ta_finding.h"
#include "ta_jw.h"
#include "ta_tx.h"

typedef struct { uint32_t from, to; } seq_range;    /* [from, to] */

typedef struct {
    int g;                       /* the job's communicator */
    seq_range *r; int nr;        /* collective seqs numbered but not recorded, ascending */
    int64_t seqs;                /* how many */
} lost_comm;

typedef struct {
    int trace, rank;
    int64_t records;             /* records not in the ring file (every kind of call) */
    int err;                     /* the header's lost_errno */
    int comms_from;              /* communicator slots not in the file from this one on, 0 none */
    lost_comm *c; int nc;
} lost_rank;

typedef struct {
    lost_rank *r; int n;
} lost_data;

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* the collective seqs of local comm lc that trace t numbered (up to its
 * count) and does not hold, from its window's start */
static void lost_seqs(const ta_trace *t, int lc, lost_comm *out)
{
    const ta_comm *k = &t->comms[lc];
    int64_t upto = k->colls;
    uint32_t *kept = NULL;
    int64_t nk = 0, cap = 0;
    for (int64_t i = 0; i < t->ncalls; i++) {
        const ta_call *c = &t->calls[i];
        if (c->comm != lc || !ta_op_is_coll(c->op) || !c->seq) continue;
        if (nk == cap) { cap = cap ? 2 * cap : 256; kept = xrealloc(kept, sizeof *kept * (size_t)cap); }
        kept[nk++] = c->seq;
    }
    if (nk > 1) qsort(kept, (size_t)nk, sizeof *kept, cmp_u32);
    /* below the window (the ring's own overwriting) is not the folder's loss */
    uint64_t next = t->ring_lost > 0 ? (nk ? kept[0] : (uint64_t)upto + 1) : 1;
    int rcap = 0;
    for (int64_t i = 0; i <= nk; i++) {
        uint64_t s = i < nk ? kept[i] : (uint64_t)(upto > 0 ? upto : 0) + 1;
        if (s > next && next <= (uint64_t)UINT32_MAX) {
            if (out->nr == rcap) { rcap = rcap ? 2 * rcap : 4; out->r = xrealloc(out->r, sizeof *out->r * (size_t)rcap); }
            uint64_t to = s - 1 > UINT32_MAX ? UINT32_MAX : s - 1;
            out->r[out->nr++] = (seq_range){(uint32_t)next, (uint32_t)to};
            out->seqs += (int64_t)(to - next + 1);
        }
        if (s + 1 > next) next = s + 1;
    }
    free(kept);
}

static int same_losses(const lost_rank *x, const lost_rank *y)
{
    if (x->records != y->records || x->nc != y->nc || x->comms_from != y->comms_from) return 0;
    for (int i = 0; i < x->nc; i++) {
        if (x->c[i].g != y->c[i].g || x->c[i].nr != y->c[i].nr) return 0;
        for (int k = 0; k < x->c[i].nr; k++)
            if (x->c[i].r[k].from != y->c[i].r[k].from || x->c[i].r[k].to != y->c[i].r[k].to) return 0;
    }
    return 1;
}

/* "comm 0x... seqs 2049-5000, 6000-6100" for each communicator, "; " between */
static char *losses_text(const ta_an *a, const lost_rank *l)
{
    size_t cap = 128, len = 0;
    char *s = xcalloc(cap, 1);
    for (int i = 0; i < l->nc; i++) {
        const lost_comm *c = &l->c[i];
        for (int k = -1; k < c->nr && k < 8; k++) {
            char *part = k < 0 ? xasprintf("%scomm %s seq%s ", i ? "; " : "", ta_comm_name(a, c->g), c->seqs > 1 ? "s" : "")
                       : k == 7 && c->nr > 8 ? xasprintf(" and %d more ranges", c->nr - 7)
                       : c->r[k].from == c->r[k].to ? xasprintf("%s%u", k ? ", " : "", c->r[k].from)
                                                    : xasprintf("%s%u-%u", k ? ", " : "", c->r[k].from, c->r[k].to);
            size_t pl = strlen(part);
            if (len + pl + 1 > cap) { cap = 2 * (len + pl + 1); s = xrealloc(s, cap); }
            memcpy(s + len, part, pl + 1);
            len += pl;
            free(part);
        }
    }
    return s;
}

static int subkind_of(int err)
{
    return err == ENOSPC || err == EDQUOT ? SK_DISK_FULL : SK_WRITE_FAILED;
}

void ta_detect_lost(ta_an *a, int look)
{
    if (look != TA_LOOK_CALLS) return;
    lost_data *d = xcalloc(1, sizeof *d);
    d->r = xcalloc((size_t)a->ntr + 1, sizeof *d->r);
    for (int i = 0; i < a->ntr; i++) {
        const ta_trace *t = a->tr[i];
        if (!t || t->lost_folder <= 0) continue;
        lost_rank *l = &d->r[d->n++];
        *l = (lost_rank){.trace = i, .rank = t->rank, .records = t->lost_folder, .err = t->lost_errno,
                         .comms_from = t->lost_comms_from};
        l->c = xcalloc((size_t)t->ncomms + 1, sizeof *l->c);
        for (int lc = 0; lc < t->ncomms; lc++) {
            lost_comm c = {.g = t->comms[lc].g};
            if (c.g < 0) continue;
            lost_seqs(t, lc, &c);
            if (c.nr) l->c[l->nc++] = c;
        }
    }
    if (!d->n) { free(d->r); free(d); return; }
    ta_finding *f = ta_finding_new(a, K_TRACE_LOST);
    int err = d->r[0].err;
    f->subkind = subkind_of(err);
    f->data = d;
    int *ranks = xcalloc((size_t)d->n + 1, sizeof *ranks);
    for (int i = 0; i < d->n; i++) ranks[i] = d->r[i].rank;
    ta_side_set(&f->culprit, ranks, d->n, d->r[0].trace, -1);
    /* the message: the ranks with the same losses together */
    size_t cap = 256, len = 0;
    char *list = xcalloc(cap, 1);
    int *done = xcalloc((size_t)d->n + 1, sizeof *done);
    for (int i = 0; i < d->n; i++) {
        if (done[i]) continue;
        int n = 0;
        for (int k = i; k < d->n; k++)
            if (!done[k] && same_losses(&d->r[i], &d->r[k])) { done[k] = 1; ranks[n++] = d->r[k].rank; }
        char *rt = ta_ranks_text(ranks, n), *lt = losses_text(a, &d->r[i]);
        char *part = xasprintf("%s%s %s: %s%s%lld call%s", len ? "; " : "", n > 1 ? "ranks" : "rank", rt, lt,
                               lt[0] ? " (" : "", (long long)d->r[i].records, d->r[i].records == 1 ? "" : "s");
        char *tail = d->r[i].comms_from ? xasprintf(", and the communicators it made after the folder filled%s",
                                                    lt[0] ? ")" : "")
                                        : xstrdup(lt[0] ? ")" : "");
        char *both = xasprintf("%s%s", part, tail);
        size_t pl = strlen(both);
        if (len + pl + 1 > cap) { cap = 2 * (len + pl + 1); list = xrealloc(list, cap); }
        memcpy(list + len, both, pl + 1);
        len += pl;
        free(rt); free(lt); free(part); free(tail); free(both);
    }
    free(done);
    char *rt = ta_ranks_text(f->culprit.ranks, f->culprit.nranks);
    const char *why = err ? strerror(err) : "the error is not known";
    if (err == ENOSPC || err == EDQUOT)
        f->message = xasprintf("the trace folder filled up (%s) while the job ran: the shim of %s %s kept the last "
                               "calls in memory only, and no trace could be written after; not recorded: %s. What "
                               "%s there is unknown (not missing, not a rank that stopped): this report comes from "
                               "the calls recorded before", why, f->culprit.nranks > 1 ? "ranks" : "rank", rt, list,
                               f->culprit.nranks > 1 ? "they did" : "it did");
    else
        f->message = xasprintf("the shim could not keep every call in the trace folder (%s): the ring file of %s %s "
                               "could not grow, its last calls were kept in memory only and no trace could be written "
                               "after; not recorded: %s. What %s there is unknown (not missing): this report comes "
                               "from the calls recorded before", why, f->culprit.nranks > 1 ? "ranks" : "rank", rt, list,
                               f->culprit.nranks > 1 ? "they did" : "it did");
    free(rt);
    free(list);
    free(ranks);
    f->hint = xstrdup(err == ENOSPC || err == EDQUOT
                          ? "give the trace folder room: TRSHIM_DIR on a file system with free space (each rank's "
                            "ring file takes up to TRSHIM_RING x 128 bytes as it fills, each trace a few hundred KB), "
                            "or a smaller TRSHIM_RING; run the job again to see the calls that were lost"
                          : "see the shim's trshim: lines of the ranks named; run the job again to see the calls "
                            "that were lost");
}

void ta_json_lost(ta_jw *w, ta_an *a, const ta_finding *f)
{
    const lost_data *d = f->data;
    if (!d) return;
    jw_key(w, "lost");
    jw_open(w, '[');
    for (int i = 0; i < d->n; i++) {
        const lost_rank *l = &d->r[i];
        jw_sep(w);
        jw_open(w, '{');
        jw_int(w, "rank", l->rank);
        jw_int(w, "records", l->records);
        jw_intn(w, "errno", l->err, !l->err);
        jw_str(w, "error", l->err ? strerror(l->err) : NULL);
        jw_str(w, "ring_file", a->tr[l->trace]->ring_file);
        jw_intn(w, "comms_from", l->comms_from, !l->comms_from);
        jw_key(w, "comms");
        jw_open(w, '[');
        for (int k = 0; k < l->nc; k++) {
            const lost_comm *c = &l->c[k];
            jw_sep(w);
            jw_open(w, '{');
            jw_str(w, "comm", ta_comm_name(a, c->g));
            jw_int(w, "count", c->seqs);
            jw_key(w, "seqs");
            jw_open(w, '[');
            for (int q = 0; q < c->nr; q++) {
                jw_sep(w);
                fprintf(w->o, "[%u, %u]", c->r[q].from, c->r[q].to);
            }
            jw_close(w, ']');
            jw_close(w, '}');
        }
        jw_close(w, ']');
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

void ta_text_lost(ta_tx *x, const ta_finding *f)
{
    ta_tx_head(x, f, "");
    const lost_data *d = f->data;
    for (int i = 0; d && i < d->n; i++) {
        const lost_rank *l = &d->r[i];
        char *lt = losses_text(x->a, l);
        ta_esc_fmt(x->o, x->md ? TA_ESC_MD : TA_ESC_TEXT, "%s%srank %d: %s%s%lld record%s not in %s\n", x->ind,
                   x->md ? "- " : "", l->rank, lt, lt[0] ? "; " : "", (long long)l->records,
                   l->records == 1 ? "" : "s", x->a->tr[l->trace]->ring_file);
        free(lt);
    }
    if (x->md) fputc('\n', x->o);
}

void ta_drop_lost(void *data)
{
    lost_data *d = data;
    for (int i = 0; i < d->n; i++) {
        for (int k = 0; k < d->r[i].nc; k++) free(d->r[i].c[k].r);
        free(d->r[i].c);
    }
    free(d->r);
    free(d);
}
