#!/usr/bin/env python3
"""Synthetic traces of jobs that replay NCCL collectives through CUDA graphs
(issue 16: captured calls are templates with seq 0, each cudaGraphLaunch is
one GraphLaunch entry per lane, "graphs" lists each graph's calls), built
with gen_traces.py's Rank model. Same command line as gen_traces.py:

    gen_graphs.py SCENARIO OUTDIR        one scenario (writes OUTDIR/expected.json too)
    gen_graphs.py --list                 the scenarios

tranalyze must diagnose replayed calls exactly as eager ones, and name
them: replay N of graph G, captured at <capture site>, launched at <launch
site>. Python call sites (graph_fewer): the capture at train.py:88 in main,
the captured all-reduces at train.py:70 in model_step and train.py:74 in
model_step, the launches at train.py:95 in main.
"""
import json
import os
import sys

import gen_traces as gt  # next to this file

TRAIN = "/job/llm/train.py"
TORCH_GRAPHS = gt.PY_TORCH + "cuda/graphs.py"
PY_CAPTURE = [(TORCH_GRAPHS, "graph.__enter__", 180), (TRAIN, "main", 88), (TRAIN, "<module>", 120)]
PY_CAPTURE_END = [(TORCH_GRAPHS, "graph.__exit__", 190), (TRAIN, "main", 88), (TRAIN, "<module>", 120)]
PY_AR1 = gt.py_all_reduce((TRAIN, "model_step", 70), (TRAIN, "main", 89), (TRAIN, "<module>", 120))
PY_AR2 = gt.py_all_reduce((TRAIN, "model_step", 74), (TRAIN, "main", 89), (TRAIN, "<module>", 120))
PY_LAUNCH = [(TORCH_GRAPHS, "CUDAGraph.replay", 88), (TRAIN, "main", 95), (TRAIN, "<module>", 120)]
CAPTURE_SITE = "train.py:88 in main"
LAUNCH_SITE = "train.py:95 in main"
GRAD = 1 << 20


def graph_job(name, n=4, python=False, track=False):
    """world_job of a shim that records graphs"""
    ranks, wid = gt.world_job(name, n)
    for r in ranks:
        r.use_graphs()
        r.track = track
        if python:
            r.enable_python()
    return ranks, wid


def replay_of(graph, replay, capture, launch, name=None):
    """what a call's "graph", "replay", "capture_site", "launch_site" must be (graph: its index on the rank)"""
    d = {"graph.index": graph, "replay": replay, "capture_site": capture, "launch_site": launch}
    if name:
        d["graph.name"] = name
    return d


EAGER = {"graph": None, "replay": None, "capture_site": None, "launch_site": None}


def fewer_job(name, python=True, pending=True):
    """4 ranks; an eager warm-up AllReduce, then a graph of two AllReduces
    captured (train.py:88) and launched (train.py:95) 42 times on ranks 0-2,
    41 times on rank 3, which then exits; the 42nd replay of ranks 0-2 is
    pending on the GPU and they are stopped by SIGTERM"""
    ranks, wid = graph_job(name, python=python, track=True)
    gi = None
    for r in ranks:
        r.coll(0, count=GRAD, site="warmup", py=gt.py_all_reduce((TRAIN, "warmup", 60), (TRAIN, "main", 85)))
        r.begin_capture(site="capture_step", py=PY_CAPTURE)
        r.coll(0, count=GRAD, site="model_step", py=PY_AR1)
        r.coll(0, count=GRAD, site="model_step2", py=PY_AR2)
        gi = r.end_capture(site="capture_step", py=PY_CAPTURE_END)
    for i in range(42):
        for r in ranks:
            if r.rank == 3 and i == 41:
                continue
            r.launch(gi, site="replay_step", py=PY_LAUNCH, gpu="pending" if i == 41 and pending else None)
    for r in ranks:
        r.finish("exit" if r.rank == 3 else "signal", None if r.rank == 3 else 15)
    return ranks, wid, gi


