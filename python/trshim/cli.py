#!/usr/bin/env python3
"""trshim: record a distributed job with libtrshim.so, without editing it.

    trshim run [--dir D] [--job ID] [--dry-run] -- CMD ...
    trshim env [--dir D] [--job ID] [--format sh|deepspeed|k8s|mpirun]
    trshim doctor [--dir D] [--python PY]
    trshim lib                      the path of libtrshim.so
    trshim analyze ARGS...          tranalyze ARGS...
    trshim bundle TRACES_DIR [-o FILE] [--job ID] [--force]
                                    one .tar.gz to attach to a bug report
    trshim unpack TRACE             the trace with its calls and checks unpacked (version 1's form)
    trshim completion               the bash completion of trshim and tranalyze
    trshim --version                (and COMMAND --version)

(--job-id, the older spelling of --job, is still taken.) Exit statuses: EXIT_STATUS below, printed by
--help.

This module is the command line: the options of each command, their help and exit statuses, and
the dispatch to the module of each command (trshim.run, trshim.env, trshim.doctor, trshim.bundle,
trshim.unpack; where things are: trshim.where). Python 3.8 or newer, standard library only. It is
the wheel's entry point (trshim = trshim.cli:entry), what bin/trshim of a meson install runs, and
from a source tree `python3 python/trshim/cli.py ...` runs the tree's package.
"""
import argparse
import os
import sys
import textwrap

if __name__ == "__main__" and not __package__:
    # python3 python/trshim/cli.py: the package is this tree's, found from this folder's parent; this
    # folder leaves the path (its modules would be found there again without their package's name)
    _here = os.path.dirname(os.path.realpath(__file__))
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == _here:
        del sys.path[0]
    sys.path.insert(0, os.path.dirname(_here))

# (calls_count and read_trace: tests/analyzer/check_packed_rows.py reads traces as trshim bundle does, as cli's)
from trshim.bundle import calls_count, cmd_bundle, read_trace  # noqa: E402,F401  (below the path set above)
from trshim.doctor import cmd_doctor  # noqa: E402
from trshim.env import cmd_env  # noqa: E402
from trshim.messages import say  # noqa: E402
from trshim.run import cmd_run  # noqa: E402
from trshim.unpack import cmd_unpack  # noqa: E402
from trshim.where import completion_path, library_path, tranalyze_path, version  # noqa: E402


def cmd_lib(args):
    lib = library_path()
    print(lib)
    return 0 if os.path.isfile(lib) else 1


def cmd_analyze(args):
    ta = tranalyze_path()
    if not ta:
        say("tranalyze not found beside trshim nor in PATH")
        return 127
    os.execv(ta, [ta] + args.rest)


def positive_seconds(v):
    try:
        f = float(v)
    except ValueError:
        f = -1
    if not 0 < f <= 604800:
        raise argparse.ArgumentTypeError("wants seconds, more than 0 (e.g. 60), not %r" % v)
    return f


