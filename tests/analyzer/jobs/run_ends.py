#!/usr/bin/env python3
"""One hung job, ended six ways, one diagnosis (issues 6 and 30).

Runs a job program that hangs as N ranks under trsim-launch with
libtrshim.so preloaded, once per way a hung job ends or is looked at:

  exit   the job's own watchdog gives up and exits (JOB_WATCHDOG=exit:S)
  abort  the job's watchdog calls abort() (JOB_WATCHDOG=abort:S): SIGABRT
  commabort  the job's watchdog aborts its communicator, then the process, as PyTorch's does
         (JOB_WATCHDOG=commabort:S): the hung operations' streams are released by ncclCommAbort
         before the SIGABRT, yet they did not complete
  term   the launcher's timeout sends SIGTERM (a scheduler, torchrun)
  kill   the launcher's timeout sends SIGKILL: no handler runs, only the ring file remains
  usr1   SIGUSR1 while the job hangs: tranalyze runs on the live snapshot, the job
         goes on (checked), then the launcher ends it

and checks that tranalyze --json gives exactly the expected findings (kind,
subkind, seq, culprit and other ranks, communicator members, call-site
functions) every time, that each way leaves the end state it should on every
rank, and that the findings are identical across the six.

    run_ends.py LAUNCH SHIM TRANALYZE WORKDIR NRANKS EXPECT_JSON PROG
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from checks import Failure, check, eq  # noqa: E402
from trace import load_trace  # noqa: E402
from ring import read_ring  # noqa: E402

TRR_GPU_ABORTED = 4     # include/trshim/ring_format.h

HANG_AFTER = 3      # seconds: the job is hung well before this


def normalized(findings):
    """What must not depend on how the job ended."""
    out = []
    for f in findings:
        out.append({
            "kind": f.get("kind"), "subkind": f.get("subkind"), "seq": f.get("seq"),
            "ranks": f.get("ranks"), "others": f.get("others"), "comm_ranks": f.get("comm_ranks"),
            "root_cause": f.get("root_cause"),
            "function": (f.get("call") or {}).get("function"),
            "site": (f.get("call") or {}).get("site"),
            "others_function": (f.get("others_call") or {}).get("function"),
        })
    return out


def analyze(tranalyze, traces, log):
    q = subprocess.run([tranalyze, "--json", traces], capture_output=True, text=True, timeout=120)
    t = subprocess.run([tranalyze, traces], capture_output=True, text=True, timeout=120)
    log.append("$ tranalyze %s: status %d\n%s%s" % (traces, t.returncode, t.stdout, t.stderr))
    check(q.returncode == 1, "tranalyze --json exit status %d, expected 1 (a finding)\n%s" % (q.returncode, q.stderr))
    return json.loads(q.stdout)


def older_shim_view(traces, out):
    """The commabort job's JSON traces as a shim that knew no "aborted" wrote
    them (version 1, no ring files): each released operation "done" 1 ms
    after its communicator's abort began. Returns how many were rewritten."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    n = 0
    for f in sorted(os.listdir(traces)):
        if not f.endswith(".json"):
            continue
        t = load_trace(os.path.join(traces, f), error=Failure)
        fields = t["call_fields"]
        gi, di, ci = fields.index("gpu"), fields.index("done_ns"), fields.index("comm")
        for c in t["calls"]:
            if c[gi] == "aborted":
                c[gi], c[di] = "done", t["comms"][c[ci]]["end"]["enter_ns"] + 1000000
                n += 1
        t["version"] = 1
        fd = os.open(os.path.join(out, f), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(t, fh)
    return n


def run_mode(mode, launch, shim, tranalyze, work, n, prog, log):
    traces = os.path.join(work, "%s-%s" % (os.path.basename(prog), mode))
    shutil.rmtree(traces, ignore_errors=True)
    os.makedirs(traces)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["TRSHIM_DIR"] = traces
    cmd = [launch, "-n", n, "--grace", "3"]
    if mode in ("exit", "abort", "commabort"):
        env["JOB_WATCHDOG"] = "%s:%d" % (mode, HANG_AFTER)
        # every rank's own watchdog ends it: the launcher must not end the others first
        cmd += ["--timeout", "60", "--no-kill-on-fail"]
    elif mode == "term":
        cmd += ["--timeout", str(HANG_AFTER)]
    elif mode == "kill":
        cmd += ["--timeout", str(HANG_AFTER), "--signal", "KILL"]
    else:
        cmd += ["--timeout", "60"]
    cmd += ["--", "env", "LD_PRELOAD=" + shim, prog]
    live = None
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if mode == "usr1":
        time.sleep(HANG_AFTER)
        p.send_signal(signal.SIGUSR1)        # the launcher forwards it to every rank
        deadline = time.time() + 20
        while time.time() < deadline:
            snaps = 0
            for f in os.listdir(traces):
                if f.endswith(".json"):
                    try:
                        with open(os.path.join(traces, f)) as fh:
                            snaps += json.load(fh)["end"]["reason"] == "snapshot"
                    except (OSError, ValueError, KeyError):
                        pass
            if snaps == int(n):
                break
            time.sleep(0.1)
        check(p.poll() is None, "usr1: the job ended after SIGUSR1 (status %r)" % p.poll())
        live = analyze(tranalyze, traces, log)
        check(p.poll() is None, "usr1: the job is no longer running after the live look")
        p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    log.append("$ %s (%s): status %d\n%s%s" % (os.path.basename(prog), mode, p.returncode, out[-2000:], err[-3000:]))
    res = live if live is not None else analyze(tranalyze, traces, log)
    want_end = {"exit": ("exited", None), "abort": ("signal", signal.SIGABRT),
                "commabort": ("signal", signal.SIGABRT), "term": ("signal", signal.SIGTERM),
                "kill": ("killed", None), "usr1": ("snapshot", None)}[mode]
    for r in res["ranks"]:
        end = r.get("ended") or {}
        eq(end.get("state"), want_end[0], "%s: rank %s end state" % (mode, r.get("rank")))
        if want_end[1] is not None:
            eq(end.get("signal"), int(want_end[1]), "%s: rank %s end signal" % (mode, r.get("rank")))
    eq(len(res["ranks"]), int(n), "%s: ranks with a trace" % mode)
    return res


def main():
    launch, shim, tranalyze, work, n, expect, prog = sys.argv[1:8]
    exp = json.loads(expect)
    os.makedirs(work, exist_ok=True)
    log = []
    got = {}
    aborted = {}
    try:
        for mode in ("exit", "abort", "commabort", "term", "kill", "usr1"):
            res = run_mode(mode, launch, shim, tranalyze, work, n, prog, log)
            got[mode] = normalized(res["findings"])
            aborted[mode] = res["aborted"]
            check(got[mode], "%s: no finding" % mode)
            for i, w in enumerate(exp):
                check(i < len(got[mode]), "%s: %d findings, expected at least %d" % (mode, len(got[mode]), len(exp)))
                for k, v in w.items():
                    eq(got[mode][i].get(k), v, "%s: finding %d %s" % (mode, i, k))
        for mode in ("abort", "commabort", "term", "kill", "usr1"):
            eq(got[mode], got["exit"], "findings after %s vs after exit" % mode)
        # the abort released the hung operations: recorded "aborted", said once, the same answer
        ab = aborted["commabort"]
        check(ab and ab["released"] > 0 and ab["ranks"] == list(range(int(n))),
              "commabort: the job's \"aborted\" is %r, expected every rank, operations released" % (ab,))
        for mode in ("exit", "abort", "term", "kill", "usr1"):
            eq(aborted[mode], None, "%s: \"aborted\"" % mode)
        older = os.path.join(work, "%s-commabort-v1" % os.path.basename(prog))
        check(older_shim_view(os.path.join(work, "%s-commabort" % os.path.basename(prog)), older) == ab["released"],
              "commabort: the traces' aborted operations are not the %d released" % ab["released"])
        res = analyze(tranalyze, older, log)
        eq(normalized(res["findings"]), got["exit"], "findings of the older shim's view (done after the abort)")
        eq((res["aborted"] or {}).get("released"), ab["released"], "older shim's view: operations released")
        # the ring files alone (as a SIGKILL after the abort leaves them) say the same
        rings = os.path.join(work, "%s-commabort-rings" % os.path.basename(prog))
        shutil.rmtree(rings, ignore_errors=True)
        os.makedirs(rings)
        src = os.path.join(work, "%s-commabort" % os.path.basename(prog))
        in_rings = 0
        for f in sorted(os.listdir(src)):
            if f.endswith(".ring"):
                shutil.copy(os.path.join(src, f), rings)
                in_rings += sum(r["gpu"] == TRR_GPU_ABORTED for r in read_ring(os.path.join(src, f))["records"])
        eq(in_rings, ab["released"], "commabort: ring records aborted")
        res = analyze(tranalyze, rings, log)
        eq(normalized(res["findings"]), got["exit"], "findings of the ring files alone")
        eq((res["aborted"] or {}).get("released"), ab["released"], "ring files alone: operations released")
    except Failure as e:
        print("\n".join(log)[-12000:])
        print("FAIL:", e)
        sys.exit(1)
    print("\n".join(log)[-4000:])
    print("ok: the same findings after exit, abort, commabort, term, kill and a live usr1 snapshot")


if __name__ == "__main__":
    main()
