#!/usr/bin/env python3
"""The installation and the trshim command (suite 'install', tests/install/meson.build).

    test_install.py NAME     NAME: destdir, versions, job-vars, run-planted, run-dry,
                             run-deepspeed-env, env, doctor

Each test installs the build folder (meson install --destdir) into a
temporary folder of its own and uses what was installed there."""
import glob
import importlib
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

BUILD = os.environ["TRSHIM_BUILD_ROOT"]
SOURCE = os.environ["TRSHIM_SOURCE_ROOT"]
MESON = os.environ.get("TRSHIM_MESON", "meson")
VERSION = os.environ["TRSHIM_VERSION"]
TRSIM_LIB = os.environ["TRSIM_LIB"]
LAUNCH = os.environ["TRSIM_LAUNCH"]
TRAIN_DP = os.environ["TRAIN_DP"]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL " + what)
    return cond


def run(cmd, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("universal_newlines", True)
    kw.setdefault("timeout", 120)
    return subprocess.run(cmd, **kw)


class Installed:
    """meson install --destdir into a temporary folder: the paths of what it holds"""

    def __init__(self, tmp):
        self.destdir = os.path.join(tmp, "dest")
        r = run([MESON, "install", "-C", BUILD, "--no-rebuild", "--destdir", self.destdir, "--quiet"], timeout=300)
        if r.returncode != 0:
            sys.exit("meson install failed (%d): %s%s" % (r.returncode, r.stdout, r.stderr))
        r = run([MESON, "introspect", BUILD, "--installed"])
        installed = json.loads(r.stdout)          # build path -> install path (without DESTDIR)
        self.final = {}
        for src, dst in installed.items():
            self.final[os.path.basename(dst)] = dst
        opts = {o["name"]: o["value"] for o in json.loads(run([MESON, "introspect", BUILD, "--buildoptions"]).stdout)}
        self.prefix = opts["prefix"]
        self.libdir_final = os.path.join(self.prefix, opts["libdir"])
        self.bindir_final = os.path.join(self.prefix, opts["bindir"])
        self.includedir_final = os.path.join(self.prefix, opts["includedir"])
        self.datadir_final = os.path.join(self.prefix, opts["datadir"])
        self.libdir = self.d(self.libdir_final)
        self.bindir = self.d(self.bindir_final)
        self.includedir = self.d(self.includedir_final)
        self.lib = os.path.join(self.libdir, "libtrshim.so")
        self.trshim = os.path.join(self.bindir, "trshim")
        self.tranalyze = os.path.join(self.bindir, "tranalyze")
        self.pydir = self.d(os.path.join(self.datadir_final, "trshim"))     # the package: pydir/trshim

    def d(self, path):
        return self.destdir + path

    def module(self, name):
        """trshim.NAME of the installed package (what bin/trshim runs), imported from the DESTDIR in
        place of any trshim package imported before (the source tree's, through tests/common)"""
        for k in [k for k in sys.modules if k == "trshim" or k.startswith("trshim.")]:
            del sys.modules[k]
        sys.path.insert(0, self.pydir)
        try:
            mod = importlib.import_module("trshim." + name)
        finally:
            sys.path.remove(self.pydir)
        if not os.path.realpath(mod.__file__).startswith(os.path.realpath(self.pydir) + os.sep):
            sys.exit("trshim.%s imported from %s, not from the installation %s" % (name, mod.__file__, self.pydir))
        return mod


def traces_in(d):
    return sorted(glob.glob(os.path.join(d, "trshim.*.json")))


# ---- destdir -------------------------------------------------------------------------

def test_destdir(tmp):
    inst = Installed(tmp)
    for p in (inst.lib, inst.trshim, inst.tranalyze):
        check(os.path.isfile(p), "installed: %s" % p)
    for p in (inst.trshim, inst.tranalyze):
        check(os.access(p, os.X_OK), "executable: %s" % p)
    for h in ("trace_format.h", "ring_format.h", "nccl_calls.h", "nccl_abi.h", "cuda_calls.h"):
        check(os.path.isfile(os.path.join(inst.includedir, "trshim", h)), "header %s installed" % h)
    pcdir = os.path.join(inst.libdir, "pkgconfig")
    check(os.path.isfile(os.path.join(pcdir, "trshim.pc")), "trshim.pc in %s" % pcdir)
    check(os.path.isfile(inst.d(os.path.join(inst.prefix, "share", "doc", "trshim", "LICENSE"))), "LICENSE installed")
    # nothing of the build folder left in what was installed
    for p in (inst.lib, inst.tranalyze):
        if shutil.which("readelf"):
            dyn = run(["readelf", "-d", p]).stdout
            check(BUILD not in dyn, "%s: no RPATH/RUNPATH into the build folder" % p)
    # the package: every module of python/trshim, where.py configured; bin/trshim runs it
    have = sorted(os.listdir(os.path.join(inst.pydir, "trshim")))
    want = sorted(os.path.basename(p) for p in glob.glob(os.path.join(SOURCE, "python", "trshim", "*.py")))
    check(have == want, "%s holds python/trshim's modules: missing %s, others %s" %
          (inst.pydir, sorted(set(want) - set(have)), sorted(set(have) - set(want))))
    where = inst.module("where")
    check(where.version() == VERSION and where.library_path() == inst.lib and
          where.tranalyze_path() == inst.tranalyze, "the installed trshim.where: %s, %s, %s" %
          (where.version(), where.library_path(), where.tranalyze_path()))
    mod = inst.module("elf")
    elf = mod.Elf(inst.lib)
    defined, _ = elf.dynamic_symbols()
    check("ncclAllReduce" in defined and not any(s.startswith("unw_") or s.startswith("_Unwind") for s in defined),
          "libtrshim.so exports the wrappers and no libunwind symbol")

    # pkg-config through PKG_CONFIG_PATH (and the DESTDIR as sysroot)
    if check(shutil.which("pkg-config") is not None, "pkg-config found"):
        env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_SYSROOT_DIR=inst.destdir)
        pc = lambda *a: run(["pkg-config"] + list(a) + ["trshim"], env=env)
        r = pc("--modversion")
        check(r.returncode == 0 and r.stdout.strip() == VERSION, "pkg-config --modversion: %r %r" % (r.stdout, r.stderr))
        cflags = pc("--cflags").stdout.split()
        libs = pc("--libs").stdout.split()
        check("-I" + inst.includedir in cflags, "pkg-config --cflags %s has -I%s" % (cflags, inst.includedir))
        check("-L" + inst.libdir in libs and "-ltrshim" in libs, "pkg-config --libs %s" % libs)
        pre = pc("--variable=preload").stdout.strip()
        check(pre in (os.path.join(inst.libdir_final, "libtrshim.so"), inst.lib), "pkg-config --variable=preload: %s" % pre)
        # a program built against the installed headers (nccl_abi.h needs cuda_runtime_api.h)
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        cuda_inc = os.environ.get("TRSHIM_CUDA_INC", "")
        if check(cc is not None, "a C compiler"):
            src = os.path.join(tmp, "uses_headers.c")
            with open(src, "w") as f:
                f.write(textwrap.dedent("""\
                    #include <stdio.h>
                    #include <trshim/trace_format.h>
                    #include <trshim/ring_format.h>
                    #include <trshim/nccl_calls.h>
                    #include <trshim/nccl_abi.h>
                    #include <trshim/cuda_calls.h>
                    #define NAME_(name, lib, about) #name,
                    static const char *const wrapped[] = {TR_CUDA_FUNCS(NAME_)};
                    static const char *const fields[] = {
                    #define FIELD_(id, name, read, since) name,
                        TRSHIM_CALL_FIELDS(FIELD_)};
                    int main(void) {
                        printf("%s %s %s\\n", TRSHIM_TRACE_PREFIX, wrapped[0], fields[TRSHIM_CALL_SEQ]);
                        return 0;
                    }
                    """))
            exe = os.path.join(tmp, "uses_headers")
            r = run([cc, "-std=c11", "-D_GNU_SOURCE"] + cflags + (["-isystem", cuda_inc] if cuda_inc else []) +
                    [src, "-o", exe] + libs)
            check(r.returncode == 0, "a program compiles and links with pkg-config's flags: %s" % r.stderr[-2000:])
            if r.returncode == 0:
                out = run([exe], env=dict(os.environ, LD_LIBRARY_PATH=inst.libdir)).stdout.strip()
                check(out == "trshim. cudaMalloc seq", "the program runs, with the installed tables: %r" % out)

    # the installed library preloaded by its bare name (the loader's search path: LD_LIBRARY_PATH
    # stands in for ldconfig's cache) into a 2-rank simulated job
    traces = os.path.join(tmp, "traces")
    env = dict(os.environ, LD_LIBRARY_PATH=inst.libdir)
    r = run([LAUNCH, "-n", "2", "--timeout", "90", "--quiet", "--", "env", "LD_PRELOAD=libtrshim.so " + TRSIM_LIB,
             "TRSHIM_DIR=" + traces, "TRSHIM_JOB_ID=destdir-2", TRAIN_DP, "6", "32"], env=env, timeout=150)
    check(r.returncode == 0, "2-rank job under LD_PRELOAD=libtrshim.so: exit %d %s" % (r.returncode, r.stderr[-2000:]))
    names = [os.path.basename(t) for t in traces_in(traces)]
    check(len(names) == 2 and all(n.startswith("trshim.destdir-2.r") for n in names), "2 traces: %s" % names)
    if names:
        with open(traces_in(traces)[0]) as f:
            tr = json.load(f)
        check(tr["versions"]["trshim"] == VERSION, "trace's trshim version %s" % tr["versions"]["trshim"])
        # trshim unpack (the installed package's packed_rows.py): the trace of
        # version 2 (calls and checks packed) printed as version 1; one of version 1 as it is
        sys.path.insert(0, os.path.join(SOURCE, "tests", "common"))
        import trace as trfile
        v1 = trfile.load_trace(traces_in(traces)[0])
        v1["version"] = 1
        v2 = trfile.pack_trace(v1)
        check(isinstance(v2["calls"], dict) and isinstance(v2.get("checks", {}), dict),
              "pack_trace of the shim's trace: calls and checks packed")
        for name, doc in (("v1", v1), ("v2", v2)):
            path = os.path.join(tmp, "unpack-%s.json" % name)
            with open(path, "w") as f:
                json.dump(doc, f)
            r = run([inst.trshim, "unpack", path])
            check(r.returncode == 0 and json.loads(r.stdout) == v1,
                  "installed trshim unpack on a version-%s trace: exit %d %s" % (name[1], r.returncode, r.stdout[-2000:]))
    r = run([inst.tranalyze, traces])
    check(r.returncode == 0, "installed tranalyze on the clean job: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))


# ---- versions ----------------------------------------------------------------------

def grep_define(path_glob, name):
    for p in glob.glob(os.path.join(SOURCE, path_glob)):
        with open(p) as f:
            m = re.search(r'#define\s+%s\s+"([^"]+)"' % name, f.read())
            if m:
                return m.group(1)
    return None


def test_versions(tmp):
    inst = Installed(tmp)
    r = run([inst.trshim, "--version"])
    check(r.returncode == 0 and r.stdout.splitlines()[0] == "trshim " + VERSION, "trshim --version: %r" % r.stdout)
    check(inst.lib in r.stdout, "trshim --version names the library: %r" % r.stdout)
    r = run([inst.tranalyze, "--version"])
    check(r.returncode == 0 and r.stdout.strip() == "tranalyze " + VERSION, "tranalyze --version: %r" % r.stdout)
    check(grep_define("shim/base/*.h", "TR_VERSION") == VERSION, "shim's TR_VERSION is %s" % VERSION)
    check(grep_define("analyzer/model/*.h", "TA_VERSION") == VERSION, "tranalyze's TA_VERSION is %s" % VERSION)
    with open(os.path.join(SOURCE, "pyproject.toml")) as f:
        pyproject = f.read()
    m = re.search(r'^version\s*=\s*"([^"]+)"', pyproject, re.M)
    check((m and m.group(1) == VERSION) or re.search(r"^dynamic\s*=\s*\[[^]]*\"version\"", pyproject, re.M),
          "pyproject.toml's version is meson's (%s)" % VERSION)
    for sub in ("run", "env", "doctor", "lib"):
        r = run([inst.trshim, sub, "--help"])
        check(r.returncode == 0 and "usage: trshim " + sub in r.stdout, "trshim %s --help" % sub)
    r = run([inst.trshim, "lib"])
    check(r.returncode == 0 and r.stdout.strip() == inst.lib, "trshim lib: %r" % r.stdout)


# ---- job variables: trshim and the shim agree ---------------------------------------

def test_job_vars(tmp):
    inst = Installed(tmp)
    mod = inst.module("env")
    found = None
    for p in sorted(glob.glob(os.path.join(SOURCE, "shim", "**", "*.c"), recursive=True)):
        with open(p) as f:
            text = f.read()
        m = re.search(r'\{\s*("TRSHIM_JOB_ID"[^}]*)\}', text)
        if m:
            found = tuple(re.findall(r'"([A-Za-z_]+)"', m.group(1)))
    check(found is not None, "the shim's list of job variables found in shim/**/*.c")
    check(found == tuple(mod.SHIM_JOB_VARS), "trshim's SHIM_JOB_VARS %s == the shim's %s" % (mod.SHIM_JOB_VARS, found))
    check(set(mod.LAUNCHER_JOB_VARS) <= set(mod.SHIM_JOB_VARS), "LAUNCHER_JOB_VARS within the shim's")
    # every TRSHIM_* variable the shim reads is a setting trshim carries to the ranks
    names = set()
    for p in glob.glob(os.path.join(SOURCE, "shim", "**", "*.c"), recursive=True):
        with open(p) as f:
            names |= set(re.findall(r'"(TRSHIM(?:_[A-Z_]+)?)"', f.read()))
    names.discard("TRSHIM_TRACE_PREFIX")
    check(names - set(mod.SHIM_SETTINGS) == set(), "the shim's settings %s all in trshim's SHIM_SETTINGS" %
          sorted(names - set(mod.SHIM_SETTINGS)))


# ---- trshim run: the planted hang -------------------------------------------------------

def test_run_planted(tmp):
    inst = Installed(tmp)
    traces = os.path.join(tmp, "traces")
    env = dict(os.environ, LD_PRELOAD=TRSIM_LIB, TRAIN_DP_PLANT="log_metrics")
    for k in ("TRSHIM_DIR", "TRSHIM_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid",
              "PMIX_NAMESPACE"):
        env.pop(k, None)
    r = run([inst.trshim, "run", "--dir", traces, "--", LAUNCH, "-n", "4", "--timeout", "8", "--grace", "5",
             "--quiet", "--", TRAIN_DP, "40", "64"], env=env, timeout=120)
    check(r.returncode == 124, "the planted job hangs and the launcher ends it (124): %d %s" % (r.returncode,
                                                                                                 r.stderr[-2000:]))
    m = re.search(r"trshim: recording to (\S+) \(job (\S+)\)", r.stderr)
    check(m is not None and m.group(1) == traces, "the 'recording to' line: %r" % r.stderr[:500])
    files = traces_in(traces)
    check(len(files) == 4, "4 traces: %s" % files)
    jobs = set()
    for p in files:
        with open(p) as f:
            tr = json.load(f)
        jobs.add((tr["job"]["id"], tr["job"]["source"]))
        check(tr["env"].get("TRSHIM_DIR") == traces, "rank %s recorded TRSHIM_DIR %s" % (tr["rank"], tr["env"]))
    check(len(jobs) == 1 and list(jobs)[0][1] == "TRSHIM_JOB_ID", "one job, named by trshim: %s" % jobs)
    if m and jobs:
        check(list(jobs)[0][0] == m.group(2), "the job id trshim printed is the traces' (%s)" % m.group(2))
    r = run([inst.tranalyze, "--json", traces])
    check(r.returncode == 1, "tranalyze finds it (exit 1): %d %s" % (r.returncode, r.stderr))
    try:
        top = json.loads(r.stdout)["findings"][0]
    except (ValueError, IndexError, KeyError):
        check(False, "tranalyze --json output: %r" % r.stdout[:500])
        return
    got = {k: top.get(k) for k in ("kind", "seq", "ranks", "others")}
    check(got == {"kind": "divergence", "seq": 12, "ranks": [0], "others": [1, 2, 3]}, "root cause %s" % got)
    check(top["call"]["function"] == "log_metrics" and top["call"]["site"].startswith("log_metrics (train_dp.c:"),
          "culprit's call site %s" % top["call"])


# ---- trshim run --dry-run: the launchers ------------------------------------------------

def dry(inst, args, env=None, cwd=None):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("TRSHIM_") or k in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid",
                                             "PMIX_NAMESPACE", "LD_PRELOAD", "DS_ENV_FILE"):
            del e[k]
    e.update(env or {})
    r = run([inst.trshim, "run", "--dry-run"] + args, env=e, cwd=cwd)
    out = {"rc": r.returncode, "env": {}, "file": None, "file_lines": [], "notes": [], "stderr": r.stderr,
           "job": None, "launcher": None}
    for line in r.stdout.splitlines():
        if line.startswith("env: "):
            k, v = line[5:].split("=", 1)
            out["env"][k] = v
        elif line.startswith("command: "):
            out["command"] = shlex.split(line[9:])
        elif line.startswith("file: "):
            out["file"] = line[6:].split(" (")[0]
        elif line.startswith("  "):
            out["file_lines"].append(line[2:])
        elif line.startswith("note: "):
            out["notes"].append(line[6:])
        elif line.startswith("job id: "):
            out["job"] = line[8:]
        elif line.startswith("launcher: "):
            out["launcher"] = line[10:]
    return out


