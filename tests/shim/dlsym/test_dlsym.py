#!/usr/bin/env python3
"""Lookups that bypass the symbol table, under libtrshim.so (issue 7 item 6):
test_dlsym.py CASE. Paths come from the environment meson sets.

Every program runs three ways: without the shim, with the shim and TRSHIM=0
(pure forwarding: every lookup returns exactly what it returns without the
shim, except that the global scope holds the preloaded shim's functions, as
it does for direct calls), and with the shim. The programs print each pointer they got as
"<module> <symbol>"; the checks are exact: which lookups give the shim's
wrapper, that everything else is what the real lookup gives, and the traces
(calls, sequence numbers, sizes, memory to the byte, call sites).
Stdlib only."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from checks import Failure, check, eq, path_of, run_case, shim_lines  # noqa: E402
from trace import load_trace, shim_versions  # noqa: E402  (calls and checks of either version, unpacked)

SHIM = "libtrshim.so"
SIM = "libtrsim.so"
SCRUB = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_.*|PMI_.*|PMIX_.*|SLURM_.*|"
                   r"TRSHIM.*|TRSIM_.*|TORCHELASTIC_RUN_ID|LD_PRELOAD|LD_DEBUG|DLSYM_.*)$")
MiB = 1 << 20


class Run:
    def __init__(self, p, traces):
        self.rc, self.out, self.err, self.traces = p.returncode, p.stdout, p.stderr, traces

    def lines(self, tag):
        """{label: where} of the "<tag> <label> -> <where>" lines."""
        out = {}
        for line in self.out.splitlines():
            if line.startswith(tag + " ") and " -> " in line:
                label, where = line[len(tag) + 1:].rsplit(" -> ", 1)
                check(label not in out, "label %r printed twice" % label)
                out[label] = where
        return out

    def warnings(self):
        return shim_lines(self.err)


class Case:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="trshim-dlsym-")
        self.n = 0

    def run(self, how, cmd, extra=None, launch=0, timeout=60):
        """how: "plain" (no shim), "off" (shim, TRSHIM=0) or "shim"."""
        self.n += 1
        traces = os.path.join(self.tmp, "traces%d" % self.n)
        env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
        env.update({"TRSHIM_DIR": traces, "TRSIM_DEVICE_MEM": "1GiB"})
        env.update(extra or {})
        if how == "off":
            env["TRSHIM"] = "0"
        pre = [] if how == "plain" else ["LD_PRELOAD=" + path_of("TRSHIM_LIB")]
        if launch:
            full = [path_of("TRSIM_LAUNCH"), "-n", str(launch), "--timeout", str(timeout), "--", "env"] + pre + cmd
        else:
            full = ["env"] + pre + cmd
        try:
            p = subprocess.run(full, env=env, capture_output=True, text=True, timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            raise Failure("[%s] %s hung (killed after %d s)" % (how, " ".join(cmd), timeout + 30))
        sys.stdout.write("$ [%s] %s\nrc=%d\n--- stdout\n%s--- stderr\n%s\n" % (how, " ".join(cmd), p.returncode,
                                                                             p.stdout, p.stderr))
        r = Run(p, load_traces(traces))
        eq(r.rc, 0, "[%s] exit status of %s" % (how, os.path.basename(cmd[0])))
        if how != "shim":
            eq(r.traces, [], "[%s] traces" % how)
            eq(r.warnings(), [], "[%s] trshim: lines" % how)
        return r

    def three(self, cmd, extra=None, launch=0):
        return {how: self.run(how, cmd, extra, launch) for how in ("plain", "off", "shim")}

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def load_traces(d):
    if not os.path.isdir(d):
        return []
    out = []
    for n in sorted(os.listdir(d)):
        if n.endswith(".json"):
            t = load_trace(os.path.join(d, n), Failure)
            eq(t["format"], "trshim-trace", "%s format" % n)
            check(t["version"] in shim_versions(), "%s: version %r, expected one of %s" % (n, t["version"],
                                                                                           shim_versions()))
            t["calls"] = [dict(zip(t["call_fields"], c)) for c in t["calls"]]
            out.append(t)
    return out


def site(t, stack):
    if stack is None or stack < 0 or stack >= len(t["stacks"]):
        return None
    frames = t["stacks"][stack]["frames"]
    return frames[0]["symbol"] if frames else None


def check_memory(t, what, devices, pinned, peak_site):
    """devices: {device: (live, peak, allocs, frees)}; pinned likewise."""
    m = t["memory"]
    got = {d["device"]: (d["live_bytes"], d["peak_bytes"], d["allocs"], d["frees"]) for d in m["devices"]}
    eq(got, devices, what + " memory per device")
    p = m["pinned"]
    eq((p["live_bytes"], p["peak_bytes"], p["allocs"], p["frees"]), pinned, what + " pinned memory")
    eq((m["failures"], m["failures_dropped"]), ([], 0), what + " allocation failures")
    for d in m["devices"]:
        eq(site(t, d["peak_stack"]), peak_site, what + " call site of device %d's peak" % d["device"])


def wrapped_names():
    """The functions the shim wraps: the map's global list."""
    with open(path_of("TRSHIM_MAP")) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    glob_part = text.split("global:")[1].split("local:")[0]
    return {s.strip() for s in glob_part.replace("\n", " ").split(";") if s.strip()}


