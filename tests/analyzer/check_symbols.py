#!/usr/bin/env python3
"""Call sites from a real module: traces (tests/analyzer/gen_traces.py) whose
frames point into a real executable with debug info (a job program) at the
offsets of two of its static functions, as the shim records them (return
addresses, relative to the load base). tranalyze must print
`function (file:line)` with the module's build id matching, fall back to the
recorded symbol and say so when the module's build id differs or it is
missing, and find it with --modules DIR.

    check_symbols.py TRANALYZE GEN_TRACES EXECUTABLE WORKDIR
"""
import json
import os
import re
import shutil
import subprocess
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    tranalyze, gen, exe, work = sys.argv[1:5]
    sys.path.insert(0, os.path.dirname(gen))
    import gen_traces as g
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    syms = {}
    for line in subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tT":
            syms[p[2]] = int(p[0], 16)
    notes = subprocess.run(["readelf", "-n", exe], capture_output=True, text=True, check=True).stdout
    bid = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
    # a return address a few bytes into each function
    g.site_offset = lambda name: syms.get(name, syms["main"]) + 8 - 0x2b

    def job(d, module, build_id):
        g.MODULE, g.BUILD_ID = module, build_id
        ranks, wid = g.world_job("sym", 2)
        for r in ranks:
            if r.rank == 0:
                r.coll(0, count=1, site="log_metrics", caller="train_step")
            else:
                r.coll(0, count=4096, site="train_step", caller="train_step")
        g.killed(ranks)
        g.write(ranks, d)

    def run(d, *opts):
        p = subprocess.run([tranalyze, "--json"] + list(opts) + [d], capture_output=True, text=True)
        if p.returncode != 1:
            fail("status %d: %s %s" % (p.returncode, p.stdout[:2000], p.stderr))
        return json.loads(p.stdout)

    src = os.path.basename(exe).replace("job_", "job_") + ".c"
    # 1. the module as it ran
    d = os.path.join(work, "same")
    job(d, os.path.abspath(exe), bid)
    r = run(d)
    site = r["findings"][0]["call"]["site"]
    if not re.match(r"log_metrics \(%s:\d+\)$" % re.escape(src), site):
        fail("site %r, expected log_metrics (%s:LINE)" % (site, src))
    other = r["findings"][0]["others_call"]["site"]
    if not other.startswith("train_step (%s:" % src):
        fail("other site %r" % other)
    # 2. another build id: recorded symbol, a message
    d = os.path.join(work, "different")
    job(d, os.path.abspath(exe), "00" + bid[2:])
    r = run(d)
    site = r["findings"][0]["call"]["site"]
    if not site.startswith("log_metrics (") or ".c:" in site:
        fail("different module: site %r" % site)
    if not any("differs" in n["problem"] for n in r["inputs"]):
        fail("no message about the different module: %s" % r["inputs"])
    # 3. missing, then found with --modules
    d = os.path.join(work, "moved")
    job(d, "/nonexistent/build/" + os.path.basename(exe), bid)
    r = run(d)
    if not any("missing" in n["problem"] for n in r["inputs"]):
        fail("no message about the missing module: %s" % r["inputs"])
    if ".c:" in r["findings"][0]["call"]["site"]:
        fail("missing module, yet file:line")
    r = run(d, "--modules", os.path.dirname(os.path.abspath(exe)))
    if not r["findings"][0]["call"]["site"].startswith("log_metrics (%s:" % src):
        fail("--modules: site %r" % r["findings"][0]["call"]["site"])
    if any("missing" in n["problem"] for n in r["inputs"]):
        fail("--modules: still reported missing")
    print("ok: function (file:line) from the module, the recorded symbol when it differs or is missing, --modules")


if __name__ == "__main__":
    main()
