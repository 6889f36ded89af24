#!/usr/bin/env python3
"""Reports that cannot be written whole are said, never lost silently
(issue 33, item 6): one line on stderr naming the output and errno's text,
and exit status 2 (docs/analysis-format.md, "Exit status").

    check_lost_output.py CASE TRANALYZE GEN_TRACES WORKDIR

Cases (gen_traces.py's extra_collective: a divergence, status 1 when written):
  closed    standard output closed (`tranalyze DIR >&-`), for text, --json,
            --markdown and --anonymize: "... standard output: Bad file
            descriptor", status 2
  full      standard output /dev/full, the same formats, --help, and --json
            of a folder with nothing usable: "No space left on device", 2
  pipe      a reader gone before the first byte, and one that stops after 10
            bytes of a 700 KB --json (`tranalyze --json DIR | head -c 10`):
            "Broken pipe", status 2 (SIGPIPE is ignored: never a death by
            signal), and the --html file asked for is still written
  files     --reports PREFIX, --html FILE, --timeline FILE past RLIMIT_FSIZE
            (SIGXFSZ ignored): each file named with "File too large", none
            left behind (nor its temporary), standard output whole, status 2
  watch     tranalyze --watch on the rings of a job whose ranks are gone, its
            report files past RLIMIT_FSIZE: the files named, status 2
"""
import glob
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from checks import Failure, check, eq, run_case  # noqa: E402

FORMATS = [("text", []), ("--json", ["--json"]), ("--markdown", ["--markdown"]), ("--anonymize", ["--anonymize"])]


class Case:
    def __init__(self, workdir):
        os.makedirs(workdir, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="lost-", dir=workdir)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def gen(c, gen_traces, scenario="extra_collective", *extra):
    out = os.path.join(c.tmp, scenario if not extra else "bench")
    subprocess.run([sys.executable, gen_traces, scenario, out] + list(extra), check=True, capture_output=True)
    return out


def message(what):
    return "tranalyze: cannot write the report to standard output: %s\n" % what


def fsize_limit(n):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)       # (kept across exec: the write fails with EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return pre


def case_closed(c, ta, gen_traces, *_):
    d = gen(c, gen_traces)
    for what, args in FORMATS:
        p = subprocess.run(["bash", "-c", 'exec "$0" "$@" >&-', ta] + args + [d], capture_output=True, timeout=120)
        eq((p.returncode, p.stderr.decode()), (2, message("Bad file descriptor")), what + " to a closed stdout")
    # the files asked for are still written, and never in the place of the closed descriptor
    page = os.path.join(c.tmp, "p.html")
    p = subprocess.run(["bash", "-c", 'exec "$0" "$@" >&-', ta, "--html", page, d], capture_output=True, timeout=120)
    eq((p.returncode, p.stderr.decode()), (2, message("Bad file descriptor")), "--html, closed stdout")
    with open(page) as f:
        page_text = f.read()
    check(page_text.startswith("<!DOCTYPE html>") and page_text.endswith("</html>\n"), "the page is not whole")


def case_full(c, ta, gen_traces, *_):
    d = gen(c, gen_traces)
    for what, args in FORMATS + [("--help", ["--help"]), ("--version", ["--version"])]:
        with open("/dev/full", "w") as full:
            p = subprocess.run([ta] + args + ([] if args in (["--help"], ["--version"]) else [d]), stdout=full,
                               stderr=subprocess.PIPE, timeout=120)
        eq((p.returncode, p.stderr.decode()), (2, message("No space left on device")), what + " to /dev/full")
    # nothing usable: status 2 either way, and the lost document said
    empty = os.path.join(c.tmp, "empty")
    os.makedirs(empty)
    with open(os.path.join(empty, "trshim.x.r0.h.1.json"), "w") as f:
        f.write("{")
    with open("/dev/full", "w") as full:
        p = subprocess.run([ta, "--json", empty], stdout=full, stderr=subprocess.PIPE, timeout=120)
    eq((p.returncode, p.stderr.decode()), (2, message("No space left on device")), "--json of nothing usable")
    # written whole: no message, the usual status
    p = subprocess.run([ta, d], capture_output=True, timeout=120)
    eq((p.returncode, p.stderr), (1, b""), "to a pipe read whole")


