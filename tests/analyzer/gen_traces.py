#!/usr/bin/env python3
"""Synthetic trshim traces (docs/trace-format.md, version 1; version 2's
packed calls and checks where said) for tranalyze's tests and benchmark,
Python 3 standard library only (and python/trshim/packed_rows.py, the one
codec).

    gen_traces.py SCENARIO OUTDIR          one scenario (writes OUTDIR/expected.json too)
    gen_traces.py --list                   the scenarios
    gen_traces.py bench OUTDIR --ranks N --records M [--checks] [--nan-step S] [--clean] [--env] [--format 1|2]
                                           (--format: the trace version, default 2: what the shim writes)

Each scenario plants one failure from shared/failure-catalog.md (or none) and
writes, besides the traces, expected.json: what tranalyze must answer
(exit status, and for the top findings kind, comm, seq, ranks, function).
"""
import base64
import hashlib
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import vocab  # noqa: E402  (the operations of include/trshim/nccl_calls.h, the fields of trace_format.h)
from trace import pack_rows, pack_trace  # noqa: E402  (tests/common/trace.py: version 2's packed rows)

# the call fields of the first traces, then those each later trace added (trace_format.h's table)
CALL_FIELDS = vocab.call_fields("FIRST")
MODULE = "/opt/trjob/bin/train"
BUILD_ID = "5f3c2a9e0b7d41c68e2f9a1b3c4d5e6f70819203"
OPS = vocab.OPS                # ring order: the fingerprint's op numbers
ROOTED = {op for op in OPS if vocab.op_has(op, "ROOTED")}
REDUCING = {op for op in OPS if vocab.op_has(op, "REDUCING")}
COLL = {op for op in OPS if vocab.op_has(op, "COLL")}
CHECK_FIELDS = [f["name"] for f in vocab.CHECK_FIELDS]
FLOATS = vocab.FLOATS
# completion on the GPU (issue 6): appended to every call row, null when untracked
COMPLETION_FIELDS = vocab.call_fields("COMPLETION", only=True)
# the newest call fields (issue 13): a *Config collective's config, a signal's [sigIdx, ctx]
NEW_FIELDS = vocab.call_fields("CONFIG", only=True)
# CUDA graphs (issue 16): a GraphLaunch entry's graph index, replay number and lane
GRAPH_FIELDS = vocab.call_fields("GRAPH", only=True)
LANES = {"Send": "send", "Recv": "recv", "PutSignal": "signal", "Signal": "signal", "WaitSignal": "wait"}
NCCL_DTYPES = {n: i for i, n in enumerate(vocab.DTYPES)}   # ncclDataType_t values
NCCL_REDOPS = {n: i for i, n in enumerate(vocab.REDOPS)}   # ncclRedOp_t values
M64 = (1 << 64) - 1
FP_INTERVAL, FP_CHECKPOINTS = 64, 48


def mix64(x):
    """splitmix64's finalizer (the shim's tr_mix64 of the fingerprint)"""
    x &= M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def fingerprint(calls, comm):
    """comms[].fingerprint as the shim keeps it (the contract of issue 6):
    every collective of comm that returned, in order; checkpoints every
    fp_step seqs, thinned to every other one and fp_step doubled when 48"""
    h, last, step, ck = 0, 0, FP_INTERVAL, []
    for c in calls:
        op, cm, seq = c[0], c[1], c[2]
        if cm != comm or seq <= 0 or op not in COLL or c[15] is None:
            continue
        opn = OPS.index(vocab.OP_ALIAS[op])
        red = 6 if c[5] is None else NCCL_REDOPS.get(c[5], 5)
        root = -1 if c[6] is None else c[6]
        sig = opn | NCCL_DTYPES[c[4]] << 8 | red << 16 | ((root + 1) & 0xffffffff) << 32
        h = mix64(h ^ mix64(sig ^ mix64(c[3])))
        last = seq
        if seq % step == 0:
            if len(ck) == FP_CHECKPOINTS:
                ck = [x for x in ck if x[0] % (2 * step) == 0]
                step *= 2
            if seq % step == 0:
                ck.append((seq, h))
    return {"seq": last, "hash": "0x%016x" % h, "step": step,
            "checkpoints": [[q, "0x%016x" % x] for q, x in ck]}


def nonfinite(first, nan=1, inf=0, kind=None):
    """a check result: NaN/Inf counts and the first bad element"""
    return {"status": "nonfinite", "nan": nan, "inf": inf, "first": first,
            "first_kind": kind or ("nan" if nan else "inf")}


def not_checked(reason):
    return {"status": "not_checked", "reason": reason}


def cid(*parts):
    h = hashlib.sha256(repr(parts).encode()).digest()
    return "0x%016x" % int.from_bytes(h[:8], "little")


def site_offset(name):
    return 0x1000 + (int(hashlib.md5(name.encode()).hexdigest()[:6], 16) & ~0xf)


# ---- Python stacks (issue 7) ----
# frames: (file, qualname, line), innermost first; the shim records co_filename as the
# interpreter has it (absolute). Frames in site-packages, in torch/ & co. and in the
# standard library are folded by tranalyze: the call site is the user's innermost frame.
PY_TORCH = "/opt/conda/lib/python3.11/site-packages/torch/"
PY_STDLIB = "/opt/conda/lib/python3.11/"
PY_JOB = "/job/llm/train.py"
PY_MAIN = [(PY_JOB, "main", 300), (PY_JOB, "<module>", 320)]
PY_AUTO = False     # every Rank has Python stacks, each call's from its site (py_auto)


def py_all_reduce(*user):
    """the frames of torch.distributed.all_reduce (folded), then user frames"""
    return [(PY_TORCH + "distributed/distributed_c10d.py", "all_reduce", 2050),
            (PY_TORCH + "distributed/c10d_logger.py", "_exception_logger.<locals>.wrapper", 83)] + list(user)


def py_line(name):
    return 100 + int(hashlib.md5(name.encode()).hexdigest()[:4], 16) % 800


def py_auto_frames(site, alloc=False):
    """the Python stack of a call made at native site `site` (py_auto): torch's
    frames, then the user's function of that name in train.py, main, <module>"""
    lib = [(PY_TORCH + "nn/modules/module.py", "Module._call_impl", 1511)] if alloc else py_all_reduce()
    return lib + [(PY_JOB, site, py_line(site))] + PY_MAIN