def fake_program(d, name, script):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write("#!%s\n%s" % (sys.executable, textwrap.dedent(script)))
    os.chmod(p, 0o755)
    return p


def test_run_dry(tmp):
    inst = Installed(tmp)
    lib = inst.lib
    cwd = os.path.join(tmp, "work")
    os.makedirs(cwd)
    idre = re.compile(r"^\d{8}-\d{6}-[A-Za-z0-9_-]+-\d+$")

    # a plain program: the shim in front of LD_PRELOAD (another libtrshim.so dropped), the folder
    # absolute, a new job id, the TRSHIM_* settings kept, the command unchanged
    o = dry(inst, ["--dir", "tr", "--", "./prog", "a b"], {"LD_PRELOAD": "/old/libtrshim.so /y/other.so",
                                                          "TRSHIM_HANG_SEC": "30"}, cwd)
    check(o["rc"] == 0, "dry run exit 0: %s" % o["stderr"])
    check(o["env"].get("LD_PRELOAD") == lib + ":/y/other.so", "LD_PRELOAD %s" % o["env"].get("LD_PRELOAD"))
    check(o["env"].get("TRSHIM_DIR") == os.path.join(cwd, "tr"), "TRSHIM_DIR absolute: %s" % o["env"])
    check(idre.match(o["env"].get("TRSHIM_JOB_ID", "")) is not None, "a new job id: %s" % o["env"])
    check(o["env"].get("TRSHIM_HANG_SEC") == "30", "TRSHIM_HANG_SEC carried: %s" % o["env"])
    check(o.get("command") == ["./prog", "a b"] and o["launcher"].startswith("none"), "command %s" % o.get("command"))
    check(not os.path.exists(os.path.join(cwd, "tr")), "a dry run makes no folder")
    o = dry(inst, ["--job-id", "my-job", "--", "./prog"], cwd=cwd)
    check(o["env"].get("TRSHIM_JOB_ID") == "my-job", "--job-id: %s" % o["env"])
    o = dry(inst, ["--", "./prog"], {"TRSHIM_DIR": "/tmp/elsewhere"}, cwd)
    check(o["env"].get("TRSHIM_DIR") == "/tmp/elsewhere", "TRSHIM_DIR from the environment: %s" % o["env"])
    # a launcher's own job id: left to the shim; torchrun's default run id "none" is no id
    o = dry(inst, ["--", "srun", "python", "t.py"], {"SLURM_JOB_ID": "123"}, cwd)
    check("TRSHIM_JOB_ID" not in o["env"] and "SLURM_JOB_ID" in (o["job"] or ""), "SLURM_JOB_ID: %s" % o)
    o = dry(inst, ["--", "./prog"], {"TORCHELASTIC_RUN_ID": "none"}, cwd)
    check("TRSHIM_JOB_ID" in o["env"], "TORCHELASTIC_RUN_ID=none names no job: %s" % o["env"])
    o = dry(inst, ["--", "./prog"], {"TRSHIM_JOB_ID": "given"}, cwd)
    check(o["env"].get("TRSHIM_JOB_ID") == "given", "TRSHIM_JOB_ID kept: %s" % o["env"])

    # torchrun: one node gets an id; several nodes (each runs its own trshim) do not
    for args, multi in ((["torchrun", "--nproc-per-node", "2", "t.py"], False),
                        (["torchrun", "--standalone", "t.py"], False),
                        (["torchrun", "--nnodes", "1", "t.py"], False),
                        (["torchrun", "--nnodes=2", "--node-rank", "0", "t.py"], True),
                        (["torchrun", "--nnodes", "2:4", "t.py"], True),
                        (["torchrun", "--rdzv-id", "abc", "t.py"], True),
                        ([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "t.py"], True)):
        o = dry(inst, ["--"] + args, cwd=cwd)
        check(o["launcher"] == "torchrun", "%s: torchrun (%s)" % (args, o["launcher"]))
        check(("TRSHIM_JOB_ID" in o["env"]) != multi, "%s: job id %s" % (args, o["env"].get("TRSHIM_JOB_ID")))
        check(o.get("command") == args, "%s: command unchanged" % args)

    # mpirun (Open MPI): -x for each variable; an existing -x LD_PRELOAD=VALUE gets the shim in front
    o = dry(inst, ["--mpi", "openmpi", "--", "mpirun", "-np", "4", "-x", "LD_PRELOAD=/a/b.so", "-x", "FOO", "python",
                   "t.py"], {"TRSHIM_NANCHECK": "off"}, cwd)
    want = ["mpirun", "-x", "TRSHIM_DIR", "-x", "TRSHIM_JOB_ID", "-x", "TRSHIM_NANCHECK", "-np", "4", "-x",
            "LD_PRELOAD=" + lib + ":/a/b.so", "-x", "FOO", "python", "t.py"]
    check(o.get("command") == want, "mpirun -x: %s" % o.get("command"))
    o = dry(inst, ["--mpi", "openmpi", "--", "mpiexec", "-n", "2", "./a.out"], cwd=cwd)
    check(o.get("command") == ["mpiexec", "-x", "LD_PRELOAD", "-x", "TRSHIM_DIR", "-x", "TRSHIM_JOB_ID", "-n", "2",
                               "./a.out"], "mpiexec -x: %s" % o.get("command"))
    # MPICH / Intel MPI (Hydra): -genv NAME VALUE
    o = dry(inst, ["--mpi", "hydra", "--", "mpiexec", "-n", "2", "./a.out"], {"TRSHIM_JOB_ID": "j"}, cwd)
    check(o.get("command") == ["mpiexec", "-genv", "LD_PRELOAD", lib, "-genv", "TRSHIM_DIR",
                               os.path.join(cwd, "traces"), "-genv", "TRSHIM_JOB_ID", "j", "-n", "2", "./a.out"],
          "mpiexec -genv: %s" % o.get("command"))
    # which one, from mpirun --version
    bindir = os.path.join(tmp, "fakebin")
    os.makedirs(bindir)
    fake_program(bindir, "mpirun", 'print("mpirun (Open MPI) 4.1.4\\n\\nReport bugs to http://www.open-mpi.org/")\n')
    fake_program(bindir, "mpiexec", 'print("HYDRA build details:\\n    Version: 4.0.2")\n')
    path = {"PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    o = dry(inst, ["--", "mpirun", "-n", "2", "./a.out"], path, cwd)
    check(o.get("command", [""])[1:2] == ["-x"], "Open MPI found by mpirun --version: %s" % o.get("command"))
    o = dry(inst, ["--", "mpiexec", "-n", "2", "./a.out"], path, cwd)
    check(o.get("command", [""])[1:2] == ["-genv"], "Hydra found by mpiexec --version: %s" % o.get("command"))

    # srun: the environment goes along unless --export names a list
    o = dry(inst, ["--", "srun", "-N", "2", "python", "t.py"], cwd=cwd)
    check(o.get("command") == ["srun", "-N", "2", "python", "t.py"], "srun unchanged: %s" % o.get("command"))
    o = dry(inst, ["--", "srun", "--export=PATH,HOME", "python", "t.py"], cwd=cwd)
    check(o.get("command") == ["srun", "--export=PATH,HOME,LD_PRELOAD,TRSHIM_DIR,TRSHIM_JOB_ID", "python", "t.py"],
          "srun --export list: %s" % o.get("command"))
    o = dry(inst, ["--", "srun", "--export", "ALL", "python", "t.py"], cwd=cwd)
    check(o.get("command") == ["srun", "--export", "ALL", "python", "t.py"], "srun --export ALL: %s" % o.get("command"))
    o = dry(inst, ["--", "srun", "--export=NONE", "python", "t.py"], cwd=cwd)
    check("--export=NONE" in o["stderr"], "srun --export=NONE warned about: %r" % o["stderr"])

    # deepspeed, also behind env and as python -m; its file
    for args in (["deepspeed", "--num_gpus", "2", "t.py"], ["env", "A=1", "deepspeed", "t.py"],
                 [sys.executable, "-m", "deepspeed.launcher.runner", "t.py"]):
        o = dry(inst, ["--"] + args, cwd=cwd)
        check(o["launcher"] == "deepspeed" and o["file"] == os.path.join(cwd, ".deepspeed_env"),
              "%s: deepspeed, file %s" % (args, o["file"]))
        check("LD_PRELOAD=" + lib in o["file_lines"], "%s: file lines %s" % (args, o["file_lines"]))
        check(o.get("command") == args, "%s: command unchanged" % args)
    check(not os.path.exists(os.path.join(cwd, ".deepspeed_env")), "a dry run writes no .deepspeed_env")
    # colossalai run: its runner gives each node the whole environment, the job id included
    args = ["colossalai", "run", "--nproc_per_node", "4", "--hostfile", "hosts", "t.py"]
    o = dry(inst, ["--"] + args, cwd=cwd)
    check(o["launcher"] == "colossalai" and o.get("command") == args and o["file"] is None,
          "colossalai run: launcher %s, command %s" % (o["launcher"], o.get("command")))
    check(o["env"].get("LD_PRELOAD") == lib and o["env"].get("TRSHIM_JOB_ID"), "colossalai run: env %s" % o["env"])
    o = dry(inst, ["--", "ssh", "node2", "python", "t.py"], cwd=cwd)
    check(any("ssh" in n for n in o["notes"]), "ssh: a note %s" % o["notes"])
    # a library path LD_PRELOAD cannot hold
    o = dry(inst, ["--library", os.path.join(tmp, "no such.so"), "--", "./prog"], cwd=cwd)
    check(o["rc"] == 2 and "space" in o["stderr"], "a library path with a space refused: %r" % o["stderr"])


# ---- trshim run with deepspeed: .deepspeed_env in place during the run, put back after --

DS_FAKE = r'''
import json, os, re, signal, sys, time
# DeepSpeed's launcher (launcher/runner.py, multinode_runner.py add_export), as it reads the file
name = os.getenv("DS_ENV_FILE", ".deepspeed_env")
exports = {}
for path in [os.path.expanduser("~"), "."]:
    f = os.path.join(path, name)
    if os.path.isfile(f):
        with open(f) as fd:
            for var in fd.readlines():
                key, val = var.split("=", maxsplit=1)
                val = val.strip()
                if re.search(r"[^\w@%+=:,./-]", val):
                    val = '"%s"' % val
                exports[key.strip()] = val
out = {"exports": exports, "LD_PRELOAD": os.environ.get("LD_PRELOAD"), "TRSHIM_DIR": os.environ.get("TRSHIM_DIR")}
with open(os.environ["DS_FAKE_OUT"], "w") as f:
    json.dump(out, f)
if os.environ.get("DS_FAKE_WAIT"):
    def term(s, fr):
        with open(os.environ["DS_FAKE_OUT"] + ".term", "w") as f:
            f.write(str(s))
        sys.exit(143)
    signal.signal(signal.SIGTERM, term)
    time.sleep(60)
sys.exit(3)
'''


def test_run_deepspeed_env(tmp):
    inst = Installed(tmp)
    lib = inst.lib
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    fake_program(bindir, "deepspeed", DS_FAKE)
    home = os.path.join(tmp, "home")
    cwd = os.path.join(tmp, "work")
    os.makedirs(home)
    os.makedirs(cwd)
    outp = os.path.join(tmp, "ds.json")
    base = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"], HOME=home, DS_FAKE_OUT=outp)
    for k in ("LD_PRELOAD", "TRSHIM_DIR", "TRSHIM_JOB_ID", "DS_ENV_FILE"):
        base.pop(k, None)
    here = os.path.join(cwd, ".deepspeed_env")

    def ds(extra_args=(), env=None, wait=False):
        e = dict(base, **(env or {}))
        if os.path.exists(outp):
            os.unlink(outp)
        cmd = [inst.trshim, "run", "--job-id", "ds-1"] + list(extra_args) + ["--", "deepspeed", "--hostfile", "h",
                                                                            "train.py"]
        if wait:
            e["DS_FAKE_WAIT"] = "1"
            p = subprocess.Popen(cmd, env=e, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(200):
                if os.path.exists(outp):
                    break
                time.sleep(0.05)
            time.sleep(0.3)
            p.send_signal(signal.SIGTERM)
            p.wait(30)
            return p.returncode, None
        r = run(cmd, env=e, cwd=cwd)
        with open(outp) as f:
            return r.returncode, json.load(f)

    traces = os.path.join(cwd, "traces")
    # 1. no file: written for the run (DeepSpeed exports each line to every node), removed after;
    #    the launcher's exit status passed on
    rc, got = ds()
    check(rc == 3, "deepspeed's exit status passed on: %d" % rc)
    check(got["exports"] == {"LD_PRELOAD": lib, "TRSHIM_DIR": traces, "TRSHIM_JOB_ID": "ds-1"},
          "exports from a new .deepspeed_env: %s" % got["exports"])
    check(got["LD_PRELOAD"] == lib and got["TRSHIM_DIR"] == traces, "the launcher's own environment: %s" % got)
    check(not os.path.exists(here), "the .deepspeed_env trshim made is removed after the run")
    # 2. the user's file (no final newline): their lines kept, their LD_PRELOAD after the shim; put back
    #    byte for byte, mode kept
    mine = "NCCL_DEBUG=INFO\nLD_PRELOAD=/opt/x.so\nPYTHONPATH=/a b"
    with open(here, "w") as f:
        f.write(mine)
    os.chmod(here, 0o640)
    rc, got = ds()
    check(got["exports"].get("LD_PRELOAD") == lib + ":/opt/x.so", "LD_PRELOAD extended: %s" % got["exports"])
    check(got["exports"].get("NCCL_DEBUG") == "INFO" and got["exports"].get("PYTHONPATH") == '"/a b"',
          "the user's lines kept: %s" % got["exports"])
    with open(here) as f:
        check(f.read() == mine, "the user's .deepspeed_env put back as it was")
    check(stat.S_IMODE(os.stat(here).st_mode) == 0o640, "its mode kept")
    os.unlink(here)
    # 3. ~/.deepspeed_env with an LD_PRELOAD: the working folder's file (read later, wins) carries it on
    with open(os.path.join(home, ".deepspeed_env"), "w") as f:
        f.write("LD_PRELOAD=/home/y.so\nUCX_TLS=tcp\n")
    rc, got = ds()
    check(got["exports"].get("LD_PRELOAD") == lib + ":/home/y.so" and got["exports"].get("UCX_TLS") == "tcp",
          "~/.deepspeed_env's LD_PRELOAD kept behind the shim: %s" % got["exports"])
    with open(os.path.join(home, ".deepspeed_env")) as f:
        check(f.read() == "LD_PRELOAD=/home/y.so\nUCX_TLS=tcp\n", "~/.deepspeed_env untouched")
    check(not os.path.exists(here), "removed after")
    os.unlink(os.path.join(home, ".deepspeed_env"))
    # 4. DS_ENV_FILE names the file
    rc, got = ds(env={"DS_ENV_FILE": "my_env"})
    check(got["exports"].get("LD_PRELOAD") == lib, "DS_ENV_FILE: %s" % got["exports"])
    check(not os.path.exists(os.path.join(cwd, "my_env")), "DS_ENV_FILE's file removed after")
    # 5. --keep-env-file
    rc, got = ds(["--keep-env-file"])
    with open(here) as f:
        kept = f.read().splitlines()
    check(sorted(kept) == sorted(["LD_PRELOAD=" + lib, "TRSHIM_DIR=" + traces, "TRSHIM_JOB_ID=ds-1"]),
          "--keep-env-file keeps it: %s" % kept)
    os.unlink(here)
    # 6. SIGTERM to trshim reaches the launcher; the file is put back all the same
    with open(here, "w") as f:
        f.write("NCCL_DEBUG=WARN\n")
    rc, _ = ds(wait=True)
    check(os.path.exists(outp + ".term"), "SIGTERM forwarded to the launcher")
    check(rc == 143, "exit status after SIGTERM: %d" % rc)
    with open(here) as f:
        check(f.read() == "NCCL_DEBUG=WARN\n", "put back after SIGTERM")


# ---- trshim env -------------------------------------------------------------------------

def test_env(tmp):
    inst = Installed(tmp)
    lib = inst.lib
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("TRSHIM_") or k == "LD_PRELOAD":
            del e[k]
    # sh: eval'd by a shell (an sbatch script), the shim in front of what was preloaded
    script = ('LD_PRELOAD=/pre/x.so; eval "$(%s env --dir %s %s)"; '
              'printf "%%s|%%s|%%s\\n" "$LD_PRELOAD" "$TRSHIM_DIR" "${TRSHIM_JOB_ID-unset}"')
    r = run(["bash", "-c", script % (shlex.quote(inst.trshim), "tr", "")], env=e, cwd=tmp)
    check(r.returncode == 0 and r.stdout.strip() == "%s:/pre/x.so|%s|unset" % (lib, os.path.join(tmp, "tr")),
          "trshim env (sh) evaluated: %r %r" % (r.stdout, r.stderr))
    r = run(["bash", "-c", script % (shlex.quote(inst.trshim), "/abs/tr", "--job-id j7")], env=e, cwd=tmp)
    check(r.stdout.strip() == "%s:/pre/x.so|/abs/tr|j7" % lib, "trshim env --job-id: %r" % r.stdout)
    r = run(["bash", "-c", 'eval "$(%s env)"; echo "$LD_PRELOAD"' % shlex.quote(inst.trshim)], env=e, cwd=tmp)
    check(r.stdout.strip() == lib, "no LD_PRELOAD before: just the shim (%r)" % r.stdout)
    # deepspeed: KEY=VALUE lines only (DeepSpeed splits each line at its first '=')
    r = run([inst.trshim, "env", "--format", "deepspeed", "--dir", "/shared/traces"], env=e)
    lines = r.stdout.splitlines()
    check(lines and all(re.match(r"^[A-Z_]+=\S+$", l) for l in lines), "deepspeed lines: %s" % lines)
    check("LD_PRELOAD=" + lib in lines and "TRSHIM_DIR=/shared/traces" in lines, "deepspeed lines: %s" % lines)
    # mpirun: -x options
    r = run([inst.trshim, "env", "--format", "mpirun", "--dir", "/shared/traces"], env=e)
    check(shlex.split(r.stdout) == ["-x", "LD_PRELOAD=" + lib, "-x", "TRSHIM_DIR=/shared/traces"],
          "mpirun options: %r" % r.stdout)
    # k8s: a container's env list; the job id from the Job's name label
    r = run([inst.trshim, "env", "--format", "k8s"], env=e)
    out = r.stdout
    check(re.search(r"^env:$", out, re.M) is not None, "k8s: env: %r" % out)
    check('  - name: LD_PRELOAD\n    value: "%s"\n' % lib in out, "k8s LD_PRELOAD: %r" % out)
    check('  - name: TRSHIM_DIR\n    value: "/traces"\n' in out, "k8s TRSHIM_DIR defaults to /traces: %r" % out)
    check("metadata.labels['job-name']" in out, "k8s job id from the Job's name: %r" % out)
    r = run([inst.trshim, "env", "--format", "k8s", "--job-id", "train-7"], env=e)
    check('  - name: TRSHIM_JOB_ID\n    value: "train-7"\n' in r.stdout and "valueFrom" not in r.stdout,
          "k8s --job-id: %r" % r.stdout)


# ---- trshim doctor ------------------------------------------------------------------------

def doctor(inst, args=(), env=None, cwd=None):
    e = dict(os.environ)
    e.pop("TRSHIM_LIBRARY", None)
    e.pop("TRSHIM_DIR", None)
    e.update(env or {})
    r = run([inst.trshim, "doctor"] + list(args), env=e, cwd=cwd, timeout=300)
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(ok|warn|FAIL|info)\s+(\S.*?)\s{2,}(.*)$", line)
        if m:
            rows.setdefault(m.group(2).strip(), []).append((m.group(1), m.group(3)))
    return r, rows


def test_doctor(tmp):
    inst = Installed(tmp)
    folder = os.path.join(tmp, "tr")
    os.makedirs(folder, mode=0o700)
    r, rows = doctor(inst, ["--dir", folder])
    check(r.returncode == 0, "doctor exit 0: %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    check(r.stdout.startswith("trshim %s doctor on " % VERSION), "first line: %r" % r.stdout[:100])
    check(rows.get("library") == [("ok", inst.lib)], "library row: %s" % rows.get("library"))
    check(rows.get("preload", [("", "")])[0][0] == "ok", "preload row: %s" % rows.get("preload"))
    check(rows.get("tranalyze") == [("ok", inst.tranalyze)], "tranalyze row: %s" % rows.get("tranalyze"))
    check(rows.get("glibc", [("", "")])[0][0] == "ok", "glibc row: %s" % rows.get("glibc"))
    py = "%d.%d.%d" % sys.version_info[:3]
    check(any(py in t for _, t in rows.get("Python", [])), "Python row names %s: %s" % (py, rows.get("Python")))
    for key in ("libcudart", "libnccl"):
        check(key in rows, "a %s row: %s" % (key, sorted(rows)))
    check(rows.get("trace folder") == [("ok", "%s is writable" % folder)], "trace folder: %s" % rows.get("trace folder"))
    check(rows.get("free space", [("", "")])[0][0] in ("ok", "warn"), "free space: %s" % rows.get("free space"))
    check(re.search(r"^0 problems, \d+ warnings?$", r.stdout, re.M) is not None, "summary: %r" % r.stdout[-200:])
    # a trace folder the shim would refuse, one it makes, a sticky shared one
    os.chmod(folder, 0o775)
    r, rows = doctor(inst, ["--dir", folder])
    check(r.returncode == 1 and rows.get("trace folder", [("", "")])[0][0] == "FAIL" and
          "group or others" in rows["trace folder"][0][1], "group-writable folder refused: %s" % rows.get("trace folder"))
    os.chmod(folder, 0o1777)
    r, rows = doctor(inst, ["--dir", folder])
    check(rows.get("trace folder", [("", "")])[0][0] == "ok", "sticky folder fine: %s" % rows.get("trace folder"))
    os.chmod(folder, 0o700)
    r, rows = doctor(inst, ["--dir", os.path.join(folder, "new", "deeper")])
    check(rows.get("trace folder", [("", "")])[0][0] == "ok" and "makes it" in rows["trace folder"][0][1],
          "a missing folder is made by the shim: %s" % rows.get("trace folder"))
    # no library, a file that is no library, one the loader cannot preload
    r, rows = doctor(inst, ["--dir", folder], {"TRSHIM_LIBRARY": os.path.join(tmp, "missing.so")})
    check(r.returncode == 1 and rows.get("library", [("", "")])[0][0] == "FAIL", "missing library: %s" % rows)
    text = os.path.join(tmp, "text.so")
    with open(text, "w") as f:
        f.write("not a library\n")
    r, rows = doctor(inst, ["--dir", folder], {"TRSHIM_LIBRARY": text})
    check(r.returncode == 1 and rows.get("library", [("", "")])[-1][0] == "FAIL", "not ELF: %s" % rows.get("library"))
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        dep = os.path.join(tmp, "libgone.so")
        needs = os.path.join(tmp, "libneedsgone.so")
        src = os.path.join(tmp, "x.c")
        with open(src, "w") as f:
            f.write("int x(void) { return 1; }\n")
        ok = run([cc, "-shared", "-fPIC", "-o", dep, src]).returncode == 0 and \
            run([cc, "-shared", "-fPIC", "-o", needs, src, "-L" + tmp, "-Wl,--no-as-needed", "-lgone"]).returncode == 0
        if check(ok, "test libraries built"):
            os.unlink(dep)
            r, rows = doctor(inst, ["--dir", folder], {"TRSHIM_LIBRARY": needs})
            check(r.returncode == 1 and rows.get("preload", [("", "")])[0][0] == "FAIL" and
                  "gone.so" in rows["preload"][0][1], "a library that cannot be preloaded: %s" % rows.get("preload"))
    # a Python the shim cannot read frames of (a stand-in answering as CPython 3.9)
    fake = fake_program(tmp, "python3.9", 'import json, sys\nprint(json.dumps({"python": [3, 9, 18], '
                        '"implementation": "cpython", "executable": sys.argv[0], "libs": {}, "wheels": {}, '
                        '"packages": {}}))\n')
    r, rows = doctor(inst, ["--dir", folder, "--python", fake])
    check(any(lvl == "warn" and "3.10-3.14" in t and "3.9.18" in t for lvl, t in rows.get("Python", [])),
          "CPython 3.9 is warned about: %s" % rows.get("Python"))
    check(r.returncode == 0, "a warning is no problem: %d" % r.returncode)
    # CUDA libraries without the GPU driver (libcuda.so.1 not found): a warning, not "0 warnings"
    fake = fake_program(tmp, "python3.11", 'import json, sys\nprint(json.dumps({"python": [3, 11, 7], '
                        '"implementation": "cpython", "executable": sys.argv[0], "libs": {"cudart": {"path": '
                        '"/opt/cuda/lib64/libcudart.so.12", "version": 12080}, "nccl": {"path": "/opt/nccl/libnccl.so.2", '
                        '"version": 22703}, "cuda": None}, "wheels": {}, "packages": {"torch": {"dir": "/nowhere/torch", '
                        '"version": "2.9.1", "cuda": "12.8"}}}))\n')
    r, rows = doctor(inst, ["--dir", folder, "--python", fake])
    got = rows.get("GPU driver", [])
    want = ("CUDA libraries are here (libcudart 12.8, libnccl 2.27.3, PyTorch 2.9.1 with CUDA 12.8) but the GPU "
            "driver's libcuda.so.1 is not found by the loader: ")
    check(len(got) == 1 and got[0][0] == "warn" and got[0][1].startswith(want) and
          ("no NVIDIA kernel driver either (/proc/driver/nvidia/version)" in got[0][1] or
           "the kernel driver is loaded (" in got[0][1]), "the GPU driver row: %s" % got)
    m = re.search(r"^0 problems, (\d+) warnings?$", r.stdout, re.M)
    check(r.returncode == 0 and m is not None and int(m.group(1)) >= 1, "CUDA without a driver: %d %r" %
          (r.returncode, r.stdout[-300:]))
    # with the driver's library there: no such row
    r, rows = doctor(inst, ["--dir", folder, "--python", fake_program(tmp, "python3.12", open(fake).read().replace(
        '"cuda": None', '"cuda": {"path": "/usr/lib/libcuda.so.1", "version": 13000}').split("\n", 1)[1])])
    check("GPU driver" not in rows, "a driver is there: %s" % rows.get("GPU driver"))


TESTS = {
    "destdir": test_destdir, "versions": test_versions, "job-vars": test_job_vars, "run-planted": test_run_planted,
    "run-dry": test_run_dry, "run-deepspeed-env": test_run_deepspeed_env, "env": test_env, "doctor": test_doctor,
}


def main():
    name = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="trshim-install-") as tmp:
        TESTS[name](tmp)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("install-%s: ok" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
