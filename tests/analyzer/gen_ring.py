#!/usr/bin/env python3
"""Synthetic trshim ring files (include/trshim/ring_format.h) for tranalyze's
tests, Python 3 standard library only: the jobs of gen_traces.py
(its Rank objects) written as ring files (what a killed process leaves),
as JSON traces of the newer format (with "ring", "done_ns"/"gpu",
"fingerprint"), or both.

    gen_ring.py SCENARIO OUTDIR [--module EXE]    one scenario (OUTDIR/expected.json too)
    gen_ring.py --list

--module EXE: the call sites are the functions of that executable (as
tests/analyzer/check_symbols.py does), so that tranalyze names them from
the module's DWARF: ring frames carry no symbol names.

The struct layouts below are ring_format.h's, written out field by field
with C's natural alignment (LAYOUTS); tests/analyzer/ring_layout.c prints
the compiler's offsets and check_ring.py compares them.
"""
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
import gen_traces as g  # noqa: E402  (next to this file)
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import ring  # noqa: E402
import vocab  # noqa: E402

MAGIC = b"TRSHRING"
VERSION = 1
HEADER_BYTES, RECORD_BYTES, COMM_BYTES, CHECKPOINTS = 4096, 128, 1024, 48
RUNNING, EXITED, SIGNALED = 1, 2, 3
REC_ENTERED, REC_RETURNED = 1, 2
GPU_UNTRACKED, GPU_PENDING, GPU_DONE, GPU_ERROR = 0, 1, 2, 3
NONE = -2 ** 31
BLOB_MODULE, BLOB_STACK, BLOB_PYCODE, BLOB_PYSTACK, BLOB_COLLCONFIG, BLOB_NCCLINFO, BLOB_GRAPH = 1, 2, 3, 4, 5, 6, 7
LANES = ["send", "recv", "signal", "wait", "coll"]       # TRR_LANE_*
OPS = vocab.OPS
DTYPES = list(vocab.DTYPES)               # ncclDataType_t order (nccl_calls.h's table)
REDOPS = vocab.REDOPS
KINDS, ENDS = ring.KINDS, ring.ENDS        # include/trshim/ring_format.h's table
MASK = (1 << 64) - 1
MEM_DEVICES, MEM_BYTES = 8, 136           # TRR_MEM_DEVICES, sizeof(trr_mem)

# (name, struct code): C order; arrays as "64s" (char) or "96Q" (uint64)
LAYOUTS = {
    "header": [("magic", "8s"), ("version", "I"), ("header_bytes", "I"), ("record_bytes", "I"),
               ("comm_bytes", "I"), ("capacity", "Q"), ("max_comms", "I"), ("fp_interval", "I"),
               ("off_comms", "Q"), ("off_records", "Q"), ("off_blobs", "Q"), ("blob_bytes", "Q"),
               ("file_bytes", "Q"), ("pid", "i"), ("env_rank", "i"), ("world_size", "i"), ("local_rank", "i"),
               ("start_realtime", "d"), ("start_mono_ns", "Q"), ("host", "64s"), ("job_id", "256s"),
               ("job_source", "32s"), ("rank_source", "32s"), ("trshim_version", "16s"), ("stack_depth", "I"),
               ("pad0", "I"), ("head", "Q"), ("ncomms", "I"), ("state", "i"), ("signo", "i"), ("writes", "I"),
               ("heartbeat_ns", "Q"), ("end_ns", "Q"), ("blob_used", "Q"), ("stacks_dropped", "Q"),
               ("comms_dropped", "Q"), ("hang_sec", "I"), ("stalls", "I"), ("stall_ns", "Q"), ("stall_rec", "Q"),
               ("stall_since_ns", "Q"), ("pending", "I"), ("pad2", "I"), ("pending_since_ns", "Q"),
               ("pass_ns", "Q"), ("mem", "%ds" % (MEM_DEVICES * MEM_BYTES)), ("mem_devices_dropped", "Q"),
               ("lost_errno", "I"), ("file_comms", "I"), ("file_records", "Q")],
    # trr_mem: header.mem holds MEM_DEVICES of them (packed by mem_slots)
    "mem": [("used", "I"), ("device", "i"), ("live", "Q"), ("peak", "Q"), ("allocs", "Q"), ("frees", "Q"),
            ("peak_ns", "Q"), ("failures", "Q"), ("fail_bytes", "Q"), ("fail_live", "Q"), ("fail_free", "Q"),
            ("fail_total", "Q"), ("fail_ns", "Q"), ("fail_stack", "i"), ("fail_pystack", "i"), ("fail_code", "i"),
            ("fail_api", "28s")],
    "record": [("stamp", "Q"), ("state", "I"), ("op", "B"), ("depth", "B"), ("capturing", "B"), ("gpu", "B"),
               ("comm", "i"), ("dtype", "i"), ("redop", "i"), ("root", "i"), ("stack", "i"), ("tid", "i"),
               ("device", "i"), ("rc", "i"), ("group", "I"), ("pystack", "i"), ("seq", "Q"), ("count", "Q"),
               ("sendbuff", "Q"), ("recvbuff", "Q"), ("stream", "Q"), ("enter_ns", "Q"), ("exit_ns", "Q"),
               ("done_ns", "Q"), ("extra", "Q")],
    "comm": [("valid", "I"), ("kind", "i"), ("id", "Q"), ("parent_id", "Q"), ("parent", "i"), ("blocking", "i"),
             ("has_color", "i"), ("color", "i"), ("key", "i"), ("group", "I"), ("init_enter", "Q"),
             ("init_stack", "i"), ("from_uid", "i"), ("size", "i"), ("rank", "i"), ("device", "i"),
             ("init_done", "i"), ("init_rc", "i"), ("end_kind", "i"), ("init_exit", "Q"), ("end_enter", "Q"),
             ("end_exit", "Q"), ("end_rc", "i"), ("pad", "I"), ("colls", "Q"), ("fp_seq", "Q"), ("fp_hash", "Q"),
             ("fp_step", "I"), ("ncheckpoints", "I"), ("checkpoints", "96Q"), ("grow_uid", "Q"),
             ("grow_ranks", "i"), ("suspended", "i"), ("suspends", "I"), ("pad1", "I")],
    "module": [("index", "I"), ("path_len", "I"), ("base", "Q"), ("lo", "Q"), ("hi", "Q"), ("build_id", "48s")],
    "stack": [("index", "I"), ("n", "I")],
    "blob": [("kind", "I"), ("bytes", "I")],
    "pycode": [("index", "I"), ("firstlineno", "i"), ("file_len", "I"), ("name_len", "I")],
    "pystack": [("index", "I"), ("n", "I")],
    "pyframe": [("code", "I"), ("line", "i")],
    "collconfig": [("index", "I"), ("is_null", "I"), ("min_ctas", "i"), ("max_ctas", "i"), ("nvls_ctas", "i"),
                   ("cga_cluster_size", "i"), ("force_alg", "i"), ("cta_policy", "i"), ("user_tag", "Q"),
                   ("alg_len", "I"), ("pad", "I")],
    "ncclinfo": [("version", "i"), ("exports", "I"), ("path_len", "I"), ("unknown_len", "I")],
    "graph": [("index", "I"), ("ncalls", "I"), ("capture_id", "Q"), ("stream", "Q"), ("graph", "Q"), ("stack", "i"),
              ("pystack", "i"), ("end_stack", "i"), ("end_pystack", "i"), ("dropped", "I"), ("base", "i")],
    "graph_call": [("op", "B"), ("lane", "B"), ("pad", "H"), ("comm", "i"), ("dtype", "i"), ("redop", "i"),
                   ("root", "i"), ("stack", "i"), ("pystack", "i"), ("pad2", "I"), ("count", "Q"), ("sendbuff", "Q"),
                   ("recvbuff", "Q"), ("stream", "Q"), ("n", "Q"), ("extra", "Q")],
}