def same_except(a, b, labels, what):
    """Two {label: where} maps equal except at labels."""
    eq(sorted(a), sorted(b), what + ": lookups")
    eq({k: v for k, v in a.items() if k not in labels}, {k: v for k, v in b.items() if k not in labels}, what)


def real_where(labels_names):
    """What the real lookups give: the simulator's own definition."""
    return {label: "%s %s" % (SIM, name) for label, name in labels_names.items()}


def check_second_copy(warnings, name, lib):
    """The one "trshim:" line: name found in lib (however the loader spelt its path) is not what the
    shim's wrapper calls."""
    m = [re.match(r"^trshim: lookups: (\S+) found in (\S+) is not the function the shim forwards to; calls "
                  r"through that pointer are not recorded$", w) for w in warnings]
    check(len(m) == 1 and m[0], "trshim: lines %r: expected one about %s in %s" % (warnings, name, lib))
    eq((m[0].group(1), os.path.realpath(m[0].group(2))), (name, os.path.realpath(lib)), "trshim: line")


def shim_where(labels_names):
    """The shim's wrapper."""
    return {label: "%s %s" % (SHIM, name) for label, name in labels_names.items()}


# ---- cases ------------------------------------------------------------------------------

JOB_FUNCS = ["cudaGetDeviceCount", "cudaSetDevice", "cudaStreamCreate", "cudaStreamSynchronize",
             "cudaStreamDestroy", "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaMallocAsync",
             "cudaFreeAsync", "cudaGetErrorName", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy",
             "ncclAllReduce", "ncclBroadcast", "ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv",
             "ncclGroupStart", "ncclGroupEnd", "ncclMemAlloc", "ncclMemFree", "ncclGetErrorString"]


def job_calls(r):
    """(op, seq, count, dtype, redop, root, peer, group, depth, rc, call site) of rank r of 2."""
    peer = 1 - r
    c = "dj_collectives"
    calls = [("AllReduce", 1, 100, "float32", "sum", None, None, 0, 0, 0, c),
             ("AllReduce", 2, 200, "float32", "sum", None, None, 0, 0, 0, c),
             ("AllReduce", 3, 300, "float32", "sum", None, None, 0, 0, 0, c),
             ("Broadcast", 4, 50, "int32", None, 1, None, 0, 0, 0, c),
             ("AllGather", 5, 8, "float32", None, None, None, 0, 0, 0, c),
             ("ReduceScatter", 6, 4, "float32", "sum", None, None, 0, 0, 0, c)]
    p = "dj_p2p"
    calls += [("GroupStart", 0, 0, None, None, None, None, 1, 1, 0, p),
              ("Send", 1, 16, "float32", None, None, peer, 1, 1, 0, p),
              ("Recv", 1, 16, "float32", None, None, peer, 1, 1, 0, p),
              ("GroupEnd", 0, 0, None, None, None, None, 1, 1, 0, p)]
    return calls


