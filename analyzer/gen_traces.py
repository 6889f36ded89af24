#!/usr/bin/env python3
"""Synthetic trshim traces (docs/trace-format.md, version 1) for tranalyze's
tests and benchmark, Python 3 standard library only.

    gen_traces.py SCENARIO OUTDIR          one scenario (writes OUTDIR/expected.json too)
    gen_traces.py --list                   the scenarios
    gen_traces.py bench OUTDIR --ranks N --records M [--comms world|split]

Each scenario plants one failure from shared/failure-catalog.md (or none) and
writes, besides the traces, expected.json: what tranalyze must answer
(exit status, and for the top findings kind, comm, seq, ranks, function).
"""
import hashlib
import json
import os
import random
import sys

CALL_FIELDS = ["op", "comm", "seq", "count", "dtype", "redop", "root", "peer",
               "sendbuff", "recvbuff", "stream", "capturing", "group", "depth",
               "enter_ns", "exit_ns", "thread", "rc", "stack"]
MODULE = "/opt/trjob/bin/train"
BUILD_ID = "5f3c2a9e0b7d41c68e2f9a1b3c4d5e6f70819203"
ROOTED = {"Broadcast", "Bcast", "Reduce", "Gather", "Scatter"}
REDUCING = {"AllReduce", "Reduce", "ReduceScatter"}


def cid(*parts):
    h = hashlib.sha256(repr(parts).encode()).digest()
    return "0x%016x" % int.from_bytes(h[:8], "little")


def site_offset(name):
    return 0x1000 + (int(hashlib.md5(name.encode()).hexdigest()[:6], 16) & ~0xf)


