#!/usr/bin/env python3
"""Tests of trsim-launch: test_launch.py LAUNCHER CASE (or 'all').

The ranks are small sh scripts that record what they saw in files under $OUT.
Time limits are loose on purpose: the machine may be small and loaded."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import Failure, check  # noqa: E402


LAUNCHER = None
SHM = "/dev/shm"


class Job:
    """One launcher run in a private TMPDIR; ranks write into $OUT."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.out = os.path.join(tmp, "out")
        self.tmpdir = os.path.join(tmp, "tmp")
        os.makedirs(self.out)
        os.makedirs(self.tmpdir)

    def env(self, extra=None):
        env = dict(os.environ, OUT=self.out, TMPDIR=self.tmpdir)
        env.pop("TRSIM_LAUNCH_TIMEOUT", None)
        env.pop("TRSIM_SHM_TAG", None)     # tests/run sets one
        env.update(extra or {})
        return env

    def run(self, opts, script=None, prog=None, extra_env=None, limit=60):
        cmd = [LAUNCHER] + opts + (["--", "sh", "-c", script] if script is not None else prog)
        t0 = time.monotonic()
        p = subprocess.run(cmd, env=self.env(extra_env), capture_output=True, text=True,
                           timeout=limit)
        self.rc, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr
        self.elapsed = time.monotonic() - t0
        sys.stdout.write("$ %s\nrc=%d after %.1f s\n--- stdout\n%s--- stderr\n%s\n" % (
            " ".join(cmd), p.returncode, self.elapsed, p.stdout, p.stderr))
        return p.returncode

    def popen(self, opts, script):
        cmd = [LAUNCHER] + opts + ["--", "sh", "-c", script]
        return subprocess.Popen(cmd, env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def read(self, name):
        path = os.path.join(self.out, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read()

    def wait_files(self, names, limit=30):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if all(os.path.exists(os.path.join(self.out, n)) for n in names):
                return
            time.sleep(0.05)
        raise Failure("ranks did not start: missing %s" % names)

    def rdzv_left(self):
        return [n for n in os.listdir(self.tmpdir) if n.startswith("trsim-rdzv.")]


# A rank that records SIGTERM in $OUT/term.$RANK and then exits 143.
TERM_TRAP = 'trap "echo TERM > $OUT/term.$RANK; exit 143" TERM; '
# Sleeps, having said "up" once the sleep runs; the wait builtin is
# interrupted by a trapped signal, so a signal landing right after "up"
# cannot leave sh waiting for a sleep that never saw it.
UP_THEN_WAIT = 'sleep 120 & echo up > $OUT/up.$RANK; wait'
# The same but which survives SIGTERM (only SIGKILL ends it).
TERM_IGNORE = 'trap "echo TERM >> $OUT/term.$RANK" TERM; '


def wait_up(*ranks):
    """sh code that waits until the given ranks have written $OUT/up.R."""
    return "".join('until [ -e $OUT/up.%d ]; do sleep 0.05; done; ' % r for r in ranks)


def case_env(j):
    script = ('env > $OUT/env.$RANK.tmp && mv $OUT/env.$RANK.tmp $OUT/env.$RANK; '
              'test -d "$TRSIM_RDZV" && test -w "$TRSIM_RDZV" && echo $RANK > $TRSIM_RDZV/r$RANK')
    check(j.run(["-n", "3"], script) == 0, "launcher exit status %d, expected 0" % j.rc)
    seen = []
    for r in range(3):
        text = j.read("env.%d" % r)
        check(text is not None, "rank %d did not run" % r)
        env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        seen.append(env)
        for k, v in [("RANK", str(r)), ("LOCAL_RANK", str(r)), ("WORLD_SIZE", "3"),
                     ("LOCAL_WORLD_SIZE", "3"), ("GROUP_RANK", "0"), ("MASTER_ADDR", "127.0.0.1")]:
            check(env.get(k) == v, "rank %d: %s=%r, expected %r" % (r, k, env.get(k), v))
        check(re.fullmatch(r"[0-9]+", env.get("MASTER_PORT", "")) and
              0 < int(env["MASTER_PORT"]) < 65536, "rank %d: MASTER_PORT=%r" % (r, env.get("MASTER_PORT")))
        rdzv = env.get("TRSIM_RDZV", "")
        check(os.path.dirname(rdzv) == j.tmpdir, "rank %d: TRSIM_RDZV=%r not under TMPDIR %s" % (r, rdzv, j.tmpdir))
        tag = env.get("TRSIM_SHM_TAG", "")
        check(re.fullmatch(r"[A-Za-z0-9_-]+", tag), "rank %d: TRSIM_SHM_TAG=%r" % (r, tag))
    for k in ("MASTER_PORT", "TRSIM_RDZV", "TRSIM_SHM_TAG"):
        check(len({e[k] for e in seen}) == 1, "ranks disagree on %s: %s" % (k, [e[k] for e in seen]))
    check(not os.path.exists(seen[0]["TRSIM_RDZV"]), "TRSIM_RDZV %s still exists" % seen[0]["TRSIM_RDZV"])
    # A second job gets its own tag and folder.
    check(j.run(["-n", "1"], "echo $TRSIM_SHM_TAG $TRSIM_RDZV") == 0, "second job failed")
    tag2, rdzv2 = j.stdout.split()
    check(tag2 != seen[0]["TRSIM_SHM_TAG"] and rdzv2 != seen[0]["TRSIM_RDZV"],
          "two jobs share TRSIM_SHM_TAG or TRSIM_RDZV")
    check(not j.rdzv_left(), "rendezvous folders left in TMPDIR: %s" % j.rdzv_left())


def case_nested_tag(j):
    check(j.run(["-n", "2"], "echo $TRSIM_SHM_TAG", extra_env={"TRSIM_SHM_TAG": "outer-7"}) == 0,
          "launcher failed")
    tags = j.stdout.split()
    check(len(tags) == 2 and tags[0] == tags[1] and re.fullmatch(r"outer-7\.[A-Za-z0-9_-]+", tags[0]),
          "expected TRSIM_SHM_TAG=outer-7.<own> in both ranks, got %s" % tags)


def case_fail_kills_others(j):
    script = ('if [ $RANK = 1 ]; then ' + wait_up(0, 2) + 'exit 3; fi; ' + TERM_TRAP +
              UP_THEN_WAIT + '; echo done > $OUT/done.$RANK')
    check(j.run(["-n", "3"], script) == 3, "launcher exit status %d, expected 3" % j.rc)
    for r in (0, 2):
        check(j.read("term.%d" % r) is not None, "rank %d did not get SIGTERM" % r)
        check(j.read("done.%d" % r) is None, "rank %d was not terminated" % r)
    check(j.elapsed < 60, "took %.0f s: the other ranks' sleep was not terminated" % j.elapsed)
    check(re.search(r"rank 1 \(pid \d+\) exited with status 3", j.stderr), "no report of rank 1")
    check(re.search(r"rank 0 \(pid \d+\) exited with status 143", j.stderr), "no report of rank 0")
    check(not j.rdzv_left(), "rendezvous folder left: %s" % j.rdzv_left())


def case_first_failure(j):
    # Rank 2 fails first (5), rank 0 later (7): the launcher reports the first.
    script = ('case $RANK in 2) exit 5;; 0) sleep 2; exit 7;; esac; exit 0')
    check(j.run(["-n", "3", "--no-kill-on-fail"], script) == 5, "exit status %d, expected 5" % j.rc)
    check("rank 0" in j.stderr and "rank 2" in j.stderr and "rank 1 " not in j.stderr,
          "report should name ranks 0 and 2 only")


def case_no_kill_on_fail(j):
    script = ('if [ $RANK = 0 ]; then exit 3; fi; ' + TERM_TRAP +
              'sleep 2; echo done > $OUT/done.$RANK')
    check(j.run(["-n", "3", "--no-kill-on-fail"], script) == 3, "exit status %d, expected 3" % j.rc)
    for r in (1, 2):
        check(j.read("done.%d" % r) is not None, "rank %d did not finish" % r)
        check(j.read("term.%d" % r) is None, "rank %d got SIGTERM" % r)
    check(re.search(r"rank 0 \(pid \d+\) exited with status 3", j.stderr), "no report of rank 0")
    check("rank 1" not in j.stderr, "rank 1 reported although it exited 0")


def case_timeout(j):
    script = TERM_TRAP + 'sleep 120; echo done > $OUT/done.$RANK'
    check(j.run(["-n", "2", "--timeout", "2"], script) == 124, "exit status %d, expected 124" % j.rc)
    for r in (0, 1):
        check(j.read("term.%d" % r) is not None, "rank %d did not get SIGTERM" % r)
    check(re.search(r"trsim-launch: timeout after 2 s: sending SIGTERM to ranks 0 1", j.stderr),
          "no timeout line")
    check(j.elapsed < 60, "took %.0f s" % j.elapsed)
    check(not j.rdzv_left(), "rendezvous folder left: %s" % j.rdzv_left())


def case_timeout_env(j):
    check(j.run(["-n", "1", "--quiet"], "sleep 120", extra_env={"TRSIM_LAUNCH_TIMEOUT": "1"}) == 124,
          "exit status %d, expected 124" % j.rc)
    check("rank 0 (pid" not in j.stderr, "--quiet still reports the ranks")


def case_sigkill_after_grace(j):
    script = (TERM_IGNORE + 'echo up > $OUT/up.$RANK; '
              'if [ $RANK = 0 ]; then exit 0; fi; while :; do sleep 0.2; done')
    check(j.run(["-n", "2", "--timeout", "2", "--grace", "1"], script) == 124,
          "exit status %d, expected 124" % j.rc)
    check(j.read("term.1") is not None, "rank 1 did not get SIGTERM")
    check(re.search(r"rank 1 \(pid \d+\) killed by signal SIGKILL \(sent by trsim-launch\)", j.stderr),
          "rank 1 not reported as SIGKILLed by the launcher")
    check(j.elapsed < 60, "took %.0f s" % j.elapsed)


def case_signal_death(j):
    check(j.run(["-n", "2"], 'if [ $RANK = 1 ]; then ' + wait_up(0) + 'kill -KILL $$; fi; ' +
                 TERM_TRAP + UP_THEN_WAIT) == 137,
          "exit status %d, expected 137" % j.rc)
    check(re.search(r"rank 1 \(pid \d+\) killed by signal SIGKILL \(not sent by trsim-launch\)", j.stderr),
          "rank 1 not reported as killed by SIGKILL")
    check(j.read("term.0") is not None, "rank 0 was not terminated")


def case_shm_cleanup(j):
    other = os.path.join(SHM, "trsim.othertag-%d.x" % os.getpid())
    open(other, "w").close()
    try:
        script = ('echo $TRSIM_SHM_TAG > $OUT/tag; : > /dev/shm/trsim.$TRSIM_SHM_TAG.x$RANK; '
                  'mkdir -p $TRSIM_RDZV/sub && : > $TRSIM_RDZV/sub/f; '
                  'if [ $RANK = 1 ]; then ' + wait_up(0) + 'exit 1; fi; ' +
                  TERM_TRAP + UP_THEN_WAIT)
        check(j.run(["-n", "2"], script) == 1, "exit status %d, expected 1" % j.rc)
        tag = j.read("tag").strip()
        left = [n for n in os.listdir(SHM) if n.startswith("trsim.%s." % tag)]
        check(not left, "shared-memory objects left: %s" % left)
        check(os.path.exists(other), "the launcher removed another job's object %s" % other)
        check(not j.rdzv_left(), "rendezvous folder left: %s" % j.rdzv_left())
        # the same after a clean run, nested under an outer tag
        check(j.run(["-n", "2"], ': > /dev/shm/trsim.$TRSIM_SHM_TAG.y$RANK',
                    extra_env={"TRSIM_SHM_TAG": "t%d" % os.getpid()}) == 0, "launcher failed")
        left = [n for n in os.listdir(SHM) if n.startswith("trsim.t%d." % os.getpid())]
        check(not left, "shared-memory objects left: %s" % left)
    finally:
        os.unlink(other)


def case_leftover_processes(j):
    script = 'sleep 300 & echo $! > $OUT/bg.$RANK; exit 0'
    check(j.run(["-n", "2"], script, limit=60) == 0, "exit status %d, expected 0" % j.rc)
    for r in (0, 1):
        pid = int(j.read("bg.%d" % r))
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            alive = state != "Z" and "sleep" in open("/proc/%d/cmdline" % pid).read()
        except OSError:
            alive = False
        check(not alive, "rank %d's background process %d still runs" % (r, pid))


def case_forward_signal(j):
    for sig in (signal.SIGTERM, signal.SIGINT):
        for f in os.listdir(j.out):
            os.unlink(os.path.join(j.out, f))
        script = ('trap "echo got > $OUT/sig.$RANK; exit 0" %s; ' % sig.name[3:]) + UP_THEN_WAIT
        p = j.popen(["-n", "2"], script)
        try:
            j.wait_files(["up.0", "up.1"])
            time.sleep(0.2)
            p.send_signal(sig)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        print("signal %s: rc=%d\n%s" % (sig.name, p.returncode, err))
        check(p.returncode == 128 + sig, "exit status %d, expected %d" % (p.returncode, 128 + sig))
        for r in (0, 1):
            check(j.read("sig.%d" % r) is not None, "rank %d did not get %s" % (r, sig.name))


def case_prog_not_found(j):
    check(j.run(["-n", "2"], prog=["--", "/nonexistent/prog"]) == 127, "exit status %d, expected 127" % j.rc)
    check("cannot run /nonexistent/prog" in j.stderr, "no message about the missing program")
    check(j.run(["-n", "1"], prog=["--", "no-such-command-trsim"]) == 127, "PATH lookup: exit status %d" % j.rc)


def case_usage(j):
    for args in ([], ["-n", "2"], ["-n", "2", "true"], ["-n", "2", "--"], ["--", "true"],
                 ["-n", "0", "--", "true"], ["-n", "x", "--", "true"], ["-n"],
                 ["-n", "2", "--timeout", "soon", "--", "true"], ["-n", "2", "--grace", "-1", "--", "true"],
                 ["-n", "2", "--bogus", "--", "true"]):
        check(j.run(args, prog=[]) == 2, "%s: exit status %d, expected 2" % (args, j.rc))
        check("usage:" in j.stderr, "%s: no usage message" % args)
    check(j.run(["-n", "1"], prog=["--", "true"], extra_env={"TRSIM_LAUNCH_TIMEOUT": "x"}) == 2,
          "bad TRSIM_LAUNCH_TIMEOUT: exit status %d, expected 2" % j.rc)
    check(j.run(["--help"], prog=[]) == 0 and "usage:" in j.stdout, "--help")
    check(j.run(["-n2", "--timeout=30", "--grace=1"], prog=["--", "true"]) == 0, "-n2 --timeout=30 --grace=1")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global LAUNCHER
    if len(sys.argv) != 3 or (sys.argv[2] not in CASES and sys.argv[2] != "all"):
        sys.exit("usage: test_launch.py LAUNCHER {%s|all}" % "|".join(CASES))
    LAUNCHER = os.path.abspath(sys.argv[1])
    failed = 0
    for name in (CASES if sys.argv[2] == "all" else [sys.argv[2]]):
        with tempfile.TemporaryDirectory(prefix="trsim-launch-test.") as tmp:
            try:
                CASES[name](Job(tmp))
                print("ok: %s" % name)
            except (Failure, subprocess.TimeoutExpired) as e:
                print("FAIL: %s: %s" % (name, e))
                failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
