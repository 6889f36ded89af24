#!/usr/bin/env python3
"""tranalyze's pictures (issue 15, item 5): --timeline FILE (Chrome/Perfetto
trace-event JSON) and --html FILE (one self-contained page), on synthetic
traces of tests/analyzer/gen_traces.py; each case checks exact outcomes.

    check_visual.py TRANALYZE GEN_TRACES WORKDIR CASE

Every case also checks that the option changes nothing on standard output
and the exit status (byte-identical to a run without it).

CASE:
  timeline_divergence  extra_collective (rank 0's extra AllReduce #4 at
                log_metrics): the trace-event rules (valid JSON; every event
                has name, ph, pid, tid and ts numbers; X events a dur >= 0;
                flows one s and one f per id with the same cat and name, each
                inside a host-call slice of its rank; process_name "rank N
                (host, pid P)" and process_sort_index N for every rank); one X
                per call of every trace, at exactly the trace's enter time on
                one axis (realtime + (enter_ns - monotonic_ns), less the
                document's time base) and with its seq, comm, count, dtype,
                redop and call site; the ROOT CAUSE instant on rank 0 alone,
                at its AllReduce #4's time; "stuck here" at #4 on ranks 0-3;
                one flow per seq #1-#5 of the communicator across the ranks
                that issued it (#6: rank 0 alone, none)
  timeline_hang  blocked_vs_never (completion tracked: rank 2 never issues
                AllReduce #7): the ROOT CAUSE on rank 2 at its last call (#6);
                "stuck here" at #7 on ranks 0, 1, 3 and not on rank 2; a GPU
                track ("GPU" thread) with one X per call from its return to
                done_ns, and #7 "(pending)" up to the trace's write
  timeline_overlap  blocked_vs_never with rank 0's GPU work outlasting the
                next call's enqueue and its call #3 returning after #4 entered
                (as from another thread): slices of one thread never overlap
                in part (#4's slice cut to #3's return; each GPU slice from
                when its stream was free, its enqueue time in args)
  timeline_clean  clean (8 ranks, 7 communicators, groups, send/recv): no
                ROOT CAUSE or stuck instant, no GPU track (not tracked), every
                call an X event, one flow per (communicator, seq) of its
                collectives (each has at most 16)
  timeline_clocks  straggler_two_hosts (node1's CLOCK_MONOTONIC 3 h ahead of
                node0's, its wall clock 250 ms ahead): every call on the job's
                one clock exactly (--json's clocks: node1 placed by the init,
                its monotonic offset exact), node1's calls at their true times,
                not 250 ms to the right
  timeline_bench  96 ranks (gen_traces.py bench, 40 records): the flows of
                each communicator are exactly its last 16 collectives and
                those within 4 of the root cause's seq (#20 on ranks 88-95's
                communicator) and of each stuck point (#10 on the data-parallel
                ones); ROOT CAUSE on rank 95 only
  html_divergence  extra_collective, the page rendered by chromium
                (--dump-dom, --screenshot): the root cause box names rank 0 and
                "divergence / extra_call"; the full report is exactly the text
                output; the timeline has one row per rank 0-3, rank 0's
                AllReduce #4 highlighted as the root cause's call (log_metrics
                in its title), ranks 1-3 stuck at #4; 4 memory bars of 64 MiB;
                the screenshot a 1400x2000 PNG showing the highlight's red and
                the stuck orange; no network reference (no http://, https://,
                // in src or href) and no script
                Each call's label (operation and number) placed exactly by the
                page's rule: inside its box when it fits, else beside it when the
                room to the next box takes it, else "#N" the same way, else none;
                no label over another or over another call: here every call
                labelled ("AllReduce #1" ... beside the boxes, rank 0's "#6" at
                the window's end); the memory chart 4 rows of 24 px tall, each
                bar's ranks, exact width and value ("64.0 MiB")
  html_clean    clean: "No problem found", no highlighted call, 8 rows, 8 bars,
                the labels by the rule (calls 32 px apart: "#14" beside most)
  html_bench    96 ranks: 32 rows (the culprit 95, the others of its
                communicator 88-94 and a sample), "64 more ranks not shown",
                64 bars covering ranks 0-95 in order, rank 95's AllReduce #19
                highlighted and labelled in full, the labels by the rule; the
                memory chart 64 rows of 14 px tall, exact bars and values
  html_hostile  host names holding markup (<script>, an <img src=http://...>,
                quotes and ampersands): escaped in the page (no script or img
                element, the text shown as is) and in the trace events
                (process_name holds it verbatim)
  unwritable    --timeline and --html into a folder that does not exist: status
                2, both named on stderr, standard output unchanged
  file_modes    --html and --timeline files (and with --anonymize): mode 0600
                under umask 022, as the traces; a link planted at the name
                replaced and its target untouched, an existing file replaced,
                no temporary file left

Chromium (Debian's `chromium`, installed by tests/run) must be there: a
missing one fails the html cases, it does not skip them.
"""
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from checks import Failure, check, eq, run_case  # noqa: E402
sys.path.insert(0, HERE)
from html_dom import WIN_H, WIN_W, browser, no_network, parse, png_pixels  # noqa: E402

MIB64 = 64 << 20
FLOW_LAST, FLOW_AROUND = 16, 4      # analyzer/report/out_timeline.c
ROWS, BARS = 32, 64                 # analyzer/report/out_html.c


class Case:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="check-visual-")

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---------------------------------------------------------------- helpers
def gen(c, gen_traces, scenario, *extra):
    out = os.path.join(c.tmp, scenario)
    subprocess.run([sys.executable, gen_traces, scenario, out] + list(extra), check=True, stdout=subprocess.DEVNULL)
    exp = os.path.join(out, "expected.json")
    if os.path.exists(exp):
        os.remove(exp)
    return out


