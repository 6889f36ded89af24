#!/usr/bin/env python3
"""The NCCL version matrix (issue 13): trshim's vocabulary and ABI against
every NCCL it must serve, 2.18 to 2.32.

    check_versions.py CASE

  vocab-json  the C compiler's view of include/trshim/nccl_calls.h and of
              trace_format.h's field tables (trshim-vocab) is the Python
              one (tests/common/vocab.py)
  fields-docs docs/trace-format.md's call_fields and check_fields (the
              arrays shown and the tables of fields, in order) are those of
              trace_format.h's tables
  exports     every host function of NCCL 2.18.3 ... 2.32.3 (the export
              lists in tests/nccl/exports/, taken from PyPI's libraries) and
              of every real libnccl found here is in the vocabulary, with the
              version that added it; a list and its real library agree
  abi         trshim/nccl_abi.h declares what the real nccl.h of 2.28 (the
              toolkit's) and 2.32.3 (PyPI's) declare: sizes, offsets, values
  build232    shim_nccl232.c built against the real 2.32.3 nccl.h records
              exactly what the build against trshim/nccl_abi.h records; the
              simulator's tests of the *Config and one-sided functions built
              against it pass
  real-libs   the real libnccl 2.28 (toolkit), 2.30.7 (torch's wheel) and
              2.32.3 (PyPI), the shim alone in front: every call returns
              what it returns without the shim; the trace has the library's
              version and no function it does not know

NCCL 2.32.3 comes from tests/nccl/fetch.sh (tests/run fetches it), torch's
from the torch suite's venv (tests/pytorch/venv.sh). A library or header
that is missing skips its part, and fails the case under CI=true.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
sys.path.insert(0, os.path.join(ROOT, "tests", "shim"))
from checks import Failure, Skip, check, eq, path_of, run_case  # noqa: E402
import vocab  # noqa: E402
import test_shim as ts  # noqa: E402

CUDA = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
HOME = os.path.expanduser("~")


def nccl232():
    d = os.environ.get("TRSHIM_NCCL_CACHE") or os.path.join(HOME, ".cache", "trshim", "nccl-2.32.3")
    return d if os.path.exists(os.path.join(d, ".complete")) else None


def torch_nccl_lib():
    venv = os.environ.get("TRSHIM_TORCH_VENV") or os.path.join(HOME, ".cache", "trshim", "torch-venv")
    found = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "nvidia", "nccl", "lib"))
    return found[0] if found else None


def missing(what):
    """a part that cannot run here: a failure in CI, else noted"""
    if os.environ.get("CI") == "true":
        raise Failure("%s is missing (CI must have it: tests/run installs it)" % what)
    sys.stdout.write("not checked here (missing): %s\n" % what)


def real_libs():
    """(label, folder holding libnccl.so.2) of every real NCCL found"""
    out = []
    for label, d in (("toolkit", os.path.join(CUDA, "lib64")), ("torch", torch_nccl_lib()),
                     ("pypi-2.32.3", nccl232() and os.path.join(nccl232(), "lib"))):
        if d and os.path.exists(os.path.join(d, "libnccl.so.2")):
            out.append((label, d))
        else:
            missing("libnccl.so.2 of %s" % label)
    return out


def exported_nccl(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    return sorted({l.split()[-1] for l in out.splitlines()
                   if len(l.split()) == 3 and l.split()[1] in "TW" and l.split()[-1].startswith("nccl")})


def library_version(lib):
    """the version NCCL prints ("NCCL version 2.30.7+cuda13.0"), from the library's read-only data"""
    with open(lib, "rb") as f:
        m = re.search(rb"NCCL version (\d+\.\d+\.\d+)", f.read())
    return m.group(1).decode() if m else None


def version_key(v):
    return [int(x) for x in v.split(".")]


class Case(ts.Case):
    pass


def case_vocab_json(c):
    out = subprocess.run([path_of("VOCAB_DUMP")], capture_output=True, text=True, check=True).stdout
    eq(json.loads(out), vocab.as_json(), "trshim-vocab's JSON against vocab.py's parse")
    eq(len(vocab.OPS), len(set(vocab.OPS)), "operation names are distinct")
    for name, f in vocab.FUNCS.items():
        check(f["kind"] in vocab.KINDS, "%s: unknown kind %s" % (name, f["kind"]))
        check((f["op"] is not None) == (f["kind"] in ("COLL", "P2P", "ONESIDED", "GROUP")),
              "%s: an operation exactly when its kind records one" % name)


