/* --json: the schema of docs/analysis-format.md. */
#include <stdlib.h>
#include <string.h>

#include "findings/ta_finding.h"
#include "ta_env.h"
#include "ta_out.h"

/* The rank of each place of communicator g (null: no trace). Past 64
 * places per trace found (4096 at least), as for ranks without a trace, a
 * crafted size of 16 million places makes no 16-million-entry list: the
 * places beyond with a trace follow as "<k>_beyond": [[place, rank]...],
 * and "<k>_unlisted" counts the places left out. */
static void comm_members(ta_jw *w, ta_an *a, const char *k, int g)
{
    int n = g >= 0 ? a->gc[g].npos : 0;
    int64_t bound = (int64_t)a->ntr * 64 > 4096 ? (int64_t)a->ntr * 64 : 4096;
    int list = n <= bound ? n : (int)bound;
    jw_key(w, k);
    fputc('[', w->o);
    for (int p = 0; p < list; p++) {
        int m = a->gc[g].member[p];
        if (p) fputc(',', w->o);
        if (m >= 0) fprintf(w->o, "%d", a->tr[m]->rank);
        else fputs("null", w->o);
    }
    fputc(']', w->o);
    if (list == n) return;
    char key[64];
    snprintf(key, sizeof key, "%s_beyond", k);
    jw_key(w, key);
    fputc('[', w->o);
    int beyond = 0;
    for (int p = list; p < n; p++) {
        int m = a->gc[g].member[p];
        if (m < 0) continue;
        fprintf(w->o, "%s[%d,%d]", beyond++ ? "," : "", p, a->tr[m]->rank);
    }
    fputc(']', w->o);
    snprintf(key, sizeof key, "%s_unlisted", k);
    jw_int(w, key, n - list - beyond);
}