def pending_s(r):
    """seconds rank r's last launch had been pending on the GPU at its trace's write"""
    ex = [c for c in r.calls if c[0] == "GraphLaunch"][-1][15]
    return round(100.0 + (r.t - ex) / 1e9 + r.write_extra, 6)


def fewer_expect(ranks, wid, gi, native=False):
    cap, lau = (CAPTURE_SITE, LAUNCH_SITE) if not native else (None, None)
    members = {str(r.rank): {"state": "blocked_inside", "pending_s": pending_s(r)} for r in ranks[:3]}
    members["3"] = {"state": "never_issued"}
    f = gt.F("missing", wid, 84, [3], "model_step", others=[0, 1, 2], others_function="model_step",
             stuck={"comm": wid, "seq": 84, "members": members},
             message_contains=["rank 3 launched graph G1 (captured at %s) 41 times, ranks 0-2 42 times" %
                               (cap or "replay_step"),
                               "replay 42's AllReduce(1048576 x float32, sum) #84 on comm %s" % wid])
    if native:
        f["message_contains"] = f["message_contains"][1:]
    f["call_has"] = replay_of(gi, 41, cap, lau, "G1") if not native else {"replay": 41, "graph.name": "G1"}
    f["call_has"]["seq"] = 83
    f["others_has"] = replay_of(gi, 42, cap, lau, "G1") if not native else {"replay": 42, "graph.name": "G1"}
    f["others_has"]["seq"] = 84
    if not native:
        f["site"] = "train.py:74 in model_step"
        f["others_site"] = "train.py:70 in model_step"
    return f


def sc_graph_fewer(out):
    """(a) rank 3 replays the graph one time fewer and exits: the 42nd
    replay's first AllReduce (#84) is pending on the GPU of ranks 0-2;
    rank 3 never issued it (missing), its last call replay 41's #83"""
    ranks, wid, gi = fewer_job("grfewer")
    gt.write(ranks, out)
    gt.expect(out, 1, [fewer_expect(ranks, wid, gi)],
              text_contains=["replay 42 of graph G1, captured at %s, launched at %s" % (CAPTURE_SITE, LAUNCH_SITE),
                             "rank 3 launched graph G1 (captured at %s) 41 times, ranks 0-2 42 times" % CAPTURE_SITE])


def other_graph_job(name, odd_rank=3, odd=("AllGather", 1 << 18), launches=5):
    """every rank captures its training step at the same line (capture_step)
    and launches it `launches` times; rank odd_rank's graph holds another
    collective (AllGather where the others AllReduce, or another count)"""
    ranks, wid = graph_job(name)
    gi = None
    for r in ranks:
        r.begin_capture(site="capture_step")
        if r.rank == odd_rank:
            r.coll(0, op=odd[0], count=odd[1], site="model_step")
        else:
            r.coll(0, count=GRAD, site="model_step")
        gi = r.end_capture(site="capture_step_end")
    for i in range(launches):
        for r in ranks:
            r.launch(gi, site="replay_step")
    gt.killed(ranks)
    return ranks, wid, gi


def sc_graph_other_graph(out):
    """(b) rank 3 captured an AllGather where ranks 0-2 captured an
    AllReduce (the same capture line): two graphs, G1 (ranks 0-2) and G2
    (rank 3); their first replays differ at #1: divergence naming both"""
    ranks, wid, gi = other_graph_job("grother")
    gt.write(ranks, out)
    gt.expect(out, 1, [gt.F("divergence", wid, 1, [3], "model_step", others=[0, 1, 2], others_function="model_step",
                            call_has={"op": "AllGather", "graph.name": "G2", "replay": 1, "graph.index": gi},
                            others_has={"op": "AllReduce", "graph.name": "G1", "replay": 1},
                            message_contains=["replay 1 of graph G2", "replay 1 of graph G1"])],
              text_contains=["replay 1 of graph G2, captured at capture_step", "replay 1 of graph G1"])