def doc_fields(text, array):
    """the names docs/trace-format.md shows for array: its ``` block, and its table's rows"""
    m = re.search(r"`%s`[^`]*\sis\s+always:" % array, text)
    check(m, "docs/trace-format.md says what %s always is" % array)
    start = text.index("```", m.end()) + 3
    shown = json.loads(text[start:text.index("```", start)])
    table = text.index("| field | type | meaning |", start)
    rows = []
    for line in text[table:].split("\n")[2:]:
        if not line.startswith("|"):
            break
        rows += re.findall(r"`([a-z_]+)`", line.split("|")[1])
    return shown, rows


def case_fields_docs(c):
    text = open(os.path.join(ROOT, "docs", "trace-format.md")).read()
    for array, table in (("call_fields", vocab.CALL_FIELDS), ("check_fields", vocab.CHECK_FIELDS)):
        names = [f["name"] for f in table]
        eq(len(names), len(set(names)), "%s: names are distinct" % array)
        shown, rows = doc_fields(text, array)
        eq(shown, names, "docs/trace-format.md's %s array against trace_format.h" % array)
        eq(rows, names, "docs/trace-format.md's table of %s against trace_format.h" % array)


def case_exports(c):
    lists = sorted(glob.glob(os.path.join(ROOT, "tests", "nccl", "exports", "*.txt")),
                   key=lambda p: version_key(os.path.basename(p)[:-4]))
    check(len(lists) >= 15, "export lists of 2.18 to 2.32: %d" % len(lists))
    first = {}
    by_version = {}
    for p in lists:
        v = os.path.basename(p)[:-4]
        names = open(p).read().split()
        by_version[v] = names
        a, b, _ = version_key(v)
        for n in names:
            first.setdefault(n, a * 10000 + b * 100)
    unknown = sorted(set(first) - set(vocab.FUNCS))
    eq(unknown, [], "NCCL host functions the vocabulary does not classify")
    eq({n: f["since"] for n, f in vocab.FUNCS.items() if f["since"] != first.get(n)}, {},
       "the vocabulary's NCCL version for functions whose first export list differs")
    for label, d in real_libs():
        names = exported_nccl(os.path.join(d, "libnccl.so.2"))
        eq(sorted(set(names) - set(vocab.FUNCS)), [], "functions of the %s libnccl the vocabulary lacks" % label)
        v = library_version(os.path.join(d, "libnccl.so.2"))
        if v in by_version:
            eq(names, sorted(by_version[v]), "the %s libnccl %s against tests/nccl/exports/%s.txt" % (label, v, v))
        sys.stdout.write("%s: NCCL %s, %d functions, all known\n" % (label, v or "?", len(names)))


def layout(prog):
    return json.loads(subprocess.run([prog], capture_output=True, text=True, check=True).stdout)


def build(c, src, out, incs, defs=(), libs=()):
    cmd = [os.environ.get("CC", "cc"), "-std=gnu11", "-O1", "-o", os.path.join(c.tmp, out), src]
    cmd += ["-I" + i for i in incs] + ["-D" + d for d in defs] + list(libs)
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == 0, "building %s failed:\n%s" % (out, p.stderr))
    return os.path.join(c.tmp, out)