def c_layout(fields):
    """(offsets by name, size, struct format) of a C struct of fields, natural alignment"""
    off, fmt, offs, maxal = 0, "<", {}, 1
    for name, code in fields:
        base = code.lstrip("0123456789")
        al = 1 if base == "s" else struct.calcsize("<" + base)
        size = struct.calcsize("<" + code)
        pad = -off % al
        if pad:
            fmt += "%dx" % pad
            off += pad
        offs[name] = off
        fmt += code
        off += size
        maxal = max(maxal, al)
    tail = -off % maxal
    if tail:
        fmt += "%dx" % tail
        off += tail
    return offs, off, fmt


STRUCTS = {k: c_layout(v) for k, v in LAYOUTS.items()}
assert STRUCTS["header"][1] <= HEADER_BYTES and STRUCTS["record"][1] == RECORD_BYTES
assert STRUCTS["mem"][1] == MEM_BYTES
assert STRUCTS["comm"][1] <= COMM_BYTES


def pack(_struct, **vals):
    """the C struct _struct with the given fields (the others zero)"""
    offs, size, fmt = STRUCTS[_struct]
    args = []
    for name, code in LAYOUTS[_struct]:
        v = vals.get(name)
        base = code.lstrip("0123456789")
        if base == "s":
            args.append(v.encode() if isinstance(v, str) else (v or b""))
        elif code != base:                    # an array of numbers
            n = int(code[:-1])
            v = list(v or [])
            args.extend(v + [0] * (n - len(v)))
        else:
            args.append(v or 0)
    b = struct.pack(fmt, *args)
    assert len(b) == size
    return b


def mix(z):
    """splitmix64's finalizer: the fingerprint's mixing function"""
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK
    return z ^ (z >> 31)


class Fingerprint:
    """a communicator's fingerprint (docs/trace-format.md): one collective at a time"""
    def __init__(self, interval=64):
        self.seq, self.hash, self.step, self.cps = 0, 0, interval, []

    def add(self, seq, op, dtype, redop, root, count):
        op = OPS.index("Broadcast") if op == OPS.index("Bcast") else op
        rc = 6 if redop == NONE else redop if 0 <= redop < 5 else 5
        rt = 0 if root == NONE else (root + 1) & 0xffffffff
        sig = op | (dtype & 0xffffffff) << 8 | rc << 16 | rt << 32
        self.hash = mix(self.hash ^ mix(sig ^ mix(count)))
        self.seq = seq
        if seq % self.step == 0:
            if len(self.cps) == CHECKPOINTS:
                self.cps = [c for c in self.cps if c[0] % (2 * self.step) == 0]
                self.step *= 2
            if seq % self.step == 0:
                self.cps.append((seq, self.hash))

    def json(self):
        return {"seq": self.seq, "hash": "0x%x" % self.hash, "step": self.step,
                "checkpoints": [[s, "0x%x" % h] for s, h in self.cps]}


def dtype_num(name):
    if name is None:
        return NONE
    m = re.match(r"invalid\((-?\d+)\)", name)
    return int(m.group(1)) if m else DTYPES.index(name)


def redop_num(name):
    if name is None:
        return NONE
    m = re.match(r"premulsum\((-?\d+)\)", name)
    return int(m.group(1)) if m else REDOPS.index(name)


BASE = 0x555555554000


class Ring:
    """One process's ring file. Records: list of dicts (trr_record fields),
    numbered from `first` (the oldest kept; records before it were
    overwritten); head = first + len(records) unless set."""
    def __init__(self, host, pid, start_realtime, start_mono_ns, capacity=4096, max_comms=16,
                 blob_bytes=1 << 16):
        self.h = {"magic": MAGIC, "version": VERSION, "header_bytes": HEADER_BYTES, "record_bytes": RECORD_BYTES,
                  "comm_bytes": COMM_BYTES, "capacity": capacity, "max_comms": max_comms, "fp_interval": 64,
                  "pid": pid, "env_rank": -1, "world_size": -1, "local_rank": -1,
                  "start_realtime": start_realtime, "start_mono_ns": start_mono_ns, "host": host,
                  "trshim_version": "0.1.0", "stack_depth": 64, "state": RUNNING}
        self.blob_bytes = blob_bytes
        self.comms = []          # dicts of trr_comm fields
        self.records = []        # dicts of trr_record fields, in index order
        self.first = 0
        self.head = None
        self.modules = []        # dicts: path, build_id, base, lo, hi
        self.stacks = {}         # index -> [ip]
        self.pycodes = []        # [file, qualname, firstlineno] by index (Python code objects)
        self.pystacks = []       # [[code, line], ...] by index (Python stacks, innermost first)
        self.cfgs = []           # coll_configs entries (gen_traces' dicts) by index: TRR_BLOB_COLLCONFIG
        self.nccl = None         # gen_traces' "nccl" object: a TRR_BLOB_NCCLINFO
        self.graphs = []         # gen_traces' "graphs" entries: TRR_BLOB_GRAPH each
        self.damage_code = None  # a code index written with lengths past its blob
        self.unknown_blob = False  # a blob of an unknown kind (9) first: readers skip it by its bytes
        self.torn = set()        # indices whose stamp is left 0
        self.extra_blobs = []    # (kind, payload) appended last as they are (CRASH, ERROR: make_corpus.py)
        self.mem = []            # dicts of trr_mem fields: header.mem's slots in order (mem_of)

    def to_bytes(self):
        h = dict(self.h)
        cap, mc = h["capacity"], h["max_comms"]
        h["off_comms"] = HEADER_BYTES
        h["off_records"] = HEADER_BYTES + mc * COMM_BYTES
        h["off_blobs"] = h["off_records"] + cap * RECORD_BYTES
        h["blob_bytes"] = self.blob_bytes
        h["file_bytes"] = h["off_blobs"] + self.blob_bytes
        head = self.head if self.head is not None else self.first + len(self.records)
        h["head"] = head
        h["ncomms"] = len(self.comms)
        out = bytearray(h["file_bytes"])
        blobs = bytearray()
        if self.unknown_blob:
            blobs += pack("blob", kind=9, bytes=24) + b"\x07" * 24
        used = set()
        for ix in sorted(self.stacks):
            for ip in self.stacks[ix]:
                for mi, m in enumerate(self.modules):
                    if m["lo"] <= ip < m["hi"] and mi not in used:
                        used.add(mi)
                        path = m["path"].encode() + b"\0"
                        path += b"\0" * (-len(path) % 8)
                        body = pack("module", index=mi, path_len=len(m["path"]) + 1, base=m["base"], lo=m["lo"],
                                    hi=m["hi"], build_id=m["build_id"]) + path
                        blobs += pack("blob", kind=BLOB_MODULE, bytes=len(body)) + body
            body = pack("stack", index=ix, n=len(self.stacks[ix])) + struct.pack("<%dQ" % len(self.stacks[ix]),
                                                                                  *self.stacks[ix])
            blobs += pack("blob", kind=BLOB_STACK, bytes=len(body)) + body
        # Python code objects and stacks, as the shim appends them: a code before the
        # first stack that uses it
        written = set()
        for ix, st in enumerate(self.pystacks):
            for code, _ in st:
                if code in written or code >= len(self.pycodes):    # (a damaged stack: no such code)
                    continue
                written.add(code)
                file, name, first = self.pycodes[code]
                fb, nb = file.encode("utf-8", "surrogateescape") + b"\0", name.encode("utf-8", "surrogateescape") + b"\0"
                fl = len(fb) + (1000 if code == self.damage_code else 0)
                body = pack("pycode", index=code, firstlineno=first, file_len=fl, name_len=len(nb)) + fb + nb
                body += b"\0" * (-len(body) % 8)
                blobs += pack("blob", kind=BLOB_PYCODE, bytes=len(body)) + body
            body = pack("pystack", index=ix, n=len(st)) + b"".join(pack("pyframe", code=c, line=n) for c, n in st)
            blobs += pack("blob", kind=BLOB_PYSTACK, bytes=len(body)) + body
        for ix, c in enumerate(self.cfgs):        # (before the records that use them, in the shim)
            blobs += collconfig_blob(ix, c)
        if self.nccl:
            blobs += ncclinfo_blob(self.nccl)
        for ix, gr in enumerate(self.graphs):      # (at each capture's end, in the shim)
            blobs += graph_blob(ix, gr)
        for kind, body in self.extra_blobs:
            blobs += pack("blob", kind=kind, bytes=len(body)) + body
        assert len(blobs) <= self.blob_bytes, "blob area too small"
        h["blob_used"] = len(blobs)
        h["mem"] = mem_slots(self.mem)
        out[:STRUCTS["header"][1]] = pack("header", **h)
        for i, c in enumerate(self.comms):
            b = pack("comm", **c)
            o = h["off_comms"] + i * COMM_BYTES
            out[o:o + len(b)] = b
        for k, r in enumerate(self.records):
            index = self.first + k
            r = dict(r)
            r["stamp"] = 0 if index in self.torn else index + 1
            o = h["off_records"] + (index % cap) * RECORD_BYTES
            out[o:o + RECORD_BYTES] = pack("record", **r)
        out[h["off_blobs"]:h["off_blobs"] + len(blobs)] = blobs
        return bytes(out)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.to_bytes())


