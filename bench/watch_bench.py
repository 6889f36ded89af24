#!/usr/bin/env python3
"""The watcher's benchmark (tranalyze --watch, docs/live.md): python3 bench/watch_bench.py [TRANALYZE]

Synthetic ring files (tests/analyzer/gen_ring.py) of a job whose ranks are
alive: this process plays their shims and refreshes every ring's heartbeat and
poller pass twice a second, as libtrshim.so's poller does (once a second).
Prints one table:
  ranks | what | value | target
  - CPU the watcher uses per second of job (the scheduler's run time,
    /proc/PID/schedstat, over WATCH_SEC seconds), healthy job of 8 and 64 ranks
    (nothing pending): target <= 0.01 s per s (1% of one core);
  - the time from a stall (rank 0's watchdog stores stall_ns in its ring) to
    the printed answer (the watcher's "trshim: full report:" line), 1,024 ranks
    whose rings hold a divergence (rank 0's extra all-reduce at #12, 100 steps
    of calls each): target <= 5 s beyond the threshold (the watchdog's own
    threshold passed before stall_ns is stored, so this is the whole delay).
Exit status 1 when a target is missed or a step failed."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "analyzer"))
from live_rings import OFFS, Beater as Shims, job, write_rings  # noqa: E402

WATCH_SEC = float(os.environ.get("WATCH_SEC", "20"))
for field in ("heartbeat_ns", "pass_ns", "pending", "pending_since_ns", "stall_ns", "stall_since_ns", "stall_rec"):
    if field not in OFFS:
        sys.exit("bench/watch_bench.py: gen_ring.py's header layout has no %s" % field)


def cpu_seconds(pid):
    """the CPU time pid ran (the scheduler's, in ns: /proc/PID/schedstat)"""
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0]) / 1e9


def watch(ta, d, *opts):
    return subprocess.Popen([ta, "--watch"] + list(opts) + [d], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def healthy_cpu(ta, tmp, nranks):
    d = os.path.join(tmp, "healthy%d" % nranks)
    ranks = job("healthy%d" % nranks, nranks, 20, extra=False)
    shims = Shims(write_rings(d, ranks, {r.rank: 10 ** 9 for r in ranks}))
    try:
        w = watch(ta, d, "--hang-sec", "60")
        time.sleep(2)                     # started, rings found
        c0, t0 = cpu_seconds(w.pid), time.monotonic()
        time.sleep(WATCH_SEC)
        c1, t1 = cpu_seconds(w.pid), time.monotonic()
        w.terminate()
        err = w.communicate(timeout=600)[1]
    finally:
        shims.close()
    if "HANG" in err:
        print("bench/watch_bench.py: a healthy job reported a hang:\n" + err, file=sys.stderr)
        return None
    return (c1 - c0) / (t1 - t0)


def stall_to_answer(ta, tmp, nranks=1024, steps=100):
    d = os.path.join(tmp, "stall%d" % nranks)
    ranks = job("stall%d" % nranks, nranks, steps)
    paths = write_rings(d, ranks, {r.rank: 12 for r in ranks})   # #12 never completes, on any rank
    shims = Shims(paths)
    try:
        # every rank's oldest pending operation: its #12 (the poller's view)
        for i, r in enumerate(ranks):
            k = next(k for k, c in enumerate(r.calls) if c[2] == 12)
            shims.set(i, "pending", "I", len(r.calls) - k)
            shims.set(i, "pending_since_ns", "Q", r.calls[k][15])
        w = watch(ta, d, "--hang-sec", "600")     # only the watchdog's stall triggers
        time.sleep(3)                             # 1,024 rings found and read
        t0 = time.monotonic()
        k0 = next(k for k, c in enumerate(ranks[0].calls) if c[2] == 12)
        shims.set(0, "stall_rec", "Q", k0 + 1)
        shims.set(0, "stall_since_ns", "Q", ranks[0].calls[k0][15])
        shims.set(0, "stall_ns", "Q", shims.now(0))
        got = []

        def read():
            for line in w.stderr:
                if line.startswith("trshim: full report:") and not got:
                    got.append(time.monotonic() - t0)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        end = time.monotonic() + 120
        while not got and time.monotonic() < end and w.poll() is None:
            time.sleep(0.05)
        w.terminate()
        w.wait(timeout=600)
        got = got[0] if got else None
    finally:
        shims.close()
    return got


def main():
    ta = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "analyzer", "tranalyze")
    tmp = tempfile.mkdtemp(prefix="watch-bench.")
    ok = True
    rows = []
    try:
        for n in (8, 64):
            c = healthy_cpu(ta, tmp, n)
            good = c is not None and c <= 0.01
            ok &= good
            rows.append((n, "watcher CPU per second of job (healthy, %g s)" % WATCH_SEC,
                         "-" if c is None else "%.6f s/s" % c, "<= 0.01 %s" % ("ok" if good else "MISSED")))
        t = stall_to_answer(ta, tmp)
        good = t is not None and t <= 5
        ok &= good
        rows.append((1024, "stall (watchdog's stall_ns) to printed answer", "-" if t is None else "%.2f s" % t,
                     "<= 5 s %s" % ("ok" if good else "MISSED")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("| ranks | what | value | target |")
    print("|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %s |" % r)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
