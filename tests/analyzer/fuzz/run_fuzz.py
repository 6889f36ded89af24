#!/usr/bin/env python3
"""One bounded libFuzzer run of tranalyze (tests/analyzer/fuzz):

    run_fuzz.py FUZZER CORPUS WORKDIR RUNS

runs FUZZER (fuzz_tranalyze) for RUNS executions (TRSHIM_FUZZ_RUNS
overrides it) seeded from the kept corpus CORPUS, which it never writes to:
inputs it finds new go to WORKDIR/new, a failing input to WORKDIR/artifacts.
The seed is random unless TRSHIM_FUZZ_SEED is set (libFuzzer prints "Seed:";
TRSHIM_FUZZ_SEED=that repeats the run). Passes when libFuzzer ends normally
after every execution: any sanitizer report, crash, timeout of one input
(-timeout), memory blow-up (-rss_limit_mb, -malloc_limit_mb), a leak, tranalyze
calling exit(), a status outside 0/1/2 or --json output that is not JSON
(the harness aborts) fails it, with the input named. Stdlib only."""
import os
import re
import shutil
import subprocess
import sys


def main():
    fuzzer, corpus, work, runs = sys.argv[1:5]
    runs = int(os.environ.get("TRSHIM_FUZZ_RUNS") or runs)
    seeds = sorted(os.listdir(corpus)) if os.path.isdir(corpus) else []
    if not seeds:
        print("FAIL: no corpus in %s (tests/analyzer/fuzz/make_corpus.py writes it)" % corpus)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    new, artifacts = os.path.join(work, "new"), os.path.join(work, "artifacts")
    os.makedirs(new)
    os.makedirs(artifacts)
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp)
    env = dict(os.environ, TMPDIR=tmp)
    # tranalyze frees all it made at the end of a run (main.c; analyze-twice checks it): what one
    # input leaves allocated is a leak (-detect_leaks=1), and would pile up over the runs of one process
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=1").lstrip(":")
    cmd = [fuzzer, "-runs=%d" % runs, "-timeout=30", "-rss_limit_mb=3072", "-malloc_limit_mb=2048",
           "-detect_leaks=1", "-print_final_stats=1", "-artifact_prefix=" + artifacts + "/"]
    if os.environ.get("TRSHIM_FUZZ_SEED"):
        cmd.append("-seed=" + os.environ["TRSHIM_FUZZ_SEED"])
    cmd += [new, corpus]
    print("$ " + " ".join(cmd))
    sys.stdout.flush()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=570)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        print(out[-6000:])
        print("FAIL: the fuzzer did not finish within 570 s")
        return 1
    out = p.stdout.decode("utf-8", "replace")
    lines = out.splitlines()
    with open(os.path.join(work, "fuzz.log"), "w") as f:
        f.write(out)
    seed = re.search(r"Seed: (\d+)", out)
    done = re.search(r"Done (\d+) runs in (\d+) second", out)
    crashes = sorted(os.listdir(artifacts))
    if p.returncode != 0 or not done or crashes:
        print("\n".join(lines[-150:]))
        print("FAIL: fuzz_tranalyze status %d on the %s corpus (seed %s); input kept: %s" % (
            p.returncode, os.path.basename(corpus), seed.group(1) if seed else "?",
            ", ".join(os.path.join(artifacts, c) for c in crashes) or "none"))
        return 1
    stats = [l for l in lines if l.startswith("stat::")]
    print("\n".join(lines[-8:] if not stats else stats))
    print("ok: %s executions of tranalyze on the %s corpus (%d seeds, %d new inputs found), seed %s, %s s" % (
        done.group(1), os.path.basename(corpus), len(seeds), len(os.listdir(new)),
        seed.group(1) if seed else "?", done.group(2)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
