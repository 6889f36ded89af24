"""Python call sites by where the code is installed (issue 18): the same
job (layouts/train.py, the planted hang of py_extra.py: rank 0's extra
all_reduce in log_metrics) run as 2 simulated ranks under libtrshim.so from
the layouts users train from, each checked with tranalyze --json for the
exact file:line of the culprit's call (`train.py:15 in log_metrics`) and of
the others' (`train.py:19 in train_step`):

  torch       the script in a folder named torch/ (python torch/train.py)
  megatron    a Megatron-LM checkout: pretrain_gpt.py at its top imports
              megatron/training/train.py from its own tree
  nanotron    a nanotron checkout: run_train.py, src/ on PYTHONPATH,
              src/nanotron/train.py
  installed   the job as a package (layoutjob) installed by pip from a
              wheel into a virtual environment's site-packages, run with
              `python -m layoutjob`: every frame is a library's, the site is
              the entry point's own line before the call leaves it (item 2)
  editable    a Megatron-LM tree installed editable into that environment
              (pip installs the PEP 660 wheel a backend would build: an
              __editable__.*.pth naming the tree), its megatron package
              imported by a driver script in another folder

Every rank's trace must record the interpreter's folders (python.roots:
its standard library; the environment's site-packages; the editable tree).
The same traces without them (python.roots removed, ring files deleted:
what an older shim wrote) give the old answer where the old folding by
folder names was wrong (the driver line for megatron, nanotron, editable),
and --no-fold megatron / --no-fold nanotron restore the right one there;
--fold megatron on the new traces folds the tree again (the driver line).
The rings alone (JSON traces deleted: killed ranks) give the same answer
as the JSON traces (the roots travel in the ring's PYROOTS blob).

    run_layouts.py MINOR LAUNCH SHIM TRSIM_LIB WORKDIR TRANALYZE

Runs with the first CPython 3.MINOR interpreter found (pythons.py); exit
status 77 (meson: skipped) when there is none."""
import argparse
import base64
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pythons  # noqa: E402
import run_jobs  # noqa: E402

TRAIN = os.path.join(HERE, "layouts", "train.py")
NRANKS = 2
SEQ = 4


def marks():
    out = {}
    with open(TRAIN, encoding="utf-8") as f:
        for i, text in enumerate(f, 1):
            m = re.search(r"# CALL:(\w+)\s*$", text)
            if m:
                out[m.group(1)] = i
    return out


def driver(module):
    """a script that imports the job's module from wherever it is installed"""
    return '"""the entry point of a layout"""\nfrom %s import main\n\nmain()  # CALL:driver\n' % module


DRIVER_SITE = "%s:4 in <module>"


def place(root, files):
    for rel, text in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)


