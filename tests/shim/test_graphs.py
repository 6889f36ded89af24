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
from test_shim import Case, by_rank, check_done, check_site, load_traces  # noqa: E402

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


CASES = {"clean": case_clean}


def main():
    return run_case(CASES, Case, sys.argv, "test_graphs.py", kept="traces")


if __name__ == "__main__":
    sys.exit(main())