def sc_graph_other_count(out):
    """(b) rank 1's graph holds the AllReduce with another count (1<<19): G2
    on rank 1, G1 on the others; divergence at #1 naming both"""
    ranks, wid, gi = other_graph_job("grcount", odd_rank=1, odd=("AllReduce", 1 << 19))
    gt.write(ranks, out)
    gt.expect(out, 1, [gt.F("divergence", wid, 1, [1], "model_step", others=[0, 2, 3],
                            call_has={"count": 1 << 19, "graph.name": "G2", "replay": 1},
                            others_has={"count": GRAD, "graph.name": "G1", "replay": 1},
                            message_contains=["replay 1 of graph G2", "replay 1 of graph G1"])])


def sc_graph_eager_order(out):
    """(c) each step launches the graph (one AllReduce, #2k+1) then issues an
    eager AllReduce of one element (log_metrics, #2k+2); in step 5 rank 2
    issues the eager one first: at #11 rank 2's eager call meets the
    others' replay 6"""
    ranks, wid = graph_job("grorder")
    gi = None
    for r in ranks:
        r.begin_capture(site="capture_step")
        r.coll(0, count=GRAD, site="model_step")
        gi = r.end_capture(site="capture_step_end")
    for step in range(8):
        for r in ranks:
            if r.rank == 2 and step == 5:
                r.coll(0, count=1, site="log_metrics")
                r.launch(gi, site="replay_step")
            else:
                r.launch(gi, site="replay_step")
                r.coll(0, count=1, site="log_metrics")
    gt.killed(ranks)
    gt.write(ranks, out)
    gt.expect(out, 1, [gt.F("divergence", wid, 11, [2], "log_metrics", others=[0, 1, 3],
                            others_function="model_step", call_has=dict(EAGER, seq=11, count=1),
                            others_has={"seq": 11, "graph.name": "G1", "replay": 6, "count": GRAD},
                            message_contains=["replay 6 of graph G1, captured at capture_step"])])