class Rank:
    def __init__(self, job, rank, world, host="node0", t0=1_000_000_000_000):
        self.job, self.rank, self.world, self.host = job, rank, world, host
        self.pid = 40000 + rank
        self.t = t0 + rank * 1000
        self.comms, self.calls, self.stacks, self.stack_ix = [], [], [], {}
        self.colls = {}       # comm index -> seq
        self.p2p = {}         # (comm, peer, dir) -> seq
        self.group, self.groups, self.depth = 0, 0, 0
        self.end = {"reason": "exit", "signal": None, "in_call": False}
        self.devices = []
        self.failures = []
        self.peak = 0
        self.live = 0
        self.peak_stack = -1
        self.peak_ns = None
        self.peak_after = None
        self.stream = "0x55d0c0a01000"

    def tick(self, ns=20_000):
        self.t += ns + random.randint(0, 500)
        return self.t

    def stack(self, site, caller="main"):
        key = (site, caller)
        if key not in self.stack_ix:
            self.stack_ix[key] = len(self.stacks)
            self.stacks.append({"frames": [
                {"module": 0, "offset": "0x%x" % (site_offset(site) + 0x2b), "symbol": site, "symbol_offset": 0x2b},
                {"module": 0, "offset": "0x%x" % (site_offset(caller) + 0x57), "symbol": caller, "symbol_offset": 0x57}]})
        return self.stack_ix[key]

    # ---- communicators ----
    def init(self, comm_id, size, crank, kind="InitRank", parent=None, color=None, returned=True, site="setup"):
        enter = self.tick()
        c = {"id": comm_id, "parent": parent, "kind": kind, "size": size if returned else None,
             "rank": crank, "device": self.rank % 8, "blocking": True,
             "init": {"enter_ns": enter, "exit_ns": self.tick(300_000) if returned else None,
                      "rc": 0 if returned else None, "stack": self.stack(site)},
             "end": None, "colls": 0}
        if color is not None:
            c["color"], c["key"] = color, crank
        self.comms.append(c)
        self.colls[len(self.comms) - 1] = 0
        if not returned:
            self.end["in_call"] = True
        return len(self.comms) - 1

    def split(self, parent_ix, nsplit, color, members, site="setup_groups"):
        parent = self.comms[parent_ix]
        crank = members.index(self.rank)
        return self.init(cid("split", parent["id"], nsplit, color), len(members), crank, "Split",
                         parent["id"], color, site=site)

    # ---- calls ----
    def _call(self, op, comm, seq, count, dtype, redop, root, peer, site, returned=True, caller="main"):
        enter = self.tick()
        ex = self.tick(5_000) if returned else None
        self.calls.append([op, comm, seq, count, dtype, redop, root, peer,
                           "0x7f0000100000", "0x7f0000100000", self.stream, False,
                           self.group, self.depth, enter, ex, self.pid, 0 if returned else None,
                           self.stack(site, caller)])

    def coll(self, comm, op="AllReduce", count=1024, dtype="float32", redop="sum", root=None,
             site="train_step", returned=True, caller="main"):
        self.colls[comm] += 1
        self.comms[comm]["colls"] = self.colls[comm]
        if op in ROOTED and root is None:
            root = 0
        self._call(op, comm, self.colls[comm], count, dtype, redop if op in REDUCING else None,
                   root if op in ROOTED else None, None, site, returned, caller)
        return self.colls[comm]

    def sendrecv(self, comm, op, peer, count=4096, dtype="float32", site="pipeline_step"):
        key = (comm, peer, op)
        self.p2p[key] = self.p2p.get(key, 0) + 1
        self._call(op, comm, self.p2p[key], count, dtype, None, None, peer, site)
        return self.p2p[key]

    def group_start(self, site="exchange"):
        if self.depth == 0:
            self.groups += 1
            self.group = self.groups
        self.depth += 1
        self._call("GroupStart", -1, 0, 0, None, None, None, None, site)
        self.calls[-1][12], self.calls[-1][13] = self.group, self.depth

    def group_end(self, site="exchange"):
        self._call("GroupEnd", -1, 0, 0, None, None, None, None, site)
        self.calls[-1][12], self.calls[-1][13] = self.group, self.depth
        self.depth -= 1
        if self.depth == 0:
            self.group = 0

    # ---- memory ----
    def alloc(self, nbytes, site="alloc_params", fail=False, capacity=None):
        t = self.tick(1000)
        if fail:
            self.failures.append({"api": "cudaMalloc", "device": self.rank % 8, "bytes": nbytes,
                                  "live_bytes": self.live, "free_bytes": (capacity - self.live) if capacity else None,
                                  "total_bytes": capacity, "error": "cudaErrorMemoryAllocation",
                                  "error_code": 2, "t_ns": t, "stack": self.stack(site)})
            return
        self.live += nbytes
        if self.live > self.peak:
            self.peak, self.peak_ns, self.peak_stack = self.live, t, self.stack(site)
            last = None
            for c in reversed(self.calls):
                if c[0] not in ("Send", "Recv", "GroupStart", "GroupEnd") and c[2] > 0:
                    last = {"comm": self.comms[c[1]]["id"], "seq": c[2]}
                    break
            self.peak_after = last

    def finish(self, reason="exit", signal=None):
        self.end["reason"], self.end["signal"] = reason, signal
        if any(c[15] is None for c in self.calls):
            self.end["in_call"] = True

    def to_json(self):
        mem_devs = []
        if self.peak:
            mem_devs.append({"device": self.rank % 8, "live_bytes": self.live, "peak_bytes": self.peak,
                             "allocs": 3, "frees": 0, "peak_ns": self.peak_ns, "peak_stack": self.peak_stack,
                             "peak_after": self.peak_after})
        return {
            "format": "trshim-trace", "version": 1,
            "job": {"id": self.job, "source": "TRSHIM_JOB_ID"},
            "rank": self.rank, "rank_source": "RANK", "world_size": self.world,
            "local_rank": self.rank % 8, "device": self.rank % 8, "host": self.host, "pid": self.pid,
            "cmdline": [MODULE, "--steps", "10"], "start_time": 1767000000.0 + self.rank * 1e-3,
            "write_time": 1767000100.0 + (self.t - 1_000_000_000_000) / 1e9,
            "end": self.end,
            "versions": {"trshim": "0.1.0", "cuda_runtime": 13000, "cuda_driver": 13000, "nccl": 22809},
            "env": {"NCCL_DEBUG": "WARN", "TRSHIM_DIR": "traces", "NCCL_IB_KEY": "<redacted>"},
            "settings": {"dir": "traces", "stack_depth": 64},
            "clock": {"realtime": 1767000000.0, "monotonic_ns": 1_000_000_000_000},
            "comms": self.comms, "call_fields": CALL_FIELDS, "calls": self.calls,
            "memory": {"devices": mem_devs,
                       "pinned": {"live_bytes": 0, "peak_bytes": 0, "allocs": 0, "frees": 0},
                       "failures": self.failures},
            "modules": [{"path": MODULE, "build_id": BUILD_ID, "base": "0x555555554000"}],
            "stacks": self.stacks, "dropped": 0,
        }

    def filename(self):
        return "trshim.%s.r%d.%s.%d.json" % (self.job, self.rank, self.host, self.pid)