def case_pipe(c, ta, gen_traces, *_):
    d = gen(c, gen_traces)
    page = os.path.join(c.tmp, "p.html")
    r, w = os.pipe()
    os.close(r)                          # the reader is gone before the first byte
    p = subprocess.run([ta, "--html", page, d], stdout=w, stderr=subprocess.PIPE, timeout=120)
    os.close(w)
    eq((p.returncode, p.stderr.decode()), (2, message("Broken pipe")), "a reader gone")
    check(os.path.getsize(page) > 1000, "--html not written after the pipe broke")
    # a reader that stops after 10 bytes of a document larger than any pipe's buffer
    big = gen(c, gen_traces, "bench", "--ranks", "1024", "--records", "40")
    p = subprocess.run(["bash", "-c", '"$0" --json "$1" | head -c 10 >/dev/null; echo "${PIPESTATUS[0]}"', ta, big],
                       capture_output=True, timeout=300)
    whole = subprocess.run([ta, "--json", big], capture_output=True, timeout=300)
    check(len(whole.stdout) > 512 << 10, "the document is only %d bytes" % len(whole.stdout))   # (a pipe holds 64 KiB)
    eq((p.stdout.decode(), p.stderr.decode()), ("2\n", message("Broken pipe")), "| head -c 10")


def case_files(c, ta, gen_traces, *_):
    d = gen(c, gen_traces)
    whole = subprocess.run([ta, d], capture_output=True, timeout=120)
    out = os.path.join(c.tmp, "out")
    os.makedirs(out)
    prefix = os.path.join(out, "rep")
    page, tl = os.path.join(out, "p.html"), os.path.join(out, "t.json")
    p = subprocess.run([ta, "--reports", prefix, "--html", page, "--timeline", tl, d], capture_output=True,
                       timeout=120, preexec_fn=fsize_limit(200))
    eq(p.returncode, 2, "status")
    eq(p.stderr.decode().splitlines(), [
        "tranalyze: --html %s: could not be written whole: File too large" % page,
        "tranalyze: --timeline %s: could not be written whole: File too large" % tl,
        "tranalyze: --reports: cannot write %s.txt: File too large" % prefix,
        "tranalyze: --reports: cannot write %s.json: File too large" % prefix,
        "tranalyze: --reports: cannot write %s.md: File too large" % prefix], "stderr")
    eq(sorted(os.listdir(out)), [], "files left behind")
    eq(p.stdout, whole.stdout, "standard output")


def case_watch(c, ta, gen_traces, *_):
    sys.path.insert(0, HERE)
    import live_rings as lr
    d = os.path.join(c.tmp, "rings")
    ranks = lr.job("lw", 2, 6)
    for r in ranks:                     # every rank's process (on this host) is gone: the final reports
        gone = subprocess.Popen(["true"])
        gone.wait()
        r.pid, r.host = gone.pid, socket.gethostname()
    lr.write_rings(d, ranks, {})
    p = subprocess.run([ta, "--watch", "--settle", "0", d], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=120, preexec_fn=fsize_limit(200))
    err = p.stderr.decode()
    prefix = os.path.join(d, "tranalyze.lw")
    for ext in ("txt", "json", "md"):
        check("tranalyze: --reports: cannot write %s.%s: File too large\n" % (prefix, ext) in err,
              "the .%s report not named:\n%s" % (ext, err))
    eq(p.returncode, 2, "status:\n%s" % err)
    eq(glob.glob(prefix + "*"), [], "reports left behind")


CASES = {"closed": case_closed, "full": case_full, "pipe": case_pipe, "files": case_files, "watch": case_watch}

if __name__ == "__main__":
    sys.exit(run_case(CASES, lambda: Case(sys.argv[4] if len(sys.argv) > 4 else tempfile.gettempdir()), sys.argv,
                      "check_lost_output.py"))