def check_job_traces(traces, what):
    eq(sorted(t["rank"] for t in traces), [0, 1], what + " ranks")
    for t in traces:
        r = t["rank"]
        w = "%s rank %d" % (what, r)
        eq([(k["kind"], k["size"], k["rank"], k["init"]["rc"], k["end"]["kind"], k["end"]["rc"]) for k in t["comms"]],
           [("InitRank", 2, r, 0, "Destroy", 0)], w + " communicators")
        eq(site(t, t["comms"][0]["init"]["stack"]), "dj_init", w + " call site of ncclCommInitRank")
        got = [(c["op"], c["seq"], c["count"], c["dtype"], c["redop"], c["root"], c["peer"], c["group"], c["depth"],
                c["rc"], site(t, c["stack"])) for c in t["calls"]]
        eq(got, job_calls(r), w + " calls")
        eq({c["comm"] for c in t["calls"] if c["op"] not in ("GroupStart", "GroupEnd")}, {0}, w + " comm of calls")
        # 1 MiB + 4096 + 8192 (ncclMemAlloc) + 3000 (cudaMallocAsync), all freed; 512 pinned
        check_memory(t, w, {r: (0, (1 << 20) + 4096 + 8192 + 3000, 4, 4)}, (0, 512, 1, 1), "dj_setup")
    eq(traces[0]["comms"][0]["id"], traces[1]["comms"][0]["id"], what + ": one communicator id")


def case_job(c):
    """A 2-rank job calling NCCL and the runtime only through dlopen(RTLD_LOCAL) + dlsym records exactly
    what the same job records when linked."""
    lib = path_of("TRSIM_LIB")
    wrapped = wrapped_names()
    dl = c.three([path_of("DLSYM_JOB_DL"), lib], launch=2)
    linked = c.run("shim", [path_of("DLSYM_JOB_LINKED")], launch=2)
    real = real_where({n: n for n in JOB_FUNCS})
    want = {n: ("%s %s" % (SHIM, n) if n in wrapped else real[n]) for n in JOB_FUNCS}
    eq(sorted(n for n in JOB_FUNCS if n in wrapped),
       sorted(["cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaMallocAsync", "cudaFreeAsync",
               "cudaStreamSynchronize", "ncclCommInitRank", "ncclCommDestroy", "ncclAllReduce", "ncclBroadcast", "ncclAllGather",
               "ncclReduceScatter", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd", "ncclMemAlloc",
               "ncclMemFree"]), "wrapped functions of the job")
    eq(dl["plain"].lines("sym"), real, "dlsym without the shim")
    eq(dl["off"].lines("sym"), real, "dlsym with TRSHIM=0")
    eq(dl["shim"].lines("sym"), want, "dlsym under the shim")
    eq(linked.lines("sym"), want, "the linked job's pointers under the shim")
    eq(sorted(dl["off"].out.splitlines()), sorted(dl["plain"].out.splitlines()), "output with TRSHIM=0")
    for r in (dl["shim"], linked):
        eq(r.warnings(), [], "trshim: lines")
        eq(sorted(l for l in r.out.splitlines() if not l.startswith("sym ")), ["rank 0 done", "rank 1 done"], "output")
    check_job_traces(dl["shim"].traces, "dlsym'd job")
    check_job_traces(linked.traces, "linked job")