def mem_slots(slots):
    """header.mem's bytes: the trr_mem slots given (dicts), the rest zero"""
    assert len(slots) <= MEM_DEVICES
    return b"".join(pack("mem", **m) for m in slots) + b"\0" * (MEM_BYTES * (MEM_DEVICES - len(slots)))


def mem_of(r):
    """the header slot (trr_mem) of gen_traces Rank r's device, as the shim keeps
    it: the JSON's memory.devices entry (allocs 3, frees 0 as gen_traces writes
    them), its failures counted and the first one in full; [] without memory"""
    dev = r.rank % 8
    fails = [f for f in r.failures if f["device"] == dev]
    if not r.peak and not fails:
        return []
    m = {"used": 1, "device": dev, "live": r.live, "peak": r.peak, "allocs": 3 if r.peak else 0, "frees": 0,
         "peak_ns": r.peak_ns or 0, "failures": len(fails)}
    if fails:
        f = fails[0]
        m.update(fail_bytes=f["bytes"], fail_live=f["live_bytes"],
                 fail_free=MASK if f["free_bytes"] is None else f["free_bytes"],
                 fail_total=MASK if f["total_bytes"] is None else f["total_bytes"], fail_ns=f["t_ns"],
                 fail_stack=f["stack"], fail_pystack=f.get("pystack", -1), fail_code=f["error_code"],
                 fail_api=f["api"])
    return [m]


UNSET = -2 ** 31
CFG_FIELDS = [("minCTAs", "min_ctas"), ("maxCTAs", "max_ctas"), ("nvlsCTAs", "nvls_ctas"),
              ("cgaClusterSize", "cga_cluster_size"), ("forceAlgSelection", "force_alg"), ("CTAPolicy", "cta_policy")]


def collconfig_blob(ix, c):
    """a TRR_BLOB_COLLCONFIG of gen_traces' coll_configs entry c"""
    vals = {k: c.get(j, UNSET) for j, k in CFG_FIELDS}
    alg = c.get("algSelection")
    ab = alg.encode() + b"\0" if alg else b""
    body = pack("collconfig", index=ix, is_null=1 if c.get("null") else 2 if c.get("invalid") else 0,
                user_tag=c.get("userProfilerTag", 0), alg_len=len(ab), **vals) + ab
    body += b"\0" * (-len(body) % 8)
    return pack("blob", kind=BLOB_COLLCONFIG, bytes=len(body)) + body


def ncclinfo_blob(n):
    """a TRR_BLOB_NCCLINFO of gen_traces' "nccl" object"""
    path = (n.get("library") or "").encode() + b"\0"
    unk = b"".join(f.encode() + b"\0" for f in n.get("unknown_functions") or []) + b"\0"
    body = pack("ncclinfo", version=n.get("version") or 0, exports=n.get("exports") or 0, path_len=len(path),
                unknown_len=len(unk)) + path + unk
    body += b"\0" * (-len(body) % 8)
    return pack("blob", kind=BLOB_NCCLINFO, bytes=len(body)) + body


def graph_blob(ix, gr):
    """a TRR_BLOB_GRAPH of gen_traces' "graphs" entry gr (its calls' comm: the slot, as the index)"""
    body = pack("graph", index=ix, ncalls=len(gr["calls"]), capture_id=gr["capture_id"], stream=int(gr["stream"], 16),
                graph=int(gr["graph"], 16), stack=gr["stack"], pystack=gr["pystack"], end_stack=gr["end_stack"],
                end_pystack=gr["end_pystack"], dropped=gr["dropped"], base=gr["base"])
    for c in gr["calls"]:
        per_peer = c["lane"] != "coll"
        rp = c["peer"] if per_peer else c["root"]
        body += pack("graph_call", op=OPS.index(c["op"]), lane=LANES.index(c["lane"]), comm=c["comm"],
                     dtype=dtype_num(c["dtype"]), redop=redop_num(c["redop"]), root=NONE if rp is None else rp,
                     stack=c["stack"], pystack=c["pystack"], count=c["count"], sendbuff=int(c["sendbuff"], 16),
                     recvbuff=int(c["recvbuff"], 16), stream=int(c["stream"], 16), n=c["n"])
    return pack("blob", kind=BLOB_GRAPH, bytes=len(body)) + body


EXTRA_CONFIG = 1 << 63


def extra_of(r, k, call):
    """record.extra of Rank r's call k: a *Config collective's config, a signal's sigIdx and context"""
    x = r.xcall.get(k, {})
    if x.get("config") is not None and vocab.op_has(call[0], "COLL"):
        return EXTRA_CONFIG | (x["config"] + 1)
    if x.get("signal") is not None and vocab.op_has(call[0], "ONESIDED"):
        idx, ctx = x["signal"]
        return (idx & 0xffffffff) | (ctx & 0xffffffff) << 32
    return 0


