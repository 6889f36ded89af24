#!/usr/bin/env python3
"""tranalyze never crashes on damaged input: takes the traces of five
synthetic jobs (a hang across split communicators, a pipeline, a NaN that
spreads: every kind of check record; Python stacks: python, pycodes,
pystacks, the pystack call field; CUDA graphs: graphs, GraphLaunch entries
and their graph, replay and lane fields; the NaN job again as version 2,
with its packed calls' and checks' bytes flipped and cut below the
base64), damages one
file at a time (truncation, flipped bytes, every field replaced by a value
of each wrong type, fields removed, out-of-range indices and numbers) and
runs tranalyze on the folder. Each run must end with status 0, 1 or 2 (never
a signal or a sanitizer report), within a time limit and an address-space
limit, and a damaged file that was skipped must be named in --json's
"inputs". Valid but crafted values (seqs up to 2^31-1, far apart; a
communicator listed twice) must cost nothing special: the file is used
(status 0 or 1), in the same memory limit.

    fuzz_inputs.py TRANALYZE GEN_TRACES WORKDIR [ROUNDS]
"""
import base64
import copy
import json
import os
import random
import resource
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from trace import pack_trace  # noqa: E402  (version 2's packed calls and checks)

WRONG = [None, True, "x", "0xzz", -1, 2**70, 1.5, [], {}, [[1]], {"a": None}, "", 10**9]
AS_LIMIT = 512 << 20      # bytes of address space: a table sized by a crafted number fails at once


def as_limit():
    # not under a sanitizer (TRSHIM_SANITIZED=1): ASan cannot start under an
    # address-space limit; its own checks stand in for it there
    if os.environ.get("TRSHIM_SANITIZED") != "1":
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def crafted(doc, rnd):
    """valid values that once cost memory or crashed: (what, JSON text)"""
    seq = doc["call_fields"].index("seq")
    colls = [i for i, c in enumerate(doc["calls"]) if c[seq] and c[0] not in ("Send", "Recv")]
    out = []
    for v in (2**31 - 1, 2_000_000_000, 10**7):
        for i in rnd.sample(colls, 2) + [colls[-1]]:        # one call far from the others
            m = copy.deepcopy(doc)
            m["calls"][i][seq] = v
            out.append(("calls[%d].seq = %d" % (i, v), json.dumps(m)))
        m = copy.deepcopy(doc)                               # every collective shifted up
        for i in colls:
            m["calls"][i][seq] += v - 2**20
        out.append(("every seq + %d" % (v - 2**20), json.dumps(m)))
    if doc.get("graphs"):           # CUDA graphs: a graph of 4096 calls launched 600 times (2.4 million
        fields = doc["call_fields"]  # replayed calls: past what tranalyze expands, the oldest are lost)
        rix, cix = fields.index("replay"), fields.index("count")
        launches = [c for c in doc["calls"] if c[0] == "GraphLaunch"]
        m = copy.deepcopy(doc)
        g = m["graphs"][launches[-1][fields.index("graph")]]
        g["calls"] = [dict(g["calls"][0]) for _ in range(4096)]
        for k in range(600):
            row = list(launches[-1])
            row[rix], row[cix], row[seq] = 1000 + k, 4096, 1000 + 4096 * k
            m["calls"].append(row)
        out.append(("a graph of 4096 calls launched 600 times", json.dumps(m)))
    for at in (1, len(doc["comms"])):                        # a communicator listed twice
        m = copy.deepcopy(doc)
        m["comms"].insert(at, copy.deepcopy(doc["comms"][0]))
        out.append(("comms[0] repeated at %d" % at, json.dumps(m)))
    return out


def run(tranalyze, d):
    p = subprocess.run([tranalyze, "--json", d], capture_output=True, text=True, timeout=60, preexec_fn=as_limit)
    if p.returncode not in (0, 1, 2):
        raise SystemExit("FAIL: status %d on %s\n%s" % (p.returncode, d, p.stderr[-2000:]))
    if p.returncode != 2 or p.stdout:
        json.loads(p.stdout)          # valid JSON even then
    return p


def paths(obj, prefix=()):
    """every (path) into the JSON value"""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):
            yield from paths(v, prefix + (i,))


def setp(obj, path, val, delete=False):
    for k in path[:-1]:
        obj = obj[k]
    if delete:
        if isinstance(obj, dict):
            del obj[path[-1]]
        else:
            obj.pop(path[-1])
    else:
        obj[path[-1]] = val


