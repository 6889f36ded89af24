"""The ring header's live fields (include/trshim/ring_format.h: hang_sec,
stalls, stall_ns, stall_rec, stall_since_ns, pending, pending_since_ns,
pass_ns, mem[]) in the rings a simulator job leaves, read with
tests/common/ring.py while it runs or after: for tests/shim/test_shim.py's
cases (watchdog, watchdog-over, complete-clean) and
tests/analyzer/jobs/run_job.py (the oom and clean jobs).
Every check is exact; a failed one raises checks.Failure."""
import os
import re
import time

import ring
from checks import Failure, check, eq

RING_NAME = re.compile(r"^trshim\..+\.ring$")
UNKNOWN = (1 << 64) - 1                 # fail_free / fail_total not known
PINNED_APIS = ("cudaMallocHost", "cudaHostAlloc")


def rings_by_rank(d):
    """{RANK of its header: the ring read} of every ring file in folder d"""
    out = {}
    for n in sorted(os.listdir(d)):
        if RING_NAME.match(n):
            rg = ring.read_ring(os.path.join(d, n))
            r = rg["header"]["env_rank"]
            check(r not in out, "two rings of rank %d in %s" % (r, d))
            out[r] = rg
    return out


def check_no_stall(h, what, hang_sec):
    """the rank's watchdog (hang_sec) found no hang, now nor before"""
    eq(h["hang_sec"], hang_sec, what + ": header hang_sec")
    eq((h["stall_ns"], h["stalls"], h["stall_rec"], h["stall_since_ns"]), (0, 0, 0, 0),
       what + ": header stall_ns, stalls, stall_rec, stall_since_ns")


def check_idle(h, what, hang_sec):
    """no hang now nor before, nothing pending at the poller's last pass"""
    check_no_stall(h, what, hang_sec)
    eq((h["pending"], h["pending_since_ns"]), (0, 0), what + ": header pending, pending_since_ns")


def check_pending_as_trace(h, t, what):
    """the operations pending at the poller's last pass are those the trace
    t (calls as rows, tests/common/trace.py) shows pending, the oldest
    enqueued (exit_ns) at pending_since_ns: for a rank whose trace was
    written while nothing completed any more (a hung rank's at SIGTERM)"""
    f = {n: i for i, n in enumerate(t["call_fields"])}
    pend = [c[f["exit_ns"]] for c in t["calls"] if c[f["gpu"]] == "pending"]
    eq((h["pending"], h["pending_since_ns"]), (len(pend), min(pend) if pend else 0),
       what + ": header pending, pending_since_ns (the trace's pending operations)")


def stuck_record(rg, what):
    """the record the header's stall_rec names (index + 1), which must be in the ring"""
    h = rg["header"]
    check(h["stall_rec"] > 0, "%s: header stall_rec %d names no record" % (what, h["stall_rec"]))
    recs = [x for x in rg["records"] if x["index"] == h["stall_rec"] - 1]
    eq(len(recs), 1, "%s: records of index stall_rec - 1 = %d in the ring" % (what, h["stall_rec"] - 1))
    return recs[0]


def check_stuck(rg, what, hang_sec, op, seq):
    """The rank's watchdog started one hang, on GPU operation op #seq, which
    is the one operation pending: stall_since_ns is its enqueue time (the
    record's exit_ns), found hang_sec or more after it, the oldest pending
    operation is that one, the poller passed since."""
    h = rg["header"]
    eq(h["hang_sec"], hang_sec, what + ": header hang_sec")
    eq(h["stalls"], 1, what + ": header stalls")
    check(h["stall_ns"] != 0, what + ": header stall_ns is 0 while the rank hangs")
    x = stuck_record(rg, what)
    eq((ring.OPS[x["op"]], x["seq"], ring.REC_STATES[x["state"]], ring.GPU[x["gpu"]]),
       (op, seq, "returned", "pending"), what + ": the stuck record (op, seq, state, gpu)")
    eq(h["stall_since_ns"], x["exit_ns"], what + ": header stall_since_ns (the stuck call's enqueue time)")
    check(h["stall_ns"] >= h["stall_since_ns"] + hang_sec * 10**9,
          "%s: found stuck at %d, %d ns after it was enqueued at %d (hang_sec %d)" %
          (what, h["stall_ns"], h["stall_ns"] - h["stall_since_ns"], h["stall_since_ns"], hang_sec))
    eq((h["pending"], h["pending_since_ns"]), (1, h["stall_since_ns"]),
       what + ": header pending, pending_since_ns (the stuck operation alone)")
    check(h["pass_ns"] >= h["stall_ns"], "%s: the poller's last pass %d before the stall %d" %
          (what, h["pass_ns"], h["stall_ns"]))