def py_site(function):
    """tranalyze's call site text of py_auto_frames(function)"""
    return "train.py:%d in %s" % (py_line(function), function)


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
        self.nan_mode = "all"      # nancheck.mode; None: no nancheck (an older shim)
        self.checks = []
        self.nan_dropped = 0
        self.clock_real = 1767000000.0
        self.mono_base = 1_000_000_000_000   # CLOCK_MONOTONIC at clock_real
        self.track = False                  # completion observed: returned calls are gpu "done"
        self.ring_capacity = 131072
        self.ring_lost = 0                  # oldest calls overwritten in the ring (not in the trace)
        self.write_extra = 0.0              # seconds added to write_time (a write long after the last call)
        self.jitter = 500                   # random ns added to each tick (0: exact times)
        # Python stacks (issue 7): None: an older shim (no "python", "pycodes", "pystacks",
        # no "pystack" call field); else the trace's "python" object
        self.python = None
        self.pycodes, self.pycode_ix, self.pystacks, self.pystack_ix = [], {}, [], {}
        self.peak_pystack = -1
        # issue 13: None: an older shim (no "config"/"signal" call fields, no "coll_configs",
        # "nccl", comms' "suspended"); else True
        self.v13 = None
        self.cfgs = []                      # coll_configs entries (dicts), deduplicated
        self.xcall = {}                     # call index -> {"config": index or -1, "signal": [sigIdx, ctx]}
        self.nccl = None                    # the trace's "nccl" object (None: null)
        self.signals = {}                   # (comm, peer) -> signals sent to peer (PutSignal + Signal)
        self.waited = {}                    # (comm, peer) -> signals waited for from peer
        self.simulating = False             # inside a group closed by GroupSimulateEnd: calls get seq 0
        # CUDA graphs (issue 16): None: an older shim (no "graphs", no graph/replay/lane call fields)
        self.graphs = None                  # the trace's "graphs" entries
        self.capture = None                 # the graph being captured (its calls get seq 0, capturing true)
        self.xlaunch = {}                   # call index -> {"graph", "replay", "lane"} of a GraphLaunch entry
        self.replays = {}                   # graph index -> launches so far
        self.job_source = "TRSHIM_JOB_ID"
        if PY_AUTO:
            self.enable_python()

    def enable_python(self, state="ok", version="3.11.7", detail=None):
        self.python = {"state": state, "version": version, "detail": detail}
        for c in self.calls:          # calls made before: no Python stack
            if len(c) == 21:
                c.append(-1)

    def pystack(self, frames):
        """index of the Python stack frames ([(file, qualname, line)], innermost
        first), deduplicated as the shim does; -1 for None or without Python"""
        if self.python is None or not frames:
            return -1
        key = tuple(frames)
        if key not in self.pystack_ix:
            st = []
            for file, name, line in frames:
                if (file, name) not in self.pycode_ix:
                    self.pycode_ix[(file, name)] = len(self.pycodes)
                    self.pycodes.append([file, name, max(1, line - 10)])
                st.append([self.pycode_ix[(file, name)], line])
            self.pystack_ix[key] = len(self.pystacks)
            self.pystacks.append(st)
        return self.pystack_ix[key]

    def tick(self, ns=20_000):
        self.t += ns + (random.randint(0, self.jitter) if self.jitter else 0)
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
        if PY_AUTO:                 # (optional: the init's Python stack)
            c["init"]["pystack"] = self.pystack(py_auto_frames(site))
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
    def _call(self, op, comm, seq, count, dtype, redop, root, peer, site, returned=True, caller="main",
              inp=None, out=None, cap=None, at=None, gpu=None, py=None):
        """at: the call's enter_ns (default: the next tick); gpu: "pending", "done", "error" (default:
        "done" when completion is tracked and the call returned, else null); py: its Python stack
        (see pystack; appended to the row as "pystack" when the rank has Python)"""
        if at is not None:
            self.t = at
        enter = self.tick() if at is None else at
        ex = self.tick(5_000) if returned else None
        self.calls.append([op, comm, seq, count, dtype, redop, root, peer,
                           "0x7f0000100000", "0x7f0000100000", self.stream, self.capture is not None,
                           self.group, self.depth, enter, ex, self.pid, 0 if returned else None,
                           self.stack(site, caller)])
        if gpu is None and self.track and returned and seq > 0 and not vocab.op_has(op, "GROUP"):
            gpu = "done"
        self.calls[-1] += [ex + 3000 if gpu == "done" else None, gpu]
        if self.python is not None:
            self.calls[-1].append(self.pystack(py if py is not None or not PY_AUTO else py_auto_frames(site)))
        if op in REDUCING and dtype in FLOATS and seq > 0 and self.nan_mode in ("all", "output"):
            size = self.comms[comm]["size"] or 1
            n_in = count * size if op == "ReduceScatter" else count
            ix = len(self.calls) - 1
            if self.nan_mode == "all":
                self.check(ix, "input", n_in, inp, cap)
            if op != "Reduce" or root == self.comms[comm]["rank"]:
                self.check(ix, "output", count, out if returned or out else {"status": "pending"}, cap)

    def check(self, call, buffer, elems, res=None, cap=None):
        """one check: clean unless res says otherwise; cap: elements checked at most"""
        r = {"status": "clean", "nan": 0, "inf": 0, "first": None, "first_kind": None, "reason": None}
        r.update(res or {})
        checked = min(elems, cap) if cap is not None else elems
        if r["status"] == "not_checked":
            checked = 0
        self.checks.append([call, buffer, r["status"], r["nan"], r["inf"], r["first"], r["first_kind"],
                            checked, elems, None if r["status"] == "not_checked" else "host", r["reason"]])

    def coll(self, comm, op="AllReduce", count=1024, dtype="float32", redop="sum", root=None,
             site="train_step", returned=True, caller="main", inp=None, out=None, cap=None, at=None, gpu=None,
             py=None, config=None):
        """inp, out: check results of the input and output (default clean), cap: elements checked,
        at: enter_ns, gpu: completion, py: Python stack (see _call); config: issued through the *Config
        entry point with that config (a dict of ncclCollConfig_t fields, "null" for a NULL pointer, -1
        not stored by the shim)"""
        if op in ROOTED and root is None:
            root = 0
        if self.capture is not None:        # a template: its replays are numbered (launch)
            self._captured(op, comm, count, dtype, redop if op in REDUCING else None, root if op in ROOTED else None,
                           None, site, caller, py)
            return 0
        if self.simulating:
            seq = 0
        else:
            self.colls[comm] += 1
            self.comms[comm]["colls"] = self.colls[comm]
            seq = self.colls[comm]
        self._call(op, comm, seq, count, dtype, redop if op in REDUCING else None,
                   root if op in ROOTED else None, None, site, returned, caller, inp, out, cap, at, gpu, py)
        if config is not None:
            self.use_v13()
            self.xcall.setdefault(len(self.calls) - 1, {})["config"] = self.config_index(config)
        return seq

    def use_v13(self):
        if self.v13 is None:
            self.v13 = True

    def config_index(self, config):
        """the coll_configs index of config (stored once), -1 for -1"""
        if config == -1:
            return -1
        entry = {"null": True} if config == "null" else dict(config)
        if entry not in self.cfgs:
            self.cfgs.append(entry)
        return self.cfgs.index(entry)

    # ---- one-sided (NCCL 2.29+) ----
    def put_signal(self, comm, peer, count=1024, dtype="float32", site="put_activations", sig_idx=0, ctx=0, op="PutSignal"):
        """PutSignal (Signal: count 0, dtype null) to peer: numbered per (comm, peer), shared by both"""
        self.use_v13()
        if op == "Signal":
            count, dtype = 0, None
        if self.capture is not None:
            self._captured(op, comm, count, dtype, None, None, peer, site, "main", None)
            self.xcall.setdefault(len(self.calls) - 1, {})["signal"] = [sig_idx, ctx]
            return 0
        if self.simulating:
            seq = 0
        else:
            self.signals[(comm, peer)] = self.signals.get((comm, peer), 0) + 1
            seq = self.signals[(comm, peer)]
        self._call(op, comm, seq, count, dtype, None, None, peer, site)
        self.xcall.setdefault(len(self.calls) - 1, {})["signal"] = [sig_idx, ctx]
        return seq

    def signal(self, comm, peer, site="signal_ready", sig_idx=0, ctx=0):
        return self.put_signal(comm, peer, site=site, sig_idx=sig_idx, ctx=ctx, op="Signal")

    def wait_signal(self, comm, descs, site="wait_ready", sig_idx=0, ctx=0, returned=True, gpu=None):
        """one ncclWaitSignal of descriptors [(peer, opCnt)]: one record each, sharing the
        call's entry and exit; seq = the signals waited for from that peer so far, this
        one's included"""
        self.use_v13()
        first = len(self.calls)
        if self.capture is not None:     # one template (and graph call) per descriptor
            for peer, cnt in descs:
                self._captured("WaitSignal", comm, cnt, None, None, None, peer, site, "main", None, n=cnt)
                self.xcall.setdefault(len(self.calls) - 1, {})["signal"] = [sig_idx, ctx]
            return [0] * len(descs)
        for k, (peer, cnt) in enumerate(descs):
            if self.simulating:
                seq = 0
            else:
                self.waited[(comm, peer)] = self.waited.get((comm, peer), 0) + cnt
                seq = self.waited[(comm, peer)]
            if k == 0:
                self._call("WaitSignal", comm, seq, cnt, None, None, None, peer, site, returned=returned, gpu=gpu)
            else:
                row = list(self.calls[first])
                row[2], row[3], row[7] = seq, cnt, peer
                self.calls.append(row)
            self.xcall.setdefault(len(self.calls) - 1, {})["signal"] = [sig_idx, ctx]
        return [self.calls[i][2] for i in range(first, len(self.calls))]

    # ---- communicators of NCCL 2.29+: grow, suspend ----
    def grow(self, parent_ix, uid, nranks, crank, root=False, site="grow_world", returned=True):
        """ncclCommGrow: an existing member (parent_ix >= 0; root: it was given the uniqueId,
        whose hash is uid) or a new one (parent_ix None) joining through the uniqueId"""
        self.use_v13()
        if parent_ix is None:
            ix = self.init(uid, nranks, crank, kind="Grow", site=site, returned=returned)
            self.comms[ix]["grow"] = {"uid": uid, "ranks": nranks}
        else:
            pid = self.comms[parent_ix]["id"]
            ix = self.init(cid("grow", pid, nranks), nranks, crank, kind="Grow", parent=pid, site=site,
                           returned=returned)
            self.comms[ix]["grow"] = {"uid": uid if root else None, "ranks": nranks}
        return ix

    def suspend(self, comm):
        self.use_v13()
        self.comms[comm]["suspended"] = True
        self.comms[comm]["suspends"] = self.comms[comm].get("suspends", 0) + 1

    def resume(self, comm):
        self.comms[comm]["suspended"] = False

    def sendrecv(self, comm, op, peer, count=4096, dtype="float32", site="pipeline_step", gpu=None, py=None):
        key = (comm, peer, op)
        if self.capture is not None:
            self._captured(op, comm, count, dtype, None, None, peer, site, "main", py)
            return 0
        if self.simulating:
            self._call(op, comm, 0, count, dtype, None, None, peer, site, gpu=gpu, py=py)
            return 0
        self.p2p[key] = self.p2p.get(key, 0) + 1
        self._call(op, comm, self.p2p[key], count, dtype, None, None, peer, site, gpu=gpu, py=py)
        return self.p2p[key]

    def group_start(self, site="exchange"):
        if self.depth == 0:
            self.groups += 1
            self.group = self.groups
        self.depth += 1
        self._call("GroupStart", -1, 0, 0, None, None, None, None, site)
        self.calls[-1][12], self.calls[-1][13] = self.group, self.depth

    def group_end(self, site="exchange", simulate=False):
        """simulate: ncclGroupSimulateEnd (the outermost group's calls were numbered 0:
        NCCL issued none of them; start the group with group_start_simulated)"""
        self._call("GroupSimulateEnd" if simulate else "GroupEnd", -1, 0, 0, None, None, None, None, site)
        self.calls[-1][12], self.calls[-1][13] = self.group, self.depth
        self.depth -= 1
        if self.depth == 0:
            self.group = 0
            self.simulating = False

    def group_start_simulated(self, site="plan_exchange"):
        """an outermost group that ncclGroupSimulateEnd will close: its calls get seq 0"""
        self.use_v13()
        self.group_start(site)
        self.simulating = True

    # ---- memory ----
    def alloc(self, nbytes, site="alloc_params", fail=False, capacity=None, py=None):
        t = self.tick(1000)
        if py is None and PY_AUTO:
            py = py_auto_frames(site, alloc=True)
        if fail:
            self.failures.append({"api": "cudaMalloc", "device": self.rank % 8, "bytes": nbytes,
                                  "live_bytes": self.live, "free_bytes": (capacity - self.live) if capacity else None,
                                  "total_bytes": capacity, "error": "cudaErrorMemoryAllocation",
                                  "error_code": 2, "t_ns": t, "stack": self.stack(site)})
            if self.python is not None:
                self.failures[-1]["pystack"] = self.pystack(py)
            return
        self.live += nbytes
        if self.live > self.peak:
            self.peak, self.peak_ns, self.peak_stack = self.live, t, self.stack(site)
            self.peak_pystack = self.pystack(py)
            last = None
            for c in reversed(self.calls):
                if c[0] in COLL and c[2] > 0:
                    last = {"comm": self.comms[c[1]]["id"], "seq": c[2]}
                    break
            self.peak_after = last

    # ---- CUDA graphs (issue 16) ----
    def use_graphs(self):
        self.use_v13()
        if self.graphs is None:
            self.graphs = []

    def begin_capture(self, site="capture_step", caller="main", py=None):
        """cudaStreamBeginCapture at site: the NCCL calls until end_capture are templates
        (capturing true, seq 0) and the graph's calls"""
        self.use_graphs()
        self.capture = {"capture_id": 100 + len(self.graphs), "graph": "0x%x" % (0x7e0000000000 + 0x1000 * len(self.graphs)),
                        "stream": self.stream, "stack": self.stack(site, caller), "pystack": self.pystack(py),
                        "base": -1, "calls": [], "dropped": 0}

    def _captured(self, op, comm, count, dtype, redop, root, peer, site, caller, py, n=1):
        self._call(op, comm, 0, count, dtype, redop, root, peer, site, caller=caller, py=py)
        self.capture["calls"].append({
            "op": op, "comm": comm, "count": count, "dtype": dtype, "redop": redop, "root": root, "peer": peer,
            "sendbuff": "0x7f0000100000", "recvbuff": "0x7f0000100000", "stream": self.stream,
            "stack": self.calls[-1][18], "pystack": self.calls[-1][21] if self.python is not None else -1,
            "lane": LANES.get(op, "coll"), "n": n})

    def end_capture(self, site="capture_step_end", caller="main", py=None):
        """cudaStreamEndCapture: the graph's index"""
        g = self.capture
        g["end_stack"], g["end_pystack"] = self.stack(site, caller), self.pystack(py)
        self.capture = None
        self.graphs.append(g)
        self.replays[len(self.graphs) - 1] = 0
        return len(self.graphs) - 1

    def graph_lanes(self, gi):
        """the lanes of graph gi in the order of its calls: [((comm, lane, peer), numbers per replay)]"""
        lanes = {}
        for c in self.graphs[gi]["calls"]:
            key = (c["comm"], c["lane"], c["peer"] if c["lane"] != "coll" else None)
            lanes[key] = lanes.get(key, 0) + c["n"]
        return list(lanes.items())

    def launch(self, gi, site="train_step", caller="main", gpu=None, returned=True, rc=0, py=None, lanes=None):
        """cudaGraphLaunch of graph gi: one GraphLaunch entry per lane, numbering the replayed
        calls (rc != 0: a failed launch numbers nothing); gpu: the launch's completion (default
        "done" when completion is tracked); lanes: the entries' lanes (damage tests)"""
        self.replays[gi] += 1
        replay = self.replays[gi]
        enter = self.tick()
        ex = self.tick(5_000) if returned else None
        if gpu is None and self.track and returned and rc == 0:
            gpu = "done"
        for (comm, lane, peer), total in (lanes if lanes is not None else self.graph_lanes(gi)):
            if lane == "coll":
                base = self.colls[comm] + 1
                if rc == 0:
                    self.colls[comm] += total
                    self.comms[comm]["colls"] = self.colls[comm]
            else:
                ctr = {"send": (self.p2p, (comm, peer, "Send")), "recv": (self.p2p, (comm, peer, "Recv")),
                       "signal": (self.signals, (comm, peer)), "wait": (self.waited, (comm, peer))}[lane]
                base = ctr[0].get(ctr[1], 0) + 1
                if rc == 0:
                    ctr[0][ctr[1]] = base - 1 + total
            self.calls.append(["GraphLaunch", comm, base if rc == 0 else 0, total, None, None, None, peer,
                               self.graphs[gi]["graph"], None, self.stream, False, self.group, self.depth, enter, ex,
                               self.pid, rc if returned else None, self.stack(site, caller)])
            self.calls[-1] += [ex + 3000 if gpu == "done" else None, gpu]
            if self.python is not None:
                self.calls[-1].append(self.pystack(py if py is not None or not PY_AUTO else py_auto_frames(site)))
            self.xlaunch[len(self.calls) - 1] = {"graph": gi, "replay": replay, "lane": lane}
        return replay

    def numbered(self):
        """the calls as numbered, a launch's entries replaced by the calls it replays (the
        fingerprints count replayed collectives): rows as self.calls' (op, comm, seq, count,
        dtype, redop, root, peer, ..., exit_ns at 15)"""
        out, i = [], 0
        while i < len(self.calls):
            c = self.calls[i]
            if c[0] != "GraphLaunch":
                out.append(c)
                i += 1
                continue
            x = self.xlaunch[i]
            bases = {}
            while i < len(self.calls) and self.calls[i][0] == "GraphLaunch" and \
                    self.xlaunch[i]["replay"] == x["replay"] and self.xlaunch[i]["graph"] == x["graph"]:
                e = self.calls[i]
                bases[(e[1], self.xlaunch[i]["lane"], e[7] if self.xlaunch[i]["lane"] != "coll" else None)] = e
                i += 1
            off = {}
            for gc in self.graphs[x["graph"]]["calls"]:
                key = (gc["comm"], gc["lane"], gc["peer"] if gc["lane"] != "coll" else None)
                e = bases.get(key)
                if e is None:
                    continue
                k = off.get(key, 0)
                off[key] = k + gc["n"]
                seq = e[2] + k + gc["n"] - 1 if e[2] else 0
                out.append([gc["op"], gc["comm"], seq, gc["count"], gc["dtype"], gc["redop"], gc["root"], gc["peer"]]
                           + e[8:15] + [e[15]] + e[16:])
        return out

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
            if self.python is not None:
                mem_devs[-1]["peak_pystack"] = self.peak_pystack
        d = {
            "format": "trshim-trace", "version": 1,
            "job": {"id": self.job, "source": self.job_source},
            "rank": self.rank, "rank_source": "RANK", "world_size": self.world,
            "local_rank": self.rank % 8, "device": self.rank % 8, "host": self.host, "pid": self.pid,
            "cmdline": [MODULE, "--steps", "10"], "start_time": 1767000000.0 + self.rank * 1e-3,
            "write_time": 1767000100.0 + (self.t - self.mono_base) / 1e9 + self.write_extra,
            "end": self.end,
            "versions": {"trshim": "0.1.0", "cuda_runtime": 13000, "cuda_driver": 13000, "nccl": 22809},
            "env": {"NCCL_DEBUG": "WARN", "TRSHIM_DIR": "traces", "NCCL_IB_KEY": "<redacted>"},
            "settings": {"dir": "traces", "stack_depth": 64},
            "clock": {"realtime": self.clock_real, "monotonic_ns": self.mono_base},
            "comms": [dict(c, fingerprint=fingerprint(self.numbered(), i), slot=i) for i, c in enumerate(self.comms)],
            "call_fields": CALL_FIELDS + COMPLETION_FIELDS, "calls": self.calls[self.ring_lost:],
            "memory": {"devices": mem_devs,
                       "pinned": {"live_bytes": 0, "peak_bytes": 0, "allocs": 0, "frees": 0},
                       "failures": self.failures},
            "modules": [{"path": MODULE, "build_id": BUILD_ID, "base": "0x555555554000"}],
            "stacks": self.stacks, "dropped": self.ring_lost,
            "ring": {"file": None, "capacity": self.ring_capacity, "first": self.ring_lost,
                     "next": len(self.calls), "lost": self.ring_lost},
        }
        if self.python is not None:       # Python stacks (a newer shim)
            d["settings"]["pystack_depth"] = 64
            d["python"] = dict(self.python)
            d["pycodes"] = [list(c) for c in self.pycodes]
            d["pystacks"] = [[list(f) for f in st] for st in self.pystacks]
            d["call_fields"] = d["call_fields"] + ["pystack"]
        if self.v13:                      # issue 13's fields (a newer shim)
            d["call_fields"] = d["call_fields"] + NEW_FIELDS
            calls = []
            for i, c in enumerate(self.calls[self.ring_lost:], self.ring_lost):
                x = self.xcall.get(i, {})
                calls.append(list(c) + [x.get("config"), x.get("signal")])
            d["calls"] = calls
            if self.graphs is not None:   # issue 16's fields (a newer shim)
                d["call_fields"] = d["call_fields"] + GRAPH_FIELDS
                for i, c in enumerate(d["calls"], self.ring_lost):
                    x = self.xlaunch.get(i, {})
                    c += [x.get("graph"), x.get("replay"), x.get("lane")]
                d["graphs"] = [dict(g, calls=[dict(c) for c in g["calls"]]) for g in self.graphs]
            d["coll_configs"] = [dict(c) for c in self.cfgs]
            d["nccl"] = self.nccl
            for c in d["comms"]:
                c.setdefault("suspended", False)
                c.setdefault("suspends", 0)
        if self.nan_mode is not None:
            d["nancheck"] = {"mode": self.nan_mode, "engine_setting": "auto",
                             "engine": "host" if self.nan_mode != "off" else None,
                             "gpu_unused": "no CUDA driver API (cuModuleLoadData & co.)" if self.nan_mode != "off" else None,
                             "max_bytes": 64 << 20, "pool_bytes": 256 << 20, "dropped": self.nan_dropped}
            if self.nan_mode != "off":
                d["check_fields"] = CHECK_FIELDS
                d["checks"] = [[c[0] - self.ring_lost] + c[1:] for c in self.checks if c[0] >= self.ring_lost]
        return d

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


def sc_silent_barrier(out):
    """issue 30, DeepSpeed ZeRO-1's shape: rank 0 alone saves a checkpoint
    between the gradient and the loss all-reduce; its first barrier (1 float)
    pairs silently with rank 1's loss all-reduce (1 float, another line), and
    the two hang at #5 (the checkpoint's gather against the next step's
    gradients). The first divergence is #4, where the lines differ."""
    ranks, wid = world_job("silentbarrier", 2)
    r0, r1 = ranks
    for r in ranks:
        r.coll(0, count=4096, site="backward_grads")
        r.coll(0, count=1, site="reduce_loss")
        r.coll(0, count=4096, site="backward_grads")
    r0.coll(0, count=1, site="checkpoint_barrier")
    r0.coll(0, count=64, site="checkpoint_gather", gpu="pending")
    r1.coll(0, count=1, site="reduce_loss")
    r1.coll(0, count=4096, site="backward_grads", gpu="pending")
    killed(ranks)
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 4, [0], "checkpoint_barrier", others=[1], subkind="different_call")])


def sc_branch_lines(out):
    """the same collectives from a different line on one rank (a rank-specific
    branch), in step before and after: no finding"""
    ranks, wid = world_job("branchlines", 4)
    for step in range(6):
        for r in ranks:
            r.coll(0, count=4096, site="backward_grads")
            r.coll(0, count=1, site="log_loss_rank0" if r.rank == 0 else "log_loss")
            r.coll(0, count=16, site="log_norm_rank0" if r.rank == 0 else "log_norm")
    for r in ranks:
        r.finish("exit")
    write(ranks, out)
    expect(out, 0, [])


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


def rewrite_traces(out, edit):
    """edit(d) on the parsed JSON of every trace file in out, written back"""
    for f in os.listdir(out):
        if not f.startswith("trshim."):
            continue
        path = os.path.join(out, f)
        with open(path) as fh:
            d = json.load(fh)
        edit(d)
        with open(path, "w") as fh:
            json.dump(d, fh)


def sc_reordered_fields(out):
    """call_fields in another order, with a field this reader does not know:
    positions are read by name, the answer is the same as extra_collective"""
    sc_extra_collective(out)
    rnd = random.Random(5)
    order = CALL_FIELDS + ["future_field"]
    rnd.shuffle(order)
    def reorder(d):
        calls = []
        for c in d["calls"]:
            named = dict(zip(CALL_FIELDS, c))
            named["future_field"] = {"nested": [1, 2]}
            calls.append([named[k] for k in order])
        d["call_fields"], d["calls"] = order, calls
    rewrite_traces(out, reorder)


def sc_nan_reordered_fields(out):
    """check_fields (and call_fields) in another order, with fields this
    reader does not know: positions are read by name, the answer is the
    same as nan_input_fp32"""
    sc_nan_input_fp32(out)
    rnd = random.Random(9)
    corder = CALL_FIELDS + ["future_field"]
    korder = CHECK_FIELDS + ["future_check_field"]
    rnd.shuffle(corder)
    rnd.shuffle(korder)
    def reorder(d):
        calls = []
        for c in d["calls"]:
            named = dict(zip(CALL_FIELDS, c), future_field=[1])
            calls.append([named[k] for k in corder])
        checks = []
        for c in d["checks"]:
            named = dict(zip(CHECK_FIELDS, c), future_check_field={"x": None})
            checks.append([named[k] for k in korder])
        d["call_fields"], d["calls"] = corder, calls
        d["check_fields"], d["checks"] = korder, checks
    rewrite_traces(out, reorder)


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


