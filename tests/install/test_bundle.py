#!/usr/bin/env python3
"""trshim bundle (suite 'install', tests/install/meson.build): one .tar.gz for a bug report.

    test_bundle.py NAME      NAME: killed, clean, links, size, synthetic

Each test installs the build folder into a DESTDIR of its own (test_install.py's
Installed), runs simulated jobs under the installed libtrshim.so and the
installed trshim bundle on their traces, and checks the archive: exactly which
traces and rings it holds and why (MANIFEST.txt), each compacted ring against
its original record by record (tests/common/ring.py), and tranalyze --json on
the unpacked bundle against tranalyze --json on the original folder.
  killed  a 4-rank job whose rank 3 exits early; the others hang and the
          launcher SIGKILLs them (TRSHIM_KEEP_RING=1: rank 3's exited ring is
          there too): 4 traces, the 3 killed ranks' rings; then rank 3's trace
          made older than its ring (ring.next lowered): its ring joins; the
          default output name, --force
  clean   two clean jobs in one folder (rings kept, exited): the newest job's
          traces only, no ring; --job picks the other
  links   symbolic links, a FIFO and other files below the folder: left out
          with a note; a damaged ring header, a damaged trace: exit 2 naming it
  size    the README's example job (4 ranks, the planted hang ended by
          SIGTERM): the bundle is below 1 MB
  synthetic  tranalyze's synthetic ring scenarios (tests/analyzer/gen_ring.py:
          wrapped, torn, damaged blobs, several devices...): the same analysis
"""
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_install as ti  # noqa: E402  (Installed, check, run, failures)

sys.path.insert(0, os.path.join(ti.SOURCE, "tests", "common"))
import ring as ringfmt  # noqa: E402

check, run = ti.check, ti.run
EARLY_EXIT = os.environ.get("TRSHIM_JOB_EARLY_EXIT", "")
RING_MAX = 2 * 1000 * 1000          # bytes: a compacted ring of these jobs is far below
SUMMARY = re.compile(r"^trshim: wrote (\S+): (\d+) members? \((\d+) traces?, (\d+) rings?, (\d+) reports?, "
                     r"MANIFEST\.txt\), (\d+) bytes \((\d+) uncompressed\)$", re.M)


def clean_env(**extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("TRSHIM_") or k in ("LD_PRELOAD", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID",
                                            "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"):
            del env[k]
    env.update(extra)
    return env


def launch(opts, prog_args, preload, traces, extra=None, timeout=120):
    """a simulated job under trsim-launch with the shim (and what else preload names) preloaded"""
    env = ["TRSHIM_DIR=" + traces, "TRSHIM_QUIET=1"] + ["%s=%s" % kv for kv in sorted((extra or {}).items())]
    cmd = [ti.LAUNCH] + opts + ["--quiet", "--", "env", "LD_PRELOAD=" + " ".join(preload)] + env + prog_args
    return run(cmd, env=clean_env(), timeout=timeout)


def files_below(d, suffix):
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs if f.startswith("trshim.") and
                  f.endswith(suffix))


def load(path):
    with open(path) as f:
        return json.load(f)


def bundle(inst, args, cwd):
    return run([inst.trshim, "bundle"] + args, env=clean_env(), cwd=cwd, timeout=300)


def tranalyze_options(inst):
    h = run([inst.tranalyze, "--help"]).stdout
    return [o for o in ("--html", "--timeline") if re.search(re.escape(o) + r"\b", h)]


class Bundle:
    """an archive written by trshim bundle, unpacked into dest"""

    def __init__(self, path, dest):
        self.path = path
        with tarfile.open(path, "r:gz") as tar:
            infos = tar.getmembers()
            self.names = [i.name for i in infos]
            self.sizes = {i.name: i.size for i in infos}
            self.top = self.names[0].split("/")[0] if self.names else ""
            check(all(i.isfile() and i.name.startswith(self.top + "/") and ".." not in i.name.split("/")
                      for i in infos), "%s: plain files inside one folder: %s" % (path, self.names))
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)
        self.root = os.path.join(dest, self.top)
        self.traces = os.path.join(self.root, "traces")
        self.rel = sorted(n[len(self.top) + 1:] for n in self.names)
        with open(os.path.join(self.root, "MANIFEST.txt")) as f:
            self.manifest = f.read()

    def member_files(self, suffix):
        return sorted(r for r in self.rel if r.startswith("traces/") and r.endswith(suffix))

    def manifest_line(self, rel):
        """the MANIFEST line of a member: (bytes, why)"""
        m = re.search(r"^  %s +(\d+)  (.*)$" % re.escape(rel), self.manifest, re.M)
        return (int(m.group(1)), m.group(2)) if m else (None, None)


