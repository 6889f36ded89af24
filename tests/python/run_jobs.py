"""Python training loops as simulated multi-rank jobs under libtrshim.so
(issue 7): each program of tests/python/jobs/ plants a hang of
shared/failure-catalog.md in Python code (or none) and drives the simulated
CUDA runtime + NCCL (libtrsim.so) through ctypes (simnccl.py, a tiny
torch.distributed look-alike; ctypes releases the GIL around each foreign
call, as PyTorch does). Each runs as N ranks under trsim-launch --timeout
with LD_PRELOAD=libtrshim.so; this script then reads the traces (JSON and
ring files) and checks that

  - every collective of every rank carries a Python stack whose innermost
    frame of the program itself (frames of site-packages and of the standard
    library skipped, as tranalyze folds them) is the exact file:line of the
    call (the lines marked "# CALL:name" in the program) and its function;
  - the odd call of the planted hang (EXPECT line of the program: sequence
    number, culprit ranks, the culprit's call and the others' call) is where
    the program says; scenario specifics (another thread; a generator and a
    closure and what resumed/called them; a stack cut at TRSHIM_PYSTACK_DEPTH;
    an out-of-memory failure and the peak; the GIL held by another thread);
  - the ring file holds the same Python code objects, stacks and record
    fields as the JSON traces;
  - tranalyze (when given) finds the planted finding; when it prints Python
    call sites (a "python_stack" in its JSON), its call site names the exact
    file:line.
A hung job is ended with SIGTERM once the shim's hang watchdog
(TRSHIM_HANG_SEC=2) has written every rank's trace stuck at the planted
collective (the launcher's --timeout only bounds it).
The "c_only" case runs a C program (no Python) twice: "python": {"state":
"none"}, no Python stack anywhere, and the same trace as with
TRSHIM_PYSTACK_DEPTH=0 but for that setting.

    run_jobs.py MINOR LAUNCH SHIM TRSIM_LIB GILHELP C_ONLY WORKDIR [TRANALYZE] [--only NAME,...]

Runs with every CPython 3.MINOR interpreter found (pythons.py); exit status
77 (meson: skipped) with a message when there is none."""
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import pythons  # noqa: E402
import ring  # noqa: E402
from trace import load_trace  # noqa: E402  (calls and checks of either version, unpacked)

JOBS = os.path.join(HERE, "jobs")
SITE = os.path.join(HERE, "site-packages")

# name: (program, ranks, launcher timeout (s), extra environment)
CASES = {
    "extra": ("py_extra.py", 4, 90, {}),
    # the same job calling NCCL through ctypes.CDLL(libtrsim.so)'s own handle
    # (dlsym on a private handle, as vLLM's PyNccl does): the shim's dlsym
    # hands out its wrappers, so the answer must not change
    "extra_private": ("py_extra.py", 4, 90, {"SIMNCCL_HANDLE": "private"}),
    "uneven": ("py_uneven.py", 4, 90, {}),
    "barrier": ("py_barrier.py", 4, 90, {}),
    "thread": ("py_thread.py", 4, 90, {}),
    "generator": ("py_generator.py", 4, 90, {}),
    "recursion": ("py_recursion.py", 4, 90, {}),
    "recursion256": ("py_recursion.py", 4, 90, {"TRSHIM_PYSTACK_DEPTH": "256", "PY_RECURSION_DEPTH": "400"}),
    "oom": ("py_oom.py", 4, 90, {"TRSIM_DEVICE_MEM": "256M"}),
    "clean": ("py_clean.py", 4, 60, {}),
    "nopy": ("py_clean.py", 4, 60, {"TRSHIM_PYSTACK_DEPTH": "0"}),
    "gil": ("py_gil.py", 2, 120, {}),
    "bounds_stacks": ("py_bounds.py", 1, 120, {"PY_BOUNDS": "stacks", "TRSHIM_PYSTACK_DEPTH": "3"}),
    "bounds_codes": ("py_bounds.py", 1, 120, {"PY_BOUNDS": "codes", "TRSHIM_PYSTACK_DEPTH": "3"}),
    "c_only": (None, 2, 60, {}),
}

FAILS = []


class CaseFailed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CaseFailed(msg)


def eq(got, want, msg):
    if got != want:
        raise CaseFailed("%s: got %r, expected %r" % (msg, got, want))


# ---- the programs -----------------------------------------------------------------

