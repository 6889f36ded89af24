/* The traces a ring file gives (ring.c reads and checks it): one per rank
 * of its process, as the shim ranks its JSON traces ("Ranks of a
 * process", docs/trace-format.md); and rings next to the JSON traces of
 * the same process: which one holds the newest calls, and what each gives. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load/ta_crash.h"
#include "load/ta_load.h"
#include "ring_int.h"
#include "site/ta_site.h"


void ta_trace_free(ta_trace *t)
{
    if (!t) return;
    for (int i = 0; i < t->ncomms; i++) { free(t->comms[i].ckp); free(t->comms[i].byseq); free(t->comms[i].sparse); }
    free(t->comms);
    for (int i = 0; i < t->nstacks; i++) free(t->stacks[i].frames);
    free(t->stacks);
    ta_py_free(t);
    free(t->calls); free(t->call_raw); free(t->mdev); free(t->mfail);
    free(t->callx); free(t->cfgs); free(t->nccl_lib); free(t->nccl_unknown);
    ta_graphs_free(t->graphs, t->ngraphs);
    free(t->checks); free(t->ckdet);
    free(t->nan_engine); free(t->nan_gpu_unused);
    free(t->job_id); free(t->job_source); free(t->host); free(t->rank_source);
    free(t->cmdline);
    for (int i = 0; i < t->nenv; i++) free(t->env[i]);
    free(t->env);
    ta_env_free(t);
    free(t->v_trshim);
    free(t->ring_file);
    ta_crash_free(t);
    free((void *)t->file);
    free(t);
}

static void conv_comm_slot(rd *r, const trr_comm *c, ta_comm *m, int family)
{
    memset(m, 0, sizeof *m);
    m->id = c->id;
    m->has_parent = c->parent >= 0 || c->parent_id != 0;
    m->parent = m->has_parent ? c->parent_id : 0;
    snprintf(m->kind, sizeof m->kind, "%s", trr_kind_names[c->kind]);
    m->size = c->init_done && c->size >= 0 ? c->size : -1;
    m->rank = c->rank;
    m->device = c->device;
    m->init_enter = (int64_t)c->init_enter;
    m->init_exit = c->init_done ? (int64_t)c->init_exit : TA_NULL64;
    m->init_rc = c->init_done ? c->init_rc : TA_NULL64;
    m->init_stack = c->init_stack >= 0 && c->init_stack < r->nstacks ? c->init_stack : -1;
    m->init_pystack = -1;         /* a slot has no Python stack */
    snprintf(m->end_kind, sizeof m->end_kind, "%s", c->end_kind ? trr_end_names[c->end_kind] : "");
    m->end_exit = c->end_kind != TRR_END_NONE && c->end_exit ? (int64_t)c->end_exit : TA_NULL64;
    m->end_enter = c->end_kind != TRR_END_NONE && c->end_enter && c->end_enter <= INT64_MAX ? (int64_t)c->end_enter
                                                                                               : TA_NULL64;
    m->colls = (int64_t)c->colls;
    m->grow_uid = c->kind == TRR_KIND_GROW ? c->grow_uid : 0;
    m->grow_ranks = c->kind == TRR_KIND_GROW ? c->grow_ranks : 0;
    m->suspended = c->suspended == 1;
    m->suspends = c->suspends;
    /* fp_seq is 0 while the hash changes (the writer's order): a process
     * stopped then leaves a hash of unknown extent, and the fingerprint is
     * taken as absent; its checkpoints still hold */
    m->fp_seq = c->fp_seq;
    m->fp_hash = c->fp_seq ? c->fp_hash : 0;
    m->fp_step = c->fp_step;
    /* checkpoints: the ascending prefix (a live writer may be halving the
     * array while it is read: what follows the first step back is stale) */
    uint32_t n = c->ncheckpoints < TRR_COMM_CHECKPOINTS ? c->ncheckpoints : TRR_COMM_CHECKPOINTS;
    uint64_t upto = c->fp_seq > c->colls ? c->fp_seq : c->colls;
    m->ckp = xmalloc(sizeof *m->ckp * ((size_t)n + 1));
    uint64_t prev = 0;
    for (uint32_t k = 0; k < n; k++) {
        const trr_checkpoint *p = &c->checkpoints[k];
        if (p->seq <= prev || p->seq > upto) break;
        m->ckp[m->nckp++] = (struct ta_ckpt){p->seq, p->hash};
        prev = p->seq;
    }
    if (c->ncheckpoints > TRR_COMM_CHECKPOINTS || (uint32_t)m->nckp < n)
        ring_note(r, "communicator 0x%016llx: fingerprint checkpoints damaged from #%d on; %d used",
              (unsigned long long)c->id, m->nckp, m->nckp);
    m->g = -1;
    m->family = family;
}