def check_common(inst, out, b, r, folder, ntraces, nrings, job_args=()):
    """what every bundle must be: the summary line, the members and their MANIFEST lines, the reports
    (tranalyze on the same input, byte for byte)"""
    opts = tranalyze_options(inst)
    reports = ["report.txt", "report.md", "report.json"] + [{"--html": "report.html",
                                                             "--timeline": "timeline.json"}[o] for o in opts]
    m = SUMMARY.search(r.stdout)
    for n, word in ((nrings, "ring"), (ntraces, "trace")):       # "1 ring", "2 rings"
        check(re.search(r"\b%d %s%s\b" % (n, word, "" if n == 1 else "s"), r.stdout), "%d %s(s): %r" % (n, word, r.stdout))
    # the bundle's mode: the traces' (0600), whatever the umask
    check(stat.S_IMODE(os.stat(out).st_mode) == 0o600, "%s: mode %o, not 0600" % (out, stat.S_IMODE(os.stat(out).st_mode)))
    if check(m is not None, "the summary line: %r" % r.stdout):
        got = tuple(int(x) for x in m.groups()[1:6])
        check(got == (1 + len(reports) + ntraces + nrings, ntraces, nrings, len(reports), os.path.getsize(out)),
              "summary counts %s: %d traces, %d rings, reports %s, %d bytes" % (got, ntraces, nrings, reports,
                                                                                 os.path.getsize(out)))
        check(int(m.group(7)) == sum(b.sizes.values()), "uncompressed bytes %s == the members' %d" %
              (m.group(7), sum(b.sizes.values())))
    check(b.names[0] == b.top + "/MANIFEST.txt", "MANIFEST.txt first: %s" % b.names[:1])
    check(sorted(x for x in b.rel if not x.startswith("traces/")) == sorted(["MANIFEST.txt"] + reports),
          "the reports: %s" % b.rel)
    check(len(b.member_files(".json")) == ntraces and len(b.member_files(".ring")) == nrings and
          len(b.rel) == 1 + len(reports) + ntraces + nrings, "members: %s" % b.rel)
    for rel in b.rel:
        if rel != "MANIFEST.txt":
            size, why = b.manifest_line(rel)
            check(size == b.sizes[b.top + "/" + rel] and why, "MANIFEST line of %s: %s %s" % (rel, size, why))
    for opt, name in (("--html", "report.html"), ("--timeline", "timeline.json")):
        if opt not in opts:
            check("\n  %s: this tranalyze has no %s option\n" % (name, opt) in b.manifest,
                  "MANIFEST says why there is no %s" % name)
    if "--timeline" in opts:
        check(isinstance(load(os.path.join(b.root, "timeline.json")), (dict, list)), "timeline.json is JSON")
    if "--html" in opts:
        with open(os.path.join(b.root, "report.html")) as f:
            check("<html" in f.read(4096).lower(), "report.html is a page")
    for args, name in (([], "report.txt"), (["--markdown"], "report.md")):
        want = run([inst.tranalyze] + args + list(job_args) + [folder]).stdout
        with open(os.path.join(b.root, name)) as f:
            check(f.read() == want, "%s is tranalyze %s's output" % (name, " ".join(args)))
    want = json.loads(run([inst.tranalyze, "--json"] + list(job_args) + [folder]).stdout)
    check(load(os.path.join(b.root, "report.json")) == want, "report.json is tranalyze --json's output")


def strip_paths(res):
    """tranalyze --json without what names files (the bundle's are elsewhere) and counts them"""
    out = json.loads(json.dumps(res))
    out["job"].pop("files", None)
    out["job"].pop("other_jobs", None)
    out.pop("inputs", None)
    for r in out.get("ranks", []):
        r.pop("file", None)
        if isinstance(r.get("ring"), dict):
            r["ring"].pop("file", None)
    return out