# ---------------------------------------------------------------- NaN / Inf
def nan_coll(members, comm_of, poisoned, marked, born=None, overflow=None, out=None, **kw):
    """One collective of members (Rank objects, comm_of(r): its comm index).
    A rank in poisoned feeds an all-NaN input; born = {rank: check} a NaN born
    in that rank's input now; overflow = the output check of a sum of finite
    inputs that overflowed. When any input is bad (or it overflowed) every
    output is non-finite and every member ends poisoned; marked gets
    (comm id, seq). out: the output check of a bad collective (default: NaN
    at the first bad input element). Returns the seq."""
    born = born or {}
    count = kw.get("count", 1024)
    n_in = count * len(members) if kw.get("op") == "ReduceScatter" else count
    ins = {}
    for r in members:
        if r.rank in born:
            ins[r.rank] = born[r.rank]
        elif r.rank in poisoned:
            ins[r.rank] = nonfinite(0, nan=n_in)
        else:
            ins[r.rank] = None
    bad = [v for v in ins.values() if v]
    if overflow:
        o = overflow
    elif bad:
        o = out or nonfinite(min(v["first"] for v in bad), nan=max(v["nan"] + v["inf"] for v in bad), inf=0)
    else:
        o = None
    seq = None
    for r in members:
        seq = r.coll(comm_of(r), inp=ins[r.rank], out=o, **kw)
    if o:
        poisoned.update(r.rank for r in members)
        marked.add((members[0].comms[comm_of(members[0])]["id"], seq))
    return seq


def sc_nan_input_fp32(out):
    """rank 2's gradient turns NaN at step 3 (float32): rank 2 is the source"""
    ranks, wid = world_job("naninput", 4)
    poisoned, marked = set(), set()
    seq_born = None
    for step in range(6):
        born = {2: nonfinite(123)} if step == 3 else None
        s = nan_coll(ranks, lambda r: 0, poisoned, marked, born=born, count=4096, site="allreduce_grads")
        if step == 3:
            seq_born = s
        born = {2: nonfinite(0)} if step == 3 else None      # its loss too
        nan_coll(ranks, lambda r: 0, poisoned, marked, born=born, count=1, site="reduce_loss")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, seq_born, [2], "allreduce_grads", others=[0, 1, 3], cause="input",
                      op="AllReduce", dtype="float32", root_cause=True, later_count=len(marked) - 1,
                      inputs={"2": {"first": 123, "nan": 1, "inf": 0, "first_kind": "nan"}},
                      message_contains=["rank 2's input to AllReduce #7", "element 123",
                                        "bad data or a bug in that rank's forward/backward"])],
           count=1)


def sc_nan_input_bf16(out):
    """8 ranks, TP groups of 4 and DP pairs, bfloat16: rank 5's gradient is
    NaN in its DP all-reduce of step 2; it spreads over every group after"""
    ranks, wid, tp, dp = dp_tp("nanbf16", None)
    poisoned, marked = set(), set()
    seq_born = None
    for step in range(5):
        for g in tp:
            nan_coll([ranks[x] for x in g], lambda r: r.tp, poisoned, marked, count=2048, dtype="bfloat16",
                     site="tp_forward")
        for g in dp:
            born = {5: nonfinite(77)} if step == 2 and 5 in g else None
            s = nan_coll([ranks[x] for x in g], lambda r: r.dp, poisoned, marked, born=born, count=1 << 16,
                         dtype="bfloat16", redop="avg", site="dp_allreduce_grads")
            if born:
                seq_born = s
    for r in ranks:
        r.finish()
    write(ranks, out)
    dp15 = ranks[5].comms[ranks[5].dp]["id"]
    expect(out, 1, [F("nan", dp15, seq_born, [5], "dp_allreduce_grads", others=[1], cause="input",
                      dtype="bfloat16", comm_ranks=[1, 5], later_count=len(marked) - 1,
                      inputs={"5": {"first": 77, "nan": 1}})], count=1)


def sc_fp16_overflow(out):
    """every rank's fp16 gradient is finite, their sum overflows (step 2)"""
    ranks, wid = world_job("fp16ovf", 4)
    poisoned, marked = set(), set()
    seq_ovf = None
    for step in range(5):
        ovf = nonfinite(500, nan=0, inf=10) if step == 2 else None
        s = nan_coll(ranks, lambda r: 0, poisoned, marked, overflow=ovf, count=1000, dtype="float16",
                     site="allreduce_fp16_grads")
        if step == 2:
            seq_ovf = s
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, seq_ovf, [0, 1, 2, 3], "allreduce_fp16_grads", others=[], cause="overflow",
                      dtype="float16", limit=65504, later_count=len(marked) - 1, unchecked_inputs=[],
                      message_contains=["65504", "bfloat16", "loss scale", "Inf at element 500"])], count=1)


def sc_fp8_input(out):
    """float8 e4m3: rank 1's input holds the e4m3 NaN at element 5"""
    ranks, wid = world_job("fp8input", 4)
    poisoned, marked = set(), set()
    for step in range(4):
        born = {1: nonfinite(5)} if step == 1 else None
        nan_coll(ranks, lambda r: 0, poisoned, marked, born=born, count=64, dtype="float8e4m3",
                 site="allreduce_fp8")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, 2, [1], "allreduce_fp8", others=[0, 2, 3], cause="input", dtype="float8e4m3",
                      later_count=2, inputs={"1": {"first": 5}})], count=1)


def sc_fp8_overflow(out):
    """float8 e5m2: finite inputs, an infinite sum"""
    ranks, wid = world_job("fp8ovf", 2)
    poisoned, marked = set(), set()
    for step in range(3):
        ovf = nonfinite(20, nan=0, inf=3) if step == 1 else None
        nan_coll(ranks, lambda r: 0, poisoned, marked, overflow=ovf, count=64, dtype="float8e5m2",
                 site="allreduce_fp8")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, 2, [0, 1], "allreduce_fp8", others=[], cause="overflow", dtype="float8e5m2",
                      limit=57344, message_contains=["57344"])], count=1)


def sc_nan_not_checked(out):
    """fp16: the output goes Inf at step 2 with ranks 0-2's inputs finite, but
    rank 3's input was not checked: overflow is not proven, rank 3 is named"""
    ranks, wid = world_job("nannotchecked", 4)
    seq = None
    for step in range(4):
        for r in ranks:
            inp = not_checked("pool_exhausted") if step == 2 and r.rank == 3 else None
            o = nonfinite(500, nan=0, inf=10) if step == 2 else None
            s = r.coll(0, count=1000, dtype="float16", site="allreduce_fp16_grads", inp=inp, out=o)
            if step == 2:
                seq = s
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, seq, [3], "allreduce_fp16_grads", others=[0, 1, 2], cause="unknown",
                      unchecked_inputs=[3], reason_contains=["rank 3", "pool_exhausted"],
                      message_contains=["65504"])], count=1)


def sc_nan_output_only(out):
    """TRSHIM_NANCHECK=output: outputs only; the first non-finite output's
    cause cannot be told"""
    ranks, wid = world_job("nanoutput", 4)
    for r in ranks:
        r.nan_mode = "output"
    poisoned, marked = set(), set()
    for step in range(4):
        born = {2: nonfinite(9)} if step == 2 else None
        nan_coll(ranks, lambda r: 0, poisoned, marked, born=born, count=256, site="allreduce_grads")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, 3, [0, 1, 2, 3], "allreduce_grads", others=[], cause="unknown",
                      unchecked_inputs=[0, 1, 2, 3], reason_contains=["TRSHIM_NANCHECK=output"])], count=1)


def sc_nan_capped(out):
    """inputs checked only up to element 1000 of 4096 (TRSHIM_NANCHECK_MAX_MB);
    the output's first NaN is at 2000: inside no input check"""
    ranks, wid = world_job("nancapped", 2)
    for step in range(3):
        for r in ranks:
            o = nonfinite(2000, nan=0, inf=1) if step == 1 else None
            r.coll(0, count=4096, dtype="float16", site="allreduce_grads", out=o, cap=1000)
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, 2, [0, 1], "allreduce_grads", cause="unknown", unchecked_inputs=[0, 1],
                      reason_contains=["up to element 1000"])], count=1)


def sc_clean_checks(out):
    """every checked datatype and kind of reduction, all finite; an integer
    all-reduce (never checked); a few checks that could not run: no finding"""
    ranks, wid = world_job("cleanchecks", 4)
    for step in range(3):
        for r in ranks:
            for dt in ("float16", "bfloat16", "float32", "float64", "float8e4m3", "float8e5m2"):
                r.coll(0, count=256, dtype=dt, site="allreduce_" + dt)
            r.coll(0, op="ReduceScatter", count=64, site="reduce_scatter_grads")
            r.coll(0, op="Reduce", count=16, root=1, redop="max", site="reduce_metrics")
            r.coll(0, count=8, dtype="int32", site="allreduce_counts")
            r.coll(0, count=32, site="allreduce_loss",
                   inp=not_checked("cuda_error_pending: cudaErrorInvalidValue") if step == 1 and r.rank == 2 else None,
                   out=not_checked("cuda_error_pending: cudaErrorInvalidValue") if step == 1 and r.rank == 2 else None)
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 0, [])


def sc_checks_off(out):
    """TRSHIM_NANCHECK=off everywhere: no NaN analysis, and a note says so"""
    ranks, wid = world_job("checksoff", 4)
    for r in ranks:
        r.nan_mode = "off"
    for step in range(3):
        for r in ranks:
            r.coll(0, count=1000, dtype="float16", site="allreduce_fp16_grads")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 0, [], note_contains="NaN/Inf checks were off")


def sc_nan_consequences(out):
    """8 ranks (TP 4, DP pairs, a world broadcast): rank 6's input to its TP
    all-reduce is NaN at step 2; the NaN then reaches every communicator,
    including inputs of ranks that never had a non-finite output before (they
    got it through the broadcast, which is not checked): one finding"""
    ranks, wid, tp, dp = dp_tp("nanconseq", None)
    poisoned, marked = set(), set()
    seq_born = None
    for step in range(5):
        for g in tp:
            born = {6: nonfinite(31, nan=2)} if step == 2 and 6 in g else None
            s = nan_coll([ranks[x] for x in g], lambda r: r.tp, poisoned, marked, born=born, count=2048,
                         site="tp_forward")
            if born:
                seq_born = s
        # rank 4 broadcasts its (possibly NaN) weights: not checked, but
        # every rank has them after it
        for r in ranks:
            r.coll(0, op="Broadcast", count=4, root=4, site="sync_weights")
        if 4 in poisoned:
            poisoned.update(range(8))
        for g in dp:
            nan_coll([ranks[x] for x in g], lambda r: r.dp, poisoned, marked, count=1 << 16,
                     site="dp_allreduce_grads")
    for r in ranks:
        r.finish()
    write(ranks, out)
    tp1 = ranks[6].comms[ranks[6].tp]["id"]
    expect(out, 1, [F("nan", tp1, seq_born, [6], "tp_forward", others=[4, 5, 7], cause="input",
                      later_count=len(marked) - 1, independent=[])], count=1)


def sc_nan_clock_skew(out):
    """two hosts whose clocks disagree by 100 s: the NaN is born on node1
    (rank 3's input, TP pair {2, 3}), its consequences on node0 look earlier
    by the clock; the causal order names rank 3"""
    ranks = [Rank("nanskew", r, 4, host="node%d" % (r // 2)) for r in range(4)]
    wid = cid("world", "nanskew")
    for r in ranks:
        r.init(wid, 4, r.rank)
        r.alloc(64 << 20)
        if r.rank >= 2:
            r.clock_real += 100.0       # node1's wall clock is 100 s ahead
    for r in ranks:
        r.tp = r.split(0, 1, r.rank // 2, [0, 1] if r.rank < 2 else [2, 3])
        r.dp = r.split(0, 2, r.rank % 2, [0, 2] if r.rank % 2 == 0 else [1, 3])
    poisoned, marked = set(), set()
    seq_born = None
    for step in range(4):
        for g in ([0, 1], [2, 3]):
            born = {3: nonfinite(4)} if step == 2 and 3 in g else None
            s = nan_coll([ranks[x] for x in g], lambda r: r.tp, poisoned, marked, born=born, count=512,
                         site="tp_forward")
            if born:
                seq_born = s
        for g in ([0, 2], [1, 3]):
            nan_coll([ranks[x] for x in g], lambda r: r.dp, poisoned, marked, count=4096, site="dp_allreduce_grads")
    for r in ranks:
        r.finish()
    write(ranks, out)
    tp1 = ranks[3].comms[ranks[3].tp]["id"]
    expect(out, 1, [F("nan", tp1, seq_born, [3], "tp_forward", others=[2], cause="input",
                      later_count=len(marked) - 1, independent=[])], count=1)


def sc_nan_independent(out):
    """two DP pairs that share no collective: {0, 2} overflows in fp16 at
    step 2, and rank 3's input is NaN at step 3 in {1, 3}: the first is the
    earlier one, the other is named as independent"""
    ranks, wid = world_job("nanindep", 4)
    for r in ranks:
        r.dp = r.split(0, 1, r.rank % 2, [0, 2] if r.rank % 2 == 0 else [1, 3])
    poisoned, marked = set(), set()
    for step in range(5):
        for g in ([0, 2], [1, 3]):
            ovf = nonfinite(7, nan=0, inf=1) if step == 2 and g == [0, 2] else None
            born = {3: nonfinite(11)} if step == 3 and g == [1, 3] else None
            nan_coll([ranks[x] for x in g], lambda r: r.dp, poisoned, marked, born=born, overflow=ovf, count=2048,
                     dtype="float16", site="dp_allreduce_grads")
    for r in ranks:
        r.finish()
    write(ranks, out)
    dp0 = ranks[0].comms[ranks[0].dp]["id"]
    dp1 = ranks[1].comms[ranks[1].dp]["id"]
    expect(out, 1, [F("nan", dp0, 3, [0, 2], "dp_allreduce_grads", others=[], cause="overflow",
                      later_count=2, independent=[{"comm": dp1, "seq": 4, "cause": "input", "ranks": [3]}])],
           count=1)


def sc_rs_overflow(out):
    """fp16 ReduceScatter (1000 per rank, inputs of 4000 checked only up to
    element 2500): rank 1's block goes Inf at element 100, i.e. input element
    1100 of every rank, inside what was checked: an overflow, proven"""
    ranks, wid = world_job("rsovf", 4)
    for step in range(3):
        for r in ranks:
            o = nonfinite(100, nan=0, inf=1) if step == 1 and r.rank == 1 else None
            r.coll(0, op="ReduceScatter", count=1000, dtype="float16", site="reduce_scatter_grads", out=o, cap=2500)
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, 2, [0, 1, 2, 3], "reduce_scatter_grads", cause="overflow", op="ReduceScatter",
                      unchecked_inputs=[])], count=1)


def sc_nan_unchecked_before(out):
    """rank 0's checks of step 1 could not run (the stream was capturing);
    rank 1's input is NaN at step 2: rank 1 is the source, with a caveat
    that an earlier reduction was not seen"""
    ranks, wid = world_job("nanbefore", 2)
    poisoned, marked = set(), set()
    for step in range(4):
        if step == 1:
            for r in ranks:
                nc = not_checked("stream_capturing") if r.rank == 0 else None
                r.coll(0, count=512, site="allreduce_grads", inp=nc, out=nc)
            continue
        born = {1: nonfinite(8, nan=3)} if step == 2 else None
        nan_coll(ranks, lambda r: 0, poisoned, marked, born=born, count=512, site="allreduce_grads")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, 3, [1], "allreduce_grads", cause="input", unchecked_before=1,
                      inputs={"1": {"first": 8, "nan": 3}}, message_contains=["may be older"])], count=1)


def sc_nan_old_trace(out):
    """rank 3's trace comes from a shim without NaN checks; the output of
    step 1 is Inf with ranks 0-2's inputs finite: rank 3's input is the
    unknown one"""
    ranks, wid = world_job("nanold", 4)
    ranks[3].nan_mode = None
    for step in range(3):
        for r in ranks:
            o = nonfinite(0, nan=0, inf=2) if step >= 1 else None
            i = nonfinite(0, nan=0, inf=2) if step == 2 and r.rank < 3 else None
            r.coll(0, count=256, dtype="float16", site="allreduce_grads", out=o, inp=i)
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, 2, [3], "allreduce_grads", others=[0, 1, 2], cause="unknown",
                      unchecked_inputs=[3], reason_contains=["older trshim"])], count=1,
           note_contains="no NaN/Inf checks")


