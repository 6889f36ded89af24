/* Ring files: the binary half of a trace, written by the shim as events
 * happen, so that it survives SIGKILL (include/trshim/ring_format.h, the
 * layout; docs/trace-format.md "Ring file").
 *
 * The file is read with pread, never mapped: a hole of a filesystem that
 * filled up (tmpfs must allocate a page to map one), a file cut short while
 * it is read or a read error then gives a short read and a note, where a
 * mapping would give SIGBUS. Every value in it is hostile until checked:
 * each offset and count is checked against the file's size (at most what
 * its header declares) before anything is read there, each structure is
 * copied out before its fields are used (a live process may still be
 * writing), and a damaged part costs that part only, with one note naming
 * the file and what is wrong. A header that cannot be trusted makes the
 * file unusable. What one ring may cost is bounded by its layout: records
 * are read a chunk at a time and whole runs of them in a hole of the file
 * (never written) are counted without being read; the blob area is read
 * through a window and ends at the first zero kind (a hole reads as one).
 * ring_trace.c makes the traces of what is read here (ta_ring_read).
 * Here: the header, the communicator slots and the records; the blob area
 * is ring_blobs.c's, the reads, notes and strings every part uses
 * ring_io.c's. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ring_int.h"
#include "site/ta_site.h"
#include "trshim/trace_format.h"

static int fits(const rd *r, uint64_t off, uint64_t len) { return off <= r->n && len <= r->n - off; }

int ta_ring_name(const char *name)
{
    size_t l = strlen(name), pl = strlen(TRSHIM_TRACE_PREFIX), sl = strlen(TRSHIM_RING_SUFFIX);
    return l > pl + sl && !strncmp(name, TRSHIM_TRACE_PREFIX, pl) && !strcmp(name + l - sl, TRSHIM_RING_SUFFIX);
}

int ta_ring_sniff(int fd)
{
    char m[8];
    ssize_t k = pread(fd, m, sizeof m, 0);
    return k == (ssize_t)sizeof m && !memcmp(m, TRSHIM_RING_MAGIC, sizeof m);
}

/* ---- header ---- */

/* NULL, or why the file cannot be used (in r->err) */
static const char *check_header(rd *r)
{
    const trr_header *h = &r->h;
    static const char zero[8];
    if (memcmp(h->magic, TRSHIM_RING_MAGIC, 8))
        return !memcmp(h->magic, zero, 8)
                   ? "the ring header was never completed (the process stopped while creating the file)"
                   : "not a trshim ring file (no \"" TRSHIM_RING_MAGIC "\" magic)";
    if (h->version != TRSHIM_RING_VERSION) {
        snprintf(r->err, sizeof r->err, "unknown ring format version %u (this tranalyze reads version %d)",
                 h->version, TRSHIM_RING_VERSION);
        return r->err;
    }
    if (h->header_bytes != TRR_HEADER_BYTES || h->record_bytes != TRR_RECORD_BYTES || h->comm_bytes != TRR_COMM_BYTES) {
        snprintf(r->err, sizeof r->err,
                 "damaged header: header/record/communicator sizes %u/%u/%u, expected %d/%d/%d",
                 h->header_bytes, h->record_bytes, h->comm_bytes, TRR_HEADER_BYTES, TRR_RECORD_BYTES, TRR_COMM_BYTES);
        return r->err;
    }
    /* the areas in order, none overlapping, all below AREA_MAX (no
     * arithmetic below can overflow after this) */
    if (h->capacity < 1 || h->capacity > (1ull << 40) || h->max_comms > COMMS_MAX ||
        h->off_comms < TRR_HEADER_BYTES || h->off_comms > AREA_MAX ||
        h->off_records < h->off_comms + (uint64_t)h->max_comms * TRR_COMM_BYTES || h->off_records > AREA_MAX ||
        h->off_blobs < h->off_records + h->capacity * TRR_RECORD_BYTES || h->off_blobs > AREA_MAX ||
        h->blob_bytes > AREA_MAX || h->file_bytes < h->off_blobs + h->blob_bytes) {
        snprintf(r->err, sizeof r->err,
                 "damaged header: the areas do not fit together (capacity %llu, max_comms %u, communicators at %llu, "
                 "records at %llu, blobs at %llu + %llu, file %llu bytes)",
                 (unsigned long long)h->capacity, h->max_comms, (unsigned long long)h->off_comms,
                 (unsigned long long)h->off_records, (unsigned long long)h->off_blobs,
                 (unsigned long long)h->blob_bytes, (unsigned long long)h->file_bytes);
        return r->err;
    }
    if (h->head > AREA_MAX) {
        snprintf(r->err, sizeof r->err, "damaged header: head %llu", (unsigned long long)h->head);
        return r->err;
    }
    if (h->start_mono_ns > (uint64_t)INT64_MAX || !isfinite(h->start_realtime)) {
        snprintf(r->err, sizeof r->err, "damaged header: start clocks %g / %llu", h->start_realtime,
                 (unsigned long long)h->start_mono_ns);
        return r->err;
    }
    return NULL;
}

