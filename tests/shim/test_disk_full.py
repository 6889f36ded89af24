#!/usr/bin/env python3
"""A trace folder that fills up mid-job (issue 33, part 3): test_disk_full.py CASE.

A real 4-rank job (tests/analyzer/jobs/job_many.c: 5000 AllReduces) on the
simulator with libtrshim.so preloaded, TRSHIM_DIR on a 2 MiB tmpfs:
  fill     rank 0 fills the tmpfs before step 500 (a checkpoint that filled
           the disk): every rank's ring file holds its first 2048 record
           slots and cannot grow; no trace, no marker's line can be
           written (empty markers)
  diverge  the same with a divergence planted after the fill (rank 0's extra
           AllReduce at collective #1001; the job hangs, the launcher ends
           it): still named, from the calls that remain
  natural  no filler: the rings themselves fill the tmpfs, at a point that
           depends on timing; the lost ranges must be exactly what each ring
           file lacks
Asserted: the job's exit status and output are as without the shim, each
rank says in one trshim: line that the folder is full, tranalyze exits 1
with a trace_lost / disk_full finding naming the ranks and the exact
collective seqs not recorded, reads the empty markers as the shim's, and
never calls the lost records torn ("the process stopped while writing").
Mounting needs root: a case that cannot mount exits 77 (skipped) and says why."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from checks import Failure, Skip, check, eq, path_of, run_case, shim_lines  # noqa: E402
import ring  # noqa: E402

SCRUB = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_.*|PMI_.*|PMIX_.*|"
                   r"SLURM_.*|TRSHIM.*|TORCHELASTIC_RUN_ID|TRSIM_.*|LD_PRELOAD|LD_LIBRARY_PATH|NCCL_.*|MANY_.*)$")
CALLS = 5000
FULL_LINE = (r"^trshim: the trace folder %s is full \(No space left on device\): the ring file %s/"
             r"trshim\.[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]+\.(\d+)\.ring cannot grow: newer calls are kept in memory only, "
             r"lost unless room is made before this process's traces are written \(a trace that cannot be written "
             r"leaves a \.write-failed marker\)$")


class Case:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="trshim-full-")
        self.mounts = []

    def mount_tmpfs(self, name, size):
        if os.geteuid() != 0:
            raise Skip("not root: cannot mount a tmpfs")
        path = os.path.join(self.tmp, name)
        os.makedirs(path)
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0700" % size, "tmpfs", path],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise Skip("cannot mount a tmpfs: %s" % p.stderr.strip())
        self.mounts.append(path)
        return path

    def job(self, traces, extra, shim=True, timeout=60):
        env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
        env.update(extra)
        env["TRSHIM_DIR"] = traces
        cmd = [path_of("TRSIM_LAUNCH"), "-n", "4", "--timeout", str(timeout), "--grace", "3", "--"]
        cmd += ["env", "LD_PRELOAD=" + path_of("TRSHIM_LIB")] if shim else []
        cmd += [path_of("JOB_MANY")]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout + 120, cwd=self.tmp)
        sys.stdout.write("$ %s %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (
            " ".join("%s=%s" % kv for kv in sorted(extra.items())), " ".join(cmd), p.returncode, p.stdout,
            p.stderr[-6000:]))
        return p

    def cleanup(self):
        for m in self.mounts:
            subprocess.run(["umount", m], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


def unmount(c):
    for m in c.mounts:
        subprocess.run(["umount", m], capture_output=True)
    c.mounts = []


def launcher_lines(stderr):
    """what the launcher says of the ranks' ends, pids left out"""
    return sorted(re.sub(r"\(pid \d+\)", "(pid)", x) for x in stderr.splitlines() if x.startswith("trsim-launch:"))


def same_job(p, plain):
    eq(p.returncode, plain.returncode, "the job's exit status as without the shim")
    eq(sorted(p.stdout.splitlines()), sorted(plain.stdout.splitlines()), "the job's output as without the shim")
    eq(launcher_lines(p.stderr), launcher_lines(plain.stderr), "the launcher's lines as without the shim")


