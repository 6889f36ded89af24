#!/usr/bin/env python3
"""Strings of the traces that would forge report lines or reach the
terminal raw (issue 33, item 2), in every output format of tranalyze.

    check_hostile.py CASE TRANALYZE GEN_TRACES WORKDIR

The job (hostile_job): 4 ranks, rank 0 issuing an extra AllReduce (a
divergence, seq 4, as gen_traces.py's extra_collective). Its job id, host
names, the native function name and the Python file and function of the
extra call, an environment value and the command line each hold a newline
and a forged "ROOT CAUSE:" line, terminal escapes (ESC [2J, an OSC title
ending in BEL), U+202E (right-to-left override), markup (<script>, |,
backticks, *, _, [..](..)) and a byte that is not UTF-8; beside the traces, a
file that is not a trace and a damaged trace, both named with such strings,
and one good trace named so.

Cases (each format's rules: docs/analysis-format.md, "Strings from the
traces"):
  text      no raw control character, bidi control or invalid UTF-8; one
            "ROOT CAUSE" line; each string shown escaped, exactly (\\n, \\x1b,
            \\u202e, \\xff), in the header, the root cause's lines, the rank
            table and the input problems (also with --full-stacks: the native
            function name)
  markdown  the same, and no markup of a string's own (no <script> outside
            code, no heading, link or emphasis made by it); the rank and
            environment tables keep their column count
  html      no element that is not the page's (no <script>, no <img>), no raw
            control; the strings shown as text (escaped as text)
  json      valid UTF-8 JSON with no raw control or bidi character; each
            string parses back to its true value (the byte that is not UTF-8
            as U+FFFD; Python names as the loader keeps them: control
            characters as '?')
  timeline  the same for --timeline's trace events (process names, call
            names, sites)
  stderr    a folder holding only the damaged trace: status 2, each line of
            stderr one message, the file named escaped, exactly
  reports   --reports PREFIX: .txt, .md, .json as standard output got them
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from checks import Failure, check, eq, run_case  # noqa: E402

# the hostile parts: a forged line, terminal escapes, a bidi override, markup, a byte that is not UTF-8
# ('\udcff': Python's surrogateescape form of the byte 0xff, written raw into the trace)
FORGE = "\nROOT CAUSE: forged"
ESCS = "\x1b[2J\x1b]0;title\x07"
BIDI = "\u202e"
MARKUP = "<script>alert(1)</script>|`x`|*b*_u_[l](http://x)"
BAD = "\udcff"
JOB = "hj" + ESCS + BIDI + "|`j`"
HOST = "node" + FORGE + " host" + ESCS + BIDI + "<script>h</script>|`h`" + BAD
FUNC = "log_metrics" + FORGE + " fn" + ESCS + BIDI + MARKUP + BAD
PYFILE = "/job/ev" + FORGE + " py" + ESCS + BIDI + "<script>|`p`|.py"
PYFUNC = "pyfn" + FORGE + " q" + ESCS + BIDI + "*q*"
ENVVAL = "v" + FORGE + " env" + ESCS + BIDI + MARKUP + BAD
CMDARG = "--x" + FORGE + " cmd" + ESCS + BIDI + MARKUP
DAMAGED = "trshim.hj.r9.n" + FORGE + " damaged" + ESCS + BIDI + "<script>.1.json"
NOTTRACE = "notes" + FORGE + " file" + ESCS + ".txt"
GOODNAME = "trshim.hj.r3.n" + FORGE + " good" + ESCS + BIDI + ".40003.json"

HIDDEN_RE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def hidden(cp):
    return cp < 0x20 or 0x7f <= cp <= 0x9f or cp in (0x61c, 0x200e, 0x200f, 0x2028, 0x2029) or \
        0x202a <= cp <= 0x202e or 0x2066 <= cp <= 0x2069


def esc_text(s):
    """analyzer/model/esc.c's TA_ESC_TEXT of s (a str whose surrogates stand for bytes that are not UTF-8)"""
    out = []
    for ch in s:
        cp = ord(ch)
        if 0xdc80 <= cp <= 0xdcff:
            out.append("\\x%02x" % (cp - 0xdc00))
        elif ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif hidden(cp):
            out.append("\\x%02x" % cp if cp < 0x80 else "\\u%04x" % cp)
        else:
            out.append(ch)
    return "".join(out)


def site(pyfile=None, pyfunc=None):
    """the culprit's call site as tranalyze writes it: the Python file's base name, line, function"""
    return "%s:198 in %s" % (py_kept(pyfile or PYFILE).rsplit("/", 1)[1], py_kept(pyfunc or PYFUNC))


