#!/usr/bin/env python3
"""NaN/Inf checks of libtrshim.so: check_nan.py CASE. Runs nan_job (4 ranks
on the simulated CUDA runtime + NCCL, under trsim-launch, with the shim
preloaded) and asserts exact facts about each rank's "checks"
(docs/trace-format.md): which calls have an input and an output check, their
status, NaN and Inf counts, first index and its kind, elements checked.
Paths come from the environment meson sets (TRSHIM_LIB, TRSIM_LIB,
TRSIM_LAUNCH, NAN_JOB, NAN_INITALL). Stdlib only.

Cases: all, output, off (the "main" scenario under TRSHIM_NANCHECK=all,
output, off), clean, cap (TRSHIM_NANCHECK_MAX_MB=1), pool
(TRSHIM_NANCHECK_POOL_MB=1), gpu-forced (TRSHIM_NANCHECK_ENGINE=gpu where
no kernel can run), settings (bad values), initall (nan_initall: one process
driving four devices, explicit and legacy default streams)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import Failure, check, eq, path_of  # noqa: E402
from trace import load_trace  # noqa: E402  (calls and checks of either version, unpacked)
import vocab  # noqa: E402  (the fields of a trace's rows: include/trshim/trace_format.h)


W = 4
CALL_FIELDS = [f["name"] for f in vocab.CALL_FIELDS]
CHECK_FIELDS = [f["name"] for f in vocab.CHECK_FIELDS]
FLOATS = vocab.FLOATS
SCRUB = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_.*|PMI_.*|PMIX_.*|"
                   r"SLURM_.*|TRSHIM.*|TORCHELASTIC_RUN_ID|TRSIM_LAUNCH_TIMEOUT|TRSIM_TIMEOUT_SEC|"
                   r"LD_PRELOAD|LD_LIBRARY_PATH|NCCL_COMM_BLOCKING)$")


def run_job(tmp, scenario, env_extra, prog="NAN_JOB", nranks=W):
    traces = os.path.join(tmp, "traces")
    env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
    env["TRSHIM_DIR"] = traces
    env.update(env_extra)
    pre = path_of("TRSHIM_LIB")
    cmd = [path_of("TRSIM_LAUNCH"), "-n", str(nranks), "--timeout", "120", "--",
           "env", "LD_PRELOAD=" + pre, path_of(prog)] + ([scenario] if scenario else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=200)
    sys.stdout.write("$ %s %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (
        " ".join("%s=%s" % kv for kv in env_extra.items()), " ".join(cmd), p.returncode, p.stdout, p.stderr))
    eq(p.returncode, 0, "exit status of %s %s" % (prog, scenario))
    out = {}
    for name in sorted(glob.glob(os.path.join(traces, "*.json"))):
        t = load_trace(name, Failure)
        eq(t["call_fields"], CALL_FIELDS, "%s: call_fields, as trace_format.h's table has them" % name)
        t["calls"] = [dict(zip(CALL_FIELDS, c)) for c in t["calls"]]
        check(t["rank"] not in out, "two traces of rank %s" % t["rank"])
        out[t["rank"]] = t
    eq(sorted(out), list(range(W)), "ranks with a trace")
    return out, p


def checks_by_call(t, r):
    """{call position: {"input": check, "output": check}}, after checking the
    shape of every check."""
    eq(t["check_fields"], CHECK_FIELDS, "rank %d check_fields" % r)
    out = {}
    for row in t["checks"]:
        eq(len(row), len(CHECK_FIELDS), "rank %d: fields of a check" % r)
        c = dict(zip(CHECK_FIELDS, row))
        check(0 <= c["call"] < len(t["calls"]), "rank %d: check of call %r out of range" % (r, c["call"]))
        call = t["calls"][c["call"]]
        check(call["op"] in ("AllReduce", "ReduceScatter", "Reduce") and call["dtype"] in FLOATS,
              "rank %d: a check of %s %s" % (r, call["op"], call["dtype"]))
        check(c["buffer"] in ("input", "output"), "rank %d: buffer %r" % (r, c["buffer"]))
        check(c["buffer"] not in out.get(c["call"], {}), "rank %d: two %s checks of call %d" %
              (r, c["buffer"], c["call"]))
        st = c["status"]
        check(st in ("clean", "nonfinite", "not_checked", "pending"), "rank %d: status %r" % (r, st))
        if st == "nonfinite":
            check(c["nan"] + c["inf"] > 0 and c["first"] is not None and c["first_kind"] in ("nan", "inf"),
                  "rank %d call %d: nonfinite without counts: %r" % (r, c["call"], row))
        else:
            check(c["nan"] == 0 and c["inf"] == 0 and c["first"] is None and c["first_kind"] is None,
                  "rank %d call %d: %s with counts: %r" % (r, c["call"], st, row))
        check((c["reason"] is not None) == (st == "not_checked"), "rank %d call %d: reason %r with %s" %
              (r, c["call"], c["reason"], st))
        if st == "not_checked":
            eq(c["elems_checked"], 0, "rank %d call %d elems_checked when not checked" % (r, c["call"]))
            eq(c["engine"], None, "rank %d call %d engine when not checked" % (r, c["call"]))
        out.setdefault(c["call"], {})[c["buffer"]] = c
    return out


# expectations: CLEAN, NF(nan, inf, first, kind), NC(reason prefix), None (no check)
CLEAN = ("clean",)


def NF(nan, inf, first, kind):
    return ("nonfinite", nan, inf, first, kind)


def NC(reason):
    return ("not_checked", reason)


def expect(c, want, what, elems, checked=None):
    if want is None:
        check(c is None, "%s: a check where none is expected: %r" % (what, c))
        return
    check(c is not None, "%s: no check" % what)
    eq(c["status"], want[0], what + " status")
    eq(c["elems"], elems, what + " elems")
    if want[0] == "not_checked":
        check(c["reason"].startswith(want[1]), "%s: reason %r, expected %r" % (what, c["reason"], want[1]))
        return
    eq(c["elems_checked"], elems if checked is None else checked, what + " elems_checked")
    eq(c["engine"], "host", what + " engine (no kernel runs on the simulator)")
    if want[0] == "nonfinite":
        eq((c["nan"], c["inf"], c["first"], c["first_kind"]), want[1:], what + " nan, inf, first, first_kind")


def colls(t):
    """positions and calls that are not group calls"""
    return [(i, c) for i, c in enumerate(t["calls"]) if not c["op"].startswith("Group")]


def verify(traces, model, mode, what):
    """model: list of (op, count, dtype, elems_in, elems_out, f(rank) -> (input, output))"""
    for r, t in traces.items():
        ck = checks_by_call(t, r)
        cs = colls(t)
        eq([(c["op"], c["count"], c["dtype"]) for _, c in cs], [m[:3] for m in model],
           "%s rank %d: collectives" % (what, r))
        seen = set()
        for (pos, c), (op, count, dtype, ein, eout, f) in zip(cs, model):
            want_in, want_out = f(r)
            if mode == "output":
                want_in = None
            w = "%s rank %d call %d (%s %d x %s)" % (what, r, pos, op, count, dtype)
            got = ck.get(pos, {})
            expect(got.get("input"), want_in, w + " input", ein)
            expect(got.get("output"), want_out, w + " output", eout)
            seen.add(pos)
        extra = sorted(set(ck) - seen)
        check(not extra, "%s rank %d: checks of calls %s" % (what, r, extra))


def main_model():
    def nan_on(rank_with, first, kind="nan", everyone=True):
        def f(r):
            nf = NF(1, 0, first, kind) if kind == "nan" else NF(0, 1, first, kind)
            return (nf if r == rank_with else CLEAN, nf if everyone else CLEAN)
        return f

    def f64(r):
        inp = NF(0, 2, 3, "inf") if r == 0 else NF(1, 0, 3, "nan") if r == 1 else CLEAN
        return inp, NF(1, 1, 3, "nan")

    def half(r):
        return (NF(1, 0, 99, "nan") if r == 2 else CLEAN, NF(1, 0, 99, "nan") if r % 2 == 0 else CLEAN)

    def rs(r):
        return (NF(1, 0, 250, "nan") if r == 3 else CLEAN, NF(1, 0, 50, "nan") if r == 2 else CLEAN)

    def reduce(r):
        return (NF(0, 1, 77, "inf") if r == 0 else CLEAN, NF(0, 1, 77, "inf") if r == 1 else None)

    def clean(r):
        return CLEAN, CLEAN

    pend = NC("cuda_error_pending: cudaErrorInvalidDevice")
    return [
        ("AllReduce", 1000, "float32", 1000, 1000, nan_on(2, 123)),
        ("AllReduce", 1000, "bfloat16", 1000, 1000, nan_on(2, 123)),
        ("AllReduce", 1000, "float16", 1000, 1000, lambda r: (CLEAN, NF(0, 10, 500, "inf"))),
        ("AllReduce", 64, "float8e4m3", 64, 64, nan_on(1, 5)),
        ("AllReduce", 64, "float8e5m2", 64, 64, nan_on(3, 20)),
        ("AllReduce", 10, "float64", 10, 10, f64),
        ("AllReduce", 256, "float32", 256, 256, nan_on(0, 42)),          # group: NaN written after the call
        ("ReduceScatter", 64, "float32", 256, 64, clean),
        ("AllReduce", 32, "float32", 32, 32, lambda r: (NF(1, 0, 0, "nan") if r == 3 else CLEAN, CLEAN)),  # max
        ("AllReduce", 100, "float32", 100, 100, half),
        ("AllReduce", 100, "float32", 100, 100, clean),
        ("ReduceScatter", 100, "float32", 400, 100, rs),
        ("Reduce", 100, "float32", 100, 100, reduce),
        ("AllReduce", 10, "int32", 10, 10, lambda r: (None, None)),
        ("AllReduce", 10, "float32", 10, 10, lambda r: (pend, pend)),
        ("AllReduce", 100, "float32", 100, 100, nan_on(1, 11)),           # non-blocking communicator
        ("AllReduce", 4096, "float32", 4096, 4096, clean),
    ]


def threads_of(out, r):
    m = re.search(r"^rank %d threads:(.*)$" % r, out, re.M)
    check(m, "rank %d did not list its threads" % r)
    return m.group(1).split()


def policy(t, mode, **kw):
    n = t["nancheck"]
    eq(n["mode"], mode, "nancheck.mode")
    for k, v in kw.items():
        eq(n[k], v, "nancheck." + k)


def case_main(tmp, mode):
    env = {} if mode == "all" else {"TRSHIM_NANCHECK": mode}
    traces, p = run_job(tmp, "main", env)
    for r, t in traces.items():
        names = threads_of(p.stdout, r)
        if mode == "off":
            policy(t, "off", engine=None)
            check("checks" not in t and "check_fields" not in t, "rank %d: checks with TRSHIM_NANCHECK=off" % r)
            check("trshim-nan" not in names, "rank %d: the NaN-check thread ran with checks off: %s" % (r, names))
        else:
            policy(t, mode, engine="host", max_bytes=64 << 20, pool_bytes=256 << 20, dropped=0,
                   engine_setting="auto")
            check(t["nancheck"]["gpu_unused"], "rank %d: no reason why the GPU engine was not used" % r)
            check("trshim-nan" in names, "rank %d: no trshim-nan thread: %s" % (r, names))
    if mode != "off":
        verify(traces, main_model(), mode, mode)


def case_clean(tmp):
    traces, _ = run_job(tmp, "clean", {})
    per = []
    for dt in ("float32", "float16", "bfloat16", "float64", "float8e4m3", "float8e5m2"):
        n = 5000
        per += [("AllReduce", n, dt, n, n, None), ("AllReduce", n, dt, n, n, None),
                ("ReduceScatter", n, dt, n * W, n, None), ("Reduce", n, dt, n, n, "root"),
                ("AllReduce", 17, dt, 17, 17, None), ("ReduceScatter", 3, dt, 3 * W, 3, None)]
    model = [(op, c, dt, ei, eo, (lambda r: (CLEAN, CLEAN if r == W - 1 else None)) if k == "root"
              else (lambda r: (CLEAN, CLEAN))) for op, c, dt, ei, eo, k in per]
    verify(traces, model, "all", "clean")
    for r, t in traces.items():
        check(all(c[2] == "clean" for c in t["checks"]), "rank %d: a check that is not clean" % r)


def case_big(tmp, env, first_call, second_call, **pol):
    traces, _ = run_job(tmp, "big", env)
    for r, t in traces.items():
        policy(t, "all", **pol)
        ck = checks_by_call(t, r)
        cs = colls(t)
        eq([(c["op"], c["count"]) for _, c in cs], [("AllReduce", 1 << 20), ("AllReduce", 1000)], "calls")
        for (pos, c), (want_in, want_out, checked) in zip(cs, [first_call(r), second_call(r)]):
            w = "rank %d call %d" % (r, pos)
            expect(ck.get(pos, {}).get("input"), want_in, w + " input", c["count"], checked)
            expect(ck.get(pos, {}).get("output"), want_out, w + " output", c["count"], checked)
    return traces


def case_cap(tmp):
    q = (1 << 20) // 4     # elements in the first MiB
    case_big(tmp, {"TRSHIM_NANCHECK_MAX_MB": "1"},
             lambda r: (NF(1, 0, 100, "nan") if r == 0 else CLEAN, NF(1, 0, 100, "nan"), q),
             lambda r: (CLEAN, CLEAN, None), max_bytes=1 << 20, pool_bytes=4 << 20)


def case_pool(tmp):
    case_big(tmp, {"TRSHIM_NANCHECK_POOL_MB": "1"},
             lambda r: (NC("pool_exhausted"), NC("pool_exhausted"), None),
             lambda r: (CLEAN, CLEAN, None), pool_bytes=1 << 20, max_bytes=64 << 20)


def case_gpu_forced(tmp):
    # the simulator has no driver API for kernels (or the shim has no kernel: -Dnangpu=disabled)
    nc = NC("gpu_unavailable: ")
    traces = case_big(tmp, {"TRSHIM_NANCHECK_ENGINE": "gpu"}, lambda r: (nc, nc, None),
                      lambda r: (nc, nc, None), engine_setting="gpu", engine=None)
    why = ("no CUDA driver API", "the shim was built without nvcc")
    for r, t in traces.items():
        check(t["nancheck"]["gpu_unused"].startswith(why), "rank %d gpu_unused %r" % (r, t["nancheck"]["gpu_unused"]))
        for row in t["checks"]:
            check(row[10][len("gpu_unavailable: "):].startswith(why), "rank %d reason %r" % (r, row[10]))


def case_settings(tmp):
    traces, p = run_job(tmp, "big", {"TRSHIM_NANCHECK": "maybe", "TRSHIM_NANCHECK_MAX_MB": "0",
                                     "TRSHIM_NANCHECK_ENGINE": "fpga", "TRSHIM_NANCHECK_POOL_MB": "x"})
    for v in ("TRSHIM_NANCHECK=maybe", "TRSHIM_NANCHECK_MAX_MB=0", "TRSHIM_NANCHECK_ENGINE=fpga",
              "TRSHIM_NANCHECK_POOL_MB=x"):
        check("trshim: ignoring " + v in p.stderr, "no warning about " + v)
    for r, t in traces.items():
        policy(t, "all", engine_setting="auto", max_bytes=64 << 20, pool_bytes=256 << 20)
        check(any(c[2] == "nonfinite" for c in t["checks"]), "rank %d: nothing found" % r)


def case_initall(tmp):
    """one process, four devices: one trace per device"""
    traces, _ = run_job(tmp, None, {}, prog="NAN_INITALL", nranks=1)
    model = [("AllReduce", 1000, "float32", 1000, 1000,
              lambda r: (NF(1, 0, 5, "nan") if r == 2 else CLEAN, NF(1, 0, 5, "nan")))] * 2
    verify(traces, model, "all", "initall")


def main():
    case = sys.argv[1] if len(sys.argv) > 1 else "all"
    tmp = tempfile.mkdtemp(prefix="trshim-nan-")
    try:
        if case in ("all", "output", "off"):
            case_main(tmp, case)
        elif case == "clean":
            case_clean(tmp)
        elif case == "cap":
            case_cap(tmp)
        elif case == "pool":
            case_pool(tmp)
        elif case == "gpu-forced":
            case_gpu_forced(tmp)
        elif case == "settings":
            case_settings(tmp)
        elif case == "initall":
            case_initall(tmp)
        else:
            raise Failure("unknown case %s" % case)
    except Failure as e:
        print("FAIL %s: %s" % (case, e))
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok %s" % case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