def write(ranks, out, skip=()):
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        if r.rank in skip:
            continue
        with open(os.path.join(out, r.filename()), "w") as f:
            json.dump(r.to_json(), f, separators=(",", ":"))


def expect(out, exit_code, findings, **extra):
    e = {"exit": exit_code, "findings": findings}
    e.update(extra)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(e, f, indent=1)


def F(kind, comm, seq, ranks, function=None, **kw):
    d = {"kind": kind, "comm": comm, "seq": seq, "ranks": ranks}
    if function:
        d["function"] = function
    d.update(kw)
    return d


def world_job(name, n, **kw):
    ranks = [Rank(name, r, n, host="node%d" % (r // 8), **kw) for r in range(n)]
    wid = cid("world", name)
    for r in ranks:
        r.init(wid, n, r.rank)
        r.alloc(64 << 20)
    return ranks, wid


def killed(ranks, sig=15, but=()):
    for r in ranks:
        if r.rank not in but:
            r.finish("signal", sig)


# ---------------------------------------------------------------- scenarios
def sc_clean(out):
    """several communicators, groups, a pipeline, uneven but legal send/recv"""
    n = 8
    ranks, wid = world_job("clean", n)
    tp = [[0, 1, 2, 3], [4, 5, 6, 7]]
    dp = [[0, 4], [1, 5], [2, 6], [3, 7]]
    for r in ranks:
        r.tp = r.split(0, 1, r.rank // 4, tp[r.rank // 4])
        r.dp = r.split(0, 2, r.rank % 4, dp[r.rank % 4])
    for step in range(6):
        for r in ranks:
            r.coll(r.tp, count=2048, site="tp_forward")
            r.coll(r.tp, count=2048, site="tp_backward")
        # pipeline between the two TP halves over the world comm: stage 0 -> stage 1
        for mb in range(3):
            for r in ranks:
                if r.rank < 4:
                    r.sendrecv(0, "Send", r.rank + 4, site="send_activations")
                else:
                    r.sendrecv(0, "Recv", r.rank - 4, site="recv_activations")
        for r in ranks:
            r.coll(r.dp, count=1 << 16, site="dp_allreduce_grads")
        # ring exchange in a group on each TP comm
        for r in ranks:
            i = r.rank % 4
            r.group_start()
            r.sendrecv(r.tp, "Send", (i + 1) % 4, site="ring_exchange")
            r.sendrecv(r.tp, "Recv", (i - 1) % 4, site="ring_exchange")
            r.group_end()
        # uneven but legal: rank 0 sends step+1 messages to rank 1
        for k in range(step + 1):
            for r in ranks:
                if r.rank == 0:
                    r.sendrecv(0, "Send", 1, count=16, site="send_metrics")
                elif r.rank == 1:
                    r.sendrecv(0, "Recv", 0, count=16, site="recv_metrics")
        for r in ranks:
            r.coll(0, op="Broadcast", count=4, root=0, site="sync_step")
    for r in ranks:
        r.coll(0, op="AllGather", count=128, site="check_weights")
        r.finish()
    write(ranks, out)
    expect(out, 0, [])


def sc_extra_collective(out):
    """if rank == 0: all_reduce(metric): an extra collective on rank 0"""
    ranks, wid = world_job("extra", 4)
    for step in range(5):
        for r in ranks:
            if step == 3 and r.rank == 0:
                r.coll(0, count=1, site="log_metrics")
            r.coll(0, count=1 << 20, site="train_step")
    killed(ranks)
    # rank 0's extra call is seq 4; the others issued train_step there
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 4, [0], "log_metrics", others=[1, 2, 3])])


def sc_extra_same_signature(out):
    """the extra collective has the same arguments as the gradient all-reduce:
    NCCL matches it with the peers' next call; the job stops at the end"""
    ranks, wid = world_job("extrasame", 4)
    for step in range(6):
        for r in ranks:
            if step == 2 and r.rank == 0:
                r.coll(0, count=4096, site="log_metrics")
            r.coll(0, count=4096, site="train_step")
    for r in ranks:
        if r.rank == 0:
            r.finish("signal", 15)       # stuck in its last all-reduce
        else:
            r.finish("exit")
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 3, [0], "log_metrics")], stopped_at={"comm": wid, "seq": 7})