def check_full_lines(p, traces):
    """one line per rank (besides the "recording to" line): nothing else"""
    full = shim_lines(p.stderr)
    pids = []
    for x in full:
        m = re.match(FULL_LINE % (re.escape(traces), re.escape(traces)), x)
        check(m, "the folder-full line: %r" % x)
        pids.append(int(m.group(1)))
    eq(len(pids), 4, "folder-full lines (one per rank)")
    eq(len(set(pids)), 4, "folder-full lines of 4 processes: %s" % pids)
    return sorted(pids)


def folder(traces):
    names = sorted(os.listdir(traces))
    rings = [n for n in names if n.endswith(".ring")]
    markers = [n for n in names if n.endswith(".write-failed")]
    eq(len(rings), 4, "ring files in the folder (%s)" % names)
    eq(len(markers), 4, "write-failed markers in the folder (%s)" % names)
    eq(sorted(rings + markers), names, "the folder holds rings and markers only (no JSON trace, no temporary)")
    return rings, markers


def analyze(traces):
    q = subprocess.run([path_of("TRANALYZE"), "--json", traces], capture_output=True, text=True, timeout=120)
    t = subprocess.run([path_of("TRANALYZE"), traces], capture_output=True, text=True, timeout=120)
    sys.stdout.write("$ tranalyze %s\nrc=%d\n%s%s\n" % (traces, t.returncode, t.stdout, t.stderr))
    eq(q.returncode, 1, "tranalyze --json exit status (a finding)")
    eq(t.returncode, 1, "tranalyze exit status (a finding)")
    for bad in ("stopped while writing", "torn", "not a write-failed marker", "No problem found"):
        check(bad not in t.stdout + t.stderr, "tranalyze says %r" % bad)
    return json.loads(q.stdout), t.stdout


def lost_of(finding):
    """rank -> (records, errno, [(comm, [[from, to]...], count)])"""
    return {x["rank"]: (x["records"], x["errno"], [(c["comm"], c["seqs"], c["count"]) for c in x["comms"]])
            for x in finding["lost"]}


def check_lost(res, want, comm_id):
    """the trace_lost finding: ranks, subkind, exact ranges; want: rank -> (records, [from, to])"""
    fs = [f for f in res["findings"] if f["kind"] == "trace_lost"]
    eq(len(fs), 1, "trace_lost findings")
    f = fs[0]
    eq((f["subkind"], f["ranks"], f["root_cause"]), ("disk_full", sorted(want), False),
       "trace_lost: subkind, ranks, root cause")
    exp = {r: (n, 28, [(comm_id, [rng], rng[1] - rng[0] + 1)]) for r, (n, rng) in want.items()}
    eq(lost_of(f), exp, "trace_lost: per rank records, errno and the seqs not recorded")
    check("the trace folder filled up (No space left on device)" in f["message"], "the message: %s" % f["message"])
    return f


def check_markers(res, markers, traces):
    """the empty markers are the shim's: each placed against its rank (the ring says why it is empty)"""
    problems = {x["file"]: x["problem"] for x in res["inputs"]}
    for m in markers:
        path = os.path.join(traces, m)
        eq(os.path.getsize(path), 0, "marker %s is empty" % m)
        rank = int(re.match(r"^trshim\.[A-Za-z0-9_-]+\.r(\d+)\.", m).group(1))
        ring_file = [x["ring"]["file"] for x in res["ranks"] if x["rank"] == rank]
        eq(problems.get(path), "a trace write of rank %d failed (No space left on device; its marker is empty, not "
           "even the marker's line could be written): its calls are read from its ring file %s, which lacks the "
           "last of them (finding trace_lost)" % (rank, ring_file[0]), "what tranalyze says of %s" % m)


def comm_of(res):
    eq(len(res["comms"]), 1, "communicators")
    return res["comms"][0]["id"]


def ring_headers(traces, rings):
    out = {}
    for n in rings:
        r = ring.read_ring(os.path.join(traces, n))
        h = r["header"]
        out[h["env_rank"]] = (h, r)
    return out