def wheel(path, name, files):
    """a pure-Python wheel holding files ({path in the wheel: text}) and its
    dist-info (METADATA, WHEEL, RECORD with hashes, as pip checks them)"""
    dist = "%s-1.0.dist-info" % name
    files = dict(files)
    files[dist + "/METADATA"] = "Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % name
    files[dist + "/WHEEL"] = "Wheel-Version: 1.0\nGenerator: run_layouts\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for rel, text in files.items():
        data = text.encode()
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (rel, h, len(data)))
    record.append(dist + "/RECORD,,")
    files[dist + "/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in files.items():
            z.writestr(rel, text)
    return path


def ask(interp, code):
    return subprocess.run([interp, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def make_venv(interp, w, train):
    """a virtual environment with layoutjob installed and the editable
    Megatron-LM tree; (its python, its site-packages, the editable tree)"""
    venv = os.path.join(w, "venv")
    subprocess.run([interp, "-m", "venv", venv], check=True, capture_output=True)
    py = os.path.join(venv, "bin", "python")
    tree = os.path.join(w, "editable", "Megatron-LM")
    place(tree, {"pyproject.toml": "[project]\nname = \"megatron_lm\"\nversion = \"1.0\"\n",
                 "megatron/__init__.py": "", "megatron/training/__init__.py": "",
                 "megatron/training/train.py": train})
    w1 = wheel(os.path.join(w, "layoutjob-1.0-py3-none-any.whl"), "layoutjob",
               {"layoutjob/__init__.py": "", "layoutjob/train.py": train,
                "layoutjob/__main__.py": '"""python -m layoutjob"""\nfrom layoutjob.train import main\n\nmain()\n'})
    w2 = wheel(os.path.join(w, "megatron_lm-1.0-py3-none-any.whl"), "megatron_lm",
               {"__editable__.megatron_lm-1.0.pth": tree + "\n"})
    subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", "-q",
                    w1, w2], check=True, capture_output=True)
    site = ask(py, "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    return py, site, tree


def layouts(interp, w, train):
    """name: (command, extra PYTHONPATH, site file of the right answer,
    old traces' answer (None: the same), roots the traces must hold)"""
    place(w, {"torch/train.py": train,
              "Megatron-LM/megatron/__init__.py": "", "Megatron-LM/megatron/training/__init__.py": "",
              "Megatron-LM/megatron/training/train.py": train,
              "Megatron-LM/pretrain_gpt.py": driver("megatron.training.train"),
              "nanotron/src/nanotron/__init__.py": "", "nanotron/src/nanotron/train.py": train,
              "nanotron/run_train.py": driver("nanotron.train"),
              "drivers/pretrain.py": driver("megatron.training.train")})
    py, site, tree = make_venv(interp, w, train)
    return {
        "torch": ([interp, os.path.join(w, "torch", "train.py")], None, None, {}),
        "megatron": ([interp, os.path.join(w, "Megatron-LM", "pretrain_gpt.py")], None,
                     DRIVER_SITE % "pretrain_gpt.py", {}),
        "nanotron": ([interp, os.path.join(w, "nanotron", "run_train.py")], os.path.join(w, "nanotron", "src"),
                     DRIVER_SITE % "run_train.py", {}),
        "installed": ([py, "-m", "layoutjob"], None, None, {"site": site}),
        "editable": ([py, os.path.join(w, "drivers", "pretrain.py")], None, DRIVER_SITE % "pretrain.py",
                     {"site": site, "editable": tree}),
    }


class Failed(Exception):
    pass


def eq(got, want, what):
    if got != want:
        raise Failed("%s: got %r, expected %r" % (what, got, want))


def analyze(traces, opts=()):
    q = subprocess.run([ARGS.tranalyze, "--json"] + list(opts) + [traces], capture_output=True, text=True,
                       timeout=120)
    if q.returncode != 1:
        raise Failed("tranalyze %s %s: status %d\n%s%s" % (" ".join(opts), traces, q.returncode, q.stdout[-3000:],
                                                           q.stderr[-2000:]))
    f = json.loads(q.stdout)["findings"][0]
    eq((f["kind"], f.get("seq"), f["ranks"]), ("divergence", SEQ, [0]), "top finding (kind, seq, ranks)")
    return (f.get("call") or {}).get("site"), (f.get("others_call") or {}).get("site")


def copy(traces, dst, keep):
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for p in glob.glob(os.path.join(traces, "*")):
        if keep(p):
            shutil.copy(p, dst)
    return dst


def strip_roots(d):
    """the traces as an older shim wrote them: no python.roots, no ring"""
    for p in glob.glob(os.path.join(d, "*.json")):
        with open(p, encoding="utf-8") as f:
            t = json.load(f)
        t["python"].pop("roots", None)
        with open(p, "w", encoding="utf-8") as f:
            json.dump(t, f)


def check_roots(traces, interp_stdlib, want):
    n = 0
    for p in sorted(glob.glob(os.path.join(traces, "*.json"))):
        with open(p, encoding="utf-8") as f:
            roots = json.load(f)["python"].get("roots")
        n += 1
        if roots is None:
            raise Failed("%s: no python.roots" % os.path.basename(p))
        real = {k: {os.path.realpath(x) for x in v} for k, v in roots.items()}
        if os.path.realpath(interp_stdlib) not in real["stdlib"]:
            raise Failed("%s: python.roots.stdlib %r lacks %s" % (os.path.basename(p), roots["stdlib"], interp_stdlib))
        for kind, path in want.items():
            if path not in roots[kind]:
                raise Failed("%s: python.roots.%s %r lacks %s" % (os.path.basename(p), kind, roots[kind], path))
    eq(n, NRANKS, "JSON traces")


def run_layout(name, spec, w, stdlib, m):
    cmd, path, old, want_roots = spec
    work = os.path.join(w, "run-" + name)
    site, others = "train.py:%d in log_metrics" % m["extra"], "train.py:%d in train_step" % m["grad"]
    saved = run_jobs.SITE
    if path:
        run_jobs.SITE = run_jobs.SITE + ":" + path
    try:
        p, traces = run_jobs.run_job(cmd, NRANKS, 90, {}, work, SEQ)
    finally:
        run_jobs.SITE = saved
    log = "$ %s: status %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    try:
        eq(p.returncode, 143, "trsim-launch's exit status (the hung job ended with SIGTERM)")
        check_roots(traces, stdlib, want_roots)
        eq(analyze(traces), (site, others), "tranalyze's call sites")
        rings = copy(traces, os.path.join(work, "rings"), lambda f: f.endswith(".ring"))
        eq(analyze(rings), (site, others), "tranalyze's call sites from the rings alone")
        older = copy(traces, os.path.join(work, "older"), lambda f: f.endswith(".json"))
        strip_roots(older)
        eq(analyze(older)[0], old or site, "an older trace's call site (folding by folder names)")
        notes = []
        if old:
            fw = "nanotron" if name == "nanotron" else "megatron"
            eq(analyze(older, ["--no-fold", fw])[0], site, "--no-fold %s on the older traces" % fw)
            eq(analyze(traces, ["--fold", fw])[0], old, "--fold %s" % fw)
            notes.append("older traces: %s" % old)
        print("ok: %s: %s, others %s%s" % (name, site, others, "; " + ", ".join(notes) if notes else ""))
        return True
    except Failed as e:
        print(log)
        print("FAIL: %s: %s" % (name, e))
        return False


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for a in ("minor", "launch", "shim", "trsim_lib", "work", "tranalyze"):
        ap.add_argument(a)
    ap.add_argument("--only", help="layouts, comma-separated (default: all)")
    ARGS = ap.parse_args()
    for a in ("launch", "shim", "trsim_lib", "work", "tranalyze"):
        setattr(ARGS, a, os.path.abspath(getattr(ARGS, a)))
    os.environ["TRSIM_LIB"] = ARGS.trsim_lib
    run_jobs.ARGS = ARGS
    found = [f for f in pythons.find(int(ARGS.minor)) if "free-threaded" not in f[1]]
    if not found:
        print("skip: no CPython 3.%s on this machine (pythons.py)" % ARGS.minor)
        return 77
    interp, version = found[0]
    print("== %s (%s)" % (interp, version), flush=True)
    w = os.path.join(ARGS.work, "3.%s" % ARGS.minor)
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    with open(TRAIN, encoding="utf-8") as f:
        train = f.read()
    stdlib = ask(interp, "import sysconfig; print(sysconfig.get_paths()['stdlib'])")
    specs = layouts(interp, w, train)
    only = ARGS.only.split(",") if ARGS.only else list(specs)
    m = marks()
    bad = [n for n in only if not run_layout(n, specs[n], w, stdlib, m)]
    if bad:
        print("FAILED: %s" % ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
