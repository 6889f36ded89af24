"""Reader of trshim ring files (include/trshim/ring_format.h, docs/trace-format.md
"Ring file"), for the tests: stdlib only.

    read_ring(path) -> {"header": {...}, "comms": [...], "records": [...],
                        "stacks": {index: [ip, ...]}, "modules": [...],
                        "pycodes": {index: (file, qualname, firstlineno)},
                        "pystacks": {index: [(code, line), ...]}}

- header: every trr_header field by its C name (strings decoded, NULs cut);
  "mem" is the list of its TRR_MEM_DEVICES trr_mem slots, each a dict of
  trr_mem fields (fail_api decoded), unused ones included (used 0).
- comms: one entry per slot handed out (header ncomms, at most max_comms), the
  list index is the slot; None for a slot whose `valid` is not 1 yet.
- records: the window [max(0, head - capacity), head) in index order, only
  records whose stamp says they are complete (stamp == index + 1); each has
  its "index" besides the trr_record fields.
- stacks: TRR_BLOB_STACK blobs, index -> return addresses (innermost first).
- modules: TRR_BLOB_MODULE blobs in order (path, base, lo, hi, build_id).
- pycodes: TRR_BLOB_PYCODE blobs, code index -> (file, qualname, firstlineno).
- pystacks: TRR_BLOB_PYSTACK blobs, index -> [(code index, line)], innermost
  first; "pystack_order_errors": the indexes of Python stacks that came
  before a code object they use (the format forbids it: should be []).
Blobs are read up to the first zero kind or the end of the blob area; a kind
this reader does not know is skipped by its size.

The struct formats below are the C layout of ring_format.h written out with
explicit padding ("<": little-endian, no implicit alignment); sizes are
checked against the header's record_bytes/comm_bytes.
"""
import os
import struct

import vocab

MAGIC = b"TRSHRING"
VERSION = 1

OPS = vocab.OPS
STATES = {1: "running", 2: "exited", 3: "signaled"}
REC_STATES = ["empty", "entered", "returned"]
CAPTURING = [False, True, None]
GPU = [None, "pending", "done", "error", "aborted"]
def _comm_table(macro):
    """the names of a TRR_COMM_* table of include/trshim/ring_format.h, in slot order (NULL: None)"""
    import re
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "include", "trshim", "ring_format.h")) as f:
        text = f.read()
    body = re.search(r"#define %s\(X\)(.*?)\n(?!\s*X\()" % macro, text, re.S).group(1)
    return [None if n == "NULL" else n.strip('"') for n in re.findall(r"X\(\w+, (NULL|\"\w+\")\)", body)]


KINDS = _comm_table("TRR_COMM_KINDS")
ENDS = _comm_table("TRR_COMM_ENDS")
NONE = -2 ** 31               # TRR_NONE
BLOB_END, BLOB_MODULE, BLOB_STACK, BLOB_PYCODE, BLOB_PYSTACK, BLOB_COLLCONFIG, BLOB_NCCLINFO, BLOB_GRAPH = \
    0, 1, 2, 3, 4, 5, 6, 7
GRAPH = struct.Struct("<IIQQQiiiiIi")
GRAPH_FIELDS = ["index", "ncalls", "capture_id", "stream", "graph", "stack", "pystack", "end_stack", "end_pystack",
                "dropped", "base"]
GRAPH_CALL = struct.Struct("<BBHiiiiiiIQQQQQQ")
GRAPH_CALL_FIELDS = ["op", "lane", "pad", "comm", "dtype", "redop", "root", "stack", "pystack", "pad2", "count",
                     "sendbuff", "recvbuff", "stream", "n", "extra"]
COLLCONFIG = struct.Struct("<IIiiiiiiQII")
COLLCONFIG_FIELDS = ["index", "is_null", "min_ctas", "max_ctas", "nvls_ctas", "cga_cluster_size", "force_alg",
                     "cta_policy", "user_tag", "alg_len", "pad"]
NCCLINFO = struct.Struct("<iIII")

MEM_DEVICES = 8               # TRR_MEM_DEVICES
MEM = struct.Struct("<IiQQQQQQQQQQQiii28s")
MEM_FIELDS = ["used", "device", "live", "peak", "allocs", "frees", "peak_ns", "failures", "fail_bytes", "fail_live",
              "fail_free", "fail_total", "fail_ns", "fail_stack", "fail_pystack", "fail_code", "fail_api"]
HEADER = struct.Struct("<8sIIIIQII5Q4idQ64s256s32s32s16sIIQIiiIQQQQQIIQQQIIQQ%dsQIIQ" % (MEM_DEVICES * MEM.size))
HEADER_FIELDS = ["magic", "version", "header_bytes", "record_bytes", "comm_bytes", "capacity", "max_comms",
                 "fp_interval", "off_comms", "off_records", "off_blobs", "blob_bytes", "file_bytes", "pid",
                 "env_rank", "world_size", "local_rank", "start_realtime", "start_mono_ns", "host", "job_id",
                 "job_source", "rank_source", "trshim_version", "stack_depth", "pad0", "head", "ncomms",
                 "state", "signo", "writes", "heartbeat_ns", "end_ns", "blob_used", "stacks_dropped",
                 "comms_dropped", "hang_sec", "stalls", "stall_ns", "stall_rec", "stall_since_ns", "pending", "pad2",
                 "pending_since_ns", "pass_ns", "mem", "mem_devices_dropped", "lost_errno", "file_comms",
                 "file_records"]
