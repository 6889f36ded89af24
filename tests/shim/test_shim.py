#!/usr/bin/env python3
"""Tests of libtrshim.so: test_shim.py CASE [ARGS]. Paths come from the
environment meson sets (TRSHIM_LIB, TRSIM_LIB, TRSIM_LAUNCH, SHIM_* programs).

Each case runs programs on the simulated CUDA runtime + NCCL with the shim
preloaded, then reads the traces back and asserts exact facts: sequence
numbers, arguments, communicator ids, ranks, call sites, return codes.
Stdlib only."""
import collections
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import Failure, check, eq, path_of, run_case, shim_lines  # noqa: E402
import ring  # noqa: E402
import vocab  # noqa: E402
import ringhdr  # noqa: E402  (the ring header's live fields)
from trace import load_trace, shim_versions  # noqa: E402  (calls and checks of either version, unpacked)


# Assert that the innermost frame of each call's stack is the test function
# that issued it (needs shim/stacks/tr_stack.c). Set to False to skip.
CHECK_CALL_SITES = True

CALL_FIELDS = [f["name"] for f in vocab.CALL_FIELDS]   # include/trshim/trace_format.h's table
DTYPES = list(vocab.DTYPES)                             # ncclDataType_t order (nccl_calls.h's table)
IN_PROGRESS = 7


# ---- running -------------------------------------------------------------------

SCRUB = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_.*|PMI_.*|PMIX_.*|"
                   r"SLURM_.*|TRSHIM.*|TORCHELASTIC_RUN_ID|TRSIM_LAUNCH_TIMEOUT|TRSIM_TIMEOUT_SEC|"
                   r"LD_PRELOAD|LD_LIBRARY_PATH|NCCL_COMM_BLOCKING)$")