def true_json(s):
    """what --json gives back for s: the true value, each byte that is not UTF-8 as U+FFFD"""
    return re.sub("[\udc80-\udcff]", "\ufffd", s)


def py_kept(s):
    """a Python name as the loader keeps it (analyzer/site/pystack.c: control characters and bytes that are
    not UTF-8 made '?')"""
    return re.sub("[\x00-\x1f\x7f\udc80-\udcff]", "?", s)


class Case:
    def __init__(self, workdir):
        os.makedirs(workdir, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="hostile-", dir=workdir)

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def put(path, obj_or_bytes):
    """path: a str whose surrogates stand for bytes (written as those bytes)"""
    path = path.encode("utf-8", "surrogateescape")
    data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else \
        json.dumps(obj_or_bytes, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape")
    with open(path, "wb") as f:
        f.write(data)


def hostile_job(c, gen_traces):
    """the job's traces (and the planted files) in c.tmp/traces; returns the folder"""
    sys.path.insert(0, os.path.dirname(os.path.abspath(gen_traces)))
    import gen_traces as g
    out = os.path.join(c.tmp, "traces")
    os.makedirs(out)
    ranks, wid = g.world_job("HJOB", 4)
    c.wid = wid
    for r in ranks:
        r.enable_python()
    user = g.PY_MAIN
    for step in range(5):
        for r in ranks:
            if step == 3 and r.rank == 0:
                r.coll(0, count=1, site="HFUNC", py=[("HPYFILE", "HPYFUNC", 198)] + user)
            r.coll(0, count=1 << 20, site="train_step", py=[(g.PY_JOB, "train_step", 212)] + user)
    g.killed(ranks)
    subst = {"HJOB": JOB, "HFUNC": FUNC, "HPYFILE": PYFILE, "HPYFUNC": PYFUNC}

    def sub(v):
        if isinstance(v, str):
            return subst.get(v, v)
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        return v
    for r in ranks:
        d = sub(r.to_json())
        d["host"] = HOST
        d["env"]["HOSTILE"] = ENVVAL
        d["cmdline"] = [g.MODULE, CMDARG]
        name = GOODNAME if r.rank == 3 else "trshim.hj.r%d.node0.%d.json" % (r.rank, r.pid)
        put(os.path.join(out, name), d)
    put(os.path.join(out, DAMAGED), b"{")
    put(os.path.join(out, NOTTRACE), b"ROOT CAUSE: not a trace\n")
    return out


def run(ta, args, **kw):
    p = subprocess.run([ta] + args, capture_output=True, timeout=120, **kw)
    return p


def clean_bytes(b, what, keep_tabs=False):
    """b decodes as UTF-8 and holds no hidden character but newlines"""
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Failure("%s: not UTF-8 (%s): %r" % (what, e, b[max(0, e.start - 40): e.start + 40]))
    m = HIDDEN_RE.search(s)
    check(not m, "%s: a raw U+%04X at %d: %r" % (what, ord(m.group()) if m else 0, m.start() if m else 0,
                                                 s[max(0, m.start() - 60): m.start() + 20] if m else ""))
    return s


def root_lines(s, prefix):
    return [ln for ln in s.split("\n") if ln.startswith(prefix)]


def must_have(s, sub, what):
    check(sub in s, "%s does not show %r:\n%s" % (what, sub, s[:4000]))


# ---------------------------------------------------------------------------------------------------
def case_text(c, ta, gen_traces, *_):
    d = hostile_job(c, gen_traces)
    for extra in ([], ["--full-stacks"]):
        p = run(ta, extra + [d])
        what = "text%s" % (" --full-stacks" if extra else "")
        eq(p.returncode, 1, what + ": status")
        s = clean_bytes(p.stdout, what)
        eq(len(root_lines(s, "ROOT CAUSE")), 1, what + ": lines starting with ROOT CAUSE")
        check(not any("ROOT CAUSE: forged" in ln[:30] for ln in s.split("\n")), what + ": a forged line")
        eq(s.split("\n")[0], "tranalyze: job %s: 4 of 4 ranks traced (5 files)" % esc_text(JOB), what + ": header")
        native = " <- train.py:300 in main <- train.py:320 in <module>; native: %s (train+0x%x)" % (
            esc_text(FUNC), g_site_offset(gen_traces, "HFUNC") + 0x2b)
        must_have(s, "\n  rank 0: AllReduce(1 x float32, sum) at %s%s\n" % (esc_text(site()), native if extra else ""),
                  what + ": the culprit's site")
        # the rank table: the host cut at 16 bytes of its escaped form
        rows = [ln for ln in s.split("\n") if re.match(r"  [0-3] ", ln)]
        eq(len(rows), 4, what + ": rank rows")
        for ln in rows:
            eq(ln[8:24], esc_text(HOST)[:16], what + ": the host column")
        must_have(s, "  %s: " % esc_text(os.path.join(d, DAMAGED)), what + ": the damaged file")
        check("not a trace" not in s and "notes" not in s, what + ": the file that is not a trace was read")
        for part in (FORGE, ESCS, BIDI):
            check(part not in s, what + ": %r raw" % part)


def md_unescaped_pipes(line):
    return len(re.findall(r"(?<!\\)\|", line))


def strip_code(s):
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", s)


def case_markdown(c, ta, gen_traces, *_):
    d = hostile_job(c, gen_traces)
    p = run(ta, ["--markdown", d])
    eq(p.returncode, 1, "--markdown: status")
    s = clean_bytes(p.stdout, "--markdown")
    lines = s.split("\n")
    eq(root_lines(s, "### Root cause"), ["### Root cause"], "the root cause heading")
    eq(len(root_lines(s, "#### **")), 1, "root cause findings")
    eq([ln for ln in lines if ln.startswith("#")][0], "## tranalyze: job " + "`` " + esc_text(JOB) + " ``",
       "the job's heading")
    check(not any(ln.startswith("ROOT CAUSE") for ln in lines), "a forged line")
    prose = strip_code(s)
    for bad in ("<script", "</script", "](http", "*b*", "*q*"):
        check(bad not in prose, "%r outside code: %s" % (bad, prose[:3000]))
    # tables: every row as many unescaped | as its header
    for head in ("| rank | host | pid | ended |", "| variable | value |"):
        check(head in s, "no table %r" % head)
        i = next(k for k, ln in enumerate(lines) if ln.startswith(head))
        n = md_unescaped_pipes(lines[i])
        k = i + 1
        while k < len(lines) and lines[k].startswith("|"):
            eq(md_unescaped_pipes(lines[k]), n, "columns of %r" % lines[k])
            k += 1
        check(k - i >= 3, "table %r has no rows" % head)
    env = [ln for ln in lines if ln.startswith("| `HOSTILE` |")]
    eq(env, ["| `HOSTILE` | `` %s `` |" % esc_text(ENVVAL).replace("|", "\\|")], "the environment row")
    must_have(s, "\n- rank 0: `AllReduce(1 x float32, sum)` at `` %s ``\n" % esc_text(site()), "--markdown")
    eq([ln for ln in lines if ln.startswith("- command: ")],
       ["- command: `` /opt/trjob/bin/train %s ``" % esc_text(CMDARG)], "the command line")
    must_have(s, "\n- `%s`: truncated: " % esc_text(os.path.join(d, DAMAGED)), "the damaged file")
    rows = [ln for ln in lines if re.match(r"\| [0-3] ", ln)]
    eq(len(rows), 4, "rank rows")
    for ln in rows:   # the host: its first 64 bytes, escaped as Markdown running text in a cell
        check(ln.split(" | ")[1].startswith("node\\nROOT CAUSE: forged host\\x1b\\[2J\\x1b\\]0;title\\x07\\u202e"
                                            "&lt;script&gt;h&lt;/script&gt;\\|"), "the host cell: %r" % ln)


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)


