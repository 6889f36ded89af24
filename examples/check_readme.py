#!/usr/bin/env python3
"""Runs the README's runnable commands, so the README cannot drift.

    python3 examples/check_readme.py SOURCE_ROOT [--keep]

The marker. A fenced block of README.md is runnable when its info string
has the word `runnable=LABEL` after the language:

    ```sh runnable=quickstart
    bash examples/run
    ```

GitHub shows the block as plain `sh`. A block whose info string has
`output=LABEL` (```` ```text output=quickstart ````) is a sample of what the
block LABEL prints: each of its lines must appear, in order, in what that
block printed, after both are normalised (job ids, communicator ids, paths,
times, pids and the rank that noticed the hang vary from run to run; `...`
stands for anything; runs of blanks are one blank). A command that needs a
cluster (srun, mpirun, deepspeed --hostfile, kubectl) or root (meson
install), or takes long and is run elsewhere (`bash tests/run`: what CI runs,
.ci/run; `pip wheel`: suite install, test_wheel.py) is in a block without
the marker.

How the blocks run. The source tree is cloned (`git clone -q SOURCE_ROOT`,
so the clone holds the committed tree: no build folder, no traces) and every
runnable block runs in README order in the clone's root, each in its own
`bash`, one logical line (backslash continuations joined) at a time, with
the exit status of each line recorded. The quick start's blocks (label in
CHECKOUT) see the environment as a user's shell would (this test's
TRSHIM_*/TRSIM_* settings and LD_PRELOAD removed), so `bash examples/run`
installs what is missing and builds the clone from scratch: the clone's build
cannot be the checkout's build folder (TRSHIM_BUILD_DIR), since tests/run's
`meson setup --reconfigure` would point that folder at the clone. The other
blocks (after "Install on a cluster") run as after `pip install`: `trshim`
and `tranalyze` of the clone's build first in PATH. The PyTorch block runs
when the torch venv exists ($TRSHIM_TORCH_VENV, else
~/.cache/trshim/torch-venv, with bin/torchrun and the requirements of
tests/pytorch/requirements.txt: venv.sh would otherwise install ~5 GB),
else it is reported as SKIP. The simulated NCCL's shared memory is named by
a tag of this process (TRSIM_SHM_TAG) and removed at the end.

What is asserted, per label (EXPECT below): the exit status of each logical
line; for the quick start, the watcher's ROOT CAUSE block naming rank 0 and
the line of train_dp.c that log_metrics all-reduces at (98), as the README
says; for the PyTorch block, rank 0 and train_torch.py's `all_reduce(metric)`
line (22); the files the reading block writes. Also: the README's first
command is before line 40 and the quick start at most ~40 lines. Every
runnable label must be in EXPECT and the reverse.

Exit status 0 when everything ran and passed, 1 on a failure, 77 when
nothing could run (no git, SOURCE_ROOT not a git checkout).
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

# the blocks a user runs from a checkout, with nothing installed
CHECKOUT = {"quickstart", "torch"}

# label: the exit status of each logical line, the block's time limit (s), what else to check
EXPECT = {
    "quickstart": {"status": [0], "timeout": 360},          # the build from scratch, then ~15 s
    "torch": {"status": [0, 0, 0, 0, 1], "timeout": 150},   # 1: torchrun's status, ended by --on-hang abort
    "dryrun": {"status": [0], "timeout": 20},
    "k8s": {"status": [0], "timeout": 20},
    "reading": {"status": [1, 1, 1, 1, 0], "timeout": 40},  # tranalyze: 1, findings
}

FIRST_COMMAND_BEFORE = 40
QUICK_START_MAX_LINES = 45

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg, flush=True)


def ok(msg):
    print("ok   " + msg, flush=True)


def check(cond, msg):
    (ok if cond else fail)(msg)
    return cond


# ---- README parsing ---------------------------------------------------------------------------

class Block:
    def __init__(self, line, lang, words, body):
        self.line = line            # README line of the opening fence
        self.lang = lang
        self.words = words
        self.body = body            # [(README line, text)]
        self.runnable = self.output = None
        for w in words:
            if w == "runnable" or w.startswith("runnable="):
                self.runnable = w.partition("=")[2] or "line%d" % line
            elif w.startswith("output="):
                self.output = w.partition("=")[2]

    def logical_lines(self):
        """[(README line, command)] with backslash continuations joined, blank and comment lines left out"""
        out, cur, start = [], [], None
        for n, text in self.body:
            if not cur:
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                start = n
            if text.endswith("\\"):
                cur.append(text)
                continue
            cur.append(text)
            out.append((start, "\n".join(cur)))
            cur = []
        if cur:
            out.append((start, "\n".join(cur)))
        return out


def parse(readme):
    blocks, lines = [], readme.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^```\s*$", lines[i]):
            body.append((i + 1, lines[i]))
            i += 1
        blocks.append(Block(start, m.group(1), m.group(2).split(), body))
        i += 1
    return blocks, lines


# ---- output matching -----------------------------------------------------------------------------

def norm(s):
    s = re.sub(r"\b\d{8}-\d{6}-\S+?-\d+\b", "JOB", s)
    s = re.sub(r"0x[0-9a-f]+", "HEX", s)
    s = re.sub(r"(?<![\w.])/[^\s()]*", "PATH", s)
    s = re.sub(r"\b\d+\.\d+\b", "T", s)
    s = re.sub(r"\bpid \d+", "pid N", s)
    s = re.sub(r"HANG: rank \d+", "HANG: rank N", s)
    return re.sub(r"\s+", " ", s).strip()


def sample_matches(sample, output):
    """the sample lines not found, in order, in output"""
    outs = [norm(t) for t in output.split("\n")]
    missing, pos = [], 0
    for n, text in sample:
        if not text.strip():
            continue
        pat = ".*".join(re.escape(norm(p)) for p in text.split("..."))
        for j in range(pos, len(outs)):
            if re.fullmatch(pat, outs[j]):
                pos = j + 1
                break
        else:
            missing.append("README.md:%d: %s" % (n, text))
    return missing


def root_cause_names(output, rank, site):
    """the first ROOT CAUSE block (the line and the indented lines after it) has a line naming
    rank `rank` at `site`"""
    lines = output.split("\n")
    for i, t in enumerate(lines):
        if re.match(r"^(trshim: )?ROOT CAUSE: ", t):
            for u in lines[i + 1:]:
                body = u[len("trshim:"):] if u.startswith("trshim:") else u
                if not body.startswith("  "):
                    break
                if re.search(r"\brank %d\b" % rank, body) and site in body:
                    return u.strip()
            return None
    return None


def line_of(path, pattern, after=None):
    """1-based number of the first line of path matching pattern (after the first match of `after`)"""
    seen = after is None
    with open(path) as f:
        for n, t in enumerate(f, 1):
            if not seen:
                seen = re.search(after, t) is not None
                continue
            if re.search(pattern, t):
                return n
    return None


# ---- running a block -------------------------------------------------------------------------------

def run_block(block, label, clone, env, work):
    script = os.path.join(work, "block-%s.sh" % label)
    status = os.path.join(work, "block-%s.status" % label)
    with open(script, "w") as f:
        f.write("cd %s || exit 99\n" % shq(clone))
        for n, cmd in block.logical_lines():
            f.write("%s\necho \"$?\" >> %s\n" % (cmd, shq(status)))
    limit = EXPECT[label]["timeout"]
    print("---- README.md:%d, block %s (limit %d s):" % (block.line, label, limit), flush=True)
    for n, cmd in block.logical_lines():
        print("  $ " + cmd.replace("\n", "\n    "), flush=True)
    t0 = time.monotonic()
    p = subprocess.Popen(["bash", script], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        timed_out = True
    out = out.decode("utf-8", "replace")
    for t in out.rstrip("\n").split("\n"):
        print("  | " + t)
    took = time.monotonic() - t0
    got = []
    if os.path.exists(status):
        with open(status) as f:
            got = [int(x) for x in f.read().split()]
    want = EXPECT[label]["status"]
    check(not timed_out, "block %s (README.md:%d) finished within %d s (%.0f s)" % (label, block.line, limit, took))
    check(got == want, "block %s: the exit status of each command %s (want %s)" % (label, got, want))
    return out


# ---- the checks after each block ----------------------------------------------------------------

def after_quickstart(out, clone, readme_text):
    src = os.path.join(clone, "examples", "train_dp.c")
    n = line_of(src, r"ncclAllReduce\(", after=r"\blog_metrics\(")
    if not check(n is not None, "examples/train_dp.c: log_metrics's ncclAllReduce found"):
        return
    site = "train_dp.c:%d" % n
    check(site in readme_text.split("## Install on a cluster")[0],
          "the quick start names %s, the line log_metrics all-reduces at" % site)
    got = root_cause_names(out, 0, site)
    check(got is not None, "the watcher's ROOT CAUSE names rank 0 at %s%s" % (site, (": " + got) if got else ""))
    check(re.search(r"^trshim: --on-hang abort: ending the job", out, re.M) is not None,
          "--on-hang abort ended the job")
    check(re.search(r"^trshim: verdict: ROOT CAUSE: divergence", out, re.M) is not None, "the verdict line")
    check(re.search(r"^ROOT CAUSE: divergence", out, re.M) is not None, "tranalyze's whole report follows")


def after_torch(out, clone, readme_text):
    src = os.path.join(clone, "examples", "train_torch.py")
    n = line_of(src, r"dist\.all_reduce\(metric\)")
    if not check(n is not None, "examples/train_torch.py: log_metrics's all_reduce found"):
        return
    site = "train_torch.py:%d" % n
    check(site in readme_text.split("## Install on a cluster")[0], "the quick start names %s" % site)
    got = root_cause_names(out, 0, site)
    check(got is not None, "the watcher's ROOT CAUSE names rank 0 at %s%s" % (site, (": " + got) if got else ""))
    check(re.search(r"^trshim: verdict: ROOT CAUSE: divergence", out, re.M) is not None, "the verdict line")


def after_dryrun(out, clone, readme_text):
    lib = os.path.join(clone, "build", "shim", "libtrshim.so")
    check("launcher: deepspeed" in out, "the dry run knows deepspeed")
    check("env: LD_PRELOAD=%s" % lib in out, "the dry run preloads the library by its absolute path")
    check(".deepspeed_env" in out, "the dry run shows the .deepspeed_env it would write")
    check(not os.path.exists(os.path.join(clone, ".deepspeed_env")), "the dry run wrote no .deepspeed_env")


def after_k8s(out, clone, readme_text):
    for want in ("env:", "- name: LD_PRELOAD", "- name: TRSHIM_DIR", 'value: "/traces"', "- name: TRSHIM_JOB_ID",
                 "fieldPath: metadata.labels['job-name']"):
        check(want in out, "the k8s env: list has %s" % want)


def after_reading(out, clone, readme_text):
    try:
        with open(os.path.join(clone, "analysis.json")) as f:
            top = json.load(f)["findings"][0]
        check((top.get("kind"), top.get("ranks")) == ("divergence", [0]),
              "analysis.json: the first finding is rank 0's divergence (%s %s)" % (top.get("kind"), top.get("ranks")))
    except (OSError, ValueError, KeyError, IndexError) as e:
        fail("analysis.json: %s" % e)
    md = os.path.join(clone, "report.md")
    text = open(md).read() if os.path.exists(md) else ""
    check("train_dp.c" in text, "report.md names train_dp.c")
    check("host1" in text, "report.md names the host host1 (--anonymize)")
    for f in ("report.html", "timeline.json"):
        p = os.path.join(clone, f)
        check(os.path.isfile(p) and os.path.getsize(p) > 0, "%s written" % f)
    try:
        with open(os.path.join(clone, "timeline.json")) as f:
            json.load(f)
        ok("timeline.json is JSON")
    except (OSError, ValueError) as e:
        fail("timeline.json: %s" % e)
    bundles = glob.glob(os.path.join(clone, "trshim-report-*.tar.gz"))
    if check(len(bundles) == 1, "one trshim-report-<job>.tar.gz written (%d)" % len(bundles)):
        with tarfile.open(bundles[0]) as t:
            names = [os.path.basename(m.name) for m in t.getmembers()]
        check("MANIFEST.txt" in names and "report.txt" in names, "the bundle holds MANIFEST.txt and report.txt")


AFTER = {"quickstart": after_quickstart, "torch": after_torch, "dryrun": after_dryrun, "k8s": after_k8s,
         "reading": after_reading}


# ---- main --------------------------------------------------------------------------------------------

def shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def torch_venv(clone):
    """(venv, None) when the PyTorch block can run, else (None, why not)"""
    if os.environ.get("TRSHIM_TORCH", "1") == "0":
        return None, "TRSHIM_TORCH=0"
    venv = os.environ.get("TRSHIM_TORCH_VENV") or os.path.expanduser("~/.cache/trshim/torch-venv")
    if not os.path.exists(os.path.join(venv, "bin", "torchrun")):
        return None, "no torch venv at %s (bash tests/pytorch/venv.sh installs it)" % venv
    try:
        with open(os.path.join(clone, "tests", "pytorch", "requirements.txt"), "rb") as a, \
                open(os.path.join(venv, ".trshim-requirements"), "rb") as b:
            same = a.read() == b.read()
    except OSError:
        same = False
    if not same:
        return None, "the venv at %s is not of tests/pytorch/requirements.txt (venv.sh would reinstall it)" % venv
    return venv, None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    keep = "--keep" in sys.argv[1:]
    if len(args) != 1:
        sys.exit("usage: check_readme.py SOURCE_ROOT [--keep]")
    root = os.path.abspath(args[0])
    with open(os.path.join(root, "README.md")) as f:
        readme_text = f.read()
    blocks, lines = parse(readme_text)

    # ---- the README's shape ----
    cmds = [(n, c) for b in blocks if b.lang in ("sh", "bash", "console") for n, c in b.logical_lines()]
    check(bool(cmds) and cmds[0][0] < FIRST_COMMAND_BEFORE,
          "the first command is before line %d (line %s: %s)" %
          (FIRST_COMMAND_BEFORE, cmds[0][0] if cmds else "-", cmds[0][1] if cmds else "-"))
    qs = [i for i, t in enumerate(lines) if t.startswith("## Quick start")]
    if check(len(qs) == 1, "one '## Quick start' section"):
        end = next((i for i in range(qs[0] + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        check(end - qs[0] <= QUICK_START_MAX_LINES, "the quick start is %d lines (at most %d)" %
              (end - qs[0], QUICK_START_MAX_LINES))
    runnable = [b for b in blocks if b.runnable]
    labels = [b.runnable for b in runnable]
    check(len(labels) == len(set(labels)), "runnable labels are unique: %s" % labels)
    check(set(labels) == set(EXPECT), "the README's runnable blocks %s are the test's %s" %
          (sorted(labels), sorted(EXPECT)))
    samples = {}
    for b in blocks:
        if b.output:
            check(b.output in labels, "README.md:%d: output=%s names a runnable block" % (b.line, b.output))
            samples.setdefault(b.output, []).extend(b.body)
    if qs and runnable:
        check(runnable[0].runnable == "quickstart" and runnable[0].line > qs[0],
              "the first runnable block is the quick start's")

    # ---- the fresh clone ----
    if shutil.which("git") is None or subprocess.run(["git", "-C", root, "rev-parse", "--git-dir"],
                                                     capture_output=True).returncode != 0:
        print("SKIP: %s is not a git checkout (or no git): nothing to clone" % root)
        sys.exit(1 if failures else 77)
    work = tempfile.mkdtemp(prefix="trshim-readme.")
    clone = os.path.join(work, "trshim")
    tag = "readme%d" % os.getpid()
    ran = 0
    try:
        r = subprocess.run(["git", "clone", "-q", root, clone], capture_output=True, text=True)
        if not check(r.returncode == 0, "git clone -q %s %s %s" % (root, clone, r.stderr.strip())):
            sys.exit(1)
        print("clone of %s at %s (HEAD %s)" % (root, clone, subprocess.run(
            ["git", "-C", clone, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()))
        base = {k: v for k, v in os.environ.items()
                if not (k.startswith(("TRSHIM_", "TRSIM_", "MESON_")) or k in ("LD_PRELOAD", "MALLOC_PERTURB_"))
                or k in ("TRSHIM_TORCH_VENV", "TRSHIM_TORCH")}
        base["TRSIM_SHM_TAG"] = tag
        bindir = os.path.join(work, "bin")
        os.mkdir(bindir)
        with open(os.path.join(bindir, "trshim"), "w") as f:
            f.write("#!/bin/sh\n# trshim as after pip install: the clone's cli.py, library and tranalyze\n"
                    "TRSHIM_LIBRARY=${TRSHIM_LIBRARY:-%s} TRSHIM_TRANALYZE=${TRSHIM_TRANALYZE:-%s} "
                    "exec python3 %s \"$@\"\n" % (shq(os.path.join(clone, "build", "shim", "libtrshim.so")),
                                                shq(os.path.join(clone, "build", "analyzer", "tranalyze")),
                                                shq(os.path.join(clone, "python", "trshim", "cli.py"))))
        os.chmod(os.path.join(bindir, "trshim"), 0o755)
        os.symlink(os.path.join(clone, "build", "analyzer", "tranalyze"), os.path.join(bindir, "tranalyze"))
        installed = dict(base, PATH=bindir + ":" + base.get("PATH", "/usr/bin:/bin"))

        for b in runnable:
            label = b.runnable
            if label not in EXPECT:
                fail("README.md:%d: runnable=%s: not in the test's EXPECT (add what it must do)" % (b.line, label))
                continue
            if label == "torch":
                venv, why = torch_venv(clone)
                if venv is None:
                    print("SKIP block torch (README.md:%d): %s" % (b.line, why), flush=True)
                    continue
            env = base if label in CHECKOUT else installed
            out = run_block(b, label, clone, env, work)
            ran += 1
            AFTER[label](out, clone, readme_text)
            if label in samples:
                missing = sample_matches(samples[label], out)
                check(not missing, "the README's sample of block %s is in its output%s" %
                      (label, "".join("\n       not found: " + m for m in missing)))
    finally:
        for n in glob.glob("/dev/shm/trsim.%s.*" % tag):
            try:
                os.unlink(n)
            except OSError:
                pass
        if keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("%d blocks run, %d failures" % (ran, len(failures)))
    if failures:
        sys.exit(1)
    if ran == 0:
        sys.exit(77)


if __name__ == "__main__":
    main()
