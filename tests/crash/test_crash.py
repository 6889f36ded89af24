#!/usr/bin/env python3
"""The rank that died (issue 21): test_crash.py CASE. A 4-rank job
(tests/crash/crash_job.c, crash_cxx.cpp) whose rank 2 dies at step 6 in
load_batch; the trace of rank 2 must hold the crash ("crash": signal,
si_code, address, thread, stack) or the first CUDA error ("errors"), the
job must end as it would without the shim (the launcher reports rank 2's
own exit status, the program's own handlers run), and tranalyze must name
rank 2, the signal or the error, and the exact functions and lines.
Stdlib only."""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "shim"))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from checks import Skip, check, eq, path_of, run_case  # noqa: E402
from test_shim import Case, by_rank, load_traces  # noqa: E402

SRC = os.path.join(HERE, "crash_job.c")
ARROW = " \u2190 "


def line_of(tag, src=SRC):
    """the line of the CRASH-SITE-<tag> marker in the test program"""
    with open(src) as f:
        for i, text in enumerate(f, 1):
            if re.search(r"CRASH-SITE-%s\b" % re.escape(tag), text):
                return i
    raise AssertionError("no CRASH-SITE-%s in %s" % (tag, src))


def site(fn, tag, src=SRC):
    return "%s (%s:%d)" % (fn, os.path.basename(src), line_of(tag, src))


def run_job(c, prog, want_rc, rank2_env=None, launch_opts=()):
    env2 = " ".join("%s=%s" % kv for kv in (rank2_env or {}).items())
    shell = ('ulimit -c 0; if [ "$RANK" = 2 ]; then export %s; fi; exec env LD_PRELOAD="$TRSHIM_LIB" "$@"' % env2
             if env2 else 'ulimit -c 0; exec env LD_PRELOAD="$TRSHIM_LIB" "$@"')
    cmd = ([path_of("TRSIM_LAUNCH"), "-n", "4", "--timeout", "120"] + list(launch_opts)
           + ["--", "sh", "-c", shell, "sh"] + prog)
    return c.run(cmd, {"TRSHIM_LIB": path_of("TRSHIM_LIB")}, limit=200, want_rc=want_rc, cwd=c.tmp)


def analyze(c):
    p = c.run([path_of("TRANALYZE"), c.traces], want_rc=None)
    check(p.returncode in (0, 1, 2), "tranalyze exit status %d" % p.returncode)
    return p.stdout


def analyze_json(c):
    """tranalyze --json: the ranks by rank"""
    p = c.run([path_of("TRANALYZE"), "--json", c.traces], want_rc=None)
    check(p.returncode in (0, 1, 2), "tranalyze --json exit status %d" % p.returncode)
    return {r["rank"]: r for r in json.loads(p.stdout)["ranks"]}


def analyze_md(c):
    p = c.run([path_of("TRANALYZE"), "--markdown", c.traces], want_rc=None)
    check(p.returncode in (0, 1, 2), "tranalyze --markdown exit status %d" % p.returncode)
    return p.stdout


def crash_phrase(out):
    m = re.search(r"rank 2 (crashed with [^\n]*?), its last call was", out)
    check(m is not None, "tranalyze does not say how rank 2 crashed:\n" + out)
    return m.group(1)


def py_traces(d):
    """the JSON traces of a Python job (test_shim's load_traces wants a C program's)"""
    return [json.load(open(os.path.join(d, n))) for n in sorted(os.listdir(d)) if n.endswith(".json")]


def rank2(c, python=False):
    ranks = by_rank(py_traces(c.traces) if python else load_traces(c.traces))
    eq(sorted(ranks), [0, 1, 2, 3], "a trace per rank")
    for r in (0, 1, 3):
        eq(ranks[r].get("crash"), None, "rank %d crash" % r)
    return ranks[2]


def check_crash(t, sig, code, thread=None):
    cr = t.get("crash")
    check(cr is not None, "rank 2's trace has no crash")
    eq((cr["signal"], cr["code"]), (sig, code), "rank 2's crash signal and si_code")
    eq(t["end"]["reason"], "signal", "rank 2 end.reason")
    eq(t["end"]["signal"], sig, "rank 2 end.signal")
    if thread:
        eq(cr["thread"], thread, "crashing thread's name")
    check(cr["stack"] >= 0, "rank 2's crash has no stack")
    return cr


MAIN = lambda: site("main", "main")  # noqa: E731


