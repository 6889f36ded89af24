#!/usr/bin/env python3
"""Runs tranalyze on one synthetic scenario (tests/analyzer/gen_traces.py) and
checks its answer against the scenario's expected.json: exit status, and for
each expected finding, in order from the top, the exact kind, communicator,
sequence number and culprit ranks (and others, function, subkind, bytes when
given). Clean scenarios must produce no finding at all; damaged inputs must
be named in the input problems; text and markdown outputs must work too.
Then the same traces as version 2 (calls and checks packed, tests/common/trace.py's
pack_trace; files that are not packable version-1 traces as they are) must
give exactly the same --json, the folder's name aside.

    check_synthetic.py TRANALYZE GEN_TRACES SCENARIO WORKDIR
"""
import difflib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from trace import pack_trace  # noqa: E402  (version 2's packed rows: python/trshim/packed_rows.py)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check_nan(i, w, g):
    """the nan finding's details: inputs per rank, texts, independent points"""
    if g.get("kind") != "nan":
        return
    for key in ("cause", "reason", "op", "dtype", "limit", "unchecked_inputs", "members", "later_count", "later",
                "independent", "unchecked_before"):
        if key not in g:
            fail("finding %d (nan) has no %r" % (i, key))
    members = {m["rank"]: m for m in g["members"] if m["rank"] is not None}
    for r, want in w.get("inputs", {}).items():
        m = members.get(int(r))
        if not m or not m["input"]:
            fail("finding %d: no input check of rank %s: %s" % (i, r, json.dumps(g["members"])[:2000]))
        for k, v in want.items():
            if m["input"].get(k) != v:
                fail("finding %d: rank %s input %s is %r, expected %r" % (i, r, k, m["input"].get(k), v))
    if g["cause"] == "input":
        for r in g["ranks"]:
            m = members[r]
            if not m["source"] or m["input"]["status"] != "nonfinite":
                fail("finding %d: rank %d named as a source without a non-finite input" % (i, r))
            if "function" in w and m["function"] != w["function"]:
                fail("finding %d: rank %d's call site function %r, expected %r" % (i, r, m["function"], w["function"]))
            if "site" in w and m["site"] != w["site"]:
                fail("finding %d: rank %d's call site %r, expected %r" % (i, r, m["site"], w["site"]))
            if not m["site"]:
                fail("finding %d: rank %d's call site is missing" % (i, r))
    if g["cause"] == "unknown" and not g["reason"]:
        fail("finding %d: cause unknown without a reason" % i)
    text = (g.get("message") or "") + " " + (g.get("hint") or "")
    for sub in w.get("message_contains", []):
        if sub not in text:
            fail("finding %d: %r not in the message/hint: %s" % (i, sub, text))
    for sub in w.get("reason_contains", []):
        if sub not in (g.get("reason") or ""):
            fail("finding %d: %r not in the reason: %r" % (i, sub, g.get("reason")))
    if "lost" in w:       # members whose call lies before their ring window
        got = sorted(m["rank"] for m in g["members"] if m.get("lost"))
        if got != w["lost"]:
            fail("finding %d: members outside their ring window %r, expected %r" % (i, got, w["lost"]))
    if "independent" in w:
        got = [{k: x.get(k) for k in ("comm", "seq", "cause", "ranks")} for x in g["independent"]]
        if got != w["independent"]:
            fail("finding %d: independent points %r, expected %r" % (i, got, w["independent"]))