def rank_ring(r, state=RUNNING, signo=0, capacity=4096, lost=0, gpu=None, env_rank=True, job=True,
              heartbeat_after=500_000_000, mem=False):
    """The ring of gen_traces Rank r: its communicators, its calls (the
    first `lost` of them overwritten: capacity must hold the rest), its
    stacks. gpu(r, call_index, call) -> (gpu state, done_ns) for the
    completion fields (default: none tracked). mem: the header's device
    memory (mem_of; default: zeros, as an older shim's ring)."""
    rg = Ring(r.host, r.pid, r.clock_real, getattr(r, "mono_base", 1_000_000_000_000), capacity=capacity)
    h = rg.h
    if env_rank:
        h.update(env_rank=r.rank, world_size=r.world, local_rank=r.rank % 8, rank_source="RANK")
    if job:
        h.update(job_id=r.job, job_source="TRSHIM_JOB_ID")
    h["state"], h["signo"] = state, signo
    fps = fingerprints(r)
    for ci, c in enumerate(r.comms):
        parent = next((k for k, p in enumerate(r.comms) if c["parent"] and p["id"] == c["parent"]), -1)
        e = c.get("end")
        fp = fps[ci]
        rg.comms.append({
            "valid": 1, "kind": KINDS.index(c["kind"]), "id": int(c["id"], 16),
            "parent_id": int(c["parent"], 16) if c["parent"] else 0, "parent": parent,
            "blocking": 1 if c.get("blocking", True) else 0, "has_color": 1 if "color" in c else 0,
            "color": c.get("color", 0), "key": c.get("key", 0), "group": 0,
            "init_enter": c["init"]["enter_ns"], "init_stack": c["init"]["stack"],
            "from_uid": 1 if c["kind"].startswith("InitRank") or (c["kind"] == "Grow" and not c["parent"]) else 0,
            "size": c["size"] if c["size"] is not None else -1, "rank": c["rank"],
            "device": c["device"] if c["device"] is not None else -1,
            "init_done": 1 if c["init"]["exit_ns"] is not None else 0,
            "init_rc": c["init"]["rc"] or 0, "end_kind": ENDS.index(e["kind"]) if e else 0,
            "init_exit": c["init"]["exit_ns"] or 0, "end_enter": e["enter_ns"] if e else 0,
            "end_exit": (e.get("exit_ns") or 0) if e else 0, "end_rc": (e.get("rc") or 0) if e else 0,
            "colls": c["colls"], "fp_seq": fp.seq, "fp_hash": fp.hash, "fp_step": fp.step,
            "ncheckpoints": len(fp.cps), "checkpoints": [x for cp in fp.cps for x in cp],
            "grow_uid": int(c["grow"]["uid"], 16) if c.get("grow") and c["grow"]["uid"] else 0,
            "grow_ranks": c["grow"]["ranks"] if c.get("grow") else 0,
            "suspended": 1 if c.get("suspended") else 0, "suspends": c.get("suspends", 0)})
    rg.first = lost
    last = 0
    for k, call in enumerate(r.calls):
        rec = record_of(r, call)
        rec["extra"] = extra_of(r, k, call)
        if call[0] == "GraphLaunch":     # a launch's lane: redop the lane, root its peer, count the replay
            x = r.xlaunch[k]
            rec.update(redop=LANES.index(x["lane"]), root=NONE if call[7] is None else call[7], count=x["replay"],
                       recvbuff=call[3], extra=x["graph"], dtype=NONE)
        if gpu:
            rec["gpu"], rec["done_ns"] = gpu(r, k, call)
        last = max(last, rec["enter_ns"], rec["exit_ns"], rec["done_ns"])
        if k >= lost:
            rg.records.append(rec)
    assert len(rg.records) <= capacity
    h["heartbeat_ns"] = last + heartbeat_after if last else 0
    if state != RUNNING:
        h["end_ns"] = h["heartbeat_ns"]
    for ix, st in enumerate(r.stacks):
        rg.stacks[ix] = [BASE + int(f["offset"], 16) for f in st["frames"]]
    if r.python is not None:
        rg.pycodes = [list(c) for c in r.pycodes]
        rg.pystacks = [list(s) for s in r.pystacks]
    rg.cfgs = [dict(c) for c in r.cfgs]
    rg.nccl = r.nccl
    rg.graphs = list(r.graphs or [])
    rg.modules.append({"path": g.MODULE, "build_id": g.BUILD_ID, "base": BASE, "lo": BASE, "hi": BASE + (64 << 20)})
    if mem:
        rg.mem = mem_of(r)
    return rg


def record_of(r, call):
    (op, comm, seq, count, dtype, redop, root, peer, sb, rb, stream, capt, group, depth, enter, ex, tid, rc,
     stack) = call[:19]
    rp = peer if vocab.op_has(op, "P2P") or vocab.op_has(op, "ONESIDED") else root
    grp = vocab.op_has(op, "GROUP")
    dev = r.comms[comm]["device"] if comm >= 0 else r.rank % 8
    return {"state": REC_RETURNED if ex is not None else REC_ENTERED, "op": OPS.index(op), "depth": depth,
            "capturing": 0 if capt is False else 1 if capt else 2, "gpu": GPU_UNTRACKED, "comm": comm,
            "dtype": NONE if grp else dtype_num(dtype), "redop": redop_num(redop),
            "root": NONE if rp is None else rp, "stack": stack, "tid": tid, "device": dev,
            "rc": rc or 0, "group": group, "pystack": call[21] if len(call) > 21 else -1, "seq": seq, "count": count,
            "sendbuff": int(sb, 16) if sb else 0, "recvbuff": int(rb, 16) if rb else 0,
            "stream": int(stream, 16) if stream else 0, "enter_ns": enter, "exit_ns": ex or 0, "done_ns": 0}


def fingerprints(r):
    """per communicator of Rank r: its Fingerprint after the returned collectives"""
    fps = [Fingerprint() for _ in r.comms]
    for call in r.numbered():             # (a launch: the calls it replays)
        op, comm, seq = call[0], call[1], call[2]
        if comm < 0 or seq <= 0 or not vocab.op_has(op, "COLL") or call[15] is None:
            continue
        root = call[6] if call[6] is not None else NONE
        fps[comm].add(seq, OPS.index(op), dtype_num(call[4]), redop_num(call[5]), root, call[3])
    return fps


def new_json(r, ring_file=None, capacity=4096, first=0, nxt=None, gpu=None, reason=None, signal=None,
             fingerprint=True):
    """Rank r's JSON trace in the newer format: "ring", calls with "done_ns"
    and "gpu", comms with "fingerprint"; start_time = clock.realtime as the
    shim writes them. nxt: ring.next (default: the calls written)."""
    d = r.to_json()
    d["start_time"] = d["clock"]["realtime"]
    pys = [c[21] for c in d["calls"]] if r.python is not None else None
    d["calls"] = [c[:19] for c in d["calls"]]
    nxt = len(r.calls) if nxt is None else nxt
    d["ring"] = {"file": ring_file, "capacity": capacity, "first": first, "next": nxt, "lost": first}
    d["dropped"] = first
    d["settings"] = {"enabled": True, "dir": "traces", "stack_depth": 64, "ring": capacity, "hang_sec": 300,
                     "snapshot_signal": 10, "completion": True}
    d["call_fields"] = g.CALL_FIELDS[:19] + ["done_ns", "gpu"]
    calls = []
    for k, c in enumerate(d["calls"]):
        st, done = gpu(r, k, c) if gpu else (GPU_UNTRACKED, 0)
        calls.append(list(c) + [done if st == GPU_DONE else None, [None, "pending", "done", "error"][st]])
        if pys is not None:
            calls[-1].append(pys[k])
    if pys is not None:
        d["call_fields"].append("pystack")
    if r.v13:                 # issue 13's call fields
        d["call_fields"] += g.NEW_FIELDS
        for k, c in enumerate(calls):
            x = r.xcall.get(k + r.ring_lost, {})
            c += [x.get("config"), x.get("signal")]
    if r.graphs is not None:  # issue 16's call fields
        d["call_fields"] += g.GRAPH_FIELDS
        for k, c in enumerate(calls):
            x = r.xlaunch.get(k + r.ring_lost, {})
            c += [x.get("graph"), x.get("replay"), x.get("lane")]
    d["calls"] = calls
    for i, (c, fp) in enumerate(zip(d["comms"], fingerprints(r))):
        c["slot"] = i
        if fingerprint:
            c["fingerprint"] = fp.json()
        else:
            c.pop("fingerprint", None)
    if reason:
        d["end"] = {"reason": reason, "signal": signal, "in_call": d["end"]["in_call"]}
    return d