def same_diagnosis(inst, folder, b, want_top, job_args=()):
    """tranalyze --json on the unpacked bundle: exactly the original's findings and ranks"""
    a = run([inst.tranalyze, "--json"] + list(job_args) + [folder])
    z = run([inst.tranalyze, "--json", b.traces])
    A, Z = json.loads(a.stdout), json.loads(z.stdout)
    check(a.returncode == z.returncode, "tranalyze exit status on the folder %d, on the bundle %d" %
          (a.returncode, z.returncode))
    check(A["findings"] == Z["findings"], "the same findings:\n%s\n%s" % (json.dumps(A["findings"])[:3000],
                                                                         json.dumps(Z["findings"])[:3000]))
    check(strip_paths(A) == strip_paths(Z), "the same analysis (ranks, comms, warnings) apart from file names")
    top = A["findings"][0] if A["findings"] else {}
    got = {k: top.get(k) for k in want_top or {}}
    check(want_top is None or got == want_top, "the diagnosis %s, expected %s" % (got, want_top))
    # tranalyze's notes on the files: the same on the bundle's as on the originals that were bundled
    bundled = set(os.path.basename(x) for x in b.rel)

    def notes(res, folder):
        return sorted((os.path.basename(n["file"]), n["problem"].replace(folder, "D"), n["skipped"])
                      for n in res.get("inputs", []) if os.path.basename(n.get("file") or "") in bundled)
    check(notes(A, folder) == notes(Z, b.traces), "the same notes on the files: %s, %s" % (notes(A, folder),
                                                                                           notes(Z, b.traces)))
    return A, Z


def check_compacted(orig, packed, full=True, blobs=True):
    """a compacted ring holds what the original holds, at most 2 MB (full: the original is a
    shim's ring file, ~50 MB; blobs: compare what ring.py reads of the blobs, which goes on past
    a damaged one where tranalyze stops)"""
    size = os.path.getsize(packed)
    check(size < RING_MAX, "%s: %d bytes, below %d" % (packed, size, RING_MAX))
    check(not full or os.path.getsize(orig) > 30 << 20, "the original %s is a full ring file (%d bytes)" %
          (orig, os.path.getsize(orig)))
    o, p = ringfmt.read_ring(orig), ringfmt.read_ring(packed)
    ho, hp = o["header"], p["header"]
    changed = ("capacity", "max_comms", "off_comms", "off_records", "off_blobs", "blob_bytes", "file_bytes")
    check(all(ho[k] == hp[k] for k in ho if k not in changed), "%s: the header's other fields kept" % packed)
    check(hp["file_bytes"] == size and hp["capacity"] == max(1, min(ho["head"], ho["capacity"])),
          "%s: file_bytes %d (size %d), capacity %d (head %d)" % (packed, hp["file_bytes"], size, hp["capacity"],
                                                                  ho["head"]))
    check(o["records"] and p["records"] == o["records"], "%s: the same %d records" % (packed, len(o["records"])))
    for k in ("comms",) + (("stacks", "modules", "pycodes", "pystacks", "configs", "nccl") if blobs else ()):
        check(p[k] == o[k], "%s: the same %s" % (packed, k))


# ---- killed: rank 3 exits early, the others are SIGKILLed --------------------------------

