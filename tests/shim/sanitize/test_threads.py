#!/usr/bin/env python3
"""threads_job (several threads on their own communicators, one
allocating, one sending snapshot signals; NaN/Inf checks on) on 2 simulated
ranks under libtrshim.so: test_threads.py threads. Paths come from the
environment meson sets (THREADS_JOB, TRSHIM_LIB, TRSIM_LAUNCH, TRANALYZE).

On the ThreadSanitizer build (tests/sanitize) this is the TSan run of the
shim: the job, the simulator and the shim are all built with
-fsanitize=thread. Checks: the job exits 0 (each rank saw its trace written
as a snapshot while it ran), no sanitizer report on stderr (tests/sanitize
also counts the reports written to TSAN_OPTIONS's log_path), no "trshim:"
line; each trace has the calls of every thread (ITERS AllReduces on each of
THREADS communicators split from the world, from THREADS threads), NaN/Inf
checks, allocations; tranalyze finds the NaN planted on rank 1 (input, first
element 123) and nothing else. Stdlib only."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from checks import Failure, check, eq, path_of, run_case, shim_lines  # noqa: E402
from trace import load_trace  # noqa: E402  (calls and checks of either version, unpacked)

THREADS, ITERS, NAN_AT = 3, 150, 123
REPORT = re.compile(r"^==\d+==|Sanitizer|runtime error:")
SCRUB = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_.*|PMI_.*|PMIX_.*|SLURM_.*|"
                   r"TRSHIM.*|TRSIM_.*|TORCHELASTIC_RUN_ID|LD_PRELOAD|NCCL_COMM_BLOCKING)$")


class Case:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="trshim-threads-")

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def case_threads(c):
    traces = os.path.join(c.tmp, "traces")
    os.makedirs(traces)
    env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
    env.update({"TRSHIM_DIR": traces, "TRSHIM_NANCHECK": "all", "TRSHIM_SNAPSHOT_SIGNAL": "SIGUSR1",
                "TRSHIM_KEEP_RING": "1"})
    cmd = [path_of("TRSIM_LAUNCH"), "-n", "2", "--timeout", "240", "--", "env",
           "LD_PRELOAD=" + path_of("TRSHIM_LIB"), path_of("THREADS_JOB")]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise Failure("the job hung (killed after 300 s)")
    sys.stdout.write("$ %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (" ".join(cmd), p.returncode, p.stdout,
                                                                     p.stderr[-20000:]))
    eq([l for l in p.stderr.splitlines() if REPORT.search(l)][:5], [], "sanitizer report")
    eq(shim_lines(p.stderr), [], "trshim: lines")
    eq(p.returncode, 0, "exit status of trsim-launch")
    eq(sorted(l.split(":")[0] for l in p.stdout.splitlines() if l.startswith("ok rank")),
       ["ok rank 0", "ok rank 1"], "ranks that finished")

    names = sorted(os.listdir(traces))
    eq(len([n for n in names if n.endswith(".ring")]), 2, "ring files")
    docs = []
    for n in names:
        if n.endswith(".json"):
            docs.append(load_trace(os.path.join(traces, n), Failure))
    eq(sorted(d["rank"] for d in docs), [0, 1], "ranks of the traces")
    for d in docs:
        r = d["rank"]
        calls = [dict(zip(d["call_fields"], x)) for x in d["calls"]]
        ar = [x for x in calls if x["op"] == "AllReduce"]
        eq(len(ar), THREADS * ITERS, "rank %d: AllReduces" % r)
        eq(len({x["thread"] for x in ar}), THREADS, "rank %d: threads that issued them" % r)
        eq(len({x["comm"] for x in ar}), THREADS, "rank %d: their communicators" % r)
        eq(sorted({x["seq"] for x in ar}), list(range(1, ITERS + 1)), "rank %d: seqs" % r)
        check(len(d.get("checks") or []) >= THREADS * ITERS, "rank %d: %d NaN/Inf checks, expected one per call "
              "at least" % (r, len(d.get("checks") or [])))
        devs = d["memory"]["devices"]
        check(devs and devs[0]["allocs"] > THREADS, "rank %d: allocations %r" % (r, devs))

    q = subprocess.run([path_of("TRANALYZE"), "--json", traces], capture_output=True, text=True, timeout=300)
    sys.stdout.write("$ tranalyze --json %s: status %d\n%s\n" % (traces, q.returncode, q.stderr[-5000:]))
    eq([l for l in q.stderr.splitlines() if REPORT.search(l)][:5], [], "tranalyze: sanitizer report")
    eq(q.returncode, 1, "tranalyze exit status")
    res = json.loads(q.stdout)
    found = [(f["kind"], f.get("cause"), f["ranks"]) for f in res["findings"]]
    eq(found, [("nan", "input", [1])], "findings")
    members = {m["rank"]: m for m in res["findings"][0].get("members", []) if m.get("rank") is not None}
    eq(((members.get(1) or {}).get("input") or {}).get("first"), NAN_AT, "rank 1's first non-finite input element")


if __name__ == "__main__":
    sys.exit(run_case({"threads": case_threads}, Case, sys.argv, "test_threads.py"))
