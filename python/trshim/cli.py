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

Python 3.8 or newer, standard library only. The same file is the package's
command (the wheel: trshim.cli:main) and bin/trshim of a meson install, where
meson fills in the @...@ values below.
"""
import argparse
import errno
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import textwrap
import time

VERSION = "@VERSION@"
# bin/trshim of a meson install: the library folder relative to bindir, and absolute
REL_LIBDIR = "@REL_LIBDIR@"
ABS_LIBDIR = "@ABS_LIBDIR@"
# ... and the folder of packed_rows.py (the codec of version 2's calls and checks), relative to bindir, and absolute
REL_PYDIR = "@REL_PYDIR@"
ABS_PYDIR = "@ABS_PYDIR@"
LIBNAME = "libtrshim.so"

# The shim's job identity (shim/tr_core.c read_identity, docs/trace-format.md
# "Job identity"): the first of these that is set names the job.
SHIM_JOB_VARS = ("TRSHIM_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid",
                 "PMIX_NAMESPACE", "TRSIM_SHM_TAG")
# ... of which these are a launcher's (TRSIM_SHM_TAG is the simulator's, set per job by trsim-launch)
LAUNCHER_JOB_VARS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE")
# The shim's settings (shim/tr_core.c read_settings and the others' getenv): trshim run and env
# carry those set here to every rank
SHIM_SETTINGS = ("TRSHIM", "TRSHIM_DIR", "TRSHIM_JOB_ID", "TRSHIM_STACK_DEPTH", "TRSHIM_PYSTACK_DEPTH", "TRSHIM_RING",
                 "TRSHIM_HANG_SEC", "TRSHIM_SNAPSHOT_SIGNAL", "TRSHIM_COMPLETION", "TRSHIM_NANCHECK",
                 "TRSHIM_NANCHECK_ENGINE", "TRSHIM_NANCHECK_MAX_MB", "TRSHIM_NANCHECK_POOL_MB", "TRSHIM_STACK_CACHE",
                 "TRSHIM_KEEP_RING", "TRSHIM_QUIET", "TRSHIM_REDACT")
# CPython versions whose frames the shim reads (Python call sites; shim/tr_python*.c)
PY_SUPPORTED = ((3, 10), (3, 14))
# Default trace folder of the shim (TRSHIM_DIR unset): relative to each process's working folder
SHIM_DEFAULT_DIR = "./traces"
# Values DeepSpeed's launcher passes to other nodes unquoted (multinode_runner.py add_export)
DS_PLAIN_VALUE = re.compile(r"^[\w@%+=:,./-]*$")


def version():
    return VERSION if not VERSION.startswith("@") else "unknown (not installed)"


def say(msg):
    sys.stderr.write("trshim: %s\n" % msg)


def plural(n, word):
    """n and the word, plural unless n is 1: "1 trace", "2 traces"."""
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


# ---- where things are ---------------------------------------------------------------------

def _here():
    return os.path.dirname(os.path.realpath(__file__))


def library_path():
    """The absolute path of libtrshim.so: $TRSHIM_LIBRARY, else next to this
    package (the wheel), else the library folder of a meson install."""
    env = os.environ.get("TRSHIM_LIBRARY")
    if env:
        return os.path.abspath(env)
    here = _here()
    candidates = [os.path.join(here, LIBNAME)]
    if not REL_LIBDIR.startswith("@") and REL_LIBDIR:
        candidates.append(os.path.normpath(os.path.join(here, REL_LIBDIR, LIBNAME)))
    if not ABS_LIBDIR.startswith("@") and ABS_LIBDIR:
        candidates.append(os.path.join(ABS_LIBDIR, LIBNAME))
    for c in candidates:
        if os.path.isfile(c):
            return c
    return candidates[-1]


def tranalyze_path():
    """tranalyze: $TRSHIM_TRANALYZE, else beside bin/trshim (meson install), beside the
    running command (the wheel's scripts folder), the interpreter's scripts folder, PATH."""
    env = os.environ.get("TRSHIM_TRANALYZE")
    if env:
        return os.path.abspath(env)
    dirs = [_here()]
    if sys.argv and sys.argv[0]:
        dirs.append(os.path.dirname(os.path.abspath(sys.argv[0])))
    try:
        dirs.append(sysconfig.get_path("scripts"))
    except KeyError:
        pass
    dirs.append(os.path.dirname(sys.executable))
    for d in dirs:
        p = os.path.join(d, "tranalyze")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("tranalyze")


# ---- ELF: machine, GLIBC versions needed, dynamic symbols (no pyelftools) -----------------

ELF_MACHINES = {3: "i386", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64", 21: "ppc64le"}


class Elf:
    """Reads what trshim needs from an ELF file: machine, DT_NEEDED, the
    GLIBC_x.y versions it needs (.gnu.version_r), its dynamic symbols."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = data = f.read()
        if data[:4] != b"\x7fELF":
            raise ValueError("%s is not an ELF file" % path)
        self.is64 = data[4] == 2
        self.end = "<" if data[5] == 1 else ">"
        e = self.end
        if self.is64:
            (self.type, self.machine_id, _, _, _, shoff, _, _, _, _, shentsize, shnum, shstrndx) = \
                struct.unpack_from(e + "HHIQQQIHHHHHH", data, 16)
        else:
            (self.type, self.machine_id, _, _, _, shoff, _, _, _, _, shentsize, shnum, shstrndx) = \
                struct.unpack_from(e + "HHIIIIIHHHHHH", data, 16)
        self.sections = []
        for i in range(shnum):
            off = shoff + i * shentsize
            if self.is64:
                name, typ, _, addr, offset, size, link, info, _, entsize = struct.unpack_from(e + "IIQQQQIIQQ", data, off)
            else:
                name, typ, _, addr, offset, size, link, info, _, entsize = struct.unpack_from(e + "IIIIIIIIII", data, off)
            self.sections.append({"name_off": name, "type": typ, "offset": offset, "size": size, "link": link,
                                  "info": info, "entsize": entsize})
        if shnum and shstrndx < shnum:
            strtab = self.sections[shstrndx]
            for s in self.sections:
                s["name"] = self._str(strtab["offset"], s["name_off"])

    @property
    def machine(self):
        return ELF_MACHINES.get(self.machine_id, "machine %d" % self.machine_id)

    def _str(self, base, off):
        end = self.data.index(b"\0", base + off)
        return self.data[base + off:end].decode("utf-8", "replace")

    def section(self, name):
        return next((s for s in self.sections if s.get("name") == name), None)

    def needed(self):
        dyn, out = self.section(".dynamic"), []
        if not dyn:
            return out
        strtab = self.sections[dyn["link"]]
        fmt, step = (self.end + "qQ", 16) if self.is64 else (self.end + "iI", 8)
        for off in range(dyn["offset"], dyn["offset"] + dyn["size"], step):
            tag, val = struct.unpack_from(fmt, self.data, off)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                out.append(self._str(strtab["offset"], val))
        return out

    def version_needs(self):
        """{library: [version names]} from .gnu.version_r"""
        vr, out = self.section(".gnu.version_r"), {}
        if not vr:
            return out
        strtab = self.sections[vr["link"]]
        off, e = vr["offset"], self.end
        for _ in range(vr["info"] or 10000):
            _, cnt, file_, aux, nxt = struct.unpack_from(e + "HHIII", self.data, off)
            lib = self._str(strtab["offset"], file_)
            a = off + aux
            for _ in range(cnt):
                _, _, _, name, anext = struct.unpack_from(e + "IHHII", self.data, a)
                out.setdefault(lib, []).append(self._str(strtab["offset"], name))
                if not anext:
                    break
                a += anext
            if not nxt:
                break
            off += nxt
        return out

    def glibc_max(self):
        """the newest GLIBC_x.y version needed, as a tuple, or None"""
        best = None
        for names in self.version_needs().values():
            for n in names:
                m = re.match(r"^GLIBC_(\d+)\.(\d+)(?:\.(\d+))?$", n)
                if m:
                    v = tuple(int(x) for x in m.groups() if x is not None)
                    best = v if best is None or v > best else best
        return best

    def dynamic_symbols(self):
        """(defined, undefined): sets of .dynsym names"""
        ds = self.section(".dynsym")
        defined, undefined = set(), set()
        if not ds:
            return defined, undefined
        strtab = self.sections[ds["link"]]
        size = 24 if self.is64 else 16
        for off in range(ds["offset"] + size, ds["offset"] + ds["size"], size):
            if self.is64:
                name, info, _, shndx, _, _ = struct.unpack_from(self.end + "IBBHQQ", self.data, off)
            else:
                name, _, _, info, _, shndx = struct.unpack_from(self.end + "IIIBBH", self.data, off)
            if not name:
                continue
            (undefined if shndx == 0 else defined).add(self._str(strtab["offset"], name))
        return defined, undefined


def host_machine():
    m = os.uname().machine
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def glibc_version():
    try:
        name, ver = os.confstr("CS_GNU_LIBC_VERSION").split()
        return tuple(int(x) for x in ver.split(".")[:2]) if name == "glibc" else None
    except (ValueError, OSError, AttributeError):
        return None


# ---- the environment of a recorded job ---------------------------------------------------

def split_preload(value):
    return [p for p in re.split(r"[: ]+", value or "") if p]


def preload_with_shim(lib, existing):
    """LD_PRELOAD with the shim first; any other libtrshim.so dropped (one shim per process)"""
    rest = [p for p in split_preload(existing) if os.path.basename(p) != LIBNAME]
    return ":".join([lib] + rest)


def default_job_id():
    host = socket.gethostname().split(".")[0][:24] or "host"
    return "%s-%s-%d" % (time.strftime("%Y%m%d-%H%M%S"), host, os.getpid())


def torchrun_multinode(cmd, i):
    """torchrun started once per node (--nnodes other than 1): each node's
    trshim would draw its own id, so none is set (the shim uses the
    communicator's id, the same on every rank, or torchrun's --rdzv-id)"""
    args = cmd[i + 1:]
    for k, a in enumerate(args):
        if a == "--":
            break
        for opt in ("--nnodes", "--nnodes_", "--rdzv-id", "--rdzv_id", "--rdzv-endpoint", "--rdzv_endpoint"):
            val = None
            if a == opt and k + 1 < len(args):
                val = args[k + 1]
            elif a.startswith(opt + "="):
                val = a.split("=", 1)[1]
            if val is None:
                continue
            if opt.startswith("--nnodes") and val not in ("1", "1:1"):
                return True
            if opt.startswith("--rdzv-id") or opt.startswith("--rdzv_id"):
                return True
    return False


def choose_job_id(asked, env, cmd=None, launcher=None):
    """(value to set or None, why)"""
    if asked:
        return asked, "--job"
    if env.get("TRSHIM_JOB_ID"):
        return env["TRSHIM_JOB_ID"], "TRSHIM_JOB_ID"
    for v in LAUNCHER_JOB_VARS:
        val = env.get(v)
        if val and not (v == "TORCHELASTIC_RUN_ID" and val == "none"):
            return None, "the shim names the job from %s in each rank" % v
    if launcher and launcher[0] == "torchrun" and torchrun_multinode(cmd, launcher[1]):
        return None, ("torchrun on several nodes: each rank's job id is torchrun's --rdzv-id, else the "
                      "first communicator's id (the same on every rank); --job ID names it")
    return default_job_id(), "new"


def trshim_settings(env):
    """the shim's settings set in this environment (they travel with the job)"""
    return {k: env[k] for k in SHIM_SETTINGS if env.get(k)}


def job_environment(args, env, cmd=None, launcher=None):
    """(the variables to set, job id explanation)"""
    lib = os.path.abspath(args.library) if getattr(args, "library", None) else library_path()
    out = {}
    out["LD_PRELOAD"] = preload_with_shim(lib, env.get("LD_PRELOAD", ""))
    d = args.dir or env.get("TRSHIM_DIR") or SHIM_DEFAULT_DIR
    out["TRSHIM_DIR"] = os.path.abspath(d)
    job, why = choose_job_id(args.job_id, env, cmd, launcher)
    if job:
        out["TRSHIM_JOB_ID"] = job
    if getattr(args, "quiet", False):
        out["TRSHIM_QUIET"] = "1"     # the "recording to" line is the shim's, once per host
    for k, v in trshim_settings(env).items():
        out.setdefault(k, v)
    return lib, out, why


# ---- launchers -------------------------------------------------------------------------

ENV_OPTS_WITH_ARG = ("-u", "--unset", "-C", "--chdir", "-S", "--split-string")


def find_launcher(cmd):
    """(name, index of the launcher's argv[0] in cmd) or (None, 0): looks
    past `env [-i] [VAR=VALUE]...` and `python -m MODULE`"""
    i = 0
    while i < len(cmd):
        base = os.path.basename(cmd[i])
        if base == "env":
            i += 1
            while i < len(cmd) and (cmd[i].startswith("-") or "=" in cmd[i]):
                i += 2 if cmd[i] in ENV_OPTS_WITH_ARG else 1
            continue
        if re.match(r"^python[0-9.]*$", base):
            k = i + 1
            while k < len(cmd) and cmd[k].startswith("-") and cmd[k] != "-m":
                k += 1
            if k + 1 < len(cmd) and cmd[k] == "-m":
                mod = cmd[k + 1]
                if mod in ("torch.distributed.run", "torch.distributed.launch"):
                    return "torchrun", k + 1
                if mod in ("deepspeed.launcher.runner",):
                    return "deepspeed", k + 1
            return None, i
        if base in ("deepspeed", "ds"):
            return "deepspeed", i
        if base in ("mpirun", "mpiexec", "orterun", "prterun", "oshrun", "mpiexec.hydra", "mpiexec.openmpi",
                    "mpirun.openmpi", "mpiexec.mpich", "mpirun.mpich"):
            return "mpi", i
        if base == "srun":
            return "srun", i
        if base in ("torchrun", "torch-run"):
            return "torchrun", i
        if base == "colossalai" and i + 1 < len(cmd) and cmd[i + 1] == "run":
            # its ssh runner hands every node the whole environment (one-line values): nothing to add
            return "colossalai", i
        if base in ("ssh", "pdsh", "clush", "parallel-ssh", "pssh"):
            return "ssh", i
        return None, i
    return None, 0


def mpi_flavour(prog, asked=None):
    """openmpi (-x NAME) or hydra (MPICH, Intel MPI: -genv NAME VALUE)"""
    if asked:
        return asked
    base = os.path.basename(prog)
    if "mpich" in base or "hydra" in base:
        return "hydra"
    if "openmpi" in base or base in ("orterun", "prterun", "oshrun"):
        return "openmpi"
    try:
        out = subprocess.run([prog, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, timeout=20).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return "openmpi"
    if re.search(r"HYDRA|MPICH|Intel\(R\) MPI", out):
        return "hydra"
    return "openmpi"


def rewrite_mpi(cmd, i, jobenv, flavour):
    """Open MPI: -x NAME for each variable (the values from the environment
    trshim sets), an existing -x LD_PRELOAD=VALUE gets the shim in front;
    MPICH/Intel MPI (Hydra): -genv NAME VALUE"""
    head, rest = cmd[:i + 1], list(cmd[i + 1:])
    names = list(jobenv)
    if flavour == "hydra":
        for k, a in enumerate(rest):
            if a in ("-genv", "-env") and k + 2 < len(rest) and rest[k + 1] in names:
                if rest[k + 1] == "LD_PRELOAD":
                    rest[k + 2] = preload_with_shim(split_preload(jobenv["LD_PRELOAD"])[0], rest[k + 2])
                else:
                    rest[k + 2] = jobenv[rest[k + 1]]
                names.remove(rest[k + 1])
        extra = []
        for n in names:
            extra += ["-genv", n, jobenv[n]]
        return head + extra + rest
    for k, a in enumerate(rest):
        if a in ("-x", "--x") and k + 1 < len(rest):
            name, eq, val = rest[k + 1].partition("=")
            if name in names:
                if eq and name == "LD_PRELOAD":
                    rest[k + 1] = "LD_PRELOAD=" + preload_with_shim(split_preload(jobenv["LD_PRELOAD"])[0], val)
                elif eq:
                    rest[k + 1] = "%s=%s" % (name, jobenv[name])
                names.remove(name)
    extra = []
    for n in names:
        extra += ["-x", n]
    return head + extra + rest


def rewrite_srun(cmd, i, jobenv):
    """srun passes the whole environment unless --export names a list: our
    variables are added to it; NONE/NIL cannot carry them (a warning)"""
    out = list(cmd)
    for k in range(i + 1, len(out)):
        a = out[k]
        if a == "--":
            break
        val, key = None, None
        if a.startswith("--export="):
            val, key = a.split("=", 1)[1], "eq"
        elif a == "--export" and k + 1 < len(out):
            val, key = out[k + 1], "next"
        if val is None:
            continue
        words = val.split(",")
        if words[0] in ("NONE", "NIL"):
            say("srun %s: the tasks get no LD_PRELOAD from here; set it in the batch script "
                "(trshim env) or use --export=ALL" % a)
            return out
        if words[0] == "ALL":
            return out
        have = {w.split("=", 1)[0] for w in words}
        val = ",".join(words + [n for n in jobenv if n not in have])
        if key == "eq":
            out[k] = "--export=" + val
        else:
            out[k + 1] = val
        return out
    return out


def deepspeed_env_file(env):
    """the .deepspeed_env trshim writes: DeepSpeed's launcher (launcher/runner.py)
    reads DEEPSPEED_ENVIRONMENT_NAME = $DS_ENV_FILE or .deepspeed_env in ~ and
    then in the working folder (the later one wins) and exports each
    KEY=VALUE line to every node of a multi-node run"""
    name = env.get("DS_ENV_FILE") or ".deepspeed_env"
    home = os.path.join(os.path.expanduser("~"), name)
    here = os.path.join(os.getcwd(), name)
    return home, here


def parse_env_lines(text):
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def deepspeed_env_text(old_text, lib, jobenv, home_text=""):
    """old_text with our variables set (LD_PRELOAD: the shim in front of the
    file's own, else of ~/.deepspeed_env's); every line KEY=VALUE (DeepSpeed
    splits each line at its first '=': no comments, no blank lines)"""
    old = parse_env_lines(old_text)
    home = parse_env_lines(home_text)
    want = dict(jobenv)
    want["LD_PRELOAD"] = preload_with_shim(lib, old.get("LD_PRELOAD", home.get("LD_PRELOAD", "")))
    lines, done = [], set()
    for line in old_text.splitlines():
        if not line.strip():
            continue
        k = line.split("=", 1)[0].strip() if "=" in line else None
        if k in want:
            if k not in done:
                lines.append("%s=%s" % (k, want[k]))
                done.add(k)
            continue
        lines.append(line)
    for k, v in want.items():
        if k not in done:
            lines.append("%s=%s" % (k, v))
    return "\n".join(lines) + "\n"


# ---- trshim run -------------------------------------------------------------------------

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


def prepare_folder(d):
    """None when the shim can record into d (made, mode 0700, when missing), else why it cannot"""
    if os.path.realpath(d) == "/":
        return "the trace folder cannot be / (every rank writes two files into it)"
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
    except OSError as e:
        return "cannot make the trace folder %s: %s" % (d, e.strerror)
    return folder_problem(d)


def folder_problem(d):
    """None when d, an existing folder, passes the shim's rules (shim/tr_files.c) and takes a new file,
    else why not"""
    me = os.geteuid()
    path = "/"
    for part in [p for p in d.split("/") if p]:
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except OSError:
            break
        if os.path.islink(path) and st.st_uid not in (me, 0):
            return "%s is a symbolic link owned by uid %d: the shim refuses it" % (path, st.st_uid)
    try:
        st = os.stat(d)
    except OSError as e:
        return "%s: %s" % (d, e.strerror)
    if not os.path.isdir(d):
        return "%s is not a folder" % d
    if st.st_uid not in (me, 0):
        return "%s is owned by uid %d, not by this user (uid %d) or root: the shim refuses it" % (d, st.st_uid, me)
    if st.st_mode & 0o022 and not st.st_mode & 0o1000:
        return ("%s is writable by group or others without the sticky bit (mode %04o): the shim refuses it" %
                (d, st.st_mode & 0o7777))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".trshim-check.", dir=d)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        return "%s: cannot create a file: %s" % (d, e.strerror)
    return None


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


def check_library_path(lib):
    problems = []
    if not os.path.isfile(lib):
        problems.append("%s not found (set TRSHIM_LIBRARY or reinstall trshim)" % lib)
    if re.search(r"[\s:]", lib):
        problems.append("%s: LD_PRELOAD cannot name a path with a space or a colon; use a copy or a link "
                        "elsewhere (TRSHIM_LIBRARY=PATH)" % lib)
    return problems


# ---- trshim env -----------------------------------------------------------------------

def cmd_env(args):
    env = dict(os.environ)
    if args.format == "k8s" and not args.dir and not env.get("TRSHIM_DIR"):
        args.dir = "/traces"
    lib, jobenv, why = job_environment(args, env)
    if not args.job_id and "TRSHIM_JOB_ID" in jobenv and not env.get("TRSHIM_JOB_ID"):
        del jobenv["TRSHIM_JOB_ID"]      # a job id is per job: only when asked for
    for p in check_library_path(lib):
        say("env: " + p)
    fmt = args.format
    if fmt == "sh":
        print("# trshim %s: record every rank (sbatch script, ~/.bashrc, a job's environment)" % version())
        print('export LD_PRELOAD=%s${LD_PRELOAD:+:$LD_PRELOAD}' % shlex.quote(lib))
        for k, v in jobenv.items():
            if k != "LD_PRELOAD":
                print("export %s=%s" % (k, shlex.quote(v)))
        if "TRSHIM_JOB_ID" not in jobenv:
            print("# job id: SLURM_JOB_ID.SLURM_STEP_ID under srun, torchrun's --rdzv-id, Open MPI's job, "
                  "else the first communicator's id (export TRSHIM_JOB_ID=... to name it)")
    elif fmt == "deepspeed":
        # the lines of .deepspeed_env: KEY=VALUE only (no comments: DeepSpeed splits every line at '=')
        for k, v in jobenv.items():
            print("%s=%s" % (k, v))
    elif fmt == "mpirun":
        print(" ".join("-x %s" % shlex.quote("%s=%s" % (k, v)) for k, v in jobenv.items()))
    elif fmt == "k8s":
        print("# trshim %s: the container's env (libtrshim.so at this path in the image: pip install trshim;" % version())
        print("# %s on a volume that outlives the pod)" % jobenv["TRSHIM_DIR"])
        print("env:")
        for k, v in jobenv.items():
            print("  - name: %s" % k)
            print("    value: %s" % json.dumps(v))
        if "TRSHIM_JOB_ID" not in jobenv:
            print("  - name: TRSHIM_JOB_ID          # the Job's name: the same on every pod of the job")
            print("    valueFrom:")
            print("      fieldRef:")
            print("        fieldPath: metadata.labels['job-name']")
    return 0


# ---- trshim doctor ------------------------------------------------------------------

class Report:
    def __init__(self):
        self.failed = self.warned = 0

    def line(self, level, what, text):
        if level == "FAIL":
            self.failed += 1
        elif level == "warn":
            self.warned += 1
        print("%-4s  %-14s %s" % (level, what, text))


PROBE = r'''
import ctypes, json, os, sys
out = {"python": list(sys.version_info[:3]), "implementation": sys.implementation.name,
       "executable": sys.executable, "libs": {}, "wheels": {}, "packages": {}}
def loaded(name):
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if os.path.basename(p).startswith(name):
                    return p
    except OSError:
        pass
    return None
def version(lib, fn):
    try:
        v = ctypes.c_int(0)
        if getattr(lib, fn)(ctypes.byref(v)) == 0:
            return v.value
    except Exception:
        pass
    return None
def probe(names, stem, fn):
    for n in names:
        try:
            lib = ctypes.CDLL(n, mode=ctypes.RTLD_LOCAL)
        except OSError:
            continue
        return {"path": loaded(stem) or n, "version": version(lib, fn)}
    return None
if "--wheels" not in sys.argv:
    out["libs"]["cudart"] = probe(["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"],
                                  "libcudart.so", "cudaRuntimeGetVersion")
    out["libs"]["nccl"] = probe(["libnccl.so.2", "libnccl.so"], "libnccl.so", "ncclGetVersion")
    out["libs"]["cuda"] = probe(["libcuda.so.1"], "libcuda.so", "cuDriverGetVersion")
else:
    for entry in sys.path:
        base = os.path.join(entry or ".", "nvidia")
        if not os.path.isdir(base):
            continue
        for sub in sorted(os.listdir(base)):
            libdir = os.path.join(base, sub, "lib")
            if not os.path.isdir(libdir):
                continue
            for f in sorted(os.listdir(libdir)):
                for stem, fn in (("libcudart.so", "cudaRuntimeGetVersion"), ("libnccl.so", "ncclGetVersion")):
                    if f.startswith(stem) and stem[3:-3] not in out["wheels"]:
                        p = os.path.join(libdir, f)
                        try:
                            lib = ctypes.CDLL(p, mode=ctypes.RTLD_LOCAL)
                            out["wheels"][stem[3:-3]] = {"path": p, "version": version(lib, fn)}
                        except OSError as e:
                            out["wheels"][stem[3:-3]] = {"path": p, "version": None, "error": str(e)}
    try:
        import importlib.util
        from importlib import metadata
    except ImportError:
        metadata = None
    for pkg in ("torch", "deepspeed"):
        try:
            spec = importlib.util.find_spec(pkg)
        except Exception:
            spec = None
        if not spec or not spec.origin:
            continue
        info = {"dir": os.path.dirname(spec.origin)}
        try:
            info["version"] = metadata.version(pkg)
        except Exception:
            pass
        if pkg == "torch":
            try:
                with open(os.path.join(info["dir"], "version.py")) as f:
                    text = f.read()
                import re
                m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]", text, re.M)
                info["cuda"] = m.group(1) if m else None
            except OSError:
                pass
        out["packages"][pkg] = info
print(json.dumps(out))
'''


def run_probe(python, wheels, env):
    try:
        r = subprocess.run([python, "-c", PROBE] + (["--wheels"] if wheels else []), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return None, str(e)
    if r.returncode != 0:
        return None, (r.stderr.decode("utf-8", "replace").strip().splitlines() or ["exit %d" % r.returncode])[-1]
    try:
        return json.loads(r.stdout.decode().strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "no answer"


def fmt_cuda(v):
    return "%d.%d" % (v // 1000, (v % 1000) // 10) if v else "version unknown"


def fmt_nccl(v):
    if not v:
        return "version unknown"
    if v >= 10000:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def doctor_library(rep, lib):
    if not os.path.isfile(lib):
        rep.line("FAIL", "library", "%s not found (TRSHIM_LIBRARY, or reinstall trshim)" % lib)
        return False
    rep.line("ok", "library", lib)
    try:
        elf = Elf(lib)
    except (OSError, ValueError, struct.error) as e:
        rep.line("FAIL", "library", "%s cannot be read as ELF: %s" % (lib, e))
        return False
    if elf.machine != host_machine():
        rep.line("FAIL", "library", "built for %s, this machine is %s" % (elf.machine, host_machine()))
        return False
    need, have = elf.glibc_max(), glibc_version()
    if need and have:
        level = "ok" if have >= need else "FAIL"
        rep.line(level, "glibc", "this machine has %s, the library needs %s or newer" %
                 (".".join(map(str, have)), ".".join(map(str, need))))
    if re.search(r"[\s:]", lib):
        rep.line("FAIL", "library", check_library_path(lib)[-1])
    return True


def doctor_preload(rep, lib):
    true = shutil.which("true") or "/bin/true"
    env = dict(os.environ, LD_PRELOAD=preload_with_shim(lib, os.environ.get("LD_PRELOAD", "")))
    try:
        r = subprocess.run([true], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        rep.line("FAIL", "preload", "%s could not run: %s" % (true, e))
        return
    err = r.stderr.decode("utf-8", "replace").strip()
    if r.returncode != 0 or "ld.so" in err or "cannot be preloaded" in err or "error while loading" in err:
        rep.line("FAIL", "preload", "%s with LD_PRELOAD=%s: exit %d: %s" % (true, lib, r.returncode,
                                                                              err.splitlines()[-1] if err else ""))
    elif err:
        rep.line("warn", "preload", "%s with the shim preloaded printed: %s" % (true, err.splitlines()[0]))
    else:
        rep.line("ok", "preload", "%s runs with the shim preloaded (no loader error)" % true)


def doctor_c_libs(rep, python, env):
    """the loader's CUDA and NCCL libraries: the probe's answer (None: no answer)"""
    res, err = run_probe(python, False, env)
    if not res:
        rep.line("warn", "C programs", "could not look (%s)" % err)
        return None
    libs = res["libs"]
    for key, what, fmt in (("cudart", "libcudart", fmt_cuda), ("nccl", "libnccl", fmt_nccl),
                           ("cuda", "libcuda", fmt_cuda)):
        info = libs.get(key)
        if info:
            rep.line("ok", what, "%s %s (what the loader gives a C program: LD_LIBRARY_PATH, ldconfig)" %
                     (info["path"], fmt(info["version"])))
        else:
            rep.line("info", what, "not found by the loader (LD_LIBRARY_PATH, ldconfig): a C program links it "
                     "from its own RPATH or not at all%s" % ("; no GPU driver here?" if key == "cuda" else ""))
    return res


KERNEL_DRIVER = "/proc/driver/nvidia/version"     # the NVIDIA kernel module's, when loaded


def doctor_driver(rep, c_res, py_res):
    """CUDA libraries (the loader's, NVIDIA's wheels, a CUDA build of PyTorch) without the GPU driver
    (libcuda.so.1, which the driver installs): a job on this node cannot use a GPU, a warning"""
    have = []
    libs = (c_res or {}).get("libs") or {}
    for key, what, fmt in (("cudart", "libcudart", fmt_cuda), ("nccl", "libnccl", fmt_nccl)):
        if libs.get(key):
            have.append("%s %s" % (what, fmt(libs[key].get("version"))))
    for res in py_res:
        for key in ("cudart", "nccl"):
            if (res.get("wheels") or {}).get(key) and "NVIDIA's wheels" not in have:
                have.append("NVIDIA's wheels")
        torch = (res.get("packages") or {}).get("torch") or {}
        if torch.get("cuda"):
            have.append("PyTorch %s with CUDA %s" % (torch.get("version", "?"), torch["cuda"]))
    if not have or libs.get("cuda") or c_res is None:
        return
    kernel = None
    try:
        with open(KERNEL_DRIVER) as f:
            kernel = f.readline().strip()
    except OSError:
        pass
    rep.line("warn", "GPU driver", "CUDA libraries are here (%s) but the GPU driver's libcuda.so.1 is not found by the "
             "loader: %s" % (", ".join(have), "the kernel driver is loaded (%s): the container or environment lacks "
                             "its user-space libraries (the NVIDIA container toolkit mounts them)" % kernel if kernel else
                             "no NVIDIA kernel driver either (%s): a job on this node cannot use a GPU; run trshim "
                             "doctor on a GPU node or in the job's container" % KERNEL_DRIVER))


def doctor_python(rep, python, env, seen):
    """the Python's version, NVIDIA's wheels and frameworks: the probe's answer (None: none, or seen)"""
    res, err = run_probe(python, True, env)
    if not res:
        rep.line("warn", "Python", "%s: could not look (%s)" % (python, err))
        return None
    if os.path.realpath(res["executable"]) in seen:        # python3 in PATH: this one again
        return None
    seen.add(os.path.realpath(res["executable"]))
    v = tuple(res["python"][:2])
    name = "%s %s" % (res["implementation"], ".".join(map(str, res["python"])))
    if res["implementation"] != "cpython":
        rep.line("warn", "Python", "%s (%s): not CPython, call sites are native frames only" % (res["executable"], name))
    elif PY_SUPPORTED[0] <= v <= PY_SUPPORTED[1]:
        rep.line("ok", "Python", "%s (%s): Python call sites recorded (CPython %d.%d-%d.%d)" %
                 ((res["executable"], name) + PY_SUPPORTED[0] + PY_SUPPORTED[1]))
    else:
        rep.line("warn", "Python", "%s (%s): the shim reads the frames of CPython %d.%d-%d.%d only: call sites "
                 "are native frames" % ((res["executable"], name) + PY_SUPPORTED[0] + PY_SUPPORTED[1]))
    wheels = res.get("wheels", {})
    for key, what, fmt in (("cudart", "  libcudart", fmt_cuda), ("nccl", "  libnccl", fmt_nccl)):
        info = wheels.get(key)
        if info:
            rep.line("ok", what, "%s %s (NVIDIA's wheel: what PyTorch from PyPI loads)" % (info["path"],
                                                                                          fmt(info["version"])))
    pk = res.get("packages", {})
    torch = pk.get("torch")
    if torch:
        rep.line("ok", "  torch", "%s (CUDA %s) in %s" % (torch.get("version", "?"), torch.get("cuda") or "none",
                                                          torch["dir"]))
        check_torch_nccl(rep, torch["dir"])
    if pk.get("deepspeed"):
        rep.line("ok", "  deepspeed", "%s" % pk["deepspeed"].get("version", "?"))
    if not wheels and not torch:
        rep.line("info", "  libraries", "no NVIDIA wheels or PyTorch in this Python")
    return res


def check_torch_nccl(rep, tdir):
    """NCCL linked into libtorch_cuda.so cannot be seen through LD_PRELOAD"""
    lib = os.path.join(tdir, "lib", "libtorch_cuda.so")
    if not os.path.isfile(lib):
        return
    try:
        defined, undefined = Elf(lib).dynamic_symbols()
    except (OSError, ValueError, struct.error):
        return
    if "ncclCommInitRank" in undefined:
        rep.line("ok", "  torch NCCL", "libtorch_cuda.so calls libnccl through the dynamic linker (recordable)")
    elif "ncclCommInitRank" in defined:
        rep.line("FAIL", "  torch NCCL", "libtorch_cuda.so defines NCCL itself (linked statically): the shim "
                 "cannot see its calls; use a PyTorch build with a shared libnccl (PyPI's)")
    else:
        rep.line("warn", "  torch NCCL", "libtorch_cuda.so neither imports nor exports ncclCommInitRank: NCCL "
                 "may be linked in statically, out of the shim's sight")


def doctor_folder(rep, d):
    d = os.path.abspath(d)
    probe = d
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if probe != d:
        if not os.access(probe, os.W_OK | os.X_OK):
            rep.line("FAIL", "trace folder", "%s does not exist and %s is not writable" % (d, probe))
            return
        rep.line("ok", "trace folder", "%s does not exist yet: the shim makes it (mode 0700)" % d)
    else:
        bad = folder_problem(d)
        if bad:
            rep.line("FAIL", "trace folder", bad)
            return
        rep.line("ok", "trace folder", "%s is writable" % d)
    try:
        sv = os.statvfs(probe)
        free = sv.f_bavail * sv.f_frsize
        level = "ok" if free >= 1 << 30 else "warn"
        rep.line(level, "free space", "%.1f GiB free in %s%s" % (free / float(1 << 30), probe,
                 "" if level == "ok" else ": each rank writes a ring file and a JSON trace"))
    except OSError as e:
        rep.line("warn", "free space", "%s: %s" % (probe, e.strerror))
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if soft != resource.RLIM_INFINITY:
            rep.line("warn", "file size", "ulimit -f is %d bytes: the shim sizes its files to fit, fewer calls "
                     "are kept" % soft)
    except (ImportError, OSError, ValueError):
        pass


def cmd_doctor(args):
    rep = Report()
    glibc = glibc_version()
    print("trshim %s doctor on %s (%s, %s)" % (version(), socket.gethostname(), host_machine(),
                                               "glibc " + ".".join(map(str, glibc)) if glibc else "no glibc"))
    lib = os.path.abspath(args.library) if args.library else library_path()
    if doctor_library(rep, lib):
        doctor_preload(rep, lib)
    ta = tranalyze_path()
    rep.line("ok" if ta else "warn", "tranalyze", ta or "not found beside trshim nor in PATH")
    env = dict(os.environ, TRSHIM="0")
    pythons = args.python or []
    if not pythons:
        for p in (sys.executable, shutil.which("python3")):
            if p and os.path.realpath(p) not in [os.path.realpath(x) for x in pythons]:
                pythons.append(p)
    c_res = doctor_c_libs(rep, pythons[0], env)
    seen, py_res = set(), []
    for p in pythons:
        r = doctor_python(rep, p, env, seen)
        if r:
            py_res.append(r)
    doctor_driver(rep, c_res, py_res)
    doctor_folder(rep, args.dir or os.environ.get("TRSHIM_DIR") or SHIM_DEFAULT_DIR)
    print("%d problem%s, %d warning%s" % (rep.failed, "" if rep.failed == 1 else "s", rep.warned,
                                          "" if rep.warned == 1 else "s"))
    return 1 if rep.failed else 0


# ---- trshim bundle: one file to attach to a bug report ------------------------------------
#
# The job's JSON traces, the ring files that hold what its traces do not
# (compacted), tranalyze's reports and MANIFEST.txt, in one .tar.gz. A ring
# file (include/trshim/ring_format.h) is ~50 MB of mostly holes, and Python's
# tarfile writes no sparse members: a ring is bundled rewritten to what a
# reader uses (docs/trace-format.md, "Compacted ring files"): the header with
# capacity, max_comms, the offsets, blob_bytes and file_bytes adjusted; the
# communicator slots handed out; the record window [max(0, head - capacity),
# head) with capacity' = its length, so that record i is in slot i %
# capacity' = the same slot (head <= capacity: the first head slots;
# head > capacity: all of them) and the records lost before the window stay
# lost; the blobs up to the first zero kind. tranalyze reads it as it read
# the original file.

TRACE_PREFIX = "trshim."
RING_MAGIC = b"TRSHRING"
RING_HEADER = struct.Struct("<8sIIIIQII5Q4idQ64s256s32s32s16sIIQIiiIQQQQQ")
RING_FIELDS = ("magic", "version", "header_bytes", "record_bytes", "comm_bytes", "capacity", "max_comms",
               "fp_interval", "off_comms", "off_records", "off_blobs", "blob_bytes", "file_bytes", "pid", "env_rank",
               "world_size", "local_rank", "start_realtime", "start_mono_ns", "host", "job_id", "job_source",
               "rank_source", "trshim_version", "stack_depth", "pad0", "head", "ncomms", "state", "signo", "writes",
               "heartbeat_ns", "end_ns", "blob_used", "stacks_dropped", "comms_dropped")
RING_COMM = struct.Struct("<IiQQiiiiiIQiiii")        # trr_comm from valid to rank (from_uid, size, rank last)
RING_RUNNING, RING_EXITED, RING_SIGNALED = 1, 2, 3
RING_AREA_MAX, RING_COMMS_MAX = 1 << 56, 1 << 16    # analyzer/ring_int.h: beyond them is damage
RING_CHUNK = 1 << 20
REPORTS = ("report.html", "timeline.json")              # made when this tranalyze has --html / --timeline


class BundleError(Exception):
    """a problem that stops the bundle: the message names the file"""


def _open_plain(path):
    """a regular file of the folder, opened without following a link and without blocking (a FIFO)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        raise BundleError("%s: cannot open: %s" % (path, e.strerror))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise BundleError("%s: not a regular file" % path)
    return fd, st


def _pread(fd, n, off, path):
    """n bytes at off; zeros past the end of the file"""
    parts, got = [], 0
    try:
        while got < n:
            k = os.pread(fd, min(n - got, 1 << 24), off + got)
            if not k:
                break
            parts.append(k)
            got += len(k)
    except OSError as e:
        raise BundleError("%s: cannot read: %s" % (path, e.strerror))
    return b"".join(parts) + b"\0" * (n - got)


def ring_header(path, fd, size):
    """a ring file's header (a dict) and its communicator slots' identity; BundleError naming the
    file when the header cannot be trusted (tranalyze's checks, analyzer/ring.c check_header)"""
    if size < RING_HEADER.size:
        raise BundleError("%s: damaged ring file: %d bytes, shorter than a ring header" % (path, size))
    raw = _pread(fd, 4096, 0, path)
    h = dict(zip(RING_FIELDS, RING_HEADER.unpack_from(raw, 0)))

    def bad(why):
        return BundleError("%s: damaged ring header: %s" % (path, why))
    if h["magic"] != RING_MAGIC:
        raise bad("never completed (the process stopped while creating the file)" if h["magic"] == b"\0" * 8
                  else "no %s magic" % RING_MAGIC.decode())
    if h["version"] != 1:
        raise bad("ring format version %d (this trshim knows 1)" % h["version"])
    if (h["header_bytes"], h["record_bytes"], h["comm_bytes"]) != (4096, 128, 1024):
        raise bad("header/record/communicator sizes %d/%d/%d" % (h["header_bytes"], h["record_bytes"],
                                                                  h["comm_bytes"]))
    if not (1 <= h["capacity"] <= 1 << 40 and h["max_comms"] <= RING_COMMS_MAX and
            4096 <= h["off_comms"] <= RING_AREA_MAX and
            h["off_comms"] + h["max_comms"] * 1024 <= h["off_records"] <= RING_AREA_MAX and
            h["off_records"] + h["capacity"] * 128 <= h["off_blobs"] <= RING_AREA_MAX and
            h["blob_bytes"] <= RING_AREA_MAX and h["off_blobs"] + h["blob_bytes"] <= h["file_bytes"]):
        raise bad("the areas do not fit together (capacity %d, max_comms %d, communicators at %d, records at %d, "
                  "blobs at %d + %d, file %d bytes)" % tuple(h[k] for k in (
                      "capacity", "max_comms", "off_comms", "off_records", "off_blobs", "blob_bytes", "file_bytes")))
    if h["head"] > RING_AREA_MAX:
        raise bad("head %d" % h["head"])
    if h["start_mono_ns"] >= 1 << 63 or not -1e300 < h["start_realtime"] < 1e300:
        raise bad("start clocks %r / %d" % (h["start_realtime"], h["start_mono_ns"]))
    h["raw"], h["size"] = raw, size
    for k in ("host", "job_id"):
        h[k] = h[k].split(b"\0", 1)[0].decode("utf-8", "replace")
    h["nslots"] = min(h["ncomms"], h["max_comms"])
    slots = _pread(fd, h["nslots"] * 1024, h["off_comms"], path)
    h["slots"] = []
    for i in range(h["nslots"]):
        v = RING_COMM.unpack_from(slots, i * 1024)
        h["slots"].append({"valid": v[0], "id": v[2], "from_uid": v[12], "rank": v[14]})
    return h


def ring_job(h):
    """the job of a ring's own trace, as tranalyze names it (analyzer/ring_trace.c build)"""
    if h["job_id"]:
        return h["job_id"]
    for s in h["slots"]:
        if s["valid"] == 1 and s["rank"] >= 0 and s["from_uid"] == 1:
            return "0x%x" % s["id"]
    return "%s-%d" % (h["host"], h["pid"])


def ring_blobs_used(path, fd, h):
    """bytes of the blob area a reader goes through: up to the first zero kind; of a damaged
    blob its header is kept (the reader then notes the same damage at the same place)"""
    start = h["off_blobs"]
    length = max(0, min(h["blob_bytes"], h["size"] - start))
    buf, boff, pos = b"", 0, 0
    while pos + 8 <= length:
        if not (boff <= pos and pos + 8 <= boff + len(buf)):
            boff, buf = pos, _pread(fd, min(RING_CHUNK, length - pos), start + pos, path)
        kind, nbytes = struct.unpack_from("<II", buf, pos - boff)
        if kind == 0:
            return pos
        if nbytes % 8 or nbytes > length - pos - 8:
            return pos + 8
        pos += 8 + nbytes
    return pos


def compact_ring(path, fd, h, out):
    """the compacted ring (above) written to the file out: {bytes, records, comms, blobs}"""
    window = min(h["head"], h["capacity"])
    cap = max(1, window)
    ncomms = h["max_comms"] if h["comms_dropped"] else h["nslots"]   # the reader's note of dropped ones names it
    blobs = ring_blobs_used(path, fd, h)
    off_comms = 4096
    off_records = (off_comms + ncomms * 1024 + 4095) // 4096 * 4096
    off_blobs = off_records + cap * 128
    new = dict(capacity=cap, max_comms=ncomms, off_comms=off_comms, off_records=off_records, off_blobs=off_blobs,
               blob_bytes=blobs, file_bytes=off_blobs + blobs)
    values = [new.get(k, v) for k, v in zip(RING_FIELDS, RING_HEADER.unpack_from(h["raw"], 0))]
    with open(out, "wb") as f:
        f.write(RING_HEADER.pack(*values) + h["raw"][RING_HEADER.size:])
        f.write(_pread(fd, h["nslots"] * 1024, h["off_comms"], path))
        f.write(b"\0" * (off_records - off_comms - h["nslots"] * 1024))
        for pos in range(0, window * 128, RING_CHUNK):
            f.write(_pread(fd, min(RING_CHUNK, window * 128 - pos), h["off_records"] + pos, path))
        f.write(b"\0" * ((cap - window) * 128))
        for pos in range(0, blobs, RING_CHUNK):
            f.write(_pread(fd, min(RING_CHUNK, blobs - pos), h["off_blobs"] + pos, path))
    return {"bytes": off_blobs + blobs, "records": window, "comms": h["nslots"], "blobs": blobs}


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
    """(JSON traces, ring files) below top as tranalyze finds them (analyzer/load.c walk): names
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
    fd, st = _open_plain(path)
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
    """a JSON trace and a ring of one process (analyzer/ring_trace.c same_process)"""
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
    still_alive, analyzer/ring.c)"""
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
        fd, st = _open_plain(p)
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
    except BundleError as e:
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
    fd, st = _open_plain(src)
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
            fd, st = _open_plain(p)
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


# ---- unpack: a trace with its calls and checks unpacked -----------------------------------

def packed_rows_module():
    """the codec of version 2's calls and checks (packed_rows.py): the
    package's module (the wheel, python -m trshim), else the file beside this
    one (the source tree), else where a meson install put it (bin/trshim)"""
    try:
        from . import packed_rows
        return packed_rows
    except ImportError:
        pass
    here = _here()
    candidates = [here]
    if not REL_PYDIR.startswith("@") and REL_PYDIR:
        candidates.append(os.path.normpath(os.path.join(here, REL_PYDIR)))
    if not ABS_PYDIR.startswith("@") and ABS_PYDIR:
        candidates.append(ABS_PYDIR)
    import importlib.util
    for d in candidates:
        path = os.path.join(d, "packed_rows.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("trshim_packed_rows", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    raise ImportError("packed_rows.py not found in %s" % ", ".join(candidates))


def trace_as_v1(data):
    """the bytes of a JSON trace -> (bytes of version 1's form, or None when
    it is version 1 already); ValueError when it is not a readable trace"""
    try:
        tr = json.loads(data.decode("utf-8"))
    except ValueError as e:            # (UnicodeDecodeError too)
        raise ValueError("not valid JSON: %s" % e)
    if not isinstance(tr, dict) or tr.get("format") != "trshim-trace":
        raise ValueError("not a trshim trace (no \"format\": \"trshim-trace\")")
    v = tr.get("version")
    if type(v) is not int or v not in (1, 2):
        raise ValueError("unknown trace format version %s (this trshim reads versions 1 and 2)" % json.dumps(v))
    if "calls" not in tr:
        raise ValueError("field calls is missing")
    packed_rows_module().unpack_trace(tr)     # (checks are absent when they were off)
    if v == 1:
        return None
    tr["version"] = 1
    try:
        return (json.dumps(tr, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:         # a lone surrogate (\\ud800): as an escape
        return (json.dumps(tr, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


def cmd_unpack(args):
    try:
        with open(args.trace, "rb") as f:
            data = f.read()
    except OSError as e:
        say("%s: cannot read: %s" % (args.trace, e.strerror or e))
        return 1
    try:
        out = trace_as_v1(data)
    except (ValueError, ImportError) as e:
        say("%s: %s" % (args.trace, str(e).replace("\n", " ")))
        return 1
    sys.stdout.flush()
    sys.stdout.buffer.write(data if out is None else out)
    sys.stdout.buffer.flush()
    return 0


# ---- main -------------------------------------------------------------------------

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


def completion_path():
    """packaging/completion/trshim.bash as installed: in the package (the wheel: trshim.bash), in the source tree,
    DATADIR/bash-completion/completions/trshim of a meson install (beside DATADIR/trshim); None"""
    here = _here()
    cands = [os.path.join(here, "trshim.bash"),
             os.path.join(here, "..", "..", "packaging", "completion", "trshim.bash")]
    for rel, absolute in ((REL_PYDIR, False), (ABS_PYDIR, True)):
        if rel and not rel.startswith("@"):
            d = rel if absolute else os.path.join(here, rel)
            cands.append(os.path.join(d, "..", "bash-completion", "completions", "trshim"))
    for c in cands:
        if os.path.isfile(c):
            return os.path.normpath(c)
    return None


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
