#!/usr/bin/env python3
"""Checks the traces of tests/gpu/run.sh (stdlib only):
  check_gpu.py nan DIR ENGINE      nan_gpu check's trace in DIR, checks run by ENGINE (gpu|host)
  check_gpu.py torch DIR ENGINE PREMUL   torch_nan.py's trace (PREMUL: yes|no, was the
                                   float16 overflow run)
  check_gpu.py sites DIR SCRIPT    torch_sites.py's trace: each all-reduce's Python stack
                                   names the `# SITE` line of SCRIPT it came from
Prints each collective with its checks, then "PASS name" or "FAIL name: why"
per fact; exit status 1 when a fact failed. The calls of either trace
version (tests/common/trace.py)."""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from trace import load_trace  # noqa: E402  (calls and checks of either version, unpacked)
import vocab  # noqa: E402  (the fields of a trace's rows: include/trshim/trace_format.h)

CALL_FIELDS = vocab.call_fields("FIRST")   # a trace without call_fields (none today) is read as the first ones
failed = 0


def fact(name, ok, why=""):
    global failed
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, "" if ok else ": " + why))
    failed += not ok


def load(d):
    files = sorted(glob.glob(d + "/*.json"))
    if len(files) != 1:
        print("FAIL trace: %d trace files in %s" % (len(files), d))
        sys.exit(1)
    try:
        t = load_trace(files[0])
    except ValueError as e:
        print("FAIL trace: %s" % e)
        sys.exit(1)
    calls = [dict(zip(t.get("call_fields", CALL_FIELDS), c)) for c in t["calls"]]
    checks = {}
    for row in t.get("checks", []):
        c = dict(zip(t["check_fields"], row))
        checks.setdefault(c["call"], {})[c["buffer"]] = c
    print("nancheck: %s" % json.dumps(t["nancheck"]))
    for i, c in enumerate(calls):
        if c["op"].startswith("Group"):
            continue
        ck = checks.get(i, {})
        print("  %-13s %9d %-10s %-14s | %s" % (c["op"], c["count"], c["dtype"], c["redop"], " | ".join(
            "%s %s nan=%s inf=%s first=%s(%s) %s/%s %s %s" % (b, k["status"], k["nan"], k["inf"], k["first"],
                                                          k["first_kind"], k["elems_checked"], k["elems"],
                                                          k["engine"], k["reason"] or "")
            for b, k in sorted(ck.items()))))
    return t, calls, checks


def find(calls, op, count, dtype):
    for i, c in enumerate(calls):
        if c["op"] == op and c["count"] == count and c["dtype"] == dtype:
            return i
    return None


def want(checks, i, buf, status, engine, nan=0, inf=0, first=None, kind=None, name=""):
    c = checks.get(i, {}).get(buf) if i is not None else None
    if c is None:
        fact(name, False, "no %s check" % buf)
        return
    got = (c["status"], c["nan"], c["inf"], c["first"], c["first_kind"], c["engine"])
    exp = (status, nan, inf, first, kind, engine if status in ("clean", "nonfinite") else None)
    fact(name, got == exp, "got %r, expected %r (reason %r)" % (got, exp, c["reason"]))


def python_site(t, call, script):
    """The innermost frame of call's Python stack in script: (line, function), or None."""
    codes, stacks = t.get("pycodes", []), t.get("pystacks", [])
    ps = call.get("pystack", -1)
    if ps is None or not 0 <= ps < len(stacks):
        return None
    for code, line in stacks[ps]:
        f = codes[code] if 0 <= code < len(codes) else None
        if f and os.path.basename(f[0]) == os.path.basename(script):
            return line, f[1]
    return None