def check_hang(d, stuck, hang_sec, nranks):
    """While a job hangs: the rings of the ranks in stuck ({rank: (op, seq)})
    name their stuck operation, the others' say nothing stuck, nothing pending."""
    rings = rings_by_rank(d)
    eq(sorted(rings), list(range(nranks)), "ranks with a ring")
    for r, rg in sorted(rings.items()):
        if r in stuck:
            check_stuck(rg, "rank %d" % r, hang_sec, *stuck[r])
        else:
            check_idle(rg["header"], "rank %d" % r, hang_sec)


def wait_hang_over(d, stuck, hang_sec, limit=30):
    """Once the stuck operations of stuck ({rank: (op, seq)}) completed: the
    hang is over (stall_ns 0; stalls, stall_rec and stall_since_ns as the hang
    left them), nothing pending. Read again until stall_ns is 0 (limit s)."""
    t0 = time.monotonic()
    while True:
        rings = rings_by_rank(d)
        if all(rings[r]["header"]["stall_ns"] == 0 for r in stuck) or time.monotonic() - t0 > limit:
            break
        time.sleep(0.05)
    for r, (op, seq) in sorted(stuck.items()):
        h, what = rings[r]["header"], "rank %d after the hang" % r
        eq((h["stall_ns"], h["stalls"], h["hang_sec"]), (0, 1, hang_sec), what + ": header stall_ns, stalls, hang_sec")
        x = stuck_record(rings[r], what)
        eq((ring.OPS[x["op"]], x["seq"], ring.GPU[x["gpu"]]), (op, seq, "done"), what + ": the record it named")
        eq(h["stall_since_ns"], x["exit_ns"], what + ": header stall_since_ns")
        eq((h["pending"], h["pending_since_ns"]), (0, 0), what + ": header pending, pending_since_ns")


def mem_slot(h, device, what):
    slots = [m for m in h["mem"] if m["used"] == 1 and m["device"] == device]
    eq(len(slots), 1, "%s: header memory slots of device %d" % (what, device))
    return slots[0]


def check_memory(h, t, what):
    """The header's device memory is the trace's memory (t: the trace of the
    same process, written when nothing allocated since): the same live,
    peak, allocation and free counts and peak time per device, each device
    with allocations listed in both; per device the number of failed device
    allocations, the first one's size, live bytes, free and total bytes,
    error code, stacks and time. Returns the number of devices compared."""
    devs = t["memory"]["devices"]
    for d in devs:
        m = mem_slot(h, d["device"], what)
        eq((m["live"], m["peak"], m["allocs"], m["frees"], m["peak_ns"]),
           (d["live_bytes"], d["peak_bytes"], d["allocs"], d["frees"], d["peak_ns"]),
           "%s device %d: header live, peak, allocs, frees, peak_ns (the trace's)" % (what, d["device"]))
    eq(sorted(m["device"] for m in h["mem"] if m["used"] == 1 and m["allocs"]), sorted(d["device"] for d in devs),
       what + ": devices with allocations in the header and in the trace")
    eq(h["mem_devices_dropped"], 0, what + ": header mem_devices_dropped")
    fails = [f for f in t["memory"]["failures"] if f["device"] is not None and f["api"] not in PINNED_APIS]
    eq(t["memory"]["failures_dropped"], 0, what + ": failures dropped")
    for dev in sorted({f["device"] for f in fails}):
        mine = [f for f in fails if f["device"] == dev]
        f, m = mine[0], mem_slot(h, dev, what)
        eq((m["failures"], m["fail_api"], m["fail_bytes"], m["fail_live"], m["fail_free"], m["fail_total"],
            m["fail_code"], m["fail_stack"], m["fail_pystack"], m["fail_ns"]),
           (len(mine), f["api"], f["bytes"], f["live_bytes"],
            UNKNOWN if f["free_bytes"] is None else f["free_bytes"],
            UNKNOWN if f["total_bytes"] is None else f["total_bytes"], f["error_code"], f["stack"], f["pystack"],
            f["t_ns"]), "%s device %d: header failures and the first one (the trace's)" % (what, dev))
    for m in h["mem"]:
        if m["used"] == 1 and not any(f["device"] == m["device"] for f in fails):
            eq((m["failures"], m["fail_ns"]), (0, 0), "%s device %d: header failures" % (what, m["device"]))
    return len(devs)


def check_clean(d, traces, hang_sec=300):
    """After a clean job: each trace's ring says no hang ever, nothing
    pending, and the trace's memory (each rank allocated device memory)."""
    rings = rings_by_rank(d)
    for t in traces:
        what = "rank %d" % t["rank"]
        check(t["rank"] in rings, what + ": no ring")
        h = rings[t["rank"]]["header"]
        check_idle(h, what, hang_sec)
        check(h["pass_ns"] != 0, what + ": the completion poller never passed (header pass_ns 0)")
        check(check_memory(h, t, what) >= 1, what + ": no device memory in the trace to compare with")


__all__ = ["Failure", "rings_by_rank", "check_no_stall", "check_idle", "check_pending_as_trace", "check_stuck", "check_hang", "wait_hang_over", "check_memory",
           "check_clean"]