def case_segv(c, mode="segv"):
    run_job(c, [path_of("CRASH_JOB"), mode], want_rc=128 + 11)
    t = rank2(c)
    cr = check_crash(t, 11, 1)
    eq(cr["addr"], "0xc", "fault address (sample[3] of a null int pointer)")
    out = analyze(c)
    phrase = ("crashed with SIGSEGV (address 0xc, SEGV_MAPERR) in " + site("read_sample", "read_sample")
              + ARROW + site("load_batch", "load_batch") + ARROW + MAIN())
    eq(crash_phrase(out), phrase, "tranalyze")
    if mode == "segv":
        r2 = analyze_json(c)[2]
        j = r2["crash"]
        eq((j["signal"], j["signal_name"], j["code"], j["code_name"], j["addr"], j["message"], j["python_stack"],
            j["text"]), (11, "SIGSEGV", 1, "SEGV_MAPERR", "0xc", None, None, phrase), "--json crash")
        eq(j["frames"][:3], [site("read_sample", "read_sample"), site("load_batch", "load_batch"), MAIN()],
           "--json crash frames")
        eq(r2["errors"], [], "--json errors")
        eq(crash_phrase(analyze_md(c)), phrase, "--markdown")
    return out


def case_before(c):
    """the program's own SIGSEGV handler, installed before the shim's: it
    still runs (marker), the process still dies of SIGSEGV"""
    case_segv(c, "before")
    eq(sorted(os.listdir(c.markers)), ["apphandler.11"], "the program's own handler ran")


def case_after(c):
    """the program's own handler, installed after the shim's, which it calls"""
    case_segv(c, "after")
    eq(sorted(os.listdir(c.markers)), ["apphandler.after"], "the program's own handler ran")


def case_bus(c):
    run_job(c, [path_of("CRASH_JOB"), "bus"], want_rc=128 + 7)
    check_crash(rank2(c), 7, 2)
    m = re.fullmatch(r"crashed with SIGBUS \(address 0x[0-9a-f]+, BUS_ADRERR\) in (.*)", crash_phrase(analyze(c)))
    check(m is not None, "SIGBUS phrase")
    eq(m.group(1), site("read_mapped", "read_mapped") + ARROW + site("load_batch", "load_batch_bus") + ARROW + MAIN(),
       "SIGBUS site")


def case_abort(c):
    run_job(c, [path_of("CRASH_JOB"), "abort"], want_rc=128 + 6)
    cr = check_crash(rank2(c), 6, -6)
    check(re.search(r"check_batch: Assertion `batch != NULL' failed\.$", cr["message"] or ""),
          "abort message %r" % cr["message"])
    ph = crash_phrase(analyze(c))
    want = ("crashed with SIGABRT in " + site("check_batch", "check_batch") + ARROW
            + site("load_batch", "load_batch_abort") + ARROW + MAIN() + ": ")
    check(ph.startswith(want), "tranalyze:\n  %s\nwant it to start with\n  %s" % (ph, want))
    check(ph.endswith("crash_job.c:%d: check_batch: Assertion `batch != NULL' failed." % line_of("check_batch")),
          "assertion text in %r" % ph)


def case_cxx(c, mode="plain"):
    """an uncaught C++ exception: its type and what(), recorded by the
    shim's std::terminate handler (which chains to the one it replaced), or,
    when the program replaced the shim's, read at the SIGABRT"""
    if "CRASH_CXX" not in os.environ:
        raise Skip("no C++ compiler")
    src = os.path.join(HERE, "crash_cxx.cpp")
    p = run_job(c, [path_of("CRASH_CXX"), mode], want_rc=128 + 6)
    cr = check_crash(rank2(c), 6, -6)
    typ = "train::BadBatch" if mode == "after" else "std::runtime_error"
    reason = "uncaught C++ exception %s: bad batch 6" % typ
    eq(cr["message"], reason, "abort reason")
    ph = crash_phrase(analyze(c))
    want = "crashed with SIGABRT in " + site("parse_batch", "parse_batch_after" if mode == "after" else "parse_batch",
                                             src)
    check(ph.startswith(want), "tranalyze:\n  %s\nwant it to start with\n  %s" % (ph, want))
    check(ph.endswith(": " + reason), "reason in %r" % ph)
    # the program's own terminate handler ran (and libstdc++'s default one only without it)
    eq(sorted(os.listdir(c.markers)), [] if mode == "plain" else ["terminate." + mode], "the program's terminate handler")
    verbose = "terminate called after throwing an instance of 'std::runtime_error'\n  what():  bad batch 6"
    eq(verbose in p.stderr, mode == "plain", "libstdc++'s terminate message in stderr")


