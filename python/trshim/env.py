"""The environment of a recorded job: the shim's variables (its job identity, its settings),
LD_PRELOAD with libtrshim.so first, the trace folder and the job id that trshim run and
trshim env set, and `trshim env`, which prints them in a launcher's form."""
import json
import os
import re
import shlex
import socket
import time

from trshim.messages import say
from trshim.where import LIBNAME, library_path, version

# The shim's job identity (shim/base/tr_core.c read_identity, docs/trace-format.md
# "Job identity"): the first of these that is set names the job.
SHIM_JOB_VARS = ("TRSHIM_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid",
                 "PMIX_NAMESPACE", "TRSIM_SHM_TAG")
# ... of which these are a launcher's (TRSIM_SHM_TAG is the simulator's, set per job by trsim-launch)
LAUNCHER_JOB_VARS = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE")
# The shim's settings (shim/base/tr_core.c read_settings and the others' getenv): trshim run and env
# carry those set here to every rank
SHIM_SETTINGS = ("TRSHIM", "TRSHIM_DIR", "TRSHIM_JOB_ID", "TRSHIM_STACK_DEPTH", "TRSHIM_PYSTACK_DEPTH", "TRSHIM_RING",
                 "TRSHIM_HANG_SEC", "TRSHIM_SNAPSHOT_SIGNAL", "TRSHIM_COMPLETION", "TRSHIM_NANCHECK",
                 "TRSHIM_NANCHECK_ENGINE", "TRSHIM_NANCHECK_MAX_MB", "TRSHIM_NANCHECK_POOL_MB", "TRSHIM_STACK_CACHE",
                 "TRSHIM_KEEP_RING", "TRSHIM_QUIET", "TRSHIM_REDACT")
# Default trace folder of the shim (TRSHIM_DIR unset): relative to each process's working folder
SHIM_DEFAULT_DIR = "./traces"


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
