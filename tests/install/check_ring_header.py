#!/usr/bin/env python3
"""trshim's own ring reader against the C header (suite 'install', test install-ring-header).

    check_ring_header.py RING_OFFSETS

RING_OFFSETS (tests/install/ring_offsets.c) prints how the compiler lays out the parts of
include/trshim/ring_format.h that python/trshim/ringfile.py reads (trshim bundle): every field
of trr_header from magic to comms_dropped, of trr_comm from valid to rank, of trr_blob, each
with its offset, size and kind, and the constants the reader checks. ringfile.py's tables
(HEADER_FIELDS, COMM_FIELDS, BLOB_FIELDS: names and struct codes, packed in order) must give
exactly the same, field by field; a change of the header that the Python reader does not
follow fails here. The comparison is first shown to find a field of another size, kind or
place, a missing field and a changed constant (it would otherwise pass whatever the tables)."""
import json
import os
import struct
import subprocess
import sys

SOURCE = os.environ["TRSHIM_SOURCE_ROOT"]
sys.path.insert(0, os.path.join(SOURCE, "python"))
from trshim import ringfile  # noqa: E402  (the source tree's package)

# the C header's name of each constant ringfile.py checks, and the reader's value
CONSTANTS = {"TRSHIM_RING_MAGIC": ringfile.RING_MAGIC.decode(), "TRSHIM_RING_VERSION": ringfile.RING_VERSION,
             "TRR_HEADER_BYTES": ringfile.HEADER_BYTES, "TRR_RECORD_BYTES": ringfile.RECORD_BYTES,
             "TRR_COMM_BYTES": ringfile.COMM_BYTES, "TRR_RUNNING": ringfile.RING_RUNNING,
             "TRR_EXITED": ringfile.RING_EXITED, "TRR_SIGNALED": ringfile.RING_SIGNALED,
             "TRR_BLOB_END": ringfile.BLOB_END}
TABLES = {"header": ringfile.HEADER_FIELDS, "comm": ringfile.COMM_FIELDS, "blob": ringfile.BLOB_FIELDS}


def layout(fields):
    """[[name, offset, size, kind]] of a table of ringfile.py, kind as ring_offsets.c prints it"""
    out, off = [], 0
    for name, code in fields:
        size = struct.calcsize("<" + code)
        kind = "s" if code.endswith("s") else "f" if code in "fd" else "i" if code.islower() else "u"
        out.append([name, off, size, kind])
        off += size
    return out


def differences(c, tables, constants):
    """what the Python tables and constants say otherwise than the C layout c, one line each"""
    out = []
    for struct_name, fields in tables.items():
        py, cc = layout(fields), c[struct_name]
        for i in range(max(len(py), len(cc))):
            p = py[i] if i < len(py) else None
            q = cc[i] if i < len(cc) else None
            if p != q:
                out.append("%s field %d: ringfile.py %s, the C header %s" % (struct_name, i, p, q))
        end = py[-1][1] + py[-1][2] if py else 0
        if end > c["sizes"][struct_name]:
            out.append("%s: ringfile.py reads %d bytes, the C struct has %d" % (struct_name, end,
                                                                               c["sizes"][struct_name]))
    for k, v in constants.items():
        if c["constants"].get(k) != v:
            out.append("%s: ringfile.py %r, the C header %r" % (k, v, c["constants"].get(k)))
    if c["sizes"]["header"] > constants["TRR_HEADER_BYTES"] or c["sizes"]["comm"] > constants["TRR_COMM_BYTES"]:
        out.append("the C header's structs outgrow their slots: %s" % c["sizes"])
    return out


def self_check():
    """differences() finds each kind of mismatch (a test that cannot fail is no test): on a C layout
    made from the tables themselves, which it must pass, with one thing changed at a time"""
    same = {k: layout(v) for k, v in TABLES.items()}
    same["sizes"] = {"header": ringfile.HEADER_BYTES, "comm": ringfile.COMM_BYTES, "blob": ringfile.RING_BLOB.size}
    same["constants"] = dict(CONSTANTS)

    def changed(fields, name, code=None):
        """the table with name's code changed, or without name"""
        return tuple((n, code or k) if n == name else (n, k) for n, k in fields if code or n != name)
    cases = [
        ("a field of another kind (pid unsigned)", dict(TABLES, header=changed(TABLES["header"], "pid", "I")),
         CONSTANTS, "header field 13:"),
        ("a field of another size (host 63 bytes)", dict(TABLES, header=changed(TABLES["header"], "host", "63s")),
         CONSTANTS, "header field 19:"),
        ("a field missing (trr_comm's kind)", dict(TABLES, comm=changed(TABLES["comm"], "kind")),
         CONSTANTS, "comm field 1:"),
        ("a changed constant (TRR_COMM_BYTES)", TABLES, dict(CONSTANTS, TRR_COMM_BYTES=2048), "TRR_COMM_BYTES:"),
    ]
    bad = ["the comparison of the tables with their own layout: %s" % d for d in differences(same, TABLES, CONSTANTS)]
    for what, tables, constants, want in cases:
        got = differences(same, tables, constants)
        if not got or not got[0].startswith(want):
            bad.append("the comparison misses %s: %s" % (what, got))
    return bad


def main():
    r = subprocess.run([sys.argv[1]], stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
    if r.returncode != 0:
        print("FAIL %s: exit %d" % (sys.argv[1], r.returncode))
        return 1
    c = json.loads(r.stdout)
    problems = self_check() + differences(c, TABLES, CONSTANTS)
    for p in problems:
        print("FAIL " + p)
    if problems:
        print("%d check(s) failed: python/trshim/ringfile.py does not follow include/trshim/ring_format.h" %
              len(problems))
        return 1
    print("install-ring-header: ok: %s fields of trr_header, %d of trr_comm, %d of trr_blob and %d constants as "
          "the C header lays them out" % (len(c["header"]), len(c["comm"]), len(c["blob"]), len(CONSTANTS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