def case_overflow(c):
    """a stack overflow on a thread with an alternate signal stack"""
    run_job(c, [path_of("CRASH_JOB"), "overflow"], want_rc=128 + 11)
    t = rank2(c)
    cr = check_crash(t, 11, t["crash"]["code"] if t.get("crash") else None, thread="parser")
    check(cr["code"] in (1, 2), "si_code of a stack overflow: %d" % cr["code"])
    r = site("recurse_parse", "recurse_parse")
    m = re.fullmatch(r"crashed with SIGSEGV \(address 0x[0-9a-f]+, SEGV_(MAPERR|ACCERR)\) in (.*) on thread \"parser\"",
                     crash_phrase(analyze(c)))
    check(m is not None, "overflow phrase")
    frames = m.group(2).split(ARROW)
    eq(frames[1:], [r, r], "callers of the overflowing frame")
    check(frames[0].startswith("recurse_parse (crash_job.c:"), "the overflowing frame %r" % frames[0])


def case_thread(c):
    """the crash on a loader thread, not the one issuing collectives"""
    run_job(c, [path_of("CRASH_JOB"), "thread"], want_rc=128 + 11)
    t = rank2(c)
    check_crash(t, 11, 1, thread="loader")
    check(t["crash"]["tid"] != t["pid"], "the crashing thread is the main thread")
    m = re.fullmatch(r"crashed with SIGSEGV \(address 0xc, SEGV_MAPERR\) in (.*) on thread \"loader\"",
                     crash_phrase(analyze(c)))
    check(m is not None, "thread phrase")
    frames = m.group(1).split(ARROW)
    eq(frames[:2], [site("read_sample", "read_sample"), site("loader_main", "loader_main")], "crash site on the thread")
    check(frames[2].startswith("start_thread "), "the thread's start: %r" % frames[2])


def case_illegal(c):
    """the simulator's sticky cudaErrorIllegalAddress at rank 2's 6th
    cudaStreamSynchronize: the program exits 1; the first CUDA error is
    named, with the call the shim saw it through"""
    run_job(c, [path_of("CRASH_JOB"), "illegal"], want_rc=1, rank2_env={"TRSIM_INJECT_ERROR": "6:illegal-address"})
    t = rank2(c)
    eq(t.get("crash"), None, "rank 2 crash")
    (e,) = t["errors"]
    eq((e["kind"], e["code"], e["name"]), ("cuda", 700, "cudaErrorIllegalAddress"), "rank 2's first error")
    out = analyze(c)
    m = re.search(r"rank 2 exited, after CUDA error cudaErrorIllegalAddress \(700\) returned by ([^\n]*?), its last call "
                  r"was", out)
    check(m is not None, "tranalyze does not name the CUDA error:\n" + out)
    ok = ("cudaPeekAtLastError (trshim, before writing the trace)",
          "cudaEventQuery (trshim's completion poller) at " + site("allreduce_grads", "allreduce"))
    check(m.group(1) in ok, "the call the error came through: %r" % m.group(1))


def case_remote(c):
    """rank 2 dies of SIGSEGV; the others, left running, learn of it from
    ncclCommGetAsyncError (ncclRemoteError), as PyTorch's watchdog would,
    and exit 1: each survivor's first NCCL error, where it was asked, and
    tranalyze says they reported it after rank 2 died"""
    p = run_job(c, [path_of("CRASH_JOB"), "remote"], want_rc=128 + 11, launch_opts=["--no-kill-on-fail"])
    for r in (0, 1, 3):
        check("rank %d: NCCL error: remote process exited or there was a network error" % r in p.stderr,
              "rank %d did not see the remote error:\n%s" % (r, p.stderr))
    ranks = by_rank(load_traces(c.traces))
    check_crash(ranks[2], 11, 1)
    eq(ranks[2].get("errors"), None, "rank 2's errors")
    for r in (0, 1, 3):
        t = ranks[r]
        eq(t["end"]["reason"], "exit", "rank %d end.reason" % r)
        (e,) = t["errors"]
        eq((e["kind"], e["code"], e["name"], e["api"]), ("nccl", 6, "ncclRemoteError", "ncclCommGetAsyncError"),
           "rank %d's first error" % r)
        check(e["comm"] is not None, "rank %d's error has no communicator" % r)
        check(e["stack"] >= 0, "rank %d's error has no stack" % r)
    out = analyze(c)
    eq(crash_phrase(out), "crashed with SIGSEGV (address 0xc, SEGV_MAPERR) in " + site("read_sample", "read_sample")
       + ARROW + site("load_batch", "load_batch") + ARROW + MAIN(), "tranalyze")
    want = ("; ranks 0, 1, 3's NCCL reported a remote error (ncclRemoteError) after rank 2 died: ncclCommGetAsyncError"
            " at " + site("watch_step", "watch_step"))
    check(want in out, "tranalyze does not say the peers' errors (%r):\n%s" % (want, out))
    js = analyze_json(c)
    for r in (0, 1, 3):
        (e,) = js[r]["errors"]
        eq((e["kind"], e["code"], e["name"], e["api"], e["site"], e["device"] is None),
           ("nccl", 6, "ncclRemoteError", "ncclCommGetAsyncError", site("watch_step", "watch_step"), True),
           "--json rank %d errors" % r)
        eq(js[r]["crash"], None, "--json rank %d crash" % r)
    check(want in analyze_md(c), "--markdown does not say the peers' errors")


