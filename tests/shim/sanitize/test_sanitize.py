#!/usr/bin/env python3
"""Sanitizer-built programs under libtrshim.so (issue 12 item 6):
test_sanitize.py VARIANT (asan: -fsanitize=address,undefined; tsan:
-fsanitize=thread). Paths come from the environment meson sets.

The sanitizer runtime looks up every function it intercepts with
dlsym(RTLD_NEXT, ...) / dlvsym while it initialises (from the program's
preinit array, before any constructor), and those lookups reach the shim's
dlsym; before the fix the shim's lookup path called strcmp (ASan) or
dl_iterate_phdr (TSan), intercepted and not yet usable: SIGSEGV at address 0.

san_job runs without the shim ("plain"), with the shim and TRSHIM=0
("off"), with the shim ("shim"), and with the sanitizer runtime preloaded
ahead of the shim ("first", the order ASan asks for; the other runs set
ASAN_OPTIONS=verify_asan_link_order=0, since LD_PRELOAD puts the shim before
the runtime the program needs). Every run must exit 0 with no sanitizer
report and no "trshim:" line. The checks:
- the program's own lookups (RTLD_NEXT, RTLD_DEFAULT, dlvsym, a failed one,
  libtrsim.so's handle) give what they give without the shim, except that
  with the shim active the handle lookups of ncclAllReduce and cudaMalloc
  give the shim's wrappers;
- every symbol the sanitizer runtime bound without the shim (LD_DEBUG=bindings:
  its dlsym/dlvsym lookups at start-up and its relocations) is bound to the
  same object under the shim; its dlsym and dlvsym are the shim's;
- with the shim active the trace holds the two AllReduces (seq 1 and 2, the
  second through the dlsym'd pointer) and the 4096-byte cudaMalloc; without
  it, or with TRSHIM=0, nothing is written.
Stdlib only."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from checks import Failure, check, eq, path_of, run_case, shim_lines  # noqa: E402
from trace import load_trace  # noqa: E402  (calls and checks of either version, unpacked)

SHIM = "libtrshim.so"
SCRUB = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_.*|PMI_.*|PMIX_.*|SLURM_.*|"
                   r"TRSHIM.*|TRSIM_.*|TORCHELASTIC_RUN_ID|LD_PRELOAD|LD_DEBUG.*|LD_BIND_NOW|"
                   r"[A-Z]+SAN_OPTIONS|NCCL_COMM_BLOCKING)$")
# what a sanitizer prints: "==1234==ERROR: AddressSanitizer: ...", "WARNING: ThreadSanitizer: ...",
# "file.c:12:3: runtime error: ...", "SUMMARY: ...Sanitizer..."
REPORT = re.compile(r"^==\d+==|Sanitizer|runtime error:")
# the version (" [GLIBC_2.2.5]") is a separate write of ld.so, which another
# thread's line may come between: not read
BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'")
RUNTIMES = {"asan": "libasan.so", "tsan": "libtsan.so"}
OPTIONS = {"asan": {"ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1",
                    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"},
           "tsan": {"TSAN_OPTIONS": "halt_on_error=1"}}
WRAPPED = {"dlsym(libtrsim.so, ncclAllReduce)": "libtrshim.so ncclAllReduce",
           "dlsym(libtrsim.so, cudaMalloc)": "libtrshim.so cudaMalloc"}


def base(path):
    return os.path.basename(path)


class Run:
    def __init__(self, how, p, traces, bindings):
        self.how, self.rc, self.out, self.err = how, p.returncode, p.stdout, p.stderr
        self.traces, self.bindings = traces, bindings

    def lookups(self):
        out = {}
        for line in self.out.splitlines():
            if line.startswith("lookup ") and " -> " in line:
                label, where = line[len("lookup "):].rsplit(" -> ", 1)
                check(label not in out, "[%s] lookup %r printed twice" % (self.how, label))
                out[label] = where
        return out


def load_bindings(prefix, runtime):
    """{symbol: {object basenames}} of the sanitizer runtime's bindings
    (LD_DEBUG_OUTPUT files prefix.<pid>)."""
    d = os.path.dirname(prefix)
    text = ""
    for n in sorted(os.listdir(d)):
        if n.startswith(os.path.basename(prefix) + "."):
            with open(os.path.join(d, n), encoding="utf-8", errors="replace") as f:
                text += f.read()
    out = {}
    # lines of several threads may run together: findall, not a line match
    for frm, to, sym in BINDING.findall(text):
        if base(frm).startswith(runtime):
            out.setdefault(sym, set()).add(base(to))
    return out


def load_traces(d):
    if not os.path.isdir(d):
        return []
    out = []
    for n in sorted(os.listdir(d)):
        if n.endswith(".ring"):
            continue
        check(n.startswith("trshim.") and n.endswith(".json"), "unexpected file %s in the trace folder" % n)
        out.append(load_trace(os.path.join(d, n), Failure))
    return out


class Case:
    def __init__(self, variant):
        self.variant = variant
        self.prog = path_of("SAN_JOB_" + variant.upper())
        self.tmp = tempfile.mkdtemp(prefix="trshim-sanitize-")
        self.n = 0

    def runtime_path(self):
        """The sanitizer runtime the program loads (ldd), for the "first" run."""
        p = subprocess.run(["ldd", self.prog], capture_output=True, text=True, timeout=60)
        for line in p.stdout.splitlines():
            m = re.match(r"\s*(\S+) => (\S+)", line)
            if m and m.group(1).startswith(RUNTIMES[self.variant]):
                return m.group(2)
        raise Failure("ldd %s names no %s:\n%s" % (self.prog, RUNTIMES[self.variant], p.stdout))

    def run(self, how):
        """how: plain, off, shim, first."""
        self.n += 1
        traces = os.path.join(self.tmp, "traces%d" % self.n)
        debug = os.path.join(self.tmp, "ld%d" % self.n)
        env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
        env.update(OPTIONS[self.variant])
        env.update({"TRSHIM_DIR": traces, "LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": debug})
        shim = path_of("TRSHIM_LIB")
        if how in ("off", "shim") and self.variant == "asan":
            env["ASAN_OPTIONS"] += ":verify_asan_link_order=0"
        if how == "off":
            env["TRSHIM"] = "0"
        if how in ("off", "shim"):
            env["LD_PRELOAD"] = shim
        elif how == "first":
            env["LD_PRELOAD"] = self.runtime_path() + " " + shim
        try:
            p = subprocess.run([self.prog], env=env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise Failure("[%s] %s hung (killed after 120 s)" % (how, self.prog))
        sys.stdout.write("$ [%s] LD_PRELOAD=%s %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (
            how, env.get("LD_PRELOAD", ""), self.prog, p.returncode, p.stdout, p.stderr))
        r = Run(how, p, load_traces(traces), load_bindings(debug, RUNTIMES[self.variant]))
        eq(r.rc, 0, "[%s] exit status" % how)
        eq(r.out.splitlines()[-1:], ["ok"], "[%s] last line of the output" % how)
        eq([l for l in r.err.splitlines() if REPORT.search(l)], [], "[%s] sanitizer report" % how)
        eq(shim_lines(r.err), [], "[%s] trshim: lines" % how)
        if how in ("plain", "off"):
            eq(r.traces, [], "[%s] traces" % how)
        return r

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def check_bindings(plain, r):
    """Every binding of the runtime without the shim is the same under it,
    when it is made at all: a function the runtime binds lazily only on a
    path it takes under contention (sched_yield while it spins) may be
    bound in one run and not in the other."""
    diff = []
    for sym, where in sorted(plain.items()):
        if sym in ("dlsym", "dlvsym"):
            continue
        got = r.bindings.get(sym)
        if got is not None and got != where:
            diff.append("%s: %s without the shim, %s" % (sym, sorted(where), sorted(got) if got else "not bound"))
    eq(diff, [], "[%s] the sanitizer runtime's bindings that differ" % r.how)
    for sym, where in r.bindings.items():
        if sym in ("dlsym", "dlvsym"):
            eq(where, {SHIM}, "[%s] the sanitizer runtime's %s" % (r.how, sym))
        else:
            check(SHIM not in where, "[%s] the sanitizer runtime bound %s to the shim" % (r.how, sym))


def check_trace(r):
    eq(len(r.traces), 1, "[%s] traces written" % r.how)
    (t,) = r.traces
    calls = [dict(zip(t["call_fields"], c)) for c in t["calls"]]
    eq([(c["op"], c["seq"], c["count"], c["dtype"], c["rc"]) for c in calls],
       [("AllReduce", 1, 256, "float32", 0), ("AllReduce", 2, 128, "float32", 0)], "[%s] calls" % r.how)
    eq([(d["device"], d["allocs"], d["frees"], d["peak_bytes"], d["live_bytes"]) for d in t["memory"]["devices"]],
       [(0, 1, 1, 4096, 0)], "[%s] memory" % r.how)


def check_variant(c):
    """the program of c's variant without the shim, with TRSHIM=0, with the
    shim, and with the runtime preloaded ahead of it"""
    runs = {how: c.run(how) for how in ("plain", "off", "shim", "first")}
    plain = runs["plain"].lookups()
    rt = RUNTIMES[c.variant]
    for label in ("dlsym(RTLD_NEXT, malloc)", "dlsym(RTLD_NEXT, mmap)"):
        check(plain.get(label, "").startswith(rt), "%s without the shim: %r, expected the %s runtime"
              % (label, plain.get(label), rt))
    eq(plain.get("dlsym(RTLD_NEXT, no_such_function)"), "NULL", "failed lookup without the shim")
    eq(plain.get("dlsym(libtrsim.so, ncclAllReduce)"), "libtrsim.so ncclAllReduce", "handle lookup")
    eq(runs["off"].lookups(), plain, "[off] lookups")
    for how in ("shim", "first"):
        eq(runs[how].lookups(), dict(plain, **WRAPPED), "[%s] lookups" % how)
    libc = sum(1 for w in runs["plain"].bindings.values() if any(x.startswith("libc.so") for x in w))
    check(libc >= 50, "LD_DEBUG=bindings shows %d bindings of the %s runtime to libc (its start-up lookups): "
          "expected at least 50" % (libc, rt))
    for how in ("off", "shim", "first"):
        check_bindings(runs["plain"].bindings, runs[how])
    check_trace(runs["shim"])
    check_trace(runs["first"])


def main():
    return run_case({v: check_variant for v in RUNTIMES}, lambda: Case(sys.argv[1]), sys.argv, "test_sanitize.py")


if __name__ == "__main__":
    sys.exit(main())