/* A ring still RUNNING is of a killed process, unless that process still
 * runs: read live on its own host. The pid must be the same process, not a
 * later one that got its number: one that started before the shim did
 * (/proc/PID/stat's start time, of the boot clock, against the ring's
 * CLOCK_MONOTONIC start); without /proc, a heartbeat of the last 10 s. */
static int still_alive(const rd *r)
{
    const trr_header *h = &r->h;
    if (h->state != TRR_RUNNING || h->pid <= 0) return 0;
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || strncmp(host, h->host, sizeof h->host - 1)) return 0;
    if (kill(h->pid, 0) != 0 && errno != EPERM) return 0;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)h->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t k = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    if (k > 0) {
        buf[k] = 0;
        const char *q = strrchr(buf, ')');
        unsigned long long ticks = 0;
        /* after the name: state, then 18 fields, then starttime (field 22) */
        if (q && sscanf(q + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                        &ticks) == 1) {
            long hz = sysconf(_SC_CLK_TCK);
            double started = (double)ticks / (double)(hz > 0 ? hz : 100);
            return started <= (double)h->start_mono_ns / 1e9 + 2.0;
        }
    }
    if (!h->heartbeat_ns) return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    return h->heartbeat_ns > ns ? h->heartbeat_ns - ns < 1000000000ull : ns - h->heartbeat_ns < 10000000000ull;
}

/* ---- communicator slots ---- */

static void read_comms(rd *r)
{
    const trr_header *h = &r->h;
    uint64_t n = h->ncomms < h->max_comms ? h->ncomms : h->max_comms;
    /* slots past the end of a truncated file: counted below, not allocated */
    uint64_t in_file = h->off_comms < r->n ? (r->n - h->off_comms) / TRR_COMM_BYTES + 1 : 0;
    int lost = 0, bad = 0, norank = 0;
    if (n > in_file) {
        lost = (int)(n - in_file);
        n = in_file;
    }
    r->slots = xcalloc((size_t)n + 1, sizeof *r->slots);
    r->nslots = (int)n;
    char first[160] = "";
    for (uint64_t i = 0; i < n; i++) {
        cslot *s = &r->slots[i];
        uint64_t off = h->off_comms + i * TRR_COMM_BYTES;
        if (!fits(r, off, sizeof s->c)) { lost++; continue; }
        if (ring_rd_at(r, off, &s->c, sizeof s->c) < 0) continue;     /* noted with r->ioerr */
        const trr_comm *c = &s->c;
        if (c->valid == 0) continue;             /* handed out, not written yet */
        const char *why = NULL;
        if (c->valid != 1) why = "its valid flag is damaged";
        else if (c->kind < 0 || c->kind >= TRR_KIND_N) why = "its kind is unknown";
        else if (c->end_kind < TRR_END_NONE || c->end_kind >= TRR_END_N) why = "its end kind is unknown";
        else if (c->size < -1 || c->size > TA_COMM_PLACES_MAX || c->rank < -1 || c->rank >= TA_COMM_PLACES_MAX)
            why = "its size or rank is out of range";
        else if (c->device < -1 || c->device > 65535) why = "its device is out of range";
        else if (c->grow_ranks < 0 || c->grow_ranks > TA_COMM_PLACES_MAX || (c->kind != TRR_KIND_GROW && (c->grow_ranks || c->grow_uid)))
            why = "its grow fields are damaged";
        else if ((c->suspended != 0 && c->suspended != 1) || c->suspends > (1u << 30))
            why = "its suspend fields are damaged";
        else if (c->init_enter > (uint64_t)INT64_MAX || c->init_exit > (uint64_t)INT64_MAX ||
                 c->end_exit > (uint64_t)INT64_MAX || c->colls > (uint64_t)INT64_MAX)
            why = "a time or count is out of range";
        if (why) {
            if (!bad++) snprintf(first, sizeof first, "slot %llu: %s", (unsigned long long)i, why);
            continue;
        }
        if (c->rank < 0) { norank++; continue; }   /* a JSON trace cannot place it either */
        s->ok = 1;
        s->counts = !c->init_done || c->init_rc == 0 || c->init_rc == 7;   /* ncclSuccess, ncclInProgress */
    }
    if (bad)
        ring_note(r, "%d damaged communicator slot(s) ignored (first: %s); their calls are not used", bad, first);
    if (lost)
        ring_note(r, "%d communicator slot(s) lie past the end of the file (truncated); their calls are not used", lost);
    if (norank)
        ring_note(r, "%d communicator(s) without a rank yet (init had not returned) ignored", norank);
    if (h->comms_dropped)
        ring_note(r, "%llu communicator(s) had no slot in the ring (more than %u): their calls are not used",
              (unsigned long long)h->comms_dropped, h->max_comms);
}