def sc_nan_and_hang(out):
    """rank 1's gradient is NaN at step 1; rank 3 exits after step 3 and the
    others hang in step 4: the hang is the root cause, the NaN a finding"""
    ranks, wid = world_job("nanhang", 4)
    poisoned, marked = set(), set()
    for step in range(4):
        born = {1: nonfinite(3)} if step == 1 else None
        nan_coll(ranks, lambda r: 0, poisoned, marked, born=born, count=1 << 14, site="train_step")
    for r in ranks[:3]:
        r.coll(0, count=1 << 14, site="train_step", returned=False, inp=nonfinite(0, nan=1 << 14))
    for r in ranks:
        if r.rank == 3:
            r.finish("exit")
        else:
            r.finish("signal", 15)
    write(ranks, out)
    expect(out, 1, [F("missing", wid, 5, [3], root_cause=True),
                    F("nan", wid, 2, [1], "train_step", others=[0, 2, 3], cause="input", root_cause=False,
                      later_count=3)], count=2)


# ---------------------------------------------------------------- stragglers
MS = 1_000_000
STEP_NS = 100 * MS


def exact_job(name, n, host_of=lambda r: "node0", mono_shift=None, real_skew=None):
    """n ranks with exact times (no random ticks) that all leave the world
    communicator's init at the same true time. mono_shift(host): that host's
    CLOCK_MONOTONIC minus the true time (ns); real_skew(host): the error of
    its wall clock (s). r.at(true_ns) is a true time on r's own clock."""
    ranks = []
    for i in range(n):
        r = Rank(name, i, n, host=host_of(i))
        r.jitter = 0
        r.shift = mono_shift(r.host) if mono_shift else 0
        r.mono_base += r.shift
        r.t = 1_000_000_000_000 + r.shift
        if real_skew:
            r.clock_real += real_skew(r.host)
        r.at = lambda t, r=r: t + r.shift
        ranks.append(r)
    wid = cid("world", name)
    for r in ranks:
        r.init(wid, n, r.rank)
    return ranks, wid


def step_time(i):
    """true time at which step i's collectives are due"""
    return 1_000_000_000_000 + STEP_NS * (i + 1)


def rotating(j, i, m=3):
    """the offset of the j-th of m on-time members at step i: m values 1 ms
    apart centred on the due time (-1, 0, +1 ms for three), rotating over the
    members with the step: their median is the due time"""
    return ((j + i) % m) * MS - (m - 1) * MS // 2


def straggler_steps(ranks, comm_of, late_rank, steps=50, late=30 * MS, eval_seq=37, eval_late=45 * MS):
    """steps all-reduces; late_rank enters each `late` after the others (who
    rotate by +-1 ms around the due time), the eval_seq-th (from eval_step on
    every rank) eval_late after them"""
    for i in range(steps):
        site = "eval_step" if i + 1 == eval_seq else "train_step"
        for r in ranks:
            lat = (eval_late if i + 1 == eval_seq else late) if r.rank == late_rank else rotating(r.rank, i)
            r.coll(comm_of(r), count=1 << 16, site=site, at=r.at(step_time(i) + lat))


# these scenarios test the detection itself, with a floor of 5 ms and no
# share of the interval (--straggler-ms, --straggler-fraction; the defaults,
# 50 ms and 10%, keep out lateness that costs little: tests/analyzer/gen_mesh.py)
LOW_FLOOR = ["--straggler-ms", "5", "--straggler-fraction", "0"]


def straggler_expect(wid, ranks=(3,), others=(0, 1, 2), clock="monotonic", **kw):
    return F("straggler", wid, 37, list(ranks), "eval_step", others=list(others), root_cause=False,
             examined=50, last=50, lateness_median_ns=30 * MS, lateness_max_ns=45 * MS, jitter_ns=1 * MS,
             threshold_ns=5 * MS, clock=clock, **kw)


def sc_straggler(out):
    """rank 3 of 4 enters each of 50 all-reduces 30 ms after the others
    (45 ms at #37, from eval_step): a straggler, nothing else"""
    ranks, wid = exact_job("straggler", 4)
    straggler_steps(ranks, lambda r: 0, 3)
    for r in ranks:
        r.finish()
    write(ranks, out)
    # entry spread: rank 3 vs the earliest other (-1 ms): 31 ms, 46 ms at #37
    expect(out, 1, [straggler_expect(wid, also_comms=[])], count=1, args=LOW_FLOOR,
           comm_spread={"comm": wid, "collectives": 50, "median_ns": 31 * MS, "max_ns": 46 * MS, "max_seq": 37,
                        "clock": "monotonic"})


def sc_straggler_two_hosts(out):
    """the same job on two hosts whose CLOCK_MONOTONIC differ by ~3 hours and
    whose wall clocks disagree by 250 ms: aligned at the init, the same numbers"""
    ranks, wid = exact_job("straggler2h", 4, host_of=lambda r: "node%d" % (r // 2),
                           mono_shift=lambda h: 3 * 3600 * 10**9 + 123_456_789 if h == "node1" else 0,
                           real_skew=lambda h: 0.25 if h == "node1" else 0.0)
    straggler_steps(ranks, lambda r: 0, 3)
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [straggler_expect(wid, clock="init")], count=1, args=LOW_FLOOR)


def sc_straggler_subcomm(out):
    """8 ranks, TP groups of 4: rank 5 enters its TP all-reduces 20 ms late
    (40 steps), every world all-reduce on time: one finding, on TP {4-7}"""
    ranks, wid = exact_job("stragglertp", 8)
    tp = [[0, 1, 2, 3], [4, 5, 6, 7]]
    for r in ranks:
        r.tp = r.split(0, 1, r.rank // 4, tp[r.rank // 4])
    for i in range(40):
        for r in ranks:
            on_time = [k for k in tp[r.rank // 4] if k != 5]
            lat = 20 * MS if r.rank == 5 else rotating(on_time.index(r.rank), i, len(on_time))
            r.coll(r.tp, count=4096, site="tp_forward", at=r.at(step_time(i) + lat))
        for r in ranks:
            r.coll(0, count=1 << 16, site="dp_allreduce_grads", at=r.at(step_time(i) + 50 * MS + rotating(r.rank, i, 8)))
    for r in ranks:
        r.finish()
    write(ranks, out)
    tp1 = ranks[4].comms[ranks[4].tp]["id"]
    expect(out, 1, [F("straggler", tp1, 1, [5], "tp_forward", others=[4, 6, 7], comm_ranks=[4, 5, 6, 7],
                      root_cause=False, examined=40, last=40, lateness_median_ns=20 * MS,
                      lateness_max_ns=20 * MS, jitter_ns=1 * MS, clock="monotonic", also_comms=[])], count=1,
           args=LOW_FLOOR)


def sc_straggler_node(out):
    """8 ranks on two hosts, DP pairs across them: every rank of node1 (4-7)
    enters every collective 20 ms late: one finding for the four ranks on the
    world communicator, the DP pairs listed as the same finding"""
    ranks, wid = exact_job("stragglernode", 8, host_of=lambda r: "node%d" % (r // 4),
                           mono_shift=lambda h: 7_000_000_000_000 if h == "node1" else 0)
    dp = [[0, 4], [1, 5], [2, 6], [3, 7]]
    for r in ranks:
        r.dp = r.split(0, 1, r.rank % 4, dp[r.rank % 4])
    for i in range(30):
        for comm, off in ((lambda r: r.dp, 0), (lambda r: 0, 40 * MS)):
            for r in ranks:
                lat = off + (20 * MS if r.rank >= 4 else 0) + (r.rank % 4) * 100_000 * ((i % 2) * 2 - 1)
                r.coll(comm(r), count=4096, site="train_step", at=r.at(step_time(i) + lat))
    for r in ranks:
        r.finish()
    write(ranks, out)
    dps = [ranks[k].comms[ranks[k].dp]["id"] for k in range(4)]
    # the latest of them is 20.15 ms behind the others' median in every step: first at world #1
    expect(out, 1, [F("straggler", wid, 1, [4, 5, 6, 7], others=[0, 1, 2, 3], root_cause=False, examined=30,
                      last=30, clock="init", also_comms=sorted(dps))], count=1, args=LOW_FLOOR)


def jitter_job(name, seed, steps=60, jitter=2 * MS, spike=None):
    """8 ranks, TP groups of 4: per step two TP all-reduces and a world
    all-reduce, each rank entering at the due time + uniform(-jitter, +jitter);
    spike: (probability, ns) that a rank is that much later once"""
    rnd = random.Random(seed)
    ranks, wid = exact_job(name, 8)
    tp = [[0, 1, 2, 3], [4, 5, 6, 7]]
    for r in ranks:
        r.tp = r.split(0, 1, r.rank // 4, tp[r.rank // 4])
    for i in range(steps):
        for k, (comm, site) in enumerate(((lambda r: r.tp, "tp_forward"), (lambda r: r.tp, "tp_backward"),
                                          (lambda r: 0, "dp_allreduce_grads"))):
            for r in ranks:
                lat = rnd.randint(-jitter, jitter)
                if spike and rnd.random() < spike[0]:
                    lat += spike[1]
                r.coll(comm(r), count=4096, site=site, at=r.at(step_time(i) + k * 30 * MS + lat))
    for r in ranks:
        r.finish()
    return ranks, wid


def seeded(fn, *args):
    """fn(out, *args) as a scenario, with fn's description"""
    def sc(out):
        fn(out, *args)
    sc.__doc__ = fn.__doc__
    return sc


def sc_straggler_jitter(out, seed, args=LOW_FLOOR):
    """healthy: +-2 ms random jitter on every rank (seed): no straggler"""
    ranks, wid = jitter_job("jitter%d" % seed, seed)
    write(ranks, out)
    expect(out, 0, [], args=list(args))


def sc_straggler_noisy(out, seed):
    """healthy but noisy: +-8 ms jitter and 5% of entries 60 ms late on any
    rank (seed): no straggler"""
    ranks, wid = jitter_job("noisy%d" % seed, seed, jitter=8 * MS, spike=(0.05, 60 * MS))
    write(ranks, out)
    expect(out, 0, [], args=LOW_FLOOR)


def sc_straggler_one_slow(out):
    """rank 3 is 500 ms late in one all-reduce of 50 (+-2 ms jitter
    otherwise): a slow collective, not a straggler"""
    rnd = random.Random(7)
    ranks, wid = exact_job("oneslow", 4)
    for i in range(50):
        for r in ranks:
            lat = rnd.randint(-2 * MS, 2 * MS) + (500 * MS if (r.rank == 3 and i == 20) else 0)
            r.coll(0, count=1 << 16, at=r.at(1_000_000_000_000 + (i + 1) * 1000 * MS + lat))
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 0, [], args=LOW_FLOOR)


def sc_straggler_in_hang(out):
    """rank 3 is 30 ms late on each of 40 all-reduces; then rank 1 exits
    early and the others hang in #41: the hang's root cause first, the
    straggler after it, not a root cause"""
    ranks, wid = exact_job("stragglerhang", 4)
    for i in range(41):
        for r in ranks:
            if i == 40 and r.rank == 1:
                continue
            lat = 30 * MS if r.rank == 3 else rotating(r.rank, i)
            r.coll(0, count=1 << 16, returned=i < 40, at=r.at(step_time(i) + lat))
    for r in ranks:
        if r.rank == 1:
            r.finish("exit")
        else:
            r.finish("signal", 15)
    write(ranks, out)
    expect(out, 1, [F("missing", wid, 41, [1], root_cause=True),
                    F("straggler", wid, 1, [3], others=[0, 1, 2], root_cause=False, examined=40, last=40,
                      lateness_median_ns=30 * MS)], count=2, args=LOW_FLOOR)



# ---------------------------------------------------------------- completion, ring windows, fingerprints
def tracked_job(name, n):
    """world_job whose shim observes completion: every returned call is gpu
    "done" unless a call says otherwise"""
    ranks, wid = world_job(name, n)
    for r in ranks:
        r.track = True
    return ranks, wid


def pending_of(r, comm, seq):
    """pending_s of r's collective (comm, seq) as tranalyze computes it: from
    its enqueue (the host call's return) to the trace's write, in seconds"""
    c = [c for c in r.calls if c[1] == comm and c[2] == seq and c[0] in COLL][0]
    write_time = 1767000100.0 + (r.t - r.mono_base) / 1e9 + r.write_extra
    return round(write_time - (r.clock_real + (c[15] - r.mono_base) / 1e9), 3)


def stuck_at(comm, seq, states):
    """expected stuck_at: states {rank: (state, pending_s or None)}"""
    return {"comm": comm, "seq": seq,
            "members": {str(k): {"state": v[0], "pending_s": v[1]} for k, v in states.items()}}


def sc_blocked_vs_never(out):
    """rank 2 never reaches AllReduce #7 (stuck outside NCCL); ranks 0, 1, 3
    issued it and are blocked inside it: enqueued, not complete on the GPU
    for 312.5, 311.25 and 300 s at their traces' last write"""
    ranks, wid = tracked_job("blocked", 4)
    for step in range(6):
        for r in ranks:
            r.coll(0, count=1 << 20, site="train_step")
    pending = {0: 312.5, 1: 311.25, 3: 300.0}
    for r in ranks:
        if r.rank != 2:
            r.coll(0, count=1 << 20, site="train_step", gpu="pending")
            r.write_extra = pending[r.rank] - 100.0     # the write is that long after the enqueue
    killed(ranks)
    write(ranks, out)
    st = {0: ("blocked_inside", 312.5), 1: ("blocked_inside", 311.25), 2: ("never_issued", None),
          3: ("blocked_inside", 300.0)}
    expect(out, 1, [F("missing", wid, 7, [2], others=[0, 1, 3], others_function="train_step",
                      stuck=stuck_at(wid, 7, st))], count=1,
           text_contains=["blocked inside it: ranks 0, 1, 3 (enqueued on the GPU, not complete for 300.0-312.5 s)",
                          "never issued it: rank 2"])


def sc_extra_pending(out):
    """rank 0 issues an extra AllReduce #12 (log_metrics) that the others
    meet with their gradient all-reduce: every rank issued a #12 and is
    blocked inside it (rank 0 also has #13 queued behind it); none never
    issued #12: the root cause is rank 0's extra call"""
    ranks, wid = tracked_job("extrapending", 4)
    for step in range(11):
        for r in ranks:
            r.coll(0, count=1 << 20, site="train_step")
    for r in ranks:
        if r.rank == 0:
            r.coll(0, count=1, site="log_metrics", gpu="pending")
        r.coll(0, count=1 << 20, site="train_step", gpu="pending")
        r.write_extra = 20.0 * (r.rank + 1)
    killed(ranks)
    write(ranks, out)
    st = {r.rank: ("blocked_inside", pending_of(r, 0, 12)) for r in ranks}
    expect(out, 1, [F("divergence", wid, 12, [0], "log_metrics", subkind="extra_call", others=[1, 2, 3],
                      stuck=stuck_at(wid, 12, st))], count=1,
           text_contains=["blocked inside it: ranks 0-3"])


def sc_blocked_elsewhere(out):
    """a world communicator and a pair {0, 1}; ranks 0 and 1 issued pair
    AllReduce #5, which never completes on the GPU (a fault below NCCL's
    calls: both issued it with the same arguments), and never reach world
    #6, where ranks 2 and 3 wait: ranks 0, 1 never issued #6, and the message
    says they are themselves blocked inside pair #5"""
    ranks, wid = tracked_job("elsewhere", 4)
    for r in ranks:
        r.pair = r.split(0, 1, 0 if r.rank < 2 else 1, [0, 1] if r.rank < 2 else [2, 3])
    for step in range(5):
        for r in ranks:
            r.coll(0, count=1 << 16, site="allreduce_grads")
            if r.rank < 2:
                r.coll(r.pair, count=1 << 10, site="pair_exchange", gpu="pending" if step == 4 else None)
    for r in ranks:
        if r.rank >= 2:
            r.coll(0, count=1 << 16, site="allreduce_grads", gpu="pending")
        r.write_extra = 50.0
    killed(ranks)
    write(ranks, out)
    st = {0: ("never_issued", None), 1: ("never_issued", None), 2: ("blocked_inside", pending_of(ranks[2], 0, 6)),
          3: ("blocked_inside", pending_of(ranks[3], 0, 6))}
    expect(out, 1, [F("missing", wid, 6, [0, 1], others=[2, 3], stuck=stuck_at(wid, 6, st),
                      message_contains=["enqueued on the GPU and not complete 150.0 s later"])], count=1)


def sc_clean_windows(out, tracked=False, base=1, name="cleanwin"):
    """a clean job whose rings lost 0, 100, 250 and 100 of their oldest
    calls: the windows start at different seqs of every communicator and cut
    send/recv sequences and groups (rank 0's configuration sends to rank 2
    are older than all of rank 2's window); nothing is missing: no finding.
    Without completion data: the replay alone must see that. base: the seq
    of the first collective of each communicator"""
    ranks, wid = (tracked_job if tracked else world_job)(name, 4)
    for r in ranks:
        r.dp = r.split(0, 1, r.rank % 2, [0, 2] if r.rank % 2 == 0 else [1, 3])
        r.colls[0] = r.colls[r.dp] = base - 1
    for r in ranks:
        for peer in (1, 2, 3):
            if r.rank == 0:
                r.sendrecv(0, "Send", peer, count=64, site="send_config")
            elif r.rank == peer:
                r.sendrecv(0, "Recv", 0, count=64, site="recv_config")
    for step in range(60):
        for r in ranks:
            r.coll(0, count=1 << 16, site="allreduce_grads")
            r.coll(r.dp, count=1 << 12, site="dp_allreduce")
            r.group_start()
            r.sendrecv(0, "Send", (r.rank + 1) % 4, site="ring_exchange")
            r.sendrecv(0, "Recv", (r.rank - 1) % 4, site="ring_exchange")
            r.group_end()
        for k in range(step % 3):
            for r in ranks:
                if r.rank == 0:
                    r.sendrecv(0, "Send", 1, count=16, site="send_metrics")
                elif r.rank == 1:
                    r.sendrecv(0, "Recv", 0, count=16, site="recv_metrics")
        for r in ranks:
            r.coll(0, op="Broadcast", count=4, root=0, site="sync_step")
    for r, lost in zip(ranks, (0 if base == 1 else 10, 100, 250, 100)):
        r.ring_lost = lost
        r.ring_capacity = len(r.calls) - lost
        r.finish()
    write(ranks, out)
    expect(out, 0, [], **({"max_rss_mib": 32} if base > 1 else {}))


def sc_clean_windows_tracked(out):
    """clean_windows with completion observed (every call gpu done)"""
    sc_clean_windows(out, tracked=True)


def sc_clean_windows_10m(out):
    """clean_windows 10,000,000 collectives into the job (the rings keep the
    last few hundred calls, every rank lost some): the per-seq tables start
    at the lowest seq kept, so this costs what 250 seqs cost (max_rss_mib:
    peak RSS, under an address-space limit)"""
    sc_clean_windows(out, base=10_000_000, name="cleanwin10m")


def sc_huge_seq(out):
    """seqs near the top of their range: the world communicator's
    collectives numbered from 2,000,000,000, the DP pairs' up to 2^31-1 (the
    largest seq a trace carries), rings that lost their oldest calls; rank 3
    never issues world #2,000,000,150, the others wait in it. The answer of
    any job, in a few MiB"""
    ranks, wid = world_job("hugeseq", 4)
    for r in ranks:
        r.dp = r.split(0, 1, r.rank % 2, [0, 2] if r.rank % 2 == 0 else [1, 3])
        r.colls[0] = 2_000_000_000 - 1
        r.colls[r.dp] = 2**31 - 1 - 150
    for step in range(150):
        for r in ranks:
            r.coll(0, count=1 << 16, site="allreduce_grads")
            r.coll(r.dp, count=1 << 12, site="dp_allreduce")
    for r in ranks[:3]:
        r.coll(0, count=1 << 16, site="allreduce_grads", returned=False)
    for r, lost in zip(ranks, (20, 35, 50, 20)):
        r.ring_lost = lost
        r.ring_capacity = len(r.calls) - lost
    killed(ranks)
    write(ranks, out)
    last = 2_000_000_150
    st = {0: ("blocked_inside", None), 1: ("blocked_inside", None), 2: ("blocked_inside", None),
          3: ("never_issued", None)}
    expect(out, 1, [F("missing", wid, last, [3], others=[0, 1, 2], stuck=stuck_at(wid, last, st))], count=1,
           max_rss_mib=32)


def sc_dup_comm(out):
    """ranks 0 and 2 of 4 list the world communicator twice in comms (the
    second time at another place) and make calls on both listings; rank 2
    has an extra collective on the second: the repeat is named and ignored
    with its calls (as the ring reader does), ranks 1 and 3 left no trace"""
    wid = cid("world", "dupcomm")
    ranks = [Rank("dupcomm", k, 4) for k in (0, 2)]
    for r in ranks:
        r.init(wid, 4, r.rank)
        r.init(wid, 4, r.rank + 1)
    for step in range(6):
        for r in ranks:
            if r.rank == 2 and step == 4:
                r.coll(1, count=8, site="log_metrics")
            r.coll(0, count=4096)
            r.coll(1, count=4096)
    killed(ranks)
    write(ranks, out)
    expect(out, 1, [F("no_trace", wid, 6, [1, 3])], noted=[r.filename() for r in ranks],
           note_contains="appear twice in comms")


def sc_nan_window_lost(out):
    """float16 all-reduces; the output of #6 overflows to Inf on every rank
    with ranks 0-2's inputs finite; rank 3's ring lost its first 9 calls:
    its #6 (and its input check) lies before its window. Its input is
    unknown, but it did issue #6: "outside its ring window (calls lost)",
    not "never issued it"; cause unknown, rank 3 unchecked"""
    ranks, wid = world_job("nanwinlost", 4)
    for step in range(1, 13):
        for r in ranks:
            o = nonfinite(5, nan=0, inf=1) if step >= 6 else None
            i = nonfinite(0, nan=0, inf=4) if step >= 7 else None
            r.coll(0, count=256, dtype="float16", site="allreduce_grads", out=o, inp=i)
    for r, lost in zip(ranks, (2, 2, 2, 9)):
        r.ring_lost = lost
        r.ring_capacity = len(r.calls) - lost
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("nan", wid, 6, [3], others=[0, 1, 2], cause="unknown", unchecked_inputs=[3], lost=[3],
                      reason_contains=["rank 3's call lies outside its ring window (calls lost)"])], count=1)


def before_window_job(name, lost):
    """400 all-reduces; rank 2 reduces with max instead of sum at #100 (NCCL
    does not check: no hang, wrong numbers); lost[rank]: calls gone from the
    ring"""
    ranks, wid = tracked_job(name, 4)
    for s in range(1, 401):
        for r in ranks:
            r.coll(0, count=1 << 16, redop="max" if (s == 100 and r.rank == 2) else "sum", site="train_step")
    for r in ranks:
        r.ring_lost = lost[r.rank]
        r.ring_capacity = len(r.calls) - r.ring_lost
        r.finish()
    return ranks, wid


def sc_before_window(out):
    """before_window_job, every ring holding #300-#400 only: the calls of the
    divergence are gone; the fingerprints differ first at checkpoint #128
    and agree at #64: a divergence within (64, 128], rank 2"""
    ranks, wid = before_window_job("beforewin", {0: 299, 1: 299, 2: 299, 3: 299})
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, None, [2], subkind="before_window", others=[0, 1, 3],
                      seq_window=[64, 128], fingerprints=[[2], [0, 1, 3]], tie=False)], count=1,
           text_contains=["collectives #65-#128", "TRSHIM_RING"])


