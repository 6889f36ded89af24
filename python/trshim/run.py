"""trshim run: the job's environment set (trshim.env), the launcher's command line or
.deepspeed_env adjusted (trshim.launchers), the trace folder made (trshim.folders); then the
launcher and beside it the watcher (tranalyze --watch), signals forwarded to the launcher, and
the launcher's exit status as trshim run's."""
import errno
import os
import shlex
import signal
import subprocess
import sys

from trshim.env import check_library_path, job_environment
from trshim.folders import prepare_folder
from trshim.launchers import (DS_PLAIN_VALUE, deepspeed_env_file, deepspeed_env_text, find_launcher, mpi_flavour,
                              parse_env_lines, rewrite_mpi, rewrite_srun)
from trshim.messages import say
from trshim.where import tranalyze_path


def exit_status(rc):
    return 128 - rc if rc < 0 else rc


def cmd_run(args):
    try:
        return run_command(args)
    except OSError as e:       # reading .deepspeed_env, making the folder...: trshim run's own error
        say("run: %s" % e)
        return 2


def run_command(args):
    cmd = args.command
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        say("run: no command (trshim run [options] -- CMD ...)")
        return 2
    env = dict(os.environ)
    launcher = find_launcher(cmd)
    lib, jobenv, why = job_environment(args, env, cmd, launcher)
    problems = check_library_path(lib)
    if problems:
        for p in problems:
            say("run: " + p)
        return 2
    name, at = launcher
    final = list(cmd)
    notes = []
    ds_file = ds_text = ds_old = None
    if name == "deepspeed":
        home, here = deepspeed_env_file(env)
        target = here
        if not os.access(os.path.dirname(here) or ".", os.W_OK) and not os.path.exists(here):
            target = home
        ds_old = read_text(target)
        home_text = read_text(home) if target != home else ""
        ds_text = deepspeed_env_text(ds_old or "", lib, jobenv, home_text or "")
        ds_file = target
        bad = [k for k, v in parse_env_lines(ds_text).items() if k in jobenv and not DS_PLAIN_VALUE.match(v)]
        if bad:
            notes.append("%s: DeepSpeed quotes these values for the other nodes: %s" % (ds_file, ", ".join(bad)))
    elif name == "mpi":
        final = rewrite_mpi(cmd, at, jobenv, mpi_flavour(cmd[at], args.mpi))
    elif name == "srun":
        final = rewrite_srun(cmd, at, jobenv)
    elif name == "ssh":
        notes.append("%s does not carry the environment to the other host: put `trshim run` or the "
                     "lines of `trshim env` on the remote side" % os.path.basename(cmd[at]))
    if args.dry_run:
        print("launcher: %s" % (name or "none (the command gets the environment as it is)"))
        for k in sorted(jobenv):
            print("env: %s=%s" % (k, jobenv[k]))
        if "TRSHIM_JOB_ID" not in jobenv:
            print("job id: %s" % why)
        if ds_file:
            print("file: %s%s" % (ds_file, " (replaces the existing one while the job runs)" if ds_old is not None
                                  else " (new, removed when the job ends)"))
            for line in ds_text.splitlines():
                print("  " + line)
        for n in notes:
            print("note: " + n)
        print("command: " + " ".join(shlex.quote(a) for a in final))
        return 0
    for n in notes:
        say(n)
    bad = prepare_folder(jobenv["TRSHIM_DIR"])
    if bad:
        say("run: %s; nothing was started (--dir DIR: a folder of yours)" % bad)
        return 2
    hang, on_hang = watch_settings(args, env)
    if hang:
        jobenv["TRSHIM_HANG_SEC"] = hang
    env.update(jobenv)
    watch = None if args.no_watch or env.get("TRSHIM_WATCH") == "0" else watcher_command(jobenv, hang, on_hang)
    if not ds_file:
        return run_job(final, env, watch)
    return run_with_env_file(final, env, ds_file, ds_old, ds_text, args.keep_env_file, watch)