/* ---- records ---- */

/* NULL (kept in *o), or why the record of that index is not used */
static const char *conv_record(rd *r, const trr_record *x, uint64_t index, rcall *o)
{
    ta_call *c = &o->c;
    memset(o, 0, sizeof *o);
    c->rp = c->comm = c->stack = c->pystack = -1;
    c->exit_ns = c->done_ns = TA_NULL64;
    c->rc = INT16_MIN;
    o->slot = -1;
    o->device = x->device;
    if (x->state != TRR_REC_ENTERED && x->state != TRR_REC_RETURNED) return "its state is damaged";
    if (x->op >= TRR_OP_N) return "its op is not a known NCCL operation";
    c->op = x->op;
    int grp = ta_op_is_group(x->op);
    if (x->comm >= 0 && !grp) {
        if (x->comm >= r->nslots || !r->slots[x->comm].ok) return "its communicator has no usable slot";
        o->slot = x->comm;
    } else if (x->comm < -1) {
        return "its communicator index is negative";
    }
    /* number s of a communicator (or of a peer and direction) follows s - 1
     * numbered calls, each a record before this one; not a GraphLaunch's:
     * the first number of its lane in a replay, where one record numbers
     * every call of the graph on that lane */
    int launch = x->op == TRR_OP_GRAPHLAUNCH;
    if (x->seq > 0x7fffffff || (!launch && x->seq > index + 1)) return "seq is out of range";
    c->seq = (uint32_t)x->seq;
    if (launch) {
        const char *why = ring_launch_fields(r, x, o);     /* ring_graph.c */
        if (why) return why;
        goto common;
    }
    if (x->count > (uint64_t)INT64_MAX) return "count is out of range";
    c->count = (int64_t)x->count;
    if (grp || x->dtype == TRR_NONE) c->dtype = DT_NONE;
    else c->dtype = x->dtype >= 0 && x->dtype < DT_INVALID - 1 ? (uint8_t)(x->dtype + 1) : DT_INVALID;
    if (x->redop == TRR_NONE) c->redop = RO_NONE;
    else if (x->redop >= 0 && x->redop < 5) c->redop = (uint8_t)(x->redop + 1);
    else if (x->redop >= 5) c->redop = RO_PREMULSUM;   /* ncclRedOpCreatePreMulSum handles */
    else return "redop is not a known reduction";
    if (x->root != TRR_NONE && x->root < 0) return "root/peer is not a rank";
    int rp = x->root == TRR_NONE ? -1 : x->root;
    if (ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op) || ta_op_rooted(c->op)) c->rp = rp;
    /* record.extra: a *Config collective's config; a signal's sigIdx and context */
    if (ta_op_is_coll(c->op) && (x->extra & TRR_EXTRA_CONFIG)) {
        uint64_t k = x->extra & 0xffffffffu;
        c->xf |= XF_CONFIG;
        o->x.cfg = -1;
        if (k && k - 1 < (uint64_t)r->ncfgs && r->cfgs[k - 1].state != CFG_UNKNOWN) o->x.cfg = (int32_t)(k - 1);
        else if (k) r->cfg_badref++;
    } else if (ta_op_is_onesided(c->op)) {
        c->xf |= XF_SIGNAL;
        o->x.sig_idx = (int64_t)(x->extra & 0xffffffffu);
        o->x.sig_ctx = (int32_t)(uint32_t)(x->extra >> 32);
    }
