#!/usr/bin/env python3
"""tranalyze reading ring files (tests/analyzer/gen_ring.py): runs one case
and checks its answer exactly.

    check_ring.py TRANALYZE EXE WORKDIR CASE [LAYOUT_PROGRAM]

CASE is a gen_ring.py scenario (its expected.json: exit status, the top
findings' kind, comm, seq, ranks, others, function; per rank dotted fields
of --json's "ranks" entry; the number of traced ranks, each once; notes
naming a file), or:
  same_diagnosis   the hang of rank 0's extra AllReduce #12 read from ring
                   files only, from older JSON traces, from newer JSON
                   traces (watchdog write) and explicit ring paths: the
                   same root cause (kind, comm, seq, ranks, call sites)
  layout           gen_ring.py's struct layouts against the compiler's
                   (LAYOUT_PROGRAM prints them: ring_layout.c), and
                   tests/common/ring.py's header and memory slot against them
  live             a RUNNING ring of a process that still runs here (this
                   one) reads as a snapshot, one whose pid is gone as killed
EXE is the executable the call sites point into (symbolized with libdw: a
ring records no symbol names).
"""
import json
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(tranalyze, args, want_exit=None):
    p = subprocess.run([tranalyze] + args, capture_output=True, text=True, timeout=120)
    if p.returncode not in (0, 1, 2):
        fail("tranalyze %s: status %d\n%s" % (" ".join(args), p.returncode, p.stderr[-3000:]))
    if want_exit is not None and p.returncode != want_exit:
        fail("tranalyze %s: status %d, expected %d\n%s\n%s" % (" ".join(args), p.returncode, want_exit,
                                                              p.stdout[-3000:], p.stderr[-2000:]))
    return p


def gen(exe, scenario, out):
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(HERE, "gen_ring.py"), scenario, out, "--module", exe], check=True)
    with open(os.path.join(out, "expected.json")) as f:
        exp = json.load(f)
    os.remove(os.path.join(out, "expected.json"))
    return exp


def dotted(obj, key):
    for k in key.split("."):
        if not isinstance(obj, dict) or k not in obj:
            return "<absent>"
        obj = obj[k]
    return obj


def check_case(tranalyze, exe, work, case):
    out = os.path.join(work, case)
    exp = gen(exe, case, out)
    p = run(tranalyze, ["--json", out], exp["exit"])
    res = json.loads(p.stdout)
    got, want = res["findings"], exp["findings"]
    if not want and got and exp["exit"] == 0:
        fail("findings where none are expected: %s" % json.dumps(got, indent=1)[:3000])
    if len(got) < len(want):
        fail("%d findings, expected at least %d: %s" % (len(got), len(want), json.dumps(got, indent=1)[:3000]))
    for i, w in enumerate(want):
        g = got[i]
        for key in ("kind", "comm", "seq", "ranks", "others", "subkind", "comm_ranks", "signal", "bytes"):
            if key in w and g.get(key) != w[key]:
                fail("finding %d: %s is %r, expected %r\n%s" % (i, key, g.get(key), w[key], json.dumps(g, indent=1)[:3000]))
        if "function" in w and (g.get("call") or {}).get("function") != w["function"]:
            fail("finding %d: function %r, expected %r" % (i, (g.get("call") or {}).get("function"), w["function"]))
        if "others_function" in w and (g.get("others_call") or {}).get("function") != w["others_function"]:
            fail("finding %d: others' function %r, expected %r" % (i, (g.get("others_call") or {}).get("function"),
                                                                   w["others_function"]))
        for key, side, field in (("site", "call", "site"), ("others_site", "others_call", "site"),
                                 ("python_stack", "call", "python_stack"), ("entry_point", "call", "entry_point"),
                                 ("config", "call", "config")):
            if key in w and (g.get(side) or {}).get(field) != w[key]:
                fail("finding %d: %s %s is %r, expected %r" % (i, side, field, (g.get(side) or {}).get(field), w[key]))
        # issue 16: replayed calls ("graph", "replay", "capture_site", "launch_site"; dotted keys), messages
        for key, side in (("call_has", "call"), ("others_has", "others_call")):
            for k, v in w.get(key, {}).items():
                have = dotted(g.get(side) or {}, k)
                if have != v:
                    fail("finding %d: %s %s is %r, expected %r" % (i, side, k, have, v))
        for sub in w.get("message_contains", []):
            if sub not in (g.get("message") or ""):
                fail("finding %d: %r not in the message: %s" % (i, sub, g.get("message")))
        if "stuck" in w:
            st = g.get("stuck_at") or {}
            got_m = {str(m["rank"]): m["state"] for m in st.get("members", []) if m["rank"] is not None}
            want_m = {r: m["state"] for r, m in w["stuck"]["members"].items()}
            if st.get("seq") != w["stuck"]["seq"] or got_m != want_m:
                fail("finding %d: stuck_at %r, expected %r" % (i, st, w["stuck"]))
    traced = [r for r in res["ranks"] if r["ended"]["state"] != "no_trace"]
    nums = [r["rank"] for r in traced]
    if len(nums) != len(set(nums)):
        fail("a rank appears twice: %s" % nums)
    if "nranks" in exp and (len(traced) != exp["nranks"] or res["job"]["traces"] != exp["nranks"]):
        fail("%d traced ranks (job.traces %d), expected %d" % (len(traced), res["job"]["traces"], exp["nranks"]))
    byrank = {r["rank"]: r for r in traced}
    for rk, fields in exp.get("ranks", {}).items():
        r = byrank.get(int(rk))
        if r is None:
            fail("no rank %s in the output" % rk)
        for key, v in fields.items():
            have = dotted(r, key)
            if key == "file" and isinstance(have, str):
                have = os.path.basename(have)
            if have != v:
                fail("rank %s: %s is %r, expected %r\n%s" % (rk, key, have, v, json.dumps(r, indent=1)))
    for name, sub in exp.get("notes", []):
        if not any(n.get("file") and os.path.basename(n["file"]) == name and sub in n["problem"] for n in res["inputs"]):
            fail("no note about %s containing %r: %s" % (name, sub, json.dumps(res["inputs"], indent=1)[:3000]))
    if "job" in exp and res["job"]["id"] != exp["job"]:
        fail("analysed job %r, expected %r" % (res["job"]["id"], exp["job"]))
    got_w = [{k: x.get(k) for k in ("kind", "version", "library", "functions", "ranks")} for x in res.get("warnings", [])]
    if got_w != exp.get("warnings", []):
        fail("warnings %r, expected %r" % (got_w, exp.get("warnings", [])))
    if "other_job" in exp and exp["other_job"] not in res["job"]["other_jobs"]:
        fail("other job %r not listed: %s" % (exp["other_job"], res["job"]["other_jobs"]))
    # text and markdown: same status; a killed rank says so
    for mode in ([], ["--markdown"]):
        t = run(tranalyze, mode + [out], exp["exit"])
        for sub in exp.get("text_contains", []):
            # (Markdown writes a side's call and site as code: `AllReduce(...)` at `train.py:198 in f`)
            if sub not in t.stdout and not (mode and sub in t.stdout.replace("`", "")):
                fail("%s output does not say %r:\n%s" % (mode or "text", sub, t.stdout[:3000]))
        if any(r["ended"]["state"] == "killed" for r in traced) and "killed without a final write" not in t.stdout:
            fail("%s output does not say a rank was killed:\n%s" % (mode or "text", t.stdout[:3000]))
    print("ok: %s" % case)