def case_fill(c):
    mnt = c.mount_tmpfs("mnt", 2 << 20)
    traces = os.path.join(mnt, "traces")
    extra = {"MANY_FILL": os.path.join(mnt, "filler")}
    plain = c.job(os.path.join(c.tmp, "unused"), extra, shim=False)
    eq(plain.returncode, 0, "the job without the shim")
    os.unlink(extra["MANY_FILL"])
    p = c.job(traces, extra)
    same_job(p, plain)
    pids = check_full_lines(p, traces)
    rings, markers = folder(traces)
    heads = ring_headers(traces, rings)
    eq(sorted(h["pid"] for h, _ in heads.values()), pids, "the rings are the processes that said so")
    for r, (h, rr) in sorted(heads.items()):
        eq((h["lost_errno"], h["file_records"], h["file_comms"], h["head"], h["state"]), (28, 2048, 0, CALLS, 2),
           "rank %d's ring header: lost_errno, file_records, file_comms, head, state (exited)" % r)
        eq(len(rr["records"]), 2048, "rank %d's records in its ring file" % r)
    res, text = analyze(traces)
    check_markers(res, markers, traces)
    eq([f["kind"] for f in res["findings"]], ["trace_lost"], "the findings (the job itself was clean)")
    check_lost(res, {r: (CALLS - 2048, [2049, CALLS]) for r in range(4)}, comm_of(res))
    check("Nothing hung or failed." in text, "the verdict: %s" % text[:400])
    eq([(x["rank"], x["ended"]["state"]) for x in res["ranks"]], [(r, "exited") for r in range(4)], "ranks' ends")


def case_diverge(c):
    mnt = c.mount_tmpfs("mnt", 2 << 20)
    traces = os.path.join(mnt, "traces")
    extra = {"MANY_FILL": os.path.join(mnt, "filler"), "MANY_EXTRA": "1000"}
    plain = c.job(os.path.join(c.tmp, "unused"), extra, shim=False, timeout=10)
    eq(plain.returncode, 124, "the job without the shim hangs (the launcher's timeout)")
    os.unlink(extra["MANY_FILL"])
    p = c.job(traces, extra, timeout=10)
    same_job(p, plain)
    check_full_lines(p, traces)
    rings, markers = folder(traces)
    res, text = analyze(traces)
    check_markers(res, markers, traces)
    f = res["findings"][0]
    eq((f["kind"], f["subkind"], f["seq"], f["ranks"], f["others"], f["root_cause"], f["call"]["function"],
        f["others_call"]["function"]),
       ("divergence", "extra_call", 1001, [0], [1, 2, 3], True, "log_metrics", "train_step"),
       "the planted divergence, named from the calls that remain")
    eq([x["kind"] for x in res["findings"]], ["divergence", "trace_lost"], "the findings")
    # rank 0 issued one call more (its extra one)
    check_lost(res, {0: (CALLS + 1 - 2048, [2049, CALLS + 1]), 1: (CALLS - 2048, [2049, CALLS]),
                     2: (CALLS - 2048, [2049, CALLS]), 3: (CALLS - 2048, [2049, CALLS])}, comm_of(res))


def case_natural(c):
    mnt = c.mount_tmpfs("mnt", 2 << 20)
    traces = os.path.join(mnt, "traces")
    plain = c.job(os.path.join(c.tmp, "unused"), {}, shim=False)
    eq(plain.returncode, 0, "the job without the shim")
    p = c.job(traces, {})
    same_job(p, plain)
    check_full_lines(p, traces)
    rings = [n for n in os.listdir(traces) if n.endswith(".ring")]
    eq(len(rings), 4, "ring files")
    heads = ring_headers(traces, rings)
    # what each ring lacks, from the file itself: its records' seqs against its head
    want = {}
    for r, (h, rr) in sorted(heads.items()):
        seqs = sorted(x["seq"] for x in rr["records"])
        eq(seqs, list(range(1, len(seqs) + 1)), "rank %d's ring holds its first calls" % r)
        check(h["file_records"] == len(seqs) and len(seqs) < CALLS and h["lost_errno"] == 28,
              "rank %d's header: file_records %d, records %d, lost_errno %d" % (r, h["file_records"], len(seqs),
                                                                                h["lost_errno"]))
        want[r] = (CALLS - len(seqs), [len(seqs) + 1, CALLS])
    res, text = analyze(traces)
    eq([f["kind"] for f in res["findings"]], ["trace_lost"], "the findings (the job itself was clean)")
    check_lost(res, want, comm_of(res))


CASES = {"fill": case_fill, "diverge": case_diverge, "natural": case_natural}


def main():
    return run_case(CASES, Case, sys.argv, "test_disk_full.py", on_failure=unmount)


if __name__ == "__main__":
    sys.exit(main())
