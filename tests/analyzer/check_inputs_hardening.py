#!/usr/bin/env python3
"""tranalyze on hostile inputs (issue 12): each case checks an exact outcome.

    check_inputs_hardening.py TRANALYZE GEN_TRACES WORKDIR CASE

CASE:
  fifo          a FIFO named trshim.x.r0.h.1.json, a symbolic link to it
                (trshim.y.r0.h.1.json) and a FIFO named like a ring, in the
                folder and on the command line: tranalyze returns at once
                with the status of the job alone and the same findings,
                each one named as not a regular file; a symbolic link to a
                trace inside a folder is named and not followed, the same
                link on the command line is read; an empty folder or a FIFO
                alone: status 2, named
  sparse        an 8 GiB sparse file named like a JSON trace, a trace
                extended by a hole to 8 GiB, and a 2 MiB trace over
                --max-trace-mb 1: each named and skipped, the job's findings
                unchanged, quick (< 5 s) and small (peak RSS < 64 MiB);
                a ring declaring 2^26 records (an 8 GiB sparse file) whose
                window is nearly all hole: read in < 5 s, < 64 MiB, the hole
                counted as torn records exactly, the same findings; a ring
                larger than its header declares: named, read up to the
                declared size, the same findings
  ranks         one trace of a valid job with rank 1000000, with rank
                2147483647, with world_size 16777216, with all of them, with
                rank 7 and no world_size: that file named and skipped, the
                findings and ranks exactly those of the job without that
                file; one trace alone that says world_size 16777216: quick,
                small output, 4096 ranks listed and the rest counted
  ring_damage   a ring cut in the middle of its records, and one with a hole
                punched in its record window: the exact notes, a status of
                0 or 1, never a signal
  ring_full_tmpfs  rings whose blob area is a hole, on a tmpfs that is full
                (a mapping would take SIGBUS there): the same answer as on
                disk, no signal (needs user namespaces: else skipped, 77)
  write_failed  a rank without a trace but with the shim's
                trshim.*.write-failed marker is shown as "write failed (No
                space left on device)" (text table, --json ranks and the
                no_trace finding, whose hint no longer says it was killed);
                a marker of a rank that has a trace, one without a rank, a
                damaged one: named; every rank's write failed: status 2 and
                the markers named
  heading       a finding's heading names the traced ranks and counts the
                places without a trace apart: "(rank 0; 3 places without a
                trace)", never "ranks 0 and 3 without a trace"
"""
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

GIB = 1 << 30
QUICK_S = 5.0
SMALL_MIB = 64


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(tranalyze, args, timeout=30):
    """(status, stdout, stderr, seconds, peak RSS MiB of the child); a
    signal or a hang is a failure"""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        p = subprocess.Popen([tranalyze] + args, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                fail("tranalyze %s did not return within %d s (blocked?)" % (" ".join(args), timeout))
            time.sleep(0.01)
        secs = time.monotonic() - t0
        rc = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        out, err = o.read().decode(), e.read().decode()
    if rc not in (0, 1, 2):
        fail("tranalyze %s: status %d (a signal?)\n%s" % (" ".join(args), rc, err[-3000:]))
    if "runtime error" in err or "AddressSanitizer" in err:
        fail("tranalyze %s: sanitizer report\n%s" % (" ".join(args), err[-3000:]))
    return rc, out, err, secs, ru.ru_maxrss / 1024.0


def run_json(tranalyze, args, want_rc=None, **kw):
    rc, out, err, secs, rss = run(tranalyze, ["--json"] + args, **kw)
    if want_rc is not None and rc != want_rc:
        fail("tranalyze --json %s: status %d, expected %d\n%s\n%s" % (" ".join(args), rc, want_rc, out[-2000:], err[-2000:]))
    try:
        res = json.loads(out)
    except ValueError:
        fail("tranalyze --json %s: not JSON\n%s" % (" ".join(args), out[-2000:]))
    return rc, res, secs, rss


def gen_job(gen, scenario, out):
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, gen, scenario, out], check=True, stdout=subprocess.DEVNULL)
    os.remove(os.path.join(out, "expected.json"))
    return sorted(os.path.join(out, f) for f in os.listdir(out))