def markers(path):
    """{name: line} of the lines ending with '# CALL:name'."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for i, text in enumerate(f, 1):
            m = re.search(r"# CALL:(\w+)\s*$", text)
            if m:
                out[m.group(1)] = i
    return out


def qualnames(path):
    """[(first line, last line, qualname)] of every function of the program."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = prefix + child.name
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out.append((first, child.end_lineno, q))
                walk(child, q + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)
    walk(tree, "")
    return out


def function_at(funcs, line):
    best = None
    for first, last, q in funcs:
        if first <= line <= last and (best is None or first >= best[0]):
            best = (first, last, q)
    return best[2] if best else "<module>"


def expectation(path):
    with open(path, encoding="utf-8") as f:
        for text in f:
            if text.startswith("# EXPECT:"):
                words = text.split(":", 1)[1].split()
                return {w.split("=")[0]: (w.split("=", 1)[1] if "=" in w else True) for w in words}
    return {}


# ---- traces -------------------------------------------------------------------------

def load_traces(d):
    out = {}
    for n in sorted(os.listdir(d)):
        if not n.endswith(".json"):
            continue
        t = load_trace(os.path.join(d, n), CaseFailed)
        t["calls"] = [dict(zip(t["call_fields"], c)) for c in t["calls"]]
        t["_name"] = n
        check(t["rank"] not in out, "two traces of rank %r" % t["rank"])
        out[t["rank"]] = t
    return out


def pyframes(t, idx):
    """[(file, qualname, line)] of Python stack idx, innermost first."""
    if idx is None or idx < 0:
        return []
    check(idx < len(t["pystacks"]), "%s: Python stack %d of %d" % (t["_name"], idx, len(t["pystacks"])))
    out = []
    for code, line in t["pystacks"][idx]:
        check(0 <= code < len(t["pycodes"]), "%s: code %d of %d" % (t["_name"], code, len(t["pycodes"])))
        f, q, _first = t["pycodes"][code]
        out.append((f, q, line))
    return out


def folded(path):
    """A library frame (what tranalyze folds by default): site-packages, or
    the standard library (/lib/python3.X/ not under site-packages)."""
    return ("/site-packages/" in path or "/dist-packages/" in path or
            re.search(r"/lib/python3\.\d+/", path) is not None)


def user_frame(frames):
    """(index, frame) of the innermost frame that is not folded."""
    for i, fr in enumerate(frames):
        if not folded(fr[0]):
            return i, fr
    return None, None


def colls(t):
    return [c for c in t["calls"] if not c["op"].startswith("Group")]


def at_seq(t, seq, comm=0):
    got = [c for c in colls(t) if c["comm"] == comm and c["seq"] == seq]
    check(len(got) == 1, "%s: %d calls with seq %d" % (t["_name"], len(got), seq))
    return got[0]


class Prog:
    def __init__(self, path, minor):
        self.path = os.path.realpath(path)
        self.base = os.path.basename(path)
        self.marks = markers(path)
        self.funcs = qualnames(path)
        self.minor = minor

    def qual(self, line):
        q = function_at(self.funcs, line)
        return q.rsplit(".", 1)[-1] if self.minor == 10 else q     # 3.10: co_name

    def site_of(self, t, call, what):
        """The user frame of a call, checked to be a marked line of this
        program with the right function; returns the marker's name."""
        frames = pyframes(t, call["pystack"])
        check(frames, "%s: %s %s seq %d has no Python stack" % (t["_name"], what, call["op"], call["seq"]))
        i, fr = user_frame(frames)
        check(fr is not None, "%s: %s: every frame folded: %r" % (t["_name"], what, frames))
        eq(os.path.realpath(fr[0]), self.path, "%s: %s: file of the user frame" % (t["_name"], what))
        names = [k for k, v in self.marks.items() if v == fr[2]]
        check(names, "%s: %s: line %d is no marked call line of %s (%r)" % (t["_name"], what, fr[2], self.base,
                                                                            self.marks))
        eq(fr[1], self.qual(fr[2]), "%s: %s: function of %s:%d" % (t["_name"], what, self.base, fr[2]))
        return names[0]