def watch_settings(args, env):
    """(TRSHIM_HANG_SEC to set or None, report|abort): --hang-sec and --on-hang, else TRSHIM_HANG_SEC and
    TRSHIM_ON_HANG"""
    hang = args.hang_sec if args.hang_sec is not None else None
    on_hang = args.on_hang or env.get("TRSHIM_ON_HANG") or "report"
    if on_hang not in ("report", "abort"):
        say("ignoring TRSHIM_ON_HANG=%s (report or abort); reporting" % on_hang)
        on_hang = "report"
    return (("%g" % hang) if hang is not None else None), on_hang


def watcher_command(jobenv, hang, on_hang):
    """tranalyze --watch for the job, its launcher's pid to come (None: no tranalyze)"""
    ta = tranalyze_path()
    if not ta:
        say("run: tranalyze not found beside trshim nor in PATH: no answer while the job runs")
        return None
    cmd = [ta, "--watch", "--end-on-eof"]
    if jobenv.get("TRSHIM_JOB_ID"):
        cmd += ["--job", jobenv["TRSHIM_JOB_ID"]]
    if hang:
        cmd += ["--hang-sec", hang]
    if on_hang == "abort":
        cmd += ["--on-hang", "abort", "--signal-pid", "{pid}"]
    return cmd + ["--", jobenv["TRSHIM_DIR"]]


def start_watcher(watch, pid):
    if not watch:
        return None
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)        # the analyzer records nothing and simulates nothing
    try:
        # a session of its own: a terminal's ^C reaches the job; the watcher ends with standard input
        return subprocess.Popen([a.replace("{pid}", str(pid)) for a in watch], stdin=subprocess.PIPE,
                                env=env, start_new_session=True)
    except OSError as e:
        say("run: cannot start %s: %s: no answer while the job runs" % (watch[0], e.strerror))
        return None


def end_watcher(w):
    """the job ended: the watcher's final analysis, its verdict line"""
    if not w:
        return
    try:
        w.stdin.close()
    except OSError:
        pass
    try:
        w.wait(timeout=900)
    except subprocess.TimeoutExpired:
        say("run: the final analysis takes over 900 s: stopped (tranalyze DIR gives it)")
        w.kill()
        w.wait()


def run_job(cmd, env, watch):
    """the launcher and beside it the watcher; signals go to the launcher; the launcher's status"""
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as e:
        # as a shell: 127 not found, 126 found but not runnable (permission, not a program)
        found = e.errno not in (errno.ENOENT, errno.ENOTDIR)
        say("run: %s: %s%s" % (cmd[0], e.strerror, "" if found else " (command not found)"))
        return 126 if found else 127
    w = start_watcher(watch, child.pid)
    # SIGINT and SIGQUIT from a terminal reach the launcher too (same process group): not twice
    tty = sys.stdin.isatty() if sys.stdin else False
    prev = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        if tty and sig in (signal.SIGINT, signal.SIGQUIT):
            prev[sig] = signal.signal(sig, signal.SIG_IGN)
        else:
            prev[sig] = signal.signal(sig, lambda signo, frame: child.send_signal(signo))
    while True:
        try:
            rc = child.wait()
            break
        except InterruptedError:
            continue
    end_watcher(w)
    for sig, h in prev.items():
        signal.signal(sig, h)
    return exit_status(rc)


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None


def write_text(path, text):
    tmp = "%s.trshim.%d" % (path, os.getpid())
    mode = 0o644
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def run_with_env_file(cmd, env, path, old, text, keep, watch):
    """deepspeed: the .deepspeed_env is in place while the launcher runs, the
    user's own (or none) put back after"""
    try:
        write_text(path, text)
    except OSError as e:
        say("run: cannot write %s: %s" % (path, e.strerror))
        return 2
    try:
        return run_job(cmd, env, watch)
    finally:
        if not keep:
            try:
                if read_text(path) != text:
                    say("%s changed while the job ran: left as it is" % path)
                elif old is None:
                    os.unlink(path)
                else:
                    write_text(path, old)
            except OSError as e:          # the launcher's status stands; the file is named
                say("run: cannot put back %s: %s" % (path, e.strerror))