def sc_before_window_tie(out):
    """DP pairs {0, 2} and {1, 3} beside the world communicator, 400 steps;
    rank 2 reduces its DP all-reduce #100 with max; the rings hold the last
    200 calls: the DP pair {0, 2} disagrees within (64, 128] and neither side
    is a majority: a tie, rank 0 named first (the lowest rank), and said so"""
    ranks, wid = tracked_job("fptie", 4)
    for r in ranks:
        r.dp = r.split(0, 1, r.rank % 2, [0, 2] if r.rank % 2 == 0 else [1, 3])
    for s in range(1, 401):
        for r in ranks:
            r.coll(0, count=1 << 16, site="allreduce_grads")
            r.coll(r.dp, count=1 << 10, redop="max" if (s == 100 and r.rank == 2) else "sum", site="dp_allreduce")
    for r in ranks:
        r.ring_lost = len(r.calls) - 200
        r.ring_capacity = 200
        r.finish()
    write(ranks, out)
    dp0 = ranks[0].comms[ranks[0].dp]["id"]
    expect(out, 1, [F("divergence", dp0, None, [0], subkind="before_window", others=[2], seq_window=[64, 128],
                      fingerprints=[[0], [2]], tie=True, message_contains=["not clear"])], count=1)


def sc_fp_consistent(out):
    """before_window_job with only rank 0's ring short (#300 on): ranks 1-3
    still hold #100, where the per-call comparison finds rank 2's call; the
    fingerprints agree with it and add nothing"""
    ranks, wid = before_window_job("fpconsistent", {0: 299, 1: 0, 2: 0, 3: 0})
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 100, [2], subkind="different_call", others=[1, 3])], count=1)


def sc_completed_observed(out):
    """rank 1 issues AllReduce #5 on int32 where the others use float32 (the
    same size: NCCL does not check, the collective completes, the numbers
    are wrong): the replay alone would stop at #5; the GPU completed it on
    every rank: no hang, nobody waiting, a divergence, and a note"""
    ranks, wid = tracked_job("obsdone", 4)
    for s in range(1, 11):
        for r in ranks:
            r.coll(0, count=4096, dtype="int32" if (s == 5 and r.rank == 1) else "float32", site="train_step")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 5, [1], subkind="different_call", others=[0, 2, 3], stuck=None)],
           count=1, waiting=[], note_contains="completed on the GPU")


def sc_hang_ring_thinned(out):
    """rank 2 stops after #3100 (stuck outside NCCL); ranks 0, 1, 3 ran ahead
    on the host and enqueued #3101-#3140, pending behind #3101; rings of
    1000 records: windows from #2101 (rank 2) and #2141 (the others), the
    calls cycling through three kinds; fingerprints thinned differently
    (step 64 on rank 2, 128 on the others): rank 2 never issued #3101, the
    others are blocked inside it, and no fingerprint finding"""
    ranks, wid = tracked_job("thinned", 4)
    kinds = [dict(count=1 << 16, site="allreduce_grads"), dict(count=8, site="allreduce_loss"),
             dict(op="Broadcast", count=4, root=0, site="sync_step")]
    for s in range(1, 3141):
        for r in ranks:
            if r.rank == 2 and s > 3100:
                continue
            r.coll(0, gpu="pending" if s > 3100 else None, **kinds[s % 3])
    for r in ranks:
        r.ring_capacity = 1000
        r.ring_lost = len(r.calls) - 1000
        r.write_extra = 200.0
    killed(ranks)
    write(ranks, out)
    st = {r.rank: ("blocked_inside", pending_of(r, 0, 3101)) for r in ranks if r.rank != 2}
    st[2] = ("never_issued", None)
    expect(out, 1, [F("missing", wid, 3101, [2], others=[0, 1, 3], stuck=stuck_at(wid, 3101, st))], count=1)

# ---------------------------------------------------------------- Python stacks (issue 7)
# Every Python-issued collective has the same native stack (the interpreter
# loop, then torch's C++ down to ncclAllReduce): NATIVE below, on every call.
NATIVE, NATIVE_CALLER = "c10d_allreduce", "pyeval_frame"
PY_GRAD = py_all_reduce((PY_JOB, "train_step", 212)) + PY_MAIN
# `if rank == 0: log_metrics(loss)`, log_metrics decorated with a context
# manager of the standard library (a folded frame between the user's frames)
PY_METRIC = py_all_reduce((PY_STDLIB + "contextlib.py", "ContextDecorator.__call__.<locals>.inner", 81),
                          (PY_JOB, "log_metrics", 198), (PY_JOB, "train_step", 214)) + PY_MAIN


def native_site(site):
    """tranalyze's native call site of site (its module is not on this machine)"""
    return "%s (train+0x%x)" % (site, site_offset(site) + 0x2b)


def py_json(frames):
    return [{"file": f, "function": q, "line": n} for f, q, n in frames]


def py_extra_job(name, python=lambda r: True, natives=(NATIVE, NATIVE), metric=PY_METRIC, steps=6):
    """4 ranks; in step 2 rank 0 also runs log_metrics: an all_reduce of the
    same size as the gradient all_reduce (NCCL matches it with the others'
    next call); the job ends with rank 0 waiting in its last all_reduce
    (#7), the others exited. python(r): r has Python stacks; natives: the
    native sites of the gradient and the metric all_reduce"""
    ranks, wid = world_job(name, 4)
    for r in ranks:
        if python(r):
            r.enable_python()
    for step in range(steps):
        for r in ranks:
            if step == 2 and r.rank == 0:
                r.coll(0, count=4096, site=natives[1], caller=NATIVE_CALLER, py=metric)
            r.coll(0, count=4096, site=natives[0], caller=NATIVE_CALLER, py=PY_GRAD)
    for r in ranks:
        if r.rank == 0:
            r.finish("signal", 15)
        else:
            r.finish("exit")
    return ranks, wid


def sc_py_extra_collective(out):
    """`if rank == 0: log_metrics()` in a Python training loop: an extra
    all_reduce of the gradient's size, with the same native stack as every
    other call; only the Python lines differ: rank 0's AllReduce #3 from
    train.py:198 in log_metrics (frames in torch/ and the standard library
    folded)"""
    ranks, wid = py_extra_job("pyextra")
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 3, [0], "log_metrics", subkind="extra_call", others=[1, 2, 3],
                      others_function="train_step", site="train.py:198 in log_metrics",
                      others_site="train.py:212 in train_step", python_stack=py_json(PY_METRIC),
                      native_site=native_site(NATIVE))],
           stopped_at={"comm": wid, "seq": 7}, text_contains=["at train.py:198 in log_metrics"])


def sc_py_full_stacks(out):
    """py_extra_collective with --full-stacks: the call sites show every
    Python frame, innermost first (the folded ones too), then the native site"""
    ranks, wid = py_extra_job("pyfull")
    write(ranks, out)
    full = " <- ".join("%s:%d in %s" % (os.path.basename(f), n, q) for f, q, n in PY_METRIC)
    full += "; native: " + native_site(NATIVE)
    expect(out, 1, [F("divergence", wid, 3, [0], "log_metrics", subkind="extra_call", others=[1, 2, 3],
                      site=full, python_stack=py_json(PY_METRIC))],
           stopped_at={"comm": wid, "seq": 7}, args=["--full-stacks"],
           text_contains=["distributed_c10d.py:2050 in all_reduce <- c10d_logger.py:83 in "
                          "_exception_logger.<locals>.wrapper <- contextlib.py:81 in "
                          "ContextDecorator.__call__.<locals>.inner <- train.py:198 in log_metrics <- "
                          "train.py:214 in train_step"])


def sc_py_native_only(out):
    """the job of py_extra_collective from an older shim (no Python stacks):
    the native stacks cannot tell the two all_reduces apart, so the extra
    call is not found; rank 0 is left waiting in #7 for ranks that exited
    (what the Python stacks add)"""
    ranks, wid = py_extra_job("pynative", python=lambda r: False)
    write(ranks, out)
    expect(out, 1, [F("missing", wid, 7, [1, 2, 3], NATIVE, others=[0])])


def sc_py_all_folded(out):
    """the extra all_reduce comes from a library's own code (deepspeed's
    progress report on a thread: every frame in site-packages or the
    standard library): the call site is the innermost frame"""
    lib = [(PY_TORCH + "distributed/distributed_c10d.py", "all_reduce", 2050),
           ("/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/engine.py", "DeepSpeedEngine._report", 1874),
           (PY_STDLIB + "threading.py", "Thread.run", 982)]
    ranks, wid = py_extra_job("pyfolded", metric=lib)
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 3, [0], "all_reduce", subkind="extra_call", others=[1, 2, 3],
                      others_function="train_step", site="distributed_c10d.py:2050 in all_reduce",
                      python_stack=py_json(lib))], stopped_at={"comm": wid, "seq": 7})


