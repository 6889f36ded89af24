#!/usr/bin/env python3
"""Synthetic traces of jobs on a tensor x pipeline x data-parallel mesh
(issue 20: a rank that skips a collective on one communicator and only
hangs much later, in a wait cycle across communicators), built with
gen_traces.py's Rank model. Same command line as gen_traces.py:

    gen_mesh.py SCENARIO OUTDIR          one scenario (writes OUTDIR/expected.json too)
    gen_mesh.py --list                   the scenarios

Layout (Megatron's order, tensor-parallel fastest): rank = pp * tp * dp +
d * tp + t. Each step: a tensor-parallel AllReduce (forward), the pipeline's
activations sent from stage s to s + 1 on the pipeline communicator, a
tensor-parallel AllReduce (backward), and the data-parallel gradient
AllReduce, whose size is the same every step. After the last step, one
AllReduce on the world communicator (a loss or a checkpoint barrier).
"""
import random
import sys

import gen_traces as gt  # next to this file

GRAD = 1 << 16          # elements of the data-parallel gradient AllReduce


class Mesh:
    def __init__(self, name, tp, pp, dp, exact=False):
        """exact: exact times (gen_traces.exact_job): calls are placed with `at`"""
        self.tp, self.pp, self.dp = tp, pp, dp
        self.embedding = False
        self.n = tp * pp * dp
        self.ranks, self.wid = gt.exact_job(name, self.n) if exact else gt.world_job(name, self.n)
        self.ranks_of = {"tp": {}, "pp": {}, "dp": {}}
        for r in self.ranks:
            t, d, p = self.coords(r.rank)
            tpg = [self.rank_at(x, d, p) for x in range(tp)]
            dpg = [self.rank_at(t, x, p) for x in range(dp)]
            ppg = [self.rank_at(t, d, x) for x in range(pp)]
            r.tp = r.split(0, 1, d + dp * p, tpg, site="init_tensor_parallel")
            r.pp = r.split(0, 2, t + tp * d, ppg, site="init_pipeline_parallel")
            r.dp = r.split(0, 3, t + tp * p, dpg, site="init_data_parallel")
            r.stage = p
            for k, g in (("tp", tpg), ("pp", ppg), ("dp", dpg)):
                self.ranks_of[k][r.rank] = g

    def coords(self, rank):
        return rank % self.tp, (rank // self.tp) % self.dp, rank // (self.tp * self.dp)

    def rank_at(self, t, d, p):
        return p * self.tp * self.dp + d * self.tp + t

    def comm_id(self, rank, kind):
        r = self.ranks[rank]
        return r.comms[getattr(r, kind)]["id"]

    def step(self, r, skip_dp=False, dp_site="allreduce_gradients", at=None):
        """one training step of rank r (host-level: every call completes);
        at: (exact jobs) when the rank starts it, its calls 5 ms apart;
        with self.embedding, stage 0 starts with one more TP AllReduce"""
        def when(k):
            return None if at is None else r.at(at + k * 5 * gt.MS)
        if self.embedding and r.stage == 0:
            r.coll(r.tp, count=1024, site="embedding_forward", at=when(0))
        r.coll(r.tp, count=4096, site="tp_forward", at=when(0))
        if r.stage + 1 < self.pp:
            r.sendrecv(r.pp, "Send", r.stage + 1, count=8192, site="send_activations")
        if r.stage > 0:
            r.sendrecv(r.pp, "Recv", r.stage - 1, count=8192, site="recv_activations")
        r.coll(r.tp, count=4096, site="tp_backward", at=when(2))
        if not skip_dp:
            r.coll(r.dp, count=GRAD, site=dp_site, at=when(3))

    def final(self, r):
        r.coll(0, count=1, site="reduce_final_loss")


def hang_at_end(m, stuck):
    """the job's end: ranks in `stuck` issued their last call and wait in it;
    every other rank issues the world AllReduce and waits there"""
    for r in m.ranks:
        if r.rank not in stuck:
            m.final(r)
    gt.killed(m.ranks)


def dp_peers(m, rank):
    return sorted(x for x in m.ranks_of["dp"][rank] if x != rank)


def skip_then_cycle(out, name, tp, pp, dp, culprit, skip_step, steps=10, embedding=False):
    """culprit skips its data-parallel AllReduce in skip_step; its next ones
    pair with its peers' previous ones (same size): nothing hangs until the
    end, where its data-parallel peers wait in their last data-parallel
    AllReduce for it, and it waits for them in the world AllReduce. The
    peers' last step is slow, so the world AllReduce is entered first (where
    a walk of the wait-for graph would start)."""
    m = Mesh(name, tp, pp, dp)
    m.embedding = embedding
    peers = dp_peers(m, culprit)
    for i in range(steps):
        for r in m.ranks:
            if i == steps - 1 and r.rank in peers:
                r.tick(200 * gt.MS)
            m.step(r, skip_dp=(r.rank == culprit and i == skip_step))
    hang_at_end(m, peers)
    gt.write(m.ranks, out)
    dpc = m.comm_id(culprit, "dp")
    # the skipped call is the peers' #skip_step+1; the culprit's calls around
    # the gap are its tp_backward of that step and tp_forward of the next
    # (embedding_forward in stage 0); its own #skip_step+1 comes one step
    # (two or three tensor-parallel calls) later
    per = 3 if embedding and m.ranks[culprit].stage == 0 else 2
    gap = per * (skip_step + 1)
    after = "embedding_forward" if per == 3 else "tp_forward"
    gt.expect(out, 1, [gt.F("divergence", dpc, skip_step + 1, [culprit], after, subkind="skipped_call",
                            others=peers, others_function="allreduce_gradients",
                            gap_before={"seq": gap, "function": "tp_backward"},
                            mispaired={"seq": skip_step + 1, "after": gap + per, "others_after": gap},
                            message_contains=["rank %d skipped a collective" % culprit,
                                              "was reduced with rank%s %s" % ("s" if len(peers) > 1 else "",
                                                                              ", ".join(map(str, peers)))])],
              count=1, stopped_at={"comm": dpc, "seq": steps})


def sc_mesh_skip_cycle_16(out):
    """16 ranks (TP 2 x PP 2 x DP 4): rank 11 skips its DP AllReduce in step
    5; the job hangs at the end in a wait cycle: its DP peers 9, 13, 15 in DP
    #10, rank 11 and the others in world #1"""
    skip_then_cycle(out, "meshskip16", 2, 2, 4, 11, 5)


def sc_mesh_skip_cycle_8(out):
    """8 ranks (TP 2 x PP 2 x DP 2): rank 5 skips its DP AllReduce in step 3"""
    skip_then_cycle(out, "meshskip8", 2, 2, 2, 5, 3)


def sc_mesh_skip_cycle_stages(out):
    """16 ranks whose pipeline stages differ (stage 0 issues one more TP
    AllReduce per step): rank 2 (stage 0) skips its DP AllReduce in step 4;
    ranks of stage 1 follow another program from their first call and say
    nothing about where rank 2 or its victims left the common path"""
    skip_then_cycle(out, "meshstages", 2, 2, 4, 2, 4, embedding=True)


def sc_mesh_break_early(out):
    """16 ranks: rank 6 leaves its training loop one iteration early on the
    DP communicator (its last step sends activations and runs its TP calls,
    but no DP AllReduce) and goes on to the world AllReduce; its DP peers
    wait for it in DP #10"""
    m = Mesh("meshbreak", 2, 2, 4)
    culprit, steps = 6, 10
    peers = dp_peers(m, culprit)
    for i in range(steps):
        for r in m.ranks:
            if i == steps - 1 and r.rank in peers:
                r.tick(200 * gt.MS)
            m.step(r, skip_dp=(r.rank == culprit and i == steps - 1))
    hang_at_end(m, peers)
    gt.write(m.ranks, out)
    dpc = m.comm_id(culprit, "dp")
    gt.expect(out, 1, [gt.F("divergence", dpc, steps, [culprit], "reduce_final_loss", subkind="skipped_call",
                            others=peers, others_function="allreduce_gradients",
                            gap_before={"seq": 2 * steps, "function": "tp_backward"}, mispaired=None)],
              count=1, stopped_at=None)


def sc_mesh_two_skips(out):
    """16 ranks: rank 11 skips its DP AllReduce in step 3, rank 4 its
    tp_backward in step 6; at the end rank 5 waits in TP #20 for rank 4,
    the DP peers of 5 and 11 wait for them, the rest in world #1: two
    culprits, the earlier first"""
    m = Mesh("meshtwo", 2, 2, 4)
    steps = 10
    stuck = set(dp_peers(m, 11)) | {5} | set(dp_peers(m, 5))
    for i in range(steps):
        for r in m.ranks:
            if i == steps - 1 and r.rank in stuck:
                r.tick(200 * gt.MS)
            if r.rank == 4 and i == 6:
                r.coll(r.tp, count=4096, site="tp_forward")
                if r.stage + 1 < m.pp:
                    r.sendrecv(r.pp, "Send", r.stage + 1, count=8192, site="send_activations")
                r.coll(r.dp, count=gt_grad(), site="allreduce_gradients")
                continue
            m.step(r, skip_dp=(r.rank == 11 and i == 3) or (r.rank == 5 and i == steps - 1))
    hang_at_end(m, stuck)
    gt.write(m.ranks, out)
    gt.expect(out, 1, [
        gt.F("divergence", m.comm_id(11, "dp"), 4, [11], "tp_forward", subkind="skipped_call", root_cause=True,
             others=dp_peers(m, 11)),
        gt.F("divergence", m.comm_id(4, "tp"), 14, [4], "allreduce_gradients", subkind="skipped_call", root_cause=True,
             others=[5])], count=2)


def gt_grad():
    return GRAD


def sc_mesh_mispair(out):
    """16 ranks: rank 11 gets no micro-batch in step 3 and two in step 7:
    one DP AllReduce fewer, then one more, all of the same size: nothing
    hangs, the job ends cleanly, but DP #4-#8 of rank 11 were reduced with
    its peers' calls of another step"""
    m = Mesh("meshmispair", 2, 2, 4)
    culprit = 11
    for i in range(10):
        for r in m.ranks:
            m.step(r, skip_dp=(r.rank == culprit and i == 3))
            if r.rank == culprit and i == 7:
                r.coll(r.dp, count=GRAD, site="allreduce_gradients")
    for r in m.ranks:
        m.final(r)
        r.finish()
    gt.write(m.ranks, out)
    peers = dp_peers(m, culprit)
    gt.expect(out, 1, [gt.F("divergence", m.comm_id(culprit, "dp"), 4, [culprit], "tp_forward",
                            subkind="skipped_call", others=peers, others_function="allreduce_gradients",
                            gap_before={"seq": 8, "function": "tp_backward"},
                            mispaired={"seq": 4, "after": 10, "others_after": 8},
                            message_contains=["was reduced with ranks %s" % ", ".join(map(str, peers))])],
              count=1, stopped_at=None)


def sc_mesh_clean(out):
    """16 ranks, no failure; the pipeline stages differ (stage 0 issues one
    more TP AllReduce per step, for its embedding): no finding"""
    m = Mesh("meshclean", 2, 2, 4)
    for i in range(12):
        for r in m.ranks:
            if r.stage == 0:
                r.coll(r.tp, count=1024, site="embedding_forward")
            m.step(r)
    for r in m.ranks:
        m.final(r)
        r.finish()
    gt.write(m.ranks, out)
    gt.expect(out, 0, [])


def timed_mesh(name, late, steps=40, step_ns=300 * gt.MS):
    """16 ranks on one host, exact times: late(rank, step) is how long after
    the step's start the rank starts it; then the world AllReduce"""
    m = Mesh(name, 2, 2, 4, exact=True)
    for i in range(steps):
        for r in m.ranks:
            m.step(r, at=1_000_000_000_000 + (i + 1) * step_ns + late(r.rank, i))
    for r in m.ranks:
        r.coll(0, count=1, site="reduce_final_loss", at=r.at(1_000_000_000_000 + (steps + 1) * step_ns))
        r.finish()
    return m


def sc_mesh_oversubscribed(out):
    """a clean 16-rank mesh on an oversubscribed host: every rank starts
    each step 0-3 ms late at random, ranks 3, 7 and 12 another 5-12 ms (the
    straggler findings of 5-12 ms that issue 20 saw): below the 50 ms floor
    and 10% of the 300 ms step, no finding"""
    rnd = random.Random(20)
    m = timed_mesh("meshbusy", lambda rank, i: rnd.randint(0, 3 * gt.MS) +
                   (rnd.randint(5 * gt.MS, 12 * gt.MS) if rank in (3, 7, 12) else 0))
    gt.write(m.ranks, out)
    gt.expect(out, 0, [])


def sc_mesh_straggler(out):
    """the same mesh, rank 6 starts every step 80 ms late (a slow input
    pipeline): a straggler on the world of its data-parallel group, at the
    default thresholds; nothing else"""
    rnd = random.Random(21)
    m = timed_mesh("meshslow", lambda rank, i: rnd.randint(0, 3 * gt.MS) + (80 * gt.MS if rank == 6 else 0))
    gt.write(m.ranks, out)
    gt.expect(out, 1, [gt.F("straggler", m.comm_id(6, "dp"), 12, [6], others=[0, 2, 4], root_cause=False,
                            also_comms=[m.comm_id(6, "tp")], threshold_ns=50 * gt.MS)], count=1)


def sc_mesh_straggler_small_share(out):
    """rank 6 starts every step 80 ms late, but a step takes 2 s: above the
    50 ms floor, below 10% of the interval between collectives on each of
    its communicators (2 s; 1 s on the tensor-parallel one), no finding"""
    rnd = random.Random(22)
    m = timed_mesh("meshshare", lambda rank, i: rnd.randint(0, 3 * gt.MS) + (80 * gt.MS if rank == 6 else 0),
                   steps=20, step_ns=2000 * gt.MS)
    gt.write(m.ranks, out)
    gt.expect(out, 0, [])


SCENARIOS = {k[3:]: v for k, v in sorted(globals().items()) if k.startswith("sc_")}


if __name__ == "__main__":
    sys.exit(gt.scenario_main(sys.argv, SCENARIOS, __doc__))