def old_json(r):
    """Rank r's JSON trace as shims before issue 6 wrote it: no "ring", no
    completion fields, no fingerprints"""
    d = r.to_json()
    d.pop("ring", None)
    for k in ("python", "pycodes", "pystacks"):
        d.pop(k, None)
    d["call_fields"] = g.CALL_FIELDS[:19]
    d["calls"] = [c[:19] for c in d["calls"]]
    for c in d["comms"]:
        c.pop("fingerprint", None)
        c.pop("slot", None)
    d["settings"] = {"dir": "traces", "stack_depth": 64, "max_records": 1000000}
    return d


def write_json(d, out, name):
    with open(os.path.join(out, name), "w") as f:
        json.dump(d, f, separators=(",", ":"))


def ring_name(r):
    return "trshim.%s.%d.ring" % (r.host, r.pid)


def use_module(exe):
    """call sites at the functions of exe (return addresses a few bytes in)"""
    syms = {}
    for line in subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tT":
            syms[p[2]] = int(p[0], 16)
    notes = subprocess.run(["readelf", "-n", exe], capture_output=True, text=True, check=True).stdout
    g.BUILD_ID = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
    g.MODULE = os.path.abspath(exe)
    g.site_offset = lambda name: syms.get(name, syms["main"]) + 8 - 0x2b


def gpu_upto(done_below):
    """completion: collectives with seq < done_below[rank] done, the later ones pending"""
    def f(r, k, call):
        op, seq, ex = call[0], call[2], call[15]
        if op in ("GroupStart", "GroupEnd") or seq == 0 or ex is None:
            return GPU_UNTRACKED, 0
        if seq < done_below.get(r.rank, 1 << 60):
            return GPU_DONE, ex + 40_000
        return GPU_PENDING, 0
    return f


# ---------------------------------------------------------------- scenarios
# Each writes its files and expected.json: {"exit", "findings": [...] (as
# gen_traces), "ranks": {rank: {dotted key: value}}, "nranks", "notes":
# [[file name, substring], ...], "job", "other_job"}.

def extra12(name="ring12", steps=14):
    """4 ranks; rank 0 issues an extra AllReduce (log_metrics) as #12 of the
    world communicator; every rank goes on for two more calls, then the job
    hangs (#12 never completes)"""
    ranks, wid = g.world_job(name, 4)
    for step in range(steps):
        for r in ranks:
            if step == 11 and r.rank == 0:
                r.coll(0, count=1, site="log_metrics", caller="train_step")
            r.coll(0, count=1 << 20, site="train_step", caller="train_step")
    return ranks, wid


def expect(out, exit_code, findings, **extra):
    e = {"exit": exit_code, "findings": findings}
    e.update(extra)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(e, f, indent=1)


def sc_ring_hang(out):
    """the hang of extra12 from ring files only: every rank SIGKILLed"""
    ranks, wid = extra12()
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r, gpu=gpu_upto({0: 12, 1: 12, 2: 12, 3: 12})).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("divergence", wid, 12, [0], "log_metrics", others=[1, 2, 3])], nranks=4,
           ranks={str(k): {"ended.state": "killed", "ring.from_ring": True, "ring.lost": 0, "calls": 15 if k == 0 else 14}
                  for k in range(4)})


def sc_json_hang(out):
    """the same hang, JSON traces of the older format written at SIGTERM"""
    ranks, wid = extra12()
    g.killed(ranks)
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        write_json(old_json(r), out, r.filename())
    expect(out, 1, [g.F("divergence", wid, 12, [0], "log_metrics", others=[1, 2, 3])], nranks=4,
           ranks={str(k): {"ended.state": "signal", "ring": None} for k in range(4)})


def sc_json_new_hang(out):
    """the same hang, JSON traces of the newer format (ring, gpu, fingerprint)
    written by the hang watchdog; no ring files next to them"""
    ranks, wid = extra12()
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        d = new_json(r, ring_file="/gone/" + ring_name(r), gpu=gpu_upto({k: 12 for k in range(4)}), reason="hang")
        write_json(d, out, r.filename())
    expect(out, 1, [g.F("divergence", wid, 12, [0], "log_metrics", others=[1, 2, 3])], nranks=4,
           ranks={str(k): {"ended.state": "hang", "ring.from_ring": False, "ring.file": "/gone/" + ring_name(ranks[k])}
                  for k in range(4)})


def sc_ring_killed_rank(out):
    """rank 2 is SIGKILLed after step 4 (ring only); the others wait in
    collective #6, are stopped by SIGTERM and write their JSON (their rings
    hold nothing newer). Without the ring this is a rank without a trace;
    with it, rank 2 never issued #6."""
    ranks, wid = g.world_job("killedrank", 4)
    for step in range(6):
        for r in ranks:
            if r.rank == 2 and step == 5:
                continue
            r.coll(0, count=4096, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rf = os.path.join(out, ring_name(r))
        if r.rank == 2:
            rank_ring(r).write(rf)
            continue
        r.finish("signal", 15)
        rank_ring(r, state=SIGNALED, signo=15).write(rf)
        write_json(new_json(r, ring_file=os.path.abspath(rf)), out, r.filename())
    expect(out, 1, [g.F("missing", wid, 6, [2], "train_step", others=[0, 1, 3])], nranks=4,
           ranks={"2": {"ended.state": "killed", "ring.from_ring": True, "calls": 5},
                  "0": {"ended.state": "signal", "ended.signal": 15, "ring.from_ring": False, "calls": 6},
                  "1": {"ring.from_ring": False}, "3": {"ring.from_ring": False}})


def sc_ring_newer(out):
    """JSON snapshots taken at step 3 (SIGUSR1), rings with every call after:
    rank 1 issues an extra Broadcast in step 6 that no snapshot shows; then
    the job is SIGKILLed. The calls come from the rings (the snapshots' NaN
    checks are not used), the rest from the JSON."""
    ranks, wid = g.world_job("newer", 4)
    snap = {}
    for step in range(9):
        if step == 3:
            for r in ranks:
                d = new_json(r, reason="snapshot", signal=10)
                d["ring"]["file"] = os.path.abspath(os.path.join(out, ring_name(r)))
                snap[r.rank] = d
        for r in ranks:
            if step == 6 and r.rank == 1:
                r.coll(0, op="Broadcast", count=8, root=1, site="log_metrics", caller="train_step")
            r.coll(0, count=4096, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r).write(os.path.join(out, ring_name(r)))
        write_json(snap[r.rank], out, r.filename())
    n = {r.rank: len(r.calls) for r in ranks}
    expect(out, 1, [g.F("divergence", wid, 7, [1], "log_metrics", others=[0, 2, 3])], nranks=4,
           ranks={str(k): {"ended.state": "killed", "ring.from_ring": True, "calls": n[k],
                           "file": ranks[k].filename()} for k in range(4)},
           notes=[[ranks[0].filename(), "NaN/Inf checks of this trace"]])


def sc_ring_same(out):
    """every rank's JSON was written at SIGTERM with ring.next == the ring's
    head: the JSON traces are used, each rank once; rank 3 had exited early"""
    ranks, wid = g.world_job("samering", 4)
    for step in range(5):
        for r in ranks:
            if r.rank == 3 and step == 4:
                continue
            r.coll(0, count=4096, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rf = os.path.join(out, ring_name(r))
        if r.rank == 3:
            r.finish("exit")
            rank_ring(r, state=EXITED).write(rf)
        else:
            r.finish("signal", 15)
            rank_ring(r, state=SIGNALED, signo=15).write(rf)
        write_json(new_json(r, ring_file=os.path.abspath(rf)), out, r.filename())
    expect(out, 1, [g.F("missing", wid, 5, [3], "train_step", others=[0, 1, 2])], nranks=4,
           ranks={"0": {"ended.state": "signal", "ring.from_ring": False, "file": ranks[0].filename()},
                  "3": {"ended.state": "exited", "ring.from_ring": False, "calls": 4}})


def sc_ring_snapshot_killed(out):
    """JSON snapshots with ring.next == head, then SIGKILL: the JSON traces
    are used, and the rings say the processes were killed"""
    ranks, wid = extra12("snapkill")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rf = os.path.join(out, ring_name(r))
        rank_ring(r).write(rf)
        write_json(new_json(r, ring_file=os.path.abspath(rf), reason="snapshot", signal=10), out, r.filename())
    expect(out, 1, [g.F("divergence", wid, 12, [0], "log_metrics", others=[1, 2, 3])], nranks=4,
           ranks={str(k): {"ended.state": "killed", "ring.from_ring": False} for k in range(4)})


def sc_ring_torn(out):
    """rank 3 was killed while writing its last record (stamp not set): it
    is read up to the record before, and the note counts it. Every rank was
    killed (rings alone) while nobody waited: they died (kind dead, issue 33),
    the first by its last sign of life named, the others as well"""
    ranks, wid = g.world_job("torn", 4)
    for step in range(5):
        for r in ranks:
            r.coll(0, count=4096, site="train_step", caller="train_step")
    ranks[3].coll(0, count=4096, site="train_step", caller="train_step")    # #6: torn
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rg = rank_ring(r)
        if r.rank == 3:
            rg.torn.add(len(r.calls) - 1)
        rg.write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("dead", wid, 5, [0, 1, 2, 3], "train_step", others=[],
                        message_contains=["died outside any collective the others waited in", "died as well"])],
           nranks=4, ranks={"3": {"calls": 5, "ended.state": "killed"}, "0": {"calls": 5}},
           notes=[[ring_name(ranks[3]), "torn"], [ring_name(ranks[3]), "the last one included"]])


