/* The "calls" part of one rank's trace: the ring's records as packed rows
 * (version 2) named by "call_fields", and "coll_configs" (tr_nccl_config.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tr_record.h"
#include "tr_nancheck.h"
#include "tr_core.h"
#include "tr_write_int.h"

/* the window of records the last tr_nccl_write_json wrote (writer thread only) */
static uint64_t g_win_first, g_win_next;

uint64_t tr_nccl_dropped(void) { return g_win_first; }

void tr_nccl_window(uint64_t *first, uint64_t *next)
{
    *first = g_win_first;
    *next = g_win_next;
}

/* ---- "calls" of one rank: packed rows (tr_packed.h) ---------------------------------- */

/* A vocabulary name's index in the section's strings, kept by its number,
 * so a row costs no string search. */
typedef struct {
    trp_section sec;
    int op[TR_OP_N + 1], dtype[TR_DTYPE_NAMED], redop[TR_REDOP_NAMED], lane[TRR_LANE_N + 1], gpu[4];
} call_strings;

/* a datatype's or reduction's name, or null */
static uint8_t *put_vocab(trp_rows *w, uint8_t *p, call_strings *cs, int *slots, int nslots, int32_t v,
                          const char *(*name)(int32_t, char *))
{
    char tmp[TR_NAME_TMP];
    const char *s = name(v, tmp);
    if (!s) return trp_null(w, p);
    return trp_name(&cs->sec, p, v >= 0 && v < nslots ? &slots[v] : NULL, s);
}

/* One call as the row call_fields names: each field of the table
 * (trshim/trace_format.h) in its order, so a field added there without its
 * value here is written null, never shifted. */