def sites(d, script):
    """Each AllReduce of torch_sites.py, by count, comes from the `# SITE name` line."""
    marks = {}
    with open(script) as fh:
        for no, text in enumerate(fh, 1):
            if "# SITE " in text:
                marks[text.split("# SITE ")[1].strip()] = no
    t, calls, _ = load(d)
    fact("python stacks captured", (t.get("python") or {}).get("state") == "ok", repr(t.get("python")))
    by_count = {4096: "grads", 1: "metrics", 16: "thread"}
    seen = {}
    for c in calls:
        if c["op"] == "AllReduce" and c["count"] in by_count:
            seen.setdefault(by_count[c["count"]], []).append(python_site(t, c, script))
    for name, count in (("grads", 2), ("metrics", 2), ("thread", 1)):
        got = seen.get(name, [])
        fact("%s: %d all-reduce(s) from %s:%d" % (name, count, os.path.basename(script), marks[name]),
             len(got) == count and all(g is not None and g[0] == marks[name] for g in got), repr(got))
    return 1 if failed else 0


def main():
    if sys.argv[1] == "sites":
        return sites(sys.argv[2], sys.argv[3])
    what, d, engine = sys.argv[1], sys.argv[2], sys.argv[3]
    t, calls, checks = load(d)
    fact("engine", t["nancheck"]["engine"] == engine, "nancheck.engine %r (gpu_unused: %r)" % (
        t["nancheck"]["engine"], t["nancheck"].get("gpu_unused")))
    NF, C = "nonfinite", "clean"
    if what == "nan":
        i = find(calls, "AllReduce", 1 << 20, "float32")
        want(checks, i, "input", NF, engine, 1, 0, 123, "nan", "float32 NaN born on the rank: input")
        want(checks, i, "output", NF, engine, 1, 0, 123, "nan", "float32 NaN born on the rank: output")
        i = find(calls, "AllReduce", 4096, "float16")
        want(checks, i, "input", C, engine, name="fp16 overflow: inputs finite")
        want(checks, i, "output", NF, engine, 0, 10, 100, "inf", "fp16 overflow: output Inf at 100..109")
        i = find(calls, "AllReduce", 1000, "bfloat16")
        want(checks, i, "input", NF, engine, 1, 0, 7, "nan", "bfloat16 in place, in a group: input")
        want(checks, i, "output", NF, engine, 1, 0, 7, "nan", "bfloat16 in place, in a group: output after GroupEnd")
        i = find(calls, "AllReduce", 16 << 20, "float32")
        want(checks, i, "input", C, engine, name="64 MiB clean: input")
        want(checks, i, "output", C, engine, name="64 MiB clean: output")
        c = checks.get(i, {}).get("output") if i is not None else None
        fact("64 MiB: every element checked (cap 64 MiB)", c is not None and c["elems_checked"] == 16 << 20,
             repr(c))
        i = find(calls, "AllReduce", 16, "float32")
        c = checks.get(i, {}).get("input") if i is not None else None
        fact("CUDA error pending: not checked", c is not None and c["status"] == "not_checked" and
             (c["reason"] or "").startswith("cuda_error_pending"), repr(c))
    elif what == "torch":
        premul = sys.argv[4] == "yes"
        if not any(c["op"] == "AllReduce" for c in calls):
            fact("PyTorch's NCCL calls recorded", False,
                 "no AllReduce in the trace: NCCL linked statically into this PyTorch?")
        i = find(calls, "AllReduce", 1 << 20, "float32")
        want(checks, i, "input", NF, engine, 1, 0, 123, "nan", "torch float32 NaN: input")
        want(checks, i, "output", NF, engine, 1, 0, 123, "nan", "torch float32 NaN: output")
        i = find(calls, "AllReduce", 1000, "bfloat16")
        want(checks, i, "input", NF, engine, 1, 0, 7, "nan", "torch bfloat16 NaN: input")
        want(checks, i, "output", NF, engine, 1, 0, 7, "nan", "torch bfloat16 NaN: output")
        if premul:
            i = find(calls, "AllReduce", 4096, "float16")
            want(checks, i, "input", C, engine, name="torch fp16 overflow: input finite")
            want(checks, i, "output", NF, engine, 0, 10, 100, "inf", "torch fp16 overflow: output Inf")
    else:
        print("usage: check_gpu.py nan|torch DIR ENGINE [PREMUL] | sites DIR SCRIPT")
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
