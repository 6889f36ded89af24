"""trshim unpack: a JSON trace with its calls and checks unpacked (version 2's packed rows, the
codec in trshim.packed_rows) into version 1's arrays, for reading or for tools of version 1."""
import json
import sys

from trshim import packed_rows
from trshim.messages import say


def trace_as_v1(data):
    """the bytes of a JSON trace -> (bytes of version 1's form, or None when
    it is version 1 already); ValueError when it is not a readable trace"""
    try:
        tr = json.loads(data.decode("utf-8"))
    except ValueError as e:            # (UnicodeDecodeError too)
        raise ValueError("not valid JSON: %s" % e)
    if not isinstance(tr, dict) or tr.get("format") != "trshim-trace":
        raise ValueError("not a trshim trace (no \"format\": \"trshim-trace\")")
    v = tr.get("version")
    if type(v) is not int or v not in (1, 2):
        raise ValueError("unknown trace format version %s (this trshim reads versions 1 and 2)" % json.dumps(v))
    if "calls" not in tr:
        raise ValueError("field calls is missing")
    packed_rows.unpack_trace(tr)     # (checks are absent when they were off)
    if v == 1:
        return None
    tr["version"] = 1
    try:
        return (json.dumps(tr, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:         # a lone surrogate (\\ud800): as an escape
        return (json.dumps(tr, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


def cmd_unpack(args):
    try:
        with open(args.trace, "rb") as f:
            data = f.read()
    except OSError as e:
        say("%s: cannot read: %s" % (args.trace, e.strerror or e))
        return 1
    try:
        out = trace_as_v1(data)
    except ValueError as e:
        say("%s: %s" % (args.trace, str(e).replace("\n", " ")))
        return 1
    sys.stdout.flush()
    sys.stdout.buffer.write(data if out is None else out)
    sys.stdout.buffer.flush()
    return 0
