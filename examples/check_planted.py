#!/usr/bin/env python3
"""The README's main command, checked: the example job with the planted
log_metrics all-reduce hangs, the launcher ends it, and tranalyze's root
cause is rank 0's AllReduce #12 at log_metrics (train_dp.c:98)."""
import json, os, subprocess, sys, tempfile

launch, shim, sim, prog, tranalyze, ranks = sys.argv[1:7]
with tempfile.TemporaryDirectory() as traces:
    env = dict(os.environ, LD_PRELOAD=f"{shim} {sim}", TRSHIM_DIR=traces, TRAIN_DP_PLANT="log_metrics")
    job = subprocess.run([launch, "-n", ranks, "--timeout", "8", "--grace", "5", "--quiet", "--",
                          prog, "40", "64"], env=env, capture_output=True, text=True)
    if job.returncode != 124:
        sys.exit(f"the planted job should hang and be ended by the timeout (124), got {job.returncode}")
    out = subprocess.run([tranalyze, "--json", traces], capture_output=True, text=True)
    if out.returncode != 1:
        sys.exit(f"tranalyze exited {out.returncode}: {out.stderr}")
    top = json.loads(out.stdout)["findings"][0]
    want = {"kind": "divergence", "seq": 12, "ranks": [0], "others": list(range(1, int(ranks)))}
    got = {k: top.get(k) for k in want}
    if got != want or top["call"]["function"] != "log_metrics" or top["others_call"]["function"] != "main":
        sys.exit(f"wrong root cause: {json.dumps(top, indent=1)}")
    site = top["call"]["site"]
    if not site.startswith("log_metrics (train_dp.c:"):
        sys.exit(f"call site {site}")
    print(f"root cause: rank 0, AllReduce #12 at {site}")
