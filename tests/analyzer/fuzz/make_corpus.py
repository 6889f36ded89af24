#!/usr/bin/env python3
"""Writes the fuzzing corpus kept in the repository (tests/analyzer/corpus):

    make_corpus.py [CORPUS_DIR]     (default: tests/analyzer/corpus)

json/: jobs of gen_traces.py (every rank's JSON trace in one seed,
       each file after a "\\n@@ NAME\\n" line: fuzz_tranalyze.c's input
       format), among them damaged files, Python stacks, NaN checks,
       completion fields, a communicator listed twice; and single traces.
       v2_*: version 2's packed calls and checks (tests/common/trace.py
       pack_trace): a job, one with signals (pairs), one trace alone, and
       packed calls and checks damaged in each way the format names
       (gen_traces.py packed_damaged).
ring/: small ring files made with tests/analyzer/gen_ring.py (a killed rank
       among JSON traces, a wrapped ring, Python stacks in blobs, a JSON
       snapshot merged with its ring, a process that died of a signal, a
       torn record, a ring alone), each ring cut to what it holds
       (a few records, communicator slots and blob bytes); huge_slots_*:
       rings whose communicator slots claim 1,048,575 ranks each (alone,
       among a job's rings, in a file cut short of the 65535 slots its
       header claims).

Run it again when the trace or ring format changes (the seeds are then of
the new format); the files are small (a few hundred KB in all). Stdlib only."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, ".."))
import gen_ring as gr  # noqa: E402
g = gr.g                # gen_traces.py, wherever gen_ring.py finds it
sys.path.insert(0, os.path.join(HERE, "..", "..", "common"))
from trace import pack_trace  # noqa: E402  (version 2's packed calls and checks)

SEP = "\n@@ %s\n"
JSON_JOBS = ["extra_collective", "pipeline_missing_send", "py_extra_collective", "oom", "nan_input_fp32",
             "fp8_overflow", "damaged", "init_hang", "p2p_size", "two_jobs", "missing_trace", "dup_comm",
             "completed_observed"]
# CUDA graphs (gen_graphs.py): "graphs", GraphLaunch entries, damaged graph data
GRAPH_JOBS = ["graph_fewer", "graph_p2p_fewer", "graph_damaged"]
# version 2 (seed name: scenario): jobs with every trace packed; packed_damaged's traces are version 2 already
PACKED_JOBS = {"v2_extra_collective": "extra_collective", "v2_signal_missing": "signal_missing",
               "v2_damaged": "packed_damaged"}


def seed(files):
    """[(name, bytes)] as one input"""
    return b"".join(SEP.encode() % n.encode() + data for n, data in files)


def gen_json_job(sc, gen=None):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, gen or g.__file__, sc, d], check=True, stdout=subprocess.DEVNULL)
        out = []
        for n in sorted(os.listdir(d)):
            if n != "expected.json":
                with open(os.path.join(d, n), "rb") as f:
                    out.append((n, f.read()))
        return out


def packed(files):
    """the files with each packable version-1 trace as version 2; the others as they are"""
    out = []
    for n, data in files:
        try:
            data = jdump(pack_trace(json.loads(data)))
        except (ValueError, RecursionError):      # not JSON, not a version-1 trace, not packable
            pass
        out.append((n, data))
    return out


def small_ring(r, capacity=16, **kw):
    """gen_ring's ring of Rank r holding its last `capacity` calls, with as
    few communicator slots and blob bytes as it needs"""
    rg = gr.rank_ring(r, capacity=capacity, lost=max(0, len(r.calls) - capacity), **kw)
    rg.h["max_comms"] = max(1, len(rg.comms))
    rg.blob_bytes = 512
    while True:
        try:
            return rg, rg.to_bytes()
        except AssertionError:
            rg.blob_bytes *= 2


def jdump(d):
    return json.dumps(d, separators=(",", ":")).encode()


def ring_seeds():
    g.random.seed(1234)      # the ticks' jitter, as gen_traces.py's command line seeds it
    out = {}
    # rank 2 killed (its ring only), the others stopped by SIGTERM: JSON + rings
    ranks, _ = g.world_job("fzkilled", 3)
    for step in range(5):
        for r in ranks:
            if not (r.rank == 2 and step == 4):
                r.coll(0, count=4096, site="train_step", caller="train_step")
    files = []
    for r in ranks:
        if r.rank == 2:
            files.append((gr.ring_name(r), small_ring(r)[1]))
            continue
        r.finish("signal", 15)
        files.append((gr.ring_name(r), small_ring(r, state=gr.SIGNALED, signo=15)[1]))
        files.append((r.filename(), jdump(gr.new_json(r, ring_file="traces/" + gr.ring_name(r), capacity=16))))
    out["killed_rank"] = files
    # a wrapped ring: 40 calls, the last 16 kept; rank 1's different call in it
    ranks, _ = g.world_job("fzwrapped", 2)
    for step in range(40):
        for r in ranks:
            if r.rank == 1 and step == 33:
                r.coll(0, op="AllGather", count=16, site="log_metrics", caller="train_step")
            else:
                r.coll(0, count=4096, site="train_step", caller="train_step")
    out["wrapped"] = [(gr.ring_name(r), small_ring(r)[1]) for r in ranks]
    # Python stacks in PYCODE/PYSTACK blobs, every rank killed
    ranks, _ = g.py_extra_job("fzpy", natives=("train_step", "train_step"), steps=4)
    out["py_hang"] = [(gr.ring_name(r), small_ring(r)[1]) for r in ranks[:2]]
    # JSON snapshots at step 2, the rings hold every call after (merged)
    ranks, _ = g.world_job("fznewer", 2)
    snap = {}
    for step in range(6):
        if step == 2:
            for r in ranks:
                d = gr.new_json(r, reason="snapshot", signal=10, capacity=16)
                d["ring"]["file"] = "traces/" + gr.ring_name(r)
                snap[r.rank] = d
        for r in ranks:
            if step == 4 and r.rank == 1:
                r.coll(0, op="Broadcast", count=8, root=1, site="log_metrics", caller="train_step")
            r.coll(0, count=4096, site="train_step", caller="train_step")
    out["newer"] = [f for r in ranks for f in ((r.filename(), jdump(snap[r.rank])),
                                               (gr.ring_name(r), small_ring(r)[1]))]
    # died of SIGABRT, no rank or job variables; rank 1's last record torn
    ranks, _ = g.world_job("fzabrt", 2)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=16, site="train_step", caller="train_step")
    files = []
    for r in ranks:
        rg, data = small_ring(r, state=gr.SIGNALED, signo=6, env_rank=False, job=False)
        if r.rank == 1:
            rg.torn = {rg.first + len(rg.records) - 1}
            data = rg.to_bytes()
        files.append((gr.ring_name(r), data))
    out["signaled_torn"] = files
    # one ring alone
    out["alone"] = out["wrapped"][:1]
    # CUDA graphs: GRAPH blobs and GraphLaunch records (rank 3 replayed one time fewer)
    import gen_graphs as gg
    ranks, _, _ = gg.fewer_job("fzgraph", python=False)
    out["graph"] = [(gr.ring_name(r), small_ring(r, gpu=gr.graph_gpu)[1]) for r in ranks]
    return out


BLOB_CRASH, BLOB_ERROR, BLOB_PYEXC = 8, 9, 11     # trshim/ring_format.h


def crash_blob(signo, code, addr, ips, stack=-1, pystack=-1, message=b"", state=2):
    """a TRR_BLOB_CRASH payload (trr_crash)"""
    ip = list(ips)[:64] + [0] * (64 - len(ips))
    return struct.pack("<IiiiQQiIii16s64Q512s", state, signo, code, 4242, addr, 123456789, 0, len(ips), stack,
                       pystack, b"loader", *ip, message)


def error_blob(kind, code, api, name, stack=-1, comm=-1):
    """a TRR_BLOB_ERROR payload (trr_error)"""
    return struct.pack("<iiiiiiiIQ48s48s", kind, code, stack, -1, 4242, comm, 0 if kind == 1 else -1, 0, 987654321,
                       api, name)


def pyexc_blob(type_, message, file, function, line, state=2, count=1):
    """a TRR_BLOB_PYEXC payload (trr_pyexc)"""
    return struct.pack("<IiiIQ128s512s512s256s", state, line, 4242, count, 123456789, type_, message, file, function)


def rings_with_blobs(ranks, ring_kw, blobs):
    """each rank's small ring (small_ring(r, **ring_kw(r))) with blobs(r) appended, the blob area grown to fit"""
    files = []
    for r in ranks:
        rg, _ = small_ring(r, **ring_kw(r))
        rg.extra_blobs = blobs(r)
        rg.blob_bytes = 512
        while True:
            try:
                data = rg.to_bytes()
                break
            except AssertionError:
                rg.blob_bytes *= 2
        files.append((gr.ring_name(r), data))
    return files


