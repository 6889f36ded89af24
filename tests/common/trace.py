"""Reading the shim's JSON traces in the tests, whatever version wrote them
(docs/trace-format.md): version 1's "calls" and "checks" are arrays of rows,
version 2's the packed objects ("Packed rows"), decoded by the package's one
codec, python/trshim/packed_rows.py (imported from the source tree, not
copied).

    load_trace(path) -> dict        json.load, with "calls" and "checks" as version 1's rows (the version
                                    kept); error=Failure: the exception raised on damaged calls or checks
                                    (ValueError)
    pack_trace(trace) -> dict       a version-1 trace as version 2 (ValueError: not packable)
    shim_versions()                 the versions the shim of this tree may write
"""
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
from trshim.packed_rows import pack_rows, unpack_rows, unpack_trace  # noqa: E402,F401

FORMAT_H = os.path.join(ROOT, "include", "trshim", "trace_format.h")


def header_version():
    """TRSHIM_TRACE_VERSION of include/trshim/trace_format.h"""
    with open(FORMAT_H) as f:
        m = re.search(r"^#define TRSHIM_TRACE_VERSION (\d+)\s*$", f.read(), re.M)
    if not m:
        raise RuntimeError("%s: no TRSHIM_TRACE_VERSION" % FORMAT_H)
    return int(m.group(1))


def shim_versions():
    """the trace versions a shim of this tree writes: the header's (a
    version's form of "calls" and "checks" is checked by load_trace)"""
    return [header_version()]


def unpacked(t, what="trace", error=ValueError):
    """t (a parsed trace) with its calls and checks as version 1's rows, in
    place (the codec's unpack_trace); the version is kept. error
    (ValueError): calls or checks in the other version's form, or damaged
    packed rows"""
    try:
        return unpack_trace(t)
    except ValueError as e:
        raise error("%s: %s" % (what, e))


def load_trace(path, error=ValueError):
    """the trace at path (strict UTF-8 JSON) with "calls" and "checks" as
    version 1's rows; every other field as written (its "version" too).
    error: the exception raised on calls or checks that are damaged or not
    of the version's form"""
    with open(path, encoding="utf-8") as f:
        t = json.load(f)
    if isinstance(t, dict):
        unpacked(t, path, error)
    return t


def pack_trace(trace):
    """a new dict: the version-1 trace as version 2 (calls packed, and checks
    when present; the rest shared with trace); ValueError when it is not a
    version-1 trshim trace with calls a list (checks a list or absent), or a
    value of its calls or checks cannot be packed"""
    if not isinstance(trace, dict) or trace.get("format") != "trshim-trace":
        raise ValueError("not packable: not a trshim trace")
    if type(trace.get("version")) is not int or trace["version"] != 1:
        raise ValueError("not packable: version %r, not 1" % (trace.get("version"),))
    if not isinstance(trace.get("calls"), list):
        raise ValueError("not packable: calls is not a list")
    if "checks" in trace and not isinstance(trace["checks"], list):
        raise ValueError("not packable: checks is not a list")
    out = dict(trace)
    out["version"] = 2
    out["calls"] = pack_rows(trace["calls"])
    if "checks" in trace:
        out["checks"] = pack_rows(trace["checks"])
    return out