def key_of(res):
    f = res["findings"][0]
    return (f["kind"], f["subkind"], f["comm"], f["seq"], f["ranks"], f["others"], (f.get("call") or {}).get("site"),
            (f.get("others_call") or {}).get("site"))


def same_diagnosis(tranalyze, exe, work):
    keys = {}
    for sc in ("ring_hang", "json_hang", "json_new_hang"):
        out = os.path.join(work, "same", sc)
        gen(exe, sc, out)
        res = json.loads(run(tranalyze, ["--json", out], 1).stdout)
        keys[sc] = key_of(res)
        if sc == "ring_hang":
            rings = sorted(os.path.join(out, f) for f in os.listdir(out))
            res2 = json.loads(run(tranalyze, ["--json"] + rings, 1).stdout)
            keys["ring paths"] = key_of(res2)
    want = keys["json_hang"]
    if want[:6] != ("divergence", "extra_call", want[2], 12, [0], [1, 2, 3]) or not want[6].startswith("log_metrics ("):
        fail("the JSON version's answer is not rank 0's AllReduce #12 at log_metrics: %r" % (want,))
    for k, v in keys.items():
        if v != want:
            fail("%s: %r, the JSON traces: %r" % (k, v, want))
    print("ok: the same root cause from ring files, older and newer JSON traces: %r" % (want,))


def live(tranalyze, work):
    """A ring still RUNNING on this host whose process runs (this one) is a
    live look, not a kill; one whose pid is gone was killed: it died (kind
    dead), the live one is no finding."""
    import socket
    import time
    sys.path.insert(0, HERE)
    import gen_ring as gr
    out = os.path.join(work, "live")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    ranks, wid = gr.g.world_job("live", 2)
    for r in ranks:
        r.coll(0, count=16)
    pids = (os.getpid(), 4194304 + 7)            # above any pid_max: no such process
    for r, pid in zip(ranks, pids):
        r.host, r.pid = socket.gethostname()[:63], pid
        rg = gr.rank_ring(r)
        rg.h["start_mono_ns"] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        rg.write(os.path.join(out, gr.ring_name(r)))
    res = json.loads(run(tranalyze, ["--json", out], 1).stdout)
    got = {r["rank"]: r["ended"]["state"] for r in res["ranks"]}
    if got != {0: "snapshot", 1: "killed"}:
        fail("end states %r, expected rank 0 (this process) snapshot, rank 1 (gone) killed" % got)
    # issue 33: the killed one died while nothing waited for it: a finding
    f = [(x["kind"], x["ranks"], x["others"]) for x in res["findings"]]
    if f != [("dead", [1], [0])]:
        fail("findings %r, expected rank 1 dead (others: rank 0)" % f)
    print("ok: a live ring is a snapshot, a dead one a kill")


