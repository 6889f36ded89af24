#!/usr/bin/env python3
"""Skewed clocks (issue 33): real jobs on the simulator where one rank runs
on a CLOCK_MONOTONIC of its own, as in a container's time namespace
(`unshare --time`, as root) or under libfaketime (both its realtime and
monotonic clocks moved: the collectives alone show it).

    check_clocks.py CASE LAUNCH SHIM TRANALYZE WORKDIR CLEAN_PROG STRAGGLER_PROG

CASE:
  skew_1s, skew_7s, skew_3600s, skew_back_1s   the straggler job's healthy twin (4 ranks, 30
                 all-reduces), rank 2 in a time namespace whose monotonic clock is that much
                 ahead (behind: back_; unshare takes whole seconds): no
                 finding, exit 0; rank 2 its own clock domain, placed by the host's realtime
                 clock to within 1 us at exactly the namespace's offset (+- 1 ms); the text
                 report says so in one line
  clean8_3600s   the 8-rank clean job (three communicators), rank 5 an hour ahead: no finding
  straggler_skewed  rank 3 is slow (80 ms before each all-reduce) and runs an hour ahead:
                 one straggler finding, rank 3, at least 80 ms late, the same as the same
                 job's without the namespace (its own run, on one clock: "monotonic")
  faked          rank 2 under libfaketime (FAKETIME=+1h: realtime and monotonic moved alike,
                 by amounts of their own: its clock sample is another domain's): the host's
                 realtime clock is ruled out by what the collectives prove, the rank is
                 placed by the completions (to within 3 ms), and no finding
  split_synthetic  synthetic traces (gen_traces.Rank): 4 ranks of one host, rank 2's realtime
                 and monotonic clocks both 5 s ahead, so that its clock sample agrees with
                 the others': completion is tracked and every member enters each all-reduce
                 at the same true time; the collectives prove rank 2's clock is not its
                 host's: split into its own domain, placed by completions at 5 s, no
                 straggler (on one clock it would be 5 s late in every all-reduce)
Each case skips (exit 77) with a reason when the clock cannot be moved here.
"""
import json
import os
import shutil
import subprocess
import sys

MS = 1_000_000
SKIP = 77


def fail(msg, out=""):
    if out:
        print(out[-5000:])
    print("FAIL:", msg)
    sys.exit(1)


def skip(msg):
    print("SKIP:", msg)
    sys.exit(SKIP)


def can_unshare():
    p = subprocess.run(["unshare", "--time", "--monotonic", "5", "true"], capture_output=True, text=True)
    return p.returncode == 0, p.stderr.strip()


def faketime_lib():
    for d in ("/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/aarch64-linux-gnu/faketime", "/usr/lib/faketime"):
        f = os.path.join(d, "libfaketime.so.1")
        if os.path.exists(f):
            return f
    return None


def wrapper(shim, rank, how):
    """a shell command line run as each rank: `rank` starts on a moved clock"""
    if how is None:
        moved = 'exec env LD_PRELOAD=%s "$0" "$@"' % shim
    elif how[0] == "ns":
        moved = 'exec unshare --time --monotonic %s --boottime %s env LD_PRELOAD=%s "$0" "$@"' % (how[1], how[1], shim)
    else:   # libfaketime, in front of the shim
        moved = 'exec env FAKETIME=%s LD_PRELOAD=%s:%s "$0" "$@"' % (how[1], how[2], shim)
    return ('if [ "$RANK" = %d ]; then %s; fi; exec env LD_PRELOAD=%s "$0" "$@"' % (rank, moved, shim))


