#!/usr/bin/env python3
"""The trshim command's own interface, installed (meson install --destdir, as test_install.py does;
suite 'install', tests/install/meson.build).

    test_cli.py help        trshim --help and every COMMAND --help: exit 0, every option and argument
                            described, a description and an "Exit status:" epilog for each command, the
                            top-level epilog naming every command's; COMMAND --version (each command,
                            whatever else is on the line) prints trshim's version lines, exit 0
    test_cli.py job         --job, one spelling for the job option (run, env, bundle), --job-id its
                            alias (run, env): the same job id either way
    test_cli.py exit        trshim run's exit statuses: the launcher's (7; 143 for SIGTERM), 127 for a
                            command not found, 126 for one that cannot run, 2 for its own errors (no
                            command, the library missing, a trace folder the shim refuses, a bad option)
                            with nothing started; lib, unpack, completion and no command: theirs
    test_cli.py completion  the bash completion of trshim and tranalyze: installed as
                            DATADIR/bash-completion/completions/trshim and .../tranalyze, printed by
                            trshim completion, exact answers for commands, options and their values in
                            plain bash, each command's options exactly its --help's (tranalyze's too);
                            loaded by the bash-completion package from DATADIR where it is installed
"""
import os
import re
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_install import SOURCE, VERSION, Installed, check, failures, run  # noqa: E402

COMMANDS = ("run", "env", "doctor", "lib", "bundle", "unpack", "analyze", "completion")


def clean_env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("TRSHIM_") and k != "LD_PRELOAD"}
    e.update(extra)
    return e


def version_lines(inst, out):
    lines = out.splitlines()
    return len(lines) == 3 and lines[0] == "trshim " + VERSION and lines[1] == "libtrshim.so: " + inst.lib and \
        lines[2] == "tranalyze: " + inst.tranalyze


def test_help(tmp):
    inst = Installed(tmp)
    r = run([inst.trshim, "--help"], env=clean_env())
    check(r.returncode == 0 and r.stdout.startswith("usage: trshim "), "trshim --help: %d %r" % (r.returncode, r.stdout))
    epilog = r.stdout.split("Exit status, by command:", 1)
    check(len(epilog) == 2, "trshim --help has no exit status table:\n" + r.stdout)
    if len(epilog) == 2:
        named = re.findall(r"^  (\S+) +\S", epilog[1], re.M)
        check(named == list(COMMANDS), "the exit status table names %s, not every command %s" % (named, COMMANDS))
        check("Every command: 130: interrupted" in epilog[1] and "without a command: 2" in epilog[1],
              "the statuses of every command: %r" % epilog[1])
    mod = inst.module("cli")
    p = mod.parser()
    subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"][0]
    check(sorted(subs.choices) == sorted(COMMANDS), "commands %s" % sorted(subs.choices))
    for name, q in subs.choices.items():
        for a in q._actions:
            check(bool(a.help) and a.help != "==SUPPRESS==", "trshim %s: %s has no help" %
                  (name, "/".join(a.option_strings) or a.dest))
        check(bool(q.description), "trshim %s: no description" % name)
        check((q.epilog or "").startswith("Exit status: "), "trshim %s: no exit status in its epilog" % name)
        if name == "analyze":         # every word after analyze is tranalyze's
            continue
        r = run([inst.trshim, name, "--help"], env=clean_env())
        check(r.returncode == 0 and r.stdout.startswith("usage: trshim " + name) and "\nExit status: " in r.stdout,
              "trshim %s --help: %d %r" % (name, r.returncode, r.stdout[-400:]))
        extra = {"run": ["--dry-run", "--", "true"], "bundle": ["folder"], "unpack": ["x.json"]}.get(name, [])
        for args in (["--version"], ["--version"] + extra, extra[:1] + ["--version"]):
            r = run([inst.trshim, name] + args, env=clean_env())
            check(r.returncode == 0 and version_lines(inst, r.stdout),
                  "trshim %s: %d %r %r" % (" ".join([name] + args), r.returncode, r.stdout, r.stderr))
    r = run([inst.trshim, "--version"], env=clean_env())
    check(r.returncode == 0 and version_lines(inst, r.stdout), "trshim --version: %r" % r.stdout)
    r = run([inst.trshim, "analyze", "--version"], env=clean_env())
    check(r.returncode == 0 and r.stdout.strip() == "tranalyze " + VERSION, "trshim analyze --version: %r" % r.stdout)