def sc_py_mixed(out):
    """ranks 0 and 1 have Python stacks, ranks 2 and 3 come from an older
    shim (none); the two all_reduces have different native sites: a pair
    of calls is compared by Python stacks when both have one, else
    natively, and the extra call is found either way"""
    ranks, wid = py_extra_job("pymixed", python=lambda r: r.rank < 2, natives=("train_step", "log_metrics"))
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 3, [0], "log_metrics", subkind="extra_call", others=[1, 2, 3],
                      others_function="train_step", site="train.py:198 in log_metrics",
                      native_site=native_site("log_metrics"))],
           stopped_at={"comm": wid, "seq": 7})


def sc_py_damaged(out):
    """py_mixed's job (native sites differ), every rank with Python stacks,
    each trace's Python data damaged in another way: rank 0 (the culprit) a
    "python" that is not an object, a (folded) file name with a control
    character and bytes that are not UTF-8 in its extra call's stack (shown
    with '?' for each), a 10,000-character function name (cut); rank 1 a
    pycodes entry of the wrong types (its Python stacks are not used); rank
    2 a stack naming a code that does not exist; rank 3 a call naming a
    stack that does not exist. Each is named, the answer is the same"""
    weird = PY_METRIC[:2] + [(PY_TORCH + "weird/BAD\x01NAME.py", "hook", 7)] + PY_METRIC[2:]
    ranks, wid = py_extra_job("pydamaged", natives=("train_step", "log_metrics"), metric=weird)
    ranks[0].pystack([(PY_JOB, "g" * 10000, 2)])
    write(ranks, out)
    names = [r.filename() for r in ranks]

    def edit(k, fn, raw=None):
        path = os.path.join(out, names[k])
        with open(path) as f:
            d = json.load(f)
        fn(d)
        text = json.dumps(d).encode()
        if raw:
            text = text.replace(*raw)
        with open(path, "wb") as f:
            f.write(text)
    edit(0, lambda d: d.update(python="ok"), raw=(b"NAME.py", b"N\xff\xfeME.py"))

    def r1(d):
        d["pycodes"][1] = [7, None, "x"]
    edit(1, r1)

    def r2(d):
        d["pystacks"][0][2] = [len(d["pycodes"]) + 5, 12]
    edit(2, r2)

    def r3(d):
        d["calls"][-2][d["call_fields"].index("pystack")] = len(d["pystacks"]) + 40
    edit(3, r3)
    shown = py_json(weird)
    shown[2]["file"] = PY_TORCH + "weird/BAD?N??ME.py"
    expect(out, 1, [F("divergence", wid, 3, [0], "log_metrics", subkind="extra_call", others=[1, 2, 3],
                      others_function="train_step", site="train.py:198 in log_metrics", python_stack=shown)],
           stopped_at={"comm": wid, "seq": 7}, noted=names,
           notes_contain=[[names[0], "field python is not an object"],
                          [names[1], "pycodes[1] is not a [file, qualname, firstlineno]"],
                          [names[2], "damaged Python stack(s) not used (first: pystacks[0]"],
                          [names[3], "1 call record(s) name a Python stack that is not in pystacks"]])


def sc_py_oom(out):
    """oom with Python stacks: rank 1's allocation from model.py's forward
    fails; the peak was reached in the same place"""
    fwd = [(PY_TORCH + "nn/modules/module.py", "Module._call_impl", 1511),
           ("/job/llm/model.py", "Block.forward", 88)] + [(PY_JOB, "train_step", 205)] + PY_MAIN
    ranks, wid = world_job("pyoom", 4)
    for r in ranks:
        r.enable_python()
    oom_seq = None
    for step in range(3):
        for r in ranks:
            if r.rank == 1 and step == 2:
                r.alloc(40 << 30, site="caching_alloc", fail=True, capacity=80 << 30, py=fwd)
                continue
            r.alloc(1 << 20, site="caching_alloc", py=fwd)
            s = r.coll(0, count=1 << 16, site=NATIVE, caller=NATIVE_CALLER, py=PY_GRAD)
            if step == 2:
                oom_seq = s
    for r in ranks:
        r.finish("exit" if r.rank == 1 else "signal", None if r.rank == 1 else 15)
    write(ranks, out)
    expect(out, 1, [F("oom", wid, 2, [1], "Block.forward", bytes=40 << 30, site="model.py:88 in Block.forward",
                      python_stack=py_json(fwd), native_site=native_site("caching_alloc"),
                      message_contains=["failed at model.py:88 in Block.forward"]),
                    F("missing", wid, oom_seq, [1])])


def py_auto(fn):
    """fn(out) as a scenario whose every call, allocation and init has a
    Python stack made from its native site (py_auto_frames): the same
    answer, each expected function's call site now the Python one"""
    def sc(out):
        global PY_AUTO
        PY_AUTO = True
        try:
            fn(out)
        finally:
            PY_AUTO = False
        path = os.path.join(out, "expected.json")
        with open(path) as f:
            e = json.load(f)
        for x in e["findings"]:
            if "function" in x:
                x.setdefault("site", py_site(x["function"]))
            if "others_function" in x:
                x.setdefault("others_site", py_site(x["others_function"]))
        with open(path, "w") as f:
            json.dump(e, f, indent=1)
    sc.__doc__ = "with Python stacks (py_auto): " + (fn.__doc__ or "")
    return sc



# ---------------------------------------------------------------- issue 13
# *Config collectives, one-sided signals, GroupSimulateEnd, ncclCommGrow,
# ncclCommSuspend, NCCL functions trshim does not know.
CFG4 = {"maxCTAs": 4}
CFG8 = {"maxCTAs": 8}
NCCL_LIB = "/usr/lib/x86_64-linux-gnu/libnccl.so.2"


def v13_job(name, n):
    """world_job of a newer shim: the issue 13 fields, an NCCL library without unknown functions"""
    ranks, wid = world_job(name, n)
    for r in ranks:
        r.use_v13()
        r.nccl = {"version": 23203, "library": NCCL_LIB, "exports": 193, "unknown_functions": []}
    return ranks, wid


def config_extra_job(name, plain=False, sites=("log_metrics", "train_step")):
    """4 ranks; in step 3 rank 1 issues one extra collective through
    ncclAllReduceConfig (maxCTAs=4) (plain: through ncclAllReduce); rank 2
    issues every gradient all-reduce through the *Config entry point with a
    NULL config, the others the plain one (mixing is legal); the job is
    stopped by SIGTERM"""
    ranks, wid = v13_job(name, 4)
    for step in range(5):
        for r in ranks:
            if step == 3 and r.rank == 1:
                r.coll(0, count=1, site=sites[0], caller=sites[1], config=None if plain else CFG4)
            r.coll(0, count=1 << 20, site=sites[1], caller=sites[1], config="null" if r.rank == 2 and not plain else None)
    killed(ranks)
    return ranks, wid


def config_extra_expect(wid, plain=False):
    w = F("divergence", wid, 4, [1], "log_metrics", others=[0, 2, 3], subkind="extra_call",
          others_function="train_step", entry_point="ncclAllReduce" if plain else "ncclAllReduceConfig",
          config=None if plain else {"state": "set", "text": "maxCTAs=4", "maxCTAs": 4})
    if not plain:
        w["message_contains"] = ["AllReduce(1 x float32, sum) via ncclAllReduceConfig (maxCTAs=4) #4"]
    return w


def sc_config_extra(out):
    """rank 1 issues one extra collective through ncclAllReduceConfig
    (maxCTAs=4); rank 2 issues its gradient all-reduces through
    ncclAllReduceConfig with a NULL config: diagnosed exactly like
    config_extra_plain (the same culprit, seq and call site), the entry
    point and config named"""
    ranks, wid = config_extra_job("cfgextra")
    write(ranks, out)
    expect(out, 1, [config_extra_expect(wid)], text_contains=["via ncclAllReduceConfig (maxCTAs=4)"])


def sc_config_extra_plain(out):
    """config_extra's job with every call through the plain entry points"""
    ranks, wid = config_extra_job("cfgextra", plain=True)
    write(ranks, out)
    expect(out, 1, [config_extra_expect(wid, plain=True)])


def sc_config_mismatch(out):
    """every rank issues its gradient all-reduce through ncclAllReduceConfig;
    rank 3 passes maxCTAs=8 where the others pass maxCTAs=4 (from step 2
    on); rank 0 issues its first two plain (legal). Nothing hangs: one
    divergence / config at the first seq where the configs differ"""
    ranks, wid = v13_job("cfgmismatch", 4)
    for step in range(5):
        for r in ranks:
            cfg = None if (r.rank == 0 and step < 2) else CFG8 if (r.rank == 3 and step >= 2) else CFG4
            r.coll(0, count=1 << 16, site="train_step", config=cfg)
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 3, [3], "train_step", others=[0, 1, 2], subkind="config",
                      config={"state": "set", "text": "maxCTAs=8", "maxCTAs": 8},
                      message_contains=["NCCL requires the same configuration on every rank"])], count=1)


def signal_job(name, steps=4, skip=(2, 3), sites=("send_activations", "send_ready", "wait_activations",
                                                        "wait_ready", "train_step")):
    """4 ranks; per step a one-sided exchange on the world communicator
    (rank 0 puts activations into rank 1, rank 2 signals rank 3; each waiter
    waits for one signal), then a world all-reduce. skip: (rank, step) whose
    signal is left out; then the job is stopped by SIGTERM"""
    ranks, wid = v13_job(name, 4)
    put, sig, wput, wsig, coll = sites
    for step in range(steps):
        for r in ranks:
            if r.rank == 0:
                r.put_signal(0, 1, count=4096, site=put)
            elif r.rank == 2 and skip != (2, step):
                r.signal(0, 3, site=sig)
            elif r.rank == 1:
                r.wait_signal(0, [(0, 1)], site=wput)
            elif r.rank == 3:
                r.wait_signal(0, [(2, 1)], site=wsig)
        for r in ranks:
            r.coll(0, count=1 << 16, site=coll)
    killed(ranks)
    return ranks, wid


def signal_expect(wid, send="send_ready", wait="wait_ready"):
    return F("signal", wid, 4, [2], send, others=[3], subkind="never_sent", others_function=wait,
             signal={"waited": 4, "sent": 3},
             message_contains=["rank 3 waits in WaitSignal(1 signal from 2) #4",
                               "rank 2 sent only 3 signals to rank 3 on that communicator", "it never sent signal #4"])


def sc_signal_missing(out):
    """rank 2 skips its ncclSignal to rank 3 in step 3: rank 3 waits for
    signal #4 from rank 2 forever, its all-reduce queued behind the wait on
    its stream, and ranks 0-2 wait in that all-reduce: rank 2, which never
    sent signal #4, is the culprit"""
    ranks, wid = signal_job("sigmissing")
    write(ranks, out)
    expect(out, 1, [signal_expect(wid)],
           text_contains=["signal / never_sent", "on comm %s (ranks 0-3), signal #4" % wid])


def sc_signal_never(out):
    """rank 1 waits for a signal from rank 0, which never signals it at all
    (it signalled rank 2 instead); rank 0 exits: the culprit is rank 0"""
    ranks, wid = v13_job("signever", 4)
    for step in range(2):
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step")
    for r in ranks:
        if r.rank == 0:
            r.signal(0, 2, site="send_ready")
        elif r.rank == 2:
            r.wait_signal(0, [(0, 1)], site="wait_ready")
        elif r.rank == 1:
            r.wait_signal(0, [(0, 1)], site="wait_from_zero")
    for r in ranks:
        r.finish("exit" if r.rank == 0 else "signal", None if r.rank == 0 else 15)
    write(ranks, out)
    expect(out, 1, [F("signal", wid, 1, [0], others=[1], subkind="never_sent", others_function="wait_from_zero",
                      signal={"waited": 1, "sent": 0},
                      message_contains=["rank 0 never sent a signal to rank 1 on that communicator"])])


def v13_clean_job(name):
    """a clean job using every new operation and entry point: PutSignal,
    Signal, a WaitSignal of two descriptors, signals and waits inside a
    group, a group closed by GroupSimulateEnd (its calls never issued: seq
    0, only on rank 0, with a collective and a send nobody matches), the
    *Config collectives with the same config on every rank (and plain on
    some), a suspended and resumed communicator"""
    ranks, wid = v13_job(name, 4)
    for r in ranks:
        r.track = True
    for step in range(4):
        for r in ranks:
            # ring of signals: each rank puts into the next and signals the one after
            r.put_signal(0, (r.rank + 1) % 4, count=256, site="put_halo", sig_idx=1)
            r.signal(0, (r.rank + 2) % 4, site="signal_ready", ctx=1)
        for r in ranks:
            r.wait_signal(0, [((r.rank - 1) % 4, 1), ((r.rank - 2) % 4, 1)], site="wait_halo", sig_idx=1)
        for r in ranks:      # a symmetric exchange in a group
            r.group_start(site="exchange")
            r.put_signal(0, r.rank ^ 1, count=64, site="exchange")
            r.wait_signal(0, [(r.rank ^ 1, 1)], site="exchange")
            r.group_end(site="exchange")
        if step == 1:
            ranks[0].group_start_simulated(site="plan")
            ranks[0].coll(0, count=7, site="plan")
            ranks[0].sendrecv(0, "Send", 3, count=9, site="plan")
            ranks[0].group_end(site="plan", simulate=True)
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step", config=CFG4 if r.rank != 1 else None)
            r.coll(0, op="AllGather", count=128, site="gather_stats", config={"algSelection": "ring", "minCTAs": 2})
        if step == 2:
            for r in ranks:
                r.suspend(0)
                r.resume(0)
    for r in ranks:
        r.finish()
    return ranks, wid


def sc_v13_clean(out):
    """every new operation and entry point (v13_clean_job), all matched: no finding"""
    ranks, wid = v13_clean_job("v13clean")
    write(ranks, out)
    expect(out, 0, [])


def sc_group_simulate(out):
    """rank 0 plans a group with ncclGroupSimulateEnd: an all-reduce of
    another size and a send to rank 1 that nobody receives, never issued
    (seq 0); the real collectives after it match: no finding"""
    ranks, wid = v13_job("groupsim", 4)
    for step in range(3):
        if step == 1:
            r = ranks[0]
            r.group_start_simulated(site="plan_bucket")
            r.coll(0, count=3, site="plan_bucket")
            r.sendrecv(0, "Send", 1, count=5, site="plan_bucket")
            r.put_signal(0, 2, count=5, site="plan_bucket")
            r.group_end(site="plan_bucket", simulate=True)
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 0, [])


