/* A ring file's blob area (ring.c reads the rest): what the shim stores
 * once and the records refer to by index, read through a window that moves
 * forward; each blob checked against its kind's layout and the area's end.
 * Modules and native stacks (the frames made from them), Python code
 * objects and stacks, collective configs, the NCCL library; CUDA graphs
 * (ring_graph.c), crashes, errors and the Python exception (crash.c) and
 * the Python install folders (pyroots.c) are read by their owners. A
 * damaged blob costs its kind's records (one note per kind); a blob of a
 * kind this reader does not know is skipped by its length. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ring_int.h"
#include "site/ta_site.h"

typedef struct { uint64_t lo, hi, base; int gid; } rmod;

/* ---- blobs: modules and stacks ---- */

static int cmp_rmod(const void *x, const void *y)
{
    const rmod *a = x, *b = y;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

static int find_mod(const rmod *m, int nm, uint64_t ip)
{
    int lo = 0, hi = nm - 1, best = -1;
    while (lo <= hi) {           /* the last module starting at or below ip */
        int mid = lo + (hi - lo) / 2;
        if (m[mid].lo <= ip) { best = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    return best >= 0 && ip < m[best].hi ? best : -1;
}

typedef struct { uint32_t index, n; void *frames; } rstack;   /* frames: copied out of the file (ips or trr_pyframe) */
typedef struct { uint32_t index; ta_pycode c; } rpycode;

/* blobs indexed by the writer (stacks, Python codes and stacks): an index
 * at or above this, for n blobs of that kind, is damage, not data */
static uint64_t index_limit(uint64_t n) { return n * 4 + 4096; }

/* the Python code objects and stacks read from the blobs, by index: a
 * stack whose frame names a code the ring does not hold is damaged */
static void py_tables(rd *r, rpycode *pc, int npc, rstack *ps, int nps, int *badps)
{
    uint64_t lim = index_limit((uint64_t)npc), maxi = 0;
    int far = 0;
    for (int i = 0; i < npc; i++) {
        if (pc[i].index >= lim) { far++; continue; }
        if (pc[i].index + 1 > maxi) maxi = pc[i].index + 1;
    }
    r->npycodes = (int)maxi;
    r->pycodes = xcalloc((size_t)maxi + 1, sizeof *r->pycodes);
    for (int i = 0; i < npc; i++)
        if (pc[i].index < lim && !r->pycodes[pc[i].index].file) r->pycodes[pc[i].index] = pc[i].c;
    lim = index_limit((uint64_t)nps);
    maxi = 0;
    for (int i = 0; i < nps; i++) {
        if (ps[i].index >= lim) { far++; continue; }
        if (ps[i].index + 1 > maxi) maxi = ps[i].index + 1;
    }
    r->npystacks = (int)maxi;
    r->pystacks = xcalloc((size_t)maxi + 1, sizeof *r->pystacks);
    for (int i = 0; i < nps; i++) {
        if (ps[i].index >= lim) continue;
        ta_pystack *o = &r->pystacks[ps[i].index];
        if (o->frames) continue;    /* the first one of an index counts */
        o->frames = xmalloc(sizeof *o->frames * ((size_t)ps[i].n + 1));
        int ok = 1;
        const trr_pyframe *fr = ps[i].frames;
        for (uint32_t f = 0; f < ps[i].n && ok; f++) {
            trr_pyframe pf = fr[f];
            ok = pf.code < (uint32_t)r->npycodes && r->pycodes[pf.code].file;
            o->frames[f] = (ta_pyframe){(int32_t)pf.code, pf.line};
        }
        if (!ok) (*badps)++;
        o->nframes = ok ? (int)ps[i].n : 0;
    }
    if (far) ring_note(r, "%d Python code or stack record(s) with an out-of-range index ignored", far);
}

/* The blob area is read through a window of BLOB_WIN bytes that moves
 * forward: every blob of a known kind the shim writes fits in it (a stack
 * of FRAMES_MAX frames is 512 KiB); a larger one is damage. */
#define BLOB_WIN (1u << 20)
typedef struct {
    rd *r;
    uint64_t start, len;      /* the area in the file */
    uint64_t boff, blen;      /* the window: [boff, boff + blen) of the area */
    uint8_t *buf;
} bwin;

/* the bytes [pos, pos + n) of the area (pos + n <= len, n <= BLOB_WIN) */
static const uint8_t *bw_at(bwin *w, uint64_t pos, uint64_t n)
{
    if (pos >= w->boff && pos + n <= w->boff + w->blen) return w->buf + (pos - w->boff);
    uint64_t want = w->len - pos < BLOB_WIN ? w->len - pos : BLOB_WIN;
    w->boff = pos;
    w->blen = want;
    ring_rd_at(w->r, w->start + pos, w->buf, (size_t)want);   /* a short read leaves zeros: the end of the blobs */
    return w->buf;
}

/* a TRR_BLOB_COLLCONFIG payload (q, n bytes): 1 kept or a repeat, 0 damaged */
#define RING_CFG_MAX 65536
static int collconfig_blob(rd *r, const uint8_t *q, uint32_t n)
{
    trr_collconfig c;
    if (!q || n < sizeof c) return 0;
    memcpy(&c, q, sizeof c);
    const char *alg = (const char *)q + sizeof c;
    if (c.index >= RING_CFG_MAX || c.is_null > 2 || c.alg_len > n - sizeof c ||
        (c.alg_len && strnlen(alg, c.alg_len) != c.alg_len - 1))
        return 0;
    if (c.index >= (uint32_t)r->ncfgs) {
        int nn = (int)c.index + 1;
        r->cfgs = xrealloc(r->cfgs, sizeof *r->cfgs * (size_t)nn);
        for (int i = r->ncfgs; i < nn; i++) { memset(&r->cfgs[i], 0, sizeof r->cfgs[i]); r->cfgs[i].state = CFG_UNKNOWN; }
        r->ncfgs = nn;
    }
    ta_collcfg *o = &r->cfgs[c.index];
    if (o->state != CFG_UNKNOWN) return 1;       /* the first one of an index counts */
    o->state = c.is_null == 1 ? CFG_NULL : c.is_null == 2 ? CFG_INVALID : CFG_SET;
    o->min_ctas = c.min_ctas;
    o->max_ctas = c.max_ctas;
    o->nvls_ctas = c.nvls_ctas;
    o->cga_cluster_size = c.cga_cluster_size;
    o->force_alg = c.force_alg;
    o->cta_policy = c.cta_policy;
    o->user_tag = c.user_tag;
    o->alg = c.alg_len > 1 ? ta_py_intern(alg, c.alg_len) : NULL;
    return 1;
}

/* a TRR_BLOB_NCCLINFO payload: 1 kept (the first one), 0 damaged */
#define RING_UNKNOWN_MAX 4096
static int ncclinfo_blob(rd *r, const uint8_t *q, uint32_t n)
{
    trr_ncclinfo h;
    if (!q || n < sizeof h) return 0;
    memcpy(&h, q, sizeof h);
    const char *path = (const char *)q + sizeof h;
    if (h.version < 0 || h.path_len < 1 || h.path_len > n - sizeof h || h.unknown_len > n - sizeof h - h.path_len ||
        strnlen(path, h.path_len) != h.path_len - 1 || (h.unknown_len && path[h.path_len + h.unknown_len - 1]))
        return 0;
    if (r->has_nccl) return 1;
    r->has_nccl = 1;
    r->nccl_version = h.version;
    r->nccl_exports = h.exports;
    r->nccl_lib = h.path_len > 1 ? xstrdup(ta_py_intern(path, h.path_len)) : NULL;
    const char *u = path + h.path_len, *end = u + h.unknown_len;
    int cap = 0;
    while (u < end && *u && r->nnccl_unknown < RING_UNKNOWN_MAX) {
        size_t l = strnlen(u, (size_t)(end - u));
        if (r->nnccl_unknown == cap) {
            cap = cap ? cap * 2 : 16;
            r->nccl_unknown = xrealloc(r->nccl_unknown, sizeof *r->nccl_unknown * (size_t)cap);
        }
        r->nccl_unknown[r->nnccl_unknown++] = ta_py_intern(u, l < 256 ? l : 256);
        u += l + 1;
    }
    return 1;
}

/* an address of the ring as a frame (the crash's: crash.c) */
typedef struct { const rmod *mods; int nm; } modset;
static void mod_frame(const void *ctx, uint64_t ip, ta_frame *fr)
{
    const modset *m = ctx;
    int k = find_mod(m->mods, m->nm, ip);
    fr->module = k >= 0 ? m->mods[k].gid : -1;
    fr->offset = k >= 0 ? ip - m->mods[k].base : ip;
    fr->symbol = NULL;
    fr->symbol_offset = TA_NULL64;
}

void ring_read_blobs(rd *r, pthread_mutex_t *modlk)
{
    const trr_header *h = &r->h;
    uint64_t start = h->off_blobs, len = h->blob_bytes;
    if (start > r->n) len = 0;
    else if (len > r->n - start) len = r->n - start;     /* truncation noted with the header */
    bwin w = {r, start, len, 0, 0, len ? xmalloc(BLOB_WIN) : NULL};
    rmod *mods = NULL;
    rstack *st = NULL, *ps = NULL;
    rpycode *pc = NULL;
    int nm = 0, capm = 0, ns = 0, caps = 0, badmods = 0, badstacks = 0;
    int npc = 0, cappc = 0, nps = 0, capps = 0, badpc = 0, badps = 0, badcfg = 0, badnccl = 0, badgraph = 0;
    int badcrash = 0;
    uint64_t pos = 0;
    while (pos + sizeof(trr_blob) <= len) {
        trr_blob b;
        memcpy(&b, bw_at(&w, pos, sizeof b), sizeof b);
        if (b.kind == TRR_BLOB_END) break;
        if (b.bytes % 8 || b.bytes > len - pos - sizeof b) {
            ring_note(r, "damaged blob at byte %llu of the blob area (kind %u, %u bytes): the stacks and modules after it "
                  "are lost", (unsigned long long)pos, b.kind, b.bytes);
            break;
        }
        uint64_t at = pos + sizeof b;
        int known = b.kind == TRR_BLOB_MODULE || b.kind == TRR_BLOB_STACK || b.kind == TRR_BLOB_PYCODE ||
                    b.kind == TRR_BLOB_PYSTACK || b.kind == TRR_BLOB_COLLCONFIG || b.kind == TRR_BLOB_NCCLINFO ||
                    b.kind == TRR_BLOB_GRAPH || b.kind == TRR_BLOB_PYROOTS || b.kind == TRR_BLOB_CRASH ||
                    b.kind == TRR_BLOB_ERROR || b.kind == TRR_BLOB_PYEXC;
        /* a known blob larger than the window is damaged (counted as its kind) */
        const uint8_t *q = known && b.bytes <= BLOB_WIN ? bw_at(&w, at, b.bytes) : NULL;
        if (b.kind == TRR_BLOB_MODULE) {
            trr_module m;
            int ok = q && b.bytes >= sizeof m;
            if (ok) {
                memcpy(&m, q, sizeof m);
                const char *path = (const char *)q + sizeof m;
                ok = m.path_len >= 2 && m.path_len <= b.bytes - sizeof m && path[m.path_len - 1] == 0 &&
                     strnlen(path, m.path_len) == m.path_len - 1 && strnlen(m.build_id, sizeof m.build_id) < sizeof m.build_id &&
                     m.lo < m.hi && m.base <= m.lo;
                if (ok) {
                    char *pstr = ring_str(path, m.path_len), *bs = ring_str(m.build_id, sizeof m.build_id);
                    if (nm == capm) { capm = capm ? capm * 2 : 16; mods = xrealloc(mods, sizeof *mods * (size_t)capm); }
                    pthread_mutex_lock(modlk);
                    int gid = ta_module_intern(r->a, pstr, bs[0] ? bs : NULL);
                    pthread_mutex_unlock(modlk);
                    mods[nm++] = (rmod){m.lo, m.hi, m.base, gid};
                    free(pstr);
                    free(bs);
                }
            }
            badmods += !ok;
        } else if (b.kind == TRR_BLOB_STACK) {
            int stack_ok = 0;
            trr_stack s;
            if (q && b.bytes >= sizeof s) {
                memcpy(&s, q, sizeof s);
                if (s.n <= (b.bytes - sizeof s) / 8 && s.n <= FRAMES_MAX) {
                    if (ns == caps) { caps = caps ? caps * 2 : 64; st = xrealloc(st, sizeof *st * (size_t)caps); }
                    uint64_t *ips = xmalloc(8 * ((size_t)s.n + 1));
                    memcpy(ips, q + sizeof s, 8 * (size_t)s.n);
                    st[ns++] = (rstack){s.index, s.n, ips};
                    stack_ok = 1;
                }
            }
            badstacks += !stack_ok;
        } else if (b.kind == TRR_BLOB_PYCODE) {
            trr_pycode c;
            int ok = q && b.bytes >= sizeof c;
            if (ok) {
                memcpy(&c, q, sizeof c);
                const char *file = (const char *)q + sizeof c;
                ok = c.file_len >= 1 && c.name_len >= 1 && c.file_len <= 65536 && c.name_len <= 65536 &&
                     c.file_len + c.name_len <= b.bytes - sizeof c && strnlen(file, c.file_len) == c.file_len - 1 &&
                     strnlen(file + c.file_len, c.name_len) == c.name_len - 1;
                if (ok) {
                    if (npc == cappc) { cappc = cappc ? cappc * 2 : 64; pc = xrealloc(pc, sizeof *pc * (size_t)cappc); }
                    pc[npc].index = c.index;
                    ta_py_code_set(&pc[npc].c, file, c.file_len, file + c.file_len, c.name_len, c.firstlineno);
                    npc++;
                }
            }
            badpc += !ok;
        } else if (b.kind == TRR_BLOB_PYSTACK) {
            trr_pystack s;
            int ok = q && b.bytes >= sizeof s;
            if (ok) {
                memcpy(&s, q, sizeof s);
                ok = s.n >= 1 && s.n <= (b.bytes - sizeof s) / sizeof(trr_pyframe) && s.n <= TA_PY_FRAMES_MAX;
                if (ok) {
                    if (nps == capps) { capps = capps ? capps * 2 : 64; ps = xrealloc(ps, sizeof *ps * (size_t)capps); }
                    trr_pyframe *fr = xmalloc(sizeof *fr * ((size_t)s.n + 1));
                    memcpy(fr, q + sizeof s, sizeof *fr * (size_t)s.n);
                    ps[nps++] = (rstack){s.index, s.n, fr};
                }
            }
            badps += !ok;
        } else if (b.kind == TRR_BLOB_COLLCONFIG) {
            badcfg += !collconfig_blob(r, q, b.bytes);
        } else if (b.kind == TRR_BLOB_NCCLINFO) {
            badnccl += !ncclinfo_blob(r, q, b.bytes);
        } else if (b.kind == TRR_BLOB_GRAPH) {
            badgraph += !ring_graph_blob(r, q, b.bytes);     /* ring_graph.c */
        } else if (b.kind == TRR_BLOB_CRASH || b.kind == TRR_BLOB_ERROR || b.kind == TRR_BLOB_PYEXC) {
            badcrash += !ring_crash_blob(r, b.kind, q, b.bytes);   /* crash.c */
        } else if (b.kind == TRR_BLOB_PYROOTS && !ta_pyroots_blob(&r->pyroots, q, b.bytes)) {
            ring_note(r, "a damaged Python folders record ignored: library frames are told by folder names");
        }                        /* other kinds: from a newer writer, skipped by their bytes */
        pos += sizeof b + b.bytes;
    }
    free(w.buf);
    if (badmods) ring_note(r, "%d damaged module record(s) ignored: frames in them have no module", badmods);
    if (badcfg) ring_note(r, "%d damaged collective config record(s) ignored: the calls through them have an unknown "
                          "config", badcfg);
    if (badnccl) ring_note(r, "%d damaged NCCL library record(s) ignored: what the library exports is not known",
                           badnccl);
    if (badcrash) ring_note(r, "%d damaged crash, error or Python exception record(s) ignored: where this process "
                            "crashed, the CUDA/NCCL errors it saw or the exception it exited with, are not known "
                            "from them", badcrash);
    if (badgraph) ring_note(r, "%d damaged CUDA graph record(s) ignored: the launches of those graphs replay calls "
                            "that are not known", badgraph);
    if (npc || nps) py_tables(r, pc, npc, ps, nps, &badps);
    if (badpc) ring_note(r, "%d damaged Python code record(s) ignored: Python stacks that use them are not used", badpc);
    if (badps) ring_note(r, "%d damaged Python stack record(s) ignored: those calls have native call sites", badps);
    free(pc);
    for (int i = 0; i < nps; i++) free(ps[i].frames);
    free(ps);
    if (badstacks) ring_note(r, "%d damaged stack record(s) ignored: those call sites are unknown", badstacks);
    if (nm > 1) qsort(mods, (size_t)nm, sizeof *mods, cmp_rmod);
    /* stacks by their index (the records' stack field); indices far beyond
     * the number of stacks are damage */
    uint64_t limit = index_limit((uint64_t)ns), maxi = 0;
    int far = 0;
    for (int i = 0; i < ns; i++) {
        if (st[i].index >= limit) { far++; continue; }
        if (st[i].index + 1 > maxi) maxi = st[i].index + 1;
    }
    if (far) ring_note(r, "%d stack record(s) with an out-of-range index ignored", far);
    r->nstacks = (int)maxi;
    r->stacks = xcalloc((size_t)maxi + 1, sizeof *r->stacks);
    for (int i = 0; i < ns; i++) {
        if (st[i].index >= limit) continue;
        ta_stack *o = &r->stacks[st[i].index];
        if (o->frames) continue;    /* the first one of an index counts */
        o->nframes = (int)st[i].n;
        o->frames = xcalloc((size_t)st[i].n + 1, sizeof *o->frames);
        const uint64_t *ips = st[i].frames;
        for (uint32_t f = 0; f < st[i].n; f++) {
            uint64_t ip = ips[f];
            int k = find_mod(mods, nm, ip);
            ta_frame *fr = &o->frames[f];
            fr->module = k >= 0 ? mods[k].gid : -1;
            fr->offset = k >= 0 ? ip - mods[k].base : ip;
            fr->symbol = NULL;             /* symbolize.c names it from the module file */
            fr->symbol_offset = TA_NULL64;
        }
    }
    modset ms = {mods, nm};
    ring_crash_finish(r, mod_frame, &ms);     /* crash.c: the crash's frames */
    if (h->stacks_dropped)
        ring_note(r, "%llu call stack(s) were not stored (the ring's blob area was full): those call sites are unknown",
              (unsigned long long)h->stacks_dropped);
    free(mods);
    for (int i = 0; i < ns; i++) free(st[i].frames);
    free(st);
}