def check_ring(t):
    """The ring file of a one-rank process holds what its JSON trace holds."""
    rg = ring.read_ring(t["ring"]["file"])
    eq({i: tuple(c) for i, c in enumerate(t["pycodes"])}, {i: c for i, c in rg["pycodes"].items()
                                                        if i < len(t["pycodes"])}, t["_name"] + ": ring pycodes")
    eq({i: [tuple(f) for f in s] for i, s in enumerate(t["pystacks"])},
       {i: s for i, s in rg["pystacks"].items() if i < len(t["pystacks"])}, t["_name"] + ": ring pystacks")
    recs = rg["records"]
    eq(len(recs), len(t["calls"]), t["_name"] + ": ring records")
    for c, r in zip(t["calls"], recs):
        eq((r["enter_ns"], r["pystack"]), (c["enter_ns"], c["pystack"]), t["_name"] + ": ring record pystack")
    eq(rg["pystack_order_errors"], [], t["_name"] + ": Python stacks before their code objects in the ring")
    return rg


# ---- one case -------------------------------------------------------------------------

def hung_at(traces, n, seq):
    """Whether every rank has written a trace for the hang watchdog
    (end.reason "hang") that holds its collective number seq."""
    got = 0
    for name in os.listdir(traces):
        if not name.endswith(".json"):
            continue
        try:
            t = load_trace(os.path.join(traces, name))
        except (OSError, ValueError):
            return False
        seqs = {c[t["call_fields"].index("seq")] for c in t["calls"]}
        got += t["end"]["reason"] == "hang" and seq in seqs
    return got == n


def run_job(cmd, n, timeout, env, work, hang_seq=None):
    """Runs the job; with hang_seq (a job that hangs at that collective),
    the shim's hang watchdog (TRSHIM_HANG_SEC=2) tells when every rank is
    stuck there, and the job is then ended at once with SIGTERM (exit status
    143), as a launcher's timeout would (the launcher's own timeout stays as
    a bound), so that a slow machine cannot end it before the hang."""
    traces = os.path.join(work, "traces")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(traces)
    e = {k: v for k, v in os.environ.items()
         if not re.match(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|TRSHIM_.*|LD_PRELOAD|"
                         r"PYTHON.*|TRSIM_RDZV|TRSIM_SHM_TAG)$", k)}
    e.update(env)
    e["TRSHIM_DIR"] = traces
    e["TRSHIM_KEEP_RING"] = "1"      # the checks compare each trace with its ring file
    e["PYTHONPATH"] = SITE
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    if hang_seq is not None:
        e["TRSHIM_HANG_SEC"] = "2"
    p = subprocess.Popen([ARGS.launch, "-n", str(n), "--timeout", str(timeout), "--grace", "3", "--", "env",
                          "LD_PRELOAD=" + ARGS.shim] + cmd, env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if hang_seq is not None:
        while p.poll() is None and not hung_at(traces, n, hang_seq):
            time.sleep(0.2)
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=timeout + 120)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), traces


def tranalyze(traces, prog, exp, ts, log):
    """tranalyze's answer: the planted finding; the exact file:line when it
    prints Python call sites. Returns a note for the log."""
    if not ARGS.tranalyze or not os.path.exists(ARGS.tranalyze):
        return "tranalyze not built: not checked"
    opts = []
    if prog.base == "py_gil.py":
        # a thread spinning with the GIL on every rank oversubscribes the 2
        # cores on purpose: whichever rank the scheduler starves really is late
        # (a true straggler, not what this job tests: no deadlock, exact lines)
        opts = ["--straggler-ms", "100000"]
    q = subprocess.run([ARGS.tranalyze, "--json"] + opts + [traces], capture_output=True, text=True, timeout=120)
    txt = subprocess.run([ARGS.tranalyze] + opts + [traces], capture_output=True, text=True, timeout=120)
    log.append("$ tranalyze %s: status %d\n%s%s" % (traces, txt.returncode, txt.stdout[-4000:], txt.stderr[-2000:]))
    if exp.get("clean"):
        eq(q.returncode, 0, "tranalyze's exit status on a healthy job")
        eq(json.loads(q.stdout)["findings"], [], "tranalyze's findings on a healthy job")
        return "tranalyze: no finding"
    eq(q.returncode, 1, "tranalyze's exit status")
    res = json.loads(q.stdout)
    check(res["findings"], "tranalyze found nothing")
    f = res["findings"][0]
    if "oom" in exp:
        eq((f["kind"], f["ranks"]), ("oom", [int(exp["rank"])]), "tranalyze's top finding")
        want_line = prog.marks[exp["call"]]
    else:
        eq((f["kind"], f.get("seq"), f["ranks"]), ("divergence", int(exp["seq"]), [int(exp["ranks"])]),
           "tranalyze's top finding (kind, seq, ranks)")
        want_line = prog.marks[exp["call"]]
    call = f.get("call") or {}
    want = "%s:%d" % (prog.base, want_line)
    check("python_stack" in call, "tranalyze printed no Python call site (site %r; expected %s)" %
          (call.get("site"), want))
    site = call.get("site") or ""
    check(want in site, "tranalyze's call site %r does not name %s" % (site, want))
    check(call["python_stack"] and call["python_stack"][0].get("line") is not None,
          "tranalyze's python_stack %r" % call["python_stack"])
    others = f.get("others_call") or {}
    if "others" in exp and others.get("site") is not None:
        w2 = "%s:%d" % (prog.base, prog.marks[exp["others"]])
        check(w2 in others["site"], "tranalyze's others' call site %r does not name %s" % (others["site"], w2))
    return "tranalyze: %s" % site