def check_stuck(i, w, g):
    """issue 6: the members' states at a hang's stuck collective, the window
    and groups of a divergence placed by fingerprints"""
    if "stuck" in w:
        got, want = g.get("stuck_at"), w["stuck"]
        if want is None:
            if got is not None:
                fail("finding %d: stuck_at %r, expected null" % (i, got))
        else:
            if not got or got.get("comm") != want["comm"] or got.get("seq") != want["seq"]:
                fail("finding %d: stuck_at %r, expected comm %s seq %s" % (i, got, want["comm"], want["seq"]))
            members = {m["rank"]: m for m in got["members"] if m["rank"] is not None}
            if sorted(members) != sorted(int(r) for r in want["members"]):
                fail("finding %d: stuck_at members %r, expected ranks %r" % (i, sorted(members), sorted(want["members"])))
            for r, wm in want["members"].items():
                m = members[int(r)]
                if m["state"] != wm["state"]:
                    fail("finding %d: rank %s is %r at the stuck collective, expected %r" % (i, r, m["state"], wm["state"]))
                ws, gs = wm.get("pending_s"), m.get("pending_s")
                if (ws is None) != (gs is None) or (ws is not None and abs(gs - ws) > 0.0015):
                    fail("finding %d: rank %s pending_s %r, expected %r" % (i, r, gs, ws))
    if "seq_window" in w and g.get("seq_window") != w["seq_window"]:
        fail("finding %d: seq_window %r, expected %r" % (i, g.get("seq_window"), w["seq_window"]))
    if "fingerprints" in w:
        got = [x["ranks"] for x in g.get("fingerprints") or []]
        if got != w["fingerprints"]:
            fail("finding %d: ranks by fingerprint %r, expected %r" % (i, got, w["fingerprints"]))
    if "tie" in w and g.get("tie") != w["tie"]:
        fail("finding %d: tie %r, expected %r" % (i, g.get("tie"), w["tie"]))
    if g.get("kind") != "nan":        # (nan findings: check_nan)
        for sub in w.get("message_contains", []):
            if sub not in (g.get("message") or "") + " " + (g.get("hint") or ""):
                fail("finding %d: %r not in the message/hint: %s" % (i, sub, g.get("message")))


def check_skipped(i, w, g):
    """issue 20: a skipped call's gap (the culprit's call before it) and the
    silent mis-pairing that followed (the culprit's own call at the skipped
    comm/seq and the calls before each side's, by seq)"""
    if "gap_before" in w:
        gb = g.get("gap_before") or {}
        if gb.get("seq") != w["gap_before"]["seq"] or gb.get("function") != w["gap_before"]["function"]:
            fail("finding %d: gap_before %r, expected %r" % (i, gb, w["gap_before"]))
    if "mispaired" in w:
        m, want = g.get("mispaired", "<absent>"), w["mispaired"]
        if want is None or m is None or m == "<absent>":
            if m != want:
                fail("finding %d: mispaired %r, expected %r" % (i, m, want))
            return
        got = {"seq": (m.get("call") or {}).get("seq"), "after": (m.get("after") or {}).get("seq"),
               "others_after": (m.get("others_after") or {}).get("seq")}
        if got != want:
            fail("finding %d: mispaired %r, expected %r" % (i, got, want))


def as_limit(as_mib):
    """a preexec_fn: an address-space limit of as_mib MiB (an allocation past
    it fails at once instead of swallowing the machine); None: no limit, also
    under a sanitizer (TRSHIM_SANITIZED=1: ASan reserves terabytes of shadow
    address space and cannot start under such a limit; the peak RSS is still
    measured and checked)"""
    if not as_mib or os.environ.get("TRSHIM_SANITIZED") == "1":
        return None

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (as_mib << 20, as_mib << 20))
    return limit


def run_measured(cmd, as_mib):
    """runs cmd under as_limit(as_mib): (status, stdout, stderr, peak RSS in
    MiB of that child: tranalyze's, or the forked Python's before the exec
    when larger, ~11 MiB; an upper bound)"""
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        p = subprocess.Popen(cmd, stdout=o, stderr=e, preexec_fn=as_limit(as_mib))
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        return p.returncode, o.read().decode(), e.read().decode(), ru.ru_maxrss / 1024.0


def as_packed(out, pk):
    """pk: a copy of the folder out with every trace that is a packable
    version-1 trshim trace as version 2 (same name, same times); the others
    (not JSON, not trshim traces, other versions, values that cannot be
    packed) as they are. The paths converted."""
    shutil.rmtree(pk, ignore_errors=True)
    shutil.copytree(out, pk, symlinks=True)
    converted = []
    for dirpath, _, files in os.walk(pk):
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            if not f.endswith(".json") or os.path.islink(path) or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as fh:
                    v2 = pack_trace(json.load(fh))
            except (ValueError, RecursionError):       # (not UTF-8, not JSON, not packable)
                continue
            st = os.stat(path)
            with open(path, "w") as fh:
                json.dump(v2, fh, separators=(",", ":"))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            converted.append(path)
    return converted