def case_py_segv(c):
    """a SIGSEGV in native code called from Python (ctypes): the native
    frames and the Python frames the thread was running"""
    src = os.path.join(HERE, "py_crash.py")
    site_pkgs = os.path.join(HERE, "..", "python", "site-packages")
    shell = ('ulimit -c 0; exec env LD_PRELOAD="$TRSHIM_LIB" PYTHONPATH="%s" PYTHONDONTWRITEBYTECODE=1 "$@"'
             % site_pkgs)
    cmd = [path_of("TRSIM_LAUNCH"), "-n", "4", "--timeout", "120", "--", "sh", "-c", shell, "sh",
           sys.executable, src]
    c.run(cmd, {"TRSHIM_LIB": path_of("TRSHIM_LIB")}, limit=200, want_rc=128 + 11, cwd=c.tmp)
    t = rank2(c, python=True)
    cr = check_crash(t, 11, 1)
    eq(cr["addr"], "0xc", "fault address")
    check(cr["pystack"] >= 0, "rank 2's crash has no Python stack")
    py = lambda fn, tag: "py_crash.py:%d in %s" % (line_of(tag, src), fn)  # noqa: E731
    m = re.fullmatch(r"crashed with SIGSEGV \(address 0xc, SEGV_MAPERR\) in (.*), in Python at (.*)",
                     crash_phrase(analyze(c)))
    check(m is not None, "py-segv phrase")
    eq(m.group(2), py("read_sample", "py_read_sample") + ARROW + py("load_batch", "py_load_batch") + ARROW
       + py("main", "py_main"), "the Python frames")


def run_py_exit(c, mode, want_rc):
    src = os.path.join(HERE, "py_exit.py")
    site_pkgs = os.path.join(HERE, "..", "python", "site-packages")
    shell = ('ulimit -c 0; exec env LD_PRELOAD="$TRSHIM_LIB" PYTHONPATH="%s" PYTHONDONTWRITEBYTECODE=1 "$@"'
             % site_pkgs)
    cmd = [path_of("TRSIM_LAUNCH"), "-n", "4", "--timeout", "120", "--", "sh", "-c", shell, "sh",
           sys.executable, src, mode]
    p = c.run(cmd, {"TRSHIM_LIB": path_of("TRSHIM_LIB")}, limit=200, want_rc=want_rc, cwd=c.tmp)
    ranks = by_rank(py_traces(c.traces))
    eq(sorted(ranks), [0, 1, 2, 3], "a trace per rank")
    for r in (0, 1, 3):
        eq((ranks[r].get("crash"), ranks[r].get("python_exception")), (None, None), "rank %d crash" % r)
    eq(ranks[2].get("crash"), None, "rank 2 crash")
    eq(ranks[2]["end"]["reason"], "exit", "rank 2 end.reason")
    return src, p, ranks


PEERS = re.compile(r"ranks 0, 1, 3 issued and wait in")