def case_abi(c):
    ours = layout(path_of("ABI_LAYOUT"))
    src = os.path.join(HERE, "abi_layout.c")
    real = [("2.28 (toolkit)", os.path.join(CUDA, "include"))]
    if nccl232():
        real.append(("2.32.3 (PyPI)", os.path.join(nccl232(), "include")))
    else:
        missing("NCCL 2.32.3's nccl.h")
    for label, inc in real:
        theirs = layout(build(c, src, "layout-" + label.split()[0], [inc, os.path.join(CUDA, "include")]))
        diff = {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
        eq(diff, {}, "trshim/nccl_abi.h against NCCL %s's nccl.h (ours, theirs)" % label)
        sys.stdout.write("NCCL %s: %d values agree\n" % (label, len(theirs)))
    check(nccl232() is None or len(theirs) == len(ours), "the 2.32 header covers every value checked")


def call_view(t):
    confs = t.get("coll_configs", [])
    return [(x["op"], x["comm"], x["seq"], x["count"], x["dtype"], x["redop"], x["root"], x["peer"], x["rc"],
             None if x["config"] is None else confs[x["config"]], x["signal"]) for x in t["calls"]]


def case_build232(c):
    if not nccl232():
        missing("NCCL 2.32.3's nccl.h")
        raise Skip("no NCCL 2.32.3 header")
    sim = path_of("TRSIM_LIB")
    prog = build(c, os.path.join(ROOT, "tests", "shim", "shim_nccl232.c"), "shim_nccl232-real-h",
                 [os.path.join(nccl232(), "include"), os.path.join(CUDA, "include"), os.path.join(ROOT, "include")],
                 ["TRTEST_REAL_NCCL_H"], [sim, "-Wl,-rpath," + os.path.dirname(sim)])
    views = []
    for p in (path_of("SHIM_NCCL232"), prog):
        shutil.rmtree(c.traces, ignore_errors=True)
        c.launch(4, [p])
        views.append({r: call_view(t) for r, t in ts.by_rank(ts.load_traces(c.traces)).items()})
    eq(sorted(views[0]), [0, 1, 2, 3], "ranks")
    for r in range(4):
        eq(views[1][r], views[0][r], "rank %d: calls recorded from the build against NCCL 2.32.3's header" % r)
    # the simulator's own tests of the 2.31/2.29 functions, built against the real header (test_comm232.c
    # also needs the device API's C++ headers: not here)
    for name, args in (("config", []), ("onesided", ["all"])):
        prog = build(c, os.path.join(ROOT, "tests", "nccl", "test_%s.c" % name), "test_%s-real-h" % name,
                     [os.path.join(nccl232(), "include"), os.path.join(CUDA, "include"),
                      os.path.join(ROOT, "include")],
                     ["TRTEST_REAL_NCCL_H"], [sim, "-Wl,-rpath," + os.path.dirname(sim), "-lpthread"])
        c.run([path_of("TRSIM_LAUNCH"), "-n", "4", "--timeout", "60", "--", prog] + args, limit=120)


def case_real_libs(c):
    prog = path_of("SHIM_REAL")
    for label, d in real_libs():
        path = d if d == os.path.join(CUDA, "lib64") else d + ":" + os.path.join(CUDA, "lib64")
        extra = {"LD_LIBRARY_PATH": path}
        shutil.rmtree(c.traces, ignore_errors=True)
        plain = c.run([prog], extra=dict(extra, TRSHIM_DIR=os.path.join(c.tmp, "unused")))
        shim = c.run([prog], extra=extra, preload=[path_of("TRSHIM_LIB")])
        eq(shim.stdout, plain.stdout, "%s: output under the shim (return codes, CUDA error state)" % label)
        (t,) = ts.load_traces(c.traces)
        version = int(re.search(r"nccl (\d+)", plain.stdout).group(1))
        ops = [(f[0], int(f[2])) for f in (l.split() for l in plain.stdout.splitlines() if " rc " in l)
               if f[0] in vocab.OPS]
        eq([(x["op"], x["rc"]) for x in t["calls"]], ops, "%s: calls and their return codes" % label)
        eq(t["versions"]["nccl"], version, "%s: version" % label)
        if t["nccl"] is not None:      # read at the first communicator: InitAll's attempt
            eq((t["nccl"]["version"], t["nccl"]["unknown_functions"]), (version, []),
               "%s: the library's version and the functions trshim does not know" % label)
            eq(os.path.realpath(t["nccl"]["library"]), os.path.realpath(os.path.join(d, "libnccl.so.2")),
               "%s: the library" % label)
        absent = sorted(re.findall(r"^(nccl\w+) absent$", plain.stdout, re.M))
        want_absent = sorted(n for n in ("ncclAllReduceConfig", "ncclPutSignal", "ncclSignal", "ncclWaitSignal",
                                         "ncclGroupSimulateEnd", "ncclCommSuspend", "ncclCommResume")
                             if vocab.FUNCS[n]["since"] > version // 100 * 100)
        eq(absent, want_absent, "%s: the functions NCCL %d lacks" % (label, version))
        sys.stdout.write("%s: NCCL %d, %d calls, same return codes with and without the shim\n" %
                         (label, version, len(ops)))


CASES = {"vocab-json": case_vocab_json, "fields-docs": case_fields_docs, "exports": case_exports, "abi": case_abi, "build232": case_build232,
         "real-libs": case_real_libs}


def main():
    return run_case(CASES, Case, sys.argv, "check_versions.py", kept="files")


if __name__ == "__main__":
    sys.exit(main())