def gen_bench(c, gen_traces, ranks, records):
    out = os.path.join(c.tmp, "bench%d" % ranks)
    # (version 1: the checks here read and edit the calls as JSON arrays)
    subprocess.run([sys.executable, gen_traces, "bench", out, "--ranks", str(ranks), "--records", str(records),
                    "--format", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def run(tranalyze, args):
    p = subprocess.run([tranalyze] + args, capture_output=True, timeout=120)
    check(p.returncode in (0, 1, 2), "tranalyze %s: status %d (a signal?)\n%s" %
          (" ".join(args), p.returncode, p.stderr.decode(errors="replace")[-3000:]))
    check(b"AddressSanitizer" not in p.stderr and b"runtime error" not in p.stderr,
          "tranalyze %s: sanitizer report\n%s" % (" ".join(args), p.stderr.decode(errors="replace")[-3000:]))
    return p


def with_option(c, tranalyze, traces, opt, want_rc):
    """tranalyze OPT FILE TRACES: FILE, after checking that the option left
    standard output and the status as they are without it"""
    plain = run(tranalyze, [traces])
    path = os.path.join(c.tmp, "out" + (".json" if opt == "--timeline" else ".html"))
    p = run(tranalyze, [opt, path, traces])
    eq(p.returncode, want_rc, "status of tranalyze %s" % opt)
    eq(plain.returncode, want_rc, "status of tranalyze without %s" % opt)
    check(p.stdout == plain.stdout, "tranalyze %s changed standard output:\n--- with\n%s\n--- without\n%s" %
          (opt, p.stdout.decode(errors="replace")[:3000], plain.stdout.decode(errors="replace")[:3000]))
    check(os.path.isfile(path), "tranalyze %s wrote no %s" % (opt, path))
    return path, plain.stdout.decode()


def traces_of(folder):
    """{rank: trace object} of the JSON traces in folder"""
    out = {}
    for f in glob.glob(os.path.join(folder, "trshim.*.json")):
        with open(f) as fh:
            d = json.load(fh)
        out[d["rank"]] = d
    return out


def calls_of(tr):
    """the trace's calls as dicts (call_fields)"""
    return [dict(zip(tr["call_fields"], c)) for c in tr["calls"]]


def wall_ns(tr, ns):
    """tranalyze's one axis: the trace's monotonic ns on the wall clock by its own realtime sample"""
    return ns + (round(tr["clock"]["realtime"] * 1e9) - tr["clock"]["monotonic_ns"])


def us_to_ns(ts):
    return round(ts * 1000)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---------------------------------------------------------------- trace events
def load_events(path):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise Failure("--timeline %s is not JSON (UTF-8): %s" % (path, e))
    return doc


def validate(doc, ranks, hosts):
    """the rules of the trace-event JSON Object Format that the viewers need;
    ranks: the ranks expected, hosts: {rank: (host, pid)}"""
    check(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), "no traceEvents array")
    eq(doc.get("displayTimeUnit"), "ms", "displayTimeUnit")
    check(isinstance(doc.get("otherData"), dict) and isinstance(doc["otherData"].get("time_base_unix_ns"), int),
          "otherData.time_base_unix_ns")
    ev = doc["traceEvents"]
    for i, e in enumerate(ev):
        check(isinstance(e, dict), "event %d is not an object" % i)
        for k in ("name", "ph"):
            check(isinstance(e.get(k), str) and e[k], "event %d: no %s: %r" % (i, k, e))
        for k in ("pid", "tid", "ts"):
            check(is_num(e.get(k)), "event %d: %s is not a number: %r" % (i, k, e))
        check(e["ph"] in ("X", "M", "i", "s", "t", "f"), "event %d: phase %r" % (i, e["ph"]))
        if e["ph"] == "X":
            check(is_num(e.get("dur")) and e["dur"] >= 0, "event %d: X without a dur >= 0: %r" % (i, e))
        if e["ph"] == "i":
            check(e.get("s") in ("t", "p", "g"), "event %d: instant without a scope: %r" % (i, e))
        if e["ph"] == "M":
            check(isinstance(e.get("args"), dict), "event %d: metadata without args" % i)
    # metadata: every rank a process named and sorted
    names = {e["pid"]: e["args"].get("name") for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    eq(sorted(names), sorted(ranks), "ranks with a process_name")
    for r in ranks:
        eq(names[r], "rank %d (%s, pid %d)" % (r, hosts[r][0], hosts[r][1]), "process_name of rank %d" % r)
    sort = {e["pid"]: e["args"].get("sort_index") for e in ev if e["ph"] == "M" and e["name"] == "process_sort_index"}
    eq(sort, {r: r for r in ranks}, "process_sort_index")
    tnames = {(e["pid"], e["tid"]): e["args"].get("name") for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    for r in ranks:
        eq(tnames.get((r, 1)), "host calls", "thread_name of rank %d's tid 1" % r)
    # the slices of one thread nest: none overlaps another in part
    slices = {}
    for e in ev:
        if e["ph"] == "X":
            slices.setdefault((e["pid"], e["tid"]), []).append((us_to_ns(e["ts"]), us_to_ns(e["ts"]) + us_to_ns(e["dur"])))
    for key, sl in slices.items():
        open_ = []
        for a, b in sorted(sl, key=lambda x: (x[0], -x[1])):
            while open_ and open_[-1] <= a:
                open_.pop()
            check(not open_ or b <= open_[-1], "rank %d thread %d: a slice [%d, %d] overlaps one open until %d in part" %
                  (key[0], key[1], a, b, open_[-1] if open_ else 0))
            open_.append(b)
    # flows: one s and one f per id, the same cat and name, in time order, each inside a host slice
    flows = {}
    for e in ev:
        if e["ph"] in "stf":
            check(is_num(e.get("id")), "flow event without a numeric id: %r" % e)
            flows.setdefault(e["id"], []).append(e)
    for fid, es in flows.items():
        phs = [e["ph"] for e in es]
        eq((phs.count("s"), phs.count("f")), (1, 1), "flow %s: s and f events" % fid)
        eq(phs[0] + phs[-1], "sf", "flow %s: begins with s and ends with f" % fid)
        eq(len({(e.get("cat"), e["name"]) for e in es}), 1, "flow %s: distinct cat/name" % fid)
        check(es[0].get("cat"), "flow %s: no cat" % fid)
        eq(es[-1].get("bp"), "e", "flow %s: the f event's binding point" % fid)
        ts = [e["ts"] for e in es]
        eq(ts, sorted(ts), "flow %s: time order" % fid)
        for e in es:
            t = us_to_ns(e["ts"])
            check(any(a <= t <= b for a, b in slices.get((e["pid"], e["tid"]), [])),
                  "flow %s: its %s event on rank %s at %s is in no slice of that track" % (fid, e["ph"], e["pid"], e["ts"]))
    return ev, flows


def host_calls(ev, pid):
    return [e for e in ev if e["ph"] == "X" and e["pid"] == pid and e["tid"] == 1 and not e["name"].startswith("CommInit")]


def instants(ev, prefix):
    return [e for e in ev if e["ph"] == "i" and e["name"].startswith(prefix)]


def check_calls_exact(ev, trs, base, at=None):
    """one X per call of every trace, at its exact enter time, with its arguments; at(rank, ns): the
    time on the one axis (default: the trace's own wall clock, wall_ns)"""
    at = at or (lambda r, ns: wall_ns(trs[r], ns))
    comm_ids = {r: [c["id"] for c in tr["comms"]] for r, tr in trs.items()}
    for r, tr in trs.items():
        got = sorted(((us_to_ns(e["ts"]), e["name"], e["args"]["seq"]) for e in host_calls(ev, r)))
        want = sorted(((at(r, c["enter_ns"]) - base, c["op"], c["seq"]) for c in calls_of(tr)))
        eq(got, want, "rank %d: host-call events (ts ns, op, seq)" % r)
        byts = {us_to_ns(e["ts"]): e for e in host_calls(ev, r)}
        for c in calls_of(tr):
            e = byts[at(r, c["enter_ns"]) - base]
            a = e["args"]
            if c["exit_ns"] is not None:
                eq(us_to_ns(e["dur"]), c["exit_ns"] - c["enter_ns"], "rank %d %s #%d: dur" % (r, c["op"], c["seq"]))
            if c["op"] in ("GroupStart", "GroupEnd"):
                continue
            eq(a.get("comm"), comm_ids[r][c["comm"]], "rank %d %s #%d: comm" % (r, c["op"], c["seq"]))
            eq((a.get("count"), a.get("dtype"), a.get("redop")), (c["count"], c["dtype"], c["redop"]),
               "rank %d %s #%d: count, dtype, redop" % (r, c["op"], c["seq"]))
            if c["op"] in ("Send", "Recv"):
                eq(a.get("peer"), c["peer"], "rank %d %s #%d: peer" % (r, c["op"], c["seq"]))
            if c["root"] is not None:
                eq(a.get("root"), c["root"], "rank %d %s #%d: root" % (r, c["op"], c["seq"]))
            sym = tr["stacks"][c["stack"]]["frames"][0]["symbol"]
            check(a.get("site", "").startswith(sym + " "), "rank %d %s #%d: site %r, expected %s (...)" %
                  (r, c["op"], c["seq"], a.get("site"), sym))


def flow_seqs(ev, flows):
    """{comm: {seq: ranks linked}} from the flows' s events and their members"""
    out = {}
    for fid, es in flows.items():
        a = es[0].get("args") or {}
        check("comm" in a and "seq" in a, "flow %s: its s event names no comm and seq: %r" % (fid, es[0]))
        eq(a.get("ranks"), len(es), "flow %s: ranks" % fid)
        check(es[0]["name"].endswith("#%d" % a["seq"]), "flow %s: name %r for seq %d" % (fid, es[0]["name"], a["seq"]))
        check(a["seq"] not in out.get(a["comm"], {}), "two flows for %s #%d" % (a["comm"], a["seq"]))
        out.setdefault(a["comm"], {})[a["seq"]] = sorted(e["pid"] for e in es)
    return out


def coll_members(trs):
    """{comm id: {seq: ranks that issued that collective}}"""
    coll = {"AllReduce", "Broadcast", "Bcast", "Reduce", "AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter"}
    out = {}
    for r, tr in trs.items():
        for c in calls_of(tr):
            if c["op"] in coll and c["seq"] > 0:
                out.setdefault(tr["comms"][c["comm"]]["id"], {}).setdefault(c["seq"], []).append(r)
    return {k: {s: sorted(v) for s, v in d.items()} for k, d in out.items()}


def hosts_of(trs):
    return {r: (tr["host"], tr["pid"]) for r, tr in trs.items()}


# ---------------------------------------------------------------- timeline cases
def case_timeline_divergence(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "extra_collective")
    trs = traces_of(traces)
    path, _ = with_option(c, tranalyze, traces, "--timeline", 1)
    doc = load_events(path)
    ev, flows = validate(doc, [0, 1, 2, 3], hosts_of(trs))
    base = doc["otherData"]["time_base_unix_ns"]
    check_calls_exact(ev, trs, base)
    eq(doc["otherData"]["calls_omitted"], 0, "calls omitted")
    roots = instants(ev, "ROOT CAUSE")
    eq([(e["pid"], e["name"]) for e in roots], [(0, "ROOT CAUSE: divergence / extra_call")], "root cause instants")
    c4 = [x for x in calls_of(trs[0]) if x["seq"] == 4][0]
    eq(us_to_ns(roots[0]["ts"]), wall_ns(trs[0], c4["enter_ns"]) - base, "the root cause's time (rank 0's #4)")
    x4 = [e for e in host_calls(ev, 0) if e["args"]["seq"] == 4]
    eq(len(x4), 1, "rank 0's X events of #4")
    eq(roots[0]["ts"], x4[0]["ts"], "the root cause instant at rank 0's AllReduce #4 event")
    check(x4[0]["args"]["site"].startswith("log_metrics "), "rank 0's #4 site: %r" % x4[0]["args"]["site"])
    eq(roots[0]["args"].get("site"), x4[0]["args"]["site"], "the root cause's site")
    stuck = sorted((e["pid"], e["name"].split(" #")[1].split(" ")[0]) for e in instants(ev, "stuck here: "))
    eq(stuck, [(0, "4"), (1, "4"), (2, "4"), (3, "4")], "stuck here (rank, seq)")
    comm = trs[0]["comms"][0]["id"]
    eq(flow_seqs(ev, flows), {comm: {s: [0, 1, 2, 3] for s in range(1, 6)}}, "flows (comm, seq, ranks)")
    check(not [e for e in ev if e["tid"] == 2], "GPU events in a trace without completion data")


def case_timeline_hang(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "blocked_vs_never")
    trs = traces_of(traces)
    path, _ = with_option(c, tranalyze, traces, "--timeline", 1)
    doc = load_events(path)
    ev, flows = validate(doc, [0, 1, 2, 3], hosts_of(trs))
    base = doc["otherData"]["time_base_unix_ns"]
    check_calls_exact(ev, trs, base)
    roots = instants(ev, "ROOT CAUSE")
    eq([(e["pid"], e["name"]) for e in roots], [(2, "ROOT CAUSE: missing")], "root cause instants")
    last = calls_of(trs[2])[-1]
    eq(last["seq"], 6, "rank 2's last seq")
    eq(us_to_ns(roots[0]["ts"]), wall_ns(trs[2], last["enter_ns"]) - base, "the root cause at rank 2's last call")
    stuck = sorted((e["pid"], e["name"]) for e in instants(ev, "stuck here: "))
    comm = trs[0]["comms"][0]["id"]
    eq(stuck, [(r, "stuck here: AllReduce(1048576 x float32, sum) #7 on comm %s" % comm) for r in (0, 1, 3)],
       "stuck here")
    for r, tr in trs.items():
        tn = [e for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == r and e["tid"] == 2]
        eq([e["args"]["name"] for e in tn], ["GPU"], "rank %d's GPU thread" % r)
        got = sorted((us_to_ns(e["ts"]), us_to_ns(e["dur"]), e["name"]) for e in ev
                     if e["ph"] == "X" and e["pid"] == r and e["tid"] == 2)
        want = []
        write = round(tr["write_time"] * 1e9)
        for x in calls_of(tr):
            if x["gpu"] == "done":
                want.append((wall_ns(tr, x["exit_ns"]) - base, x["done_ns"] - x["exit_ns"], x["op"]))
            elif x["gpu"] == "pending":
                want.append((wall_ns(tr, x["exit_ns"]) - base, write - wall_ns(tr, x["exit_ns"]), x["op"] + " (pending)"))
        eq(got, sorted(want), "rank %d's GPU events (ts, dur, name)" % r)
    eq(len([e for e in ev if e["ph"] == "X" and e["tid"] == 2 and e["name"].endswith("(pending)")]), 3,
       "pending GPU events (ranks 0, 1, 3)")
    eq(flow_seqs(ev, flows)[comm][7], [0, 1, 3], "the flow of #7")


def case_timeline_overlap(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "blocked_vs_never")
    f0 = glob.glob(os.path.join(traces, "trshim.*.r0.*.json"))[0]
    with open(f0) as fh:
        d = json.load(fh)
    cf = d["call_fields"]
    ix = {k: cf.index(k) for k in ("enter_ns", "exit_ns", "done_ns", "gpu")}
    calls = d["calls"]
    # rank 0's GPU work outlasts the next call's enqueue (the stream busy), and its call #3 returns
    # after #4 entered (as from another thread)
    for i in range(len(calls) - 2):
        calls[i][ix["done_ns"]] = calls[i + 1][ix["exit_ns"]] + 1000
    calls[2][ix["exit_ns"]] = calls[3][ix["enter_ns"]] + 2000
    calls[2][ix["done_ns"]] = calls[3][ix["exit_ns"]] + 1000
    with open(f0, "w") as fh:
        json.dump(d, fh)
    trs = traces_of(traces)
    path, _ = with_option(c, tranalyze, traces, "--timeline", 1)
    doc = load_events(path)
    ev, flows = validate(doc, [0, 1, 2, 3], hosts_of(trs))
    base = doc["otherData"]["time_base_unix_ns"]
    tr = trs[0]
    cs = calls_of(tr)
    host = sorted((us_to_ns(e["ts"]), us_to_ns(e["dur"]), e["args"]["seq"]) for e in host_calls(ev, 0))
    want = []
    for i, x in enumerate(cs):
        dur = x["exit_ns"] - x["enter_ns"]
        if i == 3:                            # cut to end with #3, which it entered inside of
            dur = cs[2]["exit_ns"] - x["enter_ns"]
        want.append((wall_ns(tr, x["enter_ns"]) - base, dur, x["seq"]))
    eq(host, sorted(want), "rank 0's host slices (ts, dur, seq)")
    eq(host[3][1], 2000, "#4's slice, cut to #3's return")
    gpu = sorted((us_to_ns(e["ts"]), us_to_ns(e["dur"]), us_to_ns(e["args"]["enqueued"]), e["args"]["seq"]) for e in ev
                 if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == 2)
    want, busy = [], None
    write = round(tr["write_time"] * 1e9)
    for x in cs:
        enq = wall_ns(tr, x["exit_ns"])
        start = enq if busy is None or enq > busy else busy
        end = wall_ns(tr, x["done_ns"]) if x["gpu"] == "done" else write
        busy = end
        want.append((start - base, end - start, enq - base, x["seq"]))
    eq(gpu, sorted(want), "rank 0's GPU slices (ts, dur, enqueued, seq): each from when the stream was free")
    eq([g[3] for g in gpu if g[0] > g[2]], [2, 4, 5, 6], "the seqs whose GPU slice waited for the stream")


def case_timeline_clean(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "clean")
    trs = traces_of(traces)
    path, _ = with_option(c, tranalyze, traces, "--timeline", 0)
    doc = load_events(path)
    ev, flows = validate(doc, list(range(8)), hosts_of(trs))
    check_calls_exact(ev, trs, doc["otherData"]["time_base_unix_ns"])
    eq(instants(ev, "ROOT CAUSE") + instants(ev, "stuck here"), [], "root cause or stuck instants in a clean job")
    check(not [e for e in ev if e["tid"] == 2], "GPU events in a job without completion data")
    want = {k: {s: r for s, r in d.items() if len(r) > 1} for k, d in coll_members(trs).items()}
    eq(len(want), 7, "communicators with collectives")
    check(all(len(d) <= FLOW_LAST for d in want.values()), "a communicator with more than %d collectives" % FLOW_LAST)
    eq(flow_seqs(ev, flows), want, "flows (comm, seq, ranks)")
    eq(len(flows), 55, "flows")
    inits = [e for e in ev if e["ph"] == "X" and e["name"].startswith("CommInit")]
    eq(len(inits), sum(len(tr["comms"]) for tr in trs.values()), "communicator init events")


def case_timeline_clocks(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "straggler_two_hosts")
    trs = traces_of(traces)
    eq(sorted({(tr["host"], tr["clock"]["monotonic_ns"] - trs[0]["clock"]["monotonic_ns"],
                tr["clock"]["realtime"] - trs[0]["clock"]["realtime"]) for tr in trs.values()}),
       [("node0", 0, 0.0), ("node1", 3 * 3600 * 10**9 + 123456789, 0.25)], "the scenario's clocks")
    # the one axis: the job's one clock (--json's clocks): node1 placed by the world communicator's
    # init, which every rank leaves at the same true time here, not by its wall clock 250 ms ahead
    p = subprocess.run([tranalyze, "--json", traces], capture_output=True, text=True)
    clocks = json.loads(p.stdout)["clocks"]
    ref = clocks["reference_rank"]
    moff = {r: d["monotonic_offset_ns"] for d in clocks["domains"] for r in d["ranks"]}
    eq(sorted((d["ranks"], d["method"]) for d in clocks["domains"]), [([0, 1], "reference"), ([2, 3], "init")],
       "the clock domains")
    eq(moff[2], 3 * 3600 * 10**9 + 123456789, "node1's monotonic clock against node0's, as the init shows it")
    path, _ = with_option(c, tranalyze, traces, "--timeline", 0)
    doc = load_events(path)
    ev, flows = validate(doc, [0, 1, 2, 3], hosts_of(trs))
    base = doc["otherData"]["time_base_unix_ns"]
    check_calls_exact(ev, trs, base, at=lambda r, ns: wall_ns(trs[ref], ns - moff[r]))
    first = {r: min(us_to_ns(e["ts"]) for e in host_calls(ev, r)) for r in trs}
    t0 = {r: min(x["enter_ns"] for x in calls_of(tr)) - tr["clock"]["monotonic_ns"] for r, tr in trs.items()}
    got, want = first[2] - first[0], t0[2] - t0[0]
    check(got == want, "node1's first call %d ns after node0's, expected %d (the true times: the clocks aligned at "
          "the init)" % (got, want))


def case_timeline_bench(c, tranalyze, gen_traces):
    traces = gen_bench(c, gen_traces, 96, 40)
    trs = traces_of(traces)
    path, _ = with_option(c, tranalyze, traces, "--timeline", 1)
    doc = load_events(path)
    ev, flows = validate(doc, list(range(96)), hosts_of(trs))
    check_calls_exact(ev, trs, doc["otherData"]["time_base_unix_ns"])
    roots = instants(ev, "ROOT CAUSE")
    eq([(e["pid"], e["name"]) for e in roots], [(95, "ROOT CAUSE: missing")], "root cause instants")
    members = coll_members(trs)
    tp95 = trs[95]["comms"][1]["id"]
    dps = {tr["comms"][2]["id"] for tr in trs.values()}
    want = {}
    for comm, d in members.items():
        seqs = sorted(d)
        keep = set(seqs[-FLOW_LAST:])
        if comm == tp95:                         # the root cause: #20
            keep |= {s for s in seqs if abs(s - 20) <= FLOW_AROUND}
        if comm in dps:                          # the stuck points: #10 on each data-parallel comm
            keep |= {s for s in seqs if abs(s - 10) <= FLOW_AROUND}
        want[comm] = {s: d[s] for s in sorted(keep) if len(d[s]) > 1}
    eq(flow_seqs(ev, flows), want, "flows: the last %d of each communicator and around the root cause" % FLOW_LAST)
    eq(sorted(want[tp95]), list(range(5, 21)), "the root communicator's linked seqs")
    eq(want[tp95][20], list(range(88, 95)), "the members of #20")
    eq(doc["otherData"]["flow_last_per_comm"], FLOW_LAST, "flow_last_per_comm")


# ---------------------------------------------------------------- html
def html_page(c, tranalyze, traces, want_rc):
    """tranalyze --html: the file, the stdout text, the DOM chromium rendered, the screenshot's pixels"""
    path, text = with_option(c, tranalyze, traces, "--html", want_rc)
    with open(path, "rb") as f:
        raw = f.read()
    page = raw.decode("utf-8")            # (invalid UTF-8 is an error here)
    no_network(page, "the HTML file")
    dom_text = browser(c, path, "--dump-dom")
    check("<svg" in dom_text, "chromium's DOM has no svg: %r" % dom_text[:2000])
    no_network(dom_text, "the rendered DOM")
    dom = parse(dom_text)
    check(not dom.find("script"), "the page has a script element")
    png = os.path.join(c.tmp, "shot.png")
    browser(c, path, "--screenshot=" + png)
    w, h, colours = png_pixels(png)
    eq((w, h), (WIN_W, WIN_H), "the screenshot's size")
    check(len(colours) > 10, "the screenshot has %d colours: %r" % (len(colours), list(colours)[:5]))
    return dom, text, colours


def rows_of(dom):
    svg = dom.find("svg", id="timeline-chart")
    eq(len(svg), 1, "timeline svgs")
    return svg[0].find("g", cls="row")


def bars_of(dom):
    svg = dom.find("svg", id="memory-chart")
    eq(len(svg), 1, "memory svgs")
    return svg[0].find("rect", cls="bar")


# analyzer/report/out_html.c: the timeline's window, a label's character and margin
TL_XMAX, CHAR_W, PAD = 170 + (1200 - 170 - 20), 6.4, 3.0
# ... the memory chart: a bar's row by their number, the label column, the room right of the bars
BAR_PITCH, BAR_L, BAR_R = (lambda n: 24 if n <= 8 else 18 if n <= 32 else 14), 120, 90


def label_w(text):
    return round(len(text) * CHAR_W + 2 * PAD, 6)


def expected_labels(boxes):
    """the labels of a row's boxes [(op, seq, x0, x1)] by the rule of the page: left to right, "OP #seq"
    inside the box when it fits, else beside it (right of it) when the room up to the next box takes it
    and no earlier label or box is there, else "#seq" the same way, else none: [(op, seq, text, x, beside)]"""
    out, free_x = [], 0.0
    for k, (op, seq, x0, x1) in enumerate(boxes):
        nxt = boxes[k + 1][2] if k + 1 < len(boxes) else TL_XMAX
        got = None
        for text in ("%s #%d" % (op, seq) if seq else op, "#%d" % seq if seq else None):
            if text is None or got:
                continue
            w = label_w(text)
            if x1 - x0 >= w - 1e-6 and x0 >= free_x - 1e-6:
                got = (op, seq, text, round(x0 + PAD, 1), False)
            elif x1 >= free_x - 1e-6 and x1 + w <= nxt + 1e-6:
                got = (op, seq, text, round(x1 + PAD, 1), True)
        free_x = max(free_x, x1)
        if got:
            out.append(got)
            if got[4]:
                free_x = max(free_x, got[3] - PAD + label_w(got[2]))
    return out


def check_labels(rows, what):
    """every row's labels exactly as the rule places them, never over another label or a box not its own;
    [(rank, [label texts])]"""
    got_all = []
    for r in rows:
        boxes = [(b.attrs["data-op"], int(b.attrs["data-seq"]), float(b.attrs["x"]),
                  round(float(b.attrs["x"]) + float(b.attrs["width"]), 1)) for b in r.find("rect", cls="call")]
        labels = r.find("text", cls="boxlabel")
        got = [(t.attrs["data-op"], int(t.attrs["data-seq"]), t.text(), float(t.attrs["x"]), "beside" in t.classes())
               for t in labels]
        eq(got, expected_labels(boxes), "%s: rank %s's labels" % (what, r.attrs["data-rank"]))
        spans = [(x - PAD, x - PAD + label_w(text)) for _, _, text, x, _ in got]
        for i, (a0, a1) in enumerate(spans):
            check(all(a1 <= b0 + 1e-6 or b1 <= a0 + 1e-6 for b0, b1 in spans[i + 1:]),
                  "%s: rank %s: label %r overlaps another" % (what, r.attrs["data-rank"], got[i][2]))
            own = [bx for bx in boxes if (bx[0], bx[1]) == got[i][:2]]
            check(all(a1 <= bx[2] + 1e-6 or bx[3] <= a0 + 1e-6 for bx in boxes if bx not in own),
                  "%s: rank %s: label %r over another call" % (what, r.attrs["data-rank"], got[i][2]))
        got_all.append((r.attrs["data-rank"], [g[2] for g in got]))
    return got_all


def check_memory_chart(dom, want, what):
    """the chart as tall as its bars; each bar a row: its ranks on the left, its width the peak's share of
    the highest, its value at its end. want: [(data-ranks, bytes, value text)]"""
    svg = dom.find("svg", id="memory-chart")[0]
    n, pitch = len(want), BAR_PITCH(len(want))
    eq((svg.attrs.get("height"), svg.attrs.get("viewbox")), (str(8 + n * pitch + 30), "0 0 1200 %d" % (8 + n * pitch + 30)),
       what + ": the memory chart's height (%d bars of %d px)" % (n, pitch))
    bars = svg.find("rect", cls="bar")
    top = max(b for _, b, _ in want)
    W = 1200 - BAR_L - BAR_R
    eq([(b.attrs["data-ranks"], int(b.attrs["data-bytes"]), b.attrs["x"], b.attrs["y"], b.attrs["height"],
         b.attrs["width"]) for b in bars],
       [(rk, v, str(BAR_L), str(8 + i * pitch + 2), str(pitch - 4), "%.1f" % (W * v / top))
        for i, (rk, v, _) in enumerate(want)], what + ": the bars")
    texts = [t.text() for t in svg.find("text", cls="axis")]
    names = [("ranks " if "-" in rk else "rank ") + rk for rk, _, _ in want]
    eq([t for t in texts if t.startswith("rank")], names, what + ": the bars' ranks")
    eq([t.text() for t in svg.find("text", cls="value")], [v for _, _, v in want], what + ": the bars' values")


def has_colour(colours, rgb, what, least=30):
    n = colours.get(bytes(rgb), 0)
    check(n >= least, "the screenshot shows %d pixels of %s %r" % (n, what, rgb))


RED, ORANGE = (0xd3, 0x2f, 0x2f), (0xf2, 0xa3, 0x3a)


def case_html_divergence(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "extra_collective")
    dom, text, colours = html_page(c, tranalyze, traces, 1)
    boxes = dom.find("div", cls="root-cause")
    eq(len(boxes), 1, "root cause boxes")
    eq(boxes[0].attrs.get("data-ranks"), "0", "the root cause's ranks")
    head = boxes[0].find("p", cls="head")[0].text()
    check(head.startswith("ROOT CAUSE: divergence / extra_call, rank 0, comm 0x"), "root cause heading %r" % head)
    check("rank 0 issued AllReduce(1 x float32, sum) #4" in boxes[0].text(), "root cause message %r" % boxes[0].text())
    eq(dom.find("pre", id="diagnosis-text")[0].text(), text, "the full report against the text output")
    rows = rows_of(dom)
    eq([r.attrs.get("data-rank") for r in rows], ["0", "1", "2", "3"], "timeline rows")
    eq([("culprit" in r.classes()) for r in rows], [True, False, False, False], "the culprit's row")
    rc = [(r.attrs["data-rank"], x) for r in rows for x in r.find("rect", cls="rootcall")]
    eq([(rk, x.attrs.get("data-seq"), x.attrs.get("data-op")) for rk, x in rc], [("0", "4", "AllReduce")],
       "highlighted root cause calls (rank, seq, op)")
    title = rc[0][1].child_title()
    check("AllReduce(1 x float32, sum) #4" in title and " at log_metrics " in title and "ROOT CAUSE" in title,
          "the root cause call's title %r" % title)
    st = sorted((r.attrs["data-rank"], x.attrs.get("data-seq")) for r in rows for x in r.find("rect", cls="stuck"))
    eq(st, [("0", "4"), ("1", "4"), ("2", "4"), ("3", "4")], "stuck calls (rank, seq)")
    bars = bars_of(dom)
    eq([(b.attrs.get("data-ranks"), b.attrs.get("data-bytes")) for b in bars], [(str(r), str(MIB64)) for r in range(4)],
       "memory bars")
    check_memory_chart(dom, [(str(r), MIB64, "64.0 MiB") for r in range(4)], "html_divergence")
    # every call shown has its label: "AllReduce #N" beside its box, rank 0's #6 at the window's end as "#6"
    eq(check_labels(rows, "html_divergence"),
       [("0", ["AllReduce #%d" % k for k in range(1, 6)] + ["#6"])] +
       [(str(r), ["AllReduce #%d" % k for k in range(1, 6)]) for r in (1, 2, 3)], "the labels")
    check(not dom.find(id="timeline-more"), "a 'more ranks' note for 4 ranks")
    has_colour(colours, RED, "the root cause's call (and its legend)", 300)
    has_colour(colours, ORANGE, "the stuck calls (and their legend)", 300)


def case_html_clean(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "clean")
    dom, text, colours = html_page(c, tranalyze, traces, 0)
    eq(dom.find("div", cls="root-cause"), [], "root cause boxes in a clean job")
    v = dom.find("div", cls="verdict")
    check(v and v[0].text().startswith("No problem found"), "the verdict %r" % (v and v[0].text()))
    eq(dom.find("pre", id="diagnosis-text")[0].text(), text, "the full report against the text output")
    rows = rows_of(dom)
    eq([r.attrs.get("data-rank") for r in rows], [str(r) for r in range(8)], "timeline rows")
    for cls in ("rootcall", "stuck", "otherside"):
        eq([x for r in rows for x in r.find("rect", cls=cls)], [], "%s calls in a clean job" % cls)
    check(all(r.find("rect", cls="call") for r in rows), "a row without calls")
    eq(len(bars_of(dom)), 8, "memory bars")
    labelled = check_labels(rows, "html_clean")
    check(all(t for _, t in labelled), "html_clean: a row without labels: %s" % labelled)
    eq(colours.get(bytes(RED), 0), 0, "red pixels in a clean job's page")


def case_html_bench(c, tranalyze, gen_traces):
    traces = gen_bench(c, gen_traces, 96, 40)
    dom, text, colours = html_page(c, tranalyze, traces, 1)
    boxes = dom.find("div", cls="root-cause")
    eq([b.attrs.get("data-ranks") for b in boxes], ["95"], "the root cause's ranks")
    eq(dom.find("pre", id="diagnosis-text")[0].text(), text, "the full report against the text output")
    rows = rows_of(dom)
    got = [int(r.attrs["data-rank"]) for r in rows]
    eq(len(got), ROWS, "timeline rows")
    eq(got, sorted(got), "rows in rank order")
    check(set(range(88, 96)) <= set(got), "rows %r lack the root cause's communicator 88-95" % got)
    eq([int(r.attrs["data-rank"]) for r in rows if "culprit" in r.classes()], [95], "the culprit's row")
    more = dom.find(id="timeline-more")
    check(more and more[0].text().startswith("64 more ranks not shown"), "the note of ranks not shown: %r" %
          (more and more[0].text()))
    rc = [(r.attrs["data-rank"], x.attrs.get("data-seq")) for r in rows for x in r.find("rect", cls="rootcall")]
    eq(rc, [("95", "19")], "the root cause's call (rank 95's last, #19)")
    st = sorted(int(r.attrs["data-rank"]) for r in rows for x in r.find("rect", cls="stuck"))
    eq([r for r in st if r >= 88], list(range(88, 95)), "stuck rows of the root cause's communicator")
    bars = bars_of(dom)
    eq(len(bars), BARS, "memory bars")
    spans = []
    for b in bars:
        lo, _, hi = b.attrs["data-ranks"].partition("-")
        spans.append((int(lo), int(hi or lo)))
    eq(spans[0][0], 0, "the first bar's rank")
    eq(spans[-1][1], 95, "the last bar's rank")
    check(all(spans[i + 1][0] == spans[i][1] + 1 for i in range(len(spans) - 1)), "bars not contiguous: %r" % spans)
    for (lo, hi), b in zip(spans, bars):
        eq(int(b.attrs["data-bytes"]), (2 << 30) + hi, "the bar of ranks %d-%d (their highest peak)" % (lo, hi))
    check_memory_chart(dom, [(b.attrs["data-ranks"], (2 << 30) + hi, "2.0 GiB") for (lo, hi), b in zip(spans, bars)],
                       "html_bench")
    labels = dict(check_labels(rows, "html_bench"))
    eq(labels["95"][-1], "AllReduce #19", "rank 95's root cause call labelled in full beside it")
    check(all(t for t in labels.values()), "a row without labels: %s" % labels)
    has_colour(colours, RED, "the root cause's call")


HOSTILE = "<script>alert('x')</script>\"&amp;<img src=http://evil.example/x.png>"


def case_html_hostile(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "extra_collective")
    for f in glob.glob(os.path.join(traces, "trshim.*.json")):
        with open(f) as fh:
            d = json.load(fh)
        d["host"] = HOSTILE + str(d["rank"])
        with open(f, "w") as fh:
            json.dump(d, fh)
    dom, text, colours = html_page(c, tranalyze, traces, 1)
    check(not dom.find("img") and not dom.find("script"), "markup from a host name became an element")
    pre = dom.find("pre", id="diagnosis-text")[0].text()
    eq(pre, text, "the full report against the text output")
    check((HOSTILE + "0")[:16] in pre, "the host name is not shown as text")
    titles = [r.find("text", cls="label")[0].child_title() for r in rows_of(dom)]
    check(all(HOSTILE in t for t in titles), "row titles without the host name as text: %r" % titles[:1])
    p = run(tranalyze, ["--timeline", os.path.join(c.tmp, "h.json"), traces])
    eq(p.returncode, 1, "status with --timeline")
    doc = load_events(os.path.join(c.tmp, "h.json"))
    trs = traces_of(traces)
    validate(doc, [0, 1, 2, 3], hosts_of(trs))


def case_unwritable(c, tranalyze, gen_traces):
    traces = gen(c, gen_traces, "extra_collective")
    plain = run(tranalyze, [traces])
    bad = os.path.join(c.tmp, "no-such-folder")
    p = run(tranalyze, ["--timeline", os.path.join(bad, "t.json"), "--html", os.path.join(bad, "p.html"), traces])
    eq(p.returncode, 2, "status when the files cannot be written")
    err = p.stderr.decode()
    check("--timeline %s/t.json: No such file or directory" % bad in err, "stderr: %r" % err)
    check("--html %s/p.html: No such file or directory" % bad in err, "stderr: %r" % err)
    check(p.stdout == plain.stdout, "standard output changed")


def case_file_modes(c, tranalyze, gen_traces):
    """--html and --timeline (and --anonymize's copies of them) as the traces: mode 0600 whatever the
    umask, a link planted at the name replaced (its target untouched), an existing file replaced, no
    temporary file left; the same standard output"""
    traces = gen(c, gen_traces, "extra_collective")
    plain = run(tranalyze, [traces])
    old = os.umask(0o022)
    try:
        for extra in ([], ["--anonymize"]):
            html_p, tl_p = os.path.join(c.tmp, "m.html"), os.path.join(c.tmp, "m.json")
            target = os.path.join(c.tmp, "target")
            with open(target, "w") as f:
                f.write("keep me\n")
            os.chmod(target, 0o644)
            for p in (html_p, tl_p):
                if os.path.lexists(p):
                    os.unlink(p)
            os.symlink(target, html_p)              # a link planted at the name
            with open(tl_p, "w") as f:              # an existing file, mode 0644
                f.write("old\n")
            p = run(tranalyze, extra + ["--html", html_p, "--timeline", tl_p, traces])
            what = " ".join(extra) or "plain"
            eq(p.returncode, 1, what + ": status")
            if not extra:
                check(p.stdout == plain.stdout, "standard output changed")
            for path in (html_p, tl_p):
                st = os.lstat(path)
                check(stat.S_ISREG(st.st_mode), "%s: %s is not a regular file (a link followed?)" % (what, path))
                eq(oct(st.st_mode & 0o777), oct(0o600), "%s: mode of %s" % (what, path))
            with open(target) as f:
                eq(f.read(), "keep me\n", what + ": the link's target")
            eq(oct(os.stat(target).st_mode & 0o777), oct(0o644), what + ": the link's target's mode")
            with open(html_p) as f:
                check(f.read(15) == "<!DOCTYPE html>", what + ": the page")
            load_events(tl_p)
            left = [n for n in os.listdir(c.tmp) if ".tmp" in n or ".anon-" in n]
            eq(left, [], what + ": temporary files left")
    finally:
        os.umask(old)


CASES = {"timeline_divergence": case_timeline_divergence, "timeline_hang": case_timeline_hang,
         "timeline_overlap": case_timeline_overlap, "timeline_clean": case_timeline_clean,
         "timeline_clocks": case_timeline_clocks,
         "timeline_bench": case_timeline_bench,
         "html_divergence": case_html_divergence, "html_clean": case_html_clean, "html_bench": case_html_bench,
         "html_hostile": case_html_hostile, "unwritable": case_unwritable, "file_modes": case_file_modes}


def main():
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    tranalyze, gen_traces, work, case = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    os.environ["TMPDIR"] = work
    return run_case(CASES, Case, [sys.argv[0], case, tranalyze, gen_traces], "check_visual.py TRANALYZE GEN WORKDIR")


if __name__ == "__main__":
    sys.exit(main())
