#!/usr/bin/env python3
"""Two analyses in one process give the same answer, and leave nothing
allocated (issue 34, item 3): writes a job of each kind of finding and
input (JSON traces, ring files, damaged files, nothing usable, a second
reading past the call budget) with the generators, then runs
analyze_twice on them all (tests/analyzer/analyze_twice.c: tranalyze in
process, every folder in --json, text and --markdown, three passes).

    check_twice.py ANALYZE_TWICE WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# (generator, scenario): a finding of each kind, each input form
JOBS = [("gen_traces.py", s) for s in (
    "clean", "extra_collective", "skip_barrier", "pipeline_missing_send", "hang_spread", "init_hang", "oom",
    "imbalance", "missing_trace", "p2p_size", "damaged", "all_damaged", "two_jobs", "nan_independent",
    "nan_and_hang", "straggler", "before_window", "py_extra_collective", "config_mismatch", "signal_missing",
    "grow_extra", "suspend_killed", "nccl_unknown", "packed_damaged", "budget_before_window", "env_differs")] + \
    [("gen_ring.py", s) for s in ("ring_hang", "ring_killed_rank", "ring_oom", "ring_torn", "ring_config_mismatch",
                                  "ring_graph_fewer", "ring_py_hang", "ring_wrapped")] + \
    [("gen_mesh.py", "mesh_two_skips"), ("gen_graphs.py", "graph_fewer")]


def main():
    twice, work = sys.argv[1:3]
    root = os.path.join(work, "twice")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    specs = []
    for gen, sc in JOBS:
        out = os.path.join(root, sc)
        subprocess.run([sys.executable, os.path.join(HERE, gen), sc, out], check=True, stdout=subprocess.DEVNULL)
        args = []
        exp = os.path.join(out, "expected.json")
        if os.path.exists(exp):
            with open(exp) as f:
                args = json.load(f).get("args", [])
            os.rename(exp, os.path.join(root, sc + ".expected.json"))   # not a trace: kept out of the folder
        if any(" " in a for a in args + [out]):
            print("FAIL: %s: an option or path with a space (analyze_twice splits on spaces)" % sc)
            return 1
        specs.append(" ".join(args + [out]))
    p = subprocess.run([twice] + specs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print(p.stdout[-20000:])
    if p.returncode != 0:
        print("FAIL: analyze_twice status %d on %d folders" % (p.returncode, len(specs)))
        return 1
    if "ok: %d folders" % len(specs) not in p.stdout:
        print("FAIL: analyze_twice did not report the %d folders" % len(specs))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