def note_of(res, path, sub, skipped=True):
    """the note naming path that contains sub (skipped as said)"""
    for n in res["inputs"]:
        if n.get("file") == path and sub in n["problem"]:
            if skipped is not None and n["skipped"] != skipped:
                fail("note about %s: skipped %s, expected %s: %r" % (path, n["skipped"], skipped, n))
            return n
    fail("no note about %s containing %r: %s" % (path, sub, json.dumps(res["inputs"], indent=1)[:4000]))


def no_note(res, path):
    for n in res["inputs"]:
        if n.get("file") == path:
            fail("unexpected note about %s: %r" % (path, n))


def strip_paths(obj):
    """findings and ranks with file paths reduced to their names (the same
    job read from another folder)"""
    if isinstance(obj, dict):
        return {k: (os.path.basename(v) if k in ("file", "ring_file") and isinstance(v, str) else strip_paths(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [strip_paths(v) for v in obj]
    return obj


def same_answer(res, want, what, ranks=True):
    if strip_paths(res["findings"]) != strip_paths(want["findings"]):
        fail("%s: the findings differ from the job's own:\n%s\n--- expected ---\n%s" % (
            what, json.dumps(res["findings"], indent=1)[:3000], json.dumps(want["findings"], indent=1)[:3000]))
    if ranks and strip_paths(res["ranks"]) != strip_paths(want["ranks"]):
        fail("%s: the ranks differ from the job's own:\n%s\n--- expected ---\n%s" % (
            what, json.dumps(res["ranks"], indent=1)[:3000], json.dumps(want["ranks"], indent=1)[:3000]))
    for k in ("world_size", "traces", "ranks_without_trace"):
        if res["job"][k] != want["job"][k]:
            fail("%s: job.%s is %r, expected %r" % (what, k, res["job"][k], want["job"][k]))


# ---------------------------------------------------------------- fifo

def case_fifo(tranalyze, gen, work):
    job = os.path.join(work, "job")
    files = gen_job(gen, "extra_collective", job)
    rc0, base, _, _ = run_json(tranalyze, [job])
    d = os.path.join(work, "with_fifo")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(job, d)
    fifo = os.path.join(d, "trshim.x.r0.h.1.json")
    os.mkfifo(fifo)
    link = os.path.join(d, "trshim.y.r0.h.1.json")
    os.symlink("trshim.x.r0.h.1.json", link)
    rfifo = os.path.join(d, "trshim.h.1.ring")
    os.mkfifo(rfifo)
    # in the folder
    rc, res, secs, _ = run_json(tranalyze, [d], rc0, timeout=20)
    if secs > QUICK_S:
        fail("the folder with FIFOs took %.1f s" % secs)
    note_of(res, fifo, "not a regular file (a FIFO)")
    note_of(res, rfifo, "not a regular file (a FIFO)")
    note_of(res, link, "a symbolic link: links inside a folder are not followed")
    same_answer(res, base, "folder with FIFOs")
    print("ok: folder with a FIFO, a link to it and a ring-named FIFO: status %d in %.2f s, each named" % (rc, secs))
    # on the command line: the job's files, then the FIFO and the link to it
    rc, res, secs, _ = run_json(tranalyze, files + [fifo, link, rfifo], rc0, timeout=20)
    if secs > QUICK_S:
        fail("FIFOs on the command line took %.1f s" % secs)
    note_of(res, fifo, "not a regular file (a FIFO)")
    note_of(res, link, "not a regular file (a FIFO)")
    note_of(res, rfifo, "not a regular file (a FIFO)")
    same_answer(res, base, "FIFOs on the command line")
    print("ok: FIFO and link to it on the command line: status %d in %.2f s, each named" % (rc, secs))
    # text output names them too
    rc, out, _, secs, _ = run(tranalyze, [fifo, link] + files, timeout=20)
    if rc != rc0 or "%s: not a regular file (a FIFO) (skipped)" % fifo not in out:
        fail("text output: status %d, or the FIFO is not named:\n%s" % (rc, out[-3000:]))
    # a FIFO alone: nothing usable, named
    rc, out, err, secs, _ = run(tranalyze, [fifo], timeout=20)
    if rc != 2 or "%s: not a regular file (a FIFO)" % fifo not in err:
        fail("a FIFO alone: status %d, expected 2 and the FIFO named:\n%s" % (rc, err))
    # an empty folder: nothing usable
    empty = os.path.join(work, "empty")
    shutil.rmtree(empty, ignore_errors=True)
    os.makedirs(empty)
    rc, out, err, secs, _ = run(tranalyze, [empty], timeout=20)
    if rc != 2 or "no trace files" not in err:
        fail("an empty folder: status %d, expected 2 and a message:\n%s" % (rc, err))
    # a link to a regular trace: not followed in a folder, read when named
    d2 = os.path.join(work, "with_link")
    shutil.rmtree(d2, ignore_errors=True)
    os.makedirs(d2)
    r0 = [f for f in files if ".r0." in os.path.basename(f)][0]
    for f in files:
        if f != r0:
            shutil.copy(f, d2)
    l0 = os.path.join(d2, os.path.basename(r0))
    os.symlink(os.path.abspath(r0), l0)
    rc, res, _, _ = run_json(tranalyze, [d2], timeout=20)
    note_of(res, l0, "a symbolic link: links inside a folder are not followed")
    if res["job"]["ranks_without_trace"] != [0]:
        fail("the linked rank 0 was read from the folder: %r" % res["job"])
    rc, res, _, _ = run_json(tranalyze, [os.path.join(d2, f) for f in sorted(os.listdir(d2))], rc0, timeout=20)
    no_note(res, l0)
    same_answer(res, base, "a link to a trace named on the command line")
    print("ok: a link to a trace is not followed in a folder, read when named; an empty folder, a FIFO alone: status 2")


# ---------------------------------------------------------------- sparse

def sparse_file(path, size, prefix=b""):
    with open(path, "wb") as f:
        f.write(prefix)
        f.truncate(size)


def ring_fields(data):
    import gen_ring as gr
    offs = gr.STRUCTS["header"][0]
    import struct
    return {k: struct.unpack_from("<Q", data, offs[k])[0] for k in ("capacity", "off_records", "off_blobs", "blob_bytes",
                                                                    "file_bytes", "head")}, offs


def case_sparse(tranalyze, gen, work):
    import struct
    job = os.path.join(work, "job")
    files = gen_job(gen, "extra_collective", job)
    rc0, base, _, _ = run_json(tranalyze, [job])
    cases = []
    d = os.path.join(work, "sparse_json")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(job, d)
    big = os.path.join(d, "trshim.x.r0.h.1.json")
    sparse_file(big, 8 * GIB)
    cases.append(("an 8 GiB sparse file", d, [], big, "never written from byte 0 of its 8589934592 on"))
    d = os.path.join(work, "extended_json")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(job, d)
    r3 = os.path.join(d, [os.path.basename(f) for f in files if ".r3." in f][0])
    n = os.path.getsize(r3)
    with open(r3, "r+b") as f:
        f.truncate(8 * GIB)
    extra = os.path.join(d, "trshim.extra.r3.copy.json")
    os.rename(r3, extra)                      # rank 3's trace, then a hole: named, skipped
    shutil.copy(os.path.join(job, os.path.basename(r3)), r3)
    cases.append(("a trace extended by a hole to 8 GiB", d, [], extra, "of its 8589934592 on (a hole in the file"))
    d = os.path.join(work, "big_json")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(job, d)
    pad = os.path.join(d, "trshim.extra.r3.pad.json")
    with open(pad, "wb") as f:
        f.write(b" " * (2 << 20) + open(r3, "rb").read())
    cases.append(("a 2 MiB trace over --max-trace-mb 1", d, ["--max-trace-mb", "1"], pad,
                  "more than a trace may be (1 MiB; --max-trace-mb raises it)"))
    for what, d, opts, path, sub in cases:
        rc, res, secs, rss = run_json(tranalyze, opts + [d], rc0)
        nt = note_of(res, path, sub)
        if path == extra:       # the hole starts where rank 3's bytes end (a block boundary at most)
            at = int(nt["problem"].split("never written from byte ")[1].split()[0])
            if not n <= at < n + 65536:
                fail("the hole of the extended trace is said to start at %d, its bytes end at %d" % (at, n))
        same_answer(res, base, what)
        print("ok: %s: named and skipped in %.3f s, peak RSS %.1f MiB" % (what, secs, rss))
        if secs > QUICK_S or rss > SMALL_MIB:
            fail("%s: %.2f s and %.1f MiB, expected under %.0f s and %d MiB" % (what, secs, rss, QUICK_S, SMALL_MIB))
    # a ring declaring 2^26 records, nearly all of its window a hole
    rdir = os.path.join(work, "ring_job")
    shutil.rmtree(rdir, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(HERE, "gen_ring.py"), "ring_hang", rdir], check=True)
    os.remove(os.path.join(rdir, "expected.json"))
    rc1, rbase, _, _ = run_json(tranalyze, [rdir], 1)
    d = os.path.join(work, "ring_big")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(rdir, d)
    name = sorted(f for f in os.listdir(d) if f.endswith(".ring"))[1]
    data = open(os.path.join(d, name), "rb").read()
    h, offs = ring_fields(data)
    nrec = 0
    while struct.unpack_from("<Q", data, h["off_records"] + nrec * 128)[0] == nrec + 1:
        nrec += 1
    cap = 1 << 26
    off_blobs = h["off_records"] + cap * 128
    hdr = bytearray(data[:4096])
    for k, v in (("capacity", cap), ("off_blobs", off_blobs), ("file_bytes", off_blobs + h["blob_bytes"]), ("head", cap)):
        struct.pack_into("<Q", hdr, offs[k], v)
    with open(os.path.join(d, name), "wb") as f:
        f.write(hdr + data[4096:h["off_records"] + 4096])       # header, comm slots, the first page of records
        f.seek(off_blobs)
        f.write(data[h["off_blobs"]:])
        f.truncate(off_blobs + h["blob_bytes"])
    rc, res, secs, rss = run_json(tranalyze, [d], 1)
    path = os.path.join(d, name)
    torn = cap - nrec
    note_of(res, path, "%d record(s) of the window [0, %d) were incomplete or overwritten (torn), the last one included"
            % (torn, cap), skipped=False)
    same_answer(res, rbase, "a ring of 2^26 records, nearly all a hole", ranks=False)
    print("ok: a ring declaring %d records (%.1f GiB, sparse): %d torn counted in %.3f s, peak RSS %.1f MiB" % (
        cap, os.path.getsize(path) / GIB, torn, secs, rss))
    if secs > QUICK_S or rss > SMALL_MIB:
        fail("the sparse ring: %.2f s and %.1f MiB, expected under %.0f s and %d MiB" % (secs, rss, QUICK_S, SMALL_MIB))
    # a ring larger than its header declares: read up to the declared size
    d = os.path.join(work, "ring_longer")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(rdir, d)
    path = os.path.join(d, name)
    with open(path, "r+b") as f:
        f.truncate(8 * GIB)
    rc, res, secs, rss = run_json(tranalyze, [d], 1)
    note_of(res, path, "the file has 8589934592 bytes, more than the %d its header declares" % h["file_bytes"], skipped=False)
    same_answer(res, rbase, "a ring longer than declared")
    print("ok: a ring longer than its header declares (8 GiB): named, read up to %d bytes, in %.3f s, %.1f MiB" % (
        h["file_bytes"], secs, rss))
    if secs > QUICK_S or rss > SMALL_MIB:
        fail("the long ring: %.2f s and %.1f MiB" % (secs, rss))


# ---------------------------------------------------------------- ranks

def case_ranks(tranalyze, gen, work):
    job = os.path.join(work, "job")
    gen_job(gen, "extra_collective", job)
    name = [f for f in os.listdir(job) if ".r2." in f][0]
    without = os.path.join(work, "without_r2")
    shutil.rmtree(without, ignore_errors=True)
    shutil.copytree(job, without)
    os.remove(os.path.join(without, name))
    rcw, want, _, _ = run_json(tranalyze, [without])
    if want["job"]["ranks_without_trace"] != [2]:
        fail("the job without rank 2's trace: %r" % want["job"])
    variants = [
        ("rank 1000000", {"rank": 1000000}, "rank 1000000 is not below the world size 4 of this trace"),
        ("rank 2147483647", {"rank": 2147483647}, "rank 2147483647 is out of range (ranks are below 16777216)"),
        ("world_size 16777216", {"world_size": 16777216},
         "world size 16777216, where 3 of the job's 4 traces that give one say 4"),
        ("rank 2147483647 and world_size 16777216", {"rank": 2147483647, "world_size": 16777216},
         "rank 2147483647 is out of range"),
        ("rank 1000000 and world_size 16777216", {"rank": 1000000, "world_size": 16777216},
         "world size 16777216, where 3 of the job's 4 traces that give one say 4"),
        ("rank 7, no world_size", {"rank": 7, "world_size": None},
         "rank 7 is not below the job's world size 4 (that 3 of its traces give)"),
    ]
    for what, edit, sub in variants:
        d = os.path.join(work, "bad")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(job, d)
        path = os.path.join(d, name)
        doc = json.load(open(path))
        doc.update(edit)
        json.dump(doc, open(path, "w"))
        rc, res, secs, rss = run_json(tranalyze, [d], rcw)
        note_of(res, path, sub)
        same_answer(res, want, what)
        rc, out, _, _, _ = run(tranalyze, [d])
        if len(out) > 20000:
            fail("%s: %d bytes of text output" % (what, len(out)))
        print("ok: %s: the file named and skipped, the rest as without it (%.3f s, %.1f MiB)" % (what, secs, rss))
    # ranks from communicators (processes driving two devices each): the
    # world size counts processes, the ranks go past it; every trace used
    d = os.path.join(work, "multi")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(job, d)
    for f in os.listdir(d):
        doc = json.load(open(os.path.join(d, f)))
        doc.update(world_size=2, rank_source="comm")
        json.dump(doc, open(os.path.join(d, f), "w"))
    rc0, base, _, _ = run_json(tranalyze, [job])
    rc, res, _, _ = run_json(tranalyze, [d], rc0)
    if any(n["skipped"] for n in res["inputs"]) or res["job"]["world_size"] != 4 or res["job"]["traces"] != 4:
        fail("ranks from communicators past a world size of processes: %r\n%r" % (res["job"], res["inputs"]))
    note_of(res, None, "rank 3 is outside the world size 2 the traces give", skipped=False)
    if strip_paths(res["findings"]) != strip_paths(base["findings"]):
        fail("ranks from communicators: the findings differ from the job's own")
    # a rank from a communicator beyond every communicator's size
    path = os.path.join(d, name)
    doc = json.load(open(path))
    doc["rank"] = 1000000
    json.dump(doc, open(path, "w"))
    rc, res, _, _ = run_json(tranalyze, [d])
    note_of(res, path, "rank 1000000 (its place in its first communicator) is not below the size of any of its "
            "communicators (4 at most)")
    if res["job"]["ranks_without_trace"] != [2]:
        fail("a rank from a communicator past its sizes: %r" % res["job"])
    print("ok: ranks from communicators past the world size of processes: used, noted; one past its communicators: named")
    # one trace alone says world_size 16777216: not believed for per-rank tables
    d = os.path.join(work, "alone")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    r0 = [f for f in os.listdir(job) if ".r0." in f][0]
    doc = json.load(open(os.path.join(job, r0)))
    doc["world_size"] = 16777216
    json.dump(doc, open(os.path.join(d, r0), "w"))
    rc, res, secs, rss = run_json(tranalyze, [d], 1)
    j = res["job"]
    if j["world_size"] != 16777216 or j["ranks_without_trace"] != list(range(1, 4096)) or \
            j["ranks_without_trace_unlisted"] != 16777216 - 4096:
        fail("one trace of world size 16777216: job %r" % {k: (v if k != "ranks_without_trace" else len(v)) for k, v in j.items()})
    note_of(res, None, "the world size 16777216 is far beyond the 1 trace(s) found: only ranks below 4096 are listed",
            skipped=False)
    rc, out, _, secs2, rss2 = run(tranalyze, [d])
    if "... 16773120 more ranks without a trace" not in out or "1-4095" not in out or len(out) > 20000:
        fail("one trace of world size 16777216, text output (%d bytes):\n%s" % (len(out), out[:3000]))
    if max(secs, secs2) > QUICK_S or max(rss, rss2) > SMALL_MIB:
        fail("one trace of world size 16777216: %.2f s, %.1f MiB" % (max(secs, secs2), max(rss, rss2)))
    print("ok: one trace of world size 16777216: 4095 ranks listed, 16773120 counted; %d bytes of text in %.3f s, "
          "%.1f MiB" % (len(out), secs2, rss2))


# ---------------------------------------------------------------- rings

def case_ring_damage(tranalyze, gen, work):
    import struct
    import gen_ring as gr
    g = gr.g
    g.random.seed(1234)
    ranks, wid = gr.extra12(name="ringdmg", steps=100)
    d = os.path.join(work, "ring_damage")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for r in ranks:
        gr.rank_ring(r).write(os.path.join(d, gr.ring_name(r)))
    rc0, base, _, _ = run_json(tranalyze, [d])
    names = sorted(f for f in os.listdir(d) if f.endswith(".ring"))
    # cut in the middle of record 5 of rank 1's ring
    p1 = os.path.join(d, names[1])
    data = open(p1, "rb").read()
    h, _ = ring_fields(data)
    cut = h["off_records"] + 5 * 128 + 64
    with open(p1, "r+b") as f:
        f.truncate(cut)
    # a hole punched over records 32..63 of rank 2's ring (a page)
    p2 = os.path.join(d, names[2])
    data2 = open(p2, "rb").read()
    h2, _ = ring_fields(data2)
    off = h2["off_records"] + 32 * 128
    punched = False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(p2, os.O_RDWR)
        punched = libc.fallocate(fd, 3, ctypes.c_long(off), ctypes.c_long(4096)) == 0   # PUNCH_HOLE | KEEP_SIZE
        os.close(fd)
    except (OSError, AttributeError):
        pass
    if not punched:                     # no hole on this filesystem: zeros read the same
        with open(p2, "r+b") as f:
            f.seek(off)
            f.write(b"\0" * 4096)
    rc, res, secs, rss = run_json(tranalyze, [d])
    if rc not in (0, 1):
        fail("damaged rings: status %d" % rc)
    head1 = h["head"]
    note_of(res, p1, "truncated: the file has %d bytes, its header says %d" % (cut, h["file_bytes"]), skipped=False)
    note_of(res, p1, "%d record slot(s) lie past the end of the file (truncated) and are lost" % (head1 - 5), skipped=False)
    note_of(res, p2, "32 record(s) of the window [0, %d) were incomplete or overwritten (torn)" % h2["head"],
            skipped=False)
    traced = [r for r in res["ranks"] if r["ended"]["state"] != "no_trace"]
    if len(traced) != 4:
        fail("damaged rings: %d traced ranks, expected 4" % len(traced))
    print("ok: a ring cut in record 5 and one with a hole over records 32-63 (%s): status %d, exact notes, %.3f s" % (
        "punched" if punched else "zeros", rc, secs))


RING_TMPFS_SCRIPT = r"""
set -u
mount -t tmpfs -o size=2m tmpfs "$1" || exit 77
"$2" "$3" --fill "$1" || exit 3
"$4" --json "$1" > "$5" 2> "$5.err"
echo $? > "$5.rc"
"""


def write_hole_rings(out):
    """extra12's rings with no stacks nor modules (the blob area all zeros),
    every zero page left a hole"""
    import gen_ring as gr
    gr.g.random.seed(1234)
    ranks, _ = gr.extra12(name="tmpfs")
    os.makedirs(out, exist_ok=True)
    for r in ranks:
        rg = gr.rank_ring(r)
        rg.stacks = {}
        rg.modules = []
        data = rg.to_bytes()
        with open(os.path.join(out, gr.ring_name(r)), "wb") as f:
            for i in range(0, len(data), 4096):
                blk = data[i:i + 4096]
                if blk.count(0) != len(blk):
                    f.seek(i)
                    f.write(blk)
            f.truncate(len(data))


def case_ring_full_tmpfs(tranalyze, gen, work):
    on_disk = os.path.join(work, "holes_disk")
    shutil.rmtree(on_disk, ignore_errors=True)
    write_hole_rings(on_disk)
    rc0, base, _, _ = run_json(tranalyze, [on_disk], 1)
    mnt = os.path.join(work, "tmpfs")
    os.makedirs(mnt, exist_ok=True)
    res_path = os.path.join(work, "tmpfs.json")
    for p in (res_path, res_path + ".rc", res_path + ".err"):
        if os.path.exists(p):
            os.remove(p)
    try:
        p = subprocess.run(["unshare", "-rm", "sh", "-c", RING_TMPFS_SCRIPT, "sh", mnt, sys.executable,
                            os.path.abspath(__file__), tranalyze, res_path], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        print("SKIP: cannot run unshare -rm (%s): a full tmpfs cannot be made here" % e)
        sys.exit(77)
    if p.returncode == 77 or (p.returncode != 0 and not os.path.exists(res_path + ".rc")):
        print("SKIP: no user namespace with a tmpfs here (%s)" % (p.stderr.strip()[-300:] or p.returncode))
        sys.exit(77)
    rc = int(open(res_path + ".rc").read())
    err = open(res_path + ".err").read()
    if rc != 1:
        fail("rings with holes on a full tmpfs: status %d (135: SIGBUS), expected 1\n%s" % (rc, err[-2000:]))
    res = json.loads(open(res_path).read())
    same_answer(res, base, "rings with holes on a full tmpfs")
    print("ok: rings whose blob area is a hole, on a full tmpfs: status 1, the same answer as on disk")


def fill_tmpfs(mnt):
    """(inside the namespace) the rings, then the tmpfs filled to the last block"""
    write_hole_rings(mnt)
    fd = os.open(os.path.join(mnt, "fill"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\1" * 4096)
    except OSError:
        pass
    os.close(fd)
    st = os.statvfs(mnt)
    if st.f_bavail:
        raise SystemExit("the tmpfs is not full")


# ---------------------------------------------------------------- write failed

MARKER = {"format": "trshim-write-failed", "version": 1, "job": "extra", "rank": 2, "host": "node0", "pid": 40002,
          "errno": 28, "error": "No space left on device", "bytes": 123456}


def case_write_failed(tranalyze, gen, work):
    job = os.path.join(work, "job")
    gen_job(gen, "extra_collective", job)
    d = os.path.join(work, "wf")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(job, d)
    r2 = [f for f in os.listdir(d) if ".r2." in f][0]
    os.remove(os.path.join(d, r2))
    plain = os.path.join(work, "wf_plain")
    shutil.rmtree(plain, ignore_errors=True)
    shutil.copytree(d, plain)
    mk = os.path.join(d, r2[:-len(".json")] + ".write-failed")
    json.dump(MARKER, open(mk, "w"))
    # the shim's fuller marker for rank 1, which has a trace (an earlier write)
    r1 = [f for f in os.listdir(d) if ".r1." in f][0]
    mk1 = os.path.join(d, r1[:-len(".json")] + ".write-failed")
    m1 = dict(MARKER, rank=1, pid=40001, job_source="TRSHIM_JOB_ID", trace=r1, reason="exit", time=1.5)
    json.dump(m1, open(mk1, "w"))
    mkn = os.path.join(d, "trshim.extra.rX.node0.1.write-failed")
    json.dump(dict(MARKER, rank=None, pid=1), open(mkn, "w"))
    bad = os.path.join(d, "trshim.extra.r9.node0.9.write-failed")
    open(bad, "w").write("{\"format\": \"trshim-write-failed\", \"vers")
    other = os.path.join(d, "trshim.other.r3.node0.5.write-failed")
    json.dump(dict(MARKER, job="other", rank=3), open(other, "w"))
    rcp, resp, _, _ = run_json(tranalyze, [plain])
    rc, res, _, _ = run_json(tranalyze, [d], rcp)
    r = [x for x in res["ranks"] if x["rank"] == 2][0]
    if r["ended"] != {"state": "no_trace", "text": "write failed (No space left on device)"}:
        fail("rank 2 ended: %r" % r["ended"])
    wf = r.get("write_failed")
    if wf != {"file": mk, "error": "No space left on device", "errno": 28, "bytes": 123456, "host": "node0", "pid": 40002}:
        fail("rank 2 write_failed: %r" % wf)
    nt = [f for f in res["findings"] if f["kind"] == "no_trace"]
    ntp = [f for f in resp["findings"] if f["kind"] == "no_trace"]
    if len(nt) != 1 or len(ntp) != 1:
        fail("no_trace findings: %d and %d without the marker, expected 1" % (len(nt), len(ntp)))
    if "rank 2 left no trace (its trace write failed: No space left on device);" not in nt[0]["message"]:
        fail("no_trace message: %r" % nt[0]["message"])
    if "killed before the shim could write" in nt[0]["hint"] or "could not write the trace" not in nt[0]["hint"]:
        fail("no_trace hint: %r" % nt[0]["hint"])
    if "killed before the shim could write" not in ntp[0]["hint"]:
        fail("no_trace hint without a marker: %r" % ntp[0]["hint"])
    note_of(res, mk1, "a trace write of rank 1 failed (No space left on device): the trace of rank 1 that is used",
            skipped=False)
    note_of(res, mkn, "a trace write failed (No space left on device) on a process whose rank is unknown", skipped=False)
    note_of(res, bad, "not a write-failed marker (not a JSON object)")
    no_note(res, other)
    no_note(res, mk)
    # apart from the text of that rank, the same analysis
    strip = lambda fs: [dict(f, message=None, hint=None) for f in fs]
    if strip_paths(strip(res["findings"])) != strip_paths(strip(resp["findings"])):
        fail("the findings changed beyond the no_trace text")
    rc, out, _, _, _ = run(tranalyze, [d])
    row = [ln for ln in out.splitlines() if ln.strip().startswith("2 ")]
    if len(row) != 1 or not row[0].rstrip().endswith("write failed (No space left on device)"):
        fail("text table row of rank 2: %r\n%s" % (row, out[-3000:]))
    rc, out, _, _, _ = run(tranalyze, ["--markdown", d])
    if "| 2 | | | write failed (No space left on device) |" not in out:
        fail("markdown table lacks rank 2's write failure:\n%s" % out[-3000:])
    # a marker named on the command line is read too
    files = [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".json")] + [mk]
    rc, res2, _, _ = run_json(tranalyze, files, rcp)
    if [x for x in res2["ranks"] if x["rank"] == 2][0]["ended"]["text"] != "write failed (No space left on device)":
        fail("a marker named on the command line was not used")
    # every write failed: nothing to analyse, the markers named
    d3 = os.path.join(work, "wf_all")
    shutil.rmtree(d3, ignore_errors=True)
    os.makedirs(d3)
    for k in range(4):
        json.dump(dict(MARKER, rank=k, pid=40000 + k), open(os.path.join(d3, "trshim.extra.r%d.node0.%d.write-failed"
                                                                           % (k, 40000 + k)), "w"))
    rc, out, err, _, _ = run(tranalyze, [d3])
    if rc != 2 or err.count("a trace write of rank") != 4 or "No space left on device" not in err:
        fail("every write failed: status %d\n%s" % (rc, err))
    print("ok: write-failed markers: rank 2 shown as write failed (text, markdown, --json, the finding), the others named")


# ---------------------------------------------------------------- heading

def case_heading(tranalyze, gen, work):
    job = os.path.join(work, "job")
    files = gen_job(gen, "extra_collective", job)
    for keep, want in (([0], "(rank 0; 3 places without a trace)"), ([1, 2], "(ranks 1, 2; 2 places without a trace)"),
                       ([0, 1, 2, 3], "(ranks 0-3), collective #4")):
        fs = [f for f in files if any(".r%d." % k in os.path.basename(f) for k in keep)]
        rc, out, _, _, _ = run(tranalyze, fs)
        head = [ln for ln in out.splitlines() if ln.startswith("ROOT CAUSE")]
        if not head or want not in head[0]:
            fail("ranks %s traced: heading %r, expected it to contain %r" % (keep, head, want))
        if " and %d without a trace" % (4 - len(keep)) in out:
            fail("the old ambiguous heading is still there:\n%s" % out[:2000])
        print("ok: ranks %s traced: %s" % (keep, head[0]))


CASES = {"fifo": case_fifo, "sparse": case_sparse, "ranks": case_ranks, "ring_damage": case_ring_damage,
         "ring_full_tmpfs": case_ring_full_tmpfs, "write_failed": case_write_failed, "heading": case_heading}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fill":
        fill_tmpfs(sys.argv[2])
        return
    if len(sys.argv) != 5 or sys.argv[4] not in CASES:
        sys.exit(__doc__)
    tranalyze, gen, work, case = sys.argv[1:5]
    work = os.path.join(os.path.abspath(work), case)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    CASES[case](os.path.abspath(tranalyze), gen, work)
    shutil.rmtree(work, ignore_errors=True)      # the sparse files are large on paper


if __name__ == "__main__":
    main()