def packed_equivalence(tranalyze, scenario, out, args, as_mib, first):
    """the scenario's traces as version 2 give tranalyze --json's answer of
    version 1 (first: that run's (status, stdout, stderr)) exactly, the
    folder's name aside"""
    t0 = time.time()
    pk = out + ".packed"
    converted = as_packed(out, pk)
    if not converted:
        print("packed: nothing to convert (no packable version-1 trace)")
        return
    p = subprocess.run([tranalyze, "--json"] + args + [pk], capture_output=True, text=True, timeout=120,
                       preexec_fn=as_limit(as_mib))

    def norm(res, folder):
        """status, --json indented (a line per value, for the diff), stderr; the folder as <TRACES>"""
        rc, stdout, stderr = res
        try:
            stdout = json.dumps(json.loads(stdout), indent=1)
        except ValueError:
            pass
        return ["status %d" % rc] + (stdout + "\n--- stderr\n" + stderr).replace(folder, "<TRACES>").splitlines()
    want, got = norm(first, out), norm((p.returncode, p.stdout, p.stderr), pk)
    if want != got:
        diff = list(difflib.unified_diff(want, got, "version 1 (%s)" % scenario, "version 2 (%s.packed)" % scenario,
                                         n=2, lineterm=""))
        fail("packed: scenario %s: tranalyze --json on its %d trace(s) converted to version 2 differs (status "
             "first):\n%s%s" % (scenario, len(converted), "\n".join(diff[:80]),
                                 "\n... (%d more lines)" % (len(diff) - 80) if len(diff) > 80 else ""))
    print("packed: the same answer from %d trace(s) as version 2 (%.2f s)" % (len(converted), time.time() - t0))


