/* The "calls" part of one rank's trace: the ring's records as JSON arrays
 * named by "call_fields", and "coll_configs" (tr_nccl_config.c). */
#include <stdlib.h>
#include <string.h>

#include "tr_graphs.h"
#include "tr_nancheck.h"
#include "tr_nccl_int.h"

/* the window of records the last tr_nccl_write_json wrote (writer thread only) */
static uint64_t g_win_first, g_win_next;

uint64_t tr_nccl_dropped(void) { return g_win_first; }

void tr_nccl_window(uint64_t *first, uint64_t *next)
{
    *first = g_win_first;
    *next = g_win_next;
}

/* ---- "calls" of one rank ------------------------------------------------------------ */

/* One call as the array call_fields names. */
static char *put_call(char *p, const trr_record *r, int32_t comm)
{
    int grp = tr_op_has(r->op, TR_OPF_GROUP);
    int launch = r->op == OP_GRAPHLAUNCH;
    int returned = r->state == TRR_REC_RETURNED;
    *p++ = '[';
    p = trj_put_str(p, r->op < TR_OP_N ? tr_op_names[r->op] : "invalid");
    *p++ = ',';
    p = trj_put_i64(p, comm);
    *p++ = ',';
    p = trj_put_u64(p, r->seq);
    *p++ = ',';
    p = trj_put_u64(p, launch ? r->recvbuff : r->count);
    *p++ = ',';
    p = tr_put_dtype(p, grp ? NONE : r->dtype);
    *p++ = ',';
    p = tr_put_redop(p, launch ? NONE : r->redop);
    int peer = tr_op_has(r->op, TR_OPF_P2P | TR_OPF_ONESIDED | TR_OPF_GRAPH);
    *p++ = ',';
    if (r->root == NONE || peer) p = trj_put_lit(p, "null");
    else p = trj_put_i64(p, r->root);
    *p++ = ',';
    if (r->root == NONE || !peer) p = trj_put_lit(p, "null");
    else p = trj_put_i64(p, r->root);
    *p++ = ',';
    if (grp) p = trj_put_lit(p, "null,null,null,null");
    else {
        /* the buffers the call has: Recv and the waits none to send, one-sided and
         * Send none to receive into (PutSignal writes into the peer's window) */
        int no_send = r->op == OP_RECV || r->op == OP_SIGNAL || r->op == OP_WAITSIGNAL;
        int no_recv = r->op == OP_SEND || launch || tr_op_has(r->op, TR_OPF_ONESIDED);
        p = no_send ? trj_put_lit(p, "null") : trj_put_hex(p, r->sendbuff);
        *p++ = ',';
        p = no_recv ? trj_put_lit(p, "null") : trj_put_hex(p, r->recvbuff);
        *p++ = ',';
        p = trj_put_hex(p, r->stream);
        *p++ = ',';
        p = trj_put_lit(p, r->capturing == CAPT_YES ? "true" : r->capturing == CAPT_NO ? "false" : "null");
    }
    *p++ = ',';
    p = trj_put_u64(p, r->group);
    *p++ = ',';
    p = trj_put_u64(p, r->depth);
    *p++ = ',';
    p = trj_put_u64(p, r->enter_ns);
    *p++ = ',';
    if (returned) p = trj_put_u64(p, r->exit_ns);
    else p = trj_put_lit(p, "null");
    *p++ = ',';
    p = trj_put_i64(p, r->tid);
    *p++ = ',';
    if (returned) p = trj_put_i64(p, r->rc);
    else p = trj_put_lit(p, "null");
    *p++ = ',';
    p = trj_put_i64(p, r->stack);
    *p++ = ',';
    if (r->gpu == TRR_GPU_DONE) p = trj_put_u64(p, r->done_ns);
    else p = trj_put_lit(p, "null");
    *p++ = ',';
    p = trj_put_lit(p, r->gpu == TRR_GPU_PENDING ? "\"pending\""
                   : r->gpu == TRR_GPU_DONE  ? "\"done\""
                   : r->gpu == TRR_GPU_ERROR ? "\"error\""
                                             : "null");
    *p++ = ',';
    p = trj_put_i64(p, r->pystack);
    *p++ = ',';
    if (tr_op_has(r->op, TR_OPF_COLL) && (r->extra & TRR_EXTRA_CONFIG))
        p = trj_put_i64(p, (int64_t)(r->extra & 0xffffffffu) - 1);
    else p = trj_put_lit(p, "null");
    *p++ = ',';
    if (tr_op_has(r->op, TR_OPF_ONESIDED)) {
        *p++ = '[';
        p = trj_put_i64(p, (int32_t)(uint32_t)r->extra);
        *p++ = ',';
        p = trj_put_i64(p, (int32_t)(uint32_t)(r->extra >> 32));
        *p++ = ']';
    } else {
        p = trj_put_lit(p, "null");
    }
    *p++ = ',';
    if (launch) {
        p = trj_put_u64(p, r->extra);
        *p++ = ',';
        p = trj_put_u64(p, r->count);
        *p++ = ',';
        p = trj_put_str(p, r->redop >= 0 && r->redop < TRR_LANE_N ? trr_lane_names[r->redop] : "invalid");
    } else {
        p = trj_put_lit(p, "null,null,null");
    }
    *p++ = ']';
    return p;
}

static const char *const call_fields[] = {"op", "comm", "seq", "count", "dtype", "redop", "root", "peer",
                                          "sendbuff", "recvbuff", "stream", "capturing", "group", "depth",
                                          "enter_ns", "exit_ns", "thread", "rc", "stack", "done_ns", "gpu",
                                          "pystack", "config", "signal", "graph", "replay", "lane"};

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

    trj_array_begin(j, "calls");
    char buf[640];
    uint64_t pos = 0;
    for (uint64_t i = first; i < next && map; i++) {
        if (!tr_ring_read(i, &rec)) continue;   /* not committed yet, or overwritten */
        const trr_record *r = &rec;
        if (!rec_in_view(r, view, map, ncomm, gm, ng)) continue;
        int32_t comm = r->comm >= 0 && r->comm < ncomm ? map[r->comm] : -1;
        char *p = put_call(buf, r, comm);
        trj_raw_row(j, buf, (size_t)(p - buf));
        tr_nan_place(checks, i, pos++);
        if (r->state != TRR_REC_RETURNED) busy = 1;
    }
    trj_array_end(j);
    tr_config_write_json(j);
    tr_graph_write_json(j, map, ncomm);
    free(map);
    free(gm);
    return busy;
}