def case_html(c, ta, gen_traces, *_):
    d = hostile_job(c, gen_traces)
    page = os.path.join(c.tmp, "p.html")
    p = run(ta, ["--html", page, d])
    eq(p.returncode, 1, "--html: status")
    with open(page, "rb") as f:
        s = clean_bytes(f.read(), "--html")
    t = Tags()
    t.feed(s)
    eq(sorted(t.tags - {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p", "section", "div",
                        "a", "pre", "svg", "defs", "pattern", "path", "line", "g", "rect", "text", "span", "footer"}),
       [], "elements not the page's")
    check("<script" not in s.lower() and "<img" not in s.lower(), "markup from a string")
    text = run(ta, [d]).stdout.decode()
    import html
    pre = s[s.index('<pre id="diagnosis-text">') + len('<pre id="diagnosis-text">'): s.index("</pre>")]
    eq(html.unescape(pre), text, "the report in the page against the text output")
    must_have(html.unescape(s), "rank 0 on %s, pid 40000" % esc_text(HOST), "the row's title")


def json_clean(b, what):
    s = clean_bytes(b, what)
    check(not re.search("[\u202a-\u202e\u2066-\u2069]", s), what + ": a raw bidi control")
    return json.loads(s)


def case_json(c, ta, gen_traces, *_):
    d = hostile_job(c, gen_traces)
    p = run(ta, ["--json", "--full-stacks", d])
    eq(p.returncode, 1, "--json: status")
    j = json_clean(p.stdout, "--json")
    eq(j["job"]["id"], JOB, "job")
    eq(sorted({r["host"] for r in j["ranks"]}), [true_json(HOST)], "hosts")
    f = j["findings"][0]
    eq((f["kind"], f["seq"], f["ranks"]), ("divergence", 4, [0]), "the root cause")
    call = f["call"]
    py = call["python_stack"][0]
    eq((py["file"], py["function"], py["line"]), (py_kept(PYFILE), py_kept(PYFUNC), 198), "the Python frame")
    eq(call["function"], py_kept(PYFUNC), "the function")
    eq(call["native_site"], true_json(FUNC) + " (train+0x%x)" % (g_site_offset(gen_traces, "HFUNC") + 0x2b),
       "the native site")
    eq(call["stack"][0], call["native_site"], "the native frame")
    eq(call["site"], site() + " <- train.py:300 in main <- train.py:320 in <module>; native: " + call["native_site"],
       "the site")
    eq(j["environment"]["HOSTILE"], true_json(ENVVAL), "the environment value")
    eq([(i["file"], i["skipped"]) for i in j["inputs"] if i["file"]], [(os.path.join(d, DAMAGED), True)],
       "the damaged file in inputs")
    eq(j["ranks"][3]["file"], os.path.join(d, GOODNAME), "rank 3's file")