def case_python(name, interp, minor, version):
    script, n, timeout, env = CASES[name]
    path = os.path.join(JOBS, script)
    prog = Prog(path, minor)
    exp = expectation(path)
    work = os.path.join(ARGS.work, "3.%d-%s-%s" % (minor, re.sub(r"\W", "_", version), name))
    cmd = [interp, path] + ([ARGS.gilhelp] if name == "gil" else [])
    p, traces = run_job(cmd, n, timeout, env, work, int(exp["seq"]) if "seq" in exp else None)
    log = ["$ %s as %d ranks: status %d\n%s%s" % (" ".join(cmd), n, p.returncode, p.stdout[-3000:],
                                                  p.stderr[-3000:])]
    try:
        want_rc = 0 if exp.get("clean") else (1 if "oom" in exp else 128 + signal.SIGTERM)
        eq(p.returncode, want_rc, "trsim-launch's exit status")
        ts = load_traces(traces)
        eq(sorted(ts), list(range(n)), "ranks with a trace")
        depth = int(env.get("TRSHIM_PYSTACK_DEPTH", "64"))
        for r, t in ts.items():
            eq(t["settings"]["pystack_depth"], depth, "%s: settings.pystack_depth" % t["_name"])
            py = t["python"]
            if depth == 0:
                eq((py["state"], t["pycodes"], t["pystacks"]), ("disabled", [], []), "%s: python" % t["_name"])
                eq({c["pystack"] for c in t["calls"]}, {-1}, "%s: Python stacks with depth 0" % t["_name"])
                continue
            eq(py["state"], "ok", "%s: python.state (%s)" % (t["_name"], py.get("detail")))
            check((py["version"] or "").startswith("3.%d" % minor) and version.startswith(py["version"]),
                  "%s: python.version %r for %s" % (t["_name"], py["version"], version))
            if name.startswith("bounds"):
                continue        # extra_checks
            eq(py["dropped"], 0, "%s: python.dropped" % t["_name"])
            for c in colls(t):
                prog.site_of(t, c, "every call")
            check_ring(t)
        note = ""
        if depth:
            extra_checks(name, prog, exp, ts, p)
        if depth or exp.get("clean"):
            note = tranalyze(traces, prog, exp, ts, log)
        print("ok: %s %s: %s %s" % (version, name, script, note))
    except CaseFailed as e:
        print("\n".join(log))
        print("FAIL: %s %s (%s): %s" % (version, name, interp, e))
        FAILS.append("%s %s" % (version, name))