ENTRY_WRAPPED = {
    "cudaGetDriverEntryPoint(cuMemCreate) (rc 0, status 0)": "cuMemCreate",
    "cuGetProcAddress_v2(cuMemAlloc, 12000) (rc 0, status 0)": "cuMemAlloc_v2",
    "cudaGetDriverEntryPointByVersion(cuMemRelease, 12000) (rc 0, status 0)": "cuMemRelease",
    "cuGetProcAddress(cuMemFree, 12000) (rc 0, status 0)": "cuMemFree_v2",
    "cudaGetDriverEntryPoint_ptsz(cuMemAlloc) (rc 0, status 0)": "cuMemAlloc_v2",
    "cudaGetDriverEntryPointByVersion_ptsz(cuMemFree, 12000) (rc 0, status 0)": "cuMemFree_v2",
    "cuGetProcAddress_v2(cuGetProcAddress, 12000) (rc 0, status 0)": "cuGetProcAddress_v2",
    "looked-up cuGetProcAddress(cuMemCreate, ptds) (rc 0, status 0)": "cuMemCreate",
    "dlsym(libtrsim.so, cudaGetDriverEntryPoint)": "cudaGetDriverEntryPoint",
    "dlsym'd cudaGetDriverEntryPoint(cuMemRelease) (rc 0, status 0)": "cuMemRelease",
}
ENTRY_REAL = {
    "cuGetProcAddress_v2(cuMemGetInfo, 12000) (rc 0, status 0)": "cuMemGetInfo_v2",
    "cuGetProcAddress_v2(cuMemMap, 12000) (rc 0, status 0)": "cuMemMap",
    "cuGetProcAddress_v2(cuDeviceGet, 12000) (rc 0, status 0)": "cuDeviceGet",
    "cuGetProcAddress_v2(cuMemAddressReserve, 12000) (rc 0, status 0)": "cuMemAddressReserve",
}
ENTRY_FAILED = {
    "cuGetProcAddress_v2(cuNoSuchFunction) (rc 0, status 1)": "NULL",
    "cudaGetDriverEntryPoint(cuNoSuchFunction) (rc 0, status 1)": "NULL",
    "cudaGetDriverEntryPoint(cuMemCreate, bad flags) (rc 1, status -1)": "dlsym_entry ?",   # untouched
}


def case_entry(c):
    """Driver memory functions from cudaGetDriverEntryPoint/cuGetProcAddress are the shim's wrappers of the
    very version returned, and their allocations are counted to the byte."""
    runs = c.three([path_of("DLSYM_ENTRY")])
    real = dict(real_where(ENTRY_WRAPPED), **real_where(ENTRY_REAL), **ENTRY_FAILED)
    eq(runs["plain"].lines("entry"), real, "lookups without the shim")
    eq(runs["off"].lines("entry"), real, "lookups with TRSHIM=0")
    want = dict(shim_where(ENTRY_WRAPPED), **real_where(ENTRY_REAL), **ENTRY_FAILED)
    eq(runs["shim"].lines("entry"), want, "lookups under the shim")
    rest = {how: [l for l in r.out.splitlines() if not l.startswith("entry ")] for how, r in runs.items()}
    eq(rest["off"], rest["plain"], "return codes with TRSHIM=0")
    eq(rest["shim"], rest["plain"], "return codes under the shim")
    check("all done" in rest["plain"] and "cudaGetLastError after bad flags: 1" in rest["plain"],
          "the program ran to its end")
    eq(runs["shim"].warnings(), [], "trshim: lines")
    (t,) = runs["shim"].traces
    eq(t["calls"], [], "calls")
    # h1 2 MiB + h2 4 MiB + d1 64 KiB at the peak; then d2 3000 and h3 2 MiB below it
    check_memory(t, "entry", {0: (0, 6 * MiB + 65536, 5, 5)}, (0, 0, 0, 0), "entry_peak")