common:
    c->group = x->group;
    /* streams numbered in order of appearance, as calls.c does */
    int k;
    for (k = 0; k < r->nstreams; k++) if (r->streams[k] == x->stream) break;
    if (k == r->nstreams) {
        if (r->nstreams < 254) r->streams[r->nstreams++] = x->stream;
        else k = 254;
    }
    c->stream = (uint8_t)k;
    if (x->enter_ns > (uint64_t)INT64_MAX) return "enter_ns is out of range";
    c->enter_ns = (int64_t)x->enter_ns;
    int64_t last = c->enter_ns;
    if (x->state == TRR_REC_RETURNED) {
        if (x->exit_ns > (uint64_t)INT64_MAX) return "exit_ns is out of range";
        if (x->rc < -32767 || x->rc > 32767) return "rc is out of range";
        c->exit_ns = (int64_t)x->exit_ns;
        c->rc = (int16_t)x->rc;
        last = max64(last, c->exit_ns);
    }
    c->gpu = x->gpu <= TRR_GPU_ABORTED ? x->gpu : GPU_UNTRACKED;
    if (c->gpu == GPU_DONE) {
        if (x->done_ns > (uint64_t)INT64_MAX) return "done_ns is out of range";
        c->done_ns = (int64_t)x->done_ns;
        last = max64(last, c->done_ns);
    }
    if (x->stack >= 0 && x->stack < r->nstacks) c->stack = x->stack;
    if (x->pystack >= 0 && x->pystack < r->npystacks && r->pystacks[x->pystack].nframes) c->pystack = x->pystack;
    else if (x->pystack != -1 && !(x->pystack >= 0 && x->pystack < r->npystacks && r->pystacks[x->pystack].frames))
        r->py_badref++;          /* not stored (blob area full) or a damaged index: counted (a damaged stack is noted) */
    if ((ta_op_is_coll(c->op) || ta_op_is_p2p(c->op) || ta_op_is_onesided(c->op)) && c->seq > 0) {
        if (o->slot < 0) return "a numbered call has no communicator";
        if (ta_op_is_p2p(c->op) && c->rp < 0) return "a numbered send/recv has no peer";
        if (ta_op_is_onesided(c->op) && c->rp < 0) return "a numbered signal or wait has no peer";
    }
    r->last_ns = max64(r->last_ns, last);
    return NULL;
}

/* whole record slots from file offset off (at most max) that lie in a hole
 * of the file: never written, they read as zeros (torn); 0 when off holds
 * data or the filesystem cannot tell */
static uint64_t hole_slots(rd *r, uint64_t off, uint64_t max)
{
    off_t d = lseek(r->fd, (off_t)off, SEEK_DATA);
    uint64_t data;
    if (d >= 0) data = (uint64_t)d;
    else if (errno == ENXIO) data = r->n;         /* no data from off on */
    else return 0;
    if (data <= off) return 0;
    uint64_t k = (data - off) / TRR_RECORD_BYTES;
    return k < max ? k : max;
}

#define REC_CHUNK 4096u          /* records read at a time */