static uint8_t *put_call(trp_rows *w, uint8_t *p, call_strings *cs, const trr_record *r, int32_t comm)
{
    int grp = tr_op_has(r->op, TR_OPF_GROUP);
    int launch = r->op == OP_GRAPHLAUNCH;
    int returned = r->state == TRR_REC_RETURNED;
    int peer = tr_op_has(r->op, TR_OPF_P2P | TR_OPF_ONESIDED | TR_OPF_GRAPH);
    /* the buffers the call has: Recv and the waits none to send, one-sided and
     * Send none to receive into (PutSignal writes into the peer's window) */
    int no_send = grp || r->op == OP_RECV || r->op == OP_SIGNAL || r->op == OP_WAITSIGNAL;
    int no_recv = grp || r->op == OP_SEND || launch || tr_op_has(r->op, TR_OPF_ONESIDED);
    static const char *const gpu_names[4] = {"pending", "done", "error", "aborted"};
    int g = r->gpu >= TRR_GPU_PENDING && r->gpu <= TRR_GPU_ABORTED ? r->gpu - TRR_GPU_PENDING : -1;
    int lane = r->redop >= 0 && r->redop < TRR_LANE_N ? r->redop : TRR_LANE_N;
    int op = r->op < TR_OP_N ? r->op : TR_OP_N;
    p = trp_row(w, p, TRSHIM_CALL_FIELD_N);
    for (int f = 0; f < TRSHIM_CALL_FIELD_N; f++) {
        switch (f) {
        case TRSHIM_CALL_OP: p = trp_name(&cs->sec, p, &cs->op[op], op < TR_OP_N ? tr_op_names[op] : "invalid"); break;
        case TRSHIM_CALL_COMM: p = trp_int(w, p, comm); break;
        case TRSHIM_CALL_SEQ: p = trp_int(w, p, (int64_t)r->seq); break;
        case TRSHIM_CALL_COUNT: p = trp_int(w, p, (int64_t)(launch ? r->recvbuff : r->count)); break;
        case TRSHIM_CALL_DTYPE:
            p = put_vocab(w, p, cs, cs->dtype, TR_DTYPE_NAMED, grp ? NONE : r->dtype, tr_dtype_name);
            break;
        case TRSHIM_CALL_REDOP:
            p = put_vocab(w, p, cs, cs->redop, TR_REDOP_NAMED, launch ? NONE : r->redop, tr_redop_name);
            break;
        case TRSHIM_CALL_ROOT: p = r->root == NONE || peer ? trp_null(w, p) : trp_int(w, p, r->root); break;
        case TRSHIM_CALL_PEER: p = r->root == NONE || !peer ? trp_null(w, p) : trp_int(w, p, r->root); break;
        case TRSHIM_CALL_SENDBUFF: p = no_send ? trp_null(w, p) : trp_addr(w, p, r->sendbuff); break;
        case TRSHIM_CALL_RECVBUFF: p = no_recv ? trp_null(w, p) : trp_addr(w, p, r->recvbuff); break;
        case TRSHIM_CALL_STREAM: p = grp ? trp_null(w, p) : trp_addr(w, p, r->stream); break;
        case TRSHIM_CALL_CAPTURING:
            p = !grp && r->capturing == CAPT_YES ? trp_bool(w, p, 1)
                : !grp && r->capturing == CAPT_NO ? trp_bool(w, p, 0) : trp_null(w, p);
            break;
        case TRSHIM_CALL_GROUP: p = trp_int(w, p, (int64_t)r->group); break;
        case TRSHIM_CALL_DEPTH: p = trp_int(w, p, (int64_t)r->depth); break;
        case TRSHIM_CALL_ENTER_NS: p = trp_int(w, p, (int64_t)r->enter_ns); break;
        case TRSHIM_CALL_EXIT_NS: p = returned ? trp_int(w, p, (int64_t)r->exit_ns) : trp_null(w, p); break;
        case TRSHIM_CALL_THREAD: p = trp_int(w, p, r->tid); break;
        case TRSHIM_CALL_RC: p = returned ? trp_int(w, p, r->rc) : trp_null(w, p); break;
        case TRSHIM_CALL_STACK: p = trp_int(w, p, r->stack); break;
        case TRSHIM_CALL_DONE_NS: p = r->gpu == TRR_GPU_DONE ? trp_int(w, p, (int64_t)r->done_ns) : trp_null(w, p); break;
        case TRSHIM_CALL_GPU: p = g < 0 ? trp_null(w, p) : trp_name(&cs->sec, p, &cs->gpu[g], gpu_names[g]); break;
        case TRSHIM_CALL_PYSTACK: p = trp_int(w, p, r->pystack); break;
        case TRSHIM_CALL_CONFIG:
            p = tr_op_has(r->op, TR_OPF_COLL) && (r->extra & TRR_EXTRA_CONFIG)
                    ? trp_int(w, p, (int64_t)(r->extra & 0xffffffffu) - 1) : trp_null(w, p);
            break;
        case TRSHIM_CALL_SIGNAL:
            p = tr_op_has(r->op, TR_OPF_ONESIDED)
                    ? trp_pair(w, p, (int32_t)(uint32_t)r->extra, (int32_t)(uint32_t)(r->extra >> 32)) : trp_null(w, p);
            break;
        case TRSHIM_CALL_GRAPH: p = launch ? trp_int(w, p, (int64_t)r->extra) : trp_null(w, p); break;
        case TRSHIM_CALL_REPLAY: p = launch ? trp_int(w, p, (int64_t)r->count) : trp_null(w, p); break;
        case TRSHIM_CALL_LANE:
            p = launch ? trp_name(&cs->sec, p, &cs->lane[lane], lane < TRR_LANE_N ? trr_lane_names[lane] : "invalid")
                       : trp_null(w, p);
            break;
        default: p = trp_null(w, p); break;
        }
    }
    return p;
}

#define CALL_FIELD_NAME(id, name, read, since) name,
static const char *const call_fields[TRSHIM_CALL_FIELD_N] = {TRSHIM_CALL_FIELDS(CALL_FIELD_NAME)};

/* Whether record r belongs to the rank of view. Group calls follow the
 * calls and communicators made inside the group; an empty group, the device
 * current when it started. */
static int rec_in_view(const trr_record *r, const tr_rank_view *view, const int32_t *map, int ncomm,
                       const uint8_t *gm, uint32_t ng)
{
    if (view->device < 0) return 1;
    if (r->comm >= 0 && r->comm < ncomm) return map[r->comm] >= 0;
    if (tr_op_has(r->op, TR_OPF_GROUP) && r->group && r->group <= ng && (gm[r->group] & 1))
        return gm[r->group] >> 1;
    return r->device == view->device;
}