def case_py_raise(c):
    """rank 2's Python raises ValueError("bad batch 6"), uncaught: Python
    prints the traceback, exit status 1, all unchanged; the trace holds the
    exception (type, message, the raise's file, function and line) read at
    the "sys.excepthook" audit event, and tranalyze says it"""
    src, p, ranks = run_py_exit(c, "raise", 1)
    check("trsim-launch: rank 2 (pid %d) exited with status 1" % ranks[2]["pid"] in p.stderr,
          "rank 2's exit status:\n" + p.stderr)
    check(re.search(r'raise ValueError\("bad batch %d" % step\)[^\n]*\n(\s*\^+\n)?ValueError: bad batch 6\n', p.stderr),
          "Python's own traceback on stderr:\n" + p.stderr)
    line = line_of("py_raise", src)
    pe = ranks[2].get("python_exception")
    check(pe is not None, "rank 2's trace has no python_exception")
    eq((pe["type"], pe["message"], pe["file"], pe["function"], pe["line"], pe["tid"], pe["count"]),
       ("ValueError", "bad batch 6", src, "load_batch", line, ranks[2]["pid"], 1), "rank 2's python_exception")
    phrase = "exited with an uncaught Python exception ValueError: bad batch 6 (raised at py_exit.py:%d in load_batch)" % line
    out = analyze(c)
    m = re.search(r"; rank 2 ([^;\n]*?), its last call was AllReduce\(1024 x float32, sum\) #5\b", out)
    check(m is not None, "tranalyze does not say how rank 2 ended:\n" + out)
    eq(m.group(1), phrase, "tranalyze")
    check("rank 2 never issued AllReduce(1024 x float32, sum) #6" in out and PEERS.search(out),
          "the other ranks' answer changed:\n" + out)
    js = analyze_json(c)
    j = js[2]["python_exception"]
    eq((j["type"], j["message"], j["file"], j["function"], j["line"], j["text"]),
       ("ValueError", "bad batch 6", src, "load_batch", line, phrase), "--json python_exception")
    eq(js[2]["crash"], None, "--json crash")
    for r in (0, 1, 3):
        eq(js[r]["python_exception"], None, "--json rank %d python_exception" % r)
    check("rank 2 " + phrase + ", its last call was" in analyze_md(c), "--markdown does not say it")


def case_py_exit(c):
    """sys.exit(3) in rank 2: a deliberate exit (SystemExit never reaches
    sys.excepthook): nothing recorded, exit status 3"""
    src, p, ranks = run_py_exit(c, "exit", 3)
    check("trsim-launch: rank 2 (pid %d) exited with status 3" % ranks[2]["pid"] in p.stderr,
          "rank 2's exit status:\n" + p.stderr)
    eq(ranks[2].get("python_exception"), None, "rank 2's python_exception")
    out = analyze(c)
    check(re.search(r"rank 2 exited, its last call was AllReduce\(1024 x float32, sum\) #5\b", out) and PEERS.search(out),
          "tranalyze:\n" + out)
    check("Python exception" not in out, "tranalyze names an exception:\n" + out)


def case_damaged(c):
    """a damaged "crash" in a JSON trace: a note naming the file; the ring's crash is used"""
    run_job(c, [path_of("CRASH_JOB"), "segv"], want_rc=128 + 11)
    name = [n for n in os.listdir(c.traces) if re.match(r"trshim\..*\.r2\..*\.json$", n)][0]
    path = os.path.join(c.traces, name)
    with open(path) as f:
        t = json.load(f)
    t["crash"] = {"signal": "SIGSEGV"}
    with open(path, "w") as f:
        json.dump(t, f)
    p = c.run([path_of("TRANALYZE"), c.traces], want_rc=None)
    out = p.stdout
    check("field crash is damaged" in p.stdout + p.stderr and name in p.stdout + p.stderr,
          "no note naming %s:\n%s%s" % (name, p.stdout, p.stderr))
    eq(crash_phrase(out), "crashed with SIGSEGV (address 0xc, SEGV_MAPERR) in " + site("read_sample", "read_sample")
       + ARROW + site("load_batch", "load_batch") + ARROW + MAIN(), "tranalyze (from the ring)")


CASES = {"segv": case_segv, "bus": case_bus, "abort": case_abort, "cxx": case_cxx,
         "cxx-before": lambda c: case_cxx(c, "before"), "cxx-after": lambda c: case_cxx(c, "after"),
         "overflow": case_overflow,
         "thread": case_thread, "before": case_before, "after": case_after, "illegal": case_illegal, "remote": case_remote, "py-segv": case_py_segv,
         "py-raise": case_py_raise, "py-exit": case_py_exit, "damaged": case_damaged}

if __name__ == "__main__":
    sys.exit(run_case(CASES, Case, sys.argv, "test_crash.py"))
