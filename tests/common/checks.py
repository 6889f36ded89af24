"""Assertions shared by the Python test drivers: a failed check raises
Failure with a message naming what differed; the driver reports it
(run_case)."""
import os
import re
import sys


class Failure(Exception):
    pass


class Skip(Exception):
    """the case cannot run here (exit status 77: meson's "skipped")"""


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def eq(got, want, what):
    if got != want:
        raise Failure("%s: got %r, expected %r" % (what, got, want))


RECORDING_LINE = re.compile(r"^trshim: recording to \S.* \(job .*\)$")


def shim_lines(stderr):
    """The "trshim:" lines of stderr, less the shim's "recording to" line
    (one per job and host, from local rank 0: tests/shim's recording-line
    checks it)."""
    return [l for l in stderr.splitlines() if l.startswith("trshim:") and not RECORDING_LINE.match(l)]


def path_of(name):
    """The path meson passes in environment variable name."""
    v = os.environ.get(name)
    if not v:
        raise Failure("%s is not set (run through meson test)" % name)
    return v


def run_case(cases, make_case, argv, usage, kept="files", on_failure=None):
    """a test driver's command line: argv[1] names one of cases, run as
    cases[name](case, *argv[2:]) on case = make_case(). Prints "ok NAME"
    (status 0, the case's folder removed), "skip NAME: why" (77) or
    "FAIL NAME: what" with the folder kept (1; on_failure(case) first)."""
    if len(argv) < 2 or argv[1] not in cases:
        sys.stderr.write("usage: %s CASE [ARGS]; cases: %s\n" % (usage, " ".join(cases)))
        return 2
    c = make_case()
    try:
        cases[argv[1]](c, *argv[2:])
    except Skip as e:
        sys.stdout.write("skip %s: %s\n" % (argv[1], e))
        c.cleanup()
        return 77
    except Failure as e:
        sys.stdout.write("FAIL %s: %s\n(%s kept in %s)\n" % (argv[1], e, kept, c.tmp))
        if on_failure:
            on_failure(c)
        return 1
    c.cleanup()
    sys.stdout.write("ok %s\n" % argv[1])
    return 0
