#!/usr/bin/env python3
"""Another user's file at a trace's exact name (issue 33): test_foreign.py CASE.

  taken   a shared (1777) trace folder where, before the job starts, a file
          owned by uid 65534 (nobody) stands at the exact name of the job's
          trace (trshim.<job>.r0.<host>.<pid>.json). The shim (run as root,
          which could replace it) leaves it as it is: no trace under that
          name, its marker, one trshim: line saying whose the name is; the job
          as without the shim. tranalyze on the folder says of that file
          "not written by this job's rank: owned by uid 65534 (nobody)" (not
          "truncated"), and reads rank 0 from its ring file.

Runs as root (the file is chowned to another user); otherwise exits 77
(skipped) and says why. Uses test_files.py's helpers (shim_misc basic)."""
import errno
import json
import os
import pwd
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import test_files as tf  # noqa: E402
from checks import Skip, check, eq, path_of, run_case  # noqa: E402

NOBODY = 65534


def case_taken(c):
    if os.geteuid() != 0:
        raise Skip("not root: cannot give a file to another user")
    d = os.path.join(c.tmp, "traces")
    os.makedirs(d)
    os.chmod(d, 0o1777)
    name = "trshim.%s.r0.%s.$$.json" % (tf.JOB, tf.host_clean())
    plant = ("printf 'planted\\n' > \"$TRSHIM_DIR\"/%s && chown %d:%d \"$TRSHIM_DIR\"/%s && chmod 644 "
             "\"$TRSHIM_DIR\"/%s" % (name, NOBODY, NOBODY, name, name))
    plain = c.plain()
    p, pid = c.job(d, plant=plant)
    tf.same_output(p, plain, "taken")
    trace = os.path.join(d, tf.trace_name(pid))
    eq(tf.snapshot(trace), (stat.S_IFREG, 0o644, NOBODY, b"planted\n"), "the other user's file, left as it was")
    eq(sorted(os.listdir(d)), sorted([tf.trace_name(pid), tf.ring_name(pid), tf.marker_name(pid)]),
       "the folder's files (no temporary left)")
    w = tf.warnings(p.stderr)
    eq(w, ["trshim: cannot write trace %s: the name is taken by a file of uid %d, not this process's (left as it "
           "is); marker %s left" % (trace, NOBODY, tf.marker_name(pid))], "the trshim: lines")
    tf.check_marker(os.path.join(d, tf.marker_name(pid)), pid, errno.EEXIST)
    tf.check_ring(os.path.join(d, tf.ring_name(pid)), pid)
    # tranalyze on the folder as it is: the other user's file said to be one
    try:
        who = "uid %d (%s)" % (NOBODY, pwd.getpwuid(NOBODY).pw_name)
    except KeyError:
        who = "uid %d" % NOBODY
    q = subprocess.run([path_of("TRANALYZE"), "--json", d], capture_output=True, text=True, timeout=120)
    t = subprocess.run([path_of("TRANALYZE"), d], capture_output=True, text=True, timeout=120)
    sys.stdout.write("$ tranalyze %s\nrc=%d\n%s%s\n" % (d, t.returncode, t.stdout, t.stderr))
    eq((q.returncode, t.returncode), (0, 0), "tranalyze's exit status (rank 0 from its ring: nothing wrong)")
    res = json.loads(q.stdout)
    problems = {x["file"]: x["problem"] for x in res["inputs"]}
    eq(problems.get(trace), "not written by this job's rank: owned by %s" % who, "what tranalyze says of the file")
    check("%s: not written by this job's rank: owned by %s" % (trace, who) in t.stdout, "the text says it: %s" % t.stdout)
    check("truncated" not in t.stdout and "interrupted" not in t.stdout, "the file called truncated: %s" % t.stdout)
    eq([(x["rank"], x["calls"], x["ring"]["from_ring"]) for x in res["ranks"]], [(0, 5, True)],
       "rank 0's calls, read from its ring file")


CASES = {"taken": case_taken}


def main():
    return run_case(CASES, tf.Case, sys.argv, "test_foreign.py", on_failure=tf.unmount)


if __name__ == "__main__":
    sys.exit(main())