def sc_uneven_microbatches(out):
    """the data loader gives rank 2 fewer micro-batches in step 2"""
    ranks, wid = world_job("uneven", 4)
    seq_expected = None
    for step in range(4):
        for r in ranks:
            mbs = 3 if (step == 2 and r.rank == 2) else 4
            for mb in range(mbs):
                s = r.coll(0, count=1 << 18, site="backward_microbatch")
            s = r.coll(0, count=1, site="reduce_loss")
            if step == 2 and r.rank == 2:
                seq_expected = s
    killed(ranks)
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, seq_expected, [2], "reduce_loss", others=[0, 1, 3])])


def sc_skip_barrier(out):
    """save_checkpoint with a collective inside, run on rank 0 only"""
    ranks, wid = world_job("barrier", 4)
    for step in range(4):
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step")
            if step == 1 and r.rank == 0:
                r.coll(0, op="Broadcast", count=8, root=0, site="save_checkpoint")
    killed(ranks)
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 3, [0], "save_checkpoint", others=[1, 2, 3])])


def sc_barrier_some(out):
    """ranks 0 and 1 call a barrier at the end that ranks 2 and 3 never call"""
    ranks, wid = world_job("somebarrier", 4)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step")
    for r in ranks:
        if r.rank < 2:
            r.coll(0, count=1, site="barrier_before_save")
            r.finish("signal", 15)
        else:
            r.finish("exit")
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 4, [0, 1], "barrier_before_save", others=[2, 3])])


def sc_early_exit(out):
    """rank 3 returns early after step 2; the others wait in step 3"""
    ranks, wid = world_job("earlyexit", 4)
    for step in range(5):
        for r in ranks:
            if r.rank == 3 and step == 3:
                continue
            if r.rank == 3 and step > 3:
                continue
            r.coll(0, count=1 << 16, site="train_step")
            r.coll(0, op="Broadcast", count=4, root=0, site="sync_step")
        if step == 3:
            break
    for r in ranks:
        if r.rank == 3:
            r.finish("exit")
        else:
            r.finish("signal", 15)
    write(ranks, out)
    expect(out, 1, [F("missing", wid, 7, [3], "sync_step", others=[0, 1, 2], others_function="train_step")])


def sc_pipeline_missing_send(out):
    """4 pipeline stages; stage 1 skips its send of micro-batch 2 to stage 2"""
    ranks, wid = world_job("pipeline", 4)
    M = 4
    for step in range(2):
        for mb in range(M):
            for r in ranks:
                s = r.rank
                if s > 0:
                    r.sendrecv(0, "Recv", s - 1, site="recv_forward")
                if s < 3 and not (s == 1 and step == 1 and mb == 2):
                    r.sendrecv(0, "Send", s + 1, site="send_forward")
        for r in ranks:
            if step == 1 and r.rank >= 2:
                continue      # stuck in its last receive
            r.coll(0, count=1, site="reduce_loss")
    killed(ranks)
    write(ranks, out)
    # stage 2's receive #8 from stage 1 has no send
    expect(out, 1, [F("p2p", wid, 2 * M, [1], others=[2])])