def layout(prog):
    sys.path.insert(0, HERE)
    import gen_ring
    c = json.loads(subprocess.run([prog], capture_output=True, text=True, check=True).stdout)
    for name, (offs, size, fmt) in gen_ring.STRUCTS.items():
        if c[name]["_size"] != size:
            fail("%s: %d bytes in C, %d in gen_ring.py" % (name, c[name]["_size"], size))
        for f, o in offs.items():
            if c[name].get(f) != o:
                fail("%s.%s: offset %s in C, %d in gen_ring.py" % (name, f, c[name].get(f), o))
        if set(c[name]) - {"_size"} != set(offs):
            fail("%s: fields differ: %s" % (name, sorted(set(c[name]) ^ set(offs) - {"_size"})))
    k = c["constants"]
    if (k["header_bytes"], k["record_bytes"], k["comm_bytes"], k["checkpoints"], k["version"], k["magic"]) != \
            (gen_ring.HEADER_BYTES, gen_ring.RECORD_BYTES, gen_ring.COMM_BYTES, gen_ring.CHECKPOINTS,
             gen_ring.VERSION, gen_ring.MAGIC.decode()):
        fail("constants differ: %s" % k)
    if k["blob_kinds"] != [gen_ring.BLOB_MODULE, gen_ring.BLOB_STACK, gen_ring.BLOB_PYCODE, gen_ring.BLOB_PYSTACK,
                           gen_ring.BLOB_COLLCONFIG, gen_ring.BLOB_NCCLINFO, gen_ring.BLOB_GRAPH]:
        fail("blob kinds differ: %s" % k["blob_kinds"])
    if k["lanes"] != [gen_ring.LANES.index(x) for x in ("send", "recv", "signal", "wait", "coll")]:
        fail("lanes differ: %s" % k["lanes"])
    if k["mem_devices"] != gen_ring.MEM_DEVICES:
        fail("TRR_MEM_DEVICES is %d, gen_ring.py's MEM_DEVICES %d" % (k["mem_devices"], gen_ring.MEM_DEVICES))
    # tests/common/ring.py's reader: the same header and memory slot layouts
    sys.path.insert(0, os.path.join(HERE, "..", "common"))
    import ring as ringfmt
    offs, size, fmt = gen_ring.STRUCTS["header"]
    if ringfmt.HEADER.size != size or ringfmt.HEADER_FIELDS != [n for n, _ in gen_ring.LAYOUTS["header"]]:
        fail("tests/common/ring.py's header: %d bytes, fields %s; C: %d bytes, %s" %
             (ringfmt.HEADER.size, ringfmt.HEADER_FIELDS, size, [n for n, _ in gen_ring.LAYOUTS["header"]]))
    if struct.calcsize(fmt) != ringfmt.HEADER.size or struct.calcsize(gen_ring.STRUCTS["mem"][2]) != ringfmt.MEM.size \
            or ringfmt.MEM_FIELDS != [n for n, _ in gen_ring.LAYOUTS["mem"]] or ringfmt.MEM_DEVICES != k["mem_devices"]:
        fail("tests/common/ring.py's memory slot differs from trr_mem")
    # the same bytes read back the same way by both
    probe = gen_ring.pack("header", magic=gen_ring.MAGIC, version=gen_ring.VERSION, header_bytes=4096,
                          record_bytes=128, comm_bytes=1024, host="h", hang_sec=7, stalls=2, stall_ns=11,
                          stall_rec=5, stall_since_ns=9, pending=3, pending_since_ns=8, pass_ns=12,
                          mem=gen_ring.mem_slots([{"used": 1, "device": 3, "live": 4, "peak": 5, "allocs": 6,
                                                   "frees": 7, "fail_api": "cudaMalloc", "fail_stack": -1}]),
                          mem_devices_dropped=13)
    h = ringfmt.parse_header(probe + b"\0" * (4096 - len(probe)))
    got = (h["hang_sec"], h["stalls"], h["stall_ns"], h["stall_rec"], h["stall_since_ns"], h["pending"],
           h["pending_since_ns"], h["pass_ns"], h["mem_devices_dropped"], h["mem"][0]["device"],
           h["mem"][0]["peak"], h["mem"][0]["fail_api"], h["mem"][0]["fail_stack"], h["mem"][1]["used"])
    if got != (7, 2, 11, 5, 9, 3, 8, 12, 13, 3, 5, "cudaMalloc", -1, 0):
        fail("tests/common/ring.py reads the new header fields as %r" % (got,))
    print("ok: gen_ring.py's layouts are ring_format.h's")


def main():
    tranalyze, exe, work, case = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    if case == "layout":
        layout(sys.argv[5])
    elif case == "live":
        live(tranalyze, work)
    elif case == "same_diagnosis":
        same_diagnosis(tranalyze, exe, work)
    else:
        check_case(tranalyze, exe, work, case)


if __name__ == "__main__":
    main()