def case_fakedrv(c):
    """A driver whose cuGetProcAddress returns functions that are not its exported ones: the versions the
    shim knows decide (cuMemAlloc at 12000 is cuMemAlloc_v2; at 3000 the legacy one; past the shim's cuda.h,
    unknown), and the wrapper calls the driver's exported function of that version."""
    runs = c.three([path_of("DLSYM_FAKEDRV")])
    real = {"cuMemAlloc@12000 (rc 0, status 0)": "libcuda.so.1 (internal)",
            "cuMemFree@12000 (rc 0, status 0)": "libcuda.so.1 (internal)",
            "cuMemAlloc@3000 (rc 0, status 0)": "libcuda.so.1 (internal)"}
    newer = [k for k in runs["plain"].lines("fakedrv") if k not in real]
    eq(len(newer), 1, "lookups past the shim's cuda.h")
    real[newer[0]] = "libcuda.so.1 (internal)"
    eq(runs["plain"].lines("fakedrv"), real, "lookups without the shim")
    eq(runs["off"].out, runs["plain"].out, "output with TRSHIM=0")
    eq(runs["shim"].lines("fakedrv"), dict(real, **{"cuMemAlloc@12000 (rc 0, status 0)": "libtrshim.so cuMemAlloc_v2",
                                                     "cuMemFree@12000 (rc 0, status 0)": "libtrshim.so cuMemFree_v2"}),
       "lookups under the shim")
    rest = {how: [l for l in r.out.splitlines() if not l.startswith("fakedrv ")] for how, r in runs.items()}
    eq(rest["plain"], ["alloc rc 0", "free rc 0", "driver's internal functions called 2 time(s)"], "calls without the shim")
    eq(rest["shim"], ["alloc rc 0", "free rc 0", "driver's internal functions called 0 time(s)"], "calls under the shim")
    eq(runs["shim"].warnings(), [], "trshim: lines")
    (t,) = runs["shim"].traces
    check_memory(t, "fakedrv", {0: (0, 65536, 1, 1)}, (0, 0, 0, 0), "fakedrv_alloc")


LOOKUP_WRAPPED = {
    "dlsym(libtrsim.so, cudaMalloc)": "cudaMalloc",
    "dlsym(libtrsim.so, cudaFree)": "cudaFree",
    "dlsym(libtrsim.so, ncclAllReduce)": "ncclAllReduce",
    "dlsym(libtrsim.so, ncclCommInitRank)": "ncclCommInitRank",
    "dlsym(libtrsim.so, cuMemAlloc_v2)": "cuMemAlloc_v2",
    "dlsym(libtrsim.so, cuMemCreate)": "cuMemCreate",
    "dlsym(libtrsim.so, cudaGetDriverEntryPoint)": "cudaGetDriverEntryPoint",
    "dlsym(libtrsim.so, cuGetProcAddress_v2)": "cuGetProcAddress_v2",
    "dlsym(libtrsim.so, ncclAllReduce) after a failure": "ncclAllReduce",
}
# the global scope: the preloaded shim comes first, even with TRSHIM=0 (nothing new)
LOOKUP_GLOBAL = {
    "dlsym(RTLD_DEFAULT, cudaMalloc)": "cudaMalloc",
    "dlsym(RTLD_NEXT, cudaMalloc)": "cudaMalloc",
    "dlsym(main program, cudaMalloc)": "cudaMalloc",
}
LOOKUP_REAL = {
    "dlsym(libtrsim.so, ncclGetUniqueId)": "libtrsim.so ncclGetUniqueId",
    "dlsym(libtrsim.so, cudaMemcpy)": "libtrsim.so cudaMemcpy",
    "dlsym(libtrsim.so, cuMemGetInfo_v2)": "libtrsim.so cuMemGetInfo_v2",
    "dlsym(libtrsim.so, cudaGetDeviceCount)": "libtrsim.so cudaGetDeviceCount",
    "dlsym(libtrsim.so, cuMemAlloc)": "NULL",
    "dlsym(libtrsim.so, noSuchFunction)": "NULL",
    "dlvsym(libtrsim.so, cudaMalloc, NOVERSION)": "NULL",
    "dlsym(RTLD_DEFAULT, ncclGetUniqueId)": "libtrsim.so ncclGetUniqueId",
    "dlsym(RTLD_NEXT, ncclGetUniqueId)": "libtrsim.so ncclGetUniqueId",
    "dlsym(RTLD_DEFAULT, noSuchFunction)": "NULL",
    # an unrelated library's own "ncclAllReduce"
    "dlsym(libdlsym_other.so, ncclAllReduce)": "libdlsym_other.so ncclAllReduce",
    # a second copy of NCCL: its own functions (the wrappers forward to the first)
    "dlsym(second libnccl.so.2, ncclAllReduce)": "libnccl.so.2 ncclAllReduce",
    "dlsym(second libnccl.so.2, cudaMalloc)": "libnccl.so.2 cudaMalloc",
    "dlsym(second libnccl.so.2, ncclGetVersion)": "libnccl.so.2 ncclGetVersion",
}