def run_job(launch, shim, work, name, n, prog, rank, how, env_extra=None):
    traces = os.path.join(work, name)
    shutil.rmtree(traces, ignore_errors=True)
    os.makedirs(traces)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["TRSHIM_DIR"] = traces
    env.update(env_extra or {})
    p = subprocess.run([launch, "-n", str(n), "--timeout", "90", "--grace", "3", "--",
                        "sh", "-c", wrapper(shim, rank, how), prog],
                       env=env, capture_output=True, text=True, timeout=150)
    log = "$ %s: status %d\n%s%s" % (name, p.returncode, p.stdout[-2000:], p.stderr[-3000:])
    if p.returncode != 0:
        fail("the job %s ended with status %d" % (name, p.returncode), log)
    return traces, log


def analyse(ta, traces, log):
    p = subprocess.run([ta, "--json", traces], capture_output=True, text=True, timeout=120)
    try:
        d = json.loads(p.stdout)
    except ValueError:
        fail("tranalyze --json printed no JSON (status %d)" % p.returncode, log + p.stdout + p.stderr)
    t = subprocess.run([ta, traces], capture_output=True, text=True, timeout=120)
    return p.returncode, d, t.stdout, log + "\n--- tranalyze ---\n" + t.stdout + t.stderr


def domain_of(d, rank):
    for dom in d["clocks"]["domains"]:
        if rank in dom["ranks"]:
            return dom
    fail("rank %d is in no clock domain: %s" % (rank, d["clocks"]))


def check_clean_skewed(d, rc, text, log, n, rank, offset_ns, method, split=False):
    if rc != 0 or d["findings"]:
        fail("a clean job with a skewed clock: exit %d, findings %s" % (rc, [(f["kind"], f.get("ranks")) for f in d["findings"]]), log)
    doms = d["clocks"]["domains"]
    if len(doms) != 2:
        fail("expected 2 clock domains, got %s" % doms, log)
    ref, moved = domain_of(d, 0), domain_of(d, rank)
    if ref["method"] != "reference" or sorted(ref["ranks"]) != [r for r in range(n) if r != rank]:
        fail("reference domain: %s" % ref, log)
    if moved["ranks"] != [rank] or moved["method"] != method or moved["split"] != split:
        fail("rank %d's domain: %s (expected method %s, split %s)" % (rank, moved, method, split), log)
    # its CLOCK_MONOTONIC is offset_ns ahead of the others'; realtime places it to 1 us, completions to ~1 ms
    tol = 1 * MS if method == "realtime" else 3 * MS
    if offset_ns is not None and abs(moved["monotonic_offset_ns"] - offset_ns) > tol:
        fail("rank %d's monotonic offset %d ns, expected %d +- %d" % (rank, moved["monotonic_offset_ns"], offset_ns, tol), log)
    if moved["err_ns"] is None or moved["err_ns"] > tol:
        fail("rank %d placed to within %s ns, expected <= %d" % (rank, moved["err_ns"], tol), log)
    lo, hi = moved["causal_lo_ns"], moved["causal_hi_ns"]
    if lo is None or hi is None or not lo <= 0 <= hi:
        fail("rank %d's placement is outside what causality allows: [%s, %s]" % (rank, lo, hi), log)
    lines = [ln for ln in text.splitlines() if ln.startswith("  clocks: 2 clock domains")]
    if len(lines) != 1 or ("rank %d " % rank) not in lines[0]:
        fail("the text report's clocks line: %s" % lines, log)
    if "No problem found" not in text:
        fail("the text report does not say no problem was found", log)


def split_synthetic(ta, work):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import gen_traces as G
    out = os.path.join(work, "clocks-split_synthetic")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    ranks = []
    for i in range(4):
        r = G.Rank("clksplit", i, 4, host="node0")
        r.jitter = 0
        r.track = True
        r.shift = 5 * 10**9 if i == 2 else 0
        r.mono_base += r.shift
        r.t = 1_000_000_000_000 + r.shift
        if i == 2:
            r.clock_real += 5.0      # both clocks moved alike: its clock sample agrees with the host's
        r.at = lambda t, r=r: t + r.shift
        ranks.append(r)
    wid = G.cid("world", "clksplit")
    for r in ranks:
        r.init(wid, 4, r.rank)
    for i in range(20):
        for r in ranks:
            r.coll(0, count=1 << 16, site="train_step", at=r.at(G.step_time(i)))
    for r in ranks:
        r.finish()
    G.write(ranks, out)
    rc, d, text, log = analyse(ta, out, "")
    check_clean_skewed(d, rc, text, log, 4, 2, 5 * 10**9, "completion", split=True)
    print("ok: split_synthetic")


