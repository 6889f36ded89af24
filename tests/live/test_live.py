#!/usr/bin/env python3
"""The answer while the job runs (suite 'live', docs/live.md): `trshim run`
starts real multi-process jobs on the simulated runtime with its watcher
(tranalyze --watch) beside the launcher; the watcher's lines on stderr are
read as they come, with the time each arrived.

    test_live.py CASE      CASE: planted, planted_abort, killed, oom, pause, straggler, slow_once, multinode,
                           folder_refused, analyze_args, torch

Environment (tests/live/meson.build): TRSHIM_CLI (python/trshim/cli.py),
TRSHIM_LIBRARY, TRSHIM_TRANALYZE, TRSIM_LIB, TRSIM_LAUNCH, TRAIN_DP, JOB_<NAME>
(the analyzer's job programs), LIVE_WORK (a folder for the traces), TRSIM_DIR
(the simulator's build folder: its driver and NVML for PyTorch), TRSHIM_TORCH_VENV
(the torch suite's venv: case torch skips, exit 77, without it)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

failures = []
RUNNING = []                  # the jobs started: none outlives the test


class Failure(Exception):
    pass


def check(cond, what):
    """a soft check: the case goes on (and the job is stopped) whatever it finds"""
    if not cond:
        failures.append(what)
        print("FAIL " + what)
    return cond

CLI = os.environ["TRSHIM_CLI"]
TA = os.environ["TRSHIM_TRANALYZE"]
LAUNCH = os.environ["TRSIM_LAUNCH"]
HANG = 5                      # the hang threshold of the jobs below (s)


class Live:
    """trshim run -- trsim-launch ... with stderr read line by line as it comes"""

    def __init__(self, name):
        self.job = "live-" + name
        self.traces = os.path.join(os.environ["LIVE_WORK"], name + "-traces")
        shutil.rmtree(self.traces, ignore_errors=True)
        self.lines = []           # (monotonic time, line)
        self.lock = threading.Lock()

    def start(self, nranks, prog, run_opts=(), launch_opts=(), env=None, hang=HANG):
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("TRSHIM_") and k not in ("TRSHIM_LIBRARY", "TRSHIM_TRANALYZE") or k in (
                    "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"):
                del e[k]
        e.update(env or {})
        self.cmd = ([sys.executable, CLI, "run", "--dir", self.traces, "--job-id", self.job, "--hang-sec", str(hang)] +
                    list(run_opts) + ["--", LAUNCH, "-n", str(nranks), "--timeout", "120", "--grace", "5", "--quiet"] +
                    list(launch_opts) + ["--"] + list(prog))
        print("$ " + " ".join(self.cmd))
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(self.cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        RUNNING.append(self.p)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stderr:
            with self.lock:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
            sys.stdout.write("%6.2f %s" % (time.monotonic() - self.t0, line))

    def find(self, pattern, start=0):
        """(index, time, line) of the first line from start that matches, None"""
        with self.lock:
            for i in range(start, len(self.lines)):
                if re.search(pattern, self.lines[i][1]):
                    return i, self.lines[i][0], self.lines[i][1]
        return None

    def wait_line(self, pattern, limit):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            got = self.find(pattern)
            if got:
                return got
            if self.p.poll() is not None and not self.reader.is_alive():
                return self.find(pattern)
            time.sleep(0.05)
        return None

    def block(self, start):
        """the lines of the report that begins at line start, up to its "full report" line"""
        with self.lock:
            out = []
            for _, line in self.lines[start:]:
                out.append(line)
                if line.startswith("trshim: full report:"):
                    break
            return out

    def stop(self, sig=signal.SIGTERM):
        """the job stopped as a scheduler would (trshim run passes it to the launcher): when"""
        t = time.monotonic()
        if self.p.poll() is None:
            self.p.send_signal(sig)
        return t

    def wait(self, limit=120):
        try:
            self.p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise Failure("trshim run did not end within %d s" % limit)
        self.reader.join(timeout=10)
        self.t_end = time.monotonic()
        return self.p.returncode

    def analyse(self):
        r = subprocess.run([TA, "--json", "--job", self.job, self.traces], capture_output=True, text=True,
                           timeout=300)
        check(r.returncode in (0, 1), "tranalyze on the traces: exit %d %s" % (r.returncode, r.stderr[-2000:]))
        return json.loads(r.stdout)

    def report(self, suffix=""):
        base = os.path.join(self.traces, "tranalyze.%s%s" % (self.job, suffix))
        for ext in (".txt", ".json", ".md"):
            st = os.lstat(base + ext)
            check(st.st_mode & 0o777 == 0o600, "%s%s: mode %o, not 0600" % (base, ext, st.st_mode & 0o777))
        with open(base + ".json") as f:
            return json.load(f)


def top_of(doc):
    f = doc["findings"][0] if doc.get("findings") else {}
    return {k: f.get(k) for k in ("kind", "subkind", "seq", "ranks", "others")}


def max_pending(finding):
    """the longest any member of the finding's stuck collective waited, up to its rank's end (s)"""
    members = (finding.get("stuck_at") or {}).get("members") or []
    waits = [m["pending_s"] for m in members if m.get("pending_s") is not None]
    check(waits, "the finding's stuck_at lists how long its members waited: %s" % finding.get("stuck_at"))
    return max(waits) if waits else 0


def train_dp(plant):
    return {"LD_PRELOAD": os.environ["TRSIM_LIB"], "TRAIN_DP_PLANT": plant}


def job_prog(name):
    return [os.environ["JOB_" + name.upper()]]


# ---- the planted hang of examples/run ------------------------------------------------

PLANTED = {"kind": "divergence", "subkind": "skipped_call", "seq": 12, "ranks": [0], "others": [1, 2, 3]}


def check_planted_block(block):
    text = "\n".join(block)
    check(any(line.startswith("trshim: ROOT CAUSE: divergence / skipped_call") and "collective #12" in line
              for line in block), "the ROOT CAUSE line names the divergence at #12:\n%s" % text)
    check("rank 0: AllReduce(1 x float32, avg) at log_metrics (train_dp.c:" in text,
          "the block names rank 0 and its line in train_dp.c:\n%s" % text)
    check(all(line.startswith("trshim: ") for line in block), "every line prefixed trshim:")


def case_planted():
    j = Live("planted")
    j.start(4, [os.environ["TRAIN_DP"], "40", "64"], env=train_dp("log_metrics"))
    got = j.wait_line(r"^trshim: HANG: ", 60)
    if not check(got, "a HANG report while the job runs"):
        j.stop()
        j.wait()
        return
    i, t_hang, _ = got
    running = j.p.poll() is None
    full = j.wait_line(r"^trshim: full report: ", 30)
    t_term = j.stop()
    rc = j.wait()
    check(running, "the job still ran when the report came")
    check(full and full[1] < t_term, "the report was whole before the job was stopped")
    block = j.block(i)
    check_planted_block(block)
    check(rc == 143, "trshim run exits with the launcher's status (SIGTERM: 143): %d" % rc)
    final = j.analyse()
    check(top_of(final) == PLANTED, "the traces' root cause %s" % top_of(final))
    stall_began = t_term - max_pending(final["findings"][0])
    check(t_hang - stall_began <= HANG + 5, "the report came %.1f s after the stall began (at most %d s)" %
          (t_hang - stall_began, HANG + 5))
    live = j.report(".hang1")
    check(top_of(live) == PLANTED, "tranalyze.JOB.hang1.json's root cause %s" % top_of(live))
    check(live["findings"][0]["call"]["site"] == final["findings"][0]["call"]["site"],
          "the live report's call site %s, the traces' %s" % (live["findings"][0]["call"]["site"],
                                                             final["findings"][0]["call"]["site"]))
    with open(os.path.join(j.traces, "tranalyze.%s.hang1.txt" % j.job)) as f:
        txt = f.read()
    check(all(line[len("trshim: "):] in txt for line in block if line.startswith("trshim: ROOT CAUSE")),
          "the printed block is the report's")
    end = top_of(j.report())
    check(end == PLANTED, "tranalyze.JOB.json (the final report) %s" % end)
    verdict = j.find(r"^trshim: verdict: ")
    check(verdict and "ROOT CAUSE: divergence / skipped_call" in verdict[2] and
          ("tranalyze.%s.txt" % j.job) in verdict[2], "the verdict line: %s" % (verdict and verdict[2]))
    check(len([x for x in j.lines if x[1].startswith("trshim: HANG:")]) == 1, "one report for one stall")
    # --reports writes what --json, --markdown and the text report print, byte for byte
    prefix = os.path.join(os.environ["LIVE_WORK"], "planted-reports")
    r = subprocess.run([TA, "--reports", prefix, "--job", j.job, j.traces], capture_output=True, text=True)
    for ext, opt in ((".txt", []), (".json", ["--json"]), (".md", ["--markdown"])):
        alone = subprocess.run([TA] + opt + ["--job", j.job, j.traces], capture_output=True, text=True).stdout
        with open(prefix + ext) as f:
            check(f.read() == alone, "--reports' %s is what tranalyze %s prints" % (ext, " ".join(opt) or "(text)"))


def case_planted_abort():
    j = Live("planted_abort")
    j.start(4, [os.environ["TRAIN_DP"], "40", "64"], run_opts=["--on-hang", "abort"], env=train_dp("log_metrics"))
    rc = j.wait(180)
    got = j.find(r"^trshim: HANG: ")
    check(got, "a HANG report")
    check(j.find(r"^trshim: --on-hang abort: ending the job \(SIGTERM to the launcher"), "the abort's line")
    check(rc == 143, "the launcher's status after its SIGTERM (143): %d" % rc)
    if got:
        check_planted_block(j.block(got[0]))
    final = j.analyse()
    check(top_of(final) == PLANTED, "the traces give the same answer: %s" % top_of(final))
    waited = max_pending(final["findings"][0])
    check(waited <= HANG + 10, "the job ended %.1f s after the stall began (at most %d s)" % (waited, HANG + 10))
    check(top_of(j.report(".hang1")) == PLANTED, "the live report")


# ---- a rank killed, a rank out of memory: gone while the others wait ------------------

def case_killed():
    j = Live("killed")
    j.start(4, job_prog("killed"), launch_opts=["--no-kill-on-fail"])
    got = j.wait_line(r"^trshim: HANG: ", 60)
    t_term = j.stop() if got else None
    j.wait()
    if not check(got, "a HANG report while the others wait"):
        return
    check("rank 2 is gone (killed" in got[2], "the report names the rank gone: %s" % got[2])
    check(t_term - got[1] > 0, "before the job was stopped")
    block = "\n".join(j.block(got[0]))
    check("ROOT CAUSE: missing" in block and "collective #3" in block, "the root cause:\n%s" % block)
    live = j.report(".hang1")
    t = top_of(live)
    check((t["kind"], t["seq"], t["ranks"]) == ("missing", 3, [2]), "the live report's root cause %s" % t)
    rank2 = [r for r in live["ranks"] if r["rank"] == 2]
    check(rank2 and rank2[0]["ended"]["state"] == "killed", "rank 2 killed in the live report: %s" %
          (rank2 and rank2[0]["ended"]))


def case_oom():
    j = Live("oom")
    j.start(4, job_prog("oom"), launch_opts=["--no-kill-on-fail"], env={"TRSIM_DEVICE_MEM": "256M"})
    got = j.wait_line(r"^trshim: HANG: ", 60)
    if got:
        j.wait_line(r"^trshim: full report: ", 30)
        j.stop()
    j.wait()
    if not check(got, "a HANG report while the others wait"):
        return
    check("rank 1 exited" in got[2], "the report names the rank gone: %s" % got[2])
    block = "\n".join(j.block(got[0]))
    check("ROOT CAUSE: oom" in block and "536870912" in block.replace(",", "") or "512.0 MiB" in block,
          "the root cause is rank 1's OOM of 512 MiB:\n%s" % block)
    live = j.report(".hang1")
    f = live["findings"][0]
    check((f["kind"], f["ranks"], f.get("bytes")) == ("oom", [1], 536870912), "the live report's OOM %s" %
          {k: f.get(k) for k in ("kind", "ranks", "bytes")})
    peaks = {r["rank"]: r.get("peak_bytes") for r in live["ranks"]}
    check(all(isinstance(peaks.get(k), int) and peaks[k] >= 64 << 20 for k in range(4)),
          "every rank's peak in the live report (at least its 64 MiB of parameters): %s" % peaks)


# ---- what is not a hang ----------------------------------------------------------------

def case_pause():
    """every rank pauses 3x the threshold between collectives, nothing pending: no report"""
    j = Live("pause")
    j.start(8, job_prog("clean"), env={"CLEAN_PAUSE_MS": str(3 * HANG * 1000)})
    rc = j.wait(180)
    check(rc == 0, "the clean job exits 0: %d" % rc)
    check(j.t_end - j.t0 >= 3 * HANG, "the job paused (ran %.1f s)" % (j.t_end - j.t0))
    check(not j.find(r"^trshim: (HANG|hang:)"), "no hang reported")
    v = j.find(r"^trshim: verdict: ")
    check(v and v[2].startswith("trshim: verdict: No problem found"), "the verdict: %s" % (v and v[2]))
    check(j.analyse()["findings"] == [], "no finding in the traces")


def case_straggler():
    """a rank late at every step by less than the threshold: no root-cause claim, a straggler at the end"""
    j = Live("straggler")
    j.start(4, job_prog("straggler"), env={"STRAGGLER_MS": "700"}, hang=2)
    rc = j.wait(180)
    check(rc == 0, "the job exits 0: %d" % rc)
    check(not j.find(r"^trshim: (HANG|hang:)") and not j.find("ROOT CAUSE"), "no hang, no root cause claimed")
    v = j.find(r"^trshim: verdict: ")
    check(v and v[2].startswith("trshim: verdict: Nothing hung or failed"), "the verdict: %s" % (v and v[2]))
    f = j.analyse()["findings"]
    check([(x["kind"], x["ranks"], x["root_cause"]) for x in f] == [("straggler", [3], False)],
          "one straggler finding, rank 3: %s" % [(x["kind"], x["ranks"]) for x in f])


def case_slow_once():
    """a rank late once by more than the threshold, then on time: the report is withdrawn when the job goes on"""
    j = Live("slow_once")
    j.start(4, job_prog("straggler"), env={"STRAGGLER_MS": "9000", "STRAGGLER_AT": "3"}, hang=3)
    rc = j.wait(180)
    check(rc == 0, "the job exits 0: %d" % rc)
    hangs = [x for x in j.lines if x[1].startswith("trshim: HANG:")]
    # while the job runs, or at its end when it ends before the next look
    went = j.find(r"^trshim: the job went on (after [0-9.]+ s: .*|and ended without a hang: )the report above "
                  r"\(hang1\) was a slow rank, not a hang$")
    check(len(hangs) == 1, "one report while rank 3 is late: %s" % [x[1] for x in hangs])
    check(went and hangs and went[1] > hangs[0][0], "then the line that withdraws it: %s" % (went and went[2]))
    v = j.find(r"^trshim: verdict: ")
    check(v and "ROOT CAUSE" not in v[2], "the verdict claims no root cause: %s" % (v and v[2]))
    check(all(f["root_cause"] is False for f in j.analyse()["findings"]), "no root cause in the traces")


# ---- several nodes: synthetic rings, this host's ranks played by live processes ---------

def case_multinode():
    """ranks 0, 1 on another node, 2, 3 here: with a shared folder this node's watcher leaves the answer
    to rank 0's node; with only its own ranks' rings it answers and says the answer is partial"""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analyzer"))
    import live_rings as lr
    import socket
    here = socket.gethostname()
    sleepers = [subprocess.Popen(["sleep", "120"]) for _ in range(2)]
    try:
        for shared in (True, False):
            d = os.path.join(os.environ["LIVE_WORK"], "multinode-%s" % ("shared" if shared else "local"))
            shutil.rmtree(d, ignore_errors=True)
            ranks = lr.job("mn", 4, 20)
            for r in ranks:
                r.host = here if r.rank >= 2 else "othernode"
                if r.rank >= 2:
                    r.pid = sleepers[r.rank - 2].pid
            mine = [r for r in ranks if shared or r.rank >= 2]
            beat = lr.Beater(lr.write_rings(d, mine, {r.rank: 12 for r in mine}))
            try:
                for i, r in enumerate(mine):     # every rank waits in #12; rank 2's watchdog found it
                    k = next(k for k, c in enumerate(r.calls) if c[2] == 12)
                    beat.set(i, "pending", "I", 1)
                    beat.set(i, "pending_since_ns", "Q", r.calls[k][15])
                    if r.rank == 2:
                        beat.set(i, "stall_rec", "Q", k + 1)
                        beat.set(i, "stall_since_ns", "Q", r.calls[k][15])
                        beat.set(i, "stall_ns", "Q", beat.now(i))
                w = subprocess.Popen([TA, "--watch", "--settle", "1", "--hang-sec", "600", d],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
                RUNNING.append(w)
                time.sleep(6)
                w.terminate()
                err = w.communicate(timeout=120)[1]
            finally:
                beat.close()
            print("--- %s folder:\n%s" % ("shared" if shared else "node-local", err))
            reports = [n for n in os.listdir(d) if n.startswith("tranalyze.")]
            if shared:
                check("trshim: rank 2: the job stalls; the watcher on othernode (rank 0's) gives the job-wide answer"
                      in err and "trshim: HANG:" not in err and "full report" not in err,
                      "shared folder: this node leaves the answer to othernode")
                check(reports == [], "shared folder: no report written by this node: %s" % reports)
                check("(the reports: from the watcher on rank 0's host)" in err, "its verdict points there")
            else:
                check("trshim: HANG: rank 2 has waited" in err and "ROOT CAUSE" in err, "node-local: an answer")
                check("trshim: partial answer: 2 of 4 ranks' rings are in %s" % d in err,
                      "node-local: the answer says it is partial")
                check("(partial: the ranks of this node)" in err, "node-local: the verdict says so too")
                check(sorted(reports) == sorted("tranalyze.mn.%s" % x for x in
                                                ("hang1.txt", "hang1.json", "hang1.md", "txt", "json", "md")),
                      "node-local: its reports: %s" % reports)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


# ---- real PyTorch under torchrun -----------------------------------------------------

def case_torch():
    """trshim run -- torchrun examples/train_torch.py, rank 0's extra all_reduce: its Python line, live"""
    venv = os.environ.get("TRSHIM_TORCH_VENV", "")
    if not os.path.exists(os.path.join(venv, "bin", "torchrun")):
        print("SKIP: no torch venv at %r (bash tests/pytorch/venv.sh installs it)" % venv)
        sys.exit(77)
    sim = os.environ["TRSIM_DIR"]
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.normpath(os.path.join(here, "..", "..", "examples", "train_torch.py"))
    with open(script) as f:
        line = next(i for i, t in enumerate(f, 1) if "dist.all_reduce(metric)" in t)
    tag = "live%d" % os.getpid()
    env = {"LD_PRELOAD": ":".join([os.environ["TRSIM_LIB"], os.path.join(sim, "driver", "libcuda.so.1"),
                                   os.path.join(sim, "driver", "libnvidia-ml.so.1")]),
           "PATH": os.path.join(venv, "bin") + ":" + os.environ.get("PATH", ""), "OMP_NUM_THREADS": "1",
           "TRAIN_PLANT": "log_metrics", "TRSIM_SHM_TAG": tag}
    j = Live("torch")
    e = dict(os.environ)
    e.update(env)
    os.environ.update(env)
    j.cmd = None
    # torchrun is the launcher here: trsim-launch is left out
    cmd = [sys.executable, CLI, "run", "--dir", j.traces, "--job-id", j.job, "--hang-sec", str(HANG), "--",
           "torchrun", "--nproc-per-node", "2", "--master-port", str(29600 + os.getpid() % 300), script]
    print("$ " + " ".join(cmd))
    j.t0 = time.monotonic()
    j.p = subprocess.Popen(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    RUNNING.append(j.p)
    j.reader = threading.Thread(target=j._read, daemon=True)
    j.reader.start()
    try:
        got = j.wait_line(r"^trshim: HANG: ", 240)
        if got:
            j.wait_line(r"^trshim: full report: ", 60)
        running = j.p.poll() is None
        t_term = j.stop()
        j.wait(120)
        if not check(got, "a HANG report while the torch job runs"):
            return
        check(running, "the job still ran when the report came")
        block = "\n".join(j.block(got[0]))
        check("ROOT CAUSE: divergence" in block, "the root cause is a divergence:\n%s" % block)
        check("rank 0: AllReduce(1 x float32, sum) at train_torch.py:%d in log_metrics" % line in block, "rank 0's Python line train_torch.py:%d:\n%s" %
              (line, block))
        final = j.analyse()
        f = final["findings"][0]
        check((f["kind"], f["ranks"]) == ("divergence", [0]), "the traces' root cause %s" % top_of(final))
        live = j.report(".hang1")
        check(top_of(live) == top_of(final), "the live answer %s is the traces' %s" % (top_of(live), top_of(final)))
        stall_began = t_term - max_pending(f)
        check(got[1] - stall_began <= HANG + 5, "the report came %.1f s after the stall began (at most %d s)" %
              (got[1] - stall_began, HANG + 5))
    finally:
        for n in os.listdir("/dev/shm"):
            if n.startswith("trsim.%s." % tag):
                os.unlink(os.path.join("/dev/shm", n))


# ---- trshim run's own errors, trshim analyze ------------------------------------------

def case_folder_refused():
    """a folder that cannot hold traces: said before the job starts, the command never run, exit 2"""
    work = os.environ["LIVE_WORK"]
    marker = os.path.join(work, "refused-ran")
    open_777 = os.path.join(work, "refused-0777")
    shutil.rmtree(open_777, ignore_errors=True)
    os.makedirs(open_777)
    os.chmod(open_777, 0o777)
    cases = [("/", "the trace folder cannot be /"), (open_777, "without the sticky bit (mode 0777)"),
             ("/proc/self", "cannot create a file"), ("/proc/self/nonexistent", "cannot make the trace folder")]
    for d, why in cases:
        if os.path.exists(marker):
            os.unlink(marker)
        r = subprocess.run([sys.executable, CLI, "run", "--dir", d, "--", "sh", "-c", "touch " + marker],
                           capture_output=True, text=True, timeout=60)
        lines = r.stderr.splitlines()
        print("--dir %s: rc %d, %r" % (d, r.returncode, lines))
        check(r.returncode == 2, "--dir %s: exit status 2, not %d" % (d, r.returncode))
        check(len(lines) == 1 and lines[0].startswith("trshim: run: ") and why in lines[0],
              "--dir %s: one trshim: run: line saying %r: %r" % (d, why, lines))
        check(not os.path.exists(marker), "--dir %s: the command was not run" % d)
    os.chmod(open_777, 0o700)


def case_analyze_args():
    """trshim analyze passes every argument to tranalyze unchanged"""
    h = subprocess.run([sys.executable, CLI, "analyze", "--help"], capture_output=True, text=True, timeout=60)
    check(h.returncode == 0 and h.stdout.startswith("usage: tranalyze"), "trshim analyze --help is tranalyze's: %r" %
          h.stdout[:200])
    j = Live("analyze")
    j.start(4, [os.environ["TRAIN_DP"], "40", "64"], launch_opts=[], env=train_dp("log_metrics"))
    j.wait_line(r"^trshim: full report: ", 60)
    j.stop()
    j.wait()
    a = subprocess.run([sys.executable, CLI, "analyze", "--json", "--job", j.job, j.traces], capture_output=True,
                       text=True, timeout=120)
    b = subprocess.run([TA, "--json", "--job", j.job, j.traces], capture_output=True, text=True, timeout=120)
    check(a.returncode == b.returncode == 1 and a.stdout == b.stdout and top_of(json.loads(a.stdout)) == PLANTED,
          "trshim analyze --json DIR is tranalyze --json DIR: %d %d" % (a.returncode, b.returncode))


CASES = {n[len("case_"):]: fn for n, fn in globals().items() if n.startswith("case_")}


def main():
    name = sys.argv[1]
    try:
        CASES[name]()
    except Failure as e:
        check(False, str(e))
    finally:
        for p in RUNNING:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