RECORD = struct.Struct("<QIBBBBiiiiiiiiIiQQQQQQQQQ")
RECORD_FIELDS = ["stamp", "state", "op", "depth", "capturing", "gpu", "comm", "dtype", "redop", "root", "stack",
                 "tid", "device", "rc", "group", "pystack", "seq", "count", "sendbuff", "recvbuff", "stream",
                 "enter_ns", "exit_ns", "done_ns", "extra"]
COMM = struct.Struct("<IiQQiiiiiIQiiiiiiiiQQQiIQQQII")    # then the checkpoints, then COMM_TAIL
COMM_TAIL = struct.Struct("<QiiII")
COMM_TAIL_FIELDS = ["grow_uid", "grow_ranks", "suspended", "suspends", "pad1"]
COMM_FIELDS = ["valid", "kind", "id", "parent_id", "parent", "blocking", "has_color", "color", "key", "group",
               "init_enter", "init_stack", "from_uid", "size", "rank", "device", "init_done", "init_rc",
               "end_kind", "init_exit", "end_enter", "end_exit", "end_rc", "pad", "colls", "fp_seq", "fp_hash",
               "fp_step", "ncheckpoints"]
CHECKPOINTS = 48
CHECKPOINT = struct.Struct("<QQ")
BLOB = struct.Struct("<II")
MODULE = struct.Struct("<IIQQQ48s")
STACK = struct.Struct("<II")
PYCODE = struct.Struct("<IiII")
PYSTACK = struct.Struct("<II")

assert HEADER.size == 1752 and MEM.size == 136 and RECORD.size == 128 and COMM.size + CHECKPOINTS * CHECKPOINT.size == 920 and COMM_TAIL.size == 24
assert MODULE.size == 80 and STACK.size == 8 and PYCODE.size == 16 and PYSTACK.size == 8
assert GRAPH.size == 56 and GRAPH_CALL.size == 80


class RingError(ValueError):
    pass


def _cstr(b):
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_header(data):
    if len(data) < HEADER.size:
        raise RingError("file shorter than a ring header (%d bytes)" % len(data))
    h = dict(zip(HEADER_FIELDS, HEADER.unpack_from(data, 0)))
    if h["magic"] != MAGIC:
        raise RingError("not a ring file (magic %r)" % h["magic"])
    if h["version"] != VERSION:
        raise RingError("ring version %d, this reader knows %d" % (h["version"], VERSION))
    if (h["record_bytes"], h["comm_bytes"], h["header_bytes"]) != (RECORD.size, 1024, 4096):
        raise RingError("unexpected sizes %r" % ((h["header_bytes"], h["record_bytes"], h["comm_bytes"]),))
    for k in ("host", "job_id", "job_source", "rank_source", "trshim_version"):
        h[k] = _cstr(h[k])
    h["mem"] = [dict(zip(MEM_FIELDS, MEM.unpack_from(h["mem"], k * MEM.size))) for k in range(MEM_DEVICES)]
    for m in h["mem"]:
        m["fail_api"] = _cstr(m["fail_api"])
    h["state_name"] = STATES.get(h["state"])
    return h


def parse_record(data, off):
    return dict(zip(RECORD_FIELDS, RECORD.unpack_from(data, off)))


def parse_comm(data, off):
    c = dict(zip(COMM_FIELDS, COMM.unpack_from(data, off)))
    n = min(c["ncheckpoints"], CHECKPOINTS)
    base = off + COMM.size
    c["checkpoints"] = [CHECKPOINT.unpack_from(data, base + i * CHECKPOINT.size) for i in range(n)]
    c.update(zip(COMM_TAIL_FIELDS, COMM_TAIL.unpack_from(data, base + CHECKPOINTS * CHECKPOINT.size)))
    return c