def grow_job(name, old=4, new=2, job_var=True, absent=()):
    """`old` ranks on a world communicator grow it by `new` ranks
    (ncclCommGrow): rank 0 is the root (it recorded the uniqueId), the new
    processes join through it (their world size the grown one). job_var:
    every process has the job variable; else the new ones take their job id
    from the grown communicator (source "comm")"""
    n = old + new
    ranks = [Rank(name, r, old if r < old else n, host="node%d" % (r // 8)) for r in range(n)]
    wid = cid("world", name)
    uid = cid("growuid", name)
    for r in ranks:
        r.use_v13()
        if r.rank < old:
            r.init(wid, old, r.rank)
        else:
            r.t += 2_000_000      # they start later
            if not job_var:
                r.job, r.job_source = uid, "comm"
    for step in range(2):
        for r in ranks[:old]:
            r.coll(0, count=4096, site="train_step")
    for r in ranks:
        if r.rank not in absent:
            r.gc = r.grow(0 if r.rank < old else None, uid, n, r.rank, root=r.rank == 0, returned=not absent)
    return ranks, wid, ranks[0].comms[ranks[0].gc]["id"]


def sc_grow_extra(out):
    """after the grow, new rank 4 issues an extra all-reduce on the grown
    communicator (log_metrics) in step 1: compared with old and new ranks
    alike (the new ranks' communicators take the old ranks' positions), an
    extra_call of rank 4 at #2"""
    ranks, wid, gid = grow_job("growextra")
    for step in range(4):
        for r in ranks:
            if r.rank == 4 and step == 1:
                r.coll(r.gc, count=1, site="log_metrics")
            r.coll(r.gc, count=8192, site="train_step_grown")
    killed(ranks)
    write(ranks, out)
    expect(out, 1, [F("divergence", gid, 2, [4], "log_metrics", others=[0, 1, 2, 3, 5], subkind="extra_call",
                      others_function="train_step_grown")])


def sc_grow_init_hang(out):
    """old rank 3 never calls ncclCommGrow: ranks 0-2 and the new ranks 4-5
    wait inside the grow: the init finding names rank 3 (a member of the
    parent communicator without the grown one)"""
    ranks, wid, gid = grow_job("growinit", absent=(3,))
    killed(ranks)
    write(ranks, out)
    expect(out, 1, [F("init", gid, 0, [3], others=[0, 1, 2, 4, 5])])


def sc_grow_clean(out):
    """4 ranks grow the world to 6 (ncclCommGrow); the new ranks' job id
    comes from the grown communicator; every collective of the grown
    communicator matches across old and new ranks: no finding"""
    ranks, wid, gid = grow_job("growclean", job_var=False)
    for step in range(3):
        for r in ranks:
            r.coll(r.gc, count=8192, site="train_step_grown")
    for r in ranks:
        r.finish()
    write(ranks, out)
    expect(out, 0, [], job="growclean", grown={"comm": gid, "ranks": [0, 1, 2, 3, 4, 5]})


def sc_grow_missing(out):
    """after the grow, new rank 5 exits before the grown communicator's
    collective #3; the others (old and new) wait in it: rank 5 never issued
    it, on the joined communicator of 6 ranks"""
    ranks, wid, gid = grow_job("growmiss")
    for step in range(3):
        for r in ranks:
            if r.rank == 5 and step == 2:
                continue
            r.coll(r.gc, count=8192, site="train_step_grown")
    for r in ranks:
        r.finish("exit" if r.rank == 5 else "signal", None if r.rank == 5 else 15)
    write(ranks, out)
    expect(out, 1, [F("missing", gid, 3, [5], others=[0, 1, 2, 3, 4], comm_ranks=[0, 1, 2, 3, 4, 5],
                      others_function="train_step_grown")])


def suspend_job(name):
    """4 ranks with a world and a training communicator (a split, every
    rank); completion observed. The training communicator's last two
    collectives are still "pending" (its events are no longer looked at),
    then every rank suspends it"""
    ranks, wid = v13_job(name, 4)
    for r in ranks:
        r.track = True
        r.tc = r.split(0, 1, 0, [0, 1, 2, 3], site="setup_train")
    for step in range(4):
        for r in ranks:
            r.coll(r.tc, count=1 << 16, site="train_step", gpu="pending" if step >= 2 else None)
    for r in ranks:
        r.suspend(r.tc)
    return ranks, wid, ranks[0].comms[ranks[0].tc]["id"]


def sc_suspend_pending(out):
    """the training communicator is suspended with operations still
    "pending" on it; then rank 3 exits before world all-reduce #3 and the
    others wait in it: the culprit is rank 3, and the ranks waiting are
    0-2 only (a pending operation on a suspended communicator is no wait)"""
    ranks, wid, tid = suspend_job("susppend")
    for step in range(3):
        for r in ranks:
            if r.rank == 3 and step == 2:
                continue
            r.coll(0, count=1024, site="rollout_sync", gpu="pending" if step == 2 else None)
    for r in ranks:
        r.finish("exit" if r.rank == 3 else "signal", None if r.rank == 3 else 15)
    write(ranks, out)
    expect(out, 1, [F("missing", wid, 3, [3], others=[0, 1, 2], others_function="rollout_sync",
                      stuck=stuck_at(wid, 3, {0: ("blocked_inside", pending_of(ranks[0], 0, 3)),
                                              1: ("blocked_inside", pending_of(ranks[1], 0, 3)),
                                              2: ("blocked_inside", pending_of(ranks[2], 0, 3)),
                                              3: ("never_issued", None)}))],
           waiting=[0, 1, 2])


def sc_suspend_rollout(out):
    """a live snapshot of a reinforcement-learning job: rank 0 resumed the
    training communicator and waits in its collective #5; ranks 1-3 still
    have it suspended (rolling out): no finding, a note"""
    ranks, wid, tid = suspend_job("susproll")
    r0 = ranks[0]
    r0.resume(r0.tc)
    r0.coll(r0.tc, count=1 << 16, site="sync_weights", gpu="pending")
    for r in ranks:
        r.finish("snapshot", 10)
    write(ranks, out)
    expect(out, 0, [], note_contains="suspended (ncclCommSuspend)")


def sc_suspend_killed(out):
    """as suspend_rollout, but the job was then stopped by SIGTERM: ranks
    1-3 never resumed the communicator: missing / suspended"""
    ranks, wid, tid = suspend_job("suspkill")
    r0 = ranks[0]
    r0.resume(r0.tc)
    r0.coll(r0.tc, count=1 << 16, site="sync_weights", gpu="pending")
    killed(ranks)
    write(ranks, out)
    expect(out, 1, [F("missing", tid, 5, [1, 2, 3], others=[0], subkind="suspended", others_function="sync_weights",
                      message_contains=["the communicator is suspended on them"],
                      stuck=stuck_at(tid, 5, {0: ("blocked_inside", pending_of(ranks[0], r0.tc, 5)),
                                              1: ("suspended", None), 2: ("suspended", None),
                                              3: ("suspended", None)}))])


def sc_nccl_unknown(out):
    """a clean job whose NCCL exports host functions trshim does not know:
    ranks 0-1 load NCCL 2.33.0 (ncclFoo, ncclBar), ranks 2-3 2.33.1 from
    another path (ncclFoo): one warning per library and version; no
    finding"""
    ranks, wid = v13_job("ncclunknown", 4)
    for r in ranks:
        if r.rank < 2:
            r.nccl = {"version": 23300, "library": NCCL_LIB, "exports": 195, "unknown_functions": ["ncclFoo", "ncclBar"]}
        else:
            r.nccl = {"version": 23301, "library": "/opt/nccl/lib/libnccl.so.2", "exports": 194,
                      "unknown_functions": ["ncclFoo"]}
        r.coll(0, count=16, site="train_step")
        r.finish()
    write(ranks, out)
    expect(out, 0, [], warnings=[
        {"kind": "nccl_unknown_functions", "version": 23300, "library": NCCL_LIB, "functions": ["ncclFoo", "ncclBar"],
         "ranks": [0, 1]},
        {"kind": "nccl_unknown_functions", "version": 23301, "library": "/opt/nccl/lib/libnccl.so.2",
         "functions": ["ncclFoo"], "ranks": [2, 3]}],
        text_contains=["NCCL 2.33.0 (%s) exports ncclFoo and ncclBar, which trshim does not record: calls through them "
                       "are missing" % NCCL_LIB,
                       "NCCL 2.33.1 (/opt/nccl/lib/libnccl.so.2) exports ncclFoo, which trshim does not record"])


def sc_v13_damaged(out):
    """signal_missing's job with the newer fields damaged, one kind per
    rank: rank 0 a coll_configs that is not an array and a signal that is
    not a pair (on an extra group call: that record is skipped); rank 1 a
    call naming config 999 and an "nccl" that is not an object; rank 2 a
    coll_configs entry of the wrong types and an unknown_functions holding
    a number; rank 3 a grow that is not an object and a suspended that is
    not a boolean. Each is named, the answer is the same"""
    ranks, wid = signal_job("v13damaged")
    for r in ranks:
        r.coll(0, count=8, site="train_step", config=CFG4)
    ranks[0].group_start()
    ranks[0].group_end()
    write(ranks, out)
    names = [r.filename() for r in ranks]

    def edit(k, fn):
        path = os.path.join(out, names[k])
        with open(path) as f:
            d = json.load(f)
        fn(d)
        with open(path, "w") as f:
            json.dump(d, f)

    def r0(d):
        d["coll_configs"] = {"maxCTAs": 4}
        d["calls"][-1][d["call_fields"].index("signal")] = [1]
    edit(0, r0)

    def r1(d):
        d["calls"][-1][d["call_fields"].index("config")] = 999
        d["nccl"] = "libnccl"
    edit(1, r1)

    def r2(d):
        d["coll_configs"][0] = {"maxCTAs": "four", "algSelection": 5}
        d["nccl"]["unknown_functions"] = ["ncclFoo", 7]
    edit(2, r2)

    def r3(d):
        d["comms"][0]["grow"] = 5
        d["comms"][0]["suspended"] = "yes"
    edit(3, r3)
    expect(out, 1, [signal_expect(wid)], noted=names,
           notes_contain=[[names[0], "field coll_configs is not an array"],
                          [names[0], "1 call record(s) skipped (first: calls[%d] signal is not a [sigIdx, ctx] pair"
                           % (len(ranks[0].calls) - 1)],
                          [names[1], "1 call record(s) name a config that is not in coll_configs"],
                          [names[1], "field nccl is not an object"],
                          [names[2], "1 damaged config(s) in coll_configs (first: coll_configs[0])"],
                          [names[2], "field nccl.unknown_functions holds something that is not a name"],
                          [names[3], "field comms[0].grow is not an object"],
                          [names[3], "field comms[0].suspended is not a boolean"]])


def sc_packed_damaged(out):
    """extra_collective's job written as version 2 (packed calls and
    checks), next to version-2 traces of ranks 90-95 whose packed calls are
    damaged, one kind each: data not base64, a value of tag 6, a string
    index outside strings, data ending inside a row, a rows count the data
    does not hold, an unknown encoding; and rank 96's, whose packed checks'
    data ends inside a row. Each file is named with what is wrong, never a
    crash, and the job is analysed as without them (the same answer)"""
    sc_extra_collective(out)
    with open(os.path.join(out, "expected.json")) as f:
        exp = json.load(f)
    rewrite_traces(out, lambda d: d.update(pack_trace(d)))
    good = Rank("extra", 90, 4)
    good.init(cid("world", "extra"), 4, 90)
    for _ in range(3):
        good.coll(0, count=1 << 20, site="train_step")
    good.finish("signal", 15)
    doc = pack_trace(good.to_json())
    data = bytearray(base64.b64decode(doc["calls"]["data"]))
    first_value = 1                    # row 0: its length (one byte), then its op: a string (tag 4)
    assert data[0] == len(good.calls[0]) and data[first_value] & 7 == 4
    tag6 = bytearray(data)
    tag6[first_value] = (tag6[first_value] & 0xf0) | 6
    b64 = lambda b: base64.b64encode(bytes(b)).decode()
    damages = [("not base64", {"data": "*" + doc["calls"]["data"][1:]}),
               ("unknown tag 6", {"data": b64(tag6)}),
               ("string index", {"strings": []}),
               ("ends inside a row", {"data": b64(data[:-2])}),
               ("rows says", {"rows": doc["calls"]["rows"] + 1}),
               ("encoding", {"encoding": "trshim-rows-9"})]
    ck = base64.b64decode(doc["checks"]["data"])
    assert doc["checks"]["rows"] == len(good.checks) >= 2
    damages.append(("checks data is damaged", {"checks": {"data": b64(ck[:-2])}}))
    names = []
    for k, (say, change) in enumerate(damages):
        field = "checks" if "checks" in change else "calls"
        d = dict(doc, rank=90 + k, pid=9000 + k)
        d[field] = dict(doc[field], **change.get("checks", change))
        name = "trshim.extra.r%d.node9.%d.json" % (90 + k, 9000 + k)
        with open(os.path.join(out, name), "w") as f:
            json.dump(d, f)
        names.append((name, say))
    exp["noted"] = [n for n, _ in names]
    exp["notes_contain"] = [[n, say] for n, say in names]
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)


SCENARIOS = {
    "clean": sc_clean, "extra_collective": sc_extra_collective, "extra_same_signature": sc_extra_same_signature,
    "uneven_microbatches": sc_uneven_microbatches, "skip_barrier": sc_skip_barrier,
    "barrier_some": sc_barrier_some, "early_exit": sc_early_exit,
    "silent_barrier": sc_silent_barrier, "branch_lines": sc_branch_lines,
    "pipeline_missing_send": sc_pipeline_missing_send, "hang_spread": sc_hang_spread,
    "hang_skip_tp": sc_hang_skip_tp, "init_hang": sc_init_hang, "oom": sc_oom, "imbalance": sc_imbalance,
    "missing_trace": sc_missing_trace, "p2p_size": sc_p2p_size, "damaged": sc_damaged,
    "all_damaged": sc_all_damaged, "two_jobs": sc_two_jobs, "p2p_dtype": sc_p2p_dtype,
    "reordered_fields": sc_reordered_fields, "order_inversion": sc_order_inversion,
    "nan_input_fp32": sc_nan_input_fp32, "nan_input_bf16": sc_nan_input_bf16, "fp16_overflow": sc_fp16_overflow,
    "fp8_input": sc_fp8_input, "fp8_overflow": sc_fp8_overflow, "nan_not_checked": sc_nan_not_checked,
    "nan_output_only": sc_nan_output_only, "nan_capped": sc_nan_capped, "clean_checks": sc_clean_checks,
    "checks_off": sc_checks_off, "nan_consequences": sc_nan_consequences, "nan_clock_skew": sc_nan_clock_skew,
    "nan_independent": sc_nan_independent, "nan_and_hang": sc_nan_and_hang, "rs_overflow": sc_rs_overflow,
    "nan_unchecked_before": sc_nan_unchecked_before, "nan_old_trace": sc_nan_old_trace,
    "nan_reordered_fields": sc_nan_reordered_fields,
    "straggler": sc_straggler, "straggler_two_hosts": sc_straggler_two_hosts,
    "straggler_subcomm": sc_straggler_subcomm, "straggler_node": sc_straggler_node,
    "straggler_jitter_1": seeded(sc_straggler_jitter, 1), "straggler_jitter_2": seeded(sc_straggler_jitter, 2),
    "straggler_jitter_3_0ms": seeded(sc_straggler_jitter, 3, ["--straggler-ms", "0", "--straggler-fraction", "0"]),
    "straggler_noisy_4": seeded(sc_straggler_noisy, 4), "straggler_noisy_5": seeded(sc_straggler_noisy, 5),
    "straggler_one_slow": sc_straggler_one_slow, "straggler_in_hang": sc_straggler_in_hang,
}

SCENARIOS.update({
    "blocked_vs_never": sc_blocked_vs_never, "extra_pending": sc_extra_pending, "clean_windows": sc_clean_windows,
    "clean_windows_tracked": sc_clean_windows_tracked, "blocked_elsewhere": sc_blocked_elsewhere,
    "before_window": sc_before_window, "before_window_tie": sc_before_window_tie, "fp_consistent": sc_fp_consistent,
    "completed_observed": sc_completed_observed, "hang_ring_thinned": sc_hang_ring_thinned,
    # seqs far from 1, repeated communicators, a NaN before a ring window
    "clean_windows_10m": sc_clean_windows_10m, "huge_seq": sc_huge_seq, "dup_comm": sc_dup_comm,
    "nan_window_lost": sc_nan_window_lost,
    # Python stacks (issue 7)
    "py_extra_collective": sc_py_extra_collective, "py_full_stacks": sc_py_full_stacks,
    "py_native_only": sc_py_native_only, "py_all_folded": sc_py_all_folded, "py_mixed": sc_py_mixed,
    "py_damaged": sc_py_damaged, "py_oom": sc_py_oom,
    "py_early_exit": py_auto(sc_early_exit), "py_pipeline_missing_send": py_auto(sc_pipeline_missing_send),
    "py_hang_skip_tp": py_auto(sc_hang_skip_tp), "py_init_hang": py_auto(sc_init_hang),
    "py_imbalance": py_auto(sc_imbalance), "py_nan_input_fp32": py_auto(sc_nan_input_fp32),
    "py_straggler": py_auto(sc_straggler), "py_uneven_microbatches": py_auto(sc_uneven_microbatches),
    # issue 13: *Config collectives, one-sided signals, GroupSimulateEnd, grow, suspend, unknown NCCL functions
    "config_extra": sc_config_extra, "config_extra_plain": sc_config_extra_plain, "config_mismatch": sc_config_mismatch, "signal_missing": sc_signal_missing,
    "signal_never": sc_signal_never, "v13_clean": sc_v13_clean, "group_simulate": sc_group_simulate,
    "grow_clean": sc_grow_clean, "grow_missing": sc_grow_missing, "grow_init_hang": sc_grow_init_hang, "grow_extra": sc_grow_extra, "suspend_pending": sc_suspend_pending,
    "suspend_rollout": sc_suspend_rollout, "suspend_killed": sc_suspend_killed, "nccl_unknown": sc_nccl_unknown,
    "v13_damaged": sc_v13_damaged,
    # version 2: packed calls damaged in each way the format names, and packed checks
    "packed_damaged": sc_packed_damaged,
})



# ---------------------------------------------------------------- the call budget (issue 17)
# --max-calls 400 over 4 traces: each keeps its newest 100 calls; the
# answers are those of the whole traces (the *_whole twins, default budget)
BUDGET = ["--max-calls", "400"]


def budget_exit_job(name, out):
    """early_exit over 300 steps: rank 3 returns after step 298 (598 calls),
    ranks 0-2 issue step 299's train_step all-reduce (#599) and wait"""
    ranks, wid = world_job(name, 4)
    for step in range(300):
        for r in ranks:
            if r.rank == 3 and step == 299:
                continue
            r.coll(0, count=1 << 16, site="train_step")
            if step < 299:
                r.coll(0, op="Broadcast", count=4, root=0, site="sync_step")
    for r in ranks:
        if r.rank == 3:
            r.finish("exit")
        else:
            r.finish("signal", 15)
    write(ranks, out)
    return wid


def sc_budget_exit(out, args=BUDGET, whole=False):
    """budget_exit_job: rank 3 named, each trace holding its newest 100 calls"""
    wid = budget_exit_job("budgetexit", out)
    fields = ({str(r): {"calls": 599 if r < 3 else 598, "unloaded": 0} for r in range(4)} if whole else
              {str(r): {"calls": 100, "unloaded": 499 if r < 3 else 498} for r in range(4)})
    expect(out, 1, [F("missing", wid, 599, [3], "sync_step", others=[0, 1, 2], others_function="train_step")],
           args=args, rank_fields=fields,
           **({} if whole else {"note_contains": "4 of 4 traces hold more calls than the call budget"}))


def sc_budget_before_window(out):
    """before_window_job with whole traces, each cut to its newest 100 calls
    by the budget: the fingerprints place the divergence in (64, 128],
    older than the calls kept, and the traces are read again with their
    windows widened back to the first call after #64 (16 calls before it:
    352 kept, within 4 x 100): the calls themselves name #100, rank 2"""
    ranks, wid = before_window_job("budgetfp", {0: 0, 1: 0, 2: 0, 3: 0})
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 100, [2], subkind="different_call", others=[0, 1, 3])], count=1,
           args=BUDGET, note_contains="read twice: the fingerprints placed a divergence before the calls",
           rank_fields={str(r): {"calls": 352, "unloaded": 48} for r in range(4)})


