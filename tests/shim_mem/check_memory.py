#!/usr/bin/env python3
"""Checks the "memory" section of trshim traces (docs/trace-format.md) to the
byte: runs app_memory (linked with libtrsim.so) under LD_PRELOAD=libtrshim.so
and reads the trace files it leaves in TRSHIM_DIR.

    check_memory.py MODE LIBTRSHIM APP_MEMORY TRSIM_LAUNCH

MODE: sequence | oom | ranks (see app_memory.c), or ptsz with APP_PTSZ in
place of APP_MEMORY (see app_ptsz.c). SHIM_MEM_STACKS=0 skips the
checks of the recorded stacks' innermost symbols.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from trace import load_trace, shim_versions  # noqa: E402  (calls and checks of either version, unpacked)

MiB = 1024 * 1024
CHECK_STACKS = os.environ.get("SHIM_MEM_STACKS", "1") != "0"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def base_env(trace_dir, **sim):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRSHIM_", "TRSIM_", "LD_PRELOAD"))}
    env["TRSHIM_DIR"] = trace_dir
    env.update({k: str(v) for k, v in sim.items()})
    return env


def run(cmd, env, expect_rc=0):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=150)
    if p.returncode != expect_rc:
        print(p.stdout, p.stderr, sep="\n", file=sys.stderr)
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}")
    return p


def traces(trace_dir):
    out = []
    for path in sorted(glob.glob(os.path.join(trace_dir, "*.json"))):
        try:
            t = load_trace(path)
        except ValueError as e:
            check(False, f"{path}: {e}")
            continue
        check(t.get("format") == "trshim-trace" and t.get("version") in shim_versions(),
              f"{path}: format {t.get('format')!r} version {t.get('version')!r} (the shim writes {shim_versions()})")
        out.append(t)
    return out


def devices(t):
    return {d["device"]: d for d in t["memory"]["devices"]}


def expect_counts(where, got, live, peak, allocs, frees):
    want = {"live_bytes": live, "peak_bytes": peak, "allocs": allocs, "frees": frees}
    have = {k: got.get(k) for k in want}
    check(have == want, f"{where}: {have}, expected {want}")


def innermost(t, stack):
    if not isinstance(stack, int) or stack < 0 or stack >= len(t["stacks"]):
        return f"<no stack {stack}>"
    frames = t["stacks"][stack]["frames"]
    return frames[0]["symbol"] if frames else "<empty stack>"


def expect_stack(t, where, stack, symbol):
    if CHECK_STACKS:
        got = innermost(t, stack)
        check(got == symbol, f"{where}: innermost frame {got!r}, expected {symbol!r}")


def check_entry_shapes(t):
    m = t["memory"]
    check(set(m) >= {"devices", "pinned", "failures", "failures_dropped"}, f"memory keys {sorted(m)}")
    for d in m["devices"]:
        check(set(d) == {"device", "live_bytes", "peak_bytes", "allocs", "frees", "peak_ns",
                         "peak_stack", "peak_pystack", "peak_after"}, f"device keys {sorted(d)}")
        check(d["peak_pystack"] == -1, "a C program's peak has no Python stack")
        check(d["peak_bytes"] >= d["live_bytes"], f"device {d['device']}: peak >= live")
        check(isinstance(d["peak_ns"], int) and d["peak_ns"] > 0, "peak_ns")
    for f in m["failures"]:
        check(set(f) == {"api", "device", "bytes", "live_bytes", "free_bytes", "total_bytes",
                         "error", "error_code", "t_ns", "stack", "pystack"}, f"failure keys {sorted(f)}")
        check(f["pystack"] == -1, "a C program's failure has no Python stack")


def mode_sequence(shim, app, launch, tmp):
    run([app, "sequence"], base_env(tmp, TRSIM_DEVICE_COUNT=2, TRSIM_DEVICE_MEM="1GiB",
                                    LD_PRELOAD=shim))
    ts = traces(tmp)
    check(len(ts) == 1, f"{len(ts)} trace files, expected 1")
    t = ts[0]
    check_entry_shapes(t)
    m = t["memory"]
    d = devices(t)
    check(sorted(d) == [0, 1], f"devices {sorted(d)}")
    # d0: p2 3000 + managed 777 + pitch 5120 + pool 2048 + ncclMemAlloc 4096 +
    # async 100 live; peak when the 2 MiB cuMemCreate came on top of them
    expect_counts("device 0", d.get(0, {}), 15141, 15141 + 2 * MiB, 10, 4)
    expect_counts("device 1", d.get(1, {}), MiB, 3 * MiB, 2, 1)
    expect_counts("pinned", m["pinned"], 456, 579, 2, 1)
    check(m["failures"] == [] and m["failures_dropped"] == 0, "no failures")
    for dev in (0, 1):
        if dev in d:
            check(d[dev]["peak_after"] is None, f"device {dev}: no collective before the peak")
            expect_stack(t, f"device {dev} peak", d[dev]["peak_stack"], "reach_peak_vmm")
    check(d.get(1, {}).get("peak_ns", 0) < d.get(0, {}).get("peak_ns", 0), "d1's peak came first")


def mode_oom(shim, app, launch, tmp):
    sim = dict(TRSIM_DEVICE_COUNT=1, TRSIM_DEVICE_MEM="64MiB")
    plain = run([app, "oom"], base_env(tmp, **sim))
    check(not glob.glob(os.path.join(tmp, "*")), "no trace without the shim")
    shimmed = run([app, "oom"], base_env(tmp, LD_PRELOAD=shim, **sim))
    check(plain.stdout == shimmed.stdout,
          f"the application sees something else under the shim:\n{plain.stdout}---\n{shimmed.stdout}")
    check("cudaMalloc -> 2 (cudaErrorMemoryAllocation), pointer untouched" in plain.stdout,
          f"simulator output: {plain.stdout}")
    ts = traces(tmp)
    check(len(ts) == 1, f"{len(ts)} trace files, expected 1")
    t = ts[0]
    check_entry_shapes(t)
    m = t["memory"]
    fs = m["failures"]
    check(len(fs) == 3 and m["failures_dropped"] == 0, f"{len(fs)} failures, expected 3")
    if len(fs) != 3:
        return
    common = {"device": 0, "live_bytes": 40 * MiB, "free_bytes": 24 * MiB,
              "total_bytes": 64 * MiB, "error": "cudaErrorMemoryAllocation", "error_code": 2}
    for f, api, size in ((fs[0], "cudaMalloc", 30 * MiB), (fs[1], "cudaMallocAsync", 30 * MiB),
                         (fs[2], "cudaMalloc", 64 * MiB)):
        want = dict(common, api=api, bytes=size)
        have = {k: f.get(k) for k in want}
        check(have == want, f"failure {have}, expected {want}")
    check(fs[0]["t_ns"] <= fs[1]["t_ns"] <= fs[2]["t_ns"], "failures in order")
    expect_stack(t, "cudaMalloc failure", fs[0]["stack"], "oom_here")
    expect_stack(t, "cudaMallocAsync failure", fs[1]["stack"], "oom_async_here")
    d = devices(t)
    expect_counts("device 0", d.get(0, {}), 0, 41 * MiB, 2, 2)


def mode_ranks(shim, app, launch, tmp):
    env = base_env(tmp, TRSIM_DEVICE_COUNT=4, TRSIM_DEVICE_MEM="1GiB")
    run([launch, "-n", "4", "--timeout", "120", "--", "env", "LD_PRELOAD=" + shim, app, "ranks"],
        env)
    ts = {t["rank"]: t for t in traces(tmp)}
    check(sorted(ts) == [0, 1, 2, 3], f"traces of ranks {sorted(ts)}")
    for r, t in sorted(ts.items()):
        check_entry_shapes(t)
        d = devices(t)
        check(sorted(d) == [r], f"rank {r}: devices {sorted(d)}")
        if r not in d:
            continue
        base, bufs = (r + 1) * MiB, 2 * 4096
        if r == 2:
            live, peak, allocs, seq, fn = base + 16 * MiB, base + bufs + 16 * MiB, 5, 4, "rank2_big"
        else:
            live, peak, allocs, seq, fn = base, base + bufs + 2 * (r + 1) * MiB, 4, 3, "rank_peak"
        expect_counts(f"rank {r}", d[r], live, peak, allocs, 3)
        comm_ids = [c["id"] for c in t["comms"]]
        check(len(comm_ids) == 1, f"rank {r}: comms {comm_ids}")
        check(d[r]["peak_after"] == {"comm": comm_ids[0] if comm_ids else None, "seq": seq},
              f"rank {r}: peak_after {d[r]['peak_after']}, expected comm {comm_ids}, seq {seq}")
        expect_stack(t, f"rank {r} peak", d[r]["peak_stack"], fn)
        expect_counts(f"rank {r} pinned", t["memory"]["pinned"], 0, 0, 0, 0)
        check(t["memory"]["failures"] == [], f"rank {r}: no failures")
    peaks = [devices(ts[r])[r]["peak_bytes"] for r in sorted(ts) if r in devices(ts[r])]
    check(len(peaks) == 4 and max(peaks) == peaks[2], f"rank 2 has the highest peak: {peaks}")


def mode_ptsz(shim, app, launch, tmp):
    sim = dict(TRSIM_DEVICE_COUNT=2, TRSIM_DEVICE_MEM="1GiB")
    names = ("cudaMallocAsync_ptsz", "cudaMallocFromPoolAsync_ptsz", "cudaFreeAsync_ptsz")
    plain = run([app], base_env(tmp, **sim))
    shimmed = run([app], base_env(tmp, LD_PRELOAD=shim, **sim))
    for n in names:
        check(f"{n} from libtrsim.so" in plain.stdout, f"without the shim: {n}: {plain.stdout}")
        check(f"{n} from {os.path.basename(shim)}" in shimmed.stdout,
              f"the shim does not define {n}: {shimmed.stdout}")
    rest = lambda out: [l for l in out.splitlines() if " from " not in l]
    check(rest(plain.stdout) == rest(shimmed.stdout),
          f"the application sees something else under the shim:\n{plain.stdout}---\n{shimmed.stdout}")
    check("oom -> cudaErrorMemoryAllocation, pointer untouched" in shimmed.stdout,
          f"output: {shimmed.stdout}")
    ts = traces(tmp)
    check(len(ts) == 1, f"{len(ts)} trace files, expected 1")
    t = ts[0]
    check_entry_shapes(t)
    m = t["memory"]
    d = devices(t)
    check(sorted(d) == [0, 1], f"devices {sorted(d)}")
    # each allocation counted once, on the pool's device, under the plain name
    expect_counts("device 0", d.get(0, {}), 6144, 15048, 5, 3)
    expect_counts("device 1", d.get(1, {}), 500, 500, 1, 0)
    expect_counts("pinned", m["pinned"], 0, 0, 0, 0)
    if 0 in d:
        expect_stack(t, "device 0 peak", d[0]["peak_stack"], "ptsz_peak")
    fs = m["failures"]
    check(len(fs) == 1 and m["failures_dropped"] == 0, f"{len(fs)} failures, expected 1")
    if fs:
        want = {"api": "cudaMallocAsync", "device": 1, "bytes": 2 << 30, "live_bytes": 500,
                "error": "cudaErrorMemoryAllocation", "error_code": 2}
        have = {k: fs[0].get(k) for k in want}
        check(have == want, f"failure {have}, expected {want}")
        expect_stack(t, "cudaMallocAsync_ptsz failure", fs[0]["stack"], "ptsz_oom_here")


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    mode, shim, app, launch = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="shim_mem.")
    try:
        {"sequence": mode_sequence, "oom": mode_oom, "ranks": mode_ranks,
         "ptsz": mode_ptsz}[mode](shim, app, launch, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        raise SystemExit(f"{mode}: {len(failures)} check(s) failed")
    print(f"{mode}: ok")


if __name__ == "__main__":
    main()
