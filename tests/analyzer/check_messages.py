#!/usr/bin/env python3
"""Messages that must not mislead (issue 32, item 3), on synthetic traces of gen_traces.py: each case
asserts the exact wording in the text, --markdown, --html and --json where it appears.

    check_messages.py CASE TRANALYZE GEN_TRACES WORKDIR

CASE:
  job_choice  two_jobs (jobold, jobnew): --job jobold says it was asked for with --job and lists
              jobnew; no --job says the newest was chosen and why, and how to pick the other
  truncated   extra_collective with rank 3's trace cut at 1500 bytes: the no_trace finding and rank
              3's row say "trace truncated at 1500 bytes" (text, --markdown, --json's ended.text and
              ranks[].truncated), the hint says how a whole-written trace gets cut, not "killed
              before the shim could write"; clean (8 ranks) with rank 5 cut at 2000 bytes, rank 6
              empty and rank 7 gone: each said for what it is
  one_file    a one-rank job: "(1 file)", not "(1 files)" (text, --markdown, --html)
  calls_once  extra_collective, early_exit, order_inversion: the message names each side's call
              once, briefly (its communicator kept where it is not the heading's), the side lines
              give the call sites; --json's message whole
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from checks import Failure, check, eq, run_case  # noqa: E402


class Case:
    def __init__(self, workdir):
        os.makedirs(workdir, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="messages-", dir=workdir)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def run(ta, args):
    p = subprocess.run([os.path.abspath(ta)] + args, capture_output=True, text=True, timeout=120)
    check(p.returncode in (0, 1, 2), "tranalyze %s: status %d\n%s" % (" ".join(args), p.returncode, p.stderr[-2000:]))
    return p.returncode, p.stdout


def gen(c, gen_traces, scenario, *extra):
    d = os.path.join(c.tmp, scenario)
    p = subprocess.run([sys.executable, gen_traces, scenario, d] + list(extra), capture_output=True, text=True,
                       timeout=300)
    check(p.returncode == 0, "gen_traces.py %s: %s" % (scenario, p.stderr[-2000:]))
    return d


def trace_of(d, rank):
    got = glob.glob(os.path.join(d, "trshim.*.r%d.*.json" % rank))
    if len(got) != 1:
        raise Failure("rank %d's trace in %s: %s" % (rank, d, got))
    return got[0]


def html_summary(ta, d, args, c):
    page = os.path.join(c.tmp, "page.html")
    run(ta, args + ["--html", page, d])
    with open(page) as f:
        text = f.read()
    i = text.index('<p class="summary">') + len('<p class="summary">')
    return text[i:text.index("</p>", i)]


def case_job_choice(c, ta, gen_traces, workdir=None):
    d = gen(c, gen_traces, "two_jobs")
    _, out = run(ta, ["--job", "jobold", d])
    eq(out.splitlines()[:2], ["tranalyze: job jobold: 2 of 2 ranks traced (4 files)",
                              "  the folder holds 2 jobs; this one was asked for with --job; the other: jobnew"],
       "text header, --job jobold")
    _, out = run(ta, [d])
    eq(out.splitlines()[:2], ["tranalyze: job jobnew: 2 of 2 ranks traced (4 files)",
                              "  the folder holds 2 jobs; this one is the newest (its traces were written last); "
                              "the other: jobold (--job ID analyses it)"], "text header, the newest")
    _, md = run(ta, ["--markdown", "--job", "jobold", d])
    eq(md.splitlines()[2], "2 of 2 ranks traced (4 files). The folder holds 2 jobs; this one was asked for with "
       "`--job`; the other: jobnew.", "--markdown header, --job jobold")
    _, md = run(ta, ["--markdown", d])
    eq(md.splitlines()[2], "2 of 2 ranks traced (4 files). The folder holds 2 jobs; this one is the newest (its "
       "traces were written last); the other: jobold (`--job ID` analyses it).", "--markdown header, the newest")
    eq(html_summary(ta, d, ["--job", "jobold"], c), "2 of 2 ranks traced (4 files); the folder holds 2 jobs; this "
       "one was asked for with --job; the other: jobnew", "--html summary, --job jobold")
    for out in (run(ta, ["--job", "jobold", d])[1], run(ta, ["--markdown", "--job", "jobold", d])[1]):
        check("newest" not in out, "a job asked for is called the newest:\n" + out[:500])


CUT_HINT = ("the shim writes each trace whole under a temporary name and renames it in place, so a truncated trace "
            "was cut afterwards: by a copy that was interrupted or ran out of room (scp, rsync, a full disk where it "
            "was copied to) or by a damaged filesystem; copy it again from where the job wrote it (TRSHIM_DIR)")


def cut(path, n):
    with open(path, "rb") as f:
        data = f.read()
    check(len(data) > n, "%s: %d bytes" % (path, len(data)))
    with open(path, "wb") as f:
        f.write(data[:n])


def case_truncated(c, ta, gen_traces, workdir=None):
    d = gen(c, gen_traces, "extra_collective")
    os.remove(os.path.join(d, "expected.json"))
    r3 = trace_of(d, 3)
    cut(r3, 1500)
    rc, js = run(ta, ["--json", d])
    res = json.loads(js)
    f = [x for x in res["findings"] if x["kind"] == "no_trace"]
    eq(len(f), 1, "no_trace findings")
    comm = f[0]["comm"]
    msg = ("rank 3 left no usable trace (its trace is truncated at 1500 bytes); the other ranks were stopped by a "
           "signal and the last collective they issued on the communicator it belongs to is AllReduce(1048576 x "
           "float32, sum) #6 on comm %s, which may be waiting for it" % comm)
    eq((f[0]["message"], f[0]["hint"], f[0]["ranks"]), (msg, CUT_HINT, [3]), "--json no_trace finding")
    r = [x for x in res["ranks"] if x["rank"] == 3][0]
    eq((r["ended"], r.get("truncated")), ({"state": "no_trace", "text": "trace truncated at 1500 bytes"},
                                          {"file": r3, "bytes": 1500}), "--json rank 3")
    _, out = run(ta, [d])
    lines = out.splitlines()
    check("  " + msg in lines and "  fix: " + CUT_HINT in lines, "text finding:\n" + out)
    eq([ln for ln in lines if ln.startswith("  3  ")],
       ["  3     -                -        -          -                        trace truncated at 1500 bytes"],
       "text rank 3's row")
    check("killed before the shim could write" not in out, "text still says killed:\n" + out)
    _, md = run(ta, ["--markdown", d])
    check(msg in md and "**Fix:** " + CUT_HINT in md and "| 3 | | | trace truncated at 1500 bytes | | |" in md,
          "--markdown:\n" + md)
    # several: cut, empty, gone
    d = gen(c, gen_traces, "clean")
    cut(trace_of(d, 5), 2000)
    open(trace_of(d, 6), "w").close()
    os.remove(trace_of(d, 7))
    _, out = run(ta, [d])
    lines = out.splitlines()
    want = "  ranks 5-7 of 8 left no usable trace (the traces of ranks 5, 6 are truncated: rank 5's at 2000 bytes, " \
           "rank 6's empty)"
    check(want in lines, "text finding, ranks 5-7:\n" + out)
    check("  fix: " + CUT_HINT + "; the other ranks without a trace were killed before the shim could write (SIGKILL, "
          "OOM killer, node failure) or did not run with the shim: look at their logs and at the launcher's report"
          in lines, "text hint, ranks 5-7:\n" + out)
    eq([ln[70:] for ln in lines if ln[:8] in ("  5     ", "  6     ", "  7     ")],
       ["trace truncated at 2000 bytes", "trace empty (0 bytes)", "no trace"], "text rows of ranks 5-7")


def case_one_file(c, ta, gen_traces, workdir=None):
    d = os.path.join(c.tmp, "one")
    p = subprocess.run([sys.executable, gen_traces, "bench", d, "--ranks", "1", "--records", "5", "--clean"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "gen_traces.py bench: %s" % p.stderr[-2000:])
    _, out = run(ta, [d])
    eq(out.splitlines()[0], "tranalyze: job bench1: 1 of 1 ranks traced (1 file)", "text header")
    _, md = run(ta, ["--markdown", d])
    eq(md.splitlines()[2], "1 of 1 ranks traced (1 file).", "--markdown header")
    eq(html_summary(ta, d, [], c), "1 of 1 ranks traced (1 file)", "--html summary")


def block(out):
    """the root cause's lines, up to its fix"""
    lines = out.splitlines()
    i = [k for k, ln in enumerate(lines) if ln.startswith("ROOT CAUSE")][0]
    j = [k for k, ln in enumerate(lines) if k > i and ln.startswith("  fix: ")][0]
    return lines[i:j]