def extra_checks(name, prog, exp, ts, p):
    m = prog.marks
    if "seq" in exp:
        seq, culprits = int(exp["seq"]), [int(x) for x in exp["ranks"].split(",")]
        for r, t in ts.items():
            c = at_seq(t, seq)
            want = exp["call"] if r in culprits else exp["others"]
            eq(prog.site_of(t, c, "rank %d seq %d" % (r, seq)), want, "rank %d's call #%d" % (r, seq))
    if name == "thread":
        t = ts[0]
        c = at_seq(t, int(exp["seq"]))
        main_tids = {x["thread"] for x in colls(t) if x is not c}
        check(c["thread"] not in main_tids, "the reporter thread's call has the main thread's id")
        frames = pyframes(t, c["pystack"])
        quals = [f[1] for f in frames]
        check(any("_bootstrap" in q for q in quals) and "<module>" not in quals and "main" not in quals,
              "the reporter thread's Python stack is not the thread's own: %r" % quals)
    if name == "generator":
        for r, t in ts.items():
            for c in colls(t):
                frames = pyframes(t, c["pystack"])
                i, fr = user_frame(frames)
                if fr[2] == m["gen"]:
                    # the generator's caller is whoever resumed it: main's for loop
                    eq((frames[i + 1][1], frames[i + 1][2]), ("main", m["consume"]), "the generator's resumer")
                elif fr[2] == m["nested"]:
                    eq((frames[i + 1][1], frames[i + 1][2]), ("main", m["hookcall"]), "the closure's caller")
    if name.startswith("recursion"):
        depth = int(CASES[name][3].get("TRSHIM_PYSTACK_DEPTH", "64"))
        for r, t in ts.items():
            deep = [c for c in colls(t) if user_frame(pyframes(t, c["pystack"]))[1][2] == m["deep"]]
            check(deep, "rank %d: no deep call" % r)
            for c in deep:
                frames = pyframes(t, c["pystack"])
                eq(len(frames), depth, "rank %d: frames of a stack deeper than the limit" % r)
                i, _ = user_frame(frames)
                eq([f[2] for f in frames[i + 1:]], [m["recurse"]] * (depth - i - 1),
                   "rank %d: the recursion's frames" % r)
    if name == "oom":
        culprit = int(exp["rank"])
        for r, t in ts.items():
            devs = t["memory"]["devices"]
            check(devs, "rank %d: no device in memory" % r)
            for d in devs:
                fr = user_frame(pyframes(t, d["peak_pystack"]))[1]
                check(fr and fr[2] == m[exp["peak"]], "rank %d: the peak's Python call site %r" % (r, fr))
            fails = t["memory"]["failures"]
            if r != culprit:
                eq(fails, [], "rank %d: failures" % r)
                continue
            check(fails, "rank %d: no failed allocation" % r)
            fr = user_frame(pyframes(t, fails[0]["pystack"]))[1]
            check(fr and fr[2] == m[exp["call"]] and fr[1] == prog.qual(fr[2]),
                  "rank %d: the failure's Python call site %r" % (r, fr))
    if name.startswith("bounds"):
        t = ts[0]
        calls = colls(t)
        lost = [c for c in calls if c["pystack"] < 0]
        eq(len(calls), 70000, "calls")
        check(lost, "no call past the bound")
        eq(t["python"]["dropped"], len(lost), "python.dropped = calls without a Python stack")
        first_lost = calls.index(lost[0])
        eq(lost, calls[first_lost:], "calls without a Python stack: all those after the bound was reached")
        funcs, per = (70, 1000) if name == "bounds_stacks" else (70000, 1)
        if name == "bounds_stacks":
            eq(len(t["pystacks"]), 65536, "Python stacks kept")
            check(len(t["pycodes"]) < 100, "code objects: %d" % len(t["pycodes"]))
        else:
            eq(len(t["pycodes"]), 65536, "code objects kept")
            check(len(t["pystacks"]) <= 65536, "Python stacks: %d" % len(t["pystacks"]))
        for i, c in enumerate(calls[:first_lost]):
            frames = pyframes(t, c["pystack"])
            j, k = divmod(i, per)
            eq((len(frames), frames[-1]), (3, ("bounds_gen.py", "f%d" % j, j * (per + 1) + k + 2)),
               "call %d's Python stack" % i)
        rg = ring.read_ring(t["ring"]["file"])
        eq((len(rg["pystacks"]), len(rg["pycodes"])), (len(t["pystacks"]), len(t["pycodes"])),
           "Python stacks and code objects in the ring")
    if name == "gil":
        held = {}
        for line in p.stdout.splitlines():
            if line.startswith("HELD "):
                a = [int(x) for x in line.split()[1:]]
                held[a[0]] = a[1:]
        eq(len(held), len(ts), "HELD lines")
        for r, t in ts.items():
            sites = {}
            for c in colls(t):
                s = prog.site_of(t, c, "rank %d" % r)
                sites.setdefault(s, []).append(c)
            eq(sorted(sites), ["busy", "held"], "rank %d: call sites" % r)
            eq(len(sites["busy"]), 2000, "rank %d: busy calls" % r)
            c = sites["held"][0]
            t_enter, t_exit, h0, h1 = held[r]
            check(t_enter <= c["enter_ns"] <= c["exit_ns"] <= t_exit and h0 < t_enter and t_exit < h1,
                  "rank %d: the held call [%d, %d] not inside [%d, %d] inside the GIL hold [%d, %d]" %
                  (r, c["enter_ns"], c["exit_ns"], t_enter, t_exit, h0, h1))