def sc_ring_wrapped(out):
    """a ring of 64 records holding the last 64 of 200 calls: rank 1 calls
    a different collective at #190; the 136 older ones are lost"""
    ranks, wid = g.world_job("wrapped", 4)
    for step in range(200):
        for r in ranks:
            if r.rank == 1 and step == 189:
                r.coll(0, op="AllGather", count=16, site="log_metrics", caller="train_step")
                continue
            r.coll(0, count=4096, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        lost = len(r.calls) - 64
        rank_ring(r, capacity=64, lost=lost).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("divergence", wid, 190, [1], "log_metrics")], nranks=4,
           ranks={str(k): {"ring.lost": 136, "calls": 64, "dropped": 136} for k in range(4)})


def sc_ring_multi_device(out):
    """two processes, each driving two devices (one thread per device, a
    communicator id on both): one ring each gives two ranks; rank 3 issues
    an extra all-reduce"""
    wid = g.cid("world", "multidev")
    ranks = [g.Rank("multidev", k, 4, host="node%d" % (k // 2)) for k in range(4)]
    for r in ranks:
        r.pid = 50000 + r.rank // 2
        r.init(wid, 4, r.rank, site="setup")
        r.comms[0]["device"] = r.rank % 2
    for step in range(6):
        for r in ranks:
            if r.rank == 3 and step == 4:
                r.coll(0, count=8, site="log_metrics", caller="train_step")
            r.coll(0, count=4096, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for p in (0, 2):
        a, b = ranks[p], ranks[p + 1]
        rg = rank_ring(a, env_rank=False)
        rb = rank_ring(b, env_rank=False)
        # one process: b's communicator and records after a's, by time
        # b's stacks into a's table (the process has one)
        remap = {}
        for ix, ips in rb.stacks.items():
            same = [k for k, v in rg.stacks.items() if v == ips]
            remap[ix] = same[0] if same else max(rg.stacks) + 1
            rg.stacks[remap[ix]] = ips
        for c in rb.comms:
            c["init_stack"] = remap.get(c["init_stack"], -1)
        rg.comms += rb.comms
        for x in rb.records:
            x["stack"] = remap.get(x["stack"], -1)
        recs = [(x["enter_ns"], 0, x) for x in rg.records] + [(x["enter_ns"], 1, x) for x in rb.records]
        rg.records = []
        for t, who, x in sorted(recs, key=lambda y: (y[0], y[1])):
            x = dict(x)
            if who and x["comm"] >= 0:
                x["comm"] += len(a.comms)
            x["device"] = (a if who == 0 else b).rank % 2
            rg.records.append(x)
        rg.h["heartbeat_ns"] = max(rg.h["heartbeat_ns"], rb.h["heartbeat_ns"])
        rg.write(os.path.join(out, ring_name(a)))
    expect(out, 1, [g.F("divergence", wid, 5, [3], "log_metrics", others=[0, 1, 2])], nranks=4,
           ranks={"0": {"device": 0, "calls": 6}, "1": {"device": 1, "calls": 6}, "2": {"device": 0},
                  "3": {"device": 1, "calls": 7}})


def sc_ring_other_job(out):
    """a stale ring of an older job (exited) next to the JSON traces of the
    newest one: grouped by job like JSON traces"""
    old, _ = g.world_job("oldjob", 2)
    for r in old:
        r.coll(0, count=16, site="train_step", caller="train_step")
        r.clock_real -= 86400          # a day earlier
    ranks, wid = g.world_job("newjob", 2)
    for r in ranks:
        r.coll(0, count=16, site="train_step", caller="train_step")
        r.finish()
    os.makedirs(out, exist_ok=True)
    for r in old:
        r.pid += 100
        rank_ring(r, state=EXITED).write(os.path.join(out, ring_name(r)))
    for r in ranks:
        write_json(new_json(r), out, r.filename())
    expect(out, 0, [], nranks=2, job="newjob", other_job="oldjob")


def sc_ring_signaled(out):
    """a ring whose process died of SIGABRT before its JSON write completed;
    no job variable, no rank variable: job and rank from the communicator.
    Both died of SIGABRT while nothing hung: kind dead (issue 33)"""
    ranks, wid = g.world_job("abrt", 2)
    for r in ranks:
        r.coll(0, count=16, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r, state=SIGNALED, signo=6, env_rank=False, job=False).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("dead", wid, 1, [0, 1], "train_step", others=[],
                        message_contains=["killed by SIGABRT", "rank 1 died as well"])],
           nranks=2, job="0x%x" % int(wid, 16),
           ranks={"0": {"ended.state": "signal", "ended.signal_name": "SIGABRT", "ring.from_ring": True}})


def sc_json_bad_new_fields(out):
    """the newer JSON fields damaged: a fingerprint whose checkpoints go
    back, a ring whose next is below its first, a call whose gpu is not a
    known state: each named, the rest of the trace used"""
    ranks, wid = g.world_job("badnew", 2)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=16, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        r.finish()
        d = new_json(r, gpu=gpu_upto({}))
        if r.rank == 0:
            d["comms"][0]["fingerprint"]["checkpoints"] = [[128, "0x1"], [64, "0x2"]]
            d["comms"][0]["fingerprint"]["seq"] = 200
            d["ring"]["next"] = -1
            d["calls"][1][20] = "finished"
        write_json(d, out, r.filename())
    n0 = ranks[0].filename()
    expect(out, 0, [], nranks=2, ranks={"0": {"calls": 2, "ring": None}, "1": {"calls": 3, "ring.lost": 0}},
           notes=[[n0, "fingerprint of this communicator is not used"], [n0, "ring information is not used"],
                  [n0, "calls[1] gpu is not"]])


def sc_ring_py_hang(out):
    """gen_traces' py_extra_collective from ring files only (every rank
    SIGKILLed): every call has the same native stack, the Python stacks
    (PYCODE/PYSTACK blobs, records' pystack) name rank 0's extra
    AllReduce #3 at train.py:198 in log_metrics"""
    ranks, wid = g.py_extra_job("ringpy", natives=("train_step", "train_step"))
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("divergence", wid, 3, [0], "log_metrics", subkind="extra_call", others=[1, 2, 3],
                        site="train.py:198 in log_metrics", others_site="train.py:212 in train_step",
                        python_stack=g.py_json(g.PY_METRIC))], nranks=4,
           ranks={str(k): {"ended.state": "killed", "ring.from_ring": True} for k in range(4)})