class Case:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="trshim-test-")
        self.traces = os.path.join(self.tmp, "traces")
        self.markers = os.path.join(self.tmp, "markers")
        os.makedirs(self.markers)

    def env(self, extra=None, preload=None):
        env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
        env["TRSHIM_DIR"] = self.traces
        env["TRSHIM_TEST_MARKERS"] = self.markers
        # the cases compare each trace with its ring file; ring-lifetime
        # checks the default (removed after a clean exit)
        env["TRSHIM_KEEP_RING"] = "1"
        if preload:
            env["LD_PRELOAD"] = " ".join(preload)
        for k, v in (extra or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def run(self, cmd, extra=None, preload=None, limit=240, want_rc=0, cwd=None):
        t0 = time.monotonic()
        p = subprocess.run(cmd, env=self.env(extra, preload), capture_output=True, text=True, timeout=limit,
                           cwd=cwd)
        sys.stdout.write("$ %s\nrc=%d after %.1f s\n--- stdout\n%s--- stderr\n%s\n" % (
            " ".join(cmd), p.returncode, time.monotonic() - t0, p.stdout, p.stderr))
        if want_rc is not None:
            eq(p.returncode, want_rc, "exit status of %s" % os.path.basename(cmd[0]))
        return p

    def launch(self, n, prog, extra=None, timeout=120, want_rc=0, preload=None):
        """prog under trsim-launch with the shim (and more) preloaded in each rank."""
        pre = preload or [path_of("TRSHIM_LIB")]
        cmd = [path_of("TRSIM_LAUNCH"), "-n", str(n), "--timeout", str(timeout), "--",
               "env", "LD_PRELOAD=" + " ".join(pre)] + prog
        return self.run(cmd, extra, limit=timeout + 60, want_rc=want_rc)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---- reading traces ------------------------------------------------------------------

NAME = re.compile(r"^trshim\.([A-Za-z0-9_-]{1,48})\.r(\d+|x)\.([A-Za-z0-9._-]+)\.(\d+)\.json$")
RING_NAME = re.compile(r"^trshim\.([A-Za-z0-9._-]+)\.(\d+)\.ring$")


def clean(s, keep_dot=False):
    ok = re.compile(r"[A-Za-z0-9_\-.]" if keep_dot else r"[A-Za-z0-9_\-]")
    return "".join(c if ok.match(c) else "_" for c in s)


def load_traces(d):
    """All traces in d, checked against the file-name and top-level contract."""
    check(os.path.isdir(d), "no trace folder %s" % d)
    names = sorted(n for n in os.listdir(d) if not RING_NAME.match(n))
    leftovers = [n for n in names if not n.endswith(".json")]
    check(not leftovers, "files that are not traces: %s" % leftovers)
    out = []
    for n in names:
        m = NAME.match(n)
        check(m, "bad trace file name %s" % n)
        t = load_trace(os.path.join(d, n), Failure)      # strict: valid UTF-8 only
        eq(t["format"], "trshim-trace", "format")
        check(t["version"] in shim_versions(), "%s: version %r, expected one of %s" % (n, t["version"], shim_versions()))
        eq(m.group(1), clean(t["job"]["id"])[:48], "job in the name %s" % n)
        eq(m.group(2), "x" if t["rank"] is None else str(t["rank"]), "rank in the name %s" % n)
        eq(m.group(3), clean(t["host"], True), "host in the name %s" % n)
        eq(m.group(4), str(t["pid"]), "pid in the name %s" % n)
        eq(t["call_fields"], CALL_FIELDS, "call_fields")
        for k in ("job", "rank", "rank_source", "world_size", "local_rank", "device", "host", "pid", "cmdline",
                  "start_time", "write_time", "end", "versions", "env", "settings", "clock", "comms", "calls",
                  "memory", "modules", "stacks", "dropped", "ring", "python", "pycodes", "pystacks", "system",
                  "env_changes", "env_changes_dropped"):
            check(k in t, "%s: no %s" % (n, k))
        # these programs are C: no interpreter, no Python stacks, nothing else changed
        eq(t["python"], {"state": "none", "version": None, "detail": None, "dropped": 0}, "%s: python" % n)
        eq((t["pycodes"], t["pystacks"]), ([], []), "%s: Python code objects and stacks" % n)
        eq(t["settings"].get("pystack_depth"), 64, "%s: settings.pystack_depth" % n)
        rg = t["ring"]
        eq(sorted(rg), ["capacity", "file", "first", "lost", "next"], "%s: ring members" % n)
        eq(os.path.realpath(rg["file"]), os.path.realpath(ring_path(d, t)), "%s: ring file" % n)
        eq((rg["lost"], t["dropped"]), (rg["first"], rg["first"]), "%s: ring.lost and dropped" % n)
        t["calls"] = [dict(zip(CALL_FIELDS, c)) for c in t["calls"]]
        for c in t["calls"]:
            eq(len(c), len(CALL_FIELDS), "fields of a call")
            eq(c["pystack"], -1, "%s: a C program's call has no Python stack" % n)
        t["_name"] = n
        out.append(t)
    return out


def ring_path(d, t):
    """the ring file of trace t: named after the job, as the trace is"""
    return os.path.join(d, "trshim.%s.%s.%d.ring" % (clean(t["job"]["id"])[:48], clean(t["host"], True), t["pid"]))


def ring_files(d):
    return sorted(os.path.join(d, n) for n in os.listdir(d) if RING_NAME.match(n))


def ring_of(t):
    """The ring file a trace names, read."""
    check(t["ring"]["file"] and os.path.exists(t["ring"]["file"]), "no ring file %s" % t["ring"]["file"])
    return ring.read_ring(t["ring"]["file"])


def check_ring_matches(t, what, rg=None):
    """The ring file of a process with one rank (t) holds what its trace
    holds: the same calls (its window), communicators, fingerprints and
    stacks (modules and offsets)."""
    rg = rg or ring_of(t)
    h = rg["header"]
    eq((h["pid"], h["host"], h["capacity"], h["trshim_version"]), (t["pid"], t["host"], t["ring"]["capacity"],
                                                                    "0.1.0"), what + " ring header")
    recs = rg["records"]
    eq(len(recs), len(t["calls"]), what + ": records in the ring")
    eq(recs[0]["index"] if recs else t["ring"]["first"], t["ring"]["first"], what + ": first record")
    for x, r in zip(t["calls"], recs):
        w = "%s ring record %d" % (what, r["index"])
        eq(ring.OPS[r["op"]], x["op"], w + " op")
        eq(r["comm"], x["comm"], w + " comm")
        eq(DTYPES[r["dtype"]] if 0 <= r["dtype"] < len(DTYPES) else None,
           x["dtype"] if x["dtype"] in DTYPES else None, w + " dtype")
        for f, g in (("seq", "seq"), ("count", "count"), ("group", "group"), ("depth", "depth"),
                     ("enter_ns", "enter_ns"), ("tid", "thread"), ("stack", "stack"), ("pystack", "pystack")):
            eq(r[f], x[g], "%s %s" % (w, f))
        eq(ring.REC_STATES[r["state"]], "returned" if x["exit_ns"] is not None else "entered", w + " state")
        if x["exit_ns"] is not None:
            eq((r["exit_ns"], r["rc"]), (x["exit_ns"], x["rc"]), w + " return")
        eq(ring.CAPTURING[r["capturing"]], x["capturing"] if not x["op"].startswith("Group") else None,
           w + " capturing")
        # gpu/done_ns are not compared: the completion poller may update a
        # record between the exit write and the process's end
    eq(len(rg["comms"]), len(t["comms"]), what + ": comm slots")
    for i, (k, c) in enumerate(zip(rg["comms"], t["comms"])):
        w = "%s comm slot %d" % (what, i)
        check(k is not None, w + " not valid")
        eq(c["slot"], i, w + ": slot in the trace")
        eq(("0x%x" % k["id"], ring.KINDS[k["kind"]], k["size"], k["rank"], k["colls"]),
           (c["id"], c["kind"], c["size"] if c["size"] is not None else -1,
            c["rank"] if c["rank"] is not None else -1, c["colls"]), w + " identity")
        eq(k["parent_id"] and "0x%x" % k["parent_id"], c["parent"] or 0, w + " parent")
        eq((k["init_enter"], k["init_done"], k["init_exit"], k["init_rc"]),
           (c["init"]["enter_ns"], 1, c["init"]["exit_ns"], c["init"]["rc"]), w + " init")
        if c["end"]:
            eq((ring.ENDS[k["end_kind"]], k["end_enter"], k["end_exit"], k["end_rc"]),
               (c["end"]["kind"], c["end"]["enter_ns"], c["end"]["exit_ns"], c["end"]["rc"]), w + " end")
        fp = c["fingerprint"]
        eq((k["fp_seq"], "0x%x" % k["fp_hash"], k["fp_step"], [[a, "0x%x" % b] for a, b in k["checkpoints"]]),
           (fp["seq"], fp["hash"], fp["step"], fp["checkpoints"]), w + " fingerprint")
    # Python stacks and code objects: the same (none for these C programs)
    eq({i: [tuple(f) for f in st] for i, st in enumerate(t["pystacks"])}, rg["pystacks"], what + ": Python stacks")
    eq({i: tuple(c) for i, c in enumerate(t["pycodes"])}, rg["pycodes"], what + ": Python code objects")
    # stacks: the same frames, by module path and offset
    mods = t["modules"]
    for i, st in enumerate(t["stacks"]):
        check(i in rg["stacks"], "%s: stack %d not in the ring" % (what, i))
        ips = rg["stacks"][i]
        eq(len(ips), len(st["frames"]), "%s stack %d frames" % (what, i))
        for ip, f in zip(ips, st["frames"]):
            m = ring.module_of(rg, ip)
            if f["module"] < 0:
                continue
            check(m is not None, "%s stack %d: 0x%x in no ring module" % (what, i, ip))
            eq((m["path"], "0x%x" % (ip - m["base"]), m["build_id"] or None),
               (mods[f["module"]]["path"], f["offset"], mods[f["module"]]["build_id"]),
               "%s stack %d frame" % (what, i))
    return rg


def site(t, stack):
    """Symbol of the innermost frame of a stack, None when unknown."""
    if stack is None or stack < 0 or stack >= len(t["stacks"]):
        return None
    frames = t["stacks"][stack]["frames"]
    return frames[0]["symbol"] if frames else None


def check_site(t, stack, want, what):
    if CHECK_CALL_SITES:
        eq(site(t, stack), want, "call site of %s" % what)


def by_rank(traces):
    out = {}
    for t in traces:
        check(t["rank"] not in out, "two traces of rank %s" % t["rank"])
        out[t["rank"]] = t
    return out


# ---- an expected job ---------------------------------------------------------------------

class Model:
    """What one rank did: communicators in creation order and calls per thread
    ('main' or a name), numbered the way the trace format says."""

    def __init__(self):
        self.comms = []
        self.calls = collections.defaultdict(list)
        self.coll = collections.Counter()
        self.p2p = collections.Counter()

    def comm(self, key, kind, size, rank, parent=None, color=None, ckey=None, blocking=True, init_rc=0,
             site=None):
        self.comms.append(dict(key=key, kind=kind, size=size, rank=rank, parent=parent, color=color,
                               ckey=ckey, blocking=blocking, init_rc=init_rc, site=site))

    def call(self, op, comm, count, dtype, redop=None, root=None, peer=None, group=0, depth=0, rc=0,
             site=None, thread="main"):
        seq = 0
        if rc in (0, IN_PROGRESS):
            if op in ("Send", "Recv"):
                self.p2p[(comm, peer, op)] += 1
                seq = self.p2p[(comm, peer, op)]
            else:
                self.coll[comm] += 1
                seq = self.coll[comm]
        self.calls[thread].append(dict(op=op, comm=comm, seq=seq, count=count, dtype=dtype, redop=redop,
                                       root=root, peer=peer, group=group, depth=depth, rc=rc, site=site))

    def group(self, op, group, depth, site, rc=0):
        self.calls["main"].append(dict(op=op, comm=None, seq=0, count=0, dtype=None, redop=None, root=None,
                                       peer=None, group=group, depth=depth, rc=rc, site=site))


def compare_rank(t, m, what):
    """Trace t against model m; returns {comm key: id}."""
    eq([c["kind"] for c in t["comms"]], [c["kind"] for c in m.comms], "%s: kinds of comms" % what)
    keys, ids = [], {}
    for i, (c, e) in enumerate(zip(t["comms"], m.comms)):
        w = "%s comm %s" % (what, e["key"])
        keys.append(e["key"])
        ids[e["key"]] = c["id"]
        eq(c["size"], e["size"], w + " size")
        eq(c["rank"], e["rank"], w + " rank")
        eq(c["blocking"], e["blocking"], w + " blocking")
        eq(c["parent"], ids[e["parent"]] if e["parent"] else None, w + " parent")
        if e["color"] is not None:
            eq((c["color"], c["key"]), (e["color"], e["ckey"]), w + " color/key")
        else:
            check("color" not in c, w + ": color on a communicator that was not split")
        eq(c["init"]["rc"], e["init_rc"], w + " init rc")
        check(c["init"]["exit_ns"] >= c["init"]["enter_ns"], w + " init times")
        eq(c["colls"], m.coll[e["key"]], w + " collectives numbered")
        if e["site"]:
            check_site(t, c["init"]["stack"], e["site"], w + " init")
    check(len(set(ids.values())) == len(ids), "%s: two communicators share an id" % what)

    threads = collections.defaultdict(list)
    for c in t["calls"]:
        threads[c["thread"]].append(c)
    main = threads.pop(t["pid"], [])
    groups = {"main": main}
    # other threads: matched by the communicator of their first call
    for tid, calls in threads.items():
        key = keys[calls[0]["comm"]] if calls[0]["comm"] >= 0 else None
        name = [n for n, cs in m.calls.items() if n != "main" and cs and cs[0]["comm"] == key]
        check(len(name) == 1, "%s: thread %d's calls belong to no expected thread" % (what, tid))
        check(name[0] not in groups, "%s: two threads issue the calls of %s" % (what, name[0]))
        groups[name[0]] = calls
    eq(sorted(groups), sorted(n for n in m.calls if m.calls[n]), "%s: threads" % what)
    for name, calls in groups.items():
        want = m.calls[name]
        eq(len(calls), len(want), "%s: number of calls of thread %s" % (what, name))
        for i, (c, e) in enumerate(zip(calls, want)):
            w = "%s thread %s call %d (%s)" % (what, name, i, e["op"])
            eq(c["op"], e["op"], w + " op")
            eq(keys[c["comm"]] if c["comm"] >= 0 else None, e["comm"], w + " comm")
            for f in ("seq", "count", "dtype", "redop", "root", "peer", "group", "depth", "rc"):
                eq(c[f], e[f], "%s %s" % (w, f))
            check(c["exit_ns"] is not None and c["exit_ns"] >= c["enter_ns"], w + " times")
            if e["op"].startswith("Group"):
                eq([c[f] for f in ("sendbuff", "recvbuff", "stream", "capturing")], [None] * 4, w + " buffers")
            else:
                eq(c["capturing"], False, w + " capturing")
                check(c["stream"] is not None and c["stream"].startswith("0x"), w + " stream")
            if e["site"]:
                check_site(t, c["stack"], e["site"], w)
        for a, b in zip(calls, calls[1:]):
            check(a["enter_ns"] <= b["enter_ns"], "%s: calls of thread %s out of order" % (what, name))
    return ids


def job_model(r, W):
    m = Model()
    m.comm("world", "InitRank", W, r, site="job_init_world")
    s = "job_collectives"
    m.call("AllReduce", "world", 100, "float32", "sum", site=s)
    m.call("Broadcast", "world", 50, "int32", root=1, site=s)
    m.call("Bcast", "world", 10, "uint8", root=0, site=s)
    m.call("Reduce", "world", 20, "float64", "max", root=W - 1, site=s)
    m.call("AllGather", "world", 8, "bfloat16", site=s)
    m.call("ReduceScatter", "world", 4, "float16", "min", site=s)
    m.call("AlltoAll", "world", 3, "int64", site=s)
    m.call("Gather", "world", 5, "uint32", root=2 % W, site=s)
    m.call("Scatter", "world", 6, "int8", root=0, site=s)
    m.call("AllReduce", "world", 1, "int32", "prod", site=s)
    m.call("AllReduce", "world", 7, "float32", "avg", site=s)
    m.call("AllReduce", "world", 9, "float32", "premulsum(5)", site=s)
    m.call("AllReduce", "world", 2, "float8e4m3", "max", site=s)
    m.call("AllReduce", "world", 2, "uint64", "min", site=s)
    s = "job_bad_calls"
    m.call("Broadcast", "world", 1, "int32", root=W, rc=4, site=s)
    m.call("AllReduce", "world", 1, "invalid(12)", "sum", rc=4, site=s)
    m.call("AllReduce", "world", 3, "int32", "sum", site=s)
    s = "job_splits"
    h = r // 2
    m.comm("half", "Split", W // 2, h, parent="world", color=r % 2, ckey=r, site=s)
    if r != 0:
        m.comm("rest", "Split", W - 1, r - 1, parent="world", color=5, ckey=0, site=s)
    m.comm("quarter", "Split", len([x for x in range(W // 2) if x % 2 == h % 2]), h // 2, parent="half",
           color=h % 2, ckey=0, site=s)
    m.call("AllReduce", "half", 11, "float32", "sum", site=s)
    m.call("AllReduce", "half", 12, "float32", "sum", site=s)
    m.call("AllReduce", "world", 13, "float32", "sum", site=s)
    m.call("AllReduce", "quarter", 14, "float32", "sum", site=s)
    if r != 0:
        m.call("AllReduce", "rest", 15, "float32", "sum", site=s)
    s = "job_pipeline"
    for mb in range(3):
        if r > 0:
            m.call("Recv", "world", 16, "float32", peer=r - 1, site=s)
        if r < W - 1:
            m.call("Send", "world", 16, "float32", peer=r + 1, site=s)
    s = "job_groups"
    nxt, prv = (r + 1) % W, (r - 1 + W) % W
    m.group("GroupStart", 1, 1, s)
    m.call("Send", "world", 4, "int32", peer=nxt, group=1, depth=1, site=s)
    m.call("Recv", "world", 4, "int32", peer=prv, group=1, depth=1, site=s)
    m.group("GroupEnd", 1, 1, s)
    m.group("GroupStart", 2, 1, s)
    m.call("AllReduce", "world", 21, "int32", "sum", group=2, depth=1, site=s)
    m.call("AllReduce", "half", 22, "int32", "sum", group=2, depth=1, site=s)
    m.group("GroupEnd", 2, 1, s)
    m.group("GroupStart", 3, 1, s)
    m.group("GroupStart", 3, 2, s)
    m.call("AllReduce", "world", 23, "int32", "sum", group=3, depth=2, site=s)
    m.group("GroupEnd", 3, 2, s)
    m.call("Send", "world", 5, "int32", peer=nxt, group=3, depth=1, site=s)
    m.call("Recv", "world", 5, "int32", peer=prv, group=3, depth=1, site=s)
    m.group("GroupEnd", 3, 1, s)
    s = "job_exchange"
    for g in (4, 5):
        m.group("GroupStart", g, 1, s)
        m.call("Send", "world", 6, "uint8", peer=r ^ 1, group=g, depth=1, site=s)
        m.call("Recv", "world", 6, "uint8", peer=r ^ 1, group=g, depth=1, site=s)
        m.group("GroupEnd", g, 1, s)
    for t in range(2):
        m.comm("t%d" % t, "Split", W, r, parent="world", color=0, ckey=r, site="job_threads")
    for t in range(2):
        for i in range(40):
            m.call("AllReduce", "t%d" % t, 100 * (t + 1) + i, "uint8", "max", site="job_thread",
                   thread="thread%d" % t)
    m.comm("nb", "InitRankConfig", W, r, blocking=False, init_rc=IN_PROGRESS, site="job_nonblocking")
    m.call("AllReduce", "nb", 31, "float32", "sum", rc=IN_PROGRESS, site="job_nonblocking")
    if r != W - 1:
        m.comm("shrunk", "Shrink", W - 1, r, parent="world", site="job_shrink")
        m.call("AllReduce", "shrunk", 41, "float32", "sum", site="job_shrink")
    m.call("AllReduce", "world", 51, "float32", "sum", site="job_teardown")
    return m


def check_common(t, what, reason="exit", in_call=False, signal_no=None):
    eq(t["end"], {"reason": reason, "signal": signal_no, "in_call": in_call}, what + " end")
    eq(t["dropped"], 0, what + " dropped")
    eq(t["ring"]["first"], 0, what + " ring.first")
    check(t["ring"]["next"] >= len(t["calls"]), what + ": ring.next below the calls written")
    check(t["start_time"] <= t["write_time"], what + ": start after write")
    eq(t["versions"]["trshim"], "0.1.0", what + " trshim version")
    eq(t["versions"]["nccl"], 23203, what + " nccl version (the simulator is NCCL 2.32.3)")
    check(isinstance(t["versions"]["cuda_runtime"], int) and t["versions"]["cuda_runtime"] > 0,
          what + ": cuda_runtime version %r" % t["versions"]["cuda_runtime"])
    check(t["clock"]["monotonic_ns"] > 0, what + " clock")
    sy = t["system"]
    rt = t["versions"]["cuda_runtime"]
    eq((sy["nccl"], sy["cuda_runtime"]), ("2.32.3", "%d.%d" % (rt // 1000, rt % 1000 // 10)),
       what + " version strings")
    eq((sy["packages"], sy["kernel_driver"]), ({}, None), what + " packages and kernel driver (a C job, no NVIDIA "
                                                                  "driver)")
    devs = sorted({k["device"] for k in t["comms"] if k["device"] is not None and k["device"] >= 0})
    # the process's devices: a process driving several (InitAll) lists them all in each rank's trace
    gdevs = [g["device"] for g in sy["gpus"]]
    check(gdevs == sorted(gdevs) and set(devs) <= set(gdevs), what + " gpus %s: the devices of its communicators %s"
          % (gdevs, devs))
    for g in sy["gpus"]:
        eq((g["name"], g["pci_bus_id"]), ("trsim simulated GPU", "0000:%02X:00.0" % g["device"]), what + " gpu")
        check(re.match(r"^GPU-[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$", g["uuid"]), what + " uuid %s" % g["uuid"])


# ---- cases ---------------------------------------------------------------------------------

def case_job(c, n):
    W = int(n)
    secret = {"NCCL_TEST_TOKEN": "hunter2", "NCCL_DEBUG_SUBSYS": "INIT", "NOT_COLLECTED": "1"}
    c.launch(W, [path_of("SHIM_JOB")], extra=secret)
    traces = load_traces(c.traces)
    eq(len(traces), W, "number of traces")
    ranks = by_rank(traces)
    eq(sorted(ranks), list(range(W)), "ranks")
    ids = {}
    for r, t in ranks.items():
        what = "rank %d" % r
        check_common(t, what)
        eq((t["rank_source"], t["world_size"], t["local_rank"], t["device"]), ("RANK", W, r, r % 8),
           what + " identity")
        eq(t["job"]["source"], "TRSIM_SHM_TAG", what + " job source")
        eq(t["env"].get("NCCL_TEST_TOKEN"), "<redacted>", what + " secret")
        eq(t["env"].get("NCCL_DEBUG_SUBSYS"), "INIT", what + " NCCL_ variable")
        check("NOT_COLLECTED" not in t["env"], what + ": collected a variable it should not")
        eq(t["settings"]["dir"], c.traces, what + " settings.dir")
        eq(t["cmdline"], [path_of("SHIM_JOB")], what + " cmdline")
        m = job_model(r, W)
        ids[r] = compare_rank(t, m, what)
        for k in t["comms"]:
            eq(k["device"], t["device"], what + " comm device")
            eq((k["end"]["kind"], k["end"]["rc"]), ("Destroy", 0), what + " comm end")
            check(k["end"]["exit_ns"] >= k["end"]["enter_ns"], what + " comm end times")
        # the peak came after some collective of this rank
        for d in t["memory"]["devices"]:
            eq(d["device"], t["device"], what + " memory device")
        eq(t["ring"]["next"], len(t["calls"]), what + " ring.next")
        rg = check_ring_matches(t, what)
        eq((rg["header"]["state_name"], rg["header"]["env_rank"], rg["header"]["world_size"]), ("exited", r, W),
           what + " ring state and identity")
    # a communicator's fingerprint is the same on every member (same collectives)
    fps = collections.defaultdict(dict)
    for r, t in ranks.items():
        for k in t["comms"]:
            fps[k["id"]][r] = (k["colls"], k["fingerprint"])
    for cid, per_rank in fps.items():
        eq(len({json.dumps(v) for v in per_rank.values()}), 1, "fingerprints of %s on ranks %s: %s" % (
            cid, sorted(per_rank), per_rank))
        for colls, fp in per_rank.values():
            eq((fp["seq"], fp["step"]), (colls, 64), "fingerprint of %s covers every collective" % cid)
    eq(len({t["job"]["id"] for t in traces}), 1, "one job id")
    eq(len({t["pid"] for t in traces}), W, "one process per rank")
    # the same communicator has the same id on every member, different ones differ
    members = collections.defaultdict(set)
    for r in range(W):
        h = r // 2
        members[("world",)].add(ids[r]["world"])
        members[("half", r % 2)].add(ids[r]["half"])
        members[("quarter", r % 2, h % 2)].add(ids[r]["quarter"])
        if r:
            members[("rest",)].add(ids[r]["rest"])
        for k in ("t0", "t1", "nb"):
            members[(k,)].add(ids[r][k])
        if r != W - 1:
            members[("shrunk",)].add(ids[r]["shrunk"])
    for k, v in members.items():
        eq(len(v), 1, "ids of communicator %s across ranks" % (k,))
    all_ids = [next(iter(v)) for v in members.values()]
    eq(len(set(all_ids)), len(all_ids), "distinct communicators have distinct ids")


def case_initall(c):
    # No launcher: no RANK, no job variable: ranks and job id come from communicators
    c.run([path_of("SHIM_INITALL")], extra={"TRSIM_SHM_TAG": None, "TRSIM_DEVICE_COUNT": "4"},
          preload=[path_of("TRSHIM_LIB")])
    traces = load_traces(c.traces)
    eq(len(traces), 4, "one trace per device")
    ranks = by_rank(traces)
    eq(sorted(ranks), [0, 1, 2, 3], "ranks")
    ids = {}
    for d, t in ranks.items():
        what = "device %d" % d
        check_common(t, what)
        eq((t["rank_source"], t["device"], t["world_size"], t["local_rank"]), ("comm", d, None, None),
           what + " identity")
        m = Model()
        s = "initall_main"
        m.comm("ia", "InitAll", 4, d, site=s)
        m.comm("again", "InitRank", 4, d, site=s)
        m.comm("split", "Split", 2, d // 2, parent="again", color=d % 2, ckey=d, site=s)
        m.comm("thr", "InitRank", 4, d, site="initall_thread")
        m.group("GroupStart", 1, 1, s)
        m.call("AllReduce", "ia", 1000, "int32", "sum", group=1, depth=1, site=s)
        m.group("GroupEnd", 1, 1, s)
        for g in (2, 3):
            m.group("GroupStart", g, 1, s)
            m.group("GroupEnd", g, 1, s)
        m.group("GroupStart", 4, 1, s)
        m.call("AllReduce", "split", 7, "int32", "sum", group=4, depth=1, site=s)
        m.group("GroupEnd", 4, 1, s)
        m.call("AllReduce", "thr", 1, "int32", "max", site="initall_thread", thread="t")
        ids[d] = compare_rank(t, m, what)
        for k in t["comms"]:
            eq(k["device"], d, what + " comm device")
        for md in t["memory"]["devices"]:
            eq(md["device"], d, what + " memory device")
    eq(len({t["pid"] for t in traces}), 1, "one process")
    for k in ("ia", "again", "thr"):
        eq(len({ids[d][k] for d in range(4)}), 1, "id of %s across devices" % k)
    eq(len({ids[d]["split"] for d in range(4)}), 2, "two split communicators")
    eq(ids[0]["split"], ids[2]["split"], "split of the even devices")
    eq(len({t["job"]["id"] for t in traces}), 1, "one job id")
    eq((traces[0]["job"]["source"], traces[0]["job"]["id"]), ("comm", ids[0]["again"]),
       "job id from the first communicator made from a unique id")


def wait_markers(c, names, limit=90):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if all(os.path.exists(os.path.join(c.markers, n)) for n in names):
            return
        time.sleep(0.05)
    raise Failure("ranks did not reach their hang points: %s" % sorted(os.listdir(c.markers)))


def check_hang(c, sig):
    for r in range(4):
        check(os.path.exists(os.path.join(c.markers, "ready.%d" % r)), "rank %d never reached its hang" % r)
    check(os.path.exists(os.path.join(c.markers, "apphandler.%d" % sig)),
          "rank 0's own signal handler did not run after the shim's")
    traces = load_traces(c.traces)
    ranks = by_rank(traces)
    eq(sorted(ranks), [0, 1, 2, 3], "a trace from every rank")
    for r, t in ranks.items():
        what = "rank %d" % r
        eq(t["end"]["reason"], "signal", what + " end reason")
        eq(t["end"]["signal"], sig, what + " end signal")
        eq(t["end"]["in_call"], r != 0, what + " in_call")
        ar = [x for x in t["calls"] if x["op"] == "AllReduce"]
        eq([x["seq"] for x in ar], [1, 2] if r == 3 else [1, 2, 3], what + " AllReduce seqs")
        check(all(x["exit_ns"] is not None and x["rc"] == 0 for x in ar), what + ": an AllReduce did not return")
        if r == 3:
            check_site(t, ar[0]["stack"], "main", what + " AllReduce")
        else:
            check_site(t, ar[2]["stack"], "hang_rank%d" % r, what + " AllReduce #3")
        world = t["comms"][0]
        eq((world["kind"], world["size"], world["rank"], world["init"]["rc"]), ("InitRank", 4, r, 0),
           what + " world comm")
    eq(ranks[0]["comms"][0]["end"], None, "rank 0 world end")
    end1 = ranks[1]["comms"][0]["end"]
    eq((end1["kind"], end1["exit_ns"], end1["rc"]), ("Destroy", None, None), "rank 1: Destroy not returned")
    calls2 = ranks[2]["calls"]
    eq([x["op"] for x in calls2[-2:]], ["GroupStart", "GroupEnd"], "rank 2 last calls")
    ge = calls2[-1]
    eq((ge["exit_ns"], ge["rc"], ge["group"], ge["depth"]), (None, None, 1, 1), "rank 2: GroupEnd not returned")
    check_site(ranks[2], ge["stack"], "hang_rank2", "rank 2 GroupEnd")
    lonely = ranks[2]["comms"][1]
    eq((lonely["kind"], lonely["size"], lonely["rank"], lonely["init"]["rc"]), ("InitRank", 2, 0, 0),
       "rank 2 grouped init")
    split = ranks[3]["comms"][1]
    eq((split["kind"], split["parent"], split["size"], split["init"]["exit_ns"], split["init"]["rc"]),
       ("Split", ranks[3]["comms"][0]["id"], None, None, None), "rank 3: split not returned")
    check_site(ranks[3], split["init"]["stack"], "hang_rank3", "rank 3 split")
    eq(len({t["comms"][0]["id"] for t in traces}), 1, "world id")


def case_hang_timeout(c):
    # the launcher's --timeout sends SIGTERM, as torchrun or srun do to a hung job
    c.launch(4, [path_of("SHIM_HANG")], timeout=8, want_rc=124)
    check_hang(c, signal.SIGTERM)


def case_hang_sigint(c):
    pre = [path_of("TRSHIM_LIB")]
    cmd = [path_of("TRSIM_LAUNCH"), "-n", "4", "--timeout", "120", "--", "env", "LD_PRELOAD=" + " ".join(pre),
           path_of("SHIM_HANG")]
    p = subprocess.Popen(cmd, env=c.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_markers(c, ["ready.%d" % r for r in range(4)])
        time.sleep(0.5)    # from its marker into the call: microseconds
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    sys.stdout.write("$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (" ".join(cmd), p.returncode, out, err))
    eq(p.returncode, 128 + signal.SIGINT, "launcher exit status")
    check_hang(c, signal.SIGINT)


def warnings(stderr):
    return shim_lines(stderr)


def case_unwritable(c):
    bad = "/dev/null/traces"     # not a folder, whoever we are (root too)
    plain = c.launch(2, [path_of("SHIM_MISC"), "basic"], preload=[path_of("TRSIM_LIB")])
    p = c.launch(2, [path_of("SHIM_MISC"), "basic"], extra={"TRSHIM_DIR": bad})
    w = warnings(p.stderr)
    # per rank: the ring file (records then live in anonymous memory) and the trace
    eq(len(w), 4, "two trshim: lines per rank (%s)" % w)
    eq(len([l for l in w if "ring file" in l and "memory only" in l]), 2, "ring warnings: %s" % w)
    check(all(bad in l for l in w), "the warning names the folder: %s" % w)
    check(not os.path.exists(c.traces), "traces were written somewhere")
    eq(sorted(re.sub(r"pid \d+", "pid", p.stdout).splitlines()),
       sorted(re.sub(r"pid \d+", "pid", plain.stdout).splitlines()), "the job's output")


def case_ring_anon(c):
    """The ring file cannot be made at activation (a file stands where the
    folder should be); the JSON trace written later works from the ring in
    anonymous memory."""
    blocker = os.path.join(c.tmp, "blocker")
    with open(blocker, "w") as f:
        f.write("not a folder\n")
    d = os.path.join(blocker, "traces")
    p = c.run([path_of("SHIM_MISC"), "unblock"], preload=[path_of("TRSHIM_LIB")],
              extra={"TRSHIM_DIR": d, "TRSHIM_TEST_BLOCKER": blocker})
    w = warnings(p.stderr)
    eq(len(w), 1, "one trshim: line (%s)" % w)
    check("ring file" in w[0] and d in w[0] and "memory only" in w[0], "the warning: %s" % w)
    names = os.listdir(d)
    eq([n for n in names if n.endswith(".ring")], [], "ring files")
    t = None
    for n in names:
        t = load_trace(os.path.join(d, n), Failure)
    check(t is not None, "no trace")
    t["calls"] = [dict(zip(CALL_FIELDS, x)) for x in t["calls"]]
    eq(t["ring"], {"file": None, "capacity": 131072, "first": 0, "next": 3, "lost": 0}, "ring")
    eq([(x["op"], x["seq"], x["count"], x["rc"]) for x in t["calls"]], [("AllReduce", i, i, 0) for i in (1, 2, 3)],
       "calls")
    h, step, cps = allreduce_fingerprint(3)
    eq((t["comms"][0]["slot"], t["comms"][0]["fingerprint"]), (0, {"seq": 3, "hash": "0x%x" % h, "step": 64,
                                                                   "checkpoints": []}), "comm")


# secrets planted in every place a trace could take them from: the planted
# values (PLANTED) must appear in no file of the folder and no output of tranalyze
REDACT_ENV = {
    "CUDA_PASSWD": "pw-cuda-1",
    "TORCH_AUTH": "Bearer tok-bearer-2",
    "MASTER_ADDR": "tcp://admin:pw-url-3@host:1234",
    "TORCH_NCCL_API_KEY": "key-4",
    "NCCL_FOO_SECRET": "secret-5",
    "NCCL_MY_SESSION": "sess-6",
    "NCCL_CONN_STR": "conn-7",
    "PYTORCH_REPO": "hf_abcdefghijklmnopqrstu8",
    "NCCL_SOCKET_IFNAME": "https://host/p?x=1&access_token=q-14&y=2",
    "TRSHIM_REDACT": "nccl_conn*",
    "NCCL_IB_PKEY": "0x8001",
    "NCCL_DEBUG": "WARN",
}
REDACT_ARGS = ["--hf-token=tok-cli-9", "--password", "pw-cli-10", "--api-key", "key-cli-11",
               "hf_ABCDEFGHIJKLMNOPQRSTUV", "https://user:pw-cli-12@host/x?token=q-13", "--lr", "0.1"]
PLANTED = ["pw-cuda-1", "tok-bearer-2", "pw-url-3", "key-4", "secret-5", "sess-6", "conn-7",
           "abcdefghijklmnopqrstu8", "tok-cli-9", "pw-cli-10", "key-cli-11", "ABCDEFGHIJKLMNOPQRSTUV",
           "pw-cli-12", "q-13", "q-14"]


def case_redact(c):
    """Secrets in variables of every kind, inside a URL and on the command
    line reach no file (traces, the ring) and no output of tranalyze;
    harmless values stay."""
    p = c.run([path_of("SHIM_MISC"), "basic"] + REDACT_ARGS, preload=[path_of("TRSHIM_LIB")], extra=REDACT_ENV)
    check(not any(x in p.stderr for x in PLANTED), "a secret on stderr: %s" % p.stderr)
    (t,) = load_traces(c.traces)
    env = t["env"]
    eq({k: env.get(k) for k in REDACT_ENV},
       {"CUDA_PASSWD": "<redacted>", "TORCH_AUTH": "<redacted>", "MASTER_ADDR": "tcp://<redacted>@host:1234",
        "TORCH_NCCL_API_KEY": "<redacted>", "NCCL_FOO_SECRET": "<redacted>", "NCCL_MY_SESSION": "<redacted>",
        "NCCL_CONN_STR": "<redacted>", "PYTORCH_REPO": "<redacted>",
        "NCCL_SOCKET_IFNAME": "https://host/p?x=1&access_token=<redacted>&y=2", "TRSHIM_REDACT": "nccl_conn*",
        "NCCL_IB_PKEY": "0x8001", "NCCL_DEBUG": "WARN"}, "the environment in the trace")
    eq(t["cmdline"][1:], ["basic", "--hf-token=<redacted>", "--password", "<redacted>", "--api-key", "<redacted>",
                          "<redacted>", "https://<redacted>@host/x?token=<redacted>", "--lr", "0.1"], "cmdline")
    outs = {}
    for how in ([], ["--json"], ["--markdown"]):
        a = subprocess.run([path_of("TRANALYZE")] + how + [c.traces], capture_output=True, text=True, timeout=120)
        outs[" ".join(how) or "text"] = a.stdout + a.stderr
    pictures = {"html": os.path.join(c.tmp, "report.html"), "timeline": os.path.join(c.tmp, "timeline.json")}
    a = subprocess.run([path_of("TRANALYZE"), "--html", pictures["html"], "--timeline", pictures["timeline"],
                        c.traces], capture_output=True, text=True, timeout=120)
    for k, f in pictures.items():
        with open(f, encoding="utf-8") as fh:
            outs["--" + k] = fh.read()
    for name in sorted(os.listdir(c.traces)):
        with open(os.path.join(c.traces, name), "rb") as f:
            outs[name] = f.read().decode("latin-1")
    check(any(n.endswith(".ring") for n in outs), "no ring file kept: %s" % sorted(outs))
    for where, text in outs.items():
        found = [x for x in PLANTED if x in text]
        eq(found, [], "secrets in %s" % where)


def case_env_change(c):
    """The environment of each communicator from the live environment:
    what the program set before its first communicator (NCCL_ALGO, absent
    from /proc/self/environ) is the trace's env, what it changed before the
    second is in env_changes."""
    c.run([path_of("SHIM_MISC"), "envchange"], preload=[path_of("TRSHIM_LIB")], extra={"NCCL_ALGO": None,
                                                                                      "NCCL_PROTO": None})
    (t,) = load_traces(c.traces)
    eq((t["env"].get("NCCL_ALGO"), t["env"].get("NCCL_PROTO")), ("Tree", None), "env at the first communicator")
    eq(len(t["comms"]), 2, "communicators")
    eq(t["env_changes"], [{"comm": t["comms"][1]["id"], "set": {"NCCL_PROTO": "Simple"}, "unset": ["NCCL_ALGO"]}],
       "env_changes")
    eq(t["env_changes_dropped"], 0, "env_changes_dropped")


def case_config_mismatch(c):
    """A 4-rank job whose rank 2 runs with NCCL_ALGO=Tree, the others Ring
    (set by a wrapper, as a per-node profile would): tranalyze's only
    finding is config_mismatch naming rank 2 and both values."""
    wrap = 'if [ "$RANK" = 2 ]; then export NCCL_ALGO=Tree; else export NCCL_ALGO=Ring; fi; exec "$@"'
    c.launch(4, ["sh", "-c", wrap, "sh", path_of("SHIM_TRAIN_DP_SIM"), "20", "64"])
    traces = load_traces(c.traces)
    eq(sorted((t["rank"], t["env"].get("NCCL_ALGO")) for t in traces),
       [(0, "Ring"), (1, "Ring"), (2, "Tree"), (3, "Ring")], "NCCL_ALGO in the traces")
    a = subprocess.run([path_of("TRANALYZE"), "--json", c.traces], capture_output=True, text=True, timeout=120)
    eq(a.returncode, 1, "tranalyze exit status (findings)")
    out = json.loads(a.stdout)
    eq([(f["kind"], f["subkind"], f["ranks"]) for f in out["findings"]], [("config_mismatch", "env", [2])],
       "findings")
    eq(out["findings"][0]["mismatches"], [{"name": "NCCL_ALGO", "value": "Ring", "odd_value": "Tree",
                                           "odd_ranks": [2], "values": 2}], "mismatches")
    eq(out["environment"].get("NCCL_ALGO"), None, "NCCL_ALGO is not shared")
    eq({r["rank"]: r["environment"]["env"].get("NCCL_ALGO") for r in out["ranks"]},
       {0: "Ring", 1: "Ring", 2: "Tree", 3: "Ring"}, "per-rank NCCL_ALGO in --json")
    eq({r["rank"]: r["environment"]["system"]["nccl"] for r in out["ranks"]}, {r: "2.32.3" for r in range(4)},
       "per-rank NCCL version")
    t = subprocess.run([path_of("TRANALYZE"), c.traces], capture_output=True, text=True, timeout=120)
    first = t.stdout.splitlines()[2] if len(t.stdout.splitlines()) > 2 else ""
    eq(first, "ROOT CAUSE: config_mismatch / env", "the text's root cause line")
    check("NCCL_ALGO is Tree on rank 2, Ring on the others" in t.stdout, "the message: %s" % t.stdout[:800])


def case_settings(c):
    # bytes that are not UTF-8 (\udcff is byte 0xff) in the command line and environment
    p = c.run([path_of("SHIM_MISC"), "basic", "arg\udcff\u00e9"], preload=[path_of("TRSHIM_LIB")],
              extra={"TRSHIM": "maybe", "TRSHIM_STACK_DEPTH": "deep", "TRSHIM_PYSTACK_DEPTH": "257", "TRSHIM_RING": "-5",
                     "TRSHIM_HANG_SEC": "soon", "TRSHIM_SNAPSHOT_SIGNAL": "KILL", "TRSHIM_COMPLETION": "yes",
                     "TRSHIM_KEEP_RING": "2", "TRSHIM_QUIET": "yes", "NCCL_ODD\udcfe": "v\udcc3\u00e9"})
    w = warnings(p.stderr)
    eq(len(w), 9, "one trshim: line per bad setting (%s)" % w)
    for var in ("TRSHIM=", "TRSHIM_STACK_DEPTH=", "TRSHIM_PYSTACK_DEPTH=", "TRSHIM_RING=", "TRSHIM_HANG_SEC=",
                "TRSHIM_SNAPSHOT_SIGNAL=", "TRSHIM_COMPLETION=", "TRSHIM_KEEP_RING=", "TRSHIM_QUIET="):
        check(any(var in l for l in w), "no warning about %s" % var)
    (t,) = load_traces(c.traces)
    eq(t["settings"], {"enabled": True, "dir": c.traces, "stack_depth": 64, "pystack_depth": 64, "ring": 131072,
                       "hang_sec": 300, "snapshot_signal": int(signal.SIGUSR1), "completion": True,
                       "keep_ring": False, "quiet": False}, "settings")
    eq(t["cmdline"][1:], ["basic", "arg?\u00e9"], "cmdline with a byte that is not UTF-8")
    eq(t["env"].get("NCCL_ODD?"), "v?\u00e9", "environment with bytes that are not UTF-8")
    eq(len(t["calls"]), 5, "calls")


def allreduce_fingerprint(n, interval=64):
    """(hash, step, checkpoints) of n float32 sum AllReduces of counts 1..n."""
    return ring.fingerprint([(0, 7, 0, None, i) for i in range(1, n + 1)], interval)


def case_ring(c):
    """TRSHIM_RING=64 and 200 calls: the trace and the ring file hold exactly
    the newest 64; numbering and fingerprints cover all 200."""
    c.run([path_of("SHIM_MISC"), "loop", "200"], preload=[path_of("TRSHIM_LIB")],
          extra={"TRSHIM_RING": "64", "TRSHIM_STACK_DEPTH": "0"})
    (t,) = load_traces(c.traces)
    eq([(x["op"], x["seq"], x["count"]) for x in t["calls"]],
       [("AllReduce", i, i) for i in range(137, 201)], "calls kept")
    eq(t["ring"], {"file": ring_path(c.traces, t), "capacity": 64, "first": 136, "next": 200,
                   "lost": 136}, "ring")
    eq(t["dropped"], 136, "dropped")
    eq(t["comms"][0]["colls"], 200, "collectives numbered past the ring")
    eq({x["stack"] for x in t["calls"]}, {-1}, "no stacks with TRSHIM_STACK_DEPTH=0")
    eq(t["settings"]["ring"], 64, "settings.ring")
    h, step, cps = allreduce_fingerprint(200)
    eq(t["comms"][0]["fingerprint"], {"seq": 200, "hash": "0x%x" % h, "step": 64,
                                      "checkpoints": [[s, "0x%x" % v] for s, v in cps]}, "fingerprint")
    eq([s for s, _ in cps], [64, 128, 192], "checkpoint seqs")
    # rank: no RANK variable, so the rank in the first communicator
    eq((t["rank"], t["rank_source"], t["device"]), (0, "comm", 0), "rank from the communicator")
    rg = check_ring_matches(t, "ring")
    eq([(r["index"], r["seq"], r["count"]) for r in rg["records"]], [(i - 1, i, i) for i in range(137, 201)],
       "ring records")
    eq((rg["header"]["head"], rg["header"]["capacity"], rg["header"]["state_name"]), (200, 64, "exited"),
       "ring header")
    eq(rg["stacks"], {}, "no stacks with TRSHIM_STACK_DEPTH=0")


def case_ring_file(c):
    """The ring file of a clean run: where, how big, its header, and the same
    calls, communicator and stacks as the JSON trace."""
    p = c.run([path_of("SHIM_MISC"), "basic"], preload=[path_of("TRSHIM_LIB")])
    (t,) = load_traces(c.traces)
    files = ring_files(c.traces)
    eq(files, [ring_path(c.traces, t)], "ring files")
    eq(t["ring"], {"file": files[0], "capacity": 131072, "first": 0, "next": 5, "lost": 0}, "ring")
    rg = check_ring_matches(t, "basic")
    h = rg["header"]
    cap = 131072
    eq((h["version"], h["capacity"], h["max_comms"], h["fp_interval"], h["off_comms"], h["off_records"],
        h["off_blobs"], h["blob_bytes"], h["file_bytes"]),
       (1, cap, 1024, 64, 4096, 4096 + 1024 * 1024, 4096 + 1024 * 1024 + cap * 128, 32 << 20,
        4096 + 1024 * 1024 + cap * 128 + (32 << 20)), "layout")
    st = os.stat(files[0])
    eq(st.st_size, h["file_bytes"], "file size")
    check(st.st_blocks * 512 < h["file_bytes"] - (16 << 20),
          "the file is not sparse: %d bytes on disk" % (st.st_blocks * 512))
    eq((h["pid"], h["env_rank"], h["world_size"], h["local_rank"], h["state_name"], h["signo"], h["head"],
        h["ncomms"], h["stack_depth"], h["stacks_dropped"], h["comms_dropped"]),
       (t["pid"], -1, -1, -1, "exited", 0, 5, 1, 64, 0, 0), "header")
    check(h["end_ns"] >= t["calls"][-1]["exit_ns"], "end_ns before the last call")
    check(h["start_mono_ns"] == t["clock"]["monotonic_ns"] and h["start_realtime"] == t["clock"]["realtime"],
          "start clocks")
    eq(h["job_id"], t["job"]["id"] if t["job"]["source"] not in ("comm", "process") else "", "job id")
    eq([r["seq"] for r in rg["records"]], [1, 2, 3, 4, 5], "records")
    k = rg["comms"][0]
    eq((k["from_uid"], k["parent"], k["blocking"], ring.ENDS[k["end_kind"]]), (1, -1, 1, "Destroy"), "comm slot")
    # modules come before the stacks that use them, every frame of the
    # program's own code is in a module
    used = {t["calls"][0]["stack"]}
    for i in used:
        m = ring.module_of(rg, rg["stacks"][i][0])
        check(m and m["path"] == path_of("SHIM_MISC"), "innermost frame's module: %s" % m)
    eq(p.returncode, 0, "exit status")


def case_ring_kill(c):
    """SIGKILL after N calls: the ring file still has exactly those N calls
    (all returned), the communicator's count, and says RUNNING."""
    n = 37
    cmd = [path_of("SHIM_MISC"), "killme", str(n)]
    proc = subprocess.Popen(cmd, env=c.env(preload=[path_of("TRSHIM_LIB")]), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        marker = os.path.join(c.markers, "killme")
        t0 = time.monotonic()
        while not os.path.exists(marker) and proc.poll() is None and time.monotonic() - t0 < 60:
            time.sleep(0.02)
        check(os.path.exists(marker), "the program did not get through its calls (rc %s)" % proc.poll())
        with open(marker) as f:
            eq(int(f.read()), n, "calls made")
        proc.kill()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    sys.stdout.write("$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (" ".join(cmd), proc.returncode, out, err))
    eq(proc.returncode, -signal.SIGKILL, "killed")
    names = os.listdir(c.traces)
    eq([x for x in names if x.endswith(".json")], [], "JSON traces of a killed process")
    files = ring_files(c.traces)
    eq(len(files), 1, "ring files")
    rg = ring.read_ring(files[0])
    h = rg["header"]
    eq((h["pid"], h["state_name"], h["head"], h["end_ns"]), (proc.pid, "running", n, 0), "header")
    eq([(ring.OPS[r["op"]], r["index"], r["seq"], r["count"], ring.REC_STATES[r["state"]], r["rc"], r["comm"])
        for r in rg["records"]],
       [("AllReduce", i - 1, i, i, "returned", 0, 0) for i in range(1, n + 1)], "records")
    (k,) = rg["comms"]
    eq((ring.KINDS[k["kind"]], k["size"], k["rank"], k["init_done"], k["init_rc"], k["colls"], k["end_kind"]),
       ("InitRank", 1, 0, 1, 0, n, 0), "comm slot")
    hsh, step, cps = allreduce_fingerprint(n)
    eq((k["fp_seq"], k["fp_hash"], k["fp_step"], k["checkpoints"]), (n, hsh, 64, cps), "fingerprint")
    st = rg["records"][0]["stack"]
    check(st >= 0 and st in rg["stacks"], "the call's stack %d is in the ring" % st)
    m = ring.module_of(rg, rg["stacks"][st][0])
    check(m and m["path"] == path_of("SHIM_MISC") and m["build_id"], "innermost frame's module: %s" % m)


def case_ring_torn(c):
    """A record whose stamp is not its index + 1 (torn mid-write, or a slot
    that holds another index) is not read."""
    c.run([path_of("SHIM_MISC"), "basic"], preload=[path_of("TRSHIM_LIB")])
    (path,) = ring_files(c.traces)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    h = ring.parse_header(data)
    eq([r["index"] for r in ring.read_ring_bytes(bytes(data))["records"]], [0, 1, 2, 3, 4], "intact")

    def stamp_at(i, v):
        struct_off = h["off_records"] + (i % h["capacity"]) * h["record_bytes"]
        data[struct_off:struct_off + 8] = v.to_bytes(8, "little")

    stamp_at(4, 0)                      # the last one torn: its stamp cleared, fields half written
    stamp_at(2, 2 + h["capacity"] + 1)  # a slot stamped for another index
    torn = os.path.join(c.tmp, "torn.ring")
    with open(torn, "wb") as f:
        f.write(data)
    rg = ring.read_ring(torn)
    eq([(r["index"], r["seq"]) for r in rg["records"]], [(0, 1), (1, 2), (3, 4)], "records kept")


def case_fingerprint(c):
    """3200 collectives: the checkpoint list fills (48) at 3072, halves, and
    goes on every 128; the hashes are exactly the documented function."""
    n = 3200
    c.run([path_of("SHIM_MISC"), "loop", str(n)], preload=[path_of("TRSHIM_LIB")],
          extra={"TRSHIM_RING": "64", "TRSHIM_STACK_DEPTH": "0", "TRSHIM_NANCHECK": "off"})
    (t,) = load_traces(c.traces)
    h, step, cps = allreduce_fingerprint(n)
    eq(step, 128, "model step")
    eq([s for s, _ in cps], list(range(128, 3201, 128)), "model checkpoints")
    eq(t["comms"][0]["fingerprint"], {"seq": n, "hash": "0x%x" % h, "step": 128,
                                      "checkpoints": [[s, "0x%x" % v] for s, v in cps]}, "fingerprint")
    check_ring_matches(t, "fingerprint")


def case_disabled(c):
    p = c.run([path_of("SHIM_MISC"), "basic"], preload=[path_of("TRSHIM_LIB")], extra={"TRSHIM": "0"})
    eq(warnings(p.stderr), [], "warnings")
    check(not os.path.exists(c.traces), "TRSHIM=0 wrote traces")


def case_nocuda(c):
    pre = [path_of("TRSHIM_LIB")]
    for cmd in ([path_of("SHIM_MISC"), "nocuda"], ["sh", "-c", "true"], [sys.executable, "-c", "pass"]):
        p = c.run(cmd, preload=pre, extra={"TRSHIM_STACK_DEPTH": "bad"})
        eq(warnings(p.stderr), [], "a process that never records says nothing")
    check(not os.path.exists(c.traces), "a process that never called CUDA wrote something")


def case_fork(c):
    p = c.run([path_of("SHIM_MISC"), "fork"], preload=[path_of("TRSHIM_LIB")])
    pids = re.findall(r"pid (\d+)", p.stdout)
    (t,) = load_traces(c.traces)
    eq(str(t["pid"]), pids[-1], "the trace is the parent's")
    eq([(x["op"], x["seq"]) for x in t["calls"]], [("AllReduce", 1), ("AllReduce", 2)], "parent's calls only")


def case_forkfirst(c):
    p = c.run([path_of("SHIM_MISC"), "forkfirst"], preload=[path_of("TRSHIM_LIB")])
    pids = re.findall(r"pid (\d+)", p.stdout)
    eq(len(pids), 1, "one recording process")
    (t,) = load_traces(c.traces)
    eq(str(t["pid"]), pids[0], "the child that used NCCL wrote its own trace")
    eq([(x["op"], x["seq"], x["count"]) for x in t["calls"]], [("AllReduce", 1, 3)], "child's calls")


def case_sigign(c):
    c.run([path_of("SHIM_MISC"), "sigign"], preload=[path_of("TRSHIM_LIB")])
    (t,) = load_traces(c.traces)
    eq(t["end"]["reason"], "exit", "an ignored SIGINT is no reason to write")
    eq([x["seq"] for x in t["calls"]], [1], "calls")


def case_rank_sources(c):
    for env, rank, source in (({"OMPI_COMM_WORLD_RANK": "5"}, 5, "OMPI_COMM_WORLD_RANK"),
                              ({"PMI_RANK": "6", "SLURM_PROCID": "9"}, 6, "PMI_RANK"),
                              ({"SLURM_PROCID": "7", "SLURM_JOB_ID": "123", "SLURM_STEP_ID": "4"}, 7,
                               "SLURM_PROCID"),
                              ({"RANK": "3", "TRSHIM_JOB_ID": "my job/1", "TORCHELASTIC_RUN_ID": "abc"}, 3,
                               "RANK")):
        shutil.rmtree(c.traces, ignore_errors=True)
        env["TRSIM_SHM_TAG"] = None      # tests/run sets one: it would name the job
        c.run([path_of("SHIM_MISC"), "basic"], preload=[path_of("TRSHIM_LIB")], extra=env)
        (t,) = load_traces(c.traces)
        eq((t["rank"], t["rank_source"]), (rank, source), "rank from %s" % env)
        if "TRSHIM_JOB_ID" in env:
            eq(t["job"], {"id": "my job/1", "source": "TRSHIM_JOB_ID"}, "job")
            check(t["_name"].startswith("trshim.my_job_1.r3."), "file name %s" % t["_name"])
        elif "SLURM_JOB_ID" in env:
            eq(t["job"], {"id": "123.4", "source": "SLURM_JOB_ID"}, "job")
        else:
            eq(t["job"]["source"], "comm", "job source")
            eq(t["job"]["id"], t["comms"][0]["id"], "job id")


def case_default_dir(c):
    """No TRSHIM_DIR: ./traces of the folder the process started in, even
    after it changed folder."""
    c.run([path_of("SHIM_MISC"), "chdir"], preload=[path_of("TRSHIM_LIB")], extra={"TRSHIM_DIR": None},
          cwd=c.tmp)
    (t,) = load_traces(c.traces)
    eq(t["settings"]["dir"], "./traces", "settings.dir")
    eq(len(t["calls"]), 1, "calls")


def case_dlopen(c):
    """NCCL reached only through a library loaded with RTLD_LOCAL (as Python
    loads a CUDA extension): found by its soname."""
    cmd = [path_of("SHIM_DLOPEN"), path_of("SHIM_PLUGIN")]
    plain = c.run(cmd)
    p = c.run(cmd, preload=[path_of("TRSHIM_LIB")])
    eq(warnings(p.stderr), [], "warnings")
    eq(p.stdout, plain.stdout, "output under the shim")
    (t,) = load_traces(c.traces)
    eq([(x["op"], x["seq"], x["count"], x["rc"]) for x in t["calls"]], [("AllReduce", i, 4, 0) for i in (1, 2, 3)],
       "calls")
    eq([(k["kind"], k["size"], k["rank"], k["end"]["kind"]) for k in t["comms"]], [("InitRank", 1, 0, "Destroy")],
       "comms")
    eq(t["versions"]["nccl"], 23203, "nccl version (the simulator's)")
    eq((t["nccl"]["version"], t["nccl"]["unknown_functions"]), (23203, []), "the library: all its functions known")


def case_lifecycle(c):
    p = c.launch(2, [path_of("SHIM_MISC"), "lifecycle"])
    traces = load_traces(c.traces)
    ranks = by_rank(traces)
    eq(sorted(ranks), [0, 1], "ranks")
    for r, t in ranks.items():
        what = "rank %d" % r
        check_common(t, what)
        got = [(k["kind"], k["size"], k["rank"], k["blocking"], k["init"]["rc"], k["end"]["kind"], k["end"]["rc"])
               for k in t["comms"]]
        eq(got, [("InitRankScalable", 2, r, True, 0, "Revoke", 0), ("InitRankConfig", 2, r, True, 0, "Abort", 0),
                 ("InitRank", 2, r, True, 0, "Destroy", 0), ("InitRank", 2, r, True, 0, "Destroy", 0)],
           what + " comms")
        eq([(x["comm"], x["seq"], x["count"]) for x in t["calls"]], [(0, 1, 1), (1, 1, 2), (2, 1, 3), (3, 1, 4)],
           what + " calls (each on its own communicator, even on a reused handle)")
        check_site(t, t["comms"][0]["init"]["stack"], "misc_lifecycle", what + " InitRankScalable")
    for i in range(4):
        eq(ranks[0]["comms"][i]["id"], ranks[1]["comms"][i]["id"], "id of communicator %d on both ranks" % i)
    sys.stdout.write("(%s)\n" % p.stdout.strip())


def case_cxx(c):
    c.run([path_of("SHIM_CXX")], preload=[path_of("TRSHIM_LIB")])
    (t,) = load_traces(c.traces)
    ar = [x for x in t["calls"] if x["op"] == "AllReduce"]
    eq([x["seq"] for x in ar], list(range(1, 302)), "AllReduce seqs")
    check_site(t, ar[0]["stack"], "_Z14cxx_collectivei", "AllReduce")


def case_real(c):
    """The real libcudart/libnccl of this machine, the shim alone in front."""
    prog = path_of("SHIM_REAL")
    plain = c.run([prog], extra={"TRSHIM_DIR": os.path.join(c.tmp, "unused")})
    check(not os.path.exists(os.path.join(c.tmp, "unused")), "traces without the shim?")
    shim = c.run([prog], preload=[path_of("TRSHIM_LIB")])
    eq(shim.stdout, plain.stdout, "output under the shim (return codes, CUDA error state)")
    (t,) = load_traces(c.traces)
    printed = [l.split() for l in plain.stdout.splitlines() if " rc " in l]
    rc = {}
    ops = []
    for f in printed:
        name, code = f[0], int(f[2])
        if name in vocab.OPS:
            ops.append((name, code))
        rc[name] = code
    eq([(x["op"], x["rc"]) for x in t["calls"]], ops, "calls and their return codes")
    eq([(k["kind"], k["init"]["rc"]) for k in t["comms"]], [("InitAll", rc["InitAll"]), ("Split", rc["Split"])],
       "communicators and their init return codes")
    eq(t["versions"]["nccl"], int(re.search(r"nccl (\d+)", plain.stdout).group(1)), "nccl version")


def case_real_sim(c):
    """The example job, linked against the real libraries, run on the
    simulator with the shim in front of both."""
    c.launch(4, [path_of("SHIM_TRAIN_DP"), "20", "128"], preload=[path_of("TRSHIM_LIB"), path_of("TRSIM_LIB")])
    traces = load_traces(c.traces)
    ranks = by_rank(traces)
    eq(sorted(ranks), [0, 1, 2, 3], "ranks")
    for r, t in ranks.items():
        check_common(t, "rank %d" % r)
        want = [("Broadcast", 1, 128, "float32", None, 0)]
        want += [("AllReduce", 2 + i, 129, "float32", "avg", None) for i in range(20)]
        want += [("AllGather", 22, 128, "float32", None, None)]
        eq([(x["op"], x["seq"], x["count"], x["dtype"], x["redop"], x["root"]) for x in t["calls"]], want,
           "rank %d calls" % r)
        eq([(k["kind"], k["size"], k["rank"], k["end"]["kind"]) for k in t["comms"]],
           [("InitRank", 4, r, "Destroy")], "rank %d comms" % r)
        check_site(t, t["calls"][0]["stack"], "main", "Broadcast")
    eq(len({t["comms"][0]["id"] for t in traces}), 1, "one communicator id")


def disk_bytes(path):
    return os.stat(path).st_blocks * 512


def case_ring_lifetime(c):
    """The defaults on a 4-rank job of 1,000 collectives: one "recording to"
    line for the job (local rank 0), the ring files named after the job and
    removed by the clean exit; kept (TRSHIM_KEEP_RING=1), each holds the
    trace's records and takes at most 1 MiB of disk, and a rank's files
    together at most 2 MiB (docs/trace-format.md, "Disk"); TRSHIM_QUIET=1:
    no line."""
    prog = [path_of("SHIM_TRAIN_DP_SIM"), "1000", "64"]
    p = c.launch(4, prog, extra={"TRSHIM_KEEP_RING": None})
    traces = load_traces(c.traces)
    eq(sorted(t["rank"] for t in traces), [0, 1, 2, 3], "ranks")
    jobs = {t["job"]["id"] for t in traces}
    eq(len(jobs), 1, "one job")
    eq([l for l in p.stderr.splitlines() if l.startswith("trshim:")],
       ["trshim: recording to %s (job %s)" % (c.traces, jobs.pop())], "trshim: lines of the job")
    eq(ring_files(c.traces), [], "ring files after the clean exit")
    for t in traces:
        eq(len(t["calls"]), 1002, "rank %d: calls" % t["rank"])
        eq(t["ring"]["file"], ring_path(c.traces, t), "rank %d: ring.file" % t["rank"])
        eq(t["settings"]["keep_ring"], False, "settings.keep_ring")
    shutil.rmtree(c.traces)

    p = c.launch(4, prog, extra={"TRSHIM_QUIET": "1"})
    eq([l for l in p.stderr.splitlines() if l.startswith("trshim:")], [], "trshim: lines with TRSHIM_QUIET=1")
    traces = load_traces(c.traces)
    eq(ring_files(c.traces), sorted(ring_path(c.traces, t) for t in traces), "ring files kept")
    for t in traces:
        w = "rank %d" % t["rank"]
        check_ring_matches(t, w)
        ring_disk = disk_bytes(t["ring"]["file"])
        trace_disk = disk_bytes(os.path.join(c.traces, trace_file_name(t)))
        sys.stdout.write("%s: ring %d bytes of disk (%d apparent), trace %d\n" % (
            w, ring_disk, os.path.getsize(t["ring"]["file"]), trace_disk))
        check(ring_disk <= 1 << 20, "%s: the ring file takes %d bytes of disk" % (w, ring_disk))
        check(ring_disk + trace_disk <= 2 << 20, "%s: ring and trace take %d bytes" % (w, ring_disk + trace_disk))


def trace_file_name(t):
    return "trshim.%s.r%d.%s.%d.json" % (clean(t["job"]["id"])[:48], t["rank"], clean(t["host"], True), t["pid"])


def case_exports(c):
    lib = path_of("TRSHIM_LIB")
    with open(path_of("TRSHIM_MAP")) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    glob_part = text.split("global:")[1].split("local:")[0]
    allowed = {s.strip() for s in glob_part.replace("\n", " ").split(";") if s.strip()}
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    exported = {l.split()[-1] for l in out.splitlines() if l.strip()}
    sys.stdout.write("exported: %s\n" % sorted(exported))
    eq(sorted(exported - allowed), [], "exported symbols that are not wrapped functions")
    # exactly the vocabulary's WRAP functions, no NCCL function more
    nccl = set(vocab.WRAPPED)
    eq(sorted(nccl - exported), [], "NCCL wrappers missing")
    eq(sorted(n for n in exported if n.startswith("nccl") and n not in nccl), [], "NCCL functions exported "
       "that the vocabulary does not mark WRAP")
    # exactly the CUDA functions of include/trshim/cuda_calls.h
    eq(sorted(set(vocab.CUDA_FUNCS) - exported), [], "CUDA functions of cuda_calls.h without a wrapper")
    eq(sorted(n for n in exported if n.startswith("cu") and n not in vocab.CUDA_FUNCS), [],
       "CUDA functions exported that cuda_calls.h does not list")
    dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
    bad = [n for n in needed if re.search(r"cuda|nccl|unwind|trsim|stdc\+\+", n)]
    eq(bad, [], "libraries the shim must not link")


# ---- signals, completion on the GPU, hang watchdog (issue 6 items 3-5) ----------------------

FATAL = {"abort": signal.SIGABRT, "segv": signal.SIGSEGV, "overflow": signal.SIGSEGV, "bus": signal.SIGBUS,
         "fpe": signal.SIGFPE}
# what the program's own handler leaves (shim_signal.c): SIGSEGV's notes si_code SEGV_MAPERR and the null
# address; the stack overflow's, that it ran on the alternate stack
OWN_MARKERS = {("abort", "handler"): ["apphandler.6"], ("segv", "handler"): ["apphandler.11.1.1"],
               ("overflow", "alt"): ["apphandler.11.altstack"]}


def json_traces(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".json")) if os.path.isdir(d) else []


def poll_traces(c, want, limit=60):
    """Traces of c, read again and again (while the job runs) until want(traces) holds."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            traces = load_traces(c.traces)
            if want(traces):
                return traces
        except (Failure, ValueError, OSError):
            pass                  # a write in progress (its .tmp file), or none yet
        time.sleep(0.05)
    raise Failure("traces never became as expected; there are %s" % json_traces(c.traces))


def check_done(calls, what):
    """Every call completed on the GPU after it returned."""
    for x in calls:
        eq(x["gpu"], "done", "%s %s seq %d gpu" % (what, x["op"], x["seq"]))
        check(x["done_ns"] is not None and x["done_ns"] >= x["exit_ns"],
              "%s %s seq %d: done_ns %s before exit_ns %s" % (what, x["op"], x["seq"], x["done_ns"], x["exit_ns"]))


def popen_job(c, n, prog, extra=None):
    cmd = [path_of("TRSIM_LAUNCH"), "-n", str(n), "--timeout", "120", "--", "env",
           "LD_PRELOAD=" + path_of("TRSHIM_LIB")] + prog
    return cmd, subprocess.Popen(cmd, env=c.env(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def end_job(c, cmd, p, sig=signal.SIGTERM):
    """Sends sig to the launcher, which forwards it to the ranks; their output."""
    try:
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    sys.stdout.write("$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (" ".join(cmd), p.returncode, out, err))
    eq(p.returncode, 128 + sig, "launcher exit status")
    return out, err


def case_signal(c, mode, own=None):
    """A fatal signal (a real fault, or abort()): the trace is written with
    reason "signal" and the signal, the program's own handler still runs,
    and the process dies of that signal as it would without the shim."""
    sig = FATAL[mode]
    # no core files: the wait status still says which signal
    cmd = ["sh", "-c", 'ulimit -c 0; exec "$@"', "sh", path_of("SHIM_SIGNAL"), mode] + ([own] if own else [])
    p = c.run(cmd, preload=[path_of("TRSHIM_LIB")], want_rc=-sig, cwd=c.tmp)
    eq(p.stdout, "usr1: handler\n", "SIGUSR1 as the program sees it (the shim's snapshot handler)")
    eq(warnings(p.stderr), [], "warnings")
    eq(sorted(os.listdir(c.markers)), OWN_MARKERS.get((mode, own), []), "markers of the program's own handler")
    if mode == "overflow" and not own:
        # no alternate stack: no handler can run, the kernel kills the
        # process as it would without the shim (only the ring file is left)
        eq(json_traces(c.traces), [], "traces after a stack overflow without an alternate stack")
        return
    (t,) = load_traces(c.traces)
    check_common(t, "trace", reason="signal", signal_no=sig)
    eq([(x["op"], x["seq"], x["count"], x["rc"]) for x in t["calls"]], [("AllReduce", i, 16, 0) for i in (1, 2, 3)],
       "calls")
    check_done(t["calls"], "trace")
    check_site(t, t["calls"][0]["stack"], "signal_work", "AllReduce")


def case_snapshot(c, own=None):
    """SIGUSR1: a trace with reason "snapshot" while the process goes on; it
    later exits normally (reason "exit"); its own SIGUSR1 handler still runs."""
    cmd = [path_of("SHIM_SIGNAL"), "usr1"] + ([own] if own else [])
    p = subprocess.Popen(cmd, env=c.env(preload=[path_of("TRSHIM_LIB")]), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_markers(c, ["ready"])
        eq(json_traces(c.traces), [], "traces before the signal")
        p.send_signal(signal.SIGUSR1)
        (snap,) = poll_traces(c, lambda ts: len(ts) == 1)
        check(p.poll() is None, "the process ended on SIGUSR1")
        open(os.path.join(c.markers, "go"), "w").close()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    sys.stdout.write("$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (" ".join(cmd), p.returncode, out, err))
    eq(p.returncode, 0, "exit status")
    eq(out, "usr1: handler\n", "SIGUSR1 as the program sees it")
    eq(warnings(err), [], "warnings")
    eq(os.path.exists(os.path.join(c.markers, "apphandler.10")), own is not None, "the program's own handler ran")
    check_common(snap, "snapshot", reason="snapshot", signal_no=signal.SIGUSR1)
    eq([(x["op"], x["seq"], x["count"]) for x in snap["calls"]], [("AllReduce", i, 16) for i in (1, 2, 3)],
       "calls in the snapshot")
    check_done(snap["calls"], "snapshot")
    (t,) = load_traces(c.traces)
    check_common(t, "final trace")
    eq([(x["op"], x["seq"], x["count"]) for x in t["calls"]],
       [("AllReduce", i, 16) for i in (1, 2, 3)] + [("AllReduce", i, 32) for i in (4, 5)], "calls at exit")
    check_done(t["calls"], "final trace")
    check_site(t, t["calls"][3]["stack"], "signal_more", "AllReduce #4")


def case_snapshot_off(c):
    """TRSHIM_SNAPSHOT_SIGNAL=off: SIGUSR1 keeps its default action (the
    process dies of it, without a trace)."""
    cmd = [path_of("SHIM_SIGNAL"), "usr1"]
    p = subprocess.Popen(cmd, env=c.env({"TRSHIM_SNAPSHOT_SIGNAL": "off"}, preload=[path_of("TRSHIM_LIB")]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_markers(c, ["ready"])
        p.send_signal(signal.SIGUSR1)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    sys.stdout.write("$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (" ".join(cmd), p.returncode, out, err))
    eq(p.returncode, -signal.SIGUSR1, "wait status")
    eq(out, "usr1: default\n", "SIGUSR1 as the program sees it")
    eq(json_traces(c.traces), [], "traces")


def gpu_expected(x, group_rc):
    """What gpu a call of a clean job has: untracked (None) for group calls,
    failed calls, ncclInProgress, and calls of a group that did not succeed."""
    if x["op"].startswith("Group") or x["rc"] != 0:
        return None
    if x["group"] and group_rc.get(x["group"]) != 0:
        return None
    return "done"


def case_complete_clean(c):
    """The job of case "job" (groups, p2p, threads, splits, a non-blocking
    communicator): every enqueued operation ends "done", done_ns >= exit_ns."""
    c.launch(4, [path_of("SHIM_JOB")])
    ranks = by_rank(load_traces(c.traces))
    eq(sorted(ranks), [0, 1, 2, 3], "ranks")
    for r, t in ranks.items():
        what = "rank %d" % r
        group_rc = {x["group"]: x["rc"] for x in t["calls"] if x["op"] == "GroupEnd" and x["depth"] == 1}
        tracked = 0
        for i, x in enumerate(t["calls"]):
            w = "%s call %d (%s seq %d rc %d)" % (what, i, x["op"], x["seq"], x["rc"])
            want = gpu_expected(x, group_rc)
            eq(x["gpu"], want, w + " gpu")
            if want is None:
                eq(x["done_ns"], None, w + " done_ns")
            else:
                tracked += 1
                check(x["done_ns"] >= x["exit_ns"], "%s: done_ns %d before exit_ns %d" % (w, x["done_ns"],
                                                                                          x["exit_ns"]))
        # 14 + 1 collectives, splits 4-5, pipeline, 3 groups of 2, 2 exchanges, 80 on threads, teardown
        check(tracked >= 100, "%s: only %d operations tracked" % (what, tracked))
        eq([x["gpu"] for x in t["calls"] if x["rc"] == IN_PROGRESS], [None], what + ": the non-blocking AllReduce")
    # the ring headers: no hang, nothing pending at the end, the traces' memory
    ringhdr.check_clean(c.traces, ranks.values())


def case_complete_off(c):
    """TRSHIM_COMPLETION=0: nothing is tracked."""
    c.run([path_of("SHIM_MISC"), "basic"], preload=[path_of("TRSHIM_LIB")], extra={"TRSHIM_COMPLETION": "0"})
    (t,) = load_traces(c.traces)
    eq([(x["op"], x["seq"], x["gpu"], x["done_ns"]) for x in t["calls"]],
       [("AllReduce", i, None, None) for i in range(1, 6)], "calls")


def check_stuck_rank(t, r, reason, signal_no=None):
    """A trace of shim_stuck: ranks 0 and 2 issued AllReduce #4, which is
    enqueued (returned) but pending on the GPU; ranks 1 and 3 never issued it."""
    what = "rank %d" % r
    check_common(t, what, reason=reason, signal_no=signal_no)
    ar = t["calls"]
    eq([(x["op"], x["seq"], x["count"], x["redop"], x["rc"]) for x in ar],
       [("AllReduce", i, 16, "sum", 0) for i in (1, 2, 3)] + ([("AllReduce", 4, 8, "max", 0)] if r % 2 == 0 else []),
       what + " calls")
    check_done(ar[:3], what)
    check_site(t, ar[0]["stack"], "stuck_common", what + " AllReduce #1")
    if r % 2 == 0:
        x = ar[3]
        eq((x["gpu"], x["done_ns"]), ("pending", None), what + " AllReduce #4 on the GPU")
        check(x["exit_ns"] is not None and x["exit_ns"] >= x["enter_ns"], what + ": AllReduce #4 did not return")
        check_site(t, x["stack"], "stuck_extra", what + " AllReduce #4")


def case_complete_hang(c):
    """A collective two ranks issue and two never do: issued-and-stuck
    ("pending", returned) is told from never-issued (absent)."""
    cmd, p = popen_job(c, 4, [path_of("SHIM_STUCK")], {"TRSHIM_HANG_SEC": "0"})
    try:
        wait_markers(c, ["ready.%d" % r for r in range(4)])
        open(os.path.join(c.markers, "go"), "w").close()
        wait_markers(c, ["alive.%d" % r for r in range(4)])
    finally:
        out, err = end_job(c, cmd, p)
    eq(warnings(err), [], "warnings (no watchdog with TRSHIM_HANG_SEC=0)")
    ranks = by_rank(load_traces(c.traces))
    eq(sorted(ranks), [0, 1, 2, 3], "ranks")
    for r, t in ranks.items():
        check_stuck_rank(t, r, "signal", signal.SIGTERM)


def hang_line(rank, what, site, state):
    """The watchdog's line, as a regex; group 1: the seconds waited."""
    return re.compile(r"^trshim: hang: rank %d: %s%s %s after (\d+) s; trace written with end\.reason \"hang\", "
                      r"the job goes on$" % (rank, re.escape(what), " \\(called from %s\\)" % re.escape(site)
                                             if site else "", re.escape(state)))


def site_text(t, stack, module):
    """A call site as the watchdog names it: function+0xoff (module)."""
    f = t["stacks"][stack]["frames"][0]
    return "%s+0x%x (%s)" % (f["symbol"], f["symbol_offset"], module)


def check_lines(err, want):
    """Exactly one line per rank of want ({rank: regex}), none from other ranks."""
    lines = warnings(err)
    eq(len(lines), len(want), "watchdog lines: %s" % lines)
    for r, rx in want.items():
        mine = [l for l in lines if l.startswith("trshim: hang: rank %d: " % r)]
        eq(len(mine), 1, "watchdog lines of rank %d: %s" % (r, mine))
        m = rx.match(mine[0])
        check(m, "rank %d's line %r does not match %r" % (r, mine[0], rx.pattern))
        check(2 <= int(m.group(1)) <= 60, "rank %d waited %s s" % (r, m.group(1)))


def case_watchdog(c):
    """TRSHIM_HANG_SEC=2: each rank whose AllReduce #4 stays pending writes
    its trace (reason "hang") and prints one line naming the communicator,
    sequence number and call site; the job goes on."""
    cmd, p = popen_job(c, 4, [path_of("SHIM_STUCK")], {"TRSHIM_HANG_SEC": "2"})
    try:
        wait_markers(c, ["ready.%d" % r for r in range(4)])
        hung = by_rank(poll_traces(c, lambda ts: sorted(t["rank"] for t in ts) == [0, 2]))
        eq(json_traces(c.traces), sorted(hung[r]["_name"] for r in (0, 2)), "only the stuck ranks wrote")
        # while it hangs, the ring headers of ranks 0 and 2 name AllReduce #4; 1 and 3 wait for nothing
        ringhdr.check_hang(c.traces, {0: ("AllReduce", 4), 2: ("AllReduce", 4)}, 2, 4)
        open(os.path.join(c.markers, "go"), "w").close()
        wait_markers(c, ["alive.%d" % r for r in range(4)])      # every rank went on
    finally:
        out, err = end_job(c, cmd, p)
    for r, t in hung.items():
        check_stuck_rank(t, r, "hang")
    comm = hung[0]["comms"][0]["id"]
    check_lines(err, {r: hang_line(r, "AllReduce seq 4 on communicator %s" % comm,
                                   site_text(hung[r], hung[r]["calls"][3]["stack"], "shim_stuck"),
                                   "has not completed on the GPU") for r in (0, 2)})
    ranks = by_rank(load_traces(c.traces))
    for r, t in ranks.items():
        check_stuck_rank(t, r, "signal", signal.SIGTERM)


def case_watchdog_over(c):
    """The job of case "watchdog" whose ranks 1 and 3 issue AllReduce #4
    late (STUCK_LATE=1, after "go"): while it hangs the ring headers of
    ranks 0 and 2 name it (hang_sec 2, one stall, stall_rec its record,
    stall_since_ns its enqueue time, it alone pending); once it completed
    the hang is over (stall_ns 0, still one stall, nothing pending), and
    the watchdog's line was printed once per stuck rank."""
    cmd, p = popen_job(c, 4, [path_of("SHIM_STUCK")], {"TRSHIM_HANG_SEC": "2", "STUCK_LATE": "1"})
    stuck = {0: ("AllReduce", 4), 2: ("AllReduce", 4)}
    try:
        wait_markers(c, ["ready.%d" % r for r in range(4)])
        hung = by_rank(poll_traces(c, lambda ts: sorted(t["rank"] for t in ts) == [0, 2]))
        ringhdr.check_hang(c.traces, stuck, 2, 4)
        open(os.path.join(c.markers, "go"), "w").close()
        wait_markers(c, ["alive.%d" % r for r in range(4)])
        ringhdr.wait_hang_over(c.traces, stuck, 2)
        for r in (1, 3):
            ringhdr.check_idle(ringhdr.rings_by_rank(c.traces)[r]["header"], "rank %d" % r, 2)
    finally:
        out, err = end_job(c, cmd, p)
    comm = hung[0]["comms"][0]["id"]
    check_lines(err, {r: hang_line(r, "AllReduce seq 4 on communicator %s" % comm,
                                   site_text(hung[r], hung[r]["calls"][3]["stack"], "shim_stuck"),
                                   "has not completed on the GPU") for r in (0, 2)})


def case_watchdog_hang(c):
    """The hung job of case "hang-*" with TRSHIM_HANG_SEC=2: ranks 0-2 wait for
    AllReduce #3 on the GPU (rank 1 also inside ncclCommDestroy, rank 2 inside
    ncclGroupEnd: the older GPU operation is the one named), rank 3 inside
    ncclCommSplit; one line each, then SIGTERM gives the usual traces."""
    cmd, p = popen_job(c, 4, [path_of("SHIM_HANG")], {"TRSHIM_HANG_SEC": "2"})
    try:
        wait_markers(c, ["ready.%d" % r for r in range(4)])
        hung = by_rank(poll_traces(c, lambda ts: sorted(t["rank"] for t in ts) == [0, 1, 2, 3]))
    finally:
        out, err = end_job(c, cmd, p)
    for r, t in hung.items():
        eq(t["end"], {"reason": "hang", "signal": None, "in_call": r != 0}, "rank %d hang trace end" % r)
    comm = hung[0]["comms"][0]["id"]
    want = {}
    for r in (0, 1, 2):
        x = [x for x in hung[r]["calls"] if x["op"] == "AllReduce"][2]
        eq((x["seq"], x["gpu"], x["done_ns"]), (3, "pending", None), "rank %d AllReduce #3" % r)
        want[r] = hang_line(r, "AllReduce seq 3 on communicator %s" % comm,
                            site_text(hung[r], x["stack"], "shim_hang"), "has not completed on the GPU")
    split = hung[3]["comms"][1]
    want[3] = hang_line(3, "ncclCommSplit of communicator %s (new communicator %s)" % (comm, split["id"]),
                        site_text(hung[3], split["init"]["stack"], "shim_hang"), "has not returned")
    check_lines(err, want)
    check_hang(c, signal.SIGTERM)


def case_watchdog_host(c):
    """Host-side stalls alone (TRSHIM_COMPLETION=0, so no GPU operation is
    watched): rank 1 inside ncclCommDestroy, rank 2 inside ncclGroupEnd,
    rank 3 inside ncclCommSplit get one line each; rank 0, which waits in
    cudaStreamSynchronize (not a wrapped call), none."""
    cmd, p = popen_job(c, 4, [path_of("SHIM_HANG")], {"TRSHIM_HANG_SEC": "2", "TRSHIM_COMPLETION": "0"})
    try:
        wait_markers(c, ["ready.%d" % r for r in range(4)])
        hung = by_rank(poll_traces(c, lambda ts: sorted(t["rank"] for t in ts) == [1, 2, 3]))
        time.sleep(3)      # rank 0 had as long: still no line, no trace
        eq(json_traces(c.traces), sorted(hung[r]["_name"] for r in (1, 2, 3)), "traces of hung calls")
    finally:
        out, err = end_job(c, cmd, p)
    comm = hung[1]["comms"][0]["id"]
    ge = hung[2]["calls"][-1]
    eq((ge["op"], ge["exit_ns"]), ("GroupEnd", None), "rank 2's last call")
    split = hung[3]["comms"][1]
    check_lines(err, {
        1: hang_line(1, "ncclCommDestroy of communicator %s" % comm, None, "has not returned"),
        2: hang_line(2, "GroupEnd", site_text(hung[2], ge["stack"], "shim_hang"), "has not returned"),
        3: hang_line(3, "ncclCommSplit of communicator %s (new communicator %s)" % (comm, split["id"]),
                     site_text(hung[3], split["init"]["stack"], "shim_hang"), "has not returned")})
    for t in hung.values():
        eq({x["gpu"] for x in t["calls"]}, {None}, "rank %d: nothing tracked" % t["rank"])


# ---- NCCL 2.29-2.32 (issue 13) ---------------------------------------------------------------

def exports_of(version):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nccl", "exports",
                           version + ".txt")) as f:
        return f.read().split()


def case_nccl232(c):
    """shim_nccl232.c: *Config collectives numbered with the plain ones and
    their configs, one-sided calls numbered per peer, a simulated group that
    takes no number, suspend/resume, a grown communicator joined across old
    and new members, the loaded library's exports all known."""
    c.launch(4, [path_of("SHIM_NCCL232")])
    ranks = by_rank(load_traces(c.traces))
    eq(sorted(ranks), [0, 1, 2, 3], "ranks")
    cfg = {"maxCTAs": 4, "algSelection": "ring", "forceAlgSelection": 1, "userProfilerTag": 7}
    unset = {}          # every field unset (forceAlgSelection is written with an algSelection only)
    for r, t in ranks.items():
        what = "rank %d" % r
        check_common(t, what)
        nxt, prv = (r + 1) % 4, (r + 3) % 4
        eq(t["nccl"]["version"], 23203, what + " NCCL version")
        eq(t["nccl"]["unknown_functions"], [], what + " unknown NCCL functions")
        eq(t["nccl"]["exports"], len(exports_of("2.32.3")), what + " NCCL functions exported")
        confs = t["coll_configs"]
        world = [x for x in t["calls"] if x["comm"] == 0]
        got = [(x["op"], x["seq"], x["count"], x["redop"], x["root"], x["peer"],
                None if x["config"] is None else confs[x["config"]], x["signal"]) for x in world]
        want = [("AllReduce", 1, 64, "sum", None, None, None, None),
                ("AllReduce", 2, 64, "sum", None, None, cfg, None),
                ("AllReduce", 3, 64, "max", None, None, {"null": True}, None),
                ("Broadcast", 4, 64, None, 1, None, cfg, None),
                ("Reduce", 5, 64, "sum", 2, None, unset, None),
                ("AllGather", 6, 16, None, None, None, cfg, None),
                ("ReduceScatter", 7, 16, "sum", None, None, cfg, None),
                ("AlltoAll", 8, 16, None, None, None, cfg, None),
                ("Gather", 9, 16, None, 3, None, cfg, None),
                ("Scatter", 10, 16, None, 0, None, cfg, None),
                ("AllReduce", 11, 64, "sum", None, None, None, None),
                ("PutSignal", 1, 8, None, None, nxt, None, [0, 0]),
                ("Signal", 2, 0, None, None, nxt, None, [0, 0]),
                ("WaitSignal", 2, 2, None, None, prv, None, [0, 0]),
                ("AllReduce", 12, 1, "sum", None, None, None, None),
                ("AllReduce", 0, 64, "sum", None, None, None, None),    # in the simulated group
                ("Send", 0, 4, None, None, nxt, None, None),
                ("Recv", 0, 4, None, None, prv, None, None),
                ("AllReduce", 13, 64, "sum", None, None, None, None)]
        eq(got, want, what + " calls on world")
        eq(len(confs), 3, what + " distinct configs")
        sim = [x for x in t["calls"] if x["op"] in ("GroupStart", "GroupSimulateEnd")]
        eq([(x["op"], x["rc"]) for x in sim], [("GroupStart", 0), ("GroupSimulateEnd", 0)], what + " the group")
        eq(sim[0]["group"], sim[1]["group"], what + " the simulated group's number")
        w = t["comms"][0]
        eq((w["suspended"], w["suspends"], w["colls"], w["fingerprint"]["seq"]), (False, 1, 13, 13),
           what + " world: suspended, suspends, collectives, fingerprint")
        check_site(t, world[1]["stack"], "n232_configs", what + " AllReduceConfig")
        check_site(t, world[13]["stack"], "n232_signals", what + " WaitSignal")
        check_site(t, world[16]["stack"], "n232_simulate", what + " simulated Send")
        g = [k for k in t["comms"] if k["kind"] == "Grow"]
        eq([(k["size"], k["rank"], k["grow"]["ranks"]) for k in g], [(4, r, 4)], what + " grown communicator")
        gi = t["comms"].index(g[0])
        eq([(x["op"], x["seq"]) for x in t["calls"] if x["comm"] == gi], [("AllReduce", 1)], what + " calls on grown")
    fp = {t["comms"][0]["fingerprint"]["hash"] for t in ranks.values()}
    eq(len(fp), 1, "world's fingerprint is the same on every rank (the simulated group left no trace in it)")
    pair_id = ranks[0]["comms"][1]["id"]
    g = {r: [k for k in t["comms"] if k["kind"] == "Grow"][0] for r, t in ranks.items()}
    uid = g[0]["grow"]["uid"]
    check(uid is not None, "the root of the grow records the unique id's hash")
    eq([(g[r]["parent"], g[r]["grow"]["uid"]) for r in range(4)],
       [(pair_id, uid), (pair_id, None), (None, uid), (None, uid)], "grow: parents and unique ids")
    eq(g[0]["id"], g[1]["id"], "grown communicator's id on the existing members")
    eq((g[2]["id"], g[3]["id"]), (uid, uid), "grown communicator's id on the new members: the unique id's hash")


def case_newer_nccl(c):
    """An NCCL exporting functions the vocabulary does not know: named in the
    trace (and once on stderr); tranalyze warns (tests/analyzer)."""
    cmd = [path_of("SHIM_DLOPEN"), path_of("SHIM_PLUGIN_NEWER")]
    plain = c.run(cmd)
    p = c.run(cmd, preload=[path_of("TRSHIM_LIB")])
    eq(p.stdout, plain.stdout, "output under the shim")
    w = warnings(p.stderr)
    eq(len(w), 1, "one warning")
    check("ncclFutureAllReduce" in w[0], "the warning names the first unknown function: %s" % w[0])
    (t,) = load_traces(c.traces)
    eq(t["nccl"]["unknown_functions"], ["ncclFutureAllReduce", "ncclFutureQuery"], "unknown NCCL functions")
    eq(os.path.basename(t["nccl"]["library"]), "libnccl.so.2", "the library")
    rg = ring_of(t)
    eq((rg["nccl"] or {}).get("unknown"), ["ncclFutureAllReduce", "ncclFutureQuery"], "the ring's NCCL blob")


CASES = {
    "job": case_job, "initall": case_initall, "hang-timeout": case_hang_timeout, "hang-sigint": case_hang_sigint,
    "unwritable": case_unwritable, "settings": case_settings, "ring": case_ring, "ring-file": case_ring_file,
    "ring-kill": case_ring_kill, "ring-torn": case_ring_torn, "fingerprint": case_fingerprint,
    "ring-anon": case_ring_anon, "ring-lifetime": case_ring_lifetime, "redact": case_redact,
    "env-change": case_env_change, "config-mismatch": case_config_mismatch,
    "disabled": case_disabled, "nocuda": case_nocuda, "fork": case_fork, "forkfirst": case_forkfirst,
    "sigign": case_sigign, "dlopen": case_dlopen, "lifecycle": case_lifecycle, "default-dir": case_default_dir, "rank-sources": case_rank_sources, "cxx": case_cxx, "real": case_real,
    "real-sim": case_real_sim, "exports": case_exports, "nccl232": case_nccl232, "newer-nccl": case_newer_nccl,
    "signal": case_signal, "snapshot": case_snapshot, "snapshot-off": case_snapshot_off,
    "complete-clean": case_complete_clean, "complete-off": case_complete_off, "complete-hang": case_complete_hang,
    "watchdog": case_watchdog, "watchdog-over": case_watchdog_over, "watchdog-hang": case_watchdog_hang, "watchdog-host": case_watchdog_host,
}


def main():
    return run_case(CASES, Case, sys.argv, "test_shim.py", kept="traces")


if __name__ == "__main__":
    sys.exit(main())
