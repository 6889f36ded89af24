#!/usr/bin/env python3
"""Runs tranalyze on one synthetic scenario (analyzer/gen_traces.py) and
checks its answer against the scenario's expected.json: exit status, and for
each expected finding, in order from the top, the exact kind, communicator,
sequence number and culprit ranks (and others, function, subkind, bytes when
given). Clean scenarios must produce no finding at all; damaged inputs must
be named in the input problems; text and markdown outputs must work too.

    check_synthetic.py TRANALYZE GEN_TRACES SCENARIO WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys


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
    if "independent" in w:
        got = [{k: x.get(k) for k in ("comm", "seq", "cause", "ranks")} for x in g["independent"]]
        if got != w["independent"]:
            fail("finding %d: independent points %r, expected %r" % (i, got, w["independent"]))


def main():
    tranalyze, gen, scenario, work = sys.argv[1:5]
    out = os.path.join(work, scenario)
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, gen, scenario, out], check=True)
    with open(os.path.join(out, "expected.json")) as f:
        exp = json.load(f)
    os.rename(os.path.join(out, "expected.json"), os.path.join(work, scenario + ".expected.json"))
    p = subprocess.run([tranalyze, "--json", out], capture_output=True, text=True, timeout=120)
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
                    "root_cause", "later_count", "unchecked_inputs", "comm_ranks", "unchecked_before"):
            if key in w and g.get(key) != w[key]:
                fail("finding %d: %s is %r, expected %r\n%s" % (i, key, g.get(key), w[key], json.dumps(g, indent=1)[:3000]))
        check_nan(i, w, g)
        if "function" in w:
            fn = (g.get("call") or {}).get("function")
            if fn != w["function"]:
                fail("finding %d: call site function %r, expected %r\n%s" % (i, fn, w["function"], json.dumps(g, indent=1)[:3000]))
        if "others_function" in w:
            fn = (g.get("others_call") or {}).get("function")
            if fn != w["others_function"]:
                fail("finding %d: the others' call site function %r, expected %r" % (i, fn, w["others_function"]))
        for key in ("message", "hint"):
            if not g.get(key):
                fail("finding %d has no %s" % (i, key))
    if want:
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
    if "job" in exp and res["job"]["id"] != exp["job"]:
        fail("analysed job %r, expected %r" % (res["job"]["id"], exp["job"]))
    if "other_job" in exp:
        if exp["other_job"] not in res["job"]["other_jobs"]:
            fail("other job %r not reported" % exp["other_job"])
        q = subprocess.run([tranalyze, "--json", "--job", exp["other_job"], out], capture_output=True, text=True)
        if q.returncode != 0 or json.loads(q.stdout)["findings"]:
            fail("--job %s: status %d, %s" % (exp["other_job"], q.returncode, q.stdout[:2000]))
    for name in exp.get("noted", []):
        if not any(n.get("file") and os.path.basename(n["file"]) == name for n in res["inputs"]):
            fail("no message about %s: %s" % (name, json.dumps(res["inputs"], indent=1)[:3000]))
        for n in res["inputs"]:
            if n.get("file") and os.path.basename(n["file"]) == name and len(n["problem"]) < 10:
                fail("the message about %s says too little: %r" % (name, n["problem"]))
    # explicit files give the same answer as the folder
    if exp["exit"] == 1:
        files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".json"))
        q = subprocess.run([tranalyze, "--json"] + files, capture_output=True, text=True, timeout=120)
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
        t = subprocess.run([tranalyze] + mode + [out], capture_output=True, text=True, timeout=120)
        if t.returncode != exp["exit"]:
            fail("%s: exit status %d" % (mode or "text", t.returncode))
        if exp["exit"] == 1 and want:
            text = t.stdout
            head = text[: text.find("RANKS") if "RANKS" in text else len(text)]
            if ("ROOT CAUSE" not in head and "Root cause" not in head) or want[0]["kind"] not in head:
                fail("%s output does not start with the root cause:\n%s" % (mode or "text", text[:2000]))
        if exp["exit"] == 2 and not mode and not t.stderr:
            fail("nothing usable, but no message on stderr")
    print("ok: %s" % scenario)


if __name__ == "__main__":
    main()