/* the records of the window [max(0, head - capacity), head), in index order;
 * a slot whose stamp is not its index + 1 is skipped and counted (torn: the
 * process stopped while writing it, or it was overwritten while read). Each
 * chunk is read twice: a slot whose stamp changed in between was being
 * rewritten by a live writer. */
static void read_records(rd *r)
{
    const trr_header *h = &r->h;
    uint64_t cap = h->capacity, head = h->head, first = head > cap ? head - cap : 0, len = head - first;
    uint64_t readable = h->off_records <= r->n ? (r->n - h->off_records) / TRR_RECORD_BYTES : 0;
    if (readable > cap) readable = cap;
    int64_t capc = 0;
    r->calls = NULL;
    uint8_t *buf = xmalloc((size_t)REC_CHUNK * TRR_RECORD_BYTES), *buf2 = xmalloc((size_t)REC_CHUNK * TRR_RECORD_BYTES);
    int64_t torn = 0, bad = 0, gone = 0, torn_last = 0;
    const char *why1 = NULL;
    uint64_t bad1 = 0;
    /* the window is at most two runs of slots: [s0, s0 + len) wrapping at cap */
    uint64_t s0 = first % cap;
    uint64_t runs[2][3] = {{s0, s0 + len < cap ? s0 + len : cap, first}, {0, s0 + len > cap ? s0 + len - cap : 0, first + (cap - s0)}};
    /* slots from file_records on were never in the file: the shim kept them in memory when the folder
     * could not take more (lost, not torn: the finding trace_lost says so) */
    uint64_t infile = h->file_records && h->file_records < cap ? h->file_records : cap;
    for (int k = 0; k < 2; k++) {
        uint64_t from = runs[k][0], to = runs[k][1], idx0 = runs[k][2];
        if (to > infile) {
            r->lost_folder += (int64_t)(to - (from > infile ? from : infile));
            to = from > infile ? from : infile;
        }
        if (to > readable) {
            gone += (int64_t)(to - (from > readable ? from : readable));
            to = readable;
        }
        for (uint64_t s = from; s < to;) {
            uint64_t off = h->off_records + s * TRR_RECORD_BYTES;
            uint64_t skip = hole_slots(r, off, to - s);
            if (skip) {
                uint64_t i0 = idx0 + (s - from);
                torn += (int64_t)skip;
                torn_last += head >= 1 && head - 1 >= i0 && head - 1 < i0 + skip;
                s += skip;
                continue;
            }
            uint64_t m = to - s < REC_CHUNK ? to - s : REC_CHUNK;
            ring_rd_at(r, off, buf, (size_t)(m * TRR_RECORD_BYTES));
            ring_rd_at(r, off, buf2, (size_t)(m * TRR_RECORD_BYTES));
            for (uint64_t j = 0; j < m; j++) {
                uint64_t index = idx0 + (s + j - from);
                trr_record x;
                memcpy(&x, buf + j * TRR_RECORD_BYTES, sizeof x);
                uint64_t again;
                memcpy(&again, buf2 + j * TRR_RECORD_BYTES, sizeof again);
                if (x.stamp != index + 1 || again != x.stamp) {
                    torn++;
                    torn_last += index + 1 == head;
                    continue;
                }
                if (r->ncalls == capc) {
                    capc = capc ? capc * 2 : 1024;
                    r->calls = xrealloc(r->calls, sizeof *r->calls * (size_t)capc);
                }
                const char *why = conv_record(r, &x, index, &r->calls[r->ncalls]);
                if (why) {
                    if (!bad++) { why1 = why; bad1 = index; }
                    continue;
                }
                r->ncalls++;
            }
            s += m;
        }
    }
    free(buf);
    free(buf2);
    if (!r->calls) r->calls = xmalloc(sizeof *r->calls);
    if (torn)
        ring_note(r, "%lld record(s) of the window [%llu, %llu) were incomplete or overwritten (torn)%s and were skipped",
              (long long)torn, (unsigned long long)first, (unsigned long long)head,
              torn_last ? ", the last one included (the process stopped while writing it)" : "");
    if (gone)
        ring_note(r, "%lld record slot(s) lie past the end of the file (truncated) and are lost", (long long)gone);
    if (bad)
        ring_note(r, "%lld ring record(s) skipped (first: record %llu: %s)", (long long)bad, (unsigned long long)bad1, why1);
    if (r->cfg_badref)
        ring_note(r, "%lld record(s) name a collective config the ring does not hold (not stored, or damaged): their "
                  "config is unknown", (long long)r->cfg_badref);
    if (r->py_badref)
        ring_note(r, "%lld record(s) name a Python stack the ring does not hold (not stored: the blob area was full; "
                  "or a damaged index): those calls have native call sites", (long long)r->py_badref);
}

