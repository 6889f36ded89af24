#!/usr/bin/env python3
"""The codec of version 2's packed rows (python/trshim/packed_rows.py,
docs/trace-format.md "Packed rows": calls and checks) on its own: exact
round trips (negative deltas, 2^64-1 addresses, int64's bounds in one
position, addresses and integers sharing a position's previous value, pairs,
strings that look like addresses but are not "0x%x", empty and 64-value
rows; check rows of every status, null, long reasons), the bytes of known
rows against the spec's layout, every damage the spec lists (a ValueError
saying what, its first word the field: calls or checks), values that cannot
be packed; tests/common/trace.py's load_trace and pack_trace (calls and
checks); `python -m trshim unpack` (a version-2 trace printed as version 1,
a version-1 trace unchanged, a damaged one: one line and status 1) and the
bundle's count of calls of either version.

    check_packed_rows.py
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import trace as trc  # noqa: E402  (tests/common/trace.py)
from trshim import cli  # noqa: E402  (python/ is on the path through trace.py)
from trshim.packed_rows import pack_rows, unpack_rows  # noqa: E402

I64_MIN, I64_MAX, U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def round_trip(rows, what, field="calls"):
    obj = pack_rows(rows)
    check(set(obj) == {"encoding", "rows", "strings", "data"} and obj["encoding"] == "trshim-rows-1"
          and obj["rows"] == len(rows), "%s: the object %r" % (what, {k: obj[k] for k in obj if k != "data"}))
    json.dumps(obj)
    got = unpack_rows(json.loads(json.dumps(obj)), field)
    check(got == rows, "%s: round trip\n  %r\n  %r" % (what, rows[:4], got[:4]))
    # the same types (True is not 1, [a, b] is a list)
    check([[type(v) for v in r] for r in got] == [[type(v) for v in r] for r in rows], "%s: the types" % what)
    return obj


def raw(data, rows, strings=(), encoding="trshim-rows-1"):
    return {"encoding": encoding, "rows": rows, "strings": list(strings),
            "data": base64.b64encode(bytes(data)).decode()}


def damaged(obj, want, what, field=None):
    """obj damaged: unpack_rows says want, as calls (field None: the default) or checks (field "checks": every
    message begins with the field, as with calls)"""
    try:
        got = unpack_rows(obj) if field is None else unpack_rows(obj, field)
    except ValueError as e:
        msg = str(e)
        check(want in msg, "%s: %r does not say %r" % (what, msg, want))
        f = field or "calls"
        check(msg.startswith(f + " ") or msg.startswith("field %s " % f) or msg.startswith("field %s." % f),
              "%s: %r does not begin with %s" % (what, msg, f))
        if field == "checks":
            check("calls" not in msg, "%s: %r names calls" % (what, msg))
        return
    check(False, "%s: no ValueError (got %r)" % (what, got))


def not_packable(rows, what):
    try:
        pack_rows(rows)
    except ValueError as e:
        check(str(e).startswith("not packable: "), "%s: %r" % (what, str(e)))
        return
    check(False, "%s: packed" % what)


def codec():
    t = 1_700_000_000_000_000_000
    rows = [["AllReduce", 0, 1, 2048, "float32", "sum", None, None, "0x7f0000100000", "0x7f0000100000", "0x0",
             False, 0, 0, t, t + 5000, 4242, 0, 3, None, "pending", -1, None, None, None, None, None],
            ["Send", 1, 1, 16, "bfloat16", None, None, 3, "0x7f0000000000", None, "0x55d0c0a01000",
             True, 2, 1, t - 99, None, 4242, 7, -1, None, None, 5, 0, [3, -2], 1, 2, "send"],
            ["WaitSignal", -1, 0, 0, None, None, 0, -7, "0x1", "0xffffffffffffffff", "0xfffffffffffffffe",
             None, 1 << 40, -(1 << 40), 0, 1, 0, None, -1, t + 1, "done", -1, -1, [I64_MIN, I64_MAX], None, None,
             None]]
    round_trip(rows, "calls of each kind")
    round_trip([], "no calls")
    round_trip([[]], "an empty row")
    round_trip([list(range(-32, 32))], "a row of 64 values")
    round_trip([[I64_MIN], [I64_MAX], [I64_MIN], [0], [I64_MAX], [-1], [I64_MIN]], "int64's bounds (wrapping deltas)")
    round_trip([["0x0"], ["0x%x" % U64_MAX], ["0x0"], ["0x%x" % U64_MAX], ["0x8000000000000000"], ["0x1"]],
               "addresses up to 2^64-1")
    round_trip([[5, "0xffffffffffffffff", -1, "0x0"], ["0xffffffffffffffff", -1, "0xffffffffffffffff", I64_MIN],
                [I64_MAX, "0x7fffffffffffffff", "0x8000000000000000", 3]],
               "addresses and integers in one position (one previous value)")
    round_trip([[10 ** 6 - k * 7919, -k] for k in range(300)], "negative deltas")
    odd = ["0x", "0x00", "0x01", "0xABC", "0X1", "0x-1", "0x1_0", " 0x1", "0x10000000000000000", "0xg", "", "x",
           "\u00e9\u4e2d\U0001f600", "0x" + "f" * 17]
    obj = round_trip([odd], "strings that are not \"0x%x\" of a 64-bit value")
    check(obj["strings"] == odd, "those strings in the string table: %r" % obj["strings"])
    obj = round_trip([["b", "a", "b"], ["c", "a"]], "the string table")
    check(obj["strings"] == ["b", "a", "c"], "strings once each in first-use order: %r" % obj["strings"])
    round_trip([[[0, 0], [-1, 1], [I64_MAX, I64_MIN], [1 << 40, -(1 << 40)]]], "pairs")
    round_trip([[True, False, None, 1, 0]], "booleans are not integers")
    # the bytes of known rows, as the spec lays them out
    eq_bytes(pack_rows([[5]]), [0x01, 0xa2], "[5]: k=1; tag 2, zigzag 10 in the tag byte")
    eq_bytes(pack_rows([[1000]]), [0x01, 0x0a, 0x7d], "[1000]: zigzag 2000: low 4 bits 0, then 125")
    eq_bytes(pack_rows([[-1]]), [0x01, 0x12], "[-1]: zigzag 1")
    eq_bytes(pack_rows([[None, True, False, "s", "0x10", [1, -1]]]),
             [0x06, 0x00, 0x11, 0x01, 0x04, 0x0b, 0x02, 0x25, 0x01], "null, bools, a string, an address, a pair")
    eq_bytes(pack_rows([[7], [7], [3]]), [0x01, 0xe2, 0x01, 0x02, 0x01, 0x72], "deltas: 7, 0, -4")
    eq_bytes(pack_rows([["0x%x" % U64_MAX]]), [0x01, 0x13], "2^64-1 as a delta of -1 from 0")
    eq_bytes(pack_rows([[I64_MIN]]), [0x01, 0xfa] + [0xff] * 8 + [0x0f], "int64 min: zigzag 2^64-1, 10 bytes")
    # speed: 10,000 rows of 27 values
    big = [list(rows[k % 3]) for k in range(10000)]
    for k, r in enumerate(big):
        r[2], r[14] = k, t + 40000 * k
    t0 = time.time()
    obj = pack_rows(big)
    t1 = time.time()
    back = unpack_rows(obj)
    t2 = time.time()
    check(back == big, "10,000 rows: round trip")
    check(t1 - t0 < 0.8 and t2 - t1 < 0.8, "10,000 rows: packed in %.2f s, unpacked in %.2f s" % (t1 - t0, t2 - t1))
    print("10,000 rows: packed in %.3f s, unpacked in %.3f s, %.1f bytes of base64 per row"
          % (t1 - t0, t2 - t1, len(obj["data"]) / 10000))

    # damage
    good = pack_rows([[1, "a"]])
    damaged(dict(good, data="AQ=="[:3]), "not base64", "data of 3 characters")
    damaged(dict(good, data="AQ!="), "not base64", "a character outside base64")
    damaged(dict(good, data="A=Q="), "not base64", "padding inside")
    damaged(dict(good, data=5), "not a string", "data not a string")
    damaged(raw([1, 0x06], 1), "unknown tag 6", "tag 6")
    damaged(raw([1, 0x07], 1), "unknown tag 7", "tag 7")
    damaged(raw([1, 0x0f, 0x00], 1), "unknown tag 7", "tag 7 with a longer payload")
    damaged(raw([1, 0x10], 1), "a null with payload 1", "a null's payload 1")
    damaged(raw([1, 0x21], 1), "a bool with payload 2", "a bool's payload 2")
    check(unpack_rows(raw([1, 0xfa] + [0xff] * 8 + [0x0f], 1)) == [[I64_MIN]], "a 10-byte value of 64 bits")
    damaged(raw([1, 0x0a] + [0xff] * 8 + [0x1f], 1), "more than 64 bits", "a value of 65 bits")
    damaged(raw([1, 0x0a] + [0xff] * 9 + [0x00], 1), "more than 64 bits", "a value of 11 bytes")
    damaged(raw([1, 0x0d, 0x01] + [0xff] * 10 + [0x00], 1), "more than 64 bits", "a pair's second of 11 bytes")
    damaged(raw([1, 0x05] + [0xff] * 9 + [0x02], 1), "more than 64 bits", "a pair's second of 65 bits")
    damaged(raw([0x80] * 10 + [0x00], 1), "more than 64 values", "a row length of 11 bytes")
    damaged(raw([0x81] + [0x80] * 8 + [0x02], 1), "more than 64 values", "a row length of 65 bits")
    damaged(raw([1, 0x14], 1, ["a"]), "string index 1 outside strings (1)", "a string index outside strings")
    damaged(raw([1, 0x0c, 0x01], 1, ["a"]), "string index 16 outside strings", "a string index of two bytes")
    damaged(raw([65] + [0] * 65, 1), "a row of more than 64 values", "a row of 65 values")
    damaged(raw([0xc1, 0x00], 1), "a row of more than 64 values", "a row of 65 values (two bytes)")
    damaged(raw([2, 0x00], 1), "ends inside a row", "data ending between the values of a row")
    damaged(raw([1], 1), "ends inside a row", "data ending after a row's length")
    damaged(raw([0x81], 1), "ends inside a row", "data ending inside a row's length")
    damaged(raw([1, 0x0a, 0x80], 1), "ends inside a row", "data ending inside a value")
    damaged(raw([1, 0x05], 1), "ends inside a row", "data ending before a pair's second")
    damaged(raw([1, 0x05, 0x80], 1), "ends inside a row", "data ending inside a pair's second")
    damaged(raw([1, 0x02, 1, 0x02], 1), "calls data holds 2 rows, rows says 1", "more rows than rows says")
    damaged(raw([1, 0x02], 2), "calls data holds 1 rows, rows says 2", "fewer rows than rows says")
    damaged(raw([], 1), "rows says 1", "no data, one row said")
    damaged(dict(good, encoding="trshim-rows-2"), "unknown encoding", "another encoding")
    damaged(dict(good, encoding=None), "unknown encoding", "an encoding that is not a string")
    for k in ("encoding", "rows", "strings", "data"):
        damaged({x: v for x, v in good.items() if x != k}, "has no \"%s\"" % k, "no %s" % k)
    damaged(dict(good, rows=True), "rows is not a non-negative integer", "rows true")
    damaged(dict(good, rows=-1), "rows is not a non-negative integer", "rows -1")
    damaged(dict(good, rows=1.0), "rows is not a non-negative integer", "rows 1.0")
    damaged(dict(good, strings=["a", 1]), "strings[1] is not a string", "a string that is not")
    damaged(dict(good, strings="a"), "strings is not an array", "strings not an array")
    damaged([[1]], "not an object", "calls an array")
    check(unpack_rows(raw([1, 0x0a, 0x80, 0x00], 1)) == [[0]], "a longer encoding than needed is read")

    # not packable
    for v, what in ((1.5, "a float"), ({"a": 1}, "an object"), ([1, 2, 3], "a list of three"), ([1], "a list of one"),
                    ([True, 1], "a pair holding a bool"), ([1, "2"], "a pair holding a string"),
                    ((1, 2), "a tuple"), (1 << 63, "2^63"), (I64_MIN - 1, "below int64"),
                    ([1 << 63, 0], "a pair past int64")):
        not_packable([["AllReduce", v]], what)
    not_packable([list(range(65))], "a row of 65 values")
    not_packable([5], "a row that is not a list")
    not_packable({"rows": 1}, "calls not a list")


def eq_bytes(obj, want, what):
    got = list(base64.b64decode(obj["data"]))
    check(got == want, "%s: bytes %s, expected %s" % (what, " ".join("%02x" % b for b in got),
                                                    " ".join("%02x" % b for b in want)))


LONG = ("the buffer could not be read: cudaMemcpyAsync failed with cudaErrorIllegalAddress "
        "(an illegal memory access was encountered) \u2014 " + "x" * 40)


def check_rows():
    """rows of checks (positions of CHECK_FIELDS): every status, null, long reasons"""
    return [[0, "input", "clean", 0, 0, None, None, 2048, 2048, "gpu", None],
            [0, "output", "nonfinite", 3, 1, 17, "nan", 2048, 2048, "gpu", None],
            [1, "input", "not_checked", 0, 0, None, None, 0, 1 << 20, None, LONG],
            [1, "output", "clean", 0, 0, None, None, 1 << 16, 1 << 20, "host", None],
            [4, "output", "pending", 0, 0, None, None, 0, 65536, None, None],
            [5, "input", "not_checked", 0, 0, None, None, 0, 16, None, LONG + " (again)"],
            [7, "output", "nonfinite", 0, I64_MAX, 0, "inf", 1 << 40, 1 << 40, "gpu", None]]


def codec_checks():
    """the codec on checks: round trips, its own strings, every message prefixed by checks"""
    rows = check_rows()
    obj = round_trip(rows, "checks of every status", "checks")
    check(obj["strings"].count(LONG) == 1 and len(LONG) > 64 and LONG + " (again)" in obj["strings"],
          "long reasons in the string table once each: %r" % obj["strings"])
    check("AllReduce" not in obj["strings"] and obj["strings"][:3] == ["input", "clean", "gpu"],
          "the checks' own string table, in first-use order: %r" % obj["strings"][:4])
    round_trip([], "no checks", "checks")
    round_trip([rows[2]] * 3 + [rows[0]], "the same check rows again (deltas 0)", "checks")
    round_trip([[k, "input" if k % 2 else "output", "clean", 0, 0, None, None, k * 1000, 10 ** 6 - k, "gpu", None]
                for k in range(500)], "500 check rows", "checks")
    # calls and checks: their own prev[] and strings (each starts at 0)
    eq_bytes(pack_rows([[7, "output"]]), [0x02, 0xe2, 0x04], "a check row [7, \"output\"]: from 0, string 0")
    three = base64.b64decode(pack_rows(rows[:3])["data"])
    bad = raw(list(three) + [1, 0x06], 4, pack_rows(rows[:3])["strings"])
    want = "checks data is damaged at row 3 (byte %d of the data): unknown tag 6" % (len(three) + 1)
    damaged(bad, want, "checks: tag 6 in row 3", "checks")
    damaged(bad, "calls data is damaged at row 3", "the same as calls", None)
    cut = pack_rows(rows)
    data = base64.b64decode(cut["data"])
    damaged(dict(cut, data=base64.b64encode(data[:-1]).decode()),
            "checks data is damaged at row 6: it ends inside a row", "checks: data ending inside a row", "checks")
    good = pack_rows([[1, "a"]])
    for obj, want, what in (
            (dict(good, data="AQ!="), "field checks.data is not base64", "a character outside base64"),
            (dict(good, data=5), "field checks.data is not a string", "data not a string"),
            (raw([1, 0x10], 1), "checks data is damaged at row 0 (byte 1 of the data): a null with payload 1",
             "a null's payload"),
            (raw([1, 0x14], 1, ["a"]), "checks data is damaged at row 0 (byte 1 of the data): string index 1 "
             "outside strings (1)", "a string index outside strings"),
            (raw([1, 0x0a] + [0xff] * 8 + [0x1f], 1), "checks data is damaged at row 0 (byte 1 of the data): a value "
             "of more than 64 bits", "a value of 65 bits"),
            (raw([65] + [0] * 65, 1), "checks data is damaged at row 0 (byte 0 of the data): a row of more than 64",
             "a row of 65 values"),
            (raw([1, 0x02, 1, 0x02], 1), "checks data holds 2 rows, rows says 1", "more rows than rows says"),
            (dict(good, encoding="trshim-rows-2"), "field checks has an unknown encoding \"trshim-rows-2\"",
             "another encoding"),
            (dict(good, rows=-1), "field checks.rows is not a non-negative integer", "rows -1"),
            (dict(good, strings="a"), "field checks.strings is not an array of strings", "strings not an array"),
            (dict(good, strings=["a", 1]), "field checks.strings[1] is not a string", "a string that is not"),
            ([[0, "input", "clean"]], "field checks is not an object (version 2 packs the checks)", "an array")):
        damaged(obj, want, "checks: " + what, "checks")
    for k in ("encoding", "rows", "strings", "data"):
        damaged({x: v for x, v in good.items() if x != k}, "field checks has no \"%s\"" % k, "checks: no %s" % k,
                "checks")
    try:
        unpack_rows(good, "stacks")
        check(False, "unpack_rows of what=\"stacks\": no ValueError")
    except ValueError:
        pass
    not_packable([[0, "input", 1.5]], "a float in a check")


def trace_doc():
    return {"format": "trshim-trace", "version": 1, "job": {"id": "j", "source": "TRSHIM_JOB_ID"}, "rank": 0,
            "host": "h\u00e9", "pid": 1, "call_fields": ["op", "comm", "seq", "sendbuff", "signal"],
            "calls": [["AllReduce", 0, 1, "0x7f00", None], ["PutSignal", 0, 1, "0x7f40", [0, 7]]],
            "nancheck": {"mode": "all"}, "check_fields": ["call", "buffer", "status", "reason"],
            "checks": [[0, "input", "clean", None], [0, "output", "not_checked", LONG], [1, "output", "pending", None]],
            "end": {"reason": "exit"}}


def expect_error(path, want, what):
    try:
        trc.load_trace(path)
        check(False, "load_trace of %s: no ValueError" % what)
    except ValueError as e:
        check(want in str(e) and path in str(e), "load_trace of %s: %r does not say %r" % (what, str(e), want))


def helpers(tmp):
    v1 = trace_doc()
    v2 = trc.pack_trace(v1)
    check(v2["version"] == 2 and isinstance(v2["calls"], dict) and isinstance(v2["checks"], dict) and
          v1["version"] == 1 and isinstance(v1["calls"], list) and isinstance(v1["checks"], list),
          "pack_trace: a new dict, calls and checks packed, the version-1 trace untouched")
    check(v2["checks"] == pack_rows(v1["checks"]) and v2["calls"] == pack_rows(v1["calls"]),
          "pack_trace: calls and checks packed on their own (own prev[], own strings)")
    check(list(v2) == list(v1) and all(v2[k] == v1[k] for k in v1 if k not in ("version", "calls", "checks")),
          "pack_trace: the other fields as they were")
    nock = {k: v for k, v in v1.items() if k != "checks"}
    check("checks" not in trc.pack_trace(nock), "pack_trace: absent checks left absent")
    for bad, what in ((dict(v1, version=2), "a version-2 trace"), (dict(v1, version=7), "version 7"),
                      (dict(v1, format="x"), "another format"), (dict(v1, calls={"a": 1}), "calls an object"),
                      (dict(v1, calls=[[1.5]]), "a float in a call"), (dict(v1, checks={"a": 1}), "checks an object"),
                      (dict(v1, checks=None), "checks null"), (dict(v1, checks=[[0, "input", 0.5]]), "a float in a check"),
                      (dict(v1, checks=[5]), "a check that is not a list")):
        try:
            trc.pack_trace(bad)
            check(False, "pack_trace of %s: no ValueError" % what)
        except ValueError:
            pass
    ck = v2["checks"]
    ckdata = base64.b64decode(ck["data"])
    paths = {}
    for name, doc in (("v1", v1), ("v2", v2), ("v1packed", dict(v2, version=1)), ("v2array", dict(v1, version=2)),
                      ("v2damaged", dict(v2, calls=dict(v2["calls"], rows=3))),
                      ("v2nochecks", trc.pack_trace(nock)),
                      ("v1checkspacked", dict(v1, checks=ck)),
                      ("v2checksarray", dict(v2, checks=v1["checks"])),
                      ("v2checksdamaged", dict(v2, checks=dict(ck, rows=4))),
                      ("v2checkscut", dict(v2, checks=dict(ck, data=base64.b64encode(ckdata[:-1]).decode()))),
                      ("v2checksnodata", dict(v2, checks={k: v for k, v in ck.items() if k != "data"}))):
        paths[name] = os.path.join(tmp, "trshim.j.r0.h.%s.json" % name)
        with open(paths[name], "w") as f:
            json.dump(doc, f)
    a, b = trc.load_trace(paths["v1"]), trc.load_trace(paths["v2"])
    check(a == v1, "load_trace of a version-1 trace: as written")
    check(b["version"] == 2 and dict(b, version=1) == v1,
          "load_trace of a version-2 trace: calls and checks unpacked, version 2")
    c = trc.load_trace(paths["v2nochecks"])
    check("checks" not in c and dict(c, version=1) == nock, "load_trace of a version-2 trace without checks")
    for name, want in (("v1packed", "version 1 with calls packed"), ("v2array", "version 2 with calls as an array"),
                       ("v2damaged", "rows says 3"), ("v1checkspacked", "version 1 with checks packed"),
                       ("v2checksarray", "version 2 with checks as an array"),
                       ("v2checksdamaged", "checks data holds 3 rows, rows says 4"),
                       ("v2checkscut", "checks data is damaged at row 2: it ends inside a row"),
                       ("v2checksnodata", "field checks has no \"data\"")):
        expect_error(paths[name], want, name)
    check(trc.shim_versions() == [trc.header_version()] and trc.header_version() >= 2,
          "shim_versions: %r" % trc.shim_versions())
    return paths


def command(tmp, paths):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))

    def unpack(path, cmd="unpack"):
        return subprocess.run([sys.executable, "-m", "trshim", cmd, path], capture_output=True, env=env,
                              timeout=60)
    p = unpack(paths["v2"])
    check(p.returncode == 0 and not p.stderr, "trshim unpack on version 2: status %d %r" % (p.returncode, p.stderr))
    if p.returncode == 0:
        out = json.loads(p.stdout.decode("utf-8"))
        check(out == trace_doc() and list(out) == list(trace_doc()),
              "trshim unpack on version 2: version 1's trace (calls and checks), in its order\n%r" % out)
        check(p.stdout.count(b"\n") == 1 and p.stdout.endswith(b"\n") and "h\u00e9".encode() in p.stdout,
              "trshim unpack: one line of JSON, UTF-8")
    p = unpack(paths["v2nochecks"])
    want = {k: v for k, v in trace_doc().items() if k != "checks"}
    check(p.returncode == 0 and json.loads(p.stdout.decode("utf-8")) == want,
          "trshim unpack on version 2 without checks: status %d %r" % (p.returncode, p.stderr))
    for name in ("v1",):
        with open(paths[name], "rb") as f:
            raw_v1 = f.read()
        p = unpack(paths[name])
        check(p.returncode == 0 and p.stdout == raw_v1, "trshim unpack on version 1: the file unchanged")
    p = unpack(paths["v2"], "calls")
    check(p.returncode == 2 and not p.stdout, "trshim calls (renamed unpack): status %d" % p.returncode)
    broken = os.path.join(tmp, "broken.json")
    with open(broken, "w") as f:
        f.write('{"format": "trshim-trace", "version": 1, "calls": [')
    v7 = os.path.join(tmp, "v7.json")
    with open(v7, "w") as f:
        json.dump(dict(trace_doc(), version=7), f)
    tag6 = os.path.join(tmp, "tag6.json")
    v2 = trc.pack_trace(trace_doc())
    with open(tag6, "w") as f:
        json.dump(dict(v2, calls=raw([1, 0x06], 1)), f)
    cktag6 = os.path.join(tmp, "cktag6.json")
    with open(cktag6, "w") as f:
        json.dump(dict(v2, checks=raw([1, 0x06], 1)), f)
    for path, want in ((paths["v2damaged"], "calls data holds 2 rows, rows says 3"), (paths["v1packed"], "not an array"),
                       (paths["v2array"], "not an object"), (broken, "not valid JSON"), (v7, "version 7"),
                       (tag6, "calls data is damaged at row 0 (byte 1 of the data): unknown tag 6"),
                       (cktag6, "checks data is damaged at row 0 (byte 1 of the data): unknown tag 6"),
                       (paths["v2checksdamaged"], "checks data holds 3 rows, rows says 4"),
                       (paths["v2checkscut"], "checks data is damaged at row 2: it ends inside a row"),
                       (paths["v2checksnodata"], "field checks has no \"data\""),
                       (paths["v2checksarray"], "field checks is not an object"),
                       (paths["v1checkspacked"], "field checks is not an array"),
                       (os.path.join(tmp, "none.json"), "cannot read")):
        p = unpack(path)
        err = p.stderr.decode()
        check(p.returncode == 1 and not p.stdout and err.count("\n") == 1 and err.startswith("trshim: %s: " % path)
              and want in err, "trshim unpack on %s: status %d, stderr %r" % (os.path.basename(path), p.returncode, err))
    # the bundle's count of a trace's calls
    for name, n in (("v1", 2), ("v2", 2)):
        got = cli.read_trace(paths[name])["calls"]
        check(got == n, "trshim bundle: %d calls in %s, expected %d" % (got, name, n))
    check(cli.calls_count({"rows": "5"}) == 0 and cli.calls_count({"rows": True}) == 0 and
          cli.calls_count(None) == 0 and cli.calls_count({"rows": 7}) == 7, "calls_count of odd values")


def main():
    codec()
    codec_checks()
    with tempfile.TemporaryDirectory(prefix="packed-rows.") as tmp:
        command(tmp, helpers(tmp))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok: packed rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
