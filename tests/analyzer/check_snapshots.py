#!/usr/bin/env python3
"""Live snapshots under a SIGUSR1 storm (issue 33, item 4): what tranalyze
says of a trace folder copied while the job runs never contradicts itself.

Runs job_early_exit as 16 ranks under trsim-launch with libtrshim.so
preloaded: CPU work per step (EARLY_WORK_US, a busy loop timed by the clock,
so the job runs at least STEPS x WORK whatever the machine), rank 3 exits
before step STEPS and the others hang in collective #(2 x STEPS + 1). Once
every rank records, SIGUSR1 goes to the launcher 100 times a second (it
forwards each to every rank: each writes a live snapshot while its ring is
mmap'd and written) and the folder is copied (file by file, as cp -r does:
a file that vanished meanwhile is skipped, holes kept) about every 0.5 s; tranalyze
--json starts on each copy at once and runs while the job runs. The storm lasts at least
MIN_STORM s, and until COPIES_AT_HANG copies were taken after rank 3 exited
(its trace is its exit write); then the launcher ends the job (SIGTERM) and tranalyze
on the final folder gives the final answer, checked exactly.

Each copy, checked exactly (no timing):
  - tranalyze's exit status is 1 with findings, 0 without;
  - every "missing" finding agrees with itself and with the rank table:
    its culprits never issued its seq (rank table last seq below it,
    stuck_at never_issued), the ranks its message says "issued and wait in"
    it are its `others`, each with a last seq at or above it and a stuck_at
    state that issued it; the members that had not issued it and are not
    culprits are those the message says "had not issued it either", each
    with a last seq below it and stuck_at never_issued; culprits, others
    and those make up the communicator;
  - a copy taken where the job had reached its hang (every rank's last seq
    per communicator as in the final folder) has the final answer's top
    finding: kind, subkind, seq, culprits, others, communicator members.
At least one copy must be of the hang, and the first (taken before the
job could have finished its steps) is not.

    check_snapshots.py LAUNCH SHIM TRANALYZE WORKDIR PROG
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import ringhdr  # noqa: E402
from checks import Failure, check, eq  # noqa: E402

NRANKS = 16
STEPS = 100                # rank 3 exits before step STEPS: the others wait in #2*STEPS+1
WORK_US = 30000            # per step: the job runs at least STEPS * WORK_US = 3 s
STORM_HZ = 100             # SIGUSR1 per second to each rank
COPY_EVERY = 0.5           # seconds between copies
MIN_STORM = 6.0            # seconds of storm at least
COPIES_AT_HANG = 3         # copies after rank 3 exited
LIMIT = 120.0              # the job must hang by then


def ranks_of_text(s):
    """"0-2, 4, 6-15" -> [0, 1, 2, 4, 6, ...]"""
    out = []
    for part in s.split(", "):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        else:
            out.append(int(part))
    return out


def copy_folder(src, dst):
    """cp -r: every file there now, one after the other (holes kept: a ring is a sparse file of ~50 MB); a
    file that vanished meanwhile (a snapshot's temporary, renamed) is skipped with a message, as cp does"""
    subprocess.run(["cp", "-r", "--sparse=always", src, dst], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.isdir(dst):
        raise Failure("cp -r %s %s made no folder" % (src, dst))


def rank3_exited(traces):
    """rank 3's trace is its exit write (its ring goes at a clean exit)"""
    for n in os.listdir(traces):
        if re.match(r"^trshim\..*\.r3\..*\.json$", n):
            try:
                with open(os.path.join(traces, n)) as fh:
                    return json.load(fh)["end"]["reason"] == "exit"
            except (OSError, ValueError, KeyError, TypeError):
                return False
    return False


def start_analysis(tranalyze, d):
    """tranalyze --json on folder d, started (the job goes on meanwhile)"""
    return subprocess.Popen([tranalyze, "--json", d], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def analysis_result(d, q):
    out, err = q.communicate(timeout=300)
    try:
        res = json.loads(out)
    except ValueError:
        raise Failure("%s: tranalyze --json gave no JSON (status %d): %s" % (d, q.returncode, err[-2000:]))
    eq(q.returncode, 1 if res["findings"] else 0, "%s: exit status (%d findings)" % (d, len(res["findings"])))
    return res


def analyze(tranalyze, d):
    return analysis_result(d, start_analysis(tranalyze, d))


def check_missing(d, res, i, f):
    """finding i (missing) against itself and the rank table (see the top)"""
    what = "%s: finding %d (missing #%s)" % (d, i, f["seq"])
    seq, comm = f["seq"], f["comm"]
    last = {r["rank"]: (r.get("last_seq") or {}).get(comm) for r in res["ranks"]}
    st = {m["rank"]: m["state"] for m in (f.get("stuck_at") or {}).get("members", []) if m.get("rank") is not None}
    msg = f["message"]
    m = re.search(r"which ranks? ([0-9, -]+) issued and waits? in", msg)
    check(m, "%s: the message names no ranks that issued it: %r" % (what, msg))
    eq(ranks_of_text(m.group(1)), sorted(f["others"]), "%s: the ranks the message says issued it, and others" % what)
    m = re.search(r"; ranks? ([0-9, -]+) had not issued it either", msg)
    behind = ranks_of_text(m.group(1)) if m else []
    for r in f["ranks"]:
        check(last.get(r) is None or last[r] < seq,
              "%s: culprit rank %d never issued it, yet its last seq is %r" % (what, r, last.get(r)))
        eq(st.get(r), "never_issued", "%s: culprit rank %d in stuck_at" % (what, r))
    for r in f["others"]:
        check(last.get(r) is not None and last[r] >= seq,
              "%s: rank %d issued it and waits in it, yet its last seq is %r" % (what, r, last.get(r)))
        check(st.get(r) in ("blocked_inside", "completed"),
              "%s: rank %d issued it, yet stuck_at says %r" % (what, r, st.get(r)))
    for r in behind:
        check(last.get(r) is None or last[r] < seq,
              "%s: rank %d had not issued it, yet its last seq is %r" % (what, r, last.get(r)))
        eq(st.get(r), "never_issued", "%s: rank %d (had not issued it either) in stuck_at" % (what, r))
    parts = sorted(f["ranks"] + f["others"] + behind)
    eq(parts, sorted(f["comm_ranks"]), "%s: culprits, others and the ranks behind against the communicator" % what)


def top(res):
    f = res["findings"][0] if res["findings"] else {}
    return {k: f.get(k) for k in ("kind", "subkind", "seq", "ranks", "others", "comm_ranks")}


def last_seqs(res):
    return {r["rank"]: r.get("last_seq") for r in res["ranks"]}


def main():
    launch, shim, tranalyze, work, prog = sys.argv[1:6]
    shutil.rmtree(work, ignore_errors=True)
    traces = os.path.join(work, "traces")
    os.makedirs(traces)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update({"TRSHIM_DIR": traces, "EARLY_STOP_STEP": str(STEPS), "EARLY_WORK_US": str(WORK_US)})
    p = subprocess.Popen([launch, "-n", str(NRANKS), "--timeout", str(int(LIMIT) + 60), "--grace", "3", "--quiet", "--",
                          "env", "LD_PRELOAD=" + shim, prog], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    log = []
    try:
        # every rank records (its handlers are installed once the shim is active): a SIGUSR1 before
        # that ends the process, as it would without the shim
        t0 = time.time()
        while p.poll() is None and time.time() - t0 < LIMIT:
            try:
                rings = ringhdr.rings_by_rank(traces) if len(os.listdir(traces)) >= NRANKS else {}
            except (ringhdr.ring.RingError, Failure, OSError):
                rings = {}                  # a ring being created (its header not complete yet)
            if len(rings) == NRANKS and all(rg["records"] for rg in rings.values()):
                break
            time.sleep(0.05)
        check(p.poll() is None, "the job ended before the storm (status %r)" % p.poll())
        stop = threading.Event()

        def storm():
            while not stop.is_set():
                p.send_signal(signal.SIGUSR1)       # the launcher forwards it to every rank
                time.sleep(1.0 / STORM_HZ)
        th = threading.Thread(target=storm)
        th.start()
        copies, at_hang, start = [], 0, time.time()
        try:
            while True:
                now = time.time() - start
                check(now < LIMIT, "rank 3 had not exited after %g s of storm" % LIMIT)
                check(p.poll() is None, "the job ended during the storm (status %r)" % p.poll())
                exited = rank3_exited(traces)
                d = os.path.join(work, "copy%03d" % len(copies))
                copy_folder(traces, d)
                copies.append((d, now, start_analysis(tranalyze, d)))
                at_hang += exited
                if now >= MIN_STORM and at_hang >= COPIES_AT_HANG:
                    break
                time.sleep(COPY_EVERY)
            copies = [(d, t, analysis_result(d, q)) for d, t, q in copies]
        finally:
            stop.set()
            th.join()
            for c in copies:
                if isinstance(c[2], subprocess.Popen) and c[2].poll() is None:
                    c[2].kill()
                    c[2].communicate()
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=120)
        log.append("$ job_early_exit (%d ranks, storm of %d copies): status %d\n%s" %
                   (NRANKS, len(copies), p.returncode, out[-3000:]))
        final = analyze(tranalyze, traces)
        want = {"kind": "missing", "subkind": None, "seq": 2 * STEPS + 1, "ranks": [3],
                "others": [r for r in range(NRANKS) if r != 3], "comm_ranks": list(range(NRANKS))}
        eq(top(final), want, "the final answer's top finding")
        check_missing(traces, final, 0, final["findings"][0])
        hang, mid = 0, 0
        for d, t, res in copies:
            for i, f in enumerate(res["findings"]):
                if f["kind"] == "missing":
                    check_missing(d, res, i, f)
            if last_seqs(res) == last_seqs(final):
                hang += 1
                eq(top(res), top(final), "%s (%.1f s into the storm, at the hang): top finding" % (d, t))
            else:
                mid += 1
            log.append("%s %.1f s: %s %s" % (d, t, "hang" if last_seqs(res) == last_seqs(final) else "mid-way",
                                            top(res)))
        check(hang >= 1, "no copy was taken at the hang")
        check(last_seqs(copies[0][2]) != last_seqs(final), "the first copy is already of the hang")
        print("\n".join(log))
        print("ok: %d copies (%d mid-way, %d at the hang) consistent; final: %s" % (len(copies), mid, hang, top(final)))
    except Failure as e:
        if p.poll() is None:
            p.kill()
        out, _ = p.communicate()
        log.append("$ job_early_exit (%d ranks): status %r\n%s" % (NRANKS, p.returncode, (out or "")[-4000:]))
        print("\n".join(log))
        print("FAIL:", e)
        sys.exit(1)


if __name__ == "__main__":
    main()
