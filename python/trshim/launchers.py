"""The launchers trshim run knows and how each carries the job's environment to its ranks:
finding the launcher in a command line (past env and python -m), mpirun's -x / -genv options
(Open MPI, Hydra), srun's --export, DeepSpeed's .deepspeed_env lines."""
import os
import re
import subprocess

from trshim.env import preload_with_shim, split_preload
from trshim.messages import say

# Values DeepSpeed's launcher passes to other nodes unquoted (multinode_runner.py add_export)
DS_PLAIN_VALUE = re.compile(r"^[\w@%+=:,./-]*$")
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