/* a hang's stuck collective: each member's state there (members.c) */
static void stuck_json(ta_jw *w, ta_an *a, const ta_finding *f)
{
    jw_key(w, "stuck_at");
    if (!f->nmem) { fputs("null", w->o); return; }
    jw_open(w, '{');
    jw_str(w, "comm", ta_comm_name(a, f->at_g));
    jw_int(w, "seq", f->at_seq);
    jw_key(w, "members");
    jw_open(w, '[');
    for (int p = 0; p < f->nmem; p++) {
        const ta_member *m = &f->mem[p];
        const ta_call *c = m->call >= 0 ? &a->tr[m->trace]->calls[m->call] : NULL;
        static const char *const gpu[4] = {NULL, "pending", "done", "error"};
        jw_sep(w);
        jw_open(w, '{');
        jw_int(w, "place", m->place);
        jw_intn(w, "rank", m->rank, m->rank < 0);
        jw_str(w, "state", ta_mstate_names[m->state]);
        jw_key(w, "pending_s");
        if (m->pending_s >= 0) fprintf(w->o, "%.3f", m->pending_s);
        else fputs("null", w->o);
        jw_str(w, "op", c ? ta_op_names[c->op] : NULL);
        jw_str(w, "gpu", c && c->gpu < 4 ? gpu[c->gpu] : NULL);
        jw_key(w, "returned");
        if (c) fputs(c->exit_ns != TA_NULL64 ? "true" : "false", w->o);
        else fputs("null", w->o);
        jw_bool(w, "lost", m->lost);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

void ta_out_json(ta_an *a, FILE *o)
{
    ta_jw w = {o, {1}, 0};
    jw_open(&w, '{');
    jw_str(&w, "tool", "tranalyze");
    jw_str(&w, "version", TA_VERSION);
    jw_int(&w, "schema", 1);
    jw_str(&w, "status", !a->ntr ? "error" : a->nf ? "findings" : "clean");
    jw_key(&w, "job");
    jw_open(&w, '{');
    jw_str(&w, "id", a->job);
    jw_str(&w, "source", a->ntr ? a->tr[0]->job_source : NULL);
    jw_int(&w, "world_size", a->world);
    jw_int(&w, "traces", a->ntr);
    jw_int(&w, "files", a->nfiles);
    jw_ints(&w, "ranks_without_trace", a->missing_ranks, a->nmissing);
    jw_int(&w, "ranks_without_trace_unlisted", a->missing_unlisted);
    jw_key(&w, "other_jobs");
    jw_open(&w, '[');
    for (int i = 0; i < a->nother_jobs; i++) { jw_sep(&w); jw_string(o, a->other_jobs[i]); }
    jw_close(&w, ']');
    jw_close(&w, '}');

    ta_abort_json(&w, a);

    jw_key(&w, "inputs");
    jw_open(&w, '[');
    for (int i = 0; i < a->nnotes; i++) {
        jw_sep(&w);
        jw_open(&w, '{');
        jw_str(&w, "file", a->notes[i].file);
        jw_str(&w, "problem", a->notes[i].text);
        jw_bool(&w, "skipped", a->notes[i].fatal);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');

    /* warnings about the job's environment (not its input, not findings) */
    jw_key(&w, "warnings");
    jw_open(&w, '[');
    for (int i = 0; i < a->nwarns; i++) {
        const ta_warning *x = &a->warns[i];
        jw_sep(&w);
        jw_open(&w, '{');
        jw_str(&w, "kind", x->kind);
        jw_str(&w, "message", x->text);
        jw_str(&w, "library", x->library);
        jw_intn(&w, "version", x->version, x->version <= 0);
        jw_key(&w, "functions");
        jw_open(&w, '[');
        for (int k = 0; k < x->nfunctions; k++) { jw_sep(&w); jw_string(o, x->functions[k]); }
        jw_close(&w, ']');
        jw_int(&w, "functions_not_listed", x->functions_more);
        jw_ints(&w, "ranks", x->ranks, x->nranks);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');

    jw_key(&w, "findings");
    jw_open(&w, '[');
    for (int i = 0; i < a->nf; i++) {
        ta_finding *f = &a->f[i];
        jw_sep(&w);
        jw_open(&w, '{');
        jw_str(&w, "kind", ta_kind_names[f->kind]);
        jw_str(&w, "subkind", f->subkind ? ta_subkind_names[f->subkind] : NULL);
        jw_bool(&w, "root_cause", f->root);
        jw_str(&w, "comm", f->g >= 0 ? ta_comm_name(a, f->g) : NULL);
        comm_members(&w, a, "comm_ranks", f->g);
        jw_intn(&w, "seq", f->seq, f->seq < 0);
        jw_ints(&w, "ranks", f->culprit.ranks, f->culprit.nranks);
        jw_ints(&w, "others", f->other.ranks, f->other.nranks);
        jw_str(&w, "message", f->message);
        jw_str(&w, "hint", f->hint);
        jw_call(&w, a, "call", &f->culprit);
        jw_call(&w, a, "others_call", &f->other);
        jw_key(&w, "stopped_at");
        if (f->stop_g >= 0) {
            jw_open(&w, '{');
            jw_str(&w, "comm", ta_comm_name(a, f->stop_g));
            jw_int(&w, "seq", f->stop_seq);
            jw_close(&w, '}');
        } else {
            fputs("null", o);
        }
        stuck_json(&w, a, f);
        ta_graph_launches_json(&w, a, f);        /* CUDA graphs launched a different number of times */
        if (ta_kinds[f->kind].json) ta_kinds[f->kind].json(&w, a, f);   /* the kind's own members */
        jw_key(&w, "consequences");
        jw_open(&w, '[');
        for (int k = 0; k < f->ncons; k++) {
            ta_conseq *c = &f->cons[k];
            jw_sep(&w);
            jw_open(&w, '{');
            jw_str(&w, "comm", ta_comm_name(a, c->g));
            jw_int(&w, "seq", c->seq);
            jw_str(&w, "op", c->op >= 0 ? ta_op_names[c->op] : NULL);
            jw_str(&w, "call", c->what);
            jw_ints(&w, "waiting", c->waiting, c->nwaiting);
            jw_ints(&w, "waiting_for", c->waitfor, c->nwaitfor);
            jw_close(&w, '}');
        }
        jw_close(&w, ']');
        jw_close(&w, '}');
    }
    jw_close(&w, ']');

    ta_graphs_json(&w, a);                       /* the job's CUDA graphs */
    int nshared;
    char **shared = ta_env_shared(a, &nshared);
    ta_json_env_shared(&w, shared, nshared);
    jw_key(&w, "ranks");
    jw_open(&w, '[');
    for (int i = 0; i < a->ntr; i++) {
        ta_trace *t = a->tr[i];
        jw_sep(&w);
        jw_open(&w, '{');
        jw_int(&w, "rank", t->rank);
        jw_str(&w, "host", t->host);
        jw_int(&w, "pid", t->pid);
        jw_intn(&w, "device", t->device, t->device < 0);
        jw_str(&w, "file", t->file);
        jw_key(&w, "ended");
        jw_open(&w, '{');
        jw_str(&w, "state", ta_end_names[t->end_state]);
        jw_intn(&w, "signal", t->end_signal, t->end_signal < 0);
        jw_str(&w, "signal_name", t->end_signal > 0 ? ta_signame(t->end_signal) : NULL);
        jw_bool(&w, "in_call", t->end_in_call);
        char *et = ta_end_text(a, t);
        jw_str(&w, "text", et);
        free(et);
        jw_close(&w, '}');
        jw_bool(&w, "waiting", a->stuck ? a->stuck[i] : 0);
        jw_bool(&w, "root_cause", a->root ? a->root[i] : 0);
        jw_int(&w, "calls", t->ncalls);
        jw_int(&w, "dropped", t->dropped);
        jw_int(&w, "unloaded", t->unloaded);
        /* the ring: where the calls were read from, and how many were lost */
        jw_key(&w, "ring");
        if (t->from_ring || t->ring_file || t->ring_capacity > 0) {
            jw_open(&w, '{');
            jw_str(&w, "file", t->ring_file);
            jw_bool(&w, "from_ring", t->from_ring);
            jw_int(&w, "lost", t->ring_lost);
            jw_close(&w, '}');
        } else {
            fputs("null", o);
        }
        jw_key(&w, "last_seq");
        jw_open(&w, '{');
        for (int k = 0; k < t->ncomms; k++) {
            jw_key(&w, ta_comm_name(a, t->comms[k].g));
            fprintf(o, "%u", t->comms[k].nseq);
        }
        jw_close(&w, '}');
        int64_t pk = -1;
        for (int k = 0; k < t->nmdev; k++) if (t->mdev[k].peak > pk) pk = t->mdev[k].peak;
        jw_intn(&w, "peak_bytes", pk, pk < 0);
        jw_int(&w, "alloc_failures", t->nmfail);
        jw_key(&w, "python");           /* the trace's "python" (null: an older shim) */
        if (t->py_state) {
            jw_open(&w, '{');
            jw_str(&w, "state", t->py_state);
            jw_str(&w, "version", t->py_version);
            jw_str(&w, "detail", t->py_detail);
            int np = 0;
            for (int k = 0; k < t->npystacks; k++) np += t->pystacks[k].nframes > 0;
            jw_int(&w, "stacks", np);
            jw_close(&w, '}');
        } else {
            fputs("null", o);
        }
        ta_json_env_rank(&w, t, shared, nshared);
        jw_key(&w, "nccl");             /* the trace's "nccl" (null: not known) */
        if (t->has_nccl) {
            jw_open(&w, '{');
            jw_intn(&w, "version", t->nccl_version, t->nccl_version <= 0);
            jw_str(&w, "library", t->nccl_lib);
            jw_intn(&w, "exports", t->nccl_exports, t->nccl_exports < 0);
            jw_key(&w, "unknown_functions");
            jw_open(&w, '[');
            for (int k = 0; k < t->nnccl_unknown; k++) { jw_sep(&w); jw_string(o, t->nccl_unknown[k]); }
            jw_close(&w, ']');
            jw_close(&w, '}');
        } else {
            fputs("null", o);
        }
        jw_key(&w, "nancheck");
        if (t->nan_mode == NM_ABSENT) {
            fputs("null", o);
        } else {
            int64_t cnt[4] = {0, 0, 0, 0};
            for (int64_t k = 0; k < t->nchecks; k++) cnt[t->checks[k].status]++;
            jw_open(&w, '{');
            jw_str(&w, "mode", ta_nm_names[t->nan_mode]);
            jw_str(&w, "engine", t->nan_engine);
            jw_str(&w, "gpu_unused", t->nan_gpu_unused);
            jw_int(&w, "checks", t->nchecks);
            jw_int(&w, "nonfinite", cnt[CK_NONFINITE]);
            jw_int(&w, "not_checked", cnt[CK_NOT_CHECKED]);
            jw_int(&w, "pending", cnt[CK_PENDING]);
            jw_int(&w, "dropped", t->nan_dropped);
            jw_close(&w, '}');
        }
        jw_int(&w, "aborted_ops", t->aborted_ops);
        jw_int(&w, "after_abort", t->after_abort);
        ta_crash_json_out(&w, a, t);     /* "crash", "errors" (crash.c) */
        jw_close(&w, '}');
    }
    for (int i = 0; i < a->nmissing; i++) {
        jw_sep(&w);
        jw_open(&w, '{');
        jw_int(&w, "rank", a->missing_ranks[i]);
        jw_str(&w, "host", NULL);
        jw_key(&w, "pid"); fputs("null", o);
        jw_key(&w, "ended");
        jw_open(&w, '{');
        jw_str(&w, "state", "no_trace");
        char *txt = ta_missing_text(a, i);
        jw_str(&w, "text", txt);
        free(txt);
        jw_close(&w, '}');
        jw_key(&w, "peak_bytes"); fputs("null", o);
        jw_key(&w, "nancheck"); fputs("null", o);
        int k = a->missing_wfail ? a->missing_wfail[i] : -1;
        if (k >= 0) {              /* the shim's marker: its trace write failed */
            const ta_wfail *m = &a->wfail[k];
            jw_key(&w, "write_failed");
            jw_open(&w, '{');
            jw_str(&w, "file", m->file);
            jw_str(&w, "error", m->error);
            jw_intn(&w, "errno", m->err, !m->err);
            jw_intn(&w, "bytes", m->bytes, m->bytes < 0);
            jw_str(&w, "host", m->host);
            jw_intn(&w, "pid", m->pid, m->pid < 0);
            jw_close(&w, '}');
        }
        int c = a->missing_cut ? a->missing_cut[i] : -1;
        if (c >= 0) {              /* its trace file is there, cut short: skipped */
            jw_key(&w, "truncated");
            jw_open(&w, '{');
            jw_str(&w, "file", a->notes[c].file);
            jw_int(&w, "bytes", a->notes[c].cut);
            jw_close(&w, '}');
        }
        jw_close(&w, '}');
    }
    jw_close(&w, ']');
    free(shared);
    ta_json_clocks(&w, a);

    jw_key(&w, "comms");
    jw_open(&w, '[');
    for (int g = 0; g < a->ngc; g++) {
        ta_gcomm *n = &a->gc[g];
        jw_sep(&w);
        jw_open(&w, '{');
        jw_str(&w, "id", ta_comm_name(a, g));
        jw_str(&w, "kind", n->kind);
        jw_key(&w, "parent");
        if (n->has_parent) fprintf(o, "\"0x%016llx\"", (unsigned long long)n->parent);
        else fputs("null", o);
        jw_intn(&w, "size", n->size, n->size < 0);
        comm_members(&w, a, "ranks", g);
        /* members whose trace says it is suspended (ncclCommSuspend, not resumed) */
        jw_key(&w, "suspended_ranks");
        fputc('[', o);
        for (int p = 0, k = 0; p < n->npos; p++) {
            int m = n->member[p];
            if (m < 0 || !a->tr[m]->comms[n->local[p]].suspended) continue;
            fprintf(o, "%s%d", k++ ? "," : "", a->tr[m]->rank);
        }
        fputc(']', o);
        jw_int(&w, "collectives", n->maxseq);
        jw_key(&w, "entry_spread");
        if (n->spread_n) {
            jw_open(&w, '{');
            jw_int(&w, "collectives", n->spread_n);
            jw_int(&w, "median_ns", n->spread_median_ns);
            jw_int(&w, "max_ns", n->spread_max_ns);
            jw_int(&w, "max_seq", n->spread_max_seq);
            jw_str(&w, "clock", ta_clock_method_names[n->spread_clock]);
            jw_close(&w, '}');
        } else {
            fputs("null", o);
        }
        jw_close(&w, '}');
    }
    jw_close(&w, ']');
    jw_close(&w, '}');
    fputc('\n', o);
}