void ta_ring_info_free(ta_ring_info *info)
{
    free(info->host);
    for (int i = 0; i < info->nnotes; i++) free(info->notes[i]);
    free(info->notes);
    memset(info, 0, sizeof *info);
}

int ring_read(rd *r, ta_an *a, const char *path, int fd, const struct stat *st, pthread_mutex_t *modlk,
              ta_ring_info *info)
{
    memset(info, 0, sizeof *info);
    *r = (rd){.a = a, .path = path, .fd = fd, .n = (uint64_t)st->st_size, .info = info, .last_ns = TA_NULL64};
    if ((uint64_t)st->st_size < sizeof(trr_header)) {
        ta_note_add(a, path, 1, "truncated: %lld bytes, shorter than a ring header (%zu bytes)", (long long)st->st_size,
                    sizeof(trr_header));
        return -1;
    }
    if (ring_rd_at(r, 0, &r->h, sizeof r->h) < 0) {
        ta_note_add(a, path, 1, "cannot read the ring header: %s",
                    r->ioerr > 0 ? strerror(r->ioerr) : "the file became shorter while it was read");
        return -1;
    }
    const char *bad = check_header(r);
    if (bad) {
        ta_note_add(a, path, 1, "%s", bad);
        return -1;
    }
    if (r->n < r->h.file_bytes)
        ring_note(r, "truncated: the file has %llu bytes, its header says %llu: what lay past the end is lost",
              (unsigned long long)r->n, (unsigned long long)r->h.file_bytes);
    else if (r->n > r->h.file_bytes) {
        /* what one ring costs is bounded by its declared layout */
        ring_note(r, "the file has %llu bytes, more than the %llu its header declares: the bytes past those are not read",
                  (unsigned long long)r->n, (unsigned long long)r->h.file_bytes);
        r->n = r->h.file_bytes;
    }
    info->alive = still_alive(r);
    read_comms(r);
    ring_read_blobs(r, modlk);      /* ring_blobs.c */
    ring_graphs_finish(r);
    read_records(r);
    if (r->ioerr)
        ring_note(r, "the file could not be read completely (%s): what could not be read counts as lost or torn",
                  r->ioerr > 0 ? strerror(r->ioerr) : "it became shorter while it was read");
    if (r->h.heartbeat_ns && r->h.heartbeat_ns <= (uint64_t)INT64_MAX) r->last_ns = max64(r->last_ns, (int64_t)r->h.heartbeat_ns);
    if (r->h.end_ns && r->h.end_ns <= (uint64_t)INT64_MAX) r->last_ns = max64(r->last_ns, (int64_t)r->h.end_ns);
    if (r->h.state != TRR_RUNNING && r->h.state != TRR_EXITED && r->h.state != TRR_SIGNALED)
        ring_note(r, "the process state %d in the header is unknown: how it ended is unknown", r->h.state);
    return 0;
}

void ring_rd_free(rd *r)
{
    ring_crash_rd_free(r);
    for (int i = 0; i < r->nstacks; i++) free(r->stacks[i].frames);
    free(r->stacks);
    for (int i = 0; i < r->npystacks; i++) free(r->pystacks[i].frames);
    free(r->pystacks);
    free(r->pycodes);
    ta_pyroots_free(&r->pyroots);
    free(r->cfgs);
    ta_graphs_free(r->graphs, r->ngraphs);
    free(r->nccl_lib);
    free(r->nccl_unknown);
    free(r->slots);
    free(r->calls);
}