def sc_budget_before_window_far(out):
    """the same job with --max-calls 200 (64 per trace: the floor): the
    window cannot widen back to #64 (352 calls > 4 x 64): the fingerprints'
    finding, its seq window and ranks, and the hint to load every call"""
    ranks, wid = before_window_job("budgetfpfar", {0: 0, 1: 0, 2: 0, 3: 0})
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, None, [2], subkind="before_window", others=[0, 1, 3],
                      seq_window=[64, 128], fingerprints=[[2], [0, 1, 3]], tie=False)], count=1,
           args=["--max-calls", "200"], text_contains=["collectives #65-#128", "--max-calls 0", "not loaded"],
           rank_fields={str(r): {"calls": 64, "unloaded": 336} for r in range(4)})


def sc_budget_before_window_whole(out):
    """the same job, every call loaded: the calls themselves name #100"""
    ranks, wid = before_window_job("budgetfpall", {0: 0, 1: 0, 2: 0, 3: 0})
    write(ranks, out)
    expect(out, 1, [F("divergence", wid, 100, [2], subkind="different_call", others=[0, 1, 3])], count=1,
           rank_fields={str(r): {"calls": 400, "unloaded": 0} for r in range(4)})


def budget_nan_job(name, out, born_step, steps=150):
    """nan_input_fp32 over 150 steps (300 calls per rank): rank 2's gradient
    turns NaN at born_step"""
    ranks, wid = world_job(name, 4)
    poisoned, marked = set(), set()
    seq_born = None
    for step in range(steps):
        born = {2: nonfinite(123)} if step == born_step else None
        s = nan_coll(ranks, lambda r: 0, poisoned, marked, born=born, count=4096, site="allreduce_grads")
        if step == born_step:
            seq_born = s
        nan_coll(ranks, lambda r: 0, poisoned, marked, count=1, site="reduce_loss")
    for r in ranks:
        r.finish()
    write(ranks, out)
    return wid, seq_born, marked


def sc_budget_nan(out, args=BUDGET, whole=False):
    """the NaN is born at step 60 (call 120 of 300): older than the newest
    100 calls, within 4 x 100 of the end: each trace's window widens back to
    16 calls before its first non-finite check (184 calls kept), the same
    answer as every call loaded"""
    wid, seq_born, marked = budget_nan_job("budgetnan", out, 60)
    expect(out, 1, [F("nan", wid, seq_born, [2], "allreduce_grads", others=[0, 1, 3], cause="input",
                      later_count=len(marked) - 1)], count=1, args=args,
           rank_fields={str(r): ({"calls": 300, "unloaded": 0} if whole else {"calls": 196, "unloaded": 104})
                        for r in range(4)})


def sc_budget_exit_whole(out):
    """budget_exit_job with every call loaded: the same answer"""
    sc_budget_exit(out, args=[], whole=True)


def sc_budget_nan_whole(out):
    """budget_nan_job with every call loaded: the same answer"""
    sc_budget_nan(out, args=[], whole=True)


def sc_budget_nan_older(out):
    """the NaN is born at step 5 of 300 (call 10 of 600): too old to widen
    to (4 x 100 calls from the end): every input of the oldest collective
    kept is already non-finite, and with no finite check kept before it
    nobody is blamed: cause unknown, the budget named in the hint"""
    wid, seq_born, marked = budget_nan_job("budgetnanold", out, 5, steps=300)
    expect(out, 1, [F("nan", wid, 501, [0, 1, 2, 3], cause="unknown", unchecked_inputs=[0, 1, 2, 3],
                      reason_contains=["already non-finite with no finite check kept before it"],
                      message_contains=["--max-calls 0"])], count=1, args=BUDGET,
           rank_fields={str(r): {"calls": 100, "unloaded": 500} for r in range(4)})


SCENARIOS.update({
    "budget_exit": sc_budget_exit, "budget_exit_whole": sc_budget_exit_whole,
    "budget_before_window": sc_budget_before_window, "budget_before_window_whole": sc_budget_before_window_whole,
    "budget_before_window_far": sc_budget_before_window_far,
    "budget_nan": sc_budget_nan, "budget_nan_whole": sc_budget_nan_whole, "budget_nan_older": sc_budget_nan_older,
})

# ---------------------------------------------------------------- reports (issue 15)
def sc_env_differs(out):
    """a clean 8-rank job whose ranks 3 and 7 run with NCCL_ALGO=Tree, the others Ring:
    --markdown shows the shared variables once and only that difference, with its ranks"""
    ranks, wid = world_job("envdiff", 8)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step")
    for r in ranks:
        r.finish()
    write(ranks, out)

    def edit(d):
        d["env"]["NCCL_ALGO"] = "Tree" if d["rank"] in (3, 7) else "Ring"
    rewrite_traces(out, edit)
    expect(out, 0, [])


ANON_HOSTS = ["dgx-a100-07.corp.example.com", "dgx-a100-11.corp.example.com"]
ANON_OTHER_HOST = "login-node3.corp.example.com"     # only in the name of a damaged file
ANON_USER = "alice"


def sc_anon_hang(out):
    """extra_collective's job with names to hide: two hosts (FQDNs), home paths of user
    alice in the command line, the environment and the module's path, her name in another
    path, and an empty file named after a third host: --anonymize prints none of them"""
    ranks, wid = world_job("anon", 4)
    for r in ranks:
        r.host = ANON_HOSTS[r.rank // 2]
    for step in range(5):
        for r in ranks:
            if step == 3 and r.rank == 0:
                r.coll(0, count=1, site="log_metrics")
            r.coll(0, count=1 << 20, site="train_step")
    killed(ranks)
    write(ranks, out)
    home = "/home/%s" % ANON_USER

    def edit(d):
        d["cmdline"] = [home + "/proj/.venv/bin/python", home + "/proj/train.py", "--out", "/scratch/%s/run7" % ANON_USER]
        d["env"]["TRSHIM_DIR"] = home + "/traces"
        d["env"]["TORCH_EXTENSIONS_DIR"] = "/scratch/%s/torch_ext" % ANON_USER
        d["modules"][0]["path"] = home + "/proj/bin/train"
    rewrite_traces(out, edit)
    open(os.path.join(out, "trshim.anon.r9.%s.99.json" % ANON_OTHER_HOST), "w").close()
    expect(out, 1, [F("divergence", wid, 4, [0], "log_metrics", others=[1, 2, 3])])


def bench_env(rank):
    """a job's environment in bench --env: shared variables, CUDA_VISIBLE_DEVICES by local
    rank, and NCCL_ALGO=Tree on ranks 3 and 7 (Ring elsewhere)"""
    return {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME": "eth0",
            "NCCL_IB_KEY": "<redacted>", "TRSHIM_DIR": "/shared/traces", "CUDA_DEVICE_MAX_CONNECTIONS": "1",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "CUDA_VISIBLE_DEVICES": str(rank % 8),
            "NCCL_ALGO": "Tree" if rank in (3, 7) else "Ring"}


SCENARIOS.update({"env_differs": sc_env_differs, "anon_hang": sc_anon_hang})


# ---------------------------------------------------------------- benchmark
def bench(out, nranks, nrec, hang=True, checks=False, nan_step=None, env=False, fmt=2):
    """nranks ranks, nrec call records each: world + TP(8) + DP communicators,
    per step 2 TP all-reduces, 1 DP all-reduce, 1 world broadcast; the last
    rank skips its last TP call (a hang at the end). checks: the NaN/Inf
    checks the shim writes by default (input and output of each all-reduce,
    all clean). nan_step: from that step on the checks are non-finite (every
    TP group's first all-reduce overflows then: as many independent first
    points as TP groups, the worst case of the causal ordering). fmt: the
    trace version, 2 (what the shim writes: calls and checks packed, each
    body once for every rank) or 1 (calls and checks as JSON arrays)."""
    if fmt not in (1, 2):
        raise ValueError("trace version %r: 1 or 2" % (fmt,))
    os.makedirs(out, exist_ok=True)
    tpn = 8 if nranks % 8 == 0 else 1
    job = "bench%d" % nranks
    wid = cid("world", job)
    per_step = 4
    steps = nrec // per_step
    t = 1_000_000_000_000
    sites = [0, 1, 2, 3]
    seqs = [0, 0, 0]
    lines, rows = [], []
    ops = [(1, "AllReduce", 2048, "sum", None, 0), (1, "AllReduce", 2048, "sum", None, 1),
           (2, "AllReduce", 65536, "sum", None, 2), (0, "Broadcast", 4, None, 0, 3)]
    for s in range(steps):
        for comm, op, cnt, red, root, site in ops:
            seqs[comm] += 1
            t += 20000
            if fmt == 1:
                lines.append('["%s",%d,%d,%d,"float32",%s,%s,null,"0x7f0000100000","0x7f0000100000",'
                             '"0x55d0c0a01000",false,0,0,%d,%d,4242,0,%d]'
                             % (op, comm, seqs[comm], cnt, '"%s"' % red if red else "null",
                                "0" if root is not None else "null", t, t + 5000, site))
            else:
                rows.append([op, comm, seqs[comm], cnt, "float32", red, root, None, "0x7f0000100000",
                             "0x7f0000100000", "0x55d0c0a01000", False, 0, 0, t, t + 5000, 4242, 0, site])
    if fmt == 1:
        body_full = "[" + ",".join(lines) + "]"
        body_short = "[" + ",".join(lines[:-3]) + "]" if hang else body_full   # the last rank stops 3 calls early
    else:
        body_full = json.dumps(pack_rows(rows), separators=(",", ":"))
        body_short = json.dumps(pack_rows(rows[:-3]), separators=(",", ":")) if hang else body_full
    ncalls = steps * per_step
    ck_rows = []
    if checks:
        for i in range(ncalls):
            comm, op, cnt = ops[i % per_step][:3]
            if op == "AllReduce":
                for b in ("input", "output"):
                    bad = nan_step is not None and (i > nan_step * per_step or
                                                    (i == nan_step * per_step and b == "output"))
                    if bad:
                        ck_rows.append([i, b, "nonfinite", 0, cnt, 0, "inf", cnt, cnt, "gpu", None])
                    else:
                        ck_rows.append([i, b, "clean", 0, 0, None, None, cnt, cnt, "gpu", None])
    nshort = ncalls - 3 if hang else ncalls
    ck_rows_short = [c for c in ck_rows if c[0] < nshort]
    if fmt == 1:
        ck_full = "[" + ",".join(json.dumps(c, separators=(",", ":")) for c in ck_rows) + "]"
        ck_short = "[" + ",".join(json.dumps(c, separators=(",", ":")) for c in ck_rows_short) + "]"
    else:                              # packed once per body, as the calls
        ck_full = json.dumps(pack_rows(ck_rows), separators=(",", ":"))
        ck_short = (json.dumps(pack_rows(ck_rows_short), separators=(",", ":"))
                    if len(ck_rows_short) < len(ck_rows) else ck_full)
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
        head = {"format": "trshim-trace", "version": fmt, "job": {"id": job, "source": "TRSHIM_JOB_ID"},
                "rank": r, "rank_source": "RANK", "world_size": nranks, "local_rank": r % 8, "device": r % 8,
                "host": "node%d" % (r // 8), "pid": 10000 + r, "cmdline": ["train"], "start_time": 1767000000.0,
                "write_time": 1767000100.0, "end": {"reason": "exit" if short else "signal",
                                                    "signal": None if short else 15, "in_call": False},
                "versions": {"trshim": "0.1.0", "cuda_runtime": 13000, "cuda_driver": 13000, "nccl": 22809},
                "env": bench_env(r) if env else {}, "settings": {"dir": "traces", "stack_depth": 64},
                "clock": {"realtime": 1767000000.0, "monotonic_ns": 1_000_000_000_000},
                "comms": comms, "call_fields": CALL_FIELDS}
        if checks:
            head["nancheck"] = {"mode": "all", "engine_setting": "auto", "engine": "gpu", "gpu_unused": None,
                                "max_bytes": 64 << 20, "pool_bytes": 256 << 20, "dropped": 0}
            head["check_fields"] = CHECK_FIELDS
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
            f.write(h + ',"calls":' + (body_short if short else body_full) + ',' +
                    ('"checks":' + (ck_short if short else ck_full) + ',' if checks else '') +
                    '"stacks":' + stacks + "," + tl)


def main(argv):
    if len(argv) >= 3 and argv[1] == "bench":
        out = argv[2]
        nranks = int(argv[argv.index("--ranks") + 1]) if "--ranks" in argv else 1024
        nrec = int(argv[argv.index("--records") + 1]) if "--records" in argv else 10000
        nan_step = int(argv[argv.index("--nan-step") + 1]) if "--nan-step" in argv else None
        fmt = int(argv[argv.index("--format") + 1]) if "--format" in argv else 2
        bench(out, nranks, nrec, checks="--checks" in argv or nan_step is not None, nan_step=nan_step,
              hang="--clean" not in argv, env="--env" in argv, fmt=fmt)
        return 0
    return scenario_main(argv, SCENARIOS, __doc__)


def scenario_main(argv, scenarios, doc):
    """the command line of a scenario generator: SCENARIO OUTDIR, or --list"""
    if len(argv) >= 2 and argv[1] == "--list":
        for k, fn in scenarios.items():
            print("%-24s %s" % (k, (fn.__doc__ or "").strip().splitlines()[0]))
        return 0
    if len(argv) != 3 or argv[1] not in scenarios:
        print(doc, file=sys.stderr)
        return 2
    random.seed(1234)
    scenarios[argv[1]](argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