def sc_ring_py_newer(out):
    """JSON snapshots with Python stacks at step 1, rings with every call
    after: rank 0's extra all_reduce (step 2, identical native stack) and
    its Python stack exist only in the ring; the merged traces take the
    JSON's Python stacks and the ring's new ones"""
    ranks, wid = g.world_job("ringpynewer", 4)
    for r in ranks:
        r.enable_python()
    snap = {}
    for step in range(6):
        if step == 2:
            for r in ranks:
                d = new_json(r, reason="snapshot", signal=10)
                d["ring"]["file"] = os.path.abspath(os.path.join(out, ring_name(r)))
                snap[r.rank] = d
        for r in ranks:
            if step == 2 and r.rank == 0:
                r.coll(0, count=4096, site="train_step", caller="train_step", py=g.PY_METRIC)
            r.coll(0, count=4096, site="train_step", caller="train_step", py=g.PY_GRAD)
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r).write(os.path.join(out, ring_name(r)))
        write_json(snap[r.rank], out, r.filename())
    assert len(snap[0]["pystacks"]) == 1 and len(ranks[0].pystacks) == 2
    expect(out, 1, [g.F("divergence", wid, 3, [0], "log_metrics", subkind="extra_call", others=[1, 2, 3],
                        site="train.py:198 in log_metrics", others_site="train.py:212 in train_step")], nranks=4,
           ranks={str(k): {"ended.state": "killed", "ring.from_ring": True, "python.state": "ok",
                           "file": ranks[k].filename()} for k in range(4)})


def sc_ring_py_damaged(out):
    """ring_py_hang with rank 0's Python blobs damaged: a code blob whose
    lengths do not fit, and a blob of an unknown kind (a newer writer) that
    must be skipped by its length; ranks 1-3 with a stack naming a code the
    ring does not hold, a record naming a stack it does not hold. Each ring
    is named; rank 0 keeps the Python sites of the stacks that stay whole"""
    ranks, wid = g.py_extra_job("ringpydmg", natives=("train_step", "log_metrics"))
    os.makedirs(out, exist_ok=True)
    rings = [rank_ring(r) for r in ranks]
    # rank 0: an unused code with lengths past its blob; an unknown blob kind first
    rings[0].pycodes.append(["/job/llm/unused.py", "unused", 1])
    rings[0].pystacks.append([[len(rings[0].pycodes) - 1, 5]])
    rings[0].damage_code = len(rings[0].pycodes) - 1
    rings[0].unknown_blob = True
    # rank 1: a stack whose frame names code 999
    rings[1].pystacks[0] = rings[1].pystacks[0][:1] + [[999, 3]]
    # rank 2: a record naming stack 77
    rings[2].records[-1]["pystack"] = 77
    for r, rg in zip(ranks, rings):
        rg.write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("divergence", wid, 3, [0], "log_metrics", subkind="extra_call", others=[1, 2, 3],
                        site="train.py:198 in log_metrics")], nranks=4,
           notes=[[ring_name(ranks[0]), "1 damaged Python code record(s) ignored"],
                  [ring_name(ranks[0]), "1 damaged Python stack record(s) ignored"],
                  [ring_name(ranks[1]), "1 damaged Python stack record(s) ignored"],
                  [ring_name(ranks[2]), "1 record(s) name a Python stack the ring does not hold"]])



# ---- issue 13: *Config collectives, signals, grow, suspend, NCCL info in rings
def sc_ring_config(out):
    """gen_traces' config_extra from ring files only (SIGKILLed): rank 1's
    extra ncclAllReduceConfig (record.extra: a COLLCONFIG blob of
    maxCTAs=4), rank 2's gradient all-reduces through the *Config entry
    point with a NULL config: the same answer as from JSON"""
    ranks, wid = g.config_extra_job("ringcfg", sites=("log_metrics", "train_step"))
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.config_extra_expect(wid)], nranks=4, text_contains=["via ncclAllReduceConfig (maxCTAs=4)"],
           ranks={str(k): {"ended.state": "killed", "ring.from_ring": True, "nccl.version": 23203} for k in range(4)})


def sc_ring_config_mismatch(out):
    """rank 3's config differs from its peers' (rings of processes that exited)"""
    ranks, wid = g.v13_job("ringcfgmis", 4)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=4096, site="train_step", caller="train_step", config=g.CFG8 if r.rank == 3 else g.CFG4)
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r, state=EXITED).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("divergence", wid, 1, [3], "train_step", others=[0, 1, 2], subkind="config",
                        config={"state": "set", "text": "maxCTAs=8", "maxCTAs": 8})], nranks=4)


def sc_ring_signal(out):
    """gen_traces' signal_missing from ring files only: rank 2 never sent
    signal #4 to rank 3 (record.extra holds sigIdx and context)"""
    ranks, wid = g.signal_job("ringsig", sites=("job_sync", "job_sync", "log_metrics", "log_metrics", "train_step"))
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.signal_expect(wid, send="job_sync", wait="log_metrics")], nranks=4,
           ranks={str(k): {"ended.state": "killed", "ring.from_ring": True} for k in range(4)})


def sc_ring_v13_clean(out):
    """gen_traces' v13_clean (every new operation, a GroupSimulateEnd group,
    *Config collectives, a suspended and resumed communicator) from rings
    of processes that exited: no finding"""
    ranks, wid = g.v13_clean_job("ringv13")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r, state=EXITED).write(os.path.join(out, ring_name(r)))
    expect(out, 0, [], nranks=4)


def sc_ring_grow(out):
    """gen_traces' grow_missing with rings: the old processes' JSON traces
    (SIGTERM), the new ones killed (rings only, kind Grow, no parent, the
    uniqueId's hash, job from it); rank 5 never issued #3 of the grown
    communicator of 6"""
    ranks, wid, gid = g.grow_job("ringgrow", job_var=False)
    for step in range(3):
        for r in ranks:
            if r.rank == 5 and step == 2:
                continue
            r.coll(r.gc, count=8192, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        if r.rank < 4:
            r.finish("signal", 15)
            write_json(new_json(r), out, r.filename())
        else:
            rank_ring(r, job=False).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("missing", gid, 3, [5], others=[0, 1, 2, 3, 4], comm_ranks=[0, 1, 2, 3, 4, 5])], nranks=6,
           job="ringgrow", ranks={"5": {"ended.state": "killed", "ring.from_ring": True}})


