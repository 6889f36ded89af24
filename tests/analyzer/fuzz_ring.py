#!/usr/bin/env python3
"""tranalyze never crashes on a damaged ring file: takes the ring files of
six synthetic jobs (tests/analyzer/gen_ring.py: a rank killed among ranks
with JSON traces, a process driving two devices, a wrapped ring, Python
stacks in PYCODE/PYSTACK blobs, CUDA graphs in GRAPH blobs replayed by
GraphLaunch records, a failed allocation in the header's device memory),
damages
one ring at a time -- truncated at many offsets (every area boundary and
random ones), bytes flipped (anywhere, and in each area), every header
field, device memory slot field, communicator slot field, record field and blob field (Python code
objects' lengths and strings, Python frames' codes, a graph's and its
captured calls' fields) set to hostile
values (0, -1, huge counts and offsets, values just past the file) -- and
runs tranalyze on the folder and on the ring file alone. Each run must end
with status 0, 1 or 2 (never a signal or a sanitizer report), within a time
limit, with valid JSON, and a ring that was not used must be named in
--json's "inputs" (on stderr when nothing was usable).

    fuzz_ring.py TRANALYZE WORKDIR [ROUNDS [SEED]]
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_ring as gr  # noqa: E402

HOSTILE = [0, 1, 2, 7, 8, 127, 128, 255, 4095, 4096, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**56, 2**62,
           2**63 - 1, 2**63, 2**64 - 1]


def field_writer(code):
    """(struct format, mask) to overwrite one field of code with any value"""
    base = code.lstrip("0123456789")
    n = int(code[:-1]) if code != base else 1
    if base == "s":
        return None
    size = struct.calcsize("<" + base)
    return "<%d%s" % (n, {1: "B", 2: "H", 4: "I", 8: "Q"}[size] if base != "d" else "d"), size, n


def set_field(buf, at, struct_name, field, value):
    offs, _, _ = gr.STRUCTS[struct_name]
    code = dict(gr.LAYOUTS[struct_name])[field]
    w = field_writer(code)
    if not w:                    # a char array: fill without NUL
        n = int(code[:-1])
        buf[at + offs[field]:at + offs[field] + n] = b"\xff" * n
        return
    fmt, size, n = w
    if fmt.endswith("d"):
        v = [float("nan") if value % 3 == 0 else float("inf") if value % 3 == 1 else -1e300] * n
    else:
        v = [value & ((1 << (8 * size)) - 1)] * n
    p = at + offs[field]
    if p + struct.calcsize(fmt) <= len(buf):
        struct.pack_into(fmt, buf, p, *v)


def header_of(data):
    offs, size, fmt = gr.STRUCTS["header"]
    vals = struct.unpack_from(fmt, data, 0)
    return dict(zip([n for n, _ in gr.LAYOUTS["header"]], vals))


def blobs_of(data, h):
    """(offset, kind) of each blob"""
    out, off, end = [], h["off_blobs"], h["off_blobs"] + h["blob_bytes"]
    while off + 8 <= end:
        kind, n = struct.unpack_from("<II", data, off)
        if kind == 0:
            break
        out.append((off, kind))
        off += 8 + n
    return out


HEADER_SIZE = gr.STRUCTS["header"][1]


def cases(data, rnd, rounds):
    h = header_of(data)
    n = len(data)
    cap = h["capacity"]
    # truncations: every area boundary, around it, and random offsets
    cuts = {0, 1, 7, 8, 12, 100, 583, 584, HEADER_SIZE - 1, HEADER_SIZE, 4095, 4096, n - 1}
    for base in (h["off_comms"], h["off_records"], h["off_blobs"]):
        for d in (-1, 0, 1, 8, 100):
            cuts.add(base + d)
    for k in range(h["ncomms"] + 1):
        cuts.add(h["off_comms"] + k * 1024 + 500)
    for k in range(0, min(cap, 80), 7):
        cuts.add(h["off_records"] + k * 128 + 64)
    for off, _ in blobs_of(data, h):
        cuts.update({off + 4, off + 12, off + 40})
    cuts.update(rnd.randrange(n) for _ in range(rounds // 4))
    for c in sorted(x for x in cuts if 0 <= x < n):
        yield "truncate@%d" % c, data[:c]
    # flipped bytes: anywhere, then in each area
    areas = [(0, HEADER_SIZE), (h["off_comms"], h["off_comms"] + max(1, h["ncomms"]) * 1024),
             (h["off_records"], h["off_records"] + min(cap, 256) * 128),
             (h["off_blobs"], h["off_blobs"] + max(16, h["blob_used"]))]
    for i in range(rounds // 2):
        b = bytearray(data)
        lo, hi = (0, n) if i % 5 == 0 else areas[i % 4]
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(lo, min(hi, n))] = rnd.randrange(256)
        yield "flip", bytes(b)
    # hostile header fields
    for name, code in gr.LAYOUTS["header"]:
        for v in rnd.sample(HOSTILE, 6) + [n, n + 1, n - HEADER_SIZE, 2**64 - n]:
            b = bytearray(data)
            set_field(b, 0, "header", name, v)
            yield "header.%s=%d" % (name, v), bytes(b)
    # hostile device memory slot fields (header.mem: the first slot and the last)
    mem_at = gr.STRUCTS["header"][0]["mem"]
    for slot in (0, gr.MEM_DEVICES - 1):
        at = mem_at + slot * gr.MEM_BYTES
        for name, code in gr.LAYOUTS["mem"]:
            for v in rnd.sample(HOSTILE, 3) + [2**32 - 1]:
                b = bytearray(data)
                set_field(b, at, "mem", name, v)
                if name != "used" and v % 2:
                    struct.pack_into("<I", b, at, 1)     # the slot in use: its fields are read
                yield "mem[%d].%s=%d" % (slot, name, v), bytes(b)
    # hostile communicator slot fields (slot 0 and the last)
    for slot in {0, max(0, h["ncomms"] - 1)}:
        at = h["off_comms"] + slot * 1024
        for name, code in gr.LAYOUTS["comm"]:
            for v in rnd.sample(HOSTILE, 3) + [2**32 - 1]:
                b = bytearray(data)
                set_field(b, at, "comm", name, v)
                yield "comm[%d].%s=%d" % (slot, name, v), bytes(b)
    # hostile record fields, the stamp kept valid (the fields are read)
    head = h["head"]
    for index in {max(0, head - min(cap, head)), head - 1, head // 2}:
        at = h["off_records"] + (index % cap) * 128
        for name, code in gr.LAYOUTS["record"]:
            if name == "stamp":
                continue
            for v in rnd.sample(HOSTILE, 3) + [2**32 - 1]:
                b = bytearray(data)
                set_field(b, at, "record", name, v)
                yield "record[%d].%s=%d" % (index, name, v), bytes(b)
    # hostile blobs: the first few, and the first of each kind
    bl = blobs_of(data, h)
    firsts = [next(x for x in bl if x[1] == k) for k in sorted({x[1] for x in bl})]
    for off, kind in bl[:6] + [x for x in firsts if x not in bl[:6]]:
        for fld in ("kind", "bytes"):
            for v in (3, 9, 2**31, 2**32 - 1, 2**32 - 8, 8):
                b = bytearray(data)
                set_field(b, off, "blob", fld, v)
                yield "blob@%d.%s=%d" % (off, fld, v), bytes(b)
        sub = {gr.BLOB_MODULE: "module", gr.BLOB_STACK: "stack", gr.BLOB_PYCODE: "pycode",
               gr.BLOB_PYSTACK: "pystack", gr.BLOB_GRAPH: "graph"}.get(kind, "stack")
        for name, code in gr.LAYOUTS[sub]:
            for v in rnd.sample(HOSTILE, 4) + [2**32 - 1]:
                b = bytearray(data)
                set_field(b, off + 8, sub, name, v)
                yield "%s@%d.%s=%d" % (sub, off, name, v), bytes(b)
        if kind == 1:            # the path without its NUL
            b = bytearray(data)
            pl = struct.unpack_from("<I", data, off + 12)[0]
            end = min(off + 8 + 80 + pl, len(b))
            b[off + 8 + 80:end] = b"A" * (end - off - 88)
            yield "module@%d path without NUL" % off, bytes(b)
        if kind == gr.BLOB_PYCODE:   # the file and the name without their NULs; bytes not UTF-8
            fl, nl = struct.unpack_from("<II", data, off + 16)
            b = bytearray(data)
            b[off + 24:off + 24 + fl + nl] = b"\xff\x01" * ((fl + nl) // 2) + b"B" * ((fl + nl) % 2)
            yield "pycode@%d strings without NUL" % off, bytes(b)
            b = bytearray(data)
            b[off + 24:off + 24 + fl - 1] = bytes(rnd.randrange(1, 256) for _ in range(fl - 1))
            yield "pycode@%d file of random bytes" % off, bytes(b)
        if kind == gr.BLOB_GRAPH:    # its captured calls' fields (the first and the last call)
            ncalls = struct.unpack_from("<I", data, off + 12)[0]
            for k in {0, max(0, ncalls - 1)}:
                at = off + 8 + gr.STRUCTS["graph"][1] + k * gr.STRUCTS["graph_call"][1]
                for name, code in gr.LAYOUTS["graph_call"]:
                    for v in rnd.sample(HOSTILE, 3) + [2**32 - 1]:
                        b = bytearray(data)
                        set_field(b, at, "graph_call", name, v)
                        yield "graph_call[%d]@%d.%s=%d" % (k, off, name, v), bytes(b)
        if kind == gr.BLOB_PYSTACK:  # every frame's code and line hostile
            n = struct.unpack_from("<I", data, off + 12)[0]
            for v in (2**32 - 1, 2**31, 5000):
                b = bytearray(data)
                for k in range(n):
                    struct.pack_into("<Ii", b, off + 16 + 8 * k, v, -(2**31))
                yield "pystack@%d frames code=%d" % (off, v), bytes(b)


def run(tranalyze, args, victim, what):
    try:
        p = subprocess.run([tranalyze, "--json"] + args, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise SystemExit("FAIL: timeout with %s: %s" % (victim, what))
    if p.returncode not in (0, 1, 2):
        raise SystemExit("FAIL: status %d with %s: %s\n%s" % (p.returncode, victim, what, p.stderr[-3000:]))
    if "runtime error" in p.stderr or "AddressSanitizer" in p.stderr:
        raise SystemExit("FAIL: sanitizer report with %s: %s\n%s" % (victim, what, p.stderr[-3000:]))
    if p.returncode == 2 and not p.stdout:
        if victim not in p.stderr:
            raise SystemExit("FAIL: nothing usable, %s not named on stderr: %s\n%s" % (victim, what, p.stderr[-2000:]))
        return None
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise SystemExit("FAIL: --json output is not JSON with %s: %s (%s)" % (victim, what, e))


def main():
    tranalyze, work = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    rnd = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 11)
    shutil.rmtree(work, ignore_errors=True)
    total = 0
    for sc, pick in (("ring_killed_rank", "trshim.node0.40002.ring"), ("ring_multi_device", None),
                     ("ring_wrapped", None), ("ring_py_hang", "trshim.node0.40000.ring"),
                     ("ring_graph_fewer", "trshim.node0.40000.ring"), ("ring_oom", "trshim.node0.40001.ring")):
        base = os.path.join(work, sc + "-base")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_ring.py"), sc, base], check=True)
        os.remove(os.path.join(base, "expected.json"))
        rings = sorted(f for f in os.listdir(base) if f.endswith(".ring"))
        victim = pick or rings[1 % len(rings)]
        with open(os.path.join(base, victim), "rb") as f:
            data = f.read()
        d = os.path.join(work, sc)
        for what, content in cases(data, rnd, rounds):
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(base, d)
            path = os.path.join(d, victim)
            with open(path, "wb") as f:
                f.write(content)
            res = run(tranalyze, [d], victim, what)
            if res is not None:
                used = any((r.get("file") or "").endswith(victim) or
                           ((r.get("ring") or {}).get("file") or "").endswith(victim) for r in res.get("ranks", []))
                named = any((i.get("file") or "").endswith(victim) for i in res.get("inputs", []))
                elsewhere = bool(res.get("job", {}).get("other_jobs"))
                if not used and not named and not elsewhere:
                    raise SystemExit("FAIL: %s was neither used nor named (%s)" % (victim, what))
            run(tranalyze, [path], victim, what)       # alone, named on the command line
            total += 1
    print("ok: %d damaged ring files, no crash" % total)


if __name__ == "__main__":
    main()
