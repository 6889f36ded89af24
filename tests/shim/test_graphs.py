#!/usr/bin/env python3
"""CUDA graphs under the shim (issue 16): test_graphs.py CASE. A 4-rank job
(tests/shim/shim_graph.c) captures AllReduce, AllReduce, Broadcast (pair
communicator) and a Send/Recv group into one graph and replays it; the
traces must number every replayed call exactly as if it had been issued
eagerly, and tranalyze must name the rank, communicator, sequence number,
replay number and the capture and launch sites of a planted failure.
Stdlib only."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import check, eq, path_of, run_case  # noqa: E402
import ring  # noqa: E402
from test_shim import Case, by_rank, check_done, check_site, end_job, load_traces, popen_job, wait_markers  # noqa: E402

GRAPH_OPS = ["AllReduce", "AllReduce", "Broadcast", "Send", "Recv"]


def run_job(c, mode, replays, timeout=120, want_rc=0):
    return c.launch(4, [path_of("SHIM_GRAPH"), mode, str(replays)], timeout=timeout, want_rc=want_rc)


def launches(t):
    return [x for x in t["calls"] if x["op"] == "GraphLaunch"]


def lane_key(t, x):
    """(communicator kind, lane, peer) of a GraphLaunch entry"""
    return (t["comms"][x["comm"]]["kind"], x["lane"], x["peer"])


def check_graph(t, r, gather=False):
    """The trace's one graph: its captured calls in capture order, where
    they and the capture were made; the captured calls themselves take no
    number."""
    what = "rank %d" % r
    eq(len(t["graphs"]), 1, what + ": graphs")
    g = t["graphs"][0]
    ops = list(GRAPH_OPS)
    if gather:
        ops[1] = "AllGather"
    eq([k["op"] for k in g["calls"]], ops, what + ": the graph's calls")
    kinds = [t["comms"][k["comm"]]["kind"] for k in g["calls"]]
    eq(kinds, ["InitRank", "InitRank", "Split", "InitRank", "InitRank"], what + ": their communicators")
    eq([(k["lane"], k["peer"], k["count"]) for k in g["calls"]],
       [("coll", None, 1024), ("coll", None, 16), ("coll", None, 64), ("send", (r + 1) % 4, 32),
        ("recv", (r + 3) % 4, 32)], what + ": lanes, peers, counts")
    for k in g["calls"]:
        check_site(t, k["stack"], "capture_step", what + " captured " + k["op"])
    check_site(t, g["stack"], "capture_step", what + " capture begin")
    check_site(t, g["end_stack"], "capture_step", what + " capture end")
    eq((g["base"], g["dropped"]), (-1, 0), what + ": base, dropped")
    captured = [x for x in t["calls"] if x["capturing"]]
    eq([x["op"] for x in captured], ops, what + ": captured entries")
    eq({x["seq"] for x in captured}, {0}, what + ": captured entries take no number")


def case_clean(c):
    """1,000 replays, an eager AllReduce after every 250th: every replayed
    collective and message numbered exactly, colls and fingerprints counting
    them, every launch completed, and no finding."""
    n = 1000
    run_job(c, "clean", n)
    ranks = by_rank(load_traces(c.traces))
    eq(sorted(ranks), [0, 1, 2, 3], "a trace per rank")
    for r, t in ranks.items():
        what = "rank %d" % r
        check_graph(t, r)
        ls = launches(t)
        eq(len(ls), 4 * n, what + ": GraphLaunch entries (4 lanes per launch)")
        want = []
        for k in range(1, n + 1):
            world_seq = 2 * (k - 1) + (k - 1) // 250 + 1
            want += [(k, ("InitRank", "coll", None), world_seq, 2), (k, ("Split", "coll", None), k, 1),
                     (k, ("InitRank", "send", (r + 1) % 4), k, 1), (k, ("InitRank", "recv", (r + 3) % 4), k, 1)]
        got = [(x["replay"], lane_key(t, x), x["seq"], x["count"]) for x in ls]
        eq(got, want, what + ": replay, lane, first number, numbers per replay")
        eq({(x["graph"], x["rc"]) for x in ls}, {(0, 0)}, what + ": graph index and launch status")
        for k in range(n):
            four = ls[4 * k:4 * k + 4]
            eq(len({(x["enter_ns"], x["exit_ns"], x["stack"], x["sendbuff"]) for x in four}), 1,
               what + ": the lanes of launch %d share times, site and executable graph" % (k + 1))
        check_site(t, ls[0]["stack"], "train_loop", what + " launch (through cuGraphLaunch's entry point)")
        check_site(t, ls[-1]["stack"], "train_loop", what + " launch (cudaGraphLaunch)")
        check_done(ls, what)
        eager = [x for x in t["calls"] if x["op"] == "AllReduce" and not x["capturing"]]
        eq([x["seq"] for x in eager], [2 * 250 * k + k for k in range(1, 5)], what + ": eager AllReduce seqs")
        world, pair = t["comms"][0], t["comms"][1]
        eq((world["colls"], pair["colls"]), (2 * n + 4, n), what + ": colls")
        eq(world["fingerprint"]["seq"], 2 * n + 4, what + ": the world fingerprint covers every replay")
    eq(len({t["comms"][0]["fingerprint"]["hash"] for t in ranks.values()}), 1, "world fingerprints agree")
    eq(len({(t["comms"][1]["id"], t["comms"][1]["fingerprint"]["hash"]) for t in ranks.values()}), 2,
       "pair fingerprints agree within each pair")
    # the ring file holds the same graph and launches
    rg = ring.read_ring(ranks[0]["ring"]["file"])
    check("graphs" in rg, "the ring reader knows graph blobs")
    eq([k["op"] for k in rg["graphs"][0]["calls"]], GRAPH_OPS, "the ring's graph")
    a = subprocess.run([path_of("TRANALYZE"), "--json", c.traces], capture_output=True, text=True, timeout=300)
    sys.stdout.write(a.stdout[-3000:] + a.stderr[-2000:])
    out = json.loads(a.stdout)
    eq([f["kind"] for f in out["findings"]], [], "findings of a clean job")
    eq(a.returncode, 0, "tranalyze exit status")


SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim_graph.c")


def line_of(text):
    """'FUNCTION (shim_graph.c:LINE)' of the one source line holding text, as tranalyze names it"""
    with open(SOURCE) as f:
        lines = f.read().splitlines()
    hits = [i + 1 for i, ln in enumerate(lines) if text in ln]
    eq(len(hits), 1, "lines of shim_graph.c holding %r" % text)
    func = None
    for ln in lines[:hits[0]][::-1]:
        if ln and not ln[0].isspace() and "(" in ln and not ln.startswith(("#", "/", " ", "}")):
            func = ln.split("(")[0].split()[-1].lstrip("*")
            break
    return "%s (shim_graph.c:%d)" % (func, hits[0])


CAPTURE = "CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));"
LAUNCH_ENTRY = "if (i <= 10) EXPECT(((fn_cuGraphLaunch)fn)"
LAUNCH_RT = "else CUDACHECK(cudaGraphLaunch(e, s));"
AR_SUM = "NCCLCHECK(ncclAllReduce(b->sendA"


def hung_job(c, mode, replays=42):
    """The job until every rank finished its loop (the GPU work queued),
    then stopped as a launcher's timeout does; tranalyze --json's answer."""
    cmd, p = popen_job(c, 4, [path_of("SHIM_GRAPH"), mode, str(replays)])
    try:
        wait_markers(c, ["ready.%d" % r for r in range(4)])
        time.sleep(1.0)            # the hung replay is pending on the GPU for a while
    finally:
        end_job(c, cmd, p)
    a = subprocess.run([path_of("TRANALYZE"), "--json", c.traces], capture_output=True, text=True, timeout=300)
    t = subprocess.run([path_of("TRANALYZE"), c.traces], capture_output=True, text=True, timeout=300)
    sys.stdout.write(t.stdout[:4000] + a.stderr[-2000:])
    eq(a.returncode, 1, "tranalyze exit status (findings)")
    return json.loads(a.stdout), t.stdout


def check_replayed(call, what, graph, replay, site, launch):
    eq((call["graph"]["name"], call["replay"], call["site"], call["capture_site"], call["launch_site"]),
       (graph, replay, line_of(site), line_of(CAPTURE), line_of(launch)), what)


def case_fewer(c):
    """Rank 3 replays the graph 41 times, the others 42: the missing call
    is the 42nd replay's first AllReduce (world #83), which ranks 0-2 wait
    in on the GPU; the finding counts every rank's launches."""
    out, text = hung_job(c, "fewer")
    f = out["findings"][0]
    eq((f["kind"], f["ranks"], f["others"], f["seq"]), ("missing", [3], [0, 1, 2], 83), "the root cause")
    world = by_rank(load_traces(c.traces))[0]["comms"][0]["id"]
    eq(int(f["comm"], 16), int(world, 16), "its communicator")   # tranalyze pads ids to 16 digits
    o = f["others_call"]
    eq((o["op"], o["count"], o["seq"]), ("AllReduce", 1024, 83), "the call ranks 0-2 wait in")
    check_replayed(o, "the waited-for call", "G1", 42, AR_SUM, LAUNCH_RT)
    gl = f["graph_launches"]
    eq((gl["graph"], gl["replay"], gl["capture_site"], gl["launches"]),
       ("G1", 42, line_of(CAPTURE), [{"ranks": [3], "count": 41}, {"ranks": [0, 1, 2], "count": 42}]),
       "launch counts")
    eq([m["state"] for m in f["stuck_at"]["members"]], ["blocked_inside"] * 3 + ["never_issued"], "members")
    want = "rank 3 launched graph G1 (captured at %s) 41 times, ranks 0-2 42 times" % line_of(CAPTURE)
    check(want in text, "the text says %r" % want)