def dp_tp(name, fail):
    n = 8
    ranks, wid = world_job(name, n)
    tp = [[0, 1, 2, 3], [4, 5, 6, 7]]
    dp = [[0, 4], [1, 5], [2, 6], [3, 7]]
    for r in ranks:
        r.tp = r.split(0, 1, r.rank // 4, tp[r.rank // 4])
        r.dp = r.split(0, 2, r.rank % 4, dp[r.rank % 4])
    return ranks, wid, tp, dp


def sc_hang_spread(out):
    """8 ranks, TP groups of 4 and DP pairs; rank 5 exits after step 2:
    its TP peers wait for it, their DP peers wait for them"""
    ranks, wid, tp, dp = dp_tp("spread", "exit")
    steps = 5
    # host-level simulation: each rank proceeds while what it issued can complete
    stopped = set()
    for step in range(steps):
        if step == 3:
            stopped = {5}
        # TP phase
        for g in tp:
            alive = [ranks[x] for x in g if x not in stopped]
            for r in alive:
                r.coll(r.tp, count=2048, site="tp_forward")
                r.coll(r.tp, count=2048, site="tp_backward")
            if len(alive) < len(g):
                stopped |= set(g)
        for g in dp:
            alive = [ranks[x] for x in g if x not in stopped]
            for r in alive:
                r.coll(r.dp, count=1 << 16, site="dp_allreduce_grads")
            if len(alive) < len(g):
                stopped |= set(g)
        if step == 3:
            break
    for r in ranks:
        r.finish("exit" if r.rank == 5 else "signal", None if r.rank == 5 else 15)
    write(ranks, out)
    tp1 = ranks[4].comms[ranks[4].tp]["id"]
    # TP {4..7}: 2 per step, steps 0-2 done -> seq 7 is the first rank 5 never issued
    expect(out, 1, [F("missing", tp1, 7, [5], "dp_allreduce_grads", others=[4, 6, 7], others_function="tp_forward")])


def sc_hang_skip_tp(out):
    """rank 5 skips tp_backward in step 2: NCCL matches its next calls with
    the peers' shifted ones; the job stops at the end with its TP peers
    waiting. The earliest divergence is TP collective #6."""
    ranks, wid, tp, dp = dp_tp("skiptp", "skip")
    steps = 5
    for step in range(steps):
        for r in ranks:
            r.coll(r.tp, count=2048, site="tp_forward")
            if not (r.rank == 5 and step == 2):
                r.coll(r.tp, count=2048, site="tp_backward")
            r.coll(r.dp, count=1 << 16, site="dp_allreduce_grads")
    # final state: ranks 4,6,7 are in TP #10 (rank 5 issued 9 and exited);
    # their DP peers 0,2,3 never got DP #5 from them... (the traces keep all calls)
    for r in ranks:
        r.finish("exit" if r.rank in (1, 5) else "signal", None if r.rank in (1, 5) else 15)
    # the ranks of TP group 1 other than 5 never issued their last DP call
    for r in ranks:
        if r.rank in (4, 6, 7):
            r.calls.pop()
            r.colls[r.dp] -= 1
            r.comms[r.dp]["colls"] -= 1
    write(ranks, out)
    tp1 = ranks[4].comms[ranks[4].tp]["id"]
    expect(out, 1, [F("divergence", tp1, 6, [5], subkind="skipped_call")], stopped_at={"comm": tp1, "seq": 10})


def sc_init_hang(out):
    """rank 3 never reaches ncclCommInitRank (stuck on the unique-id exchange)"""
    ranks = [Rank("inithang", r, 4) for r in range(4)]
    wid = cid("world", "inithang")
    for r in ranks:
        r.alloc(1 << 20)
        if r.rank != 3:
            r.init(wid, 4, r.rank, returned=False, site="init_comm")
        r.finish("signal", 15)
    write(ranks, out)
    expect(out, 1, [F("init", wid, 0, [3], others=[0, 1, 2])])


def sc_oom(out):
    """rank 1 runs out of memory in step 2 and exits; the others wait"""
    ranks, wid = world_job("oom", 4)
    oom_seq = None
    for step in range(3):
        for r in ranks:
            if r.rank == 1 and step == 2:
                r.alloc(40 << 30, site="alloc_activations", fail=True, capacity=80 << 30)
                continue
            r.alloc(1 << 20, site="alloc_activations")
            s = r.coll(0, count=1 << 16, site="train_step")
            if step == 2:
                oom_seq = s
    for r in ranks:
        r.finish("exit" if r.rank == 1 else "signal", None if r.rank == 1 else 15)
    write(ranks, out)
    expect(out, 1, [F("oom", wid, 2, [1], "alloc_activations", bytes=40 << 30),
                    F("missing", wid, oom_seq, [1])])


def sc_imbalance(out):
    """rank 2 holds three times the memory of the others; nothing hangs"""
    ranks, wid = world_job("imbalance", 4)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step")
    ranks[2].alloc(128 << 20, site="gather_full_model")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("memory_imbalance", wid, 3, [2], "gather_full_model")])


def sc_missing_trace(out):
    """rank 2 was SIGKILLed and left no trace; the others were killed waiting"""
    ranks, wid = world_job("notrace", 4)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step")
    killed(ranks)
    write(ranks, out, skip=(2,))
    expect(out, 1, [F("no_trace", wid, 3, [2])])