def case_lookups(c):
    """dlsym on a library's handle: the wrapper for exactly the wrapped functions of that library; the real
    result for everything else (unwrapped names, an unrelated library, a second NCCL); dlerror() as without
    the shim."""
    nccl2 = path_of("DLSYM_NCCL2")
    runs = c.three([path_of("DLSYM_LOOKUPS"), "lookups", path_of("DLSYM_OTHER"), nccl2])
    eq(runs["plain"].lines("lookup"), dict(real_where(LOOKUP_WRAPPED), **real_where(LOOKUP_GLOBAL), **LOOKUP_REAL),
       "lookups without the shim")
    eq(runs["off"].lines("lookup"), dict(real_where(LOOKUP_WRAPPED), **shim_where(LOOKUP_GLOBAL), **LOOKUP_REAL),
       "lookups with TRSHIM=0")
    eq(runs["shim"].lines("lookup"), dict(shim_where(LOOKUP_WRAPPED), **shim_where(LOOKUP_GLOBAL), **LOOKUP_REAL),
       "lookups under the shim")
    rest = {how: [l for l in r.out.splitlines() if not l.startswith("lookup ")] for how, r in runs.items()}
    eq(rest["off"], rest["plain"], "dlerror(), return codes with TRSHIM=0")
    eq(rest["shim"], rest["plain"], "dlerror(), return codes under the shim")
    for line in ("dlerror after a failure then a successful wrapped lookup: none",
                 "dlerror after lookups in the second libnccl.so.2: none",
                 "libdlsym_other.so's ncclAllReduce() = 42", "lk_alloc: malloc rc 0", "lk_alloc: free rc 0"):
        check(line in rest["plain"], "no line %r" % line)
    check(any(l.startswith("dlerror after dlsym(libtrsim.so, noSuchFunction): ") and
              l.endswith("undefined symbol: noSuchFunction") for l in rest["plain"]), "dlerror of a failed lookup")
    check_second_copy(runs["shim"].warnings(), "ncclAllReduce", nccl2)
    (t,) = runs["shim"].traces
    eq(t["calls"], [], "calls (libdlsym_other.so's ncclAllReduce is not NCCL's)")
    check_memory(t, "lookups", {0: (0, 4096, 1, 1)}, (0, 0, 0, 0), "lk_alloc")


CTOR_WRAPPED = {
    "dlsym(libtrsim.so, cudaMalloc)": "cudaMalloc",
    "dlsym(libtrsim.so, ncclAllReduce)": "ncclAllReduce",
    "dlsym(libtrsim.so, cuMemCreate)": "cuMemCreate",
}
CTOR_GLOBAL = {"dlsym(RTLD_DEFAULT, cudaMalloc)": "cudaMalloc"}
CTOR_REAL = {
    "dlsym(libtrsim.so, ncclGetUniqueId)": "libtrsim.so ncclGetUniqueId",
    "dlsym(RTLD_NEXT, ncclGetVersion)": "libtrsim.so ncclGetVersion",
}