static void in_call_and_first(ta_trace *t)
{
    int in = 0;
    for (int64_t i = 0; i < t->ncalls; i++) {
        const ta_call *c = &t->calls[i];
        in |= c->exit_ns == TA_NULL64;
        if (c->comm >= 0 && c->seq && ta_op_is_coll(c->op)) {
            uint32_t *f = &t->comms[c->comm].first_seq;
            if (!*f || c->seq < *f) *f = c->seq;
        }
    }
    for (int i = 0; i < t->ncomms; i++) {
        const ta_comm *m = &t->comms[i];
        in |= m->init_exit == TA_NULL64 || (m->end_kind[0] && m->end_exit == TA_NULL64);
    }
    t->end_in_call = in;
}

typedef struct { uint32_t group; uint8_t any, mine; } gmark;
static int cmp_gmark(const void *x, const void *y)
{
    const gmark *a = x, *b = y;
    return (a->group > b->group) - (a->group < b->group);
}

/* one trace: the communicators of device dev (all when dev < 0) and the
 * calls the shim would put in that device's JSON trace; trace_dev is its
 * "device" */
static ta_trace *build(rd *r, int dev, int trace_dev, int rank, const char *rank_source)
{
    const trr_header *h = &r->h;
    ta_trace *t = xcalloc(1, sizeof *t);
    t->file = xstrdup(r->path);
    t->ring_file = xstrdup(r->path);
    t->from_ring = 1;
    t->rank = rank;
    t->rank_source = xstrdup(rank_source);
    t->world_size = h->world_size >= 1 && h->world_size <= RANK_MAX ? h->world_size : -1;
    t->local_rank = h->local_rank >= 0 && h->local_rank <= RANK_MAX ? h->local_rank : -1;
    t->device = trace_dev;
    t->host = ring_str(h->host, sizeof h->host);
    t->pid = h->pid;
    t->start_time = t->clock_real = h->start_realtime;
    t->clock_mono = (int64_t)h->start_mono_ns;
    t->v_cuda_rt = t->v_cuda_drv = t->v_nccl = TA_NULL64;
    t->v_trshim = h->trshim_version[0] ? ring_str(h->trshim_version, sizeof h->trshim_version) : NULL;
    t->nan_mode = NM_ABSENT;
    t->ring_capacity = (int64_t)h->capacity;
    t->ring_lost = t->dropped = h->head > h->capacity ? (int64_t)(h->head - h->capacity) : 0;
    t->lost_folder = r->lost_folder;
    t->lost_errno = h->lost_errno < 4096 ? (int)h->lost_errno : 0;
    t->lost_comms_from = h->file_comms && h->file_comms < h->max_comms ? (int)h->file_comms : 0;
    t->heartbeat_ns = r->last_ns;
    t->write_time = r->last_ns != TA_NULL64 ? ta_wall(t, r->last_ns) : t->start_time;
    /* job: as the shim names it (tr_writer.c) */
    if (h->job_id[0]) {
        t->job_id = ring_str(h->job_id, sizeof h->job_id);
        t->job_source = ring_str(h->job_source, sizeof h->job_source);
    } else {
        for (int i = 0; i < r->nslots && !t->job_id; i++)
            if (r->slots[i].ok && r->slots[i].c.from_uid == 1) {
                t->job_id = xasprintf("0x%llx", (unsigned long long)r->slots[i].c.id);
                t->job_source = xstrdup("comm");
            }
        if (!t->job_id) {
            t->job_id = xasprintf("%s-%d", t->host, (int)h->pid);
            t->job_source = xstrdup("process");
        }
    }
    switch (h->state) {
    case TRR_RUNNING: t->end_state = r->info->alive ? END_SNAPSHOT : END_KILLED; break;
    case TRR_EXITED: t->end_state = END_EXITED; break;
    case TRR_SIGNALED: t->end_state = END_SIGNAL; break;
    default: t->end_state = END_UNKNOWN; break;
    }
    t->end_signal = t->end_state == END_SIGNAL && h->signo > 0 && h->signo < 128 ? h->signo : -1;
    /* communicators of the view */
    int *local = xmalloc(sizeof(int) * ((size_t)r->nslots + 1));
    t->comms = xcalloc((size_t)r->nslots + 1, sizeof *t->comms);
    int dups = 0;
    for (int i = 0; i < r->nslots; i++) {
        local[i] = -1;
        if (!r->slots[i].ok || (dev >= 0 && r->slots[i].c.device != dev)) continue;
        /* one id twice in one rank (its devices unknown): the first is the rank's */
        int seen = 0;
        for (int k = 0; k < t->ncomms && !seen; k++) seen = t->comms[k].id == r->slots[i].c.id;
        if (seen) { dups++; continue; }
        local[i] = t->ncomms;
        conv_comm_slot(r, &r->slots[i].c, &t->comms[t->ncomms], t->ncomms);
        t->ncomms++;
    }
    if (dups)
        ring_note(r, "%d communicator(s) appear twice in one rank (the same id, no device to tell them apart): the "
              "second is not used, nor its calls", dups);
    /* groups of the view (several devices only): a group belongs to the
     * devices of its calls and of the communicators created in it; a group
     * with neither, to the device current when it started */
    gmark *gm = NULL;
    size_t ngm = 0;
    if (dev >= 0) {
        gm = xmalloc(sizeof *gm * ((size_t)r->nslots + (size_t)r->ncalls + 1));
        for (int i = 0; i < r->nslots; i++)
            if (r->slots[i].ok && r->slots[i].c.group)
                gm[ngm++] = (gmark){r->slots[i].c.group, 1, local[i] >= 0};
        for (int64_t i = 0; i < r->ncalls; i++) {
            const rcall *x = &r->calls[i];
            if (!ta_op_is_group(x->c.op) && x->c.group)
                gm[ngm++] = (gmark){x->c.group, 1, x->slot >= 0 && local[x->slot] >= 0};
        }
        if (ngm > 1) qsort(gm, ngm, sizeof *gm, cmp_gmark);
        size_t w = 0;            /* one entry per group: any call, any of this view */
        for (size_t i = 0; i < ngm; i++) {
            if (w && gm[w - 1].group == gm[i].group) gm[w - 1].mine |= gm[i].mine;
            else gm[w++] = gm[i];
        }
        ngm = w;
    }
    t->calls = xmalloc(sizeof *t->calls * ((size_t)r->ncalls + 1));
    int64_t xcap = 0;
    for (int64_t i = 0; i < r->ncalls; i++) {
        const rcall *x = &r->calls[i];
        if (x->slot >= 0 && local[x->slot] < 0) continue;   /* another device's, or a repeated id's */
        if (dev >= 0) {
            int in = 1;
            if (x->slot < 0) {
                gmark key = {x->c.group, 0, 0}, *g = NULL;
                if (ta_op_is_group(x->c.op) && x->c.group && ngm)
                    g = bsearch(&key, gm, ngm, sizeof *gm, cmp_gmark);
                in = g ? g->mine : x->device == dev;
            }
            if (!in) continue;
        }
        ta_call *c = &t->calls[t->ncalls++];
        *c = x->c;
        c->comm = x->slot >= 0 ? local[x->slot] : -1;
        if (c->xf) {
            if (t->ncallx == xcap) {
                xcap = xcap ? xcap * 2 : 64;
                t->callx = xrealloc(t->callx, sizeof *t->callx * (size_t)xcap);
            }
            t->callx[t->ncallx] = x->x;
            t->callx[t->ncallx++].call = t->ncalls - 1;
        }
    }
    /* the *Config calls' configs and the NCCL library: a copy for each trace */
    t->ncfgs = r->ncfgs;
    t->cfgs = xcalloc((size_t)r->ncfgs + 1, sizeof *t->cfgs);
    if (r->ncfgs) memcpy(t->cfgs, r->cfgs, sizeof *t->cfgs * (size_t)r->ncfgs);
    if (r->has_nccl) {
        t->has_nccl = 1;
        t->nccl_version = r->nccl_version;
        t->nccl_exports = r->nccl_exports;
        t->nccl_lib = r->nccl_lib ? xstrdup(r->nccl_lib) : NULL;
        t->nnccl_unknown = r->nnccl_unknown;
        t->nccl_unknown = xcalloc((size_t)r->nnccl_unknown + 1, sizeof *t->nccl_unknown);
        if (r->nnccl_unknown) memcpy(t->nccl_unknown, r->nccl_unknown, sizeof *t->nccl_unknown * (size_t)r->nnccl_unknown);
    }
    ring_graphs_view(r, t, local);       /* the CUDA graphs, on this view's communicators */
    free(gm);
    free(local);
    /* stacks: a copy for each trace (several traces of one process) */
    t->nstacks = r->nstacks;
    t->stacks = xcalloc((size_t)r->nstacks + 1, sizeof *t->stacks);
    for (int i = 0; i < r->nstacks; i++) {
        t->stacks[i].nframes = r->stacks[i].nframes;
        if (r->stacks[i].nframes) {
            t->stacks[i].frames = xmalloc(sizeof(ta_frame) * (size_t)r->stacks[i].nframes);
            memcpy(t->stacks[i].frames, r->stacks[i].frames, sizeof(ta_frame) * (size_t)r->stacks[i].nframes);
        }
    }
    ring_crash_view(r, t);               /* crash.c: the crash and errors, a copy for each trace */
    ring_mem_view(r, t, dev);            /* ring_mem.c: the header's device memory, this view's devices */
    /* Python code objects and stacks: likewise */
    t->npycodes = r->npycodes;
    t->pycodes = xcalloc((size_t)r->npycodes + 1, sizeof *t->pycodes);
    if (r->npycodes) memcpy(t->pycodes, r->pycodes, sizeof *t->pycodes * (size_t)r->npycodes);
    t->npystacks = r->npystacks;
    t->pystacks = xcalloc((size_t)r->npystacks + 1, sizeof *t->pystacks);
    for (int i = 0; i < r->npystacks; i++) {
        t->pystacks[i].nframes = r->pystacks[i].nframes;
        if (r->pystacks[i].nframes) {
            t->pystacks[i].frames = xmalloc(sizeof(ta_pyframe) * (size_t)r->pystacks[i].nframes);
            memcpy(t->pystacks[i].frames, r->pystacks[i].frames, sizeof(ta_pyframe) * (size_t)r->pystacks[i].nframes);
        }
    }
    ta_pyroots_copy(&t->pyroots, &r->pyroots);
    in_call_and_first(t);
    return t;
}