def main():
    tranalyze, gen, scenario, work = sys.argv[1:5]
    out = os.path.join(work, scenario)
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, gen, scenario, out], check=True)
    with open(os.path.join(out, "expected.json")) as f:
        exp = json.load(f)
    os.rename(os.path.join(out, "expected.json"), os.path.join(work, scenario + ".expected.json"))
    args = exp.get("args", [])           # options for every run (e.g. --straggler-ms)
    as_mib = 4 * exp["max_rss_mib"] + 256 if "max_rss_mib" in exp else None
    if as_mib:           # memory: the peak RSS of the run, under a limit (every run)
        rc, stdout, stderr, rss = run_measured([tranalyze, "--json"] + args + [out], as_mib)
        p = subprocess.CompletedProcess([], rc, stdout, stderr)
        print("peak RSS %.1f MiB (at most %d)" % (rss, exp["max_rss_mib"]))
        if rc == exp["exit"] and rss > exp["max_rss_mib"]:
            fail("peak RSS %.1f MiB, expected at most %d MiB" % (rss, exp["max_rss_mib"]))
    else:
        p = subprocess.run([tranalyze, "--json"] + args + [out], capture_output=True, text=True, timeout=120)
    first = (p.returncode, p.stdout, p.stderr)
    if p.returncode != exp["exit"]:
        print(p.stdout[-3000:], p.stderr[-3000:])
        fail("exit status %d, expected %d" % (p.returncode, exp["exit"]))
    try:
        res = json.loads(p.stdout)
    except ValueError as e:
        print(p.stdout[-2000:])
        fail("--json output is not JSON: %s" % e)
    for k in ("ranks", "findings", "job", "inputs", "comms", "status"):
        if k not in res:
            fail("no %r in the JSON output" % k)
    got = res["findings"]
    want = exp["findings"]
    if not want and exp["exit"] != 2 and got:
        fail("a clean job gave findings: %s" % json.dumps(got, indent=1)[:3000])
    if len(got) < len(want):
        fail("%d findings, expected at least %d: %s" % (len(got), len(want), json.dumps(got, indent=1)[:3000]))
    for i, w in enumerate(want):
        g = got[i]
        for key in ("kind", "comm", "seq", "ranks", "others", "subkind", "bytes", "cause", "op", "dtype", "limit",
                    "root_cause", "later_count", "unchecked_inputs", "comm_ranks", "unchecked_before",
                    # straggler
                    "examined", "last", "lateness_median_ns", "lateness_max_ns", "jitter_ns", "threshold_ns", "interval_ns",
                    "clock"):
            if key in w and g.get(key) != w[key]:
                fail("finding %d: %s is %r, expected %r\n%s" % (i, key, g.get(key), w[key], json.dumps(g, indent=1)[:3000]))
        check_nan(i, w, g)
        check_stuck(i, w, g)
        check_skipped(i, w, g)
        if "also_comms" in w and sorted(g.get("also_comms") or []) != sorted(w["also_comms"]):
            fail("finding %d: also_comms %r, expected %r" % (i, g.get("also_comms"), w["also_comms"]))
        if "function" in w:
            fn = (g.get("call") or {}).get("function")
            if fn != w["function"]:
                fail("finding %d: call site function %r, expected %r\n%s" % (i, fn, w["function"], json.dumps(g, indent=1)[:3000]))
        # issue 13: the culprit call's entry point and config, a signal finding's numbers
        for key in ("entry_point", "config"):
            if key in w and (g.get("call") or {}).get(key, "<absent>") != w[key]:
                fail("finding %d: call %s is %r, expected %r" % (i, key, (g.get("call") or {}).get(key, "<absent>"), w[key]))
        if "signal" in w and g.get("signal") != w["signal"]:
            fail("finding %d: signal is %r, expected %r" % (i, g.get("signal"), w["signal"]))
        # issue 16: a call replayed by a CUDA graph ("graph", "replay", "capture_site", "launch_site"; dotted keys)
        for key, side in (("call_has", "call"), ("others_has", "others_call")):
            for k, v in w.get(key, {}).items():
                got_v = g.get(side) or {}
                for part in k.split("."):
                    got_v = got_v.get(part, "<absent>") if isinstance(got_v, dict) else "<absent>"
                if got_v != v:
                    fail("finding %d: %s %s is %r, expected %r\n%s" % (i, side, k, got_v, v,
                                                                    json.dumps(g.get(side), indent=1)[:3000]))
        if "others_function" in w:
            fn = (g.get("others_call") or {}).get("function")
            if fn != w["others_function"]:
                fail("finding %d: the others' call site function %r, expected %r" % (i, fn, w["others_function"]))
        # call sites (issue 7: the Python site when the call has a Python stack)
        for key, side, field in (("site", "call", "site"), ("others_site", "others_call", "site"),
                                 ("python_stack", "call", "python_stack"), ("native_site", "call", "native_site")):
            if key in w and g.get("kind") != "nan":
                v = (g.get(side) or {}).get(field, "<absent>")
                if v != w[key]:
                    fail("finding %d: %s %s is %r, expected %r" % (i, side, field, v, w[key]))
        for key in ("message", "hint"):
            if not g.get(key):
                fail("finding %d has no %s" % (i, key))
    # a job that is only slow (stragglers) has no root cause
    only_slow = bool(want) and want[0].get("root_cause") is False
    if want and not only_slow:
        if not got[0].get("root_cause"):
            fail("the first finding is not marked root_cause")
    if "count" in exp and len(got) != exp["count"]:
        fail("%d findings, expected exactly %d: %s" % (len(got), exp["count"], json.dumps(got, indent=1)[:4000]))
    if "note_contains" in exp:
        if not any(exp["note_contains"] in (n.get("problem") or "") for n in res["inputs"]):
            fail("no input note containing %r: %s" % (exp["note_contains"], json.dumps(res["inputs"])[:2000]))
    if "stopped_at" in exp:
        if got[0].get("stopped_at") != exp["stopped_at"]:
            fail("stopped_at is %r, expected %r" % (got[0].get("stopped_at"), exp["stopped_at"]))
    if "comm_spread" in exp:
        cs = exp["comm_spread"]
        c = [c for c in res["comms"] if c["id"] == cs["comm"]]
        if not c or c[0].get("entry_spread") != {k: v for k, v in cs.items() if k != "comm"}:
            fail("entry_spread of comm %s is %r, expected %r" % (cs["comm"], c and c[0].get("entry_spread"), cs))
    if "last_seq" in exp:          # issue 16: the exact seqs replayed calls took
        for r in res["ranks"]:
            want_l = exp["last_seq"].get(str(r["rank"]))
            if want_l is not None and {k: r["last_seq"].get(k) for k in want_l} != want_l:
                fail("rank %d: last_seq %r, expected %r" % (r["rank"], r["last_seq"], want_l))
    for rk, fields in exp.get("rank_fields", {}).items():     # issue 17: calls loaded / not loaded per rank
        r = [r for r in res["ranks"] if r["rank"] == int(rk)]
        got_f = {k: r[0].get(k, "<absent>") for k in fields} if r else None
        if got_f != fields:
            fail("rank %s: %r, expected %r" % (rk, got_f, fields))
    if "waiting" in exp:
        got_w = sorted(r["rank"] for r in res["ranks"] if r.get("waiting"))
        if got_w != exp["waiting"]:
            fail("ranks waiting %r, expected %r" % (got_w, exp["waiting"]))
    if "warnings" in exp:          # issue 13: one warning per NCCL library and version
        got_w = [{k: x.get(k) for k in ("kind", "version", "library", "functions", "ranks")} for x in res.get("warnings", [])]
        if got_w != exp["warnings"]:
            fail("warnings %r, expected %r" % (got_w, exp["warnings"]))
        if any(not x.get("message") for x in res["warnings"]):
            fail("a warning without a message: %r" % res["warnings"])
    elif res.get("warnings"):
        fail("unexpected warnings: %r" % res["warnings"])
    if "grown" in exp:             # a grown communicator: old and new members joined
        c = [c for c in res["comms"] if c["id"] == exp["grown"]["comm"]]
        if len(c) != 1 or c[0]["ranks"] != exp["grown"]["ranks"]:
            fail("communicator %s: %r, expected ranks %r" % (exp["grown"]["comm"], c, exp["grown"]["ranks"]))
    if "job" in exp and res["job"]["id"] != exp["job"]:
        fail("analysed job %r, expected %r" % (res["job"]["id"], exp["job"]))
    if "other_job" in exp:
        if exp["other_job"] not in res["job"]["other_jobs"]:
            fail("other job %r not reported" % exp["other_job"])
        q = subprocess.run([tranalyze, "--json", "--job", exp["other_job"], out], capture_output=True, text=True)
        if q.returncode != 0 or json.loads(q.stdout)["findings"]:
            fail("--job %s: status %d, %s" % (exp["other_job"], q.returncode, q.stdout[:2000]))
    for name, sub in exp.get("notes_contain", []):
        if not any(n.get("file") and os.path.basename(n["file"]) == name and sub in n["problem"] for n in res["inputs"]):
            fail("no note about %s containing %r: %s" % (name, sub, json.dumps(res["inputs"], indent=1)[:3000]))
    for name in exp.get("noted", []):
        if not any(n.get("file") and os.path.basename(n["file"]) == name for n in res["inputs"]):
            fail("no message about %s: %s" % (name, json.dumps(res["inputs"], indent=1)[:3000]))
        for n in res["inputs"]:
            if n.get("file") and os.path.basename(n["file"]) == name and len(n["problem"]) < 10:
                fail("the message about %s says too little: %r" % (name, n["problem"]))
    # explicit files give the same answer as the folder
    if exp["exit"] == 1:
        files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".json"))
        q = subprocess.run([tranalyze, "--json"] + args + files, capture_output=True, text=True, timeout=120,
                           preexec_fn=as_limit(as_mib))
        r2 = json.loads(q.stdout)
        if q.returncode != 1 or [(f["kind"], f["seq"], f["ranks"]) for f in r2["findings"]] != \
                [(f["kind"], f["seq"], f["ranks"]) for f in got]:
            fail("explicit files gave another answer: %s" % q.stdout[:2000])
    # ranks table
    if exp["exit"] != 2:
        for r in res["ranks"]:
            for key in ("rank", "host", "pid", "peak_bytes", "ended"):
                if key not in r:
                    fail("ranks entry without %s" % key)
    # text and markdown: same exit status, root cause on top
    for mode in ([], ["--markdown"]):
        t = subprocess.run([tranalyze] + mode + args + [out], capture_output=True, text=True, timeout=120,
                           preexec_fn=as_limit(as_mib))
        if t.returncode != exp["exit"]:
            fail("%s: exit status %d" % (mode or "text", t.returncode))
        for sub in exp.get("text_contains", []):
            # (Markdown writes a side's call and site as code: `AllReduce(...)` at `train.py:198 in f`)
            if sub not in t.stdout and not (mode and sub in t.stdout.replace("`", "")):
                fail("%s output does not say %r:\n%s" % (mode or "text", sub, t.stdout[:3000]))
        if exp["exit"] == 1 and want:
            text = t.stdout
            head = text[: text.find("RANKS") if "RANKS" in text else len(text)]
            if only_slow:
                if "ROOT CAUSE" in head or "Root cause" in head or want[0]["kind"] not in head:
                    fail("%s output of a job that is only slow:\n%s" % (mode or "text", text[:2000]))
            elif ("ROOT CAUSE" not in head and "Root cause" not in head) or want[0]["kind"] not in head:
                fail("%s output does not start with the root cause:\n%s" % (mode or "text", text[:2000]))
        if exp["exit"] == 2 and not mode and not t.stderr:
            fail("nothing usable, but no message on stderr")
    packed_equivalence(tranalyze, scenario, out, args, as_mib, first)
    print("ok: %s" % scenario)


if __name__ == "__main__":
    main()
