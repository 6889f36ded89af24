#!/usr/bin/env python3
"""Runs one job program as N ranks under trsim-launch with libtrshim.so
preloaded (TRSHIM_DIR = a fresh folder), lets the launcher's --timeout end a
hung job (SIGTERM), then runs tranalyze --json on the traces and checks its
answer: exit status, and for each expected finding from the top: kind,
communicator (by its member ranks), sequence number, culprit ranks, others,
the call site's function name (culprit side, and the others' side).

    run_job.py LAUNCH SHIM TRANALYZE WORKDIR NRANKS TIMEOUT EXPECT_JSON PROG [ENV=VALUE | --LAUNCHER-OPTION...]

With "rings": true in EXPECT_JSON (and TRSHIM_KEEP_RING=1: a clean exit
keeps its ring) the ring files' headers are checked too: each is its JSON
trace's memory exactly (devices, the first failed allocation: an out of
memory finding's bytes), says no hang and the operations pending that
its trace shows pending (a hung rank's, written at SIGTERM); and tranalyze
on the ring files alone gives the same out-of-memory findings (kind, rank,
bytes, call site function) and the same peak and failure count per rank as on the whole folder.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import ringhdr  # noqa: E402
from checks import Failure  # noqa: E402
from trace import load_trace  # noqa: E402


def fail(msg, out=""):
    print(out[-6000:])
    print("FAIL:", msg)
    sys.exit(1)


def main():
    launch, shim, tranalyze, work, n, timeout, expect, prog = sys.argv[1:9]
    extra = dict(kv.split("=", 1) for kv in sys.argv[9:] if not kv.startswith("--"))
    launch_opts = [kv for kv in sys.argv[9:] if kv.startswith("--")]
    exp = json.loads(expect)
    name = os.path.basename(prog)
    # one folder per program and environment: the same program runs as several tests at once
    tag = "".join("-" + re.sub(r"[^A-Za-z0-9]", "_", kv) for kv in sys.argv[9:])
    traces = os.path.join(work, "%s-n%s%s-traces" % (name, n, tag))
    shutil.rmtree(traces, ignore_errors=True)
    os.makedirs(traces)
    env = dict(os.environ)
    env.update(extra)
    env["TRSHIM_DIR"] = traces
    env.pop("LD_PRELOAD", None)
    p = subprocess.run([launch, "-n", n, "--timeout", timeout, "--grace", "3"] + launch_opts + ["--", "env", "LD_PRELOAD=" + shim, prog],
                       env=env, capture_output=True, text=True, timeout=int(timeout) + 60)
    log = "$ %s (%d ranks): status %d\n%s%s" % (name, int(n), p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    if any(f.get("kind") == "nan" for f in exp["findings"]):
        # the NaN jobs depend on the shim's NaN/Inf checks: say so when absent
        for f in os.listdir(traces):
            if f.endswith(".json"):
                with open(os.path.join(traces, f)) as fh:
                    d = json.load(fh)
                if "checks" not in d:
                    fail("%s has no NaN/Inf checks (trace \"checks\"): the shim's checks are needed "
                         "(tests/analyzer/jobs/meson.build: analyzer_nan_job_tests)" % f, log)
    if not any(f.endswith(".json") for f in os.listdir(traces)):
        fail("the job left no trace in %s: is libtrshim.so (%s) complete?" % (traces, shim), log)
    q = subprocess.run([tranalyze, "--json", traces], capture_output=True, text=True, timeout=120)
    t = subprocess.run([tranalyze, traces], capture_output=True, text=True, timeout=120)
    log += "\n$ tranalyze %s: status %d\n%s%s" % (traces, t.returncode, t.stdout, t.stderr)
    if q.returncode != exp["exit"]:
        fail("tranalyze exit status %d, expected %d" % (q.returncode, exp["exit"]), log)
    res = json.loads(q.stdout)
    got = res["findings"]
    if not exp["findings"] and got:
        fail("a clean job gave findings", log)
    if len(got) < len(exp["findings"]):
        fail("%d findings, expected %d" % (len(got), len(exp["findings"])), log)
    for i, w in enumerate(exp["findings"]):
        g = got[i]
        for key in ("kind", "seq", "ranks", "others", "subkind", "bytes", "cause", "op", "dtype", "limit"):
            if key in w and g.get(key) != w[key]:
                fail("finding %d: %s is %r, expected %r" % (i, key, g.get(key), w[key]), log)
        if g.get("kind") == "nan":
            members = {m["rank"]: m for m in g.get("members", []) if m.get("rank") is not None}
            for r, want in w.get("inputs", {}).items():
                got_in = (members.get(int(r)) or {}).get("input") or {}
                for k, v in want.items():
                    if got_in.get(k) != v:
                        fail("finding %d: rank %s input %s is %r, expected %r" % (i, r, k, got_in.get(k), v), log)
            if "output_first" in w:
                outs = [m["output"]["first"] for m in members.values()
                        if m.get("output") and m["output"]["status"] == "nonfinite"]
                if not outs or any(o != w["output_first"] for o in outs):
                    fail("finding %d: first non-finite output elements %r, expected %r" % (i, outs, w["output_first"]), log)
            if g.get("later_count", 0) < w.get("min_later", 0):
                fail("finding %d: %r later non-finite collectives, expected at least %d" %
                     (i, g.get("later_count"), w["min_later"]), log)
            for r in g["ranks"]:
                if "function" in w and (members.get(r) or {}).get("function") != w["function"]:
                    fail("finding %d: rank %d's call site function %r, expected %r" %
                         (i, r, (members.get(r) or {}).get("function"), w["function"]), log)
        if "comm_ranks" in w and g.get("comm_ranks") != w["comm_ranks"]:
            fail("finding %d: communicator of ranks %r, expected %r" % (i, g.get("comm_ranks"), w["comm_ranks"]), log)
        for side, key in (("call", "function"), ("others_call", "others_function")):
            if key in w:
                fn = (g.get(side) or {}).get("function")
                if fn != w[key]:
                    fail("finding %d: %s function %r, expected %r" % (i, side, fn, w[key]), log)
        if "site_has_line" in w and ":" not in ((g.get("call") or {}).get("site") or ""):
            fail("finding %d: call site %r without file:line" % (i, (g.get("call") or {}).get("site")), log)
        # issue 20: where the job stopped, the call before a skipped call's gap, the mis-paired call
        if "stopped_seq" in w and (g.get("stopped_at") or {}).get("seq") != w["stopped_seq"]:
            fail("finding %d: stopped_at %r, expected seq %r" % (i, g.get("stopped_at"), w["stopped_seq"]), log)
        if "gap_before_function" in w and (g.get("gap_before") or {}).get("function") != w["gap_before_function"]:
            fail("finding %d: gap_before %r, expected function %r" % (i, g.get("gap_before"), w["gap_before_function"]), log)
        if "mispaired_seq" in w and ((g.get("mispaired") or {}).get("call") or {}).get("seq") != w["mispaired_seq"]:
            fail("finding %d: mispaired %r, expected seq %r" % (i, g.get("mispaired"), w["mispaired_seq"]), log)
        # issue 30: what a finding must not say (a completed operation called not complete)
        if "message_lacks" in w and w["message_lacks"] in (g.get("message") or ""):
            fail("finding %d: the message says %r: %r" % (i, w["message_lacks"], g.get("message")), log)
        # issue 33: how a dead rank died (kind dead), each key given exactly
        for k, v in w.get("died", {}).items():
            if (g.get("died") or {}).get(k) != v:
                fail("finding %d: died.%s is %r, expected %r" % (i, k, (g.get("died") or {}).get(k), v), log)
        for r, state in w.get("ended", {}).items():
            ended = [x.get("ended", {}).get("state") for x in res["ranks"] if x.get("rank") == int(r)]
            if ended != [state]:
                fail("finding %d: rank %s ended %r, expected %r" % (i, r, ended, state), log)
    if "count" in exp and len(got) != exp["count"]:
        fail("%d findings, expected exactly %d" % (len(got), exp["count"]), log)
    if exp["findings"] and got[0]["root_cause"] != exp["findings"][0].get("root_cause", True):
        fail("the top finding's root_cause is %r, expected %r" %
             (got[0]["root_cause"], exp["findings"][0].get("root_cause", True)), log)
    if exp.get("rings"):
        try:
            log += check_rings(tranalyze, traces, exp, res)
        except Failure as e:
            fail("ring headers: %s" % e, log)
    print(log)
    print("ok: %s" % name)


def check_rings(tranalyze, traces, exp, res):
    """the ring headers against the JSON traces, and tranalyze on the rings alone (see the top)"""
    rings = ringhdr.rings_by_rank(traces)
    byrank = {}
    for n in sorted(os.listdir(traces)):
        if n.endswith(".json"):
            t = load_trace(os.path.join(traces, n), Failure)
            byrank[t["rank"]] = t
    if sorted(rings) != sorted(byrank):
        raise Failure("ranks with a ring %s, with a trace %s" % (sorted(rings), sorted(byrank)))
    hang_sec = int(os.environ.get("TRSHIM_HANG_SEC", "300"))
    for r, t in sorted(byrank.items()):
        h = rings[r]["header"]
        ringhdr.check_no_stall(h, "rank %d" % r, hang_sec)
        ringhdr.check_pending_as_trace(h, t, "rank %d" % r)
        if exp["exit"] == 0:
            ringhdr.check_idle(h, "rank %d" % r, hang_sec)
        if ringhdr.check_memory(h, t, "rank %d" % r) < 1:
            raise Failure("rank %d: no device memory in its trace to compare with" % r)
    # an out-of-memory rank's header says the size its program asked for
    for w in exp["findings"]:
        if w["kind"] == "oom":
            for r in w["ranks"]:
                fb = [m["fail_bytes"] for m in rings[r]["header"]["mem"] if m["used"] and m["fail_ns"]]
                if fb != [w["bytes"]]:
                    raise Failure("rank %d: the header's failed allocations of %s bytes, expected [%d]" %
                                  (r, fb, w["bytes"]))
    # the rings alone
    alone = traces + "-rings"
    shutil.rmtree(alone, ignore_errors=True)
    os.makedirs(alone)
    for n in os.listdir(traces):
        if n.endswith(".ring"):
            shutil.copy(os.path.join(traces, n), alone)
    q = subprocess.run([tranalyze, "--json", alone], capture_output=True, text=True, timeout=120)
    if q.returncode not in (0, 1):
        raise Failure("tranalyze on the rings alone: status %d\n%s" % (q.returncode, q.stderr[-3000:]))
    ra = json.loads(q.stdout)

    def ooms(x):
        return [(f["kind"], f["ranks"], f.get("bytes"), (f.get("call") or {}).get("function"))
                for f in x["findings"] if f["kind"] == "oom"]

    def mem(x):
        return {k["rank"]: (k["peak_bytes"], k["alloc_failures"]) for k in x["ranks"]}
    want_oom = [(w["kind"], w["ranks"], w["bytes"], w.get("function")) for w in exp["findings"] if w["kind"] == "oom"]
    if ooms(res) != want_oom or ooms(ra) != want_oom:
        raise Failure("out-of-memory findings: %s from the folder, %s from the rings alone, expected %s" %
                      (ooms(res), ooms(ra), want_oom))
    if mem(ra) != mem(res) or any(p is None for p, _ in mem(ra).values()):
        raise Failure("peak bytes and failures per rank: %s from the rings alone, %s from the folder" %
                      (mem(ra), mem(res)))
    if [r["ring"]["from_ring"] for r in ra["ranks"]] != [True] * len(ra["ranks"]):
        raise Failure("the rings alone: ranks not read from rings: %s" % ra["ranks"])
    return "\nring headers: as the traces; rings alone: %s, peaks %s\n" % (ooms(ra), mem(ra))


if __name__ == "__main__":
    main()