def test_killed(tmp):
    inst = ti.Installed(tmp)
    traces = os.path.join(tmp, "traces")
    r = launch(["-n", "4", "--timeout", "10", "--grace", "0", "--signal", "KILL"], [EARLY_EXIT], [inst.lib], traces,
               {"TRSHIM_KEEP_RING": "1", "TRSHIM_HANG_SEC": "2"})
    check(r.returncode == 124, "the job hangs and is killed (124): %d %s" % (r.returncode, r.stderr[-2000:]))
    jsons, rings = files_below(traces, ".json"), files_below(traces, ".ring")
    trs = {p: load(p) for p in jsons}
    ends = sorted((t["rank"], t["end"]["reason"]) for t in trs.values())
    if not check(ends == [(0, "hang"), (1, "hang"), (2, "hang"), (3, "exit")] and len(rings) == 4,
                 "the job: 4 traces (ranks 0-2 written by the hang watchdog, rank 3 at exit) %s, 4 rings %s" %
                 (ends, rings)):
        return
    rank_of_pid = {t["pid"]: t["rank"] for t in trs.values()}
    ring_rank = {p: rank_of_pid.get(ringfmt.read_ring(p)["header"]["pid"]) for p in rings}
    killed = sorted(os.path.basename(p) for p, k in ring_rank.items() if k in (0, 1, 2))
    exited = [p for p, k in ring_rank.items() if k == 3]
    out = os.path.join(tmp, "k.tar.gz")
    r = bundle(inst, [traces, "-o", out], tmp)
    check(r.returncode == 0, "bundle: exit %d %s" % (r.returncode, r.stderr))
    b = Bundle(out, os.path.join(tmp, "unpacked"))
    check_common(inst, out, b, r, traces, 4, 3)
    check(b.member_files(".json") == ["traces/" + os.path.basename(p) for p in jsons], "the 4 traces: %s" % b.rel)
    check(b.member_files(".ring") == ["traces/" + n for n in killed], "the rings of ranks 0-2: %s, expected %s" %
          (b.member_files(".ring"), killed))
    for p, k in sorted(ring_rank.items()):
        if k == 3:
            continue
        rel = "traces/" + os.path.basename(p)
        check_compacted(p, os.path.join(b.root, rel))
        why = b.manifest_line(rel)[1] or ""
        check(why.startswith("ring of rank %d: killed without a final trace write (SIGKILL" % k),
              "MANIFEST: why %s: %r" % (rel, why))
    for p in exited:
        check("  %s: ring of rank 3: exited, its JSON trace holds every call" % os.path.basename(p) in b.manifest,
              "MANIFEST names rank 3's ring as left out:\n%s" % b.manifest)
        check("left out %s: ring of rank 3: exited" % p in r.stderr, "rank 3's ring left out, said: %r" % r.stderr)
    same_diagnosis(inst, traces, b, {"kind": "missing", "seq": 7, "ranks": [3], "others": [0, 1, 2]})

    # the default name, in the working folder; never overwritten without --force
    job = next(iter(trs.values()))["job"]["id"]
    default = os.path.join(tmp, "trshim-report-%s.tar.gz" % re.sub(r"[^A-Za-z0-9_-]", "_", job))
    r = bundle(inst, [traces], tmp)
    check(r.returncode == 0 and os.path.isfile(default), "default output %s: %d %s" % (default, r.returncode,
                                                                                       r.stderr))
    before = os.stat(default)
    r = bundle(inst, [traces], tmp)
    check(r.returncode == 2 and r.stderr == "trshim: bundle: %s exists (--force overwrites it)\n" %
          os.path.basename(default),
          "an existing output is refused: %d %r" % (r.returncode, r.stderr))
    check(os.stat(default).st_mtime_ns == before.st_mtime_ns, "the refused output is untouched")
    r = bundle(inst, [traces, "-o", out, "--force"], tmp)
    check(r.returncode == 0, "--force overwrites: %d %r" % (r.returncode, r.stderr))
    check(not [f for f in os.listdir(tmp) if f.endswith(".part")], "no temporary file left: %s" % os.listdir(tmp))

    # rank 3's trace older than its ring (ring.next two calls back): the ring holds calls the trace does not
    (t3,) = [p for p, t in trs.items() if t["rank"] == 3]
    tr = trs[t3]
    tr["ring"]["next"] -= 2
    with open(t3, "w") as f:
        json.dump(tr, f)
    out2 = os.path.join(tmp, "k2.tar.gz")
    r = bundle(inst, [traces, "-o", out2], tmp)
    check(r.returncode == 0, "bundle after the change: exit %d %s" % (r.returncode, r.stderr))
    b2 = Bundle(out2, os.path.join(tmp, "unpacked2"))
    check_common(inst, out2, b2, r, traces, 4, 4)
    rel = "traces/" + os.path.basename(exited[0])
    check(b2.member_files(".ring") == sorted(["traces/" + n for n in killed] + [rel]), "4 rings: %s" % b2.rel)
    check((b2.manifest_line(rel)[1] or "").startswith("ring of rank 3: 2 call(s) after its last trace write;"),
          "MANIFEST: rank 3's ring: %r" % (b2.manifest_line(rel)[1],))
    check_compacted(exited[0], os.path.join(b2.root, rel))
    A, Z = same_diagnosis(inst, traces, b2, {"kind": "missing", "seq": 7, "ranks": [3]})
    check([x["ring"]["from_ring"] for x in Z["ranks"] if x["rank"] == 3] == [True],
          "rank 3 read from its compacted ring: %s" % [x.get("ring") for x in Z["ranks"]])