def sc_p2p_size(out):
    """a matched send/recv pair with different counts"""
    ranks, wid = world_job("p2psize", 2)
    for r in ranks:
        r.coll(0, count=16, site="train_step")
    ranks[0].sendrecv(0, "Send", 1, count=1024, site="send_tensor")
    ranks[1].sendrecv(0, "Recv", 0, count=512, site="recv_tensor")
    killed(ranks)
    write(ranks, out)
    expect(out, 1, [F("p2p", wid, 1, [0], others=[1], subkind="size_mismatch")])


def damaged_files(out, job="damaged"):
    """writes damaged trace files next to a job; returns their names"""
    names = {}
    def w(name, data, mode="w"):
        with open(os.path.join(out, name), mode) as f:
            f.write(data)
        names[name] = True
    w("trshim.%s.r90.node9.1.json" % job, "")
    good = Rank(job, 91, 4).to_json()
    text = json.dumps(good)
    w("trshim.%s.r91.node9.2.json" % job, text[: len(text) // 2])
    w("trshim.%s.r92.node9.3.json" % job, text.replace('"calls"', '"calls" ]]', 1))
    bad = dict(good, version=7)
    w("trshim.%s.r93.node9.4.json" % job, json.dumps(bad))
    bad = dict(good, format="something-else")
    w("trshim.%s.r94.node9.5.json" % job, json.dumps(bad))
    bad = dict(good, rank="one")
    w("trshim.%s.r95.node9.6.json" % job, json.dumps(bad))
    w("trshim.%s.r96.node9.7.json" % job, b"\x00\xff\xfe\x01binary\x00", "wb")
    w("trshim.%s.r97.node9.8.json" % job, "[1, 2, 3]")
    bad = dict(good)
    bad["calls"] = [["AllReduce", 5, 1, 1, "float32", "sum", None, None, "0x1", "0x1", "0x1", False, 0, 0, 1, 2, 3, 0, -1]]
    bad["comms"] = "none"
    w("trshim.%s.r98.node9.9.json" % job, json.dumps(bad))
    w("trshim.%s.r99.node9.10.json" % job, "{" * 5000 + "}" * 5000)
    w("trshim.%s.r89.node9.11.json.tmp.11" % job, "{")
    return sorted(names)


def sc_damaged(out):
    """a clean 4-rank job, damaged files next to it, a duplicated rank and
    bad call records: messages name each file, the job is analysed"""
    ranks, wid = world_job("damaged", 4)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step")
    for r in ranks:
        r.finish()
    write(ranks, out)
    # rank 1 again, written earlier, under another pid: a duplicate
    d = ranks[1].to_json()
    d["pid"] = 777
    d["write_time"] -= 50
    with open(os.path.join(out, "trshim.damaged.r1.node0.777.json"), "w") as f:
        json.dump(d, f)
    # rank 3 with two bad call records (appended)
    d = ranks[3].to_json()
    d["calls"].append(["AllReduce", 9, 4, 1, "float32", "sum", None, None, "0x1", "0x1", "0x1", False, 0, 0, 1, 2, 3, 0, 0])
    d["calls"].append(["NoSuchOp", 0, 4, 1, "float32", "sum", None, None, "0x1", "0x1", "0x1", False, 0, 0, 1, 2, 3, 0, 0])
    with open(os.path.join(out, ranks[3].filename()), "w") as f:
        json.dump(d, f)
    bad = damaged_files(out)
    expect(out, 0, [], noted=bad + ["trshim.damaged.r1.node0.777.json", ranks[3].filename()])


def sc_all_damaged(out):
    """nothing usable: exit 2"""
    os.makedirs(out, exist_ok=True)
    bad = damaged_files(out, "broken")
    expect(out, 2, [], noted=bad)


def sc_two_jobs(out):
    """an old clean job and a newer one that hangs in the same folder"""
    old = [Rank("jobold", r, 2, t0=1_000_000_000_000) for r in range(2)]
    wid = cid("world", "jobold")
    for r in old:
        r.init(wid, 2, r.rank)
        r.coll(0, site="train_step")
        r.finish()
    write(old, out)
    new, wid2 = world_job("jobnew", 2)
    for r in new:
        r.t += 10_000_000_000
        r.coll(0, site="train_step")
    new[0].coll(0, site="train_step")
    new[1].finish("exit")
    new[0].finish("signal", 15)
    write(new, out)
    expect(out, 1, [F("missing", wid2, 2, [1])], job="jobnew", other_job="jobold")


def sc_p2p_dtype(out):
    """a send/recv pair of the same size but different datatypes: no hang"""
    ranks, wid = world_job("p2pdtype", 2)
    for r in ranks:
        r.coll(0, count=16, site="train_step")
    ranks[0].sendrecv(0, "Send", 1, count=1024, dtype="float32", site="send_tensor")
    ranks[1].sendrecv(0, "Recv", 0, count=512, dtype="float64", site="recv_tensor")
    for r in ranks:
        r.coll(0, count=16, site="train_step")
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("p2p", wid, 1, [0], "send_tensor", others=[1], subkind="size_mismatch",
                      others_function="recv_tensor")])