def two_rank_job(name, seed):
    """2 ranks, 3 all-reduces, rank 1 stopping before the third"""
    g.random.seed(seed)
    ranks, _ = g.world_job(name, 2)
    for step in range(3):
        for r in ranks:
            if not (r.rank == 1 and step == 2):
                r.coll(0, count=64, site="train_step", caller="train_step")
    return ranks


def pyexc_seeds():
    """issue 21: a Python rank that exited through an uncaught exception
    (PYEXC blob), its peer's blob reserved and empty, rings alone"""
    ranks = two_rank_job("fzpyexc", 4322)
    return {"pyexc": rings_with_blobs(
        ranks, lambda r: {"state": gr.EXITED, "signo": 0} if r.rank == 1 else {"state": gr.SIGNALED, "signo": 15},
        lambda r: [(BLOB_PYEXC, pyexc_blob(b"ValueError", b"bad batch 6", b"/job/train.py", b"load_batch", 22)
                    if r.rank == 1 else b"\0" * 1432)])}


def crash_seeds():
    """issue 21: a rank that crashed (CRASH blob: SIGSEGV with its frames,
    one of them the ring's stack 0), its peer with an asynchronous NCCL
    error (ERROR blob) and a CUDA error, all rings alone"""
    ranks = two_rank_job("fzcrash", 4321)

    def blobs(r):
        if r.rank == 1:
            rg, _ = small_ring(r)
            ips = list(rg.stacks.get(0, [])) + [0x1234, 0xdeadbeef]
            return [(BLOB_CRASH, crash_blob(11, 1, 0xc, ips, stack=-1)),
                    (BLOB_ERROR, error_blob(1, 700, b"cudaStreamSynchronize", b"cudaErrorIllegalAddress", stack=0))]
        return [(BLOB_CRASH, b"\0" * 1088),       # reserved, no crash
                (BLOB_ERROR, error_blob(2, 6, b"ncclCommGetAsyncError", b"ncclRemoteError", stack=0, comm=0))]
    return {"crash": rings_with_blobs(ranks, lambda r: {"state": gr.SIGNALED, "signo": 11 if r.rank == 1 else 15},
                                      blobs)}