# ---- clean: two clean jobs, rings kept --------------------------------------------------

def test_clean(tmp):
    inst = ti.Installed(tmp)
    traces = os.path.join(tmp, "traces")
    for job in ("older", "newer"):
        r = launch(["-n", "4", "--timeout", "90"], [ti.TRAIN_DP, "6", "32"], [inst.lib, ti.TRSIM_LIB], traces,
                   {"TRSHIM_KEEP_RING": "1", "TRSHIM_JOB_ID": job})
        check(r.returncode == 0, "clean job %s: exit %d %s" % (job, r.returncode, r.stderr[-2000:]))
    jsons, rings = files_below(traces, ".json"), files_below(traces, ".ring")
    states = sorted(ringfmt.read_ring(p)["header"]["state_name"] for p in rings)
    if not check(len(jsons) == 8 and states == ["exited"] * 8, "8 traces %s, 8 exited rings %s" % (jsons, states)):
        return
    for job, other, args in (("newer", "older", []), ("older", "newer", ["--job", "older"])):
        out = os.path.join(tmp, "%s.tar.gz" % job)
        r = bundle(inst, [traces, "-o", out] + args, tmp)
        check(r.returncode == 0, "bundle %s: exit %d %s" % (args, r.returncode, r.stderr))
        b = Bundle(out, os.path.join(tmp, "un-" + job))
        check(b.top == "trshim-report-" + job, "the archive's folder: %s" % b.top)
        check_common(inst, out, b, r, traces, 4, 0, args)
        mine = ["traces/" + os.path.basename(p) for p in jsons if os.path.basename(p).startswith("trshim.%s." % job)]
        check(len(mine) == 4 and b.member_files(".json") == mine, "%s: its 4 traces: %s" % (job, b.rel))
        check(b.member_files(".ring") == [], "%s: no ring: %s" % (job, b.rel))
        left = re.findall(r"^  (\S+): (.*)$", b.manifest.split("Found below the folder and left out:")[-1], re.M)
        want = sorted([(os.path.basename(p), "a trace of job %s" % other) for p in jsons
                       if os.path.basename(p).startswith("trshim.%s." % other)] +
                      [(os.path.basename(p), "a ring of job %s" % other) for p in rings
                       if os.path.basename(p).startswith("trshim.%s." % other)])
        got = sorted(x for x in left if not x[1].startswith("ring of rank"))
        check(got == want, "%s: the other job's files left out: %s, expected %s" % (job, got, want))
        exited = sorted(x[1] for x in left if x[1].startswith("ring of rank"))
        check(exited == ["ring of rank %d: exited, its JSON trace holds every call" % k for k in range(4)],
              "%s: its own exited rings left out: %s" % (job, exited))
        A, _ = same_diagnosis(inst, traces, b, {"kind": None}, args)
        check(A["status"] == "clean" and A["job"]["id"] == job, "%s: clean, job %s" % (job, A["job"]))


# ---- links: what is left out, and what stops the bundle -----------------------------------