def read_ring_bytes(data):
    h = parse_header(data)
    if len(data) < h["file_bytes"]:
        raise RingError("file is %d bytes, its header says %d" % (len(data), h["file_bytes"]))
    comms = []
    for slot in range(min(h["ncomms"], h["max_comms"])):
        c = parse_comm(data, h["off_comms"] + slot * h["comm_bytes"])
        c["slot"] = slot
        comms.append(c if c["valid"] == 1 else None)
    cap, head = h["capacity"], h["head"]
    records = []
    for i in range(max(0, head - cap), head):
        r = parse_record(data, h["off_records"] + (i % cap) * h["record_bytes"])
        if r["stamp"] != i + 1:
            continue          # not committed, torn, or overwritten by a newer record
        r["index"] = i
        records.append(r)
    stacks, modules, pycodes, pystacks, order_errors, configs, nccl, graphs = {}, [], {}, {}, [], {}, None, {}
    off, end = h["off_blobs"], h["off_blobs"] + h["blob_bytes"]
    while off + BLOB.size <= end:
        kind, nbytes = BLOB.unpack_from(data, off)
        if kind == BLOB_END:
            break
        p = off + BLOB.size
        if p + nbytes > end:
            break
        if kind == BLOB_MODULE:
            index, path_len, base, lo, hi, bid = MODULE.unpack_from(data, p)
            path = _cstr(data[p + MODULE.size:p + MODULE.size + path_len])
            modules.append({"index": index, "path": path, "base": base, "lo": lo, "hi": hi,
                            "build_id": _cstr(bid)})
        elif kind == BLOB_STACK:
            index, n = STACK.unpack_from(data, p)
            stacks[index] = list(struct.unpack_from("<%dQ" % n, data, p + STACK.size))
        elif kind == BLOB_PYCODE:
            index, first, file_len, name_len = PYCODE.unpack_from(data, p)
            q = p + PYCODE.size
            pycodes[index] = (_cstr(data[q:q + file_len]), _cstr(data[q + file_len:q + file_len + name_len]), first)
        elif kind == BLOB_PYSTACK:
            index, n = PYSTACK.unpack_from(data, p)
            flat = struct.unpack_from("<%s" % ("Ii" * n), data, p + PYSTACK.size)
            pystacks[index] = [(flat[2 * k], flat[2 * k + 1]) for k in range(n)]
            if any(code not in pycodes for code, _line in pystacks[index]):
                order_errors.append(index)
        elif kind == BLOB_COLLCONFIG:
            cfg = dict(zip(COLLCONFIG_FIELDS, COLLCONFIG.unpack_from(data, p)))
            q = p + COLLCONFIG.size
            cfg["alg"] = _cstr(data[q:q + cfg["alg_len"]]) if cfg["alg_len"] else None
            configs[cfg["index"]] = cfg
        elif kind == BLOB_NCCLINFO:
            version, exports, path_len, unknown_len = NCCLINFO.unpack_from(data, p)
            q = p + NCCLINFO.size
            names = data[q + path_len:q + path_len + unknown_len].split(b"\0")
            nccl = {"version": version, "exports": exports, "path": _cstr(data[q:q + path_len]),
                    "unknown": [n.decode() for n in names if n]}
        elif kind == BLOB_GRAPH:
            g = dict(zip(GRAPH_FIELDS, GRAPH.unpack_from(data, p)))
            q = p + GRAPH.size
            g["calls"] = [dict(zip(GRAPH_CALL_FIELDS, GRAPH_CALL.unpack_from(data, q + k * GRAPH_CALL.size)))
                          for k in range(min(g["ncalls"], (nbytes - GRAPH.size) // GRAPH_CALL.size))]
            for c in g["calls"]:
                c["op"] = OPS[c["op"]] if c["op"] < len(OPS) else c["op"]
            graphs[g["index"]] = g
        off = p + nbytes
    return {"header": h, "comms": comms, "records": records, "stacks": stacks, "modules": modules,
            "pycodes": pycodes, "pystacks": pystacks, "pystack_order_errors": order_errors, "configs": configs,
            "nccl": nccl, "graphs": graphs}


def read_ring(path):
    with open(path, "rb") as f:
        return read_ring_bytes(f.read())


def module_of(ring, ip):
    """The module whose [lo, hi) holds ip, None."""
    for m in ring["modules"]:
        if m["lo"] <= ip < m["hi"]:
            return m
    return None


def mix(z):
    """splitmix64's finalizer: the fingerprint's mixing function."""
    m = (1 << 64) - 1
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & m
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & m
    return z ^ (z >> 31)


def signature(op, dtype, redop, root, count):
    """The fingerprint term of one collective (docs/trace-format.md):
    op as OPS index (Bcast counts as Broadcast), dtype/redop numbers, redop
    and root None when absent."""
    op = OPS.index("Broadcast") if op == OPS.index("Bcast") else op
    rc = 6 if redop is None else redop if 0 <= redop < 5 else 5
    rt = 0 if root is None else (root + 1) & 0xffffffff
    sig = op | (dtype & 0xffffffff) << 8 | rc << 16 | rt << 32
    return mix(sig ^ mix(count))


def fingerprint(calls, interval=64, max_checkpoints=CHECKPOINTS):
    """(hash, step, checkpoints) after calls = [(op, dtype, redop, root, count), ...],
    numbered 1, 2, ... as the shim does."""
    h, step, cps = 0, interval, []
    for s, c in enumerate(calls, 1):
        h = mix(h ^ signature(*c))
        if s % step == 0:
            if len(cps) == max_checkpoints:
                cps = [x for x in cps if x[0] % (2 * step) == 0]
                step *= 2
            if s % step == 0:
                cps.append((s, h))
    return h, step, cps