def g_site_offset(gen_traces, name):
    sys.path.insert(0, os.path.dirname(os.path.abspath(gen_traces)))
    import gen_traces as g
    return g.site_offset(name)


def case_timeline(c, ta, gen_traces, *_):
    d = hostile_job(c, gen_traces)
    tl = os.path.join(c.tmp, "t.json")
    p = run(ta, ["--timeline", tl, d])
    eq(p.returncode, 1, "--timeline: status")
    with open(tl, "rb") as fh:
        j = json_clean(fh.read(), "--timeline")
    ev = j["traceEvents"] if isinstance(j, dict) else j
    procs = sorted({e["args"]["name"] for e in ev if e.get("name") == "process_name"})
    eq(procs, ["rank %d (%s, pid %d)" % (r, true_json(HOST), 40000 + r) for r in range(4)], "process names")
    sites = {e["args"].get("site") for e in ev if isinstance(e.get("args"), dict)}
    check(site() in sites, "the culprit's site: %r" % sorted(map(str, sites))[:5])


def case_stderr(c, ta, gen_traces, *_):
    d = os.path.join(c.tmp, "only")
    os.makedirs(d)
    put(os.path.join(d, DAMAGED), b"{")
    p = run(ta, [d])
    eq(p.returncode, 2, "status")
    s = clean_bytes(p.stderr, "stderr")
    eq(p.stdout, b"", "stdout")
    lines = s.rstrip("\n").split("\n")
    eq(lines[0], "tranalyze: nothing usable to analyse (1 file read)", "the first line")
    eq(len(lines), 2, "stderr lines: %r" % lines)
    check(lines[1].startswith("  %s: " % esc_text(os.path.join(d, DAMAGED))), "the file named: %r" % lines[1])


def case_reports(c, ta, gen_traces, *_):
    d = hostile_job(c, gen_traces)
    prefix = os.path.join(c.tmp, "rep")
    p = run(ta, ["--reports", prefix, d])
    eq(p.returncode, 1, "--reports: status")
    for ext, args in ((".txt", []), (".md", ["--markdown"]), (".json", ["--json"])):
        with open(prefix + ext, "rb") as f:
            got = f.read()
        clean_bytes(got, prefix + ext)
        want = run(ta, args + [d]).stdout
        eq(got, want, ext + " against standard output")


CASES = {"text": case_text, "markdown": case_markdown, "html": case_html, "json": case_json,
         "timeline": case_timeline, "stderr": case_stderr, "reports": case_reports}

if __name__ == "__main__":
    sys.exit(run_case(CASES, lambda: Case(sys.argv[4] if len(sys.argv) > 4 else tempfile.gettempdir()), sys.argv,
                      "check_hostile.py"))