EXIT_STATUS = {
    "run": "the launcher's (128+N when signal N ended it); 2: trshim run's own error, nothing started (no "
           "command, the library missing, the trace folder refused, a bad option); 127: CMD not found; 126: CMD "
           "found but not runnable",
    "env": "0: the lines printed (a problem with the library is named on stderr); 2: a bad option",
    "doctor": "0: no problem (warnings included); 1: a problem (a FAIL line); 2: a bad option",
    "lib": "0: the library is there; 1: it is not (the path it should have is printed)",
    "bundle": "0: written; 2: not written (the folder, tranalyze or the output file: the message says which)",
    "unpack": "0: printed; 1: TRACE unreadable or damaged; 2: a bad option",
    "analyze": "tranalyze's (0: nothing found, 1: findings, 2: could not analyse); 127: tranalyze not found",
    "completion": "0: printed; 1: the script is not installed with this trshim",
}
EXIT_ALL = "130: interrupted (^C); 141: its output closed early (a pipe)"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, with paragraphs (a blank line) and indented lines (a table) kept"""

    def _fill_text(self, text, width, indent):
        out = []
        for para in text.split("\n\n"):
            if para.startswith("  "):
                out.append("\n".join(indent + ln for ln in para.splitlines()))
            else:
                out.append(super()._fill_text(para, width, indent))
        return "\n\n".join(out)


def print_version():
    print("trshim %s" % version())
    print("libtrshim.so: %s%s" % (library_path(), "" if os.path.isfile(library_path()) else " (missing)"))
    print("tranalyze: %s" % (tranalyze_path() or "not found"))


class VersionAction(argparse.Action):
    """--version, on trshim and on each command: printed at once, whatever else is on the line"""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print_version()
        parser.exit(0)


def cmd_completion(args):
    p = completion_path()
    if not p:
        say("completion: the completion script is not installed with this trshim")
        return 1
    with open(p) as f:
        sys.stdout.write(f.read())
    return 0


def parser():
    p = argparse.ArgumentParser(prog="trshim", formatter_class=HelpFormatter,
                                description="Record a distributed job's NCCL and CUDA calls with libtrshim.so, "
                                "without editing it; tranalyze TRACE_DIR names the root cause. trshim COMMAND --help "
                                "describes each command.",
                                epilog="Exit status, by command:\n\n" + "\n".join(
                                    textwrap.fill(v, 78, initial_indent="  %-11s " % k, subsequent_indent=" " * 14)
                                    for k, v in EXIT_STATUS.items()) +
                                "\n\nEvery command: " + EXIT_ALL + ". trshim without a command: 2.")
    p.add_argument("--version", action=VersionAction, help="print the version, the library's path and tranalyze's")
    sub = p.add_subparsers(dest="what", metavar="COMMAND")

    def command(name, helptext, description):
        q = sub.add_parser(name, help=helptext, description=description, formatter_class=HelpFormatter,
                           epilog="Exit status: %s; %s." % (EXIT_STATUS[name], EXIT_ALL))
        q.add_argument("--version", action=VersionAction, help="print trshim's version (as trshim --version) and exit")
        return q

    def common(q):
        q.add_argument("--dir", help="trace folder (default: $TRSHIM_DIR, else ./traces), made absolute")
        q.add_argument("--job", "--job-id", dest="job_id", metavar="ID",
                       help="the job's id in the traces (default: the launcher's, else a new one; --job-id: the "
                       "older spelling)")
        q.add_argument("--library", help="libtrshim.so to preload (default: %s)" % library_path())

    r = command("run", "run a command (a launcher: deepspeed, torchrun, srun, mpirun...) recording every rank",
                "Runs CMD with libtrshim.so in front of LD_PRELOAD, TRSHIM_DIR and a job id set. deepspeed: "
                ".deepspeed_env carries them to every node (restored after); mpirun/mpiexec: -x (Open MPI) or -genv "
                "(MPICH, Intel MPI) options; srun, torchrun: the environment is enough. Beside the launcher a "
                "watcher (tranalyze --watch) prints the root cause on stderr when a rank waits past the hang "
                "threshold or dies while others wait, and one verdict line at the end (docs/live.md).")
    common(r)
    r.add_argument("--dry-run", action="store_true", help="print the environment, files and command; run nothing")
    r.add_argument("--quiet", "-q", action="store_true", help="no 'recording to' line from the shim (TRSHIM_QUIET=1)")
    r.add_argument("--mpi", choices=("openmpi", "hydra"), help="mpirun's kind (default: from mpirun --version)")
    r.add_argument("--keep-env-file", action="store_true", help="deepspeed: leave .deepspeed_env as written")
    r.add_argument("--hang-sec", type=positive_seconds, metavar="S",
                   help="an operation pending S seconds is a hang: the ranks' watchdog and the watcher's threshold "
                   "(TRSHIM_HANG_SEC; default: as set, else 300)")
    r.add_argument("--on-hang", choices=("report", "abort"),
                   help="report (default; TRSHIM_ON_HANG): the root cause on stderr while the job waits; abort: "
                   "then end the job (SIGTERM to the launcher)")
    r.add_argument("--no-watch", action="store_true", help="no watcher (TRSHIM_WATCH=0): traces only, no answer "
                   "while the job runs nor verdict at its end")
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                   help="the command to run after --: the launcher (torchrun, deepspeed, srun, mpirun, ...) or the "
                   "program itself, with its arguments")
    r.set_defaults(fn=cmd_run)

    e = command("env", "print the settings to put in an sbatch script, .deepspeed_env or a pod spec",
                "Prints what trshim run would set (LD_PRELOAD with libtrshim.so, TRSHIM_DIR, the job id when asked, "
                "the TRSHIM_* settings set here) in the form a launcher takes: for a job that trshim run cannot "
                "start (a batch script, a pod).")
    common(e)
    e.add_argument("--format", choices=("sh", "deepspeed", "k8s", "mpirun"), default="sh",
                   help="sh: export lines (sbatch, shell); deepspeed: .deepspeed_env lines; k8s: a container's "
                   "env; mpirun: -x options")
    e.set_defaults(fn=cmd_env)

    d = command("doctor", "check this node: the shim loads, the CUDA/NCCL libraries, Python, the trace folder",
                "Checks what recording needs on this node, a line each (ok, info, warn, FAIL): libtrshim.so "
                "(machine, glibc, preloaded into a program), tranalyze, the CUDA runtime, NCCL and GPU driver the "
                "loader gives a C program, each Python's version, NVIDIA wheels, PyTorch and DeepSpeed, and the "
                "trace folder (the shim's rules, free space).")
    d.add_argument("--dir", help="trace folder to check (default: $TRSHIM_DIR, else ./traces)")
    d.add_argument("--python", action="append", metavar="PY",
                   help="the job's Python (repeatable; default: this one and python3 in PATH)")
    d.add_argument("--library", help="libtrshim.so to check (default: %s)" % library_path())
    d.set_defaults(fn=cmd_doctor)

    lb = command("lib", "print the path of libtrshim.so",
                 "Prints the absolute path of libtrshim.so ($TRSHIM_LIBRARY, else the one installed with trshim): "
                 "LD_PRELOAD=$(trshim lib) records a program by hand.")
    lb.set_defaults(fn=cmd_lib)

    b = command("bundle", "one .tar.gz to attach to a bug report: the job's traces, the rings of ranks killed or "
                "signaled (compacted), tranalyze's reports, MANIFEST.txt",
                "Writes one gzip'd tar for a bug report (mode 0600, as the traces): the JSON traces below "
                "TRACES_DIR of the job tranalyze analyses, the ring files of the processes whose traces miss their "
                "last calls (killed, ended by a signal, calls after the last write, no trace), compacted to what is "
                "used, tranalyze's reports (text, --markdown, --json, and --html/--timeline where this tranalyze "
                "has them) and MANIFEST.txt. Symbolic links are not followed.")
    b.add_argument("traces_dir", metavar="TRACES_DIR", help="the trace folder (searched recursively)")
    b.add_argument("-o", "--output", help="the file to write (default: trshim-report-JOB.tar.gz here)")
    b.add_argument("--job", help="the job to bundle (default: tranalyze's choice, the newest)")
    b.add_argument("--force", action="store_true", help="overwrite an existing output file")
    b.set_defaults(fn=cmd_bundle)

    c = command("unpack", "print a trace with its calls and checks unpacked as JSON arrays (version 1's form)",
                "Prints the JSON trace TRACE with its packed calls and checks (version 2) as version 1's arrays and "
                "\"version\": 1, for reading or for tools of version 1; a version-1 trace is printed unchanged.")
    c.add_argument("trace", metavar="TRACE", help="a trshim.*.json trace")
    c.set_defaults(fn=cmd_unpack)

    a = sub.add_parser("analyze", help="tranalyze ARGS... (the analyzer installed with trshim)",
                       description="Runs the tranalyze installed with trshim with ARGS (trshim analyze --help is "
                       "tranalyze's help).", formatter_class=HelpFormatter,
                       epilog="Exit status: %s; %s." % (EXIT_STATUS["analyze"], EXIT_ALL))
    a.add_argument("rest", nargs=argparse.REMAINDER, metavar="ARGS", help="tranalyze's options and trace folders")
    a.set_defaults(fn=cmd_analyze)

    k = command("completion", "print the bash completion of trshim and tranalyze",
                "Prints the bash completion script of trshim and tranalyze, for a system where the installation "
                "could not put it where bash-completion looks (pip installs it into <prefix>/share/bash-completion/"
                "completions): trshim completion > ~/.local/share/bash-completion/completions/trshim, or "
                "source <(trshim completion) in ~/.bashrc.")
    k.set_defaults(fn=cmd_completion)
    return p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "analyze":       # every argument is tranalyze's, --help included
        return cmd_analyze(argparse.Namespace(rest=argv[1:]))
    args = parser().parse_args(argv)
    if not getattr(args, "fn", None):
        parser().print_help(sys.stderr)
        return 2
    return args.fn(args)


def entry():
    try:
        return main()
    except BrokenPipeError:          # trshim doctor | head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(entry())