def sc_ring_nccl(out):
    """gen_traces' nccl_unknown from rings: the NCCLINFO blobs give one
    warning per library and version"""
    ranks, wid = g.v13_job("ringnccl", 4)
    for r in ranks:
        if r.rank < 2:
            r.nccl = {"version": 23300, "library": g.NCCL_LIB, "exports": 195, "unknown_functions": ["ncclFoo", "ncclBar"]}
        else:
            r.nccl = {"version": 23301, "library": "/opt/nccl/lib/libnccl.so.2", "exports": 194,
                      "unknown_functions": ["ncclFoo"]}
        r.coll(0, count=16, site="train_step", caller="train_step")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r, state=EXITED).write(os.path.join(out, ring_name(r)))
    expect(out, 0, [], nranks=4, warnings=[
        {"kind": "nccl_unknown_functions", "version": 23300, "library": g.NCCL_LIB, "functions": ["ncclFoo", "ncclBar"],
         "ranks": [0, 1]},
        {"kind": "nccl_unknown_functions", "version": 23301, "library": "/opt/nccl/lib/libnccl.so.2",
         "functions": ["ncclFoo"], "ranks": [2, 3]}],
        text_contains=["NCCL 2.33.0 (%s) exports ncclFoo and ncclBar, which trshim does not record" % g.NCCL_LIB])


def sc_ring_suspend(out):
    """gen_traces' suspend_killed from rings (every process SIGKILLed): rank
    0 resumed the training communicator and waits in #5, ranks 1-3 have it
    suspended (the slot's suspended flag): missing / suspended"""
    ranks, wid, tid = g.suspend_job("ringsusp")
    r0 = ranks[0]
    r0.resume(r0.tc)
    r0.coll(r0.tc, count=1 << 16, site="log_metrics", caller="train_step", gpu="pending")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r, gpu=lambda rk, k, c: (GPU_PENDING, 0) if c[20] == "pending" else
                  (GPU_DONE, c[15] + 3000) if c[15] is not None and c[2] > 0 and not vocab.op_has(c[0], "GROUP")
                  else (GPU_UNTRACKED, 0)).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("missing", tid, 5, [1, 2, 3], others=[0], subkind="suspended")], nranks=4)

# ---- issue 16: CUDA graphs in rings (GRAPH blobs, GraphLaunch records)
def graph_gpu(r, k, call):
    """completion as gen_traces recorded it for Rank r's call k (its "gpu" and "done_ns")"""
    c = r.calls[k]
    if c[20] == "pending":
        return GPU_PENDING, 0
    return (GPU_DONE, c[19]) if c[20] == "done" else (GPU_UNTRACKED, 0)


def sc_ring_graph_fewer(out):
    """gen_graphs' graph_fewer from ring files only (every process
    SIGKILLed, completion in the records): rank 3 replayed the graph 41
    times, ranks 0-2 42 times; the same answer as from JSON, the replay
    named with its Python capture and launch lines"""
    import gen_graphs as gg
    ranks, wid, gi = gg.fewer_job("ringgraph")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r, gpu=graph_gpu, state=EXITED if r.rank == 3 else RUNNING).write(os.path.join(out, ring_name(r)))
    f = gg.fewer_expect(ranks, wid, gi)
    for m in f["stuck"]["members"].values():
        m.pop("pending_s", None)
    expect(out, 1, [f], nranks=4,
           ranks={"0": {"ended.state": "killed", "ring.from_ring": True}, "3": {"ended.state": "exited"}})


def sc_ring_graph_json_newer(out):
    """gen_graphs' graph_fewer with JSON traces written before the last
    launches (snapshots) and rings holding the rest: the graphs come from
    the rings (the JSON's ones where a ring lacks one); the same answer"""
    import gen_graphs as gg
    ranks, wid, gi = gg.fewer_job("ringgraphjs")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        gpu = graph_gpu
        rg = rank_ring(r, gpu=gpu, state=EXITED if r.rank == 3 else RUNNING)
        if r.rank == 1:
            rg.graphs = []            # its blob area was full: the JSON's graph is used
        rg.write(os.path.join(out, ring_name(r)))
        d = new_json(r, ring_file=os.path.join(out, ring_name(r)), nxt=len(r.calls) - 10, gpu=gpu, reason="snapshot",
                     signal=10)
        write_json(d, out, r.filename())
    f = gg.fewer_expect(ranks, wid, gi)
    for m in f["stuck"]["members"].values():
        m.pop("pending_s", None)
    expect(out, 1, [f], nranks=4, ranks={"1": {"ring.from_ring": True}})


def oom_job(name):
    """gen_traces' oom job: rank 1's allocation of 40 GiB fails in step 2
    (its device holds 80 GiB); the others go on into collective #3. The
    allocations are made from train_step (a function of the module the
    tests symbolize with: job_extra). Returns
    (ranks, wid, the seq of step 2's collective, step at which to snapshot)"""
    ranks, wid = g.world_job(name, 4)
    oom_seq, snaps = None, {}
    for step in range(3):
        if step == 2:
            # (a copy: gen_traces' to_json shares its lists with the rank, which goes on)
            snaps = {r.rank: json.loads(json.dumps(new_json(r, reason="snapshot", signal=10))) for r in ranks}
        for r in ranks:
            if r.rank == 1 and step == 2:
                r.alloc(40 << 30, site="train_step", fail=True, capacity=80 << 30)
                continue
            r.alloc(1 << 20, site="train_step")
            s = r.coll(0, count=1 << 16, site="train_step")
            if step == 2:
                oom_seq = s
    return ranks, wid, oom_seq, snaps


def sc_ring_oom(out):
    """the oom job from ring files only (every rank SIGKILLed): rank 1's
    failed allocation and every rank's memory come from the ring headers"""
    ranks, wid, oom_seq, _ = oom_job("ringoom")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r, mem=True).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("oom", wid, 2, [1], "train_step", bytes=40 << 30),
                    g.F("missing", wid, oom_seq, [1])], nranks=4,
           ranks={str(r.rank): {"peak_bytes": r.peak, "alloc_failures": 1 if r.rank == 1 else 0,
                                "ring.from_ring": True, "ended.state": "killed"} for r in ranks})


def sc_ring_oom_newer(out):
    """the oom job: JSON snapshots of step 2's start (memory, no failure yet),
    then every rank SIGKILLed: rank 1's failure comes from its ring header
    (after the snapshot; rank 1 made no call since, so its JSON's calls are
    used), the devices from the snapshots (they have them)"""
    ranks, wid, oom_seq, snaps = oom_job("oomnewer")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rf = os.path.abspath(os.path.join(out, ring_name(r)))
        rank_ring(r, mem=True).write(rf)
        d = snaps[r.rank]
        d["ring"]["file"] = rf
        write_json(d, out, r.filename())
    peak = {r.rank: snaps[r.rank]["memory"]["devices"][0]["peak_bytes"] for r in ranks}
    expect(out, 1, [g.F("oom", wid, 2, [1], "train_step", bytes=40 << 30),
                    g.F("missing", wid, oom_seq, [1])], nranks=4,
           ranks={str(r.rank): {"peak_bytes": peak[r.rank], "alloc_failures": 1 if r.rank == 1 else 0,
                                "ring.from_ring": r.rank != 1, "ended.state": "killed"} for r in ranks})


def sc_ring_mem_old(out):
    """the oom job's rings written by an older shim (the header's memory all
    zeros), every rank killed: no memory is known ("-"), no oom finding"""
    ranks, wid, oom_seq, _ = oom_job("memold")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rank_ring(r).write(os.path.join(out, ring_name(r)))
    expect(out, 1, [g.F("missing", wid, oom_seq, [1])], nranks=4,
           ranks={str(r.rank): {"peak_bytes": None, "alloc_failures": 0} for r in ranks})


SCENARIOS = {k[3:]: v for k, v in sorted(globals().items()) if k.startswith("sc_")}


def main():
    args = sys.argv[1:]
    if args and args[0] == "--list":
        print("\n".join(SCENARIOS))
        return
    if "--module" in args:
        i = args.index("--module")
        use_module(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2 or args[0] not in SCENARIOS:
        sys.exit(__doc__)
    g.random.seed(1234)
    SCENARIOS[args[0]](args[1])


if __name__ == "__main__":
    main()
