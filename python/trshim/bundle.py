"""trshim bundle: one .tar.gz to attach to a bug report: the JSON traces of the job tranalyze
analyses, the ring files that hold what its traces do not (compacted: trshim.ringfile),
tranalyze's reports (text, --markdown, --json, --html and --timeline where this tranalyze has
them) and MANIFEST.txt, which says why each member is there and what was left out."""
import io
import json
import os
import re
import signal
import socket
import subprocess
import tarfile
import tempfile
import time

from trshim.messages import plural, say
from trshim.ringfile import (RING_EXITED, RING_RUNNING, RING_SIGNALED, FileError, compact_ring, open_plain,
                             ring_header, ring_job)
from trshim.where import tranalyze_path, version

TRACE_PREFIX = "trshim."
REPORTS = ("report.html", "timeline.json")              # made when this tranalyze has --html / --timeline


class BundleError(FileError):
    """a problem that stops the bundle: the message names the file"""


def _signame(n):
    try:
        return "%s (%d)" % (signal.Signals(n).name, n)
    except ValueError:
        return "signal %d" % n


def _fmt_bytes(n):
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return "%.1f %s" % (n / k, unit)
    return "%d bytes" % n


def _ranks_text(ranks):
    ranks = sorted(set(r for r in ranks if isinstance(r, int) and r >= 0))
    if not ranks:
        return "rank ?"
    return "rank %d" % ranks[0] if len(ranks) == 1 else "ranks %s" % ", ".join(map(str, ranks))


def find_trace_files(top, notes):
    """(JSON traces, ring files) below top as tranalyze finds them (analyzer/load/load.c walk): names
    starting with '.' skipped, 16 levels; a symbolic link is never followed (noted)"""
    traces, rings = [], []

    def walk(d, depth):
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            raise BundleError("%s: cannot read the folder: %s" % (d, e.strerror))
        for e in entries:
            if e.name.startswith("."):
                continue
            n = e.name
            trace = n.startswith(TRACE_PREFIX) and len(n) > 12 and n.endswith(".json")
            ring = n.startswith(TRACE_PREFIX) and len(n) > len(TRACE_PREFIX) + 5 and n.endswith(".ring")
            if e.is_symlink():
                notes.append((e.path, "a symbolic link: not followed"))
            elif n.startswith(TRACE_PREFIX) and n.endswith(".write-failed"):
                notes.append((e.path, "a marker of a failed trace write (the reports say what it tells)"))
            elif e.is_dir(follow_symlinks=False):
                if depth < 16:
                    walk(e.path, depth + 1)
            elif trace or ring:
                if e.is_file(follow_symlinks=False):
                    (traces if trace else rings).append(e.path)
                else:
                    notes.append((e.path, "not a regular file"))
    walk(top, 0)
    return traces, rings


def read_trace(path):
    """what the bundle needs of a JSON trace"""
    fd, st = open_plain(path)
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BundleError("%s: cannot read: %s" % (path, e.strerror))
    try:
        tr = json.loads(data.decode("utf-8"))
        if not isinstance(tr, dict) or tr.get("format") != "trshim-trace":
            raise ValueError("no \"format\": \"trshim-trace\"")
        ring = tr.get("ring") if isinstance(tr.get("ring"), dict) else {}
        end = tr.get("end") if isinstance(tr.get("end"), dict) else {}
        nxt = ring.get("next")
        return {"path": path, "job": str((tr.get("job") or {}).get("id")), "rank": tr.get("rank"),
                "host": str(tr.get("host")), "pid": tr.get("pid"), "start": float(tr.get("start_time") or 0),
                "next": nxt if isinstance(nxt, int) else -1, "end": end.get("reason"), "signal": end.get("signal"),
                "calls": calls_count(tr.get("calls")), "size": st.st_size}
    except (ValueError, TypeError, AttributeError) as e:     # UnicodeDecodeError is a ValueError
        raise BundleError("%s: not a readable trshim trace: %s" % (path, e))


def calls_count(calls):
    """the calls a trace holds: version 2's "rows" of its packed object, version 1's array's length"""
    if isinstance(calls, dict):
        n = calls.get("rows")
        return n if type(n) is int and n >= 0 else 0
    return len(calls) if isinstance(calls, list) else 0