def test_job(tmp):
    inst = Installed(tmp)
    for opt in ("--job", "--job-id"):
        r = run([inst.trshim, "run", "--dry-run", opt, "j-%s" % opt[2:], "--", "true"], env=clean_env(), cwd=tmp)
        check(r.returncode == 0 and "env: TRSHIM_JOB_ID=j-%s\n" % opt[2:] in r.stdout, "run %s: %r" % (opt, r.stdout))
        r = run([inst.trshim, "env", opt, "j-%s" % opt[2:]], env=clean_env(), cwd=tmp)
        check(r.returncode == 0 and "export TRSHIM_JOB_ID=j-%s\n" % opt[2:] in r.stdout, "env %s: %r" % (opt, r.stdout))
    for name in ("run", "env", "bundle"):
        r = run([inst.trshim, name, "--help"], env=clean_env())
        check(re.search(r"^  --job ", r.stdout, re.M) is not None, "trshim %s --help: no --job:\n%s" % (name, r.stdout))
    r = run([inst.trshim, "run", "--help"], env=clean_env())
    check("--job ID, --job-id ID" in r.stdout, "run --help names --job-id as the alias: %r" % r.stdout)


def test_exit(tmp):
    inst = Installed(tmp)
    traces = os.path.join(tmp, "traces")
    base = [inst.trshim, "run", "--no-watch", "--quiet", "--dir", traces]
    cases = [(["--", "sh", "-c", "exit 7"], 7, None), (["--", "sh", "-c", "kill -TERM $$"], 143, None),
             (["--", "no-such-command-here"], 127, "no-such-command-here: No such file or directory (command not "
                                                    "found)")]
    notexec = os.path.join(tmp, "script.sh")
    with open(notexec, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(notexec, 0o644)
    cases.append((["--", notexec], 126, "%s: Permission denied" % notexec))
    for args, want, msg in cases:
        r = run(base + args, env=clean_env())
        check(r.returncode == want and (msg is None or "trshim: run: " + msg in r.stderr),
              "trshim run %s: %d (want %d) %r" % (" ".join(args), r.returncode, want, r.stderr))
    # its own errors: 2, nothing started
    marker = os.path.join(tmp, "started")
    prog = ["--", "sh", "-c", "touch %s" % marker]
    shared = os.path.join(tmp, "shared")
    os.makedirs(shared)
    os.chmod(shared, 0o777)
    for args, env, msg in (([], {}, "run: no command"),
                           (prog, {"TRSHIM_LIBRARY": os.path.join(tmp, "missing.so")}, "missing.so not found"),
                           (["--dir", shared] + prog, {}, "writable by group or others"),
                           (["--hang-sec", "-1"] + prog, {}, "wants seconds")):
        r = run([inst.trshim, "run", "--no-watch"] + args, env=clean_env(**env), cwd=tmp)
        check(r.returncode == 2 and msg in r.stderr and not os.path.exists(marker),
              "trshim run %s: %d %r (2, nothing started)" % (" ".join(args), r.returncode, r.stderr))
    # the other commands
    junk = os.path.join(tmp, "junk.json")
    with open(junk, "w") as f:
        f.write("not json")
    for args, env, want in ((["lib"], {}, 0), (["lib"], {"TRSHIM_LIBRARY": os.path.join(tmp, "missing.so")}, 1),
                            (["unpack", junk], {}, 1), (["unpack"], {}, 2), (["completion"], {}, 0), ([], {}, 2),
                            (["env", "--format", "xml"], {}, 2), (["bundle", os.path.join(tmp, "none")], {}, 2)):
        r = run([inst.trshim] + args, env=clean_env(**env))
        check(r.returncode == want, "trshim %s: %d, want %d (%r)" % (" ".join(args), r.returncode, want, r.stderr))


def complete(script, words, fn="_trshim"):
    """COMPREPLY for COMP_WORDS=words (the last one being completed) in plain bash"""
    arr = " ".join("'%s'" % w.replace("'", "'\\''") for w in words)
    r = run(["bash", "--norc", "-c", "source \"$1\"; COMP_WORDS=(%s); COMP_CWORD=%d; %s; printf '%%s\\n' "
             "\"${COMPREPLY[@]}\"" % (arr, len(words) - 1, fn), "bash", script])
    check(r.returncode == 0 and not r.stderr, "bash completion of %r: %d %r" % (words, r.returncode, r.stderr))
    return [w for w in r.stdout.split("\n") if w]


def test_completion(tmp):
    inst = Installed(tmp)
    with open(os.path.join(SOURCE, "packaging", "completion", "trshim.bash")) as f:
        script = f.read()
    datadir = inst.datadir_final
    for cmd in ("trshim", "tranalyze"):
        p = inst.d(os.path.join(datadir, "bash-completion", "completions", cmd))
        check(os.path.isfile(p) and open(p).read() == script, "installed completion %s" % p)
        if os.path.isfile(p):
            check(stat.S_IMODE(os.stat(p).st_mode) & 0o444 == 0o444, "%s is readable by all" % p)
    bc = "/usr/share/bash-completion/bash_completion"     # the bash-completion package, where installed
    if os.path.isfile(bc):
        r = run(["bash", "--norc", "-c", 'source "$1"; __load_completion trshim && __load_completion tranalyze && '
                 'complete -p trshim tranalyze', "bash", bc], env=clean_env(XDG_DATA_DIRS=inst.d(datadir)))
        check(r.stdout.split("\n")[:2] == ["complete -F _trshim trshim", "complete -F _tranalyze tranalyze"],
              "bash-completion loads the installed files: %r %r" % (r.stdout, r.stderr))
    r = run([inst.trshim, "completion"], env=clean_env())
    check(r.returncode == 0 and r.stdout == script, "trshim completion prints the script: %d" % r.returncode)
    path = os.path.join(tmp, "completion.bash")
    with open(path, "w") as f:
        f.write(r.stdout)
    os.makedirs(os.path.join(tmp, "tr", "sub"))
    for name in ("tr/a.json", "tr/b.json"):
        open(os.path.join(tmp, name), "w").close()
    os.chdir(tmp)
    cases = [(["trshim", "ru"], ["run"]), (["trshim", ""], list(COMMANDS)), (["trshim", "--v"], ["--version"]),
             (["trshim", "run", "--j"], ["--job", "--job-id"]), (["trshim", "env", "--format", "k"], ["k8s"]),
             (["trshim", "env", "--format", ""], ["sh", "deepspeed", "k8s", "mpirun"]),
             (["trshim", "run", "--on-hang", ""], ["report", "abort"]), (["trshim", "run", "--mpi", "o"], ["openmpi"]),
             (["trshim", "run", "--job", ""], []), (["trshim", "run", "--dir", "t"], ["tr"]),
             (["trshim", "bundle", "tr/"], ["tr/sub"]), (["trshim", "unpack", "tr/a"], ["tr/a.json"]),
             (["trshim", "run", "--", "ba"], None), (["trshim", "run", "--", "bash", "tr/b"], ["tr/b.json"]),
             (["trshim", "analyze", "--mark"], ["--markdown"]), (["trshim", "analyze", "--html", "tr/a"], ["tr/a.json"]),
             (["trshim", "doctor", "--dir", "tr/s"], ["tr/sub"])]
    for words, want in cases:
        got = complete(path, words)
        if want is None:           # the commands of PATH after --: bash among them
            check("bash" in got and all(w.startswith("ba") for w in got), "%r: %r" % (words, got))
        else:
            check(got == want, "completion of %r: %r, want %r" % (words, got, want))
    for words, want in ((["tranalyze", "--ti"], ["--timeline"]), (["tranalyze", "--on-hang", ""], ["report", "abort"]),
                        (["tranalyze", "--modules", "tr/s"], ["tr/sub"]), (["tranalyze", "tr/b"], ["tr/b.json"])):
        got = complete(path, words, "_tranalyze")
        check(got == want, "completion of %r: %r, want %r" % (words, got, want))
    # every command's options: exactly those of its --help (its parser), and tranalyze's
    p = inst.module("cli").parser()
    subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"][0]
    for name, q in subs.choices.items():
        if name == "analyze":
            continue
        opts = {o for a in q._actions for o in a.option_strings} | ({"--"} if name == "run" else set())
        got = set(complete(path, ["trshim", name, "-"]))
        check(got == opts, "trshim %s: the completion's options %s, the parser's %s" % (name, sorted(got), sorted(opts)))
    check(set(complete(path, ["trshim", "-"])) == {o for a in p._actions for o in a.option_strings},
          "trshim's own options")
    r = run([inst.tranalyze, "--help"])
    ta = set(re.findall(r"^  (?:-h, )?(--[a-z-]+)", r.stdout, re.M)) | {"-h"}
    if "\ntranalyze --watch [options] DIR" in r.stdout:     # (a mode of its own, in a paragraph of its own)
        ta.add("--watch")
    got = set(complete(path, ["tranalyze", "-"], "_tranalyze"))
    check(got == ta, "tranalyze: the completion's options %s, --help's %s" % (sorted(got - ta), sorted(ta - got)))
    check(set(complete(path, ["trshim", "analyze", "-"])) == ta, "trshim analyze: tranalyze's options")


TESTS = {"help": test_help, "job": test_job, "exit": test_exit, "completion": test_completion}


def main():
    import tempfile
    name = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="trshim-cli-") as tmp:
        cwd = os.getcwd()
        try:
            TESTS[name](tmp)
        finally:
            os.chdir(cwd)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("install-cli-%s: ok" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