def clean_job(name, launches=1000, every=100):
    """4 ranks, two tensor-parallel halves: a graph of two tensor-parallel
    AllReduces and a ReduceScatter on the world communicator, launched
    `launches` times, an eager AllGather on the world communicator every
    `every` launches; completion tracked, every process exits"""
    ranks, wid = graph_job(name, track=True)
    halves = [[0, 1], [2, 3]]
    gi = None
    for r in ranks:
        r.tp = r.split(0, 1, r.rank // 2, halves[r.rank // 2])
        r.begin_capture(site="capture_step")
        r.coll(r.tp, count=2048, site="tp_forward")
        r.coll(r.tp, count=2048, site="tp_backward")
        r.coll(0, op="ReduceScatter", count=4096, site="grad_reduce_scatter")
        gi = r.end_capture(site="capture_step_end")
    for i in range(launches):
        for r in ranks:
            r.launch(gi, site="replay_step")
            if (i + 1) % every == 0:
                r.coll(0, op="AllGather", count=128, site="gather_stats")
    for r in ranks:
        r.finish()
    return ranks, wid


def sc_graph_clean(out):
    """(d) a clean job of 1,000 replays: no finding, and the exact last seq
    of each communicator (world: 1,000 ReduceScatters and 10 AllGathers;
    each half: 2,000 AllReduces)"""
    ranks, wid = clean_job("grclean")
    gt.write(ranks, out)
    last = {str(r.rank): {wid: 1010, r.comms[r.tp]["id"]: 2000} for r in ranks}
    gt.expect(out, 0, [], last_seq=last)


def pipeline_job(name, launches=30, short=None, eager=True):
    """4 pipeline stages in a graph: stage s receives from s - 1 and sends
    to s + 1 (a group, captured), then (eager) an AllReduce; short: (rank,
    launches) of a rank that launches fewer times, then exits"""
    ranks, wid = graph_job(name, track=True)
    gi = None
    for r in ranks:
        r.begin_capture(site="capture_pipeline")
        r.group_start(site="pipeline_step")
        if r.rank > 0:
            r.sendrecv(0, "Recv", r.rank - 1, site="recv_activations")
        if r.rank < 3:
            r.sendrecv(0, "Send", r.rank + 1, site="send_activations")
        r.group_end(site="pipeline_step")
        gi = r.end_capture(site="capture_pipeline_end")
    for i in range(launches):
        for r in ranks:
            if short and r.rank == short[0] and i >= short[1]:
                continue
            last = short and i == launches - 1
            r.launch(gi, site="replay_pipeline", gpu="pending" if last else None)
            if eager:
                r.coll(0, count=4096, site="reduce_loss")
    return ranks, wid, gi


def sc_graph_p2p_clean(out):
    """(e) replayed sends and receives (a 4-stage pipeline captured in a
    group, 30 launches) matched with their peers', an eager AllReduce after
    each: no finding"""
    ranks, wid, gi = pipeline_job("grp2p")
    for r in ranks:
        r.finish()
    gt.write(ranks, out)
    gt.expect(out, 0, [], last_seq={str(r.rank): {wid: 30} for r in ranks})


def sc_graph_p2p_fewer(out):
    """(e) rank 1 launches the pipeline graph 29 times and exits: stage 2's
    replayed receive #30 from rank 1 has no send (and stage 0's send #30 to
    rank 1 no receive): p2p naming rank 1 and the replay"""
    ranks, wid, gi = pipeline_job("grp2pfew", short=(1, 29), eager=False)
    for r in ranks:
        r.finish("exit" if r.rank == 1 else "signal", None if r.rank == 1 else 15)
    gt.write(ranks, out)
    # stage 0's graph (a send) is G1, stages 1 and 2's (a receive and a send: the same peers
    # relative to the rank) G2, stage 3's G3
    gt.expect(out, 1, [gt.F("p2p", wid, 30, [1], others=[0], subkind="send_without_recv",
                            others_has={"op": "Send", "seq": 30, "graph.name": "G1", "replay": 30},
                            call_has={"op": "Send", "seq": 29, "graph.name": "G2", "replay": 29},
                            message_contains=["replay 30 of graph G1, captured at capture_pipeline"]),
                       gt.F("p2p", wid, 30, [1], others=[2], subkind="recv_without_send",
                            others_has={"op": "Recv", "seq": 30, "graph.name": "G2", "replay": 30},
                            message_contains=["rank 1 launched graph G2 (captured at capture_pipeline",
                                              "29 times, rank 2 30 times; replay 30's Recv(4096 x float32, from 1) "
                                              "#30 on comm %s" % wid])])


def signal_job(name, launches=12, short=None):
    """4 ranks; a graph of a one-sided exchange: each rank puts into the
    next one (PutSignal, signal numbers per peer) and waits for one signal
    from the previous one; an eager Signal and WaitSignal pair first (the
    replays' numbers continue theirs); short: (rank, launches) of a rank
    that launches fewer times, then exits"""
    ranks, wid = graph_job(name, track=True)
    gi = None
    for r in ranks:
        r.signal(0, (r.rank + 1) % 4, site="signal_ready")
    for r in ranks:
        r.wait_signal(0, [((r.rank - 1) % 4, 1)], site="wait_ready")
    for r in ranks:
        r.begin_capture(site="capture_halo")
        r.put_signal(0, (r.rank + 1) % 4, count=256, site="put_halo")
        r.wait_signal(0, [((r.rank - 1) % 4, 1)], site="wait_halo")
        gi = r.end_capture(site="capture_halo_end")
    for i in range(launches):
        for r in ranks:
            if short and r.rank == short[0] and i >= short[1]:
                continue
            r.launch(gi, site="replay_halo", gpu="pending" if short and i == launches - 1 else None)
    return ranks, wid, gi


def sc_graph_signal_clean(out):
    """replayed PutSignal and WaitSignal (signal lanes, wait lanes counting
    signals) after an eager pair, 12 launches: every wait has its signal, no
    finding"""
    ranks, wid, gi = signal_job("grsig")
    for r in ranks:
        r.finish()
    gt.write(ranks, out)
    gt.expect(out, 0, [])


def sc_graph_signal_fewer(out):
    """rank 2 launches the exchange 11 times and exits: rank 3's replayed
    WaitSignal #13 (12 launches and the eager wait) waits for rank 2's
    signal #13, never sent: signal / never_sent naming rank 2 and replay 12"""
    ranks, wid, gi = signal_job("grsigfew", short=(2, 11))
    for r in ranks:
        r.finish("exit" if r.rank == 2 else "signal", None if r.rank == 2 else 15)
    gt.write(ranks, out)
    gt.expect(out, 1, [gt.F("signal", wid, 13, [2], others=[3], subkind="never_sent", others_function="wait_halo",
                            signal={"waited": 13, "sent": 12},
                            others_has={"op": "WaitSignal", "seq": 13, "graph.name": "G1", "replay": 12},
                            message_contains=["rank 2 launched graph G1 (captured at capture_halo",
                                              "11 times, ranks 0, 1, 3 12 times"])])


def sc_graph_damaged(out):
    """graph_clean's job (20 launches) with damaged graph data, one kind per
    rank: a launch naming a graph the trace does not hold (rank 0), a graph
    whose call has another lane than its op's (rank 1: its launches replay
    nothing known), a launch of an unknown lane and one whose numbers run
    past 2^31 (rank 2: skipped records), "graphs" not an array (rank 3).
    Each is named; the analysis still runs and blames the ranks whose
    collectives are unknown, never crashes"""
    ranks, wid = clean_job("grdamaged", launches=20, every=10)
    gt.write(ranks, out)

    def edit(rank, fn):
        path = os.path.join(out, ranks[rank].filename())
        with open(path) as f:
            d = json.load(f)
        fn(d)
        with open(path, "w") as f:
            json.dump(d, f, separators=(",", ":"))
    fields = gt.CALL_FIELDS + gt.COMPLETION_FIELDS + gt.NEW_FIELDS + gt.GRAPH_FIELDS
    gix, lix, cix, six = fields.index("graph"), fields.index("lane"), fields.index("count"), fields.index("seq")
    launches = lambda d: [c for c in d["calls"] if c[0] == "GraphLaunch"]

    def r0(d):
        for c in launches(d)[-2:]:      # the last launch (its 2 lanes)
            c[gix] = 99

    def r1(d):
        d["graphs"][0]["calls"][1]["lane"] = "send"

    def r2(d):
        ls = launches(d)
        ls[-1][lix] = "bogus"
        ls[-2][cix] = 1 << 40
        ls[-4][six] = 2 ** 31 - 1      # (a tensor-parallel lane: 2 numbers, the last past 2^31 - 1)

    def r3(d):
        d["graphs"] = {"not": "an array"}
    for k, fn in enumerate((r0, r1, r2, r3)):
        edit(k, fn)
    names = [r.filename() for r in ranks]
    # every rank exited and the GPU completed every call: the calls a rank has no record of were
    # issued (noted as observations trusted), no finding
    gt.expect(out, 0, [], notes_contain=[
        [names[0], "1 CUDA graph launch(es) name a graph the trace does not hold (absent or damaged; first: graph 99)"],
        [names[1], "1 damaged CUDA graph(s) in graphs ignored (first: graphs[0].calls[1] lane is not the one of its op)"],
        [names[2], "3 call record(s) skipped"],
        [names[3], "field graphs is not an array"]])


SCENARIOS = {k[3:]: v for k, v in sorted(globals().items()) if k.startswith("sc_")}


if __name__ == "__main__":
    sys.exit(gt.scenario_main(sys.argv, SCENARIOS, __doc__))