def case_ctor(c):
    """dlsym from a constructor that runs before the shim's, then from 8 threads at once inside it: no
    hang, the same results every time, the wrappers already."""
    runs = c.three([path_of("DLSYM_LOOKUPS"), "ctor"], extra={"DLSYM_CTOR": "1", "LD_DEBUG": "files"})
    for how, r in runs.items():
        check("ctor ran 1, threads 8, mismatches 0" in r.out.splitlines(), "[%s] constructor's lookups" % how)
        inits = [l.split("calling init: ", 1)[1].strip() for l in r.err.splitlines() if "calling init: " in l]
        names = [os.path.basename(p) for p in inits]
        check("libdlsym_ctor.so" in names, "[%s] libdlsym_ctor.so initialised: %s" % (how, names))
        if how != "plain":
            check(names.index("libdlsym_ctor.so") < names.index(SHIM),
                  "[%s] libdlsym_ctor.so's constructor ran before the shim's: %s" % (how, names))
    eq(runs["plain"].lines("ctor"), dict(real_where(CTOR_WRAPPED), **real_where(CTOR_GLOBAL), **CTOR_REAL),
       "lookups without the shim")
    eq(runs["off"].lines("ctor"), dict(real_where(CTOR_WRAPPED), **shim_where(CTOR_GLOBAL), **CTOR_REAL),
       "lookups with TRSHIM=0")
    eq(runs["shim"].lines("ctor"), dict(shim_where(CTOR_WRAPPED), **shim_where(CTOR_GLOBAL), **CTOR_REAL),
       "lookups under the shim")
    eq(runs["shim"].traces, [], "traces (nothing called)")


def case_race(c):
    """The process's first dlsym calls come from 8 threads at once."""
    runs = c.three([path_of("DLSYM_LOOKUPS"), "race"])
    real = {"dlsym(libtrsim.so, cudaMalloc)": "libtrsim.so cudaMalloc",
            "dlsym(libtrsim.so, ncclGetUniqueId)": "libtrsim.so ncclGetUniqueId",
            "dlsym(RTLD_DEFAULT, ncclAllReduce)": "libtrsim.so ncclAllReduce",
            "dlsym(RTLD_NEXT, cudaGetDeviceCount)": "libtrsim.so cudaGetDeviceCount",
            "dlvsym(libtrsim.so, ncclAllReduce, NOVERSION)": "NULL"}
    for how, r in runs.items():
        check("race: 8 threads x 200 rounds: 0 changed results, 0 threads differ from thread 0" in r.out.splitlines(),
              "[%s] the threads' results" % how)
    glob = {"dlsym(RTLD_DEFAULT, ncclAllReduce)": "libtrshim.so ncclAllReduce"}
    eq(runs["plain"].lines("race"), real, "lookups without the shim")
    eq(runs["off"].lines("race"), dict(real, **glob), "lookups with TRSHIM=0")
    eq(runs["shim"].lines("race"), dict(real, **glob, **{"dlsym(libtrsim.so, cudaMalloc)": "libtrshim.so cudaMalloc"}),
       "lookups under the shim")


NEXT_LINES = {
    "interposer dlsym(RTLD_NEXT, cudaGetDeviceCount)": "libtrsim.so cudaGetDeviceCount",
    "interposer dlsym(RTLD_NEXT, ncclGetVersion)": "libtrsim.so ncclGetVersion",
    "interposer dlsym(RTLD_NEXT, cudaMalloc)": "libtrsim.so cudaMalloc",
    "interposer dlsym(RTLD_NEXT, ncclAllReduce)": "libtrsim.so ncclAllReduce",
    "interposer dlsym(RTLD_NEXT, cudaFree)": "libtrsim.so cudaFree",
    "interposer dlsym(RTLD_NEXT, noSuchFunction)": "NULL",
    "interposer dlvsym(RTLD_NEXT, dlsym, GLIBC_*)": "libc.so.6 dlsym",
    "interposer dlsym(RTLD_DEFAULT, cudaGetDeviceCount)": "libdlsym_interpose.so cudaGetDeviceCount",
    # the interposer defines ncclGetVersion: an NCCL library to the shim, whose own lookups stay unwrapped
    "interposer dlsym(libtrsim.so, ncclAllReduce)": "libtrsim.so ncclAllReduce",
    # the shim's cudaMalloc forwards to the interposer's: libtrsim.so's is not what it calls
    "main dlsym(libtrsim.so, cudaMalloc)": "libtrsim.so cudaMalloc",
    "main dlsym(libtrsim.so, ncclAllReduce)": "libtrsim.so ncclAllReduce",
    "main dlsym(RTLD_NEXT, cudaGetDeviceCount)": "libdlsym_interpose.so cudaGetDeviceCount",
    "main dlsym(RTLD_NEXT, cudaMalloc)": "libdlsym_interpose.so cudaMalloc",
    "main dlsym(RTLD_DEFAULT, ncclGetVersion)": "libdlsym_interpose.so ncclGetVersion",
    "dlsym(plugin, plugin_report)": "libdlsym_plugin.so plugin_report",
    "plugin dlsym(RTLD_DEFAULT, dep_only)": "libdlsym_dep.so dep_only",
    "plugin dlsym(RTLD_DEFAULT, cudaGetDeviceCount)": "libdlsym_interpose.so cudaGetDeviceCount",
    "plugin dlsym(RTLD_NEXT, dep_only)": "libdlsym_dep.so dep_only",
    "plugin dlsym(RTLD_NEXT, cudaMalloc)": "NULL",
}