int tr_nccl_write_json(tr_json *j, const tr_rank_view *view, tr_nan_snap *checks)
{
    /* the ring's window as it is now: older records are overwritten; a
     * record overwritten while this runs is skipped (tr_ring_read) */
    uint64_t next = tr_ring_head(), cap = tr_ring_capacity();
    uint64_t first = next > cap ? next - cap : 0;
    g_win_first = first;
    g_win_next = next;
    trr_record rec;
    uint32_t ng = tr_group_count();
    int ncomm = tr_comm_count();
    int32_t *map = calloc((size_t)ncomm + 1, sizeof *map);
    uint8_t *gm = view->device >= 0 ? calloc((size_t)ng + 1, 1) : NULL;
    int busy = 0;
    if (!map || (view->device >= 0 && !gm)) {
        /* no memory: an empty but valid trace */
        trj_array_begin(j, "comms");
        trj_array_end(j);
        free(map);
        free(gm);
        map = NULL;
        gm = NULL;
        ncomm = 0;
    } else {
        busy = tr_comm_write_json(j, view, map, ncomm);
    }
    if (gm) {
        for (int i = 0; i < ncomm; i++) {
            tr_comm *c = tr_comm_at(i);
            if (c && c->group && c->group <= ng) gm[c->group] |= 1 | (map[i] >= 0 ? 2 : 0);
        }
        for (uint64_t i = first; i < next; i++) {
            if (!tr_ring_read(i, &rec)) continue;
            const trr_record *r = &rec;
            if (!tr_op_has(r->op, TR_OPF_GROUP) && r->group && r->group <= ng)
                gm[r->group] |= 1 | (r->comm >= 0 && r->comm < ncomm && map[r->comm] >= 0 ? 2 : 0);
        }
    }
    trj_array_begin(j, "call_fields");
    for (size_t i = 0; i < sizeof call_fields / sizeof call_fields[0]; i++) trj_str(j, NULL, call_fields[i]);
    trj_array_end(j);

    call_strings cs;
    trp_begin(&cs.sec, j, "calls");
    memset(cs.op, 0xff, sizeof cs.op);
    memset(cs.dtype, 0xff, sizeof cs.dtype);
    memset(cs.redop, 0xff, sizeof cs.redop);
    memset(cs.lane, 0xff, sizeof cs.lane);
    memset(cs.gpu, 0xff, sizeof cs.gpu);
    trp_rows *w = &cs.sec.w;
    uint8_t buf[4096];
    uint8_t *p = buf;
    uint64_t pos = 0, in_buf = 0;
    for (uint64_t i = first; i < next && map; i++) {
        if (!tr_ring_read(i, &rec)) {
            /* not committed yet (a thread is filling it: still in the ring's window), or overwritten.
             * The window this write covers ends before a record not committed yet: "next" must not
             * claim a call the trace lacks (a reader would take this trace as holding everything
             * up to next, and miss that call once its record is complete in the ring file) */
            uint64_t head = tr_ring_head();
            if (i >= (head > cap ? head - cap : 0) && i < g_win_next) g_win_next = i;
            continue;
        }
        const trr_record *r = &rec;
        if (!rec_in_view(r, view, map, ncomm, gm, ng)) continue;
        int32_t comm = r->comm >= 0 && r->comm < ncomm ? map[r->comm] : -1;
        if (p - buf > (ptrdiff_t)sizeof buf - 11 * TRSHIM_CALL_FIELD_N - 16) {
            trp_put(&cs.sec, buf, (size_t)(p - buf), in_buf);
            p = buf;
            in_buf = 0;
        }
        p = put_call(w, p, &cs, r, comm);
        in_buf++;
        tr_nan_place(checks, i, pos++);
        if (r->state != TRR_REC_RETURNED) busy = 1;
    }
    trp_put(&cs.sec, buf, (size_t)(p - buf), in_buf);
    trp_end(&cs.sec);
    tr_config_write_json(j);
    tr_graph_write_json(j, map, ncomm);
    free(map);
    free(gm);
    return busy;
}
