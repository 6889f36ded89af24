"""The NCCL vocabulary (include/trshim/nccl_calls.h) for Python: the
operations a trace records and every NCCL host function trshim knows.
Parsed from the header itself, so there is one table; `trshim-vocab`
(tests/common/vocab_dump.c) prints the C compiler's view of it as JSON and
tests/versions/check_versions.py (vocab-json) compares the two. Also the
fields of a trace's call and check rows (include/trshim/trace_format.h).

    OPS            operation names in ring order ("AllReduce", ...)
    OP_FLAGS       {name: set of flags} ("COLL", "ROOTED", "REDUCING", "P2P", "ONESIDED", "GROUP", "SENDS")
    OP_ALIAS       {name: the name it is on the wire} (Bcast -> Broadcast)
    FUNCS          {function: {"op": name or None, "kind": "COLL"..., "since": 21800, "action": "WRAP"|"PASS"}}
    KINDS          {kind: description}
    DTYPES         {name: {"bytes": n, "float": bool}} in ncclDataType_t order; FLOATS the float ones
    REDOPS         reduction names in ncclRedOp_t order
    CUDA_FUNCS     {name: {"lib": "RT"|"DRV", "about": "MEMORY"...}}: the CUDA functions the shim wraps
                   (include/trshim/cuda_calls.h)
    CALL_FIELDS    [{"name", "read", "since"}] in "call_fields" order (read: REQUIRED, OPTIONAL, UNREAD)
    CHECK_FIELDS   the same for "check_fields"
    call_fields(since) the call fields that traces as old as `since` had ("FIRST", "COMPLETION", ...),
                   or only those that came with it (only=True)
"""
import os
import re

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "trshim", "nccl_calls.h")
TRACE_HEADER = os.path.join(os.path.dirname(HEADER), "trace_format.h")
CUDA_HEADER = os.path.join(os.path.dirname(HEADER), "cuda_calls.h")


def _macro_body(text, name):
    # the body runs while lines end with a backslash
    start = text.index("#define %s(X)" % name)
    lines = []
    for line in text[start:].split("\n"):
        lines.append(line)
        if not line.rstrip().endswith("\\"):
            break
    return "\n".join(lines)


def _rows(body):
    # X(...) rows; comments removed first
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [[f.strip() for f in m.group(1).split(",")] for m in re.finditer(r"\bX\(([^()]*)\)", body)]


def _load():
    text = open(HEADER).read()
    flags = {m.group(1): int(m.group(2), 16) for m in re.finditer(r"#define TR_OPF_(\w+) (0x[0-9a-f]+)", text)}
    ops, op_flags, alias_of = [], {}, {}
    suffix_name = {}
    for suffix, name, fl, alias in _rows(_macro_body(text, "TR_NCCL_OPS")):
        name = name.strip('"')
        ops.append(name)
        suffix_name[suffix] = name
        op_flags[name] = {f for f in (p.strip().replace("TR_OPF_", "") for p in fl.split("|")) if f in flags}
        alias_of[name] = alias
    op_alias = {n: suffix_name[a] for n, a in alias_of.items()}
    kinds = {k: d.strip('"') for k, d in _rows(_macro_body(text, "TR_NCCL_KINDS"))}
    funcs = {}
    for name, op, kind, since, action in _rows(_macro_body(text, "TR_NCCL_FUNCS")):
        funcs[name] = {"op": None if op == "NONE" else suffix_name[op], "kind": kind, "since": int(since),
                       "action": action}
    dtypes = {name.strip('"'): {"bytes": int(size), "float": kind == "FLOAT"}
              for _id, name, size, kind in _rows(_macro_body(text, "TR_NCCL_DTYPES"))}
    redops = [name.strip('"') for _id, name in _rows(_macro_body(text, "TR_NCCL_REDOPS"))]
    return ops, op_flags, op_alias, kinds, funcs, dtypes, redops


OPS, OP_FLAGS, OP_ALIAS, KINDS, FUNCS, DTYPES, REDOPS = _load()
FLOATS = {n for n, d in DTYPES.items() if d["float"]}


def _fields(table):
    text = open(TRACE_HEADER).read()
    return [{"name": name.strip('"'), "read": read, "since": since}
            for _id, name, read, since in _rows(_macro_body(text, table))]


CALL_FIELDS = _fields("TRSHIM_CALL_FIELDS")
CUDA_FUNCS = {name: {"lib": lib, "about": about}
              for name, lib, about in _rows(_macro_body(open(CUDA_HEADER).read(), "TR_CUDA_FUNCS"))}
CHECK_FIELDS = _fields("TRSHIM_CHECK_FIELDS")
_ERAS = list(dict.fromkeys(f["since"] for f in CALL_FIELDS))   # oldest first, as the table has them


def call_fields(since, only=False):
    last = _ERAS.index(since)
    return [f["name"] for f in CALL_FIELDS
            if (_ERAS.index(f["since"]) == last if only else _ERAS.index(f["since"]) <= last)]
WRAPPED = sorted(n for n, f in FUNCS.items() if f["action"] == "WRAP")


def op_has(name, flag):
    return flag in OP_FLAGS.get(name, ())


def as_json():
    """the same document trshim-vocab prints"""
    return {"ops": [{"name": n, "flags": sorted(OP_FLAGS[n]), "alias": OP_ALIAS[n]} for n in OPS],
            "kinds": KINDS,
            "functions": [dict(name=n, **FUNCS[n]) for n in FUNCS],
            "dtypes": DTYPES, "redops": REDOPS, "cuda_functions": CUDA_FUNCS,
            "call_fields": CALL_FIELDS, "check_fields": CHECK_FIELDS}