def test_links(tmp):
    inst = ti.Installed(tmp)
    traces = os.path.join(tmp, "traces")
    r = launch(["-n", "2", "--timeout", "90"], [ti.TRAIN_DP, "6", "32"], [inst.lib, ti.TRSIM_LIB], traces,
               {"TRSHIM_JOB_ID": "links", "TRSHIM_KEEP_RING": "1"})
    check(r.returncode == 0, "clean job: exit %d %s" % (r.returncode, r.stderr[-2000:]))
    jsons, rings = files_below(traces, ".json"), files_below(traces, ".ring")
    if not check(len(jsons) == 2 and len(rings) == 2, "2 traces and 2 rings: %s %s" % (jsons, rings)):
        return
    outside = os.path.join(tmp, "outside")
    os.makedirs(outside)
    shutil.copy(jsons[0], os.path.join(outside, "trshim.links.r7.elsewhere.1.json"))
    link = os.path.join(traces, "trshim.links.r5.elsewhere.1.json")
    os.symlink(os.path.join(outside, "trshim.links.r7.elsewhere.1.json"), link)
    dlink = os.path.join(traces, "more")
    os.symlink(outside, dlink)
    rlink = os.path.join(traces, "trshim.links.elsewhere.2.ring")
    os.symlink(rings[0], rlink)
    fifo = os.path.join(traces, "trshim.links.r6.elsewhere.3.json")
    os.mkfifo(fifo)
    with open(os.path.join(traces, "notes.txt"), "w") as f:
        f.write("not a trace\n")
    out = os.path.join(tmp, "l.tar.gz")
    r = bundle(inst, [traces, "-o", out], tmp)
    check(r.returncode == 0, "bundle with links: exit %d %s" % (r.returncode, r.stderr))
    b = Bundle(out, os.path.join(tmp, "un"))
    check_common(inst, out, b, r, traces, 2, 0)
    check(b.member_files("") == ["traces/" + os.path.basename(p) for p in jsons], "only the 2 traces: %s" % b.rel)
    for p, why in ((link, "a symbolic link: not followed"), (dlink, "a symbolic link: not followed"),
                   (rlink, "a symbolic link: not followed"), (fifo, "not a regular file")):
        check("trshim: bundle: left out %s: %s\n" % (p, why) in r.stderr, "said: %s: %s (%r)" % (p, why, r.stderr))
        check("  %s: %s\n" % (os.path.basename(p), why) in b.manifest, "MANIFEST: %s: %s" % (p, why))
    check("notes.txt" not in b.manifest and "notes.txt" not in r.stderr, "other files are not even named")
    same_diagnosis(inst, traces, b, {"kind": None})

    def refused(path, what):
        o = os.path.join(tmp, "refused.tar.gz")
        r = bundle(inst, [traces, "-o", o], tmp)
        check(r.returncode == 2 and r.stderr.startswith("trshim: bundle: %s: %s" % (path, what)),
              "exit 2 naming %s (%s): %d %r" % (path, what, r.returncode, r.stderr))
        check(not os.path.exists(o) and not [f for f in os.listdir(tmp) if f.endswith(".part")],
              "nothing written after %s" % what)

    # damaged ring headers: a header never completed, no magic, areas that do not fit, a short file
    with open(rings[0], "rb") as f:
        header = f.read(4096)
    bad = os.path.join(traces, "sub", "trshim.links.elsewhere.9.ring")
    os.makedirs(os.path.dirname(bad))
    h = ringfmt.parse_header(header)
    for data, what in ((b"\0" * 4096, "damaged ring header: never completed"),
                       (b"NOTARING" + header[8:], "damaged ring header: no TRSHRING magic"),
                       (header[:24] + (0).to_bytes(8, "little") + header[32:],
                        "damaged ring header: the areas do not fit together (capacity 0, max_comms %d" %
                        h["max_comms"]),
                       (header[:100], "damaged ring file: 100 bytes, shorter than a ring header")):
        with open(bad, "wb") as f:
            f.write(data)
        refused(bad, what)
    os.unlink(bad)
    # a damaged trace
    broken = os.path.join(traces, "sub", "trshim.links.r8.elsewhere.4.json")
    with open(broken, "w") as f:
        f.write('{"format": "trshim-trace", "version": 1, "job": {"id": "links"')
    refused(broken, "not a readable trshim trace")
    os.unlink(broken)
    # an unreadable trace (root reads everything: only as another user)
    if os.geteuid() != 0:
        os.chmod(jsons[0], 0)
        refused(jsons[0], "cannot open")
        os.chmod(jsons[0], 0o600)
    r = bundle(inst, [traces, "-o", os.path.join(tmp, "again.tar.gz")], tmp)
    check(r.returncode == 0, "the folder bundles again once they are gone: %d %r" % (r.returncode, r.stderr))


# ---- size: the README's example ---------------------------------------------------------