def sc_reordered_fields(out):
    """call_fields in another order, with a field this reader does not know:
    positions are read by name, the answer is the same as extra_collective"""
    sc_extra_collective(out)
    rnd = random.Random(5)
    order = CALL_FIELDS + ["future_field"]
    rnd.shuffle(order)
    for f in os.listdir(out):
        if not f.startswith("trshim."):
            continue
        path = os.path.join(out, f)
        with open(path) as fh:
            d = json.load(fh)
        calls = []
        for c in d["calls"]:
            named = dict(zip(CALL_FIELDS, c))
            named["future_field"] = {"nested": [1, 2]}
            calls.append([named[k] for k in order])
        d["call_fields"], d["calls"] = order, calls
        with open(path, "w") as fh:
            json.dump(d, fh)


def sc_order_inversion(out):
    """rank 1 issues its pair all-reduce before the world all-reduce in step 2,
    rank 0 the reverse: each waits for the other (a deadlock, no rank idle)"""
    ranks, wid = world_job("inversion", 4)
    for r in ranks[:2]:
        r.pair = r.split(0, 1, 0, [0, 1])
    for step in range(4):
        for r in ranks:
            if r.rank == 1 and step == 2:
                r.coll(r.pair, count=256, site="pair_sync")
                r.coll(0, count=4096, site="world_sync")
            else:
                r.coll(0, count=4096, site="world_sync")
                if r.rank < 2:
                    r.coll(r.pair, count=256, site="pair_sync")
    killed(ranks)
    write(ranks, out)
    pair = ranks[0].comms[ranks[0].pair]["id"]
    expect(out, 1, [F("divergence", wid, 3, [1], "pair_sync", others=[0, 2, 3], subkind="order")])


SCENARIOS = {
    "clean": sc_clean, "extra_collective": sc_extra_collective, "extra_same_signature": sc_extra_same_signature,
    "uneven_microbatches": sc_uneven_microbatches, "skip_barrier": sc_skip_barrier,
    "barrier_some": sc_barrier_some, "early_exit": sc_early_exit,
    "pipeline_missing_send": sc_pipeline_missing_send, "hang_spread": sc_hang_spread,
    "hang_skip_tp": sc_hang_skip_tp, "init_hang": sc_init_hang, "oom": sc_oom, "imbalance": sc_imbalance,
    "missing_trace": sc_missing_trace, "p2p_size": sc_p2p_size, "damaged": sc_damaged,
    "all_damaged": sc_all_damaged, "two_jobs": sc_two_jobs, "p2p_dtype": sc_p2p_dtype,
    "reordered_fields": sc_reordered_fields, "order_inversion": sc_order_inversion,
}