# ---- a C program ------------------------------------------------------------------------

def comparable(t):
    """What must not change with Python capture on or off, in a C process."""
    calls = [(c["op"], c["comm"], c["seq"], c["count"], c["dtype"], c["redop"], c["root"], c["group"], c["depth"],
              c["rc"], c["pystack"], tuple(f["symbol"] for f in t["stacks"][c["stack"]]["frames"][:2]))
             for c in t["calls"]]
    mem = [{k: v for k, v in d.items() if k not in ("peak_ns",)} for d in t["memory"]["devices"]]
    return calls, mem, [(c["kind"], c["size"], c["rank"], c["colls"]) for c in t["comms"]], t["modules"] != []


def case_c_only():
    out = {}
    for depth in ("64", "0"):
        work = os.path.join(ARGS.work, "c_only-%s" % depth)
        p, traces = run_job([ARGS.c_only], 2, 60, {"TRSHIM_PYSTACK_DEPTH": depth}, work)
        try:
            eq(p.returncode, 0, "c_only's exit status (%s)" % p.stderr[-2000:])
            ts = load_traces(traces)
            eq(sorted(ts), [0, 1], "ranks with a trace")
            for r, t in ts.items():
                want = {"state": "none", "version": None, "detail": None, "dropped": 0} if depth == "64" else \
                    {"state": "disabled", "version": None, "detail": "TRSHIM_PYSTACK_DEPTH=0", "dropped": 0}
                eq(t["python"], want, "%s: python" % t["_name"])
                eq((t["pycodes"], t["pystacks"]), ([], []), "%s: Python code objects and stacks" % t["_name"])
                eq({c["pystack"] for c in t["calls"]}, {-1}, "%s: calls' pystack" % t["_name"])
                eq({d["peak_pystack"] for d in t["memory"]["devices"]}, {-1}, "%s: peak_pystack" % t["_name"])
                eq(t["settings"]["pystack_depth"], int(depth), "%s: settings.pystack_depth" % t["_name"])
                check(not [line for line in p.stderr.splitlines() if "Python" in line],
                      "a trshim: line about Python in a C process: %s" % p.stderr)
                rg = check_ring(t)
                eq((rg["pycodes"], rg["pystacks"]), ({}, {}), "%s: Python blobs in the ring" % t["_name"])
            out[depth] = {r: comparable(t) for r, t in ts.items()}
        except CaseFailed as e:
            print(p.stdout[-2000:] + p.stderr[-2000:])
            print("FAIL: c_only (TRSHIM_PYSTACK_DEPTH=%s): %s" % (depth, e))
            FAILS.append("c_only")
            return
    if out["64"] != out["0"]:
        print("FAIL: c_only: the traces differ with Python capture on and off:\n%r\n%r" % (out["64"], out["0"]))
        FAILS.append("c_only")
        return
    print("ok: c_only: python state none, no Python stacks, same trace as with TRSHIM_PYSTACK_DEPTH=0")


def main():
    global ARGS
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for a in ("minor", "launch", "shim", "trsim_lib", "gilhelp", "c_only", "work"):
        ap.add_argument(a)
    ap.add_argument("tranalyze", nargs="?")
    ap.add_argument("--only", help="cases, comma-separated (default: all)")
    ARGS = ap.parse_args()
    os.environ["TRSIM_LIB"] = os.path.abspath(ARGS.trsim_lib)
    for a in ("launch", "shim", "gilhelp", "c_only", "work"):
        setattr(ARGS, a, os.path.abspath(getattr(ARGS, a)))
    only = ARGS.only.split(",") if ARGS.only else list(CASES)
    if ARGS.minor == "c":
        case_c_only()
        return 1 if FAILS else 0
    minor = int(ARGS.minor)
    found = pythons.find(minor)
    if not found:
        print("skip: no CPython 3.%d on this machine (looked on PATH, /usr/bin, /usr/local/bin, pyenv; "
              "TRSHIM_PYTHONS to name one)" % minor)
        return 77
    for interp, version in found:
        if "free-threaded" in version:
            print("skip: %s %s is a free-threaded build (not supported)" % (interp, version))
            continue
        print("== %s (%s)" % (interp, version), flush=True)
        for name in only:
            if name != "c_only":
                case_python(name, interp, minor, version)
            sys.stdout.flush()
    if FAILS:
        print("FAILED: %s" % ", ".join(FAILS))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