def test_size(tmp):
    inst = ti.Installed(tmp)
    traces = os.path.join(tmp, "traces")
    r = launch(["-n", "4", "--timeout", "10", "--grace", "5"], [ti.TRAIN_DP, "40", "256"], [inst.lib, ti.TRSIM_LIB],
               traces, {"TRAIN_DP_PLANT": "log_metrics"})
    check(r.returncode == 124, "the example job hangs and is ended (124): %d %s" % (r.returncode, r.stderr[-2000:]))
    jsons, rings = files_below(traces, ".json"), files_below(traces, ".ring")
    apparent = sum(os.path.getsize(p) for p in jsons + rings)
    out = os.path.join(tmp, "example.tar.gz")
    r = bundle(inst, [traces, "-o", out], tmp)
    check(r.returncode == 0, "bundle: exit %d %s" % (r.returncode, r.stderr))
    size = os.path.getsize(out)
    print("README example: %d traces, %d rings, %d bytes apparent -> bundle %d bytes" % (len(jsons), len(rings),
                                                                                        apparent, size))
    check(size < 1000 * 1000, "the example's bundle is below 1 MB: %d bytes" % size)
    b = Bundle(out, os.path.join(tmp, "un"))
    check_common(inst, out, b, r, traces, 4, 4)
    for p in rings:
        rel = "traces/" + os.path.basename(p)
        check_compacted(p, os.path.join(b.root, rel))
        check(re.match(r"ring of rank \d: ended by SIGTERM \(15\); compacted from ", b.manifest_line(rel)[1] or ""),
              "MANIFEST: %s: %r" % (rel, b.manifest_line(rel)[1]))
    same_diagnosis(inst, traces, b, {"kind": "divergence", "seq": 12, "ranks": [0], "others": [1, 2, 3]})


# ---- synthetic: the analyzer's ring scenarios (tests/analyzer/gen_ring.py) -----------------

def test_synthetic(tmp):
    """every scenario of gen_ring.py (wrapped rings, torn records, damaged Python blobs, several
    devices per process, grown communicators, rings of another job...): bundled, the same analysis"""
    inst = ti.Installed(tmp)
    gen = os.path.join(ti.SOURCE, "tests", "analyzer", "gen_ring.py")
    names = run([sys.executable, gen, "--list"]).stdout.split()
    check(len(names) >= 20 and "ring_wrapped" in names and "ring_torn" in names, "gen_ring.py scenarios: %s" % names)
    for name in names + ["damaged_blob"]:
        folder = os.path.join(tmp, name)
        r = run([sys.executable, gen, "ring_hang" if name == "damaged_blob" else name, folder])
        if not check(r.returncode == 0, "gen_ring.py %s: %s" % (name, r.stderr[-1000:])):
            continue
        if name == "damaged_blob":
            # ring_hang with a blob of rank 0 damaged (its size not a multiple of 8): the blob area
            # ends there, with a note, in the bundle as in the folder
            path = files_below(folder, ".ring")[0]
            with open(path, "rb") as f:
                data = bytearray(f.read())
            h = ringfmt.parse_header(data)
            off = h["off_blobs"]
            for _ in range(2):
                off += 8 + struct.unpack_from("<II", data, off)[1]
            struct.pack_into("<I", data, off + 4, 12)
            with open(path, "wb") as f:
                f.write(data)
            notes = json.loads(run([inst.tranalyze, "--json", folder]).stdout)["inputs"]
            check(any(n["file"] == path and "damaged blob at byte" in n["problem"] for n in notes),
                  "the damaged blob is noted: %s" % notes)
        out = os.path.join(tmp, name + ".tar.gz")
        r = bundle(inst, [folder, "-o", out], tmp)
        if not check(r.returncode == 0, "%s: bundle: exit %d %s" % (name, r.returncode, r.stderr)):
            continue
        b = Bundle(out, os.path.join(tmp, "un-" + name))
        check(not any(x.endswith("expected.json") for x in b.rel), "%s: other files left out" % name)
        job = json.loads(run([inst.tranalyze, "--json", folder]).stdout)["job"]["id"]
        for rel in b.member_files(".json"):
            check(load(os.path.join(folder, rel[len("traces/"):]))["job"]["id"] == job, "%s: %s of job %s" %
                  (name, rel, job))
        for rel in b.member_files(".ring"):
            check_compacted(os.path.join(folder, rel[len("traces/"):]), os.path.join(b.root, rel), full=False,
                            blobs=name != "damaged_blob")
        same_diagnosis(inst, folder, b, None)
    print("%d scenarios bundled" % (len(names) + 1))


TESTS = {"killed": test_killed, "clean": test_clean, "links": test_links, "size": test_size,
         "synthetic": test_synthetic}


def main():
    import tempfile
    name = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="trshim-bundle-") as tmp:
        TESTS[name](tmp)
    if ti.failures:
        print("%d check(s) failed" % len(ti.failures))
        return 1
    print("install-bundle-%s: ok" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
