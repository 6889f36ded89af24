/* The "comms" part of one rank's trace (tr_comm.c keeps the table). */
#include "tr_record.h"
#include "tr_write_int.h"


/* ---- "comms" of one rank ------------------------------------------------------------ */

int tr_comm_in_view(const tr_comm *c, const tr_rank_view *view)
{
    return view->device < 0 || atomic_load(&((tr_comm *)c)->device) == view->device;
}

int tr_comm_busy(const tr_comm *c0)
{
    tr_comm *c = (tr_comm *)c0;
    if (!atomic_load_explicit(&c->init_done, memory_order_acquire)) return 1;
    return atomic_load_explicit(&c->end_kind, memory_order_acquire) != TR_END_NONE &&
           atomic_load_explicit(&c->end_exit, memory_order_acquire) == 0;
}

/* "fingerprint": a consistent copy (the owner thread may be updating it:
 * read again until two reads agree) */
static void write_fingerprint(tr_json *j, trr_comm *k)
{
    if (!k) {
        trj_null(j, "fingerprint");
        return;
    }
    trr_checkpoint cp[TRR_COMM_CHECKPOINTS];
    uint64_t seq = 0, hash = 0;
    uint32_t step = 0, n = 0;
    for (int tries = 0; tries < 1000; tries++) {
        n = __atomic_load_n(&k->ncheckpoints, __ATOMIC_ACQUIRE);
        step = __atomic_load_n(&k->fp_step, __ATOMIC_ACQUIRE);
        seq = __atomic_load_n(&k->fp_seq, __ATOMIC_ACQUIRE);
        hash = __atomic_load_n(&k->fp_hash, __ATOMIC_ACQUIRE);
        if (n > TRR_COMM_CHECKPOINTS) n = TRR_COMM_CHECKPOINTS;
        for (uint32_t i = 0; i < n; i++) {
            cp[i].seq = __atomic_load_n(&k->checkpoints[i].seq, __ATOMIC_ACQUIRE);
            cp[i].hash = __atomic_load_n(&k->checkpoints[i].hash, __ATOMIC_ACQUIRE);
        }
        atomic_thread_fence(memory_order_acquire);
        if (__atomic_load_n(&k->ncheckpoints, __ATOMIC_RELAXED) == n &&
            __atomic_load_n(&k->fp_step, __ATOMIC_RELAXED) == step &&
            __atomic_load_n(&k->fp_seq, __ATOMIC_RELAXED) == seq &&
            (seq != 0 || __atomic_load_n(&k->colls, __ATOMIC_RELAXED) == 0))
            break;
    }
    trj_object_begin(j, "fingerprint");
    trj_uint(j, "seq", seq);
    trj_hex(j, "hash", hash);
    trj_uint(j, "step", step);
    trj_array_begin(j, "checkpoints");
    for (uint32_t i = 0; i < n; i++) {
        trj_array_begin(j, NULL);
        trj_uint(j, NULL, cp[i].seq);
        trj_hex(j, NULL, cp[i].hash);
        trj_array_end(j);
    }
    trj_array_end(j);
    trj_object_end(j);
}

int tr_comm_write_json(tr_json *j, const tr_rank_view *view, int32_t *map, int n)
{
    int32_t next = 0;
    int busy = 0;
    trj_array_begin(j, "comms");
    for (int i = 0; i < n; i++) {
        tr_comm *c = tr_comm_at(i);
        map[i] = -1;
        if (!c || !tr_comm_in_view(c, view)) continue;
        map[i] = next++;
        busy |= tr_comm_busy(c);
        int done = atomic_load_explicit(&c->init_done, memory_order_acquire);
        int size = atomic_load(&c->size), rank = atomic_load(&c->rank), dev = atomic_load(&c->device);
        trj_object_begin(j, NULL);
        trj_hex(j, "id", c->id);
        if (c->parent_id) trj_hex(j, "parent", c->parent_id);
        else trj_null(j, "parent");
        trj_str(j, "kind", trr_kind_names[c->kind]);
        if (done && size >= 0) trj_int(j, "size", size);
        else trj_null(j, "size");
        if (rank >= 0) trj_int(j, "rank", rank);
        else trj_null(j, "rank");
        if (dev >= 0) trj_int(j, "device", dev);
        else trj_null(j, "device");
        if (c->has_color) {
            trj_int(j, "color", c->color);
            trj_int(j, "key", c->key);
        }
        trj_bool(j, "blocking", c->blocking);
        trj_object_begin(j, "init");
        trj_uint(j, "enter_ns", c->init_enter);
        if (done) {
            trj_uint(j, "exit_ns", atomic_load(&c->init_exit));
            trj_int(j, "rc", atomic_load(&c->init_rc));
        } else {
            trj_null(j, "exit_ns");
            trj_null(j, "rc");
        }
        trj_int(j, "stack", c->init_stack);
        trj_object_end(j);
        int ek = atomic_load_explicit(&c->end_kind, memory_order_acquire);
        if (ek != TR_END_NONE) {
            uint64_t ex = atomic_load_explicit(&c->end_exit, memory_order_acquire);
            trj_object_begin(j, "end");
            trj_str(j, "kind", trr_end_names[ek]);
            trj_uint(j, "enter_ns", atomic_load(&c->end_enter));
            if (ex) {
                trj_uint(j, "exit_ns", ex);
                trj_int(j, "rc", atomic_load(&c->end_rc));
            } else {
                trj_null(j, "exit_ns");
                trj_null(j, "rc");
            }
            trj_object_end(j);
        } else {
            trj_null(j, "end");
        }
        if (c->kind == TR_KIND_GROW) {
            trj_object_begin(j, "grow");
            if (c->grow_uid) trj_hex(j, "uid", c->grow_uid);
            else trj_null(j, "uid");
            trj_int(j, "ranks", c->grow_ranks);
            trj_object_end(j);
        }
        trj_bool(j, "suspended", atomic_load(&c->suspended));
        trj_uint(j, "suspends", atomic_load(&c->suspends));
        trj_uint(j, "colls", atomic_load(&c->colls));
        write_fingerprint(j, c->ring);
        trj_int(j, "slot", c->slot);
        trj_object_end(j);
    }
    trj_array_end(j);
    return busy;
}
