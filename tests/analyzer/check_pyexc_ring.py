"""The uncaught Python exception a rank exited with (issue 21), read from
rings alone (a rank killed before its JSON trace was written): rank 1's
PYEXC record named exactly, rank 0's reserved empty record read as none, no
damaged-record note. The rings are make_corpus.py's pyexc seed.

usage: check_pyexc_ring.py TRANALYZE WORKDIR"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz"))
import make_corpus  # noqa: E402


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    tranalyze, work = sys.argv[1:3]
    out = os.path.join(work, "pyexc_ring")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name, data in make_corpus.pyexc_seeds()["pyexc"]:
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    p = subprocess.run([tranalyze, "--json", out], capture_output=True, text=True, timeout=120)
    if p.returncode != 1:
        fail("exit status %d, expected 1\n%s%s" % (p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    res = json.loads(p.stdout)
    got = {r["rank"]: r.get("python_exception") for r in res["ranks"]}
    want = {"type": "ValueError", "message": "bad batch 6", "file": "/job/train.py", "function": "load_batch",
            "line": 22, "tid": 4242,
            "text": "exited with an uncaught Python exception ValueError: bad batch 6 (raised at train.py:22 in "
                    "load_batch)"}
    if got.get(0) is not None or got.get(1) != want:
        fail("python_exception per rank %r, expected rank 1 %r and none on rank 0" % (got, want))
    if any("damaged" in (n.get("problem") or "") for n in res["inputs"]):
        fail("a damaged-record note: %r" % res["inputs"])
    f = res["findings"][0]
    if f["kind"] != "missing" or f["ranks"] != [1] or want["text"] not in f["message"]:
        fail("first finding %r" % f)
    print("ok: pyexc from rings")


if __name__ == "__main__":
    main()