# ---------------------------------------------------------------- benchmark
def bench(out, nranks, nrec, hang=True):
    """nranks ranks, nrec call records each: world + TP(8) + DP communicators,
    per step 2 TP all-reduces, 1 DP all-reduce, 1 world broadcast; the last
    rank skips its last TP call (a hang at the end)."""
    os.makedirs(out, exist_ok=True)
    tpn = 8 if nranks % 8 == 0 else 1
    job = "bench%d" % nranks
    wid = cid("world", job)
    per_step = 4
    steps = nrec // per_step
    t = 1_000_000_000_000
    sites = [0, 1, 2, 3]
    seqs = [0, 0, 0]
    lines = []
    ops = [(1, "AllReduce", 2048, "sum", None, 0), (1, "AllReduce", 2048, "sum", None, 1),
           (2, "AllReduce", 65536, "sum", None, 2), (0, "Broadcast", 4, None, 0, 3)]
    for s in range(steps):
        for comm, op, cnt, red, root, site in ops:
            seqs[comm] += 1
            t += 20000
            lines.append('["%s",%d,%d,%d,"float32",%s,%s,null,"0x7f0000100000","0x7f0000100000","0x55d0c0a01000",'
                         'false,0,0,%d,%d,4242,0,%d]' % (op, comm, seqs[comm], cnt, '"%s"' % red if red else "null",
                                                         "0" if root is not None else "null", t, t + 5000, site))
    body_full = ",".join(lines)
    body_short = ",".join(lines[:-3]) if hang else body_full   # the last rank stops 3 calls early
    stacks = json.dumps([{"frames": [{"module": 0, "offset": "0x%x" % (0x1000 + 0x40 * i), "symbol": n,
                                      "symbol_offset": 0x10},
                                     {"module": 0, "offset": "0x2000", "symbol": "main", "symbol_offset": 0x20}]}
                         for i, n in enumerate(["tp_forward", "tp_backward", "dp_allreduce_grads", "sync_step"])])
    for r in range(nranks):
        g = r // tpn
        comms = [
            {"id": wid, "parent": None, "kind": "InitRank", "size": nranks, "rank": r, "device": r % 8,
             "blocking": True, "init": {"enter_ns": 1, "exit_ns": 2, "rc": 0, "stack": 0}, "end": None,
             "colls": seqs[0]},
            {"id": cid("split", wid, 1, g), "parent": wid, "kind": "Split", "size": tpn, "rank": r % tpn,
             "device": r % 8, "color": g, "key": r, "blocking": True,
             "init": {"enter_ns": 3, "exit_ns": 4, "rc": 0, "stack": 0}, "end": None, "colls": seqs[1]},
            {"id": cid("split", wid, 2, r % tpn), "parent": wid, "kind": "Split", "size": nranks // tpn,
             "rank": g, "device": r % 8, "color": r % tpn, "key": r, "blocking": True,
             "init": {"enter_ns": 5, "exit_ns": 6, "rc": 0, "stack": 0}, "end": None, "colls": seqs[2]},
        ]
        short = hang and r == nranks - 1
        head = {"format": "trshim-trace", "version": 1, "job": {"id": job, "source": "TRSHIM_JOB_ID"},
                "rank": r, "rank_source": "RANK", "world_size": nranks, "local_rank": r % 8, "device": r % 8,
                "host": "node%d" % (r // 8), "pid": 10000 + r, "cmdline": ["train"], "start_time": 1767000000.0,
                "write_time": 1767000100.0, "end": {"reason": "exit" if short else "signal",
                                                    "signal": None if short else 15, "in_call": False},
                "versions": {"trshim": "0.1.0", "cuda_runtime": 13000, "cuda_driver": 13000, "nccl": 22809},
                "env": {}, "settings": {"dir": "traces", "stack_depth": 64},
                "clock": {"realtime": 1767000000.0, "monotonic_ns": 1_000_000_000_000},
                "comms": comms, "call_fields": CALL_FIELDS}
        tail = {"memory": {"devices": [{"device": r % 8, "live_bytes": 1 << 30, "peak_bytes": (2 << 30) + r,
                                        "allocs": 10, "frees": 5, "peak_ns": t, "peak_stack": 0,
                                        "peak_after": None}],
                           "pinned": {"live_bytes": 0, "peak_bytes": 0, "allocs": 0, "frees": 0},
                           "failures": []},
                "modules": [{"path": "/opt/bench/train", "build_id": "00ff", "base": "0x400000"}],
                "dropped": 0}
        h = json.dumps(head)[:-1]
        tl = json.dumps(tail)[1:]
        with open(os.path.join(out, "trshim.%s.r%d.node%d.%d.json" % (job, r, r // 8, 10000 + r)), "w") as f:
            f.write(h + ',"calls":[' + (body_short if short else body_full) + '],"stacks":' + stacks + "," + tl)


def main(argv):
    if len(argv) >= 2 and argv[1] == "--list":
        for k, fn in SCENARIOS.items():
            print("%-24s %s" % (k, (fn.__doc__ or "").strip().splitlines()[0]))
        return 0
    if len(argv) >= 3 and argv[1] == "bench":
        out = argv[2]
        nranks = int(argv[argv.index("--ranks") + 1]) if "--ranks" in argv else 1024
        nrec = int(argv[argv.index("--records") + 1]) if "--records" in argv else 10000
        bench(out, nranks, nrec)
        return 0
    if len(argv) != 3 or argv[1] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 2
    random.seed(1234)
    SCENARIOS[argv[1]](argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
