#!/usr/bin/env python3
"""Memory bombs (issue 33, item 5): a small input that claims huge
communicators costs tranalyze memory bounded by the input's real size, or
is refused with a note naming the file and the claim.

    check_bombs.py TRANALYZE WORKDIR

Each communicator costs the analysis a table of its places (its size, a
member's rank + 1): all of a job's communicators together get at most
4194304 places plus 2 per byte of input (analyzer/load/load_bounds.c). Cases,
each with its exact outcome and a peak RSS (os.wait4's ru_maxrss) below
64 MiB + 20 x the input's bytes:

  ring      a ~1 MiB ring whose 256 communicator slots each claim 1048575
            ranks (2 GiB of places before): the first five fit, the sixth
            is named ("communicator 5 of this trace (0x...1005) claims
            1048575 ranks, more than the input can describe"), the file
            is not used: status 2
  ring_ok   the same ring with 4 slots: within the floor, analysed
            (status 1, its no_trace finding), no refusal
  json      a JSON trace (version 1) with 256 such communicators: the same
            refusal, of the first that does not fit (comms[4]: the file is
            smaller)
  packed    that trace with version 2's packed calls: the same
  many      64 JSON traces of one job, each with its own communicator of
            1048575 ranks: the first ones to fit are used, the others
            named one by one, at most 4194304 + 2 per byte places in all
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import gen_ring as gr  # noqa: E402
from trace import pack_trace  # noqa: E402

PLACES_FLOOR, PLACES_PER_BYTE = 1 << 22, 2      # analyzer/load/ta_bounds.h
BIG = 1048575                                    # TA_COMM_PLACES_MAX - 1: the largest size accepted
MIB = 1 << 20


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(tranalyze, args):
    """(status, --json result, peak RSS in bytes)"""
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        p = subprocess.Popen([tranalyze, "--json"] + args, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        out, err = o.read().decode(), e.read().decode()
    if rc not in (0, 1, 2):
        fail("tranalyze %s: status %d (a signal?)\n%s" % (" ".join(args), rc, err[-3000:]))
    try:
        res = json.loads(out)
    except ValueError:
        res = None
    return rc, res, ru.ru_maxrss * 1024, err


def input_bytes(d):
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))


def check_rss(what, rss, d):
    n = input_bytes(d)
    bound = 64 * MIB + 20 * n
    if rss >= bound:
        fail("%s: peak RSS %.1f MiB from %d bytes of input, bound %.1f MiB" % (what, rss / MIB, n, bound / MIB))
    return "%s: %d bytes of input, peak RSS %.1f MiB (bound %.1f MiB)" % (what, n, rss / MIB, bound / MIB)


def refusal(k, cid, claim=BIG):
    return "communicator %d of this trace (0x%016x) claims %d ranks, more than the input can describe" % (k, cid, claim)


def note_of(what, res, path, sub):
    for n in res["inputs"]:
        if n.get("file") == path and sub in n["problem"]:
            if not n["skipped"]:
                fail("%s: the note on %s is not a skip: %r" % (what, path, n))
            return n["problem"]
    fail("%s: no note on %s containing %r; notes: %r" % (what, path, sub, res["inputs"]))


def bomb_ring(path, nslots, job="bomb", capacity=6000):
    """a ring of rank 0 of job whose nslots communicator slots (ids 0x1000 + i) each claim BIG ranks, no records"""
    rg = gr.Ring("bombhost", 4242, 1.7e9, 1_000_000_000_000, capacity=capacity, max_comms=nslots, blob_bytes=1 << 12)
    rg.h.update(env_rank=0, world_size=BIG, local_rank=0, rank_source="RANK", job_id=job, job_source="TRSHIM_JOB_ID",
                state=gr.EXITED)
    for i in range(nslots):
        rg.comms.append({"valid": 1, "kind": 0, "id": 0x1000 + i, "parent": -1, "blocking": 1, "size": BIG, "rank": 0,
                         "device": 0, "init_done": 1, "init_rc": 0, "init_enter": 1_000_000_001_000,
                         "init_exit": 1_000_000_002_000, "init_stack": -1, "from_uid": 1})
    rg.write(path)


def bomb_json(rank, ids, job="bombjson"):
    """rank's JSON trace (version 1, gen_traces.py) with one communicator of BIG ranks per id, one call on each"""
    g = gr.g
    r = g.Rank(job, rank, BIG)
    for cid in ids:
        ix = r.init("0x%016x" % cid, BIG, rank)
        r.coll(ix, count=16, site="train_step", caller="train_step")
    r.finish()
    return r.to_json()


def write(d, name, data):
    with open(os.path.join(d, name), "w") as f:
        json.dump(data, f)