BIG = 1048575          # the largest communicator size a trace may give (TA_COMM_PLACES_MAX - 1)


def huge_slots(r, n, cut=None, **kw):
    """Rank r's small ring with n more communicator slots, each claiming BIG
    ranks (ids of its own, no calls): places the analysis must not make
    from a file of a few KiB (issue 33, item 5). cut: the header says
    max_comms = ncomms = cut (far more than the file holds; the file ends
    after its slots)."""
    rg, _ = small_ring(r, **kw)
    for i in range(n):
        rg.comms.append(dict(rg.comms[0], id=0x7e57000000000000 + (r.rank << 16) + i, size=BIG, rank=r.rank,
                             parent=-1, parent_id=0, kind=0, colls=0, fp_seq=0, fp_hash=0, fp_step=0,
                             ncheckpoints=0, checkpoints=[]))
    rg.h["max_comms"] = len(rg.comms)
    data = rg.to_bytes()
    if cut:
        # the header's max_comms and ncomms say `cut` slots; the file holds the header and its real slots only
        rg.h["max_comms"] = cut
        full = bytearray(rg.to_bytes())
        data = bytes(full[:4096 + len(rg.comms) * 1024])
    return data


def huge_seeds():
    """rings whose communicator slots claim BIG ranks each: one alone, one
    among a job's rings (its peers' world communicator real), and one whose
    header claims 65535 slots in a file cut after its 40"""
    g.random.seed(4323)
    ranks, _ = g.world_job("fzhuge", 2)
    for step in range(3):
        for r in ranks:
            r.coll(0, count=64, site="train_step", caller="train_step")
    return {"huge_slots_alone": [(gr.ring_name(ranks[0]), huge_slots(ranks[0], 64))],
            "huge_slots_job": [(gr.ring_name(r), huge_slots(r, 32) if r.rank == 1 else small_ring(r)[1])
                               for r in ranks],
            "huge_slots_cut": [(gr.ring_name(ranks[1]), huge_slots(ranks[1], 40, cut=65535))]}


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "analyzer", "corpus")
    # the generated seeds are rewritten; others (crafted by hand: crafted_*) stay
    for sub in ("json", "ring"):
        os.makedirs(os.path.join(corpus, sub), exist_ok=True)
    total = 0
    for sc in JSON_JOBS:
        data = seed(gen_json_job(sc))
        with open(os.path.join(corpus, "json", sc), "wb") as f:
            f.write(data)
        total += len(data)
    for sc in GRAPH_JOBS:
        data = seed(gen_json_job(sc, os.path.join(HERE, "..", "gen_graphs.py")))
        with open(os.path.join(corpus, "json", sc), "wb") as f:
            f.write(data)
        total += len(data)
    for name, sc in PACKED_JOBS.items():
        data = seed(packed(gen_json_job(sc)))
        with open(os.path.join(corpus, "json", name), "wb") as f:
            f.write(data)
        total += len(data)
    # single traces: the first file of a job (named after its content by the harness)
    for sc, name in (("fp8_overflow", "fp8_overflow-one"), ("py_extra_collective", "py_extra_collective-one"),
                     ("py_extra_collective", "v2_py_extra_collective-one")):
        _, data = gen_json_job(sc)[0]
        if name.startswith("v2_"):
            data = packed([("", data)])[0][1]
        with open(os.path.join(corpus, "json", name), "wb") as f:
            f.write(data)
        total += len(data)
    for name, files in (list(ring_seeds().items()) + list(crash_seeds().items()) + list(pyexc_seeds().items()) +
                        list(huge_seeds().items())):
        data = seed(files)
        with open(os.path.join(corpus, "ring", name), "wb") as f:
            f.write(data)
        total += len(data)
    print("%s: %d seeds, %d bytes" % (corpus, len(os.listdir(os.path.join(corpus, "json"))) +
                                      len(os.listdir(os.path.join(corpus, "ring"))), total))


if __name__ == "__main__":
    main()