def case_calls_once(c, ta, gen_traces, workdir=None):
    d = gen(c, gen_traces, "extra_collective")
    f = json.loads(run(ta, ["--json", d])[1])["findings"][0]
    C = f["comm"]
    _, out = run(ta, [d])
    eq(block(out)[:4], [
        "ROOT CAUSE: divergence / extra_call on comm %s (ranks 0-3), collective #4" % C,
        "  rank 0 issued AllReduce(1 x float32, sum) #4, a call ranks 1-3 never made at this point (an extra "
        "collective on rank 0); they issued instead AllReduce(1048576 x float32, sum) #4",
        "  rank 0: AllReduce(1 x float32, sum) at log_metrics (train+0x998e4b)",
        "  ranks 1-3: AllReduce(1048576 x float32, sum) at train_step (train+0xf4f7cb)"], "extra_collective")
    eq(f["message"], "rank 0 issued AllReduce(1 x float32, sum) #4 on comm %s at log_metrics (train+0x998e4b), a call "
       "ranks 1-3 never made at this point (an extra collective on rank 0); they issued instead AllReduce(1048576 x "
       "float32, sum) #4 on comm %s at train_step (train+0xf4f7cb)" % (C, C), "--json's message, whole")
    _, md = run(ta, ["--markdown", d])
    check("\nrank 0 issued AllReduce(1 x float32, sum) #4, a call ranks 1-3 never made" in md and
          "\n- rank 0: `AllReduce(1 x float32, sum)` at `log_metrics (train+0x998e4b)`\n" in md, "--markdown:\n" + md)
    d = gen(c, gen_traces, "early_exit")
    C = json.loads(run(ta, ["--json", d])[1])["findings"][0]["comm"]
    eq(block(run(ta, [d])[1])[:4], [
        "ROOT CAUSE: missing on comm %s (ranks 0-3), collective #7" % C,
        "  rank 3 never issued AllReduce(65536 x float32, sum) #7, which ranks 0-2 issued and wait in; rank 3 exited, "
        "its last call was Broadcast(4 x float32, root 0) #6",
        "  rank 3 (last call): Broadcast(4 x float32, root 0) at sync_step (train+0x5b014b)",
        "  ranks 0-2 (waiting in): AllReduce(65536 x float32, sum) at train_step (train+0xf4f7cb)"], "early_exit")
    d = gen(c, gen_traces, "order_inversion")
    f = json.loads(run(ta, ["--json", d])[1])["findings"][0]
    other = f["call"]["comm"]
    check(other != f["comm"], "order_inversion: rank 1's call on another communicator")
    eq(block(run(ta, [d])[1])[1], "  rank 1 issued AllReduce(256 x float32, sum) #3 on comm %s where ranks 0, 2, 3 "
       "issued AllReduce(4096 x float32, sum) #3: the order of calls across communicators differs" % other,
       "order_inversion: the call on another communicator keeps it")


CASES = {"job_choice": case_job_choice, "truncated": case_truncated, "one_file": case_one_file,
         "calls_once": case_calls_once}

if __name__ == "__main__":
    sys.exit(run_case(CASES, lambda: Case(sys.argv[4] if len(sys.argv) > 4 else tempfile.gettempdir()), sys.argv,
                      "check_messages.py"))