def main():
    tranalyze, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    log = []

    # a ~1 MiB ring, 256 slots of BIG ranks
    d = os.path.join(work, "ring")
    os.makedirs(d)
    path = os.path.join(d, "trshim.bomb.bombhost.4242.ring")
    bomb_ring(path, 256)
    if not 900_000 <= os.path.getsize(path) <= 1_200_000:
        fail("the ring bomb is %d bytes, not about 1 MiB" % os.path.getsize(path))
    rc, res, rss, err = run(tranalyze, [d])
    if rc != 2:
        fail("ring: status %d, expected 2 (nothing usable)\n%s" % (rc, err))
    n = input_bytes(d)
    budget = PLACES_FLOOR + PLACES_PER_BYTE * n
    fit = budget // BIG           # all alike: by id, the first ones fit
    if fit != 5:
        fail("ring: %d communicators fit in %d places, the case wants 5" % (fit, budget))
    want = (refusal(5, 0x1005) + ": the job's communicators may have %d places in all (%d + %d per byte of the %d "
            "bytes of input), %d taken by those accepted first; the trace is not used"
            % (budget, PLACES_FLOOR, PLACES_PER_BYTE, n, 5 * BIG))
    got = note_of("ring", res, path, refusal(5, 0x1005))
    if got != want:
        fail("ring: the note is\n  %r\nexpected\n  %r" % (got, want))
    log.append(check_rss("ring", rss, d))

    # 4 slots: within the floor, analysed
    d = os.path.join(work, "ring_ok")
    os.makedirs(d)
    path = os.path.join(d, "trshim.bomb.bombhost.4242.ring")
    bomb_ring(path, 4)
    rc, res, rss, err = run(tranalyze, [d])
    traced = [r["rank"] for r in res["ranks"] if r.get("file")] if res else None
    if rc != 1 or [f["kind"] for f in res["findings"]] != ["no_trace"] or traced != [0]:
        fail("ring_ok: status %d, findings %r, ranks traced %r; expected 1, [no_trace], [0]\n%s" %
             (rc, res and [f["kind"] for f in res["findings"]], traced, err))
    if any("more than the input can describe" in x["problem"] for x in res["inputs"]):
        fail("ring_ok: a refusal: %r" % res["inputs"])
    log.append(check_rss("ring_ok", rss, d))

    # the same claims as JSON, version 1 and 2
    ids = [0x2000 + i for i in range(256)]
    trace = bomb_json(0, ids)
    for case, data in (("json", trace), ("packed", pack_trace(json.loads(json.dumps(trace))))):
        d = os.path.join(work, case)
        os.makedirs(d)
        name = "trshim.bombjson.r0.node0.%d.json" % (1000 + len(log))
        write(d, name, data)
        path = os.path.join(d, name)
        if case == "packed" and data.get("version") != 2:
            fail("packed: the trace is version %r" % data.get("version"))
        rc, res, rss, err = run(tranalyze, [d])
        if rc != 2:
            fail("%s: status %d, expected 2\n%s" % (case, rc, err))
        n = input_bytes(d)
        budget = PLACES_FLOOR + PLACES_PER_BYTE * n
        fit = budget // BIG
        got = note_of(case, res, path, refusal(fit, ids[fit]))
        want = (refusal(fit, ids[fit]) + ": the job's communicators may have %d places in all (%d + %d per byte of "
                "the %d bytes of input), %d taken by those accepted first; the trace is not used"
                % (budget, PLACES_FLOOR, PLACES_PER_BYTE, n, fit * BIG))
        if got != want:
            fail("%s: the note is\n  %r\nexpected\n  %r" % (case, got, want))
        log.append(check_rss(case, rss, d))

    # 64 traces of one job, each with a communicator of its own
    d = os.path.join(work, "many")
    os.makedirs(d)
    paths = {}
    for rank in range(64):
        name = "trshim.bombmany.r%d.node0.%d.json" % (rank, 2000 + rank)
        write(d, name, bomb_json(rank, [0x3000 + rank], job="bombmany"))
        paths[rank] = os.path.join(d, name)
    n = input_bytes(d)
    fit = (PLACES_FLOOR + PLACES_PER_BYTE * n) // BIG       # all alike: by id, the first ones
    rc, res, rss, err = run(tranalyze, [d])
    used = sorted(r["rank"] for r in res["ranks"] if r.get("file"))
    if used != list(range(fit)):
        fail("many: ranks used %r, expected 0-%d (%d communicators of %d places fit)" % (used, fit - 1, fit, BIG))
    for rank in range(fit, 64):
        note_of("many", res, paths[rank], refusal(0, 0x3000 + rank))
    log.append(check_rss("many", rss, d) + " (%d of 64 traces used)" % fit)
    print("\n".join(log))
    print("ok: every bomb bounded or refused")


if __name__ == "__main__":
    main()