typedef struct { uint64_t id; int device; } id_dev;
static int cmp_id_dev(const void *x, const void *y)
{
    const id_dev *a = x, *b = y;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return (a->device > b->device) - (a->device < b->device);
}

/* the ranks of the process, as the shim's tr_nccl_ranks: one trace, unless
 * one communicator id shows on several devices (then one per device, in
 * device order, each ranked by its first communicator) */
static int ring_views(rd *r, ta_trace ***out)
{
    const trr_header *h = &r->h;
    id_dev *pairs = xmalloc(sizeof *pairs * ((size_t)r->nslots + 1));
    int np = 0, multi = 0, first = -1;
    for (int i = 0; i < r->nslots; i++) {
        const cslot *s = &r->slots[i];
        if (!s->ok || !s->counts || s->c.device < 0) continue;
        if (first < 0) first = i;
        pairs[np++] = (id_dev){s->c.id, s->c.device};
    }
    if (np > 1) qsort(pairs, (size_t)np, sizeof *pairs, cmp_id_dev);
    for (int i = 1; i < np && !multi; i++)
        multi = pairs[i].id == pairs[i - 1].id && pairs[i].device != pairs[i - 1].device;
    free(pairs);
    if (!multi) {
        int rank = -1;
        const char *src = "none";
        char *env_src = NULL;
        if (h->env_rank >= 0) {
            if (h->env_rank > RANK_MAX) {
                ta_note_add(r->a, r->path, 1, "damaged header: rank %d is out of range", h->env_rank);
                return -1;
            }
            rank = h->env_rank;
            env_src = ring_str(h->rank_source, sizeof h->rank_source);
            src = env_src[0] ? env_src : "env";
        } else {
            for (int i = 0; i < r->nslots && rank < 0; i++)
                if (r->slots[i].ok && r->slots[i].counts) { rank = r->slots[i].c.rank; src = "comm"; }
        }
        if (rank < 0) {
            free(env_src);
            ta_note_add(r->a, r->path, 1, "the rank is unknown (no rank variable, no communicator with a rank): the "
                        "ring cannot be placed");
            return -1;
        }
        *out = xcalloc(1, sizeof **out);
        (*out)[0] = build(r, -1, first >= 0 ? r->slots[first].c.device : -1, rank, src);
        free(env_src);
        return 1;
    }
    int nv = 0, *dev = xmalloc(sizeof(int) * ((size_t)r->nslots + 1)), *rk = xmalloc(sizeof(int) * ((size_t)r->nslots + 1));
    for (int i = 0; i < r->nslots; i++) {
        const cslot *s = &r->slots[i];
        if (!s->ok || !s->counts || s->c.device < 0) continue;
        int seen = 0;
        for (int k = 0; k < nv; k++) seen |= dev[k] == s->c.device;
        if (seen) continue;
        dev[nv] = s->c.device;
        rk[nv++] = s->c.rank;
    }
    for (int i = 1; i < nv; i++)      /* in device order */
        for (int k = i; k > 0 && dev[k] < dev[k - 1]; k--) {
            int td = dev[k], tr = rk[k];
            dev[k] = dev[k - 1]; rk[k] = rk[k - 1];
            dev[k - 1] = td; rk[k - 1] = tr;
        }
    *out = xcalloc((size_t)nv, sizeof **out);
    for (int v = 0; v < nv; v++) (*out)[v] = build(r, dev[v], dev[v], rk[v], "comm");
    free(dev);
    free(rk);
    return nv;
}

