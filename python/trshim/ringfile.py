"""Ring files (include/trshim/ring_format.h) as trshim bundle reads and compacts them: the header's
fields in one table, its checks (tranalyze's), the communicator slots' identity, the blob area's
used length, the compacted copy; and the trace folder's files opened without following a link.

A ring file is ~50 MB of mostly holes, and Python's tarfile writes no sparse members: a ring is
bundled rewritten to what a reader uses (docs/trace-format.md, "Compacted ring files"): the
header with capacity, max_comms, the offsets, blob_bytes and file_bytes adjusted; the
communicator slots handed out; the record window [max(0, head - capacity), head) with capacity'
= its length, so that record i is in slot i % capacity' = the same slot (head <= capacity: the
first head slots; head > capacity: all of them) and the records lost before the window stay
lost; the blobs up to the first zero kind. tranalyze reads it as it read the original file.
"""
import os
import stat
import struct

# The C header's layout, as this reader uses it: each table is a struct's fields from its start,
# in order, with their struct codes (little-endian, no padding: the C struct has none there). The
# header's fields after comms_dropped are carried as they are. tests/install/check_ring_header.py
# compares every field's offset, size and kind, and the constants below, with the C compiler's
# (tests/install/ring_offsets.c).
HEADER_FIELDS = (                                   # trr_header, magic to comms_dropped
    ("magic", "8s"), ("version", "I"), ("header_bytes", "I"), ("record_bytes", "I"), ("comm_bytes", "I"),
    ("capacity", "Q"), ("max_comms", "I"), ("fp_interval", "I"), ("off_comms", "Q"), ("off_records", "Q"),
    ("off_blobs", "Q"), ("blob_bytes", "Q"), ("file_bytes", "Q"), ("pid", "i"), ("env_rank", "i"),
    ("world_size", "i"), ("local_rank", "i"), ("start_realtime", "d"), ("start_mono_ns", "Q"), ("host", "64s"),
    ("job_id", "256s"), ("job_source", "32s"), ("rank_source", "32s"), ("trshim_version", "16s"),
    ("stack_depth", "I"), ("pad0", "I"), ("head", "Q"), ("ncomms", "I"), ("state", "i"), ("signo", "i"),
    ("writes", "I"), ("heartbeat_ns", "Q"), ("end_ns", "Q"), ("blob_used", "Q"), ("stacks_dropped", "Q"),
    ("comms_dropped", "Q"))
COMM_FIELDS = (                                     # trr_comm, valid to rank (read: valid, id, from_uid, rank)
    ("valid", "I"), ("kind", "i"), ("id", "Q"), ("parent_id", "Q"), ("parent", "i"), ("blocking", "i"),
    ("has_color", "i"), ("color", "i"), ("key", "i"), ("group", "I"), ("init_enter", "Q"), ("init_stack", "i"),
    ("from_uid", "i"), ("size", "i"), ("rank", "i"))
BLOB_FIELDS = (("kind", "I"), ("bytes", "I"))       # trr_blob, before each blob's payload
RING_MAGIC = b"TRSHRING"                            # TRSHIM_RING_MAGIC
RING_VERSION = 1                                    # TRSHIM_RING_VERSION
HEADER_BYTES, RECORD_BYTES, COMM_BYTES = 4096, 128, 1024    # TRR_HEADER_BYTES, TRR_RECORD_BYTES, TRR_COMM_BYTES
RING_RUNNING, RING_EXITED, RING_SIGNALED = 1, 2, 3  # TRR_RUNNING, TRR_EXITED, TRR_SIGNALED (header state)
BLOB_END = 0                                        # TRR_BLOB_END: a reader stops at this kind


def _struct(fields):
    return struct.Struct("<" + "".join(code for _, code in fields))


RING_HEADER, RING_COMM, RING_BLOB = _struct(HEADER_FIELDS), _struct(COMM_FIELDS), _struct(BLOB_FIELDS)
RING_FIELDS = tuple(name for name, _ in HEADER_FIELDS)
COMM_NAMES = tuple(name for name, _ in COMM_FIELDS)
PAGE_BYTES = 4096                                   # the areas start on a page (shim/ring/tr_ring.c)
RING_AREA_MAX, RING_COMMS_MAX = 1 << 56, 1 << 16    # analyzer/load/ring/ring_int.h: beyond them is damage
RING_CHUNK = 1 << 20


class FileError(Exception):
    """a file of the trace folder that cannot be read or trusted: the message names it"""