def main():
    case, launch, shim, ta, work, clean_prog, strag_prog = sys.argv[1:8]
    os.makedirs(work, exist_ok=True)
    if case == "split_synthetic":
        split_synthetic(ta, work)
        return
    if case == "faked":
        lib = faketime_lib()
        if not lib:
            skip("libfaketime is not installed (Debian: faketime)")
        traces, log = run_job(launch, shim, work, "clocks-" + case, 4, strag_prog, 2, ("faketime", "+1h", lib),
                              {"STRAGGLER_MS": "0"})
        rc, d, text, log = analyse(ta, traces, log)
        check_clean_skewed(d, rc, text, log, 4, 2, None, "completion")
        if not domain_of(d, 2)["wall_refuted"]:
            fail("rank 2's faked wall clock is not said to be ruled out", log)
        print("ok: a faked clock placed by completions")
        return
    ok, why = can_unshare()
    if not ok:
        skip("unshare --time is not allowed here (%s): needs root and a kernel with time namespaces" % why)
    if case.startswith("skew_"):
        secs = {"skew_1s": "1", "skew_7s": "7", "skew_3600s": "3600", "skew_back_1s": "-1"}[case]
        traces, log = run_job(launch, shim, work, "clocks-" + case, 4, strag_prog, 2, ("ns", secs), {"STRAGGLER_MS": "0"})
        rc, d, text, log = analyse(ta, traces, log)
        check_clean_skewed(d, rc, text, log, 4, 2, round(float(secs) * 1e9), "realtime")
    elif case == "clean8_3600s":
        traces, log = run_job(launch, shim, work, "clocks-" + case, 8, clean_prog, 5, ("ns", "3600"))
        rc, d, text, log = analyse(ta, traces, log)
        check_clean_skewed(d, rc, text, log, 8, 5, 3600 * 1000 * MS, "realtime")
    elif case == "straggler_skewed":
        base, blog = run_job(launch, shim, work, "clocks-straggler-plain", 4, strag_prog, 3, None)
        brc, bd, _, blog = analyse(ta, base, blog)
        traces, log = run_job(launch, shim, work, "clocks-" + case, 4, strag_prog, 3, ("ns", "3600"))
        rc, d, text, log = analyse(ta, traces, log)
        for name, r, x, lg, clock in (("plain", brc, bd, blog, "monotonic"), ("skewed", rc, d, log, "realtime")):
            fs = [(f["kind"], f.get("ranks")) for f in x["findings"]]
            if r != 1 or fs != [("straggler", [3])]:
                fail("%s: exit %d, findings %s; expected one straggler, rank 3" % (name, r, fs), lg)
            f = x["findings"][0]
            if f["clock"] != clock:
                fail("%s: the straggler's clock is %s, expected %s" % (name, f["clock"], clock), lg)
            if not 70 * MS <= f["lateness_median_ns"] < 400 * MS:
                fail("%s: lateness %d ns; rank 3 sleeps 80 ms before each all-reduce" % (name, f["lateness_median_ns"]), lg)
            if f["examined"] != 30:
                fail("%s: %d all-reduces examined, expected 30" % (name, f["examined"]), lg)
        dom = domain_of(d, 3)
        if dom["method"] != "realtime" or abs(dom["monotonic_offset_ns"] - 3600 * 1000 * MS) > MS:
            fail("rank 3's domain: %s" % dom, log)
    else:
        fail("unknown case " + case)
    print("ok:", case)


if __name__ == "__main__":
    main()