int ta_ring_read(ta_an *a, const char *path, int fd, const struct stat *st, pthread_mutex_t *modlk, ta_trace ***out,
                 ta_ring_info *info)
{
    *out = NULL;
    rd r;
    int n = ring_read(&r, a, path, fd, st, modlk, info);
    if (n == 0) {
        ring_mem_read(&r);               /* ring_mem.c: the header's device memory */
        n = ring_views(&r, out);
    }
    if (n >= 0) {
        info->host = ring_str(r.h.host, sizeof r.h.host);
        info->pid = r.h.pid;
        info->start_time = r.h.start_realtime;
        info->head = r.h.head;
        info->state = r.h.state;
        info->signo = r.h.signo;
        info->last_ns = r.last_ns;
    }
    ring_rd_free(&r);
    if (n < 0) ta_ring_info_free(info);
    return n;
}

/* ---- rings next to JSON traces ---- */

static int same_process(const ta_trace *t, const ta_ring_info *ri)
{
    /* the ring's host is cut at 63 bytes */
    size_t hl = strlen(ri->host);
    int host = hl >= 63 ? !strncmp(t->host, ri->host, hl) : !strcmp(t->host, ri->host);
    return host && t->pid == ri->pid && fabs(t->start_time - ri->start_time) < 1e-6;
}