def main():
    tranalyze, gen, work = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 400
    rnd = random.Random(7)
    shutil.rmtree(work, ignore_errors=True)
    n = 0
    # (gen_graphs.py's scenario: CUDA graphs, GraphLaunch entries, "graphs")
    graphs = os.path.join(os.path.dirname(os.path.abspath(gen)), "gen_graphs.py")
    for sc, g, packed in (("hang_spread", gen, False), ("pipeline_missing_send", gen, False),
                          ("nan_consequences", gen, False), ("py_extra_collective", gen, False),
                          ("graph_fewer", graphs, False), ("nan_consequences", gen, True)):
        name = sc + ("-v2" if packed else "")
        base = os.path.join(work, name + "-base")
        subprocess.run([sys.executable, g, sc, base], check=True)
        os.remove(os.path.join(base, "expected.json"))
        files = sorted(f for f in os.listdir(base) if f.endswith(".json"))
        victim = files[1]
        with open(os.path.join(base, victim)) as f:
            text = f.read()
        doc = json.loads(text)
        valid = [] if packed else crafted(doc, rnd)
        cases = []
        if packed:
            doc = pack_trace(doc)
            text = json.dumps(doc)
            with open(os.path.join(base, victim), "w") as f:
                f.write(text)
            assert doc["checks"]["rows"] > 0, "%s: no checks to damage" % victim
            for i in range(rounds // 2):      # the rows' bytes themselves (base64 kept valid), calls and checks
                field = ("calls", "checks")[i % 2]
                b = bytearray(base64.b64decode(doc[field]["data"]))
                if rnd.random() < 0.3:
                    b = b[:rnd.randrange(len(b))]
                    what = "%s data cut at byte %d" % (field, len(b))
                else:
                    at = [rnd.randrange(len(b)) for _ in range(rnd.randint(1, 4))]
                    for k in at:
                        b[k] = rnd.randrange(256)
                    what = "%s data bytes %s changed" % (field, at)
                m = copy.deepcopy(doc)
                m[field]["data"] = base64.b64encode(bytes(b)).decode()
                if rnd.random() < 0.5:       # rows as the data holds (not only the count's mismatch)
                    m[field]["rows"] = doc[field]["rows"] - (1 if "cut" in what else 0)
                cases.append((what, json.dumps(m)))
        all_paths = list(paths(doc))
        d = os.path.join(work, name)
        # truncations and byte flips
        for _ in range(rounds // 8):
            cut = rnd.randrange(len(text))
            cases.append(("truncate@%d" % cut, text[:cut]))
            b = bytearray(text.encode())
            for _ in range(rnd.randint(1, 8)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            cases.append(("flip", bytes(b)))
        # structural damage
        for _ in range(rounds):
            p = rnd.choice(all_paths)
            if not p:
                continue
            m = copy.deepcopy(doc)
            if rnd.random() < 0.2:
                setp(m, p, None, delete=True)
                what = "delete %s" % (p,)
            else:
                v = rnd.choice(WRONG)
                setp(m, p, v)
                what = "%s = %r" % (p, v)
            cases.append((what, json.dumps(m)))
        cases = valid + cases
        valid = set(w for w, _ in valid)
        for what, content in cases:
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(base, d)
            mode = "wb" if isinstance(content, bytes) else "w"
            with open(os.path.join(d, victim), mode) as f:
                f.write(content)
            try:
                p = run(tranalyze, d)
            except subprocess.TimeoutExpired:
                raise SystemExit("FAIL: timeout with %s: %s" % (victim, what))
            except ValueError as e:
                raise SystemExit("FAIL: --json output is not JSON with %s: %s (%s)" % (victim, what, e))
            if p.returncode == 2 and not p.stdout:
                raise SystemExit("FAIL: status 2 with nothing usable: %s" % what)
            res = json.loads(p.stdout)
            used = any(r.get("file", "").endswith(victim) for r in res.get("ranks", []))
            named = any((i.get("file") or "").endswith(victim) for i in res.get("inputs", []))
            # a changed job id makes the file another (older) job: listed there
            elsewhere = bool(res.get("job", {}).get("other_jobs"))
            if not used and not named and not elsewhere:
                raise SystemExit("FAIL: %s was neither used nor named (%s)" % (victim, what))
            if what in valid and (p.returncode == 2 or not used):
                raise SystemExit("FAIL: status %d, %s %s with %s (valid: it must be used)\n%s" % (
                    p.returncode, victim, "used" if used else "not used", what, p.stderr[-2000:]))
            n += 1
    print("ok: %d damaged inputs, no crash" % n)


if __name__ == "__main__":
    main()