def case_other(c):
    """Rank 1 captured AllGather where the others captured their second
    AllReduce: a divergence at world #2, in replay 1, naming both graphs."""
    out, _ = hung_job(c, "other")
    f = out["findings"][0]
    eq((f["kind"], f["subkind"], f["ranks"], f["others"], f["seq"]), ("divergence", "different_call", [1],
       [0, 2, 3], 2), "the root cause")
    eq((f["call"]["op"], f["others_call"]["op"]), ("AllGather", "AllReduce"), "the two calls")
    check_replayed(f["call"], "rank 1's call", "G2", 1, "if (gather) NCCLCHECK(ncclAllGather", LAUNCH_ENTRY)
    check_replayed(f["others_call"], "the others' call", "G1", 1, "else NCCLCHECK(ncclAllReduce(b->sendB",
                   LAUNCH_ENTRY)
    check(f["call"]["graph"]["id"] != f["others_call"]["graph"]["id"], "two graphs, two ids")


def case_interleave(c):
    """Rank 2 issues the eager AllReduce before its 5th replay, the others
    after it: a divergence at world #9 between rank 2's eager call and the
    others' replay 5."""
    out, _ = hung_job(c, "interleave")
    f = out["findings"][0]
    eq((f["kind"], f["subkind"], f["ranks"], f["others"], f["seq"]), ("divergence", "different_call", [2],
       [0, 1, 3], 9), "the root cause")
    call = f["call"]
    eq((call["op"], call["count"], call["site"], call.get("graph"), call.get("replay")),
       ("AllReduce", 8, line_of("NCCLCHECK(ncclAllReduce(b->eager"), None, None), "rank 2's eager call")
    check_replayed(f["others_call"], "the others' call", "G1", 5, AR_SUM, LAUNCH_ENTRY)


CASES = {"clean": case_clean, "fewer": case_fewer, "other": case_other, "interleave": case_interleave}


def main():
    return run_case(CASES, Case, sys.argv, "test_graphs.py", kept="traces")


if __name__ == "__main__":
    sys.exit(main())