/* how the process ended, from the ring header (it is written after any JSON) */
static void ring_end(ta_trace *t, const ta_ring_info *ri)
{
    t->end_signal = -1;
    switch (ri->state) {
    case TRR_RUNNING: t->end_state = ri->alive ? END_SNAPSHOT : END_KILLED; break;
    case TRR_EXITED: t->end_state = END_EXITED; break;
    case TRR_SIGNALED:
        t->end_state = END_SIGNAL;
        t->end_signal = ri->signo > 0 && ri->signo < 128 ? ri->signo : -1;
        break;
    default: t->end_state = END_UNKNOWN; break;
    }
}

/* JSON trace j of a process whose ring holds calls after j's write: the
 * calls, communicators and stacks come from the ring's trace r (moved out
 * of it); the rest (environment, versions) stays j's, and so does its
 * memory when it has any (ring_mem_merge) */
static void merge_ring(ta_an *a, ta_trace *j, ta_trace *r)
{
    ring_graphs_merge(j, r);             /* first: j's graphs name j's communicators */
    ta_crash_adopt(j, r);                /* crash.c: the JSON's crash, else the ring's */
    ring_mem_merge(j, r);                /* ring_mem.c: the JSON's memory, else the ring's */
    for (int i = 0; i < j->ncomms; i++) free(j->comms[i].ckp);
    free(j->comms);
    j->comms = r->comms; j->ncomms = r->ncomms;
    r->comms = NULL; r->ncomms = 0;
    free(j->calls); free(j->call_raw); free(j->callx);
    j->calls = r->calls; j->ncalls = r->ncalls; j->call_raw = NULL;
    j->callx = r->callx; j->ncallx = r->ncallx;
    r->calls = NULL; r->ncalls = 0;
    r->callx = NULL; r->ncallx = 0;
    /* configs: the same indices in both (the shim's); the JSON's where it has them */
    int nk = j->ncfgs > r->ncfgs ? j->ncfgs : r->ncfgs;
    ta_collcfg *kc = xcalloc((size_t)nk + 1, sizeof *kc);
    for (int i = 0; i < nk; i++)
        kc[i] = i < j->ncfgs && (j->cfgs[i].state != CFG_UNKNOWN || i >= r->ncfgs) ? j->cfgs[i] : r->cfgs[i];
    free(j->cfgs);
    j->cfgs = kc;
    j->ncfgs = nk;
    j->cfg_badref = 0;
    if (!j->has_nccl && r->has_nccl) {
        j->has_nccl = 1;
        j->nccl_version = r->nccl_version;
        j->nccl_exports = r->nccl_exports;
        j->nccl_lib = r->nccl_lib; r->nccl_lib = NULL;
        j->nccl_unknown = r->nccl_unknown; r->nccl_unknown = NULL;
        j->nnccl_unknown = r->nnccl_unknown; r->nnccl_unknown = 0;
    }
    j->skipped_records = r->skipped_records;
    /* stack i is the shim's stack i in both; the JSON's carry the symbol
     * names the shim resolved, the ring's cover the calls after the write */
    int ns = j->nstacks > r->nstacks ? j->nstacks : r->nstacks;
    ta_stack *st = xcalloc((size_t)ns + 1, sizeof *st);
    for (int i = 0; i < ns; i++) {
        if (i < j->nstacks && (j->stacks[i].nframes || i >= r->nstacks)) {
            st[i] = j->stacks[i];
            if (i < r->nstacks) free(r->stacks[i].frames);
        } else {
            st[i] = r->stacks[i];
            if (i < j->nstacks) free(j->stacks[i].frames);
        }
    }
    free(j->stacks); free(r->stacks);
    r->stacks = NULL; r->nstacks = 0;
    j->stacks = st; j->nstacks = ns;
    /* Python code objects and stacks: the same indices in both (the shim's);
     * the JSON's where it has them (a damaged JSON section was dropped) */
    int nc = j->npycodes > r->npycodes ? j->npycodes : r->npycodes;
    ta_pycode *pc = xcalloc((size_t)nc + 1, sizeof *pc);
    for (int i = 0; i < nc; i++)
        pc[i] = i < j->npycodes && (j->pycodes[i].file || i >= r->npycodes) ? j->pycodes[i] : r->pycodes[i];
    free(j->pycodes);
    ta_pyroots_copy(&j->pyroots, &r->pyroots);     /* the JSON's when it has them */
    j->pycodes = pc;
    j->npycodes = nc;
    int np = j->npystacks > r->npystacks ? j->npystacks : r->npystacks;
    ta_pystack *ps = xcalloc((size_t)np + 1, sizeof *ps);
    for (int i = 0; i < np; i++) {
        if (i < j->npystacks && (j->pystacks[i].nframes || i >= r->npystacks)) {
            ps[i] = j->pystacks[i];
            if (i < r->npystacks) free(r->pystacks[i].frames);
        } else {
            ps[i] = r->pystacks[i];
            if (i < j->npystacks) free(j->pystacks[i].frames);
        }
    }
    free(j->pystacks);
    free(r->pystacks);
    r->pystacks = NULL; r->npystacks = 0;
    j->pystacks = ps; j->npystacks = np;
    /* a merged stack whose frame names a code neither holds has no Python site */
    for (int i = 0; i < np; i++)
        for (int k = 0; k < ps[i].nframes; k++)
            if (ps[i].frames[k].code >= nc || !pc[ps[i].frames[k].code].file) { ps[i].nframes = 0; break; }
    if (j->nan_usable || j->nchecks) {
        ta_note_add(a, j->file, 0, "its calls were read from the ring file %s (it holds calls after this trace's "
                    "last write): the NaN/Inf checks of this trace, which refer to that write's calls, are not used",
                    r->ring_file);
        free(j->checks); free(j->ckdet);
        j->checks = NULL; j->ckdet = NULL;
        j->nchecks = j->nckdet = 0;
        j->nan_usable = 0;
    }
    j->from_ring = 1;
    free(j->ring_file);
    j->ring_file = xstrdup(r->ring_file);
    j->ring_capacity = r->ring_capacity;
    j->ring_lost = r->ring_lost;
    j->unloaded = r->unloaded;                    /* the call budget's part of ring_lost */
    j->dropped = r->ring_lost - r->unloaded;
    j->lost_folder = r->lost_folder;
    j->lost_errno = r->lost_errno;
    j->lost_comms_from = r->lost_comms_from;
    j->heartbeat_ns = r->heartbeat_ns;
    j->end_state = r->end_state;
    j->end_signal = r->end_signal;
    j->end_in_call = r->end_in_call;
    if (r->write_time > j->write_time) j->write_time = r->write_time;
}

