#!/usr/bin/env python3
"""tranalyze --markdown reports that fit a GitHub issue, and --anonymize
(issue 15): each case checks exact outcomes.

    check_report.py CASE TRANALYZE GEN_TRACES WORKDIR

CASE:
  scale_1k     gen_traces.py bench, 1,024 ranks x 50 records, a hang (the last
               rank stops 3 calls early) with an environment (--env: shared
               variables, CUDA_VISIBLE_DEVICES by local rank, NCCL_ALGO=Tree on
               ranks 3 and 7), and a clean job: --markdown is shorter than
               60,000 characters; the root cause is in its first lines with the
               exact culprit rank and call site (the same as --json's); the rank
               table is exactly two rows (ranks 0-1022 alike, the root cause
               apart), one for the clean job; the environment is one table of
               the 7 shared variables and exactly two that differ, NCCL_ALGO's
               row naming ranks 3 and 7
  scale_16k    the same at 16,384 ranks (about 15 s)
  env          gen_traces.py env_differs (8 ranks, NCCL_ALGO=Tree on ranks 3
               and 7): the shared table holds exactly the 3 shared variables,
               the table of differences exactly NCCL_ALGO with ranks 3, 7;
               the plain text output has no environment section
  system       env_differs with the shim's "system" on 7 of 8 ranks (two hosts,
               two kernel drivers, rank 7 another DeepSpeed, a GPU listed by two
               ranks): ### System's exact lines (PyTorch, DeepSpeed, NCCL, CUDA
               runtime and driver, kernel driver, GPUs counted once, trshim,
               another framework), each value with its ranks where they differ
  anonymize    gen_traces.py anon_hang (host names, /home/alice paths, alice in
               another path, a file named after a third host): with --anonymize
               text, --json and --markdown contain none of them and are exactly
               the output without it with host1, host2, host3, ~ and user1 put
               in (--json: every value, no key); the same diagnosis; with
               nothing usable (only that file) stderr is anonymized too
  stress       1,024 ranks made as long as a report can get: 60-character host
               names, a different 3 KiB command line per rank, 50 shared and 50
               per-rank variables of 300 characters, each rank stopped at
               another call, 150 ranks without a trace, 40 damaged files with
               long names, a "system" per rank of 300-character versions, 8
               GPUs and 32 packages: --markdown (and --anonymize --markdown) stays under
               60,000 characters, with the root cause on top and each part's
               "... and K more"
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from checks import Failure, check, eq, run_case  # noqa: E402

LIMIT = 60000


class Case:
    def __init__(self, workdir):
        os.makedirs(workdir, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="report-", dir=workdir)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def run(ta, args, cwd=None, timeout=180):
    """(status, stdout, stderr) of tranalyze; a signal or a hang is a failure"""
    try:
        p = subprocess.run([os.path.abspath(ta)] + args, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure("tranalyze %s: no answer in %d s" % (" ".join(args), timeout))
    check(p.returncode in (0, 1, 2), "tranalyze %s: status %d\n%s" % (" ".join(args), p.returncode, p.stderr[-2000:]))
    return p.returncode, p.stdout, p.stderr


def gen(gen_traces, *args):
    p = subprocess.run([sys.executable, gen_traces] + list(args), capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "gen_traces.py %s failed:\n%s" % (" ".join(args), p.stderr[-2000:]))


def fits(md, what):
    check(len(md) < LIMIT and len(md.encode()) < LIMIT,
          "%s: --markdown is %d characters (%d bytes), the limit is %d" % (what, len(md), len(md.encode()), LIMIT))


def part(md, heading):
    """the lines of the part under heading ("### Ranks") up to the next heading"""
    lines = md.splitlines()
    check(heading in lines, "no %r part:\n%s" % (heading, md[:3000]))
    i = j = lines.index(heading) + 1
    while j < len(lines) and not lines[j].startswith("#"):
        j += 1
    return lines[i:j]


def table_rows(lines, header):
    """the data rows of the table whose header row starts with header"""
    for i, ln in enumerate(lines):
        if ln.startswith(header):
            rows = []
            for r in lines[i + 2:]:
                if not r.startswith("|"):
                    break
                rows.append(r)
            return rows
    raise Failure("no table %r in:\n%s" % (header, "\n".join(lines)[:3000]))


SHARED_BENCH = {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "mlx5_0,mlx5_1",
                "NCCL_IB_KEY": "<redacted>", "NCCL_SOCKET_IFNAME": "eth0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                "TRSHIM_DIR": "/shared/traces"}


def shared_table(md):
    rows = table_rows(part(md, "### Environment"), "| variable | value |")
    got = {}
    for r in rows:
        cells = [x.strip() for x in r.strip("|").split("|")]
        check(len(cells) == 2 and cells[0].startswith("`") and cells[1].startswith("`"), "shared row %r" % r)
        got[cells[0].strip("`")] = cells[1].strip("`")
    return got


def diff_rows(md):
    return table_rows(part(md, "### Environment"), "| variable | most common value | other values |")


def scale(c, ta, gen_traces, n):
    last = n - 1
    for clean in (False, True):
        d = os.path.join(c.tmp, "bench%d%s" % (n, "clean" if clean else ""))
        gen(gen_traces, "bench", d, "--ranks", str(n), "--records", "50", "--format", "1",
            *(["--clean"] if clean else ["--env"]))
        try:
            t0 = time.monotonic()
            rc, md, err = run(ta, ["--markdown", d])
            secs = time.monotonic() - t0
            what = "%d ranks%s" % (n, ", clean" if clean else "")
            eq(rc, 0 if clean else 1, what + ": status")
            fits(md, what)
            head = "\n".join(md.splitlines()[:16])
            rows = table_rows(part(md, "### Ranks"), "| ranks | host | pid | ended |")
            if clean:
                check("**No problem found.**" in head, "%s: no 'No problem found' on top:\n%s" % (what, head))
                eq(rows, ["| 0-%d | %d hosts | | killed by SIGTERM | 12 | 24 | 12 | 2.0 GiB |" % (last, n // 8)],
                   what + ": rank table")
            else:
                for want in ("#### **missing** on comm ",
                             "rank %d never issued AllReduce(2048 x float32, sum) #24, which ranks " % last,
                             "- rank %d (last call): `AllReduce(2048 x float32, sum)` at `tp_forward (train+0x1000)`"
                             % last,
                             "- ranks %d-%d (waiting in): `AllReduce(2048 x float32, sum)` at "
                             "`tp_backward (train+0x1040)`" % (n - 8, n - 2)):
                    check(want in head, "%s: %r not in the first lines:\n%s" % (what, want, head))
                check(head.index("### Root cause") < head.index("rank %d never issued" % last), what + ": order")
                eq(rows, ["| 0-%d | %d hosts | | killed by SIGTERM | 12 | 24 | 12 | 2.0 GiB |" % (last - 1, n // 8),
                          "| %d **(root cause)** | node%d | %d | exited | 11 | 23 | 11 | 2.0 GiB |"
                          % (last, last // 8, 10000 + last)], what + ": rank table")
                eq(shared_table(md), SHARED_BENCH, what + ": shared variables")
                eq(diff_rows(md), [
                    "| `CUDA_VISIBLE_DEVICES` | `0` on ranks 0, 8, 16, ..., %d (every 8th, %d in all) | "
                    "`1` on ranks 1, 9, 17, ..., %d (every 8th, %d in all); "
                    "`2` on ranks 2, 10, 18, ..., %d (every 8th, %d in all); "
                    "`3` on ranks 3, 11, 19, ..., %d (every 8th, %d in all); ... and 4 more values |"
                    % (n - 8, n // 8, n - 7, n // 8, n - 6, n // 8, n - 5, n // 8),
                    "| `NCCL_ALGO` | `Ring` on %d ranks | `Tree` on ranks 3, 7 |" % (n - 2)], what + ": differences")
                if n <= 1024:      # the same culprit and site as --json's
                    rc, out, _ = run(ta, ["--json", d])
                    f = json.loads(out)["findings"][0]
                    eq((f["kind"], f["ranks"], f["seq"], f["call"]["site"]),
                       ("missing", [last], 24, "tp_forward (train+0x1000)"), what + ": --json's root cause")
            sys.stdout.write("%s: --markdown %d characters in %.1f s\n" % (what, len(md), secs))
        finally:
            shutil.rmtree(d, ignore_errors=True)


def case_scale_1k(c, ta, gen_traces, workdir):
    scale(c, ta, gen_traces, 1024)


def case_scale_16k(c, ta, gen_traces, workdir):
    scale(c, ta, gen_traces, 16384)


def case_env(c, ta, gen_traces, workdir):
    d = os.path.join(c.tmp, "env")
    gen(gen_traces, "env_differs", d)
    rc, md, _ = run(ta, ["--markdown", d])
    fits(md, "env_differs")
    eq(shared_table(md), {"NCCL_DEBUG": "WARN", "NCCL_IB_KEY": "<redacted>", "TRSHIM_DIR": "traces"},
       "shared variables")
    eq(diff_rows(md), ["| `NCCL_ALGO` | `Ring` on 6 ranks | `Tree` on ranks 3, 7 |"], "variables that differ")
    env = part(md, "### Environment")
    check("<details><summary>Environment variables the same on every rank (3)</summary>" in env,
          "the shared table is not in <details>:\n%s" % "\n".join(env))
    eq([ln for ln in env if ln.startswith("- ")], ["- command: `/opt/trjob/bin/train --steps 10`"],
       "the environment part's list (the versions are under ### System)")
    eq([ln for ln in part(md, "### System") if ln], ["- NCCL 2.28.9", "- CUDA runtime 13.0", "- CUDA driver 13.0",
                                                   "- trshim 0.1.0"], "### System of traces without \"system\"")
    rc2, text, _ = run(ta, [d])
    eq(rc2, rc, "text status")
    check("| variable |" not in text and "NCCL_ALGO=" not in text.split("RANKS")[-1], "the text output changed")


def case_system(c, ta, gen_traces, workdir):
    """env_differs (8 ranks) with the shim's "system" (docs/trace-format.md): ranks 0-3 on node0, 4-7 on
    node1 (another kernel driver), rank 6 an older trace without it, rank 7 another DeepSpeed, rank 0
    driving devices 0 and 1 (both listed in its trace, device 1 also in rank 1's): ### System names
    each version once where the ranks agree, else each value with its ranks, and counts each GPU once"""
    d = os.path.join(c.tmp, "system")
    gen(gen_traces, "env_differs", d)
    for f in sorted(x for x in os.listdir(d) if x.startswith("trshim.")):
        path = os.path.join(d, f)
        with open(path) as fh:
            t = json.load(fh)
        r = t["rank"]
        t["host"] = "node%d" % (r // 4)
        if r != 6:
            gpu = lambda dev: {"device": dev, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:%02X:00.0" % (dev + 24),
                               "uuid": "GPU-%08x-0000-4000-8000-%012x" % (r // 4, dev)}
            t["system"] = {"nccl": "2.28.9", "cuda_runtime": "13.0", "cuda_driver": "13.0",
                           "kernel_driver": "580.65.06" if r < 4 else "580.95.05",
                           "gpus": [gpu(r % 4)] + ([gpu(1)] if r == 0 else []),
                           "packages": {"torch": "2.9.1+cu130", "deepspeed": "0.17.0" if r == 7 else "0.18.2",
                                        "transformers": "4.57.1"},
                           "launchers": [{"name": "deepspeed", "job_id": None}]}
        os.remove(path)
        with open(os.path.join(d, "trshim.envdiff.r%d.%s.%d.json" % (r, t["host"], t["pid"])), "w") as fh:
            json.dump(t, fh)
    rc, md, _ = run(ta, ["--markdown", d])
    eq(rc, 1, "status (config_mismatch: DeepSpeed on rank 7, NCCL_ALGO on ranks 3, 7)")
    fits(md, "system")
    heads = [ln for ln in md.splitlines() if ln.startswith("### ")]
    eq(heads, ["### Root cause", "### System", "### Ranks", "### Environment"], "the parts, in order")
    eq([ln for ln in part(md, "### System") if ln], [
        "- PyTorch differs: 2.9.1+cu130 on 7 ranks; (not known) on rank 6",
        "- DeepSpeed differs: 0.18.2 on 6 ranks; (not known) on rank 6; 0.17.0 on rank 7",
        "- NCCL 2.28.9",
        "- CUDA runtime 13.0",
        "- CUDA driver 13.0",
        "- NVIDIA kernel driver differs: 580.65.06 on ranks 0-3; 580.95.05 on ranks 4, 5, 7; (not known) on rank 6",
        "- GPUs: 7 x NVIDIA H100 80GB HBM3 on 2 hosts",
        "- trshim 0.1.0",
        "- transformers differs: 4.57.1 on 7 ranks; (not known) on rank 6",
        # two hosts: two clock domains, node1's placed by the world communicator's init (clocks.c)
        "- clocks: 2 clock domains; times are on the clock of ranks 0-3 (node0); ranks 4-7 on node1: placed by "
        "their communicators' inits, as well as they leave an init together"], "### System")
    rc2, text, _ = run(ta, [d])
    check("### System" not in text and "PyTorch" not in text and "580.65.06" not in text, "the text output changed")


def anon_expected(s, g, text=False):
    """s with the planted names replaced as --anonymize must"""
    hosts = g.ANON_HOSTS + [g.ANON_OTHER_HOST]
    for i, h in enumerate(hosts):
        s = s.replace(h, "host%d" % (i + 1))
    if text:           # the text's rank table cuts a host to 16 characters: padded back
        for i, h in enumerate(hosts):
            s = s.replace(h[:16] + " ", ("host%d" % (i + 1)).ljust(16) + " ")
    return s.replace("/home/" + g.ANON_USER, "~").replace(g.ANON_USER, "user1")


def anon_json(v, g):
    if isinstance(v, dict):
        return {k: anon_json(x, g) for k, x in v.items()}
    if isinstance(v, list):
        return [anon_json(x, g) for x in v]
    return anon_expected(v, g) if isinstance(v, str) else v


def case_anonymize(c, ta, gen_traces, workdir):
    sys.path.insert(0, os.path.dirname(os.path.abspath(gen_traces)))
    import gen_traces as g
    gen(gen_traces, "anon_hang", os.path.join(c.tmp, "anon"))
    planted = g.ANON_HOSTS + [g.ANON_OTHER_HOST, "dgx-a100", "example.com", "login-node3", "/home/", g.ANON_USER]
    seen = {}
    for mode in ([], ["--json"], ["--markdown"]):
        what = " ".join(mode) or "text"
        rc, plain, perr = run(ta, mode + ["anon"], cwd=c.tmp)       # relative: no path of the build
        rca, anon, aerr = run(ta, mode + ["--anonymize", "anon"], cwd=c.tmp)
        eq(rca, rc, what + ": status with --anonymize")
        eq(rc, 1, what + ": status")
        for p in planted:
            seen[p] = seen.get(p, 0) + (p in plain)
            check(p not in anon and p not in aerr, "%s --anonymize: %r is in the output:\n%s" % (what, p, anon[:4000]))
        eq(aerr, anon_expected(perr, g), what + ": stderr")
        if mode == ["--json"]:
            a, p = json.loads(anon), json.loads(plain)
            check(a == anon_json(p, g), "--json --anonymize is not --json with the names replaced")
            f = a["findings"][0]
            eq((f["kind"], f["ranks"], f["seq"], f["call"]["function"]), ("divergence", [0], 4, "log_metrics"),
               "--json --anonymize: the diagnosis")
            eq([r["host"] for r in a["ranks"] if r.get("host")], ["host1", "host1", "host2", "host2"], "hosts")
        else:
            want = anon_expected(plain, g, text=not mode)
            if anon != want:
                al, wl = anon.splitlines(), want.splitlines()
                k = next((i for i in range(min(len(al), len(wl))) if al[i] != wl[i]), min(len(al), len(wl)))
                raise Failure("%s --anonymize differs from the expected replacement at line %d:\n got  %r\n want %r"
                              % (what, k + 1, al[k] if k < len(al) else None, wl[k] if k < len(wl) else None))
        if mode == ["--markdown"]:
            for want in ("| 0 **(root cause)** | host1 | 40000 |", "| 2 | host2 | 40002 |",
                         "- command: `~/proj/.venv/bin/python ~/proj/train.py --out /scratch/user1/run7`",
                         "| `TRSHIM_DIR` | `~/traces` |", "| `TORCH_EXTENSIONS_DIR` | `/scratch/user1/torch_ext` |",
                         "`anon/trshim.anon.r9.host3.99.json`: empty file"):
                check(want in anon, "--markdown --anonymize lacks %r:\n%s" % (want, anon))
            if "module /home/%s/proj/bin/train " % g.ANON_USER in plain:    # (a tranalyze with libdw)
                check("module ~/proj/bin/train " in anon, "--markdown --anonymize: the module's path:\n%s" % anon)
            check(anon.splitlines()[6].startswith("#### **divergence / extra_call** on comm "),
                  "--markdown --anonymize: the root cause is not on top:\n%s" % anon[:1500])
    # the files --html and --timeline write: the same replacements
    files = {"--html": os.path.join(c.tmp, "r.html"), "--timeline": os.path.join(c.tmp, "t.json")}
    args = [x for k, f in files.items() for x in (k, f)]
    rc, _, _ = run(ta, args + ["anon"], cwd=c.tmp)
    plain_files = {}
    for k, f in files.items():
        with open(f, encoding="utf-8") as fh:
            plain_files[k] = fh.read()
    rca, _, aerr = run(ta, args + ["--anonymize", "anon"], cwd=c.tmp)
    eq((rc, rca), (1, 1), "status with --html and --timeline")
    for k, f in files.items():
        with open(f, encoding="utf-8") as fh:
            got = fh.read()
        for p in planted:
            seen[p] = seen.get(p, 0) + (p in plain_files[k])
            check(p not in got, "%s --anonymize: %r is in the file" % (k, p))
        check("host1" in got and "host2" in got, "%s --anonymize: no host1/host2 in the file" % k)
    t = json.loads(got)     # the timeline is still a trace-event document
    names = sorted(e["args"]["name"] for e in t["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name")
    check(names and all("host" in n for n in names), "--timeline --anonymize: process names %s" % names)
    for p in planted:
        check(seen[p] >= 2, "%r is in %d outputs without --anonymize (the test plants it)" % (p, seen[p]))
    # nothing usable: the messages on stderr are anonymized too
    bad = os.path.join(c.tmp, "bad")
    os.makedirs(bad)
    open(os.path.join(bad, "trshim.anon.r9.%s.99.json" % g.ANON_OTHER_HOST), "w").close()
    rc, out, err = run(ta, ["--anonymize", "bad"], cwd=c.tmp)
    eq(rc, 2, "nothing usable: status")
    check("bad/trshim.anon.r9.host1.99.json: empty file" in err and "login-node3" not in err,
          "nothing usable: stderr %r" % err)


def case_stress(c, ta, gen_traces, workdir):
    d = os.path.join(c.tmp, "stress")
    gen(gen_traces, "bench", d, "--ranks", "1024", "--records", "50", "--env", "--format", "1")
    rnd = random.Random(15)
    files = sorted(f for f in os.listdir(d) if f.endswith(".json"))
    gone = set(rnd.sample(range(1024), 150)) - {1023}
    for f in files:
        path = os.path.join(d, f)
        with open(path) as fh:
            t = json.load(fh)
        r = t["rank"]
        os.remove(path)
        if r in gone:
            continue
        t["host"] = "gpu-node-%05d-%s.rack%02d.cluster.example.org" % (r, "abcdefghij" * 2, r % 32)
        t["cmdline"] = ["/opt/venv/bin/python", "-m", "train"] + ["--opt%d=%s" % (k, "v" * 40) for k in range(60)] + \
            ["--seed=%d" % r]
        t["system"] = {"nccl": "2.%d.%d" % (r % 7, r) + "n" * 200, "cuda_runtime": "13.%d" % r + "c" * 200,
                       "cuda_driver": "13.%d" % r + "d" * 200, "kernel_driver": "580.%d" % r + "k" * 200,
                       "gpus": [{"device": k, "name": "GPU model %d-%d " % (r, k) + "g" * 200, "uuid": "GPU-%d-%d" % (r, k),
                                 "pci_bus_id": None} for k in range(8)],
                       "packages": dict([("torch", "2.%d" % r + "t" * 300), ("deepspeed", "0.%d" % r + "s" * 300)] +
                                        [("pkg%02d" % k, "%d.%d" % (r, k) + "p" * 300) for k in range(30)]),
                       "launchers": []}
        for k in range(50):
            t["env"]["TORCH_SHARED_%02d" % k] = "s%d-" % k + "x" * 300
            t["env"]["NCCL_RANK_%02d" % k] = "r%d-%d-" % (r, k) + "y" * 300
        cut = rnd.randint(0, 20)
        if cut and r != 1023:
            t["calls"] = t["calls"][:-cut]
        t["end"] = rnd.choice([{"reason": "exit", "signal": None, "in_call": False},
                               {"reason": "signal", "signal": 15, "in_call": False},
                               {"reason": "signal", "signal": 9, "in_call": False}])
        with open(os.path.join(d, "trshim.stress.r%d.%s.%d.json" % (r, t["host"], t["pid"])), "w") as fh:
            json.dump(t, fh)
    for k in range(40):
        open(os.path.join(d, "trshim.stress.r%d.%s.%d.json" % (5000 + k, "h" * 150, k)), "w").close()
    try:
        for extra in ([], ["--anonymize"]):
            rc, md, err = run(ta, ["--markdown"] + extra + [d])
            what = "stress" + (" --anonymize" if extra else "")
            eq(rc, 1, what + ": status")
            fits(md, what)
            lines = md.splitlines()
            check(lines[4] == "### Root cause", "%s: the root cause is not on top:\n%s" % (what, md[:2000]))
            for want in ("### System", "- ... and 22 more packages", "### Ranks", "### Environment",
                         "#### Input problems", " more rows (",
                         " more variables differ", "- ... and %d more (`--json` lists them all)" % (40 + 1 - 12)):
                check(want in md, "%s: %r not in:\n%s" % (what, want, md))
            sys.stdout.write("%s: --markdown %d characters\n" % (what, len(md)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


CASES = {"scale_1k": case_scale_1k, "scale_16k": case_scale_16k, "env": case_env, "system": case_system,
         "anonymize": case_anonymize, "stress": case_stress}

if __name__ == "__main__":
    sys.exit(run_case(CASES, lambda: Case(sys.argv[4] if len(sys.argv) > 4 else tempfile.gettempdir()), sys.argv,
                      "check_report.py"))