def open_plain(path):
    """a regular file of the folder, opened without following a link and without blocking (a FIFO)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        raise FileError("%s: cannot open: %s" % (path, e.strerror))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileError("%s: not a regular file" % path)
    return fd, st


def read_at(fd, n, off, path):
    """n bytes at off; zeros past the end of the file"""
    parts, got = [], 0
    try:
        while got < n:
            k = os.pread(fd, min(n - got, 1 << 24), off + got)
            if not k:
                break
            parts.append(k)
            got += len(k)
    except OSError as e:
        raise FileError("%s: cannot read: %s" % (path, e.strerror))
    return b"".join(parts) + b"\0" * (n - got)


def ring_header(path, fd, size):
    """a ring file's header (a dict) and its communicator slots' identity; FileError naming the
    file when the header cannot be trusted (tranalyze's checks, analyzer/load/ring/ring.c check_header)"""
    if size < RING_HEADER.size:
        raise FileError("%s: damaged ring file: %d bytes, shorter than a ring header" % (path, size))
    raw = read_at(fd, HEADER_BYTES, 0, path)
    h = dict(zip(RING_FIELDS, RING_HEADER.unpack_from(raw, 0)))

    def bad(why):
        return FileError("%s: damaged ring header: %s" % (path, why))
    if h["magic"] != RING_MAGIC:
        raise bad("never completed (the process stopped while creating the file)" if h["magic"] == b"\0" * 8
                  else "no %s magic" % RING_MAGIC.decode())
    if h["version"] != RING_VERSION:
        raise bad("ring format version %d (this trshim knows %d)" % (h["version"], RING_VERSION))
    if (h["header_bytes"], h["record_bytes"], h["comm_bytes"]) != (HEADER_BYTES, RECORD_BYTES, COMM_BYTES):
        raise bad("header/record/communicator sizes %d/%d/%d" % (h["header_bytes"], h["record_bytes"],
                                                                  h["comm_bytes"]))
    if not (1 <= h["capacity"] <= 1 << 40 and h["max_comms"] <= RING_COMMS_MAX and
            HEADER_BYTES <= h["off_comms"] <= RING_AREA_MAX and
            h["off_comms"] + h["max_comms"] * COMM_BYTES <= h["off_records"] <= RING_AREA_MAX and
            h["off_records"] + h["capacity"] * RECORD_BYTES <= h["off_blobs"] <= RING_AREA_MAX and
            h["blob_bytes"] <= RING_AREA_MAX and h["off_blobs"] + h["blob_bytes"] <= h["file_bytes"]):
        raise bad("the areas do not fit together (capacity %d, max_comms %d, communicators at %d, records at %d, "
                  "blobs at %d + %d, file %d bytes)" % tuple(h[k] for k in (
                      "capacity", "max_comms", "off_comms", "off_records", "off_blobs", "blob_bytes", "file_bytes")))
    if h["head"] > RING_AREA_MAX:
        raise bad("head %d" % h["head"])
    if h["start_mono_ns"] >= 1 << 63 or not -1e300 < h["start_realtime"] < 1e300:
        raise bad("start clocks %r / %d" % (h["start_realtime"], h["start_mono_ns"]))
    h["raw"], h["size"] = raw, size
    for k in ("host", "job_id"):
        h[k] = h[k].split(b"\0", 1)[0].decode("utf-8", "replace")
    h["nslots"] = min(h["ncomms"], h["max_comms"])
    slots = read_at(fd, h["nslots"] * COMM_BYTES, h["off_comms"], path)
    h["slots"] = [dict(zip(COMM_NAMES, RING_COMM.unpack_from(slots, i * COMM_BYTES))) for i in range(h["nslots"])]
    return h


def ring_job(h):
    """the job of a ring's own trace, as tranalyze names it (analyzer/load/ring/ring_trace.c build)"""
    if h["job_id"]:
        return h["job_id"]
    for s in h["slots"]:
        if s["valid"] == 1 and s["rank"] >= 0 and s["from_uid"] == 1:
            return "0x%x" % s["id"]
    return "%s-%d" % (h["host"], h["pid"])


def ring_blobs_used(path, fd, h):
    """bytes of the blob area a reader goes through: up to the first zero kind; of a damaged
    blob its header is kept (the reader then notes the same damage at the same place)"""
    start = h["off_blobs"]
    length = max(0, min(h["blob_bytes"], h["size"] - start))
    head = RING_BLOB.size
    buf, boff, pos = b"", 0, 0
    while pos + head <= length:
        if not (boff <= pos and pos + head <= boff + len(buf)):
            boff, buf = pos, read_at(fd, min(RING_CHUNK, length - pos), start + pos, path)
        kind, nbytes = RING_BLOB.unpack_from(buf, pos - boff)
        if kind == BLOB_END:
            return pos
        if nbytes % 8 or nbytes > length - pos - head:
            return pos + head
        pos += head + nbytes
    return pos


def compact_ring(path, fd, h, out):
    """the compacted ring (above) written to the file out: {bytes, records, comms, blobs}"""
    window = min(h["head"], h["capacity"])
    cap = max(1, window)
    ncomms = h["max_comms"] if h["comms_dropped"] else h["nslots"]   # the reader's note of dropped ones names it
    blobs = ring_blobs_used(path, fd, h)
    off_comms = HEADER_BYTES
    off_records = (off_comms + ncomms * COMM_BYTES + PAGE_BYTES - 1) // PAGE_BYTES * PAGE_BYTES
    off_blobs = off_records + cap * RECORD_BYTES
    new = dict(capacity=cap, max_comms=ncomms, off_comms=off_comms, off_records=off_records, off_blobs=off_blobs,
               blob_bytes=blobs, file_bytes=off_blobs + blobs)
    values = [new.get(k, v) for k, v in zip(RING_FIELDS, RING_HEADER.unpack_from(h["raw"], 0))]
    with open(out, "wb") as f:
        f.write(RING_HEADER.pack(*values) + h["raw"][RING_HEADER.size:])
        f.write(read_at(fd, h["nslots"] * COMM_BYTES, h["off_comms"], path))
        f.write(b"\0" * (off_records - off_comms - h["nslots"] * COMM_BYTES))
        for pos in range(0, window * RECORD_BYTES, RING_CHUNK):
            f.write(read_at(fd, min(RING_CHUNK, window * RECORD_BYTES - pos), h["off_records"] + pos, path))
        f.write(b"\0" * ((cap - window) * RECORD_BYTES))
        for pos in range(0, blobs, RING_CHUNK):
            f.write(read_at(fd, min(RING_CHUNK, blobs - pos), h["off_blobs"] + pos, path))
    return {"bytes": off_blobs + blobs, "records": window, "comms": h["nslots"], "blobs": blobs}