def case_next(c):
    """RTLD_NEXT and RTLD_DEFAULT from the application's own interposer and from a plugin loaded with
    RTLD_LOCAL find what they find without the shim: the next definition after the CALLER."""
    runs = c.three([path_of("DLSYM_NEXT"), path_of("DLSYM_PLUGIN")])
    eq(runs["plain"].lines("next"), NEXT_LINES, "lookups without the shim")
    # after the main program comes the preloaded shim (TRSHIM=0 or not)
    shimmed = dict(NEXT_LINES, **{"main dlsym(RTLD_NEXT, cudaMalloc)": "libtrshim.so cudaMalloc"})
    eq(runs["off"].lines("next"), shimmed, "lookups with TRSHIM=0")
    # and the main program's lookup on the runtime's handle gets the wrapper
    eq(runs["shim"].lines("next"),
       dict(shimmed, **{"main dlsym(libtrsim.so, ncclAllReduce)": "libtrshim.so ncclAllReduce"}),
       "lookups under the shim")
    rest = {how: [l for l in r.out.splitlines() if not l.startswith("next ")] for how, r in runs.items()}
    eq(rest["off"], rest["plain"], "calls with TRSHIM=0")
    eq(rest["plain"], ["plugin dep_only() = 7", "cudaGetDeviceCount rc 0 count 8", "ncclGetVersion rc 0 version 23203",
                       "cudaSetDevice rc 0", "cudaMalloc rc 0, through the interposer 1 time(s)", "cudaFree rc 0"],
       "calls without the shim")
    eq(rest["shim"], rest["plain"], "calls under the shim")
    check_second_copy(runs["shim"].warnings(), "cudaMalloc", path_of("TRSIM_LIB"))
    (t,) = runs["shim"].traces
    check_memory(t, "next", {0: (0, 12345, 1, 1)}, (0, 0, 0, 0), "main")


def case_exports(c):
    """The shim exports the map's list exactly; the lookups are the new entries."""
    out = subprocess.run(["nm", "-D", "--defined-only", path_of("TRSHIM_LIB")], capture_output=True, text=True,
                         check=True).stdout
    exported = {l.split()[-1] for l in out.splitlines() if l.strip()}
    sys.stdout.write("exported: %s\n" % sorted(exported))
    eq(sorted(exported), sorted(wrapped_names()), "exported symbols")
    lookups = {"dlsym", "dlvsym", "cuGetProcAddress", "cuGetProcAddress_v2", "cudaGetDriverEntryPoint",
               "cudaGetDriverEntryPoint_ptsz", "cudaGetDriverEntryPointByVersion",
               "cudaGetDriverEntryPointByVersion_ptsz"}
    eq(sorted(lookups - exported), [], "lookup functions not exported")
    eq(sorted(n for n in exported if not re.match(r"^(cuda[A-Z]|cu[A-Z]|nccl[A-Z])", n)), ["dlsym", "dlvsym"],
       "exports besides the CUDA and NCCL API")


CASES = {"job": case_job, "entry": case_entry, "fakedrv": case_fakedrv, "lookups": case_lookups, "ctor": case_ctor, "race": case_race,
         "next": case_next, "exports": case_exports}


def main():
    return run_case(CASES, Case, sys.argv, "test_dlsym.py")


if __name__ == "__main__":
    sys.exit(main())