def same_process(t, h):
    """a JSON trace and a ring of one process (analyzer/load/ring/ring_trace.c same_process)"""
    host = t["host"] == h["host"] or (len(h["host"]) >= 63 and t["host"].startswith(h["host"]))
    return host and t["pid"] == h["pid"] and abs(t["start"] - h["start_realtime"]) < 1e-6


def run_tranalyze(ta, args, timeout=900):
    """(exit status, stdout bytes, stderr text)"""
    try:
        r = subprocess.run([ta] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        raise BundleError("%s: %s" % (ta, e))
    return r.returncode, r.stdout, r.stderr.decode("utf-8", "replace")


def process_alive(h):
    """the ring's process still runs here (its pid exists and started before the ring: tranalyze's
    still_alive, analyzer/load/ring/ring.c)"""
    if h["host"] != socket.gethostname()[:63] or h["pid"] <= 0:
        return False
    try:
        os.kill(h["pid"], 0)
    except PermissionError:
        pass
    except OSError:
        return False
    try:
        with open("/proc/%d/stat" % h["pid"]) as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        return ticks / float(os.sysconf("SC_CLK_TCK")) <= h["start_mono_ns"] / 1e9 + 2.0
    except (OSError, ValueError, IndexError):
        return True


def select_rings(ring_paths, traces, mine, job, in_report, notes):
    """the rings whose process's JSON traces do not hold its last calls: [(path, header, label, why)]"""
    out, by_pid, ours = [], {}, set(id(t) for t in mine)
    for t in traces:
        by_pid.setdefault(t["pid"], []).append(t)
    for p in ring_paths:
        fd, st = open_plain(p)
        try:
            h = ring_header(p, fd, st.st_size)
        finally:
            os.close(fd)
        paired = [t for t in by_pid.get(h["pid"], []) if same_process(t, h)]
        rjob = paired[0]["job"] if paired else ring_job(h)
        if not any(id(t) in ours for t in paired) and not (not paired and rjob == job) and \
                os.path.realpath(p) not in in_report:
            notes.append((p, "a ring of job %s" % rjob))
            continue
        ranks = [t["rank"] for t in paired] or \
            ([h["env_rank"]] if h["env_rank"] >= 0 else [s["rank"] for s in h["slots"] if s["valid"] == 1][:1])
        label = "ring of %s" % _ranks_text(ranks)
        why = []
        if h["state"] == RING_RUNNING and process_alive(h):
            why.append("its process still runs (a live look: the ring holds its calls so far)")
        elif h["state"] == RING_RUNNING:
            why.append("killed without a final trace write (SIGKILL, the OOM killer...)")
        elif h["state"] == RING_SIGNALED:
            why.append("ended by %s" % _signame(h["signo"]) if h["signo"] > 0 else "ended by a signal")
        elif h["state"] != RING_EXITED:
            why.append("process state %d unknown" % h["state"])
        nexts = [t["next"] for t in paired]
        if not paired:
            why.append("no JSON trace: its %d call(s) are only in the ring" % h["head"])
        elif min(nexts) < 0:
            why.append("its JSON trace does not say how far the ring was (no ring.next)")
        elif h["head"] > min(nexts):
            why.append("%d call(s) after its last trace write" % (h["head"] - min(nexts)))
        if why:
            out.append((p, h, label, why))
        else:
            notes.append((p, "%s: exited, its JSON trace holds every call" % label))
    return out


def cmd_bundle(args):
    try:
        return bundle(args)
    except FileError as e:           # (a BundleError, or a ring file's)
        say("bundle: %s" % e)
        return 2


def bundle(args):
    top = args.traces_dir
    if not os.path.isdir(top):
        raise BundleError("%s: not a folder" % top)
    if args.output and os.path.isdir(args.output):
        raise BundleError("%s: a folder (-o names the file to write)" % args.output)
    if args.output and os.path.lexists(args.output) and not args.force:
        raise BundleError("%s exists (--force overwrites it)" % args.output)
    ta = tranalyze_path()
    if not ta:
        raise BundleError("tranalyze not found beside trshim nor in PATH (TRSHIM_TRANALYZE=PATH names it)")
    notes = []                                  # (path, why): found and left out
    trace_paths, ring_paths = find_trace_files(top, notes)
    if not trace_paths and not ring_paths:
        raise BundleError("%s: no trace files (trshim.*.json, trshim.*.ring) below this folder" % top)
    traces = [read_trace(p) for p in trace_paths]
    job_args = ["--job", args.job] if args.job else []
    rc, out, err = run_tranalyze(ta, ["--json"] + job_args + [top])
    try:
        report = json.loads(out.decode("utf-8"))
        job = report["job"]["id"]
    except (ValueError, KeyError, TypeError):
        report, job = None, None
    if rc not in (0, 1) or not isinstance(job, str):
        last = err.strip().splitlines()
        raise BundleError("tranalyze could not analyse %s (exit %d): %s" % (top, rc, last[-1] if last else "no answer"))
    # the job's traces: those of its id, and any tranalyze placed in it (a grown communicator's)
    in_report = set()
    for r in report.get("ranks") or []:
        for f in (r.get("file"), (r.get("ring") or {}).get("file")):
            if f:
                in_report.add(os.path.realpath(f))
    mine = [t for t in traces if t["job"] == job or os.path.realpath(t["path"]) in in_report]
    notes += [(t["path"], "a trace of job %s" % t["job"]) for t in traces
              if not (t["job"] == job or os.path.realpath(t["path"]) in in_report)]
    rings = select_rings(ring_paths, traces, mine, job, in_report, notes)
    return write_bundle(args, top, ta, job, (report, out), mine, rings, notes, job_args)


def tar_add(tar, arcname, src):
    """src: bytes, or the path of a file of the folder (read through a descriptor that follows no link);
    the bytes added"""
    info = tarfile.TarInfo(arcname)
    info.mode, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, "", ""
    if isinstance(src, bytes):
        info.size, info.mtime = len(src), int(time.time())
        tar.addfile(info, io.BytesIO(src))
        return info.size
    fd, st = open_plain(src)
    with os.fdopen(fd, "rb") as f:
        info.size, info.mtime = st.st_size, int(st.st_mtime)
        tar.addfile(info, f)
    return info.size


def manifest_text(top, ta, job, report, members, notes):
    findings = report.get("findings") or []
    lines = ["trshim bug report bundle: job %s" % job,
             "made by trshim %s bundle on %s at %s from %s" % (version(), socket.gethostname(),
                                                               time.strftime("%Y-%m-%d %H:%M:%S %z"),
                                                               os.path.abspath(top)),
             "tranalyze: %s: %s, %d finding(s)%s" % (ta, report.get("status"), len(findings),
                                                   ", the first: %s" % findings[0].get("kind") if findings else ""),
             "", "Members (in the folder trshim-report-%s/; bytes; why each is here):" % safe_job(job)]
    width = max(len(a) for a, _, _ in members)
    lines.append("  %-*s %10s  %s" % (width, "MANIFEST.txt", "-", "this list"))
    for arc, src, why in members:
        size = len(src) if isinstance(src, bytes) else os.path.getsize(src)
        lines.append("  %-*s %10d  %s" % (width, arc, size, why))
    for title, part in (("Found below the folder and left out:", [n for n in notes if n[0] not in REPORTS]),
                        ("Reports not made:", [n for n in notes if n[0] in REPORTS])):
        if part:
            lines += ["", title] + ["  %s: %s" % (os.path.relpath(p, top) if p not in REPORTS else p, why)
                                    for p, why in part]
    lines += ["", "Ring files are compacted to what a reader uses (docs/trace-format.md, \"Compacted ring files\"):",
              "tranalyze reads them as it read the originals. To analyse the bundle again:",
              "  tar xzf FILE && tranalyze trshim-report-%s/traces" % safe_job(job), ""]
    return "\n".join(lines)


def safe_job(job):
    """the job as the shim writes it in file names: [A-Za-z0-9_-], 48 characters at most"""
    return re.sub(r"[^A-Za-z0-9_-]", "_", job)[:48] or "job"


def write_bundle(args, top, ta, job, reports, traces, rings, notes, job_args):
    report, report_raw = reports
    name = "trshim-report-" + safe_job(job)
    output = args.output or name + ".tar.gz"
    if os.path.lexists(output) and not args.force:
        raise BundleError("%s exists (--force overwrites it)" % output)
    members = []                                # (name in the archive, bytes or a file, why)
    with tempfile.TemporaryDirectory(prefix="trshim-bundle.") as tmp:
        # the text report, with the files of --html and --timeline where this tranalyze has them
        helptext = run_tranalyze(ta, ["--help"], timeout=60)[1]
        extra, files = [], []
        for opt, fname, what in (("--html", "report.html", "one page: the diagnosis, a timeline, memory"),
                                 ("--timeline", "timeline.json", "trace events for ui.perfetto.dev")):
            if re.search(re.escape(opt.encode()) + rb"\b", helptext):
                extra += [opt, os.path.join(tmp, fname)]
                files.append((opt, fname, what))
            else:
                notes.append((fname, "this tranalyze has no %s option" % opt))
        rc, out, err = run_tranalyze(ta, extra + job_args + [top])
        members.append(("report.txt", out, "tranalyze: the diagnosis (exit %d)" % rc))
        rc, out, _ = run_tranalyze(ta, ["--markdown"] + job_args + [top])
        members.append(("report.md", out, "tranalyze --markdown: the summary to paste into the bug report"))
        members.append(("report.json", report_raw, "tranalyze --json (docs/analysis-format.md)"))
        for opt, fname, what in files:
            if os.path.isfile(os.path.join(tmp, fname)):
                members.append((fname, os.path.join(tmp, fname), "tranalyze %s: %s" % (opt, what)))
            else:
                notes.append((fname, "tranalyze %s wrote nothing: %s" % (opt, err.strip()[-300:])))
        for t in sorted(traces, key=lambda t: (t["rank"] if isinstance(t["rank"], int) else 1 << 30, t["path"])):
            sig = ", %s" % _signame(t["signal"]) if isinstance(t["signal"], int) and t["signal"] > 0 else ""
            members.append(("traces/" + os.path.relpath(t["path"], top), t["path"], "JSON trace of %s: %d calls, "
                            "written at %s%s" % (_ranks_text([t["rank"]]), t["calls"], t["end"] or "?", sig)))
        for i, (p, h, label, why) in enumerate(rings):
            c = os.path.join(tmp, "ring.%d" % i)
            fd, st = open_plain(p)
            try:
                h = ring_header(p, fd, st.st_size)     # again: a live process's ring changes
                got = compact_ring(p, fd, h, c)
            finally:
                os.close(fd)
            os.utime(c, (st.st_atime, st.st_mtime))
            cut = "" if h["size"] >= h["file_bytes"] else "; truncated to %d of %d bytes: the rest reads as zeros" % (
                h["size"], h["file_bytes"])
            members.append(("traces/" + os.path.relpath(p, top), c, "%s: %s; compacted from %s (apparent) to %d "
                            "records, %d communicator slot(s), %d bytes of stacks and modules%s" %
                            (label, ", ".join(why), _fmt_bytes(h["size"]), got["records"], got["comms"],
                             got["blobs"], cut)))
        members.insert(0, ("MANIFEST.txt", manifest_text(top, ta, job, report, members, notes).encode(), ""))
        try:
            fd, part = tempfile.mkstemp(prefix=".%s." % os.path.basename(output), suffix=".part",
                                        dir=os.path.dirname(os.path.abspath(output)))
        except OSError as e:
            raise BundleError("%s: cannot write: %s" % (output, e.strerror))
        total = 0
        try:
            with os.fdopen(fd, "wb") as raw:
                with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                    for arc, src, _ in members:
                        total += tar_add(tar, name + "/" + arc, src)
            os.chmod(part, 0o600)      # as the traces it holds (mkstemp's mode, whatever the umask)
            if os.path.lexists(output) and not args.force:
                raise BundleError("%s exists (--force overwrites it)" % output)
            os.replace(part, output)
        except OSError as e:
            raise BundleError("%s: cannot write: %s" % (output, e.strerror))
        finally:
            if os.path.exists(part):
                os.unlink(part)
    for path, why in notes:
        say("bundle: %s %s: %s" % ("no" if path in REPORTS else "left out", path, why))
    nreports = len(members) - 1 - len(traces) - len(rings)
    print("trshim: wrote %s: %s (%s, %s, %s, MANIFEST.txt), %d bytes (%d uncompressed)"
          % (output, plural(len(members), "member"), plural(len(traces), "trace"), plural(len(rings), "ring"),
             plural(nreports, "report"), os.path.getsize(output), total))
    return 0