/* Each ring file against the JSON traces of its process (same host, pid
 * and start time): when its head is the JSON's ring.next, no call happened
 * after that write: the JSON is used (the ring only tells how the process
 * ended, when the JSON's last write was not its final one, and what the
 * JSON lacks: a crash, memory failures since). Otherwise the
 * ring's traces replace the JSON traces' calls (same device), or stand
 * alone. The ring's notes are added when its traces are used. */
void ta_ring_pair(ta_an *a, char **files, ta_file_traces *res, int nfiles)
{
    ta_trace **js = xcalloc((size_t)nfiles + 1, sizeof *js);
    int64_t *next = xcalloc((size_t)nfiles + 1, sizeof *next);
    for (int i = 0; i < nfiles; i++) {
        ta_file_traces *R = &res[i];
        if (!R->is_ring || !R->ntr) continue;
        int nj = 0, current = 1;
        for (int k = 0; k < nfiles; k++)
            if (!res[k].is_ring && res[k].ntr && same_process(res[k].tr[0], &R->ri)) {
                js[nj] = res[k].tr[0];
                next[nj++] = res[k].ring_next;
            }
        for (int k = 0; k < nj; k++) current &= next[k] >= 0 && (uint64_t)next[k] >= R->ri.head;
        if (nj && current) {
            for (int k = 0; k < nj; k++) {
                ta_trace *t = js[k];
                if (t->end_state == END_SNAPSHOT || t->end_state == END_COMM_END || t->end_state == END_HANG)
                    ring_end(t, &R->ri);
                if (R->ri.last_ns != TA_NULL64 && (t->heartbeat_ns == TA_NULL64 || R->ri.last_ns > t->heartbeat_ns))
                    t->heartbeat_ns = R->ri.last_ns;
                if (!t->ring_file) t->ring_file = xstrdup(files[i]);
                ta_crash_adopt(t, R->tr[k < R->ntr ? k : 0]);   /* crash.c: when the JSON lacks it */
                /* the header's memory, when the JSON lacks it: a failed allocation
                 * after the last write, with no call since (killed after an OOM) */
                for (int q = 0; q < R->ntr; q++)
                    if (R->tr[q]->device == t->device || R->ntr == 1) { ring_mem_merge(t, R->tr[q]); break; }
            }
            for (int k = 0; k < R->ntr; k++) ta_trace_free(R->tr[k]);
            R->ntr = 0;
            continue;
        }
        for (int k = 0; k < R->ri.nnotes; k++) ta_note_add(a, files[i], 0, "%s", R->ri.notes[k]);
        int *used = xcalloc((size_t)nj + 1, sizeof *used);
        for (int k = 0; k < R->ntr; k++) {
            ta_trace *rt = R->tr[k];
            int m = -1;
            for (int q = 0; q < nj && m < 0; q++)
                if (!used[q] && js[q]->device == rt->device) m = q;
            if (m < 0 && nj == 1 && R->ntr == 1 && !used[0]) m = 0;
            if (m < 0) continue;
            used[m] = 1;
            merge_ring(a, js[m], rt);
            ta_trace_free(rt);
            R->tr[k] = NULL;
        }
        free(used);
    }
    free(js);
    free(next);
}
