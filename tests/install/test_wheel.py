#!/usr/bin/env python3
"""The wheel (pyproject.toml, packaging/trshim_build.py), suite 'install'.

    test_wheel.py            install-wheel: both wheels built (x86_64 and aarch64) by
                             `python3 -m pip wheel --no-deps -w DIR .` from a copy of the source, each
                             checked (manylinux_2_28 tag, contents, every ELF file: its machine, no
                             GLIBC_x.y newer than 2.28 by our reader and by objdump -T, auditwheel show),
                             then the x86_64 one installed into a fresh virtual environment by a user
                             who is not root, and a 4-rank simulated job with a planted hang run through
                             that environment's trshim and analysed by its tranalyze; the bash
                             completion in the package (trshim completion) and in the venv's
                             share/bash-completion/completions/.
    test_wheel.py --qemu     install-wheel-aarch64-qemu: the aarch64 wheel's libtrshim.so preloaded into
                             a 4-rank simulated job built for aarch64 (Debian's gcc-aarch64-linux-gnu),
                             each rank under qemu-user; the aarch64 tranalyze (under qemu) names the
                             culprit. Skipped (77) without qemu-aarch64(-static), the cross compiler or
                             its libc (/usr/aarch64-linux-gnu).

Both need PyPI (the build requirements): unreachable, they skip (77) with a message, and fail under
CI=true. The wheels are left in BUILD/tests/install/wheels for the second test."""
import glob
import json
import os
import pwd
import re
import shutil
import subprocess
import tarfile
import sys
import tempfile
import zipfile

BUILD = os.environ["TRSHIM_BUILD_ROOT"]
SOURCE = os.environ["TRSHIM_SOURCE_ROOT"]
VERSION = os.environ["TRSHIM_VERSION"]
TRSIM_LIB = os.environ["TRSIM_LIB"]
LAUNCH = os.environ["TRSIM_LAUNCH"]
TRAIN_DP_SIM = os.environ["TRAIN_DP_SIM"]
MESON = os.environ.get("TRSHIM_MESON", "meson")
CUDA_INC = os.environ.get("TRSHIM_CUDA_INC", "")
WHEELS = os.path.join(BUILD, "tests", "install", "wheels")
ARCHES = ("x86_64", "aarch64")
GLIBC = (2, 28)
CI = os.environ.get("CI") == "true"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL " + what, flush=True)
    return cond


def say(msg):
    print("install-wheel: " + msg, flush=True)


def run(cmd, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.STDOUT)
    kw.setdefault("universal_newlines", True)
    kw.setdefault("timeout", 900)
    return subprocess.run(cmd, **kw)


def skip(why):
    if CI:
        print("FAIL (CI=true, no skipping): " + why)
        sys.exit(1)
    print("SKIP: " + why)
    sys.exit(77)


def elf_module():
    """python/trshim/elf.py (the trshim command's ELF reader), loaded by its path"""
    import importlib.util
    spec = importlib.util.spec_from_file_location("trshim_elf_src", os.path.join(SOURCE, "python", "trshim", "elf.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def package_modules():
    """every module of the package trshim in the source (python/trshim/*.py): the wheel holds each"""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(SOURCE, "python", "trshim", "*.py")))


def pypi_reachable():
    r = run([sys.executable, "-m", "pip", "index", "versions", "meson-python"], timeout=120)
    return r.returncode == 0, r.stdout.strip().splitlines()[-1:] if r.stdout else []


def source_copy(tmp):
    """the source tree without build folders, traces, wheels (pip builds in the tree it is given)"""
    dst = os.path.join(tmp, "src")
    skip_top = lambda n: n.startswith("build") or n in (".git", "traces", "dist") or n.startswith(".mesonpy")
    os.makedirs(dst)
    for name in os.listdir(SOURCE):
        if skip_top(name):
            continue
        s, d = os.path.join(SOURCE, name), os.path.join(dst, name)
        if os.path.isdir(s) and not os.path.islink(s):
            shutil.copytree(s, d, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(s, d, follow_symlinks=False)
    return dst


def build_wheel(src, arch, out):
    say("building the %s wheel: python3 -m pip wheel --no-deps -w DIR%s ." %
        (arch, "" if arch == os.uname().machine else " -C trshim-arch=" + arch))
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", out]
    if arch != os.uname().machine:
        cmd += ["-C", "trshim-arch=" + arch]
    r = run(cmd + ["."], cwd=src, timeout=1200)
    if r.returncode != 0:
        print(r.stdout[-6000:])
    check(r.returncode == 0, "pip wheel (%s) exit %d" % (arch, r.returncode))
    found = glob.glob(os.path.join(out, "trshim-*%s.whl" % arch))
    return found[0] if found else None


def check_wheel(path, arch, tmp, auditwheel):
    mod = elf_module()
    name = os.path.basename(path)
    check(name == "trshim-%s-py3-none-manylinux_2_28_%s.whl" % (VERSION, arch), "wheel name %s" % name)
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        modules = {"trshim/" + m for m in package_modules()}
        packed = {n for n in names if re.match(r"^trshim/[^/]+\.py$", n)}
        check(packed == modules, "%s: the package's modules, missing %s, not in python/trshim %s" %
              (name, sorted(modules - packed), sorted(packed - modules)))
        for want in ("trshim/cli.py", "trshim/where.py", "trshim/libtrshim.so", "trshim/trshim.bash",
                     "trshim-%s.data/scripts/tranalyze" % VERSION,
                     "trshim-%s.data/data/share/bash-completion/completions/trshim" % VERSION,
                     "trshim-%s.data/data/share/bash-completion/completions/tranalyze" % VERSION,
                     "trshim-%s.dist-info/entry_points.txt" % VERSION, "trshim-%s.dist-info/licenses/LICENSE" % VERSION):
            check(want in names, "%s holds %s" % (name, want))
        wheel_meta = z.read("trshim-%s.dist-info/WHEEL" % VERSION).decode()
        check("Tag: py3-none-manylinux_2_28_%s" % arch in wheel_meta, "WHEEL tag: %r" % wheel_meta)
        check("trshim = trshim.cli:entry" in z.read("trshim-%s.dist-info/entry_points.txt" % VERSION).decode(),
              "the trshim entry point")
        check(not any(n.endswith((".h", ".a", ".pc")) for n in names), "no headers or static libraries: %s" % names)
        unpacked = os.path.join(tmp, "unpacked-" + arch)
        z.extractall(unpacked)
    for rel in ("trshim/libtrshim.so", "trshim-%s.data/scripts/tranalyze" % VERSION):
        p = os.path.join(unpacked, rel)
        elf = mod.Elf(p)
        g = elf.glibc_max()
        check(elf.machine == arch, "%s: %s is for %s" % (name, rel, elf.machine))
        check(g is not None and g <= GLIBC, "%s: %s needs GLIBC_%s" % (name, rel, ".".join(map(str, g or ()))))
        needed = set(elf.needed())
        check(needed <= {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                         "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}, "%s: %s needs %s" % (name, rel, needed))
        say("%s %s: %s, GLIBC_%s at most, needs %s" % (arch, rel, elf.machine, ".".join(map(str, g or ())),
                                                         " ".join(sorted(needed))))
        objdump = shutil.which("objdump")
        if objdump:
            r = run([objdump, "-T", p])
            vers = sorted({tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", r.stdout)})
            check(r.returncode == 0 and vers and vers[-1] <= GLIBC,
                  "objdump -T %s: newest GLIBC_%s" % (rel, ".".join(map(str, vers[-1])) if vers else "?"))
            say("objdump -T %s (%s): newest GLIBC_%s" % (rel, arch, ".".join(map(str, vers[-1])) if vers else "?"))
    if auditwheel:
        r = run([auditwheel, "show", path])
        text = " ".join(r.stdout.split())
        m = re.search(r'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_(\w+)"', text)
        check(r.returncode == 0 and m is not None and (int(m.group(1)), int(m.group(2))) <= GLIBC and
              m.group(3) == arch, "auditwheel show %s: %s" % (name, text))
        say("auditwheel show: " + (m.group(0) if m else text))
    return unpacked


def user_for_install():
    """(uid, gid, name) of a user who is not root: ourselves, or nobody when we are root"""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid(), pwd.getpwuid(os.getuid()).pw_name
    try:
        pw = pwd.getpwnam("nobody")
        return pw.pw_uid, pw.pw_gid, "nobody"
    except KeyError:
        return 65534, 65534, "65534"


def as_user(uid, gid, cmd, home, **kw):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}
    for k in ("TRSIM_SHM_TAG", "CI"):
        if k in os.environ:
            env[k] = os.environ[k]
    env.update(kw.pop("env", {}))
    if os.geteuid() == 0:
        kw.update(user=uid, group=gid, extra_groups=[])
    return run(cmd, env=env, cwd=home, **kw)


def venv_python(uid, gid, home):
    """a python3 the user can run, with venv (Debian: python3-venv)"""
    for p in ("/usr/bin/python3", shutil.which("python3"), sys.executable):
        if p and as_user(uid, gid, [p, "-c", "import venv, ensurepip"], home, timeout=60).returncode == 0:
            return p
    return None


def test_wheel():
    ok, last = pypi_reachable()
    if not ok:
        skip("PyPI is unreachable (pip index versions meson-python: %s): the wheel's build requirements "
             "(meson-python, ziglang, nvidia-cuda-runtime) come from there" % " ".join(last))
    tmp = tempfile.mkdtemp(prefix="trshim-wheel-")
    try:
        os.chmod(tmp, 0o755)
        src = source_copy(tmp)
        out = os.path.join(tmp, "dist")
        os.makedirs(out)
        wheels = {a: build_wheel(src, a, out) for a in ARCHES}
        if not all(wheels.values()):
            return
        shutil.rmtree(WHEELS, ignore_errors=True)
        os.makedirs(WHEELS)
        for w in wheels.values():
            shutil.copy2(w, WHEELS)
        # auditwheel from PyPI, in a virtual environment of its own
        tools = os.path.join(tmp, "tools")
        r = run([sys.executable, "-m", "venv", tools])
        r = run([os.path.join(tools, "bin", "python"), "-m", "pip", "install", "-q", "auditwheel"], timeout=600)
        auditwheel = os.path.join(tools, "bin", "auditwheel")
        check(r.returncode == 0 and os.path.exists(auditwheel), "pip install auditwheel: %s" % r.stdout[-2000:])
        for a in ARCHES:
            check_wheel(wheels[a], a, tmp, auditwheel if os.path.exists(auditwheel) else None)
        if os.uname().machine not in wheels:
            return
        install_as_user(tmp, wheels[os.uname().machine])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install_as_user(tmp, wheel):
    uid, gid, uname = user_for_install()
    home = os.path.join(tmp, "user")
    os.makedirs(home)
    # the job's programs, where that user can read them
    bindir = os.path.join(home, "job")
    os.makedirs(bindir)
    for p in (LAUNCH, TRSIM_LIB, TRAIN_DP_SIM):
        shutil.copy2(p, bindir)
    shutil.copy2(wheel, home)
    if os.geteuid() == 0:
        os.chown(home, uid, gid)
        for root, dirs, files in os.walk(home):
            for n in dirs + files:
                os.chown(os.path.join(root, n), uid, gid)
    py = venv_python(uid, gid, home)
    if not check(py is not None, "a python3 with venv for user %s" % uname):
        return
    say("as user %s (uid %d): %s -m venv, pip install %s" % (uname, uid, py, os.path.basename(wheel)))
    venv = os.path.join(home, "venv")
    r = as_user(uid, gid, [py, "-m", "venv", venv], home, timeout=300)
    check(r.returncode == 0, "python3 -m venv as %s: %s" % (uname, r.stdout[-2000:]))
    vbin = os.path.join(venv, "bin")
    r = as_user(uid, gid, [os.path.join(vbin, "python"), "-m", "pip", "install", "--no-index", "--no-deps",
                           os.path.join(home, os.path.basename(wheel))], home, timeout=300)
    if not check(r.returncode == 0, "pip install the wheel as %s: %s" % (uname, r.stdout[-3000:])):
        return
    r = as_user(uid, gid, [os.path.join(vbin, "trshim"), "--version"], home)
    check(r.returncode == 0 and r.stdout.startswith("trshim %s\n" % VERSION), "venv trshim --version: %r" % r.stdout)
    r = as_user(uid, gid, [os.path.join(vbin, "python"), "-c",
                           "import trshim, os; p = trshim.library_path(); print(p); print(os.path.isfile(p)); "
                           "print(trshim.tranalyze_path()); print(trshim.__version__)"], home)
    lines = r.stdout.split()
    check(r.returncode == 0 and len(lines) == 4 and lines[0].startswith(venv) and lines[1] == "True" and
          lines[2] == os.path.join(vbin, "tranalyze") and lines[3] == VERSION,
          "import trshim: library_path, tranalyze_path, __version__: %r" % r.stdout)
    lib = lines[0] if lines else ""
    # the bash completion: where bash-completion looks beside the venv's bin/, and printed by trshim completion
    with open(os.path.join(SOURCE, "packaging", "completion", "trshim.bash")) as f:
        script = f.read()
    for cmd in ("trshim", "tranalyze"):
        p = os.path.join(venv, "share", "bash-completion", "completions", cmd)
        check(os.path.isfile(p) and open(p).read() == script, "the wheel's completion for %s at %s" % (cmd, p))
    r = as_user(uid, gid, [os.path.join(vbin, "trshim"), "completion"], home)
    check(r.returncode == 0 and r.stdout == script, "venv trshim completion: %d %r" % (r.returncode, r.stdout[:200]))
    r = as_user(uid, gid, ["bash", "-c", 'source <("$1" completion); COMP_WORDS=(trshim ru); COMP_CWORD=1; _trshim; '
                           'echo "${COMPREPLY[@]}"', "bash", os.path.join(vbin, "trshim")], home)
    check(r.stdout.strip() == "run", "the venv's completion of 'trshim ru': %r" % r.stdout)
    r = as_user(uid, gid, [os.path.join(vbin, "python"), "-m", "trshim", "lib"], home)
    check(r.returncode == 0 and r.stdout.strip() == lib, "python -m trshim lib: %r" % r.stdout)
    r = as_user(uid, gid, [os.path.join(vbin, "tranalyze"), "--version"], home)
    check(r.stdout.strip() == "tranalyze " + VERSION, "venv tranalyze --version: %r" % r.stdout)
    r = as_user(uid, gid, [os.path.join(vbin, "trshim"), "doctor", "--dir", os.path.join(home, "traces")], home,
                timeout=300)
    check(r.returncode == 0 and "ok    preload" in r.stdout and "ok    library        " + lib in r.stdout,
          "venv trshim doctor: %s" % r.stdout)
    # a job through it: the planted hang, 4 ranks
    traces = os.path.join(home, "traces")
    r = as_user(uid, gid, [os.path.join(vbin, "trshim"), "run", "--dir", traces, "--",
                           os.path.join(bindir, "trsim-launch"), "-n", "4", "--timeout", "8", "--grace", "5", "--quiet",
                           "--", "env", "LD_LIBRARY_PATH=" + bindir, "TRAIN_DP_PLANT=log_metrics",
                           os.path.join(bindir, os.path.basename(TRAIN_DP_SIM)), "40", "64"], home, timeout=180)
    check(r.returncode == 124, "the planted job through the venv's trshim: exit %d %s" % (r.returncode, r.stdout[-2000:]))
    n = len(glob.glob(os.path.join(traces, "trshim.*.json")))
    check(n == 4, "4 traces written by the wheel's shim as %s: %d" % (uname, n))
    r = as_user(uid, gid, [os.path.join(vbin, "tranalyze"), "--json", traces], home, stderr=subprocess.PIPE)
    try:
        top = json.loads(r.stdout)["findings"][0]
    except (ValueError, KeyError, IndexError):
        check(False, "venv tranalyze --json: %d %r %r" % (r.returncode, r.stdout[:500], r.stderr))
        return
    got = {k: top.get(k) for k in ("kind", "seq", "ranks", "others")}
    check(r.returncode == 1 and got == {"kind": "divergence", "seq": 12, "ranks": [0], "others": [1, 2, 3]},
          "the venv's tranalyze: %s" % got)
    check(top["call"]["function"] == "log_metrics", "culprit's function %s" % top["call"])
    say("as %s: the venv's trshim recorded the 4-rank job, its tranalyze: %s #%d on rank 0 at %s" %
        (uname, top["kind"], top["seq"], top["call"]["site"]))
    # the bundle, with the wheel's tranalyze found beside its trshim
    out = os.path.join(home, "report.tar.gz")
    r = as_user(uid, gid, [os.path.join(vbin, "trshim"), "bundle", traces, "-o", out], home, timeout=300,
                stderr=subprocess.PIPE)
    check(r.returncode == 0 and os.path.isfile(out), "venv trshim bundle: %d %r %r" % (r.returncode, r.stdout[-800:],
                                                                                    r.stderr[-800:]))
    if r.returncode == 0:
        with tarfile.open(out) as tar:
            names = [os.path.basename(m.name) for m in tar.getmembers()]
        want = {"MANIFEST.txt", "report.md", "report.json", "report.txt"}
        check(want <= set(names) and len([n for n in names if n.endswith(".json") and n.startswith("trshim.")]) == 4,
              "the wheel's bundle holds %s" % names)
        say("as %s: trshim bundle wrote %d bytes, %d members" % (uname, os.path.getsize(out), len(names)))


# ---- aarch64 under qemu-user ----------------------------------------------------------------

def test_qemu():
    qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
    gcc = shutil.which("aarch64-linux-gnu-gcc")
    sysroot = "/usr/aarch64-linux-gnu"
    missing = [n for n, v in (("qemu-aarch64-static (Debian qemu-user-static)", qemu),
                              ("aarch64-linux-gnu-gcc (Debian gcc-aarch64-linux-gnu)", gcc),
                              ("%s/lib/ld-linux-aarch64.so.1 (Debian libc6-arm64-cross)" % sysroot,
                               os.path.exists(sysroot + "/lib/ld-linux-aarch64.so.1"))) if not v]
    if missing:
        print("SKIP: not here: " + ", ".join(missing))
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="trshim-qemu-")
    try:
        wheel = (glob.glob(os.path.join(WHEELS, "trshim-*-manylinux_2_28_aarch64.whl")) or [None])[0]
        if not wheel:
            ok, last = pypi_reachable()
            if not ok:
                skip("PyPI is unreachable: no aarch64 wheel can be built (%s)" % " ".join(last))
            out = os.path.join(tmp, "dist")
            os.makedirs(out)
            wheel = build_wheel(source_copy(tmp), "aarch64", out)
            if not wheel:
                return
        unpacked = os.path.join(tmp, "wheel")
        with zipfile.ZipFile(wheel) as z:
            z.extractall(unpacked)
        shim = os.path.join(unpacked, "trshim", "libtrshim.so")
        tranalyze = os.path.join(unpacked, "trshim-%s.data" % VERSION, "scripts", "tranalyze")
        os.chmod(tranalyze, 0o755)
        # the simulated runtime and the example job, for aarch64 (Debian's cross gcc: the harness, not
        # the thing tested)
        cross = os.path.join(tmp, "aarch64.ini")
        with open(cross, "w") as f:
            f.write("[binaries]\nc = 'aarch64-linux-gnu-gcc'\nar = 'aarch64-linux-gnu-ar'\n"
                    "strip = 'aarch64-linux-gnu-strip'\nexe_wrapper = ['%s', '-L', '%s']\n\n"
                    "[host_machine]\nsystem = 'linux'\ncpu_family = 'aarch64'\ncpu = 'aarch64'\n"
                    "endian = 'little'\n" % (qemu, sysroot))
        bdir = os.path.join(tmp, "build-aarch64")
        toolkit = os.path.dirname(CUDA_INC) if CUDA_INC else ""
        r = run([MESON, "setup", bdir, SOURCE, "--cross-file", cross, "-Dnangpu=disabled", "-Dlibdw=disabled",
                 "--force-fallback-for=libcjson"] + (["-Dtoolkit_dir=" + toolkit] if toolkit else []), timeout=600)
        if not check(r.returncode == 0, "meson setup (aarch64 harness): %s" % r.stdout[-4000:]):
            return
        r = run([MESON, "compile", "-C", bdir, "-j", "2", "tests/sim/trsim", "examples/train_dp_sim"], timeout=900)
        if not check(r.returncode == 0, "meson compile (aarch64 harness): %s" % r.stdout[-4000:]):
            return
        prog = os.path.join(bdir, "examples", "train_dp_sim")
        traces = os.path.join(tmp, "traces")
        env = dict(os.environ, TRSHIM_DIR=traces, TRSHIM_JOB_ID="aarch64-qemu", TRAIN_DP_PLANT="log_metrics")
        env.pop("LD_PRELOAD", None)
        say("4 ranks of %s under %s with the aarch64 wheel's libtrshim.so preloaded" % (prog, qemu))
        r = run([LAUNCH, "-n", "4", "--timeout", "25", "--grace", "5", "--quiet", "--", qemu, "-L", sysroot,
                 "-E", "LD_PRELOAD=" + shim, prog, "40", "64"], env=env, timeout=180)
        check(r.returncode == 124, "the planted aarch64 job hangs and is ended (124): %d %s" % (r.returncode,
                                                                                              r.stdout[-3000:]))
        files = sorted(glob.glob(os.path.join(traces, "trshim.aarch64-qemu.r*.json")))
        check(len(files) == 4, "4 traces from the aarch64 shim: %s" % files)
        r = run([qemu, "-L", sysroot, tranalyze, "--json", traces], stderr=subprocess.PIPE)
        try:
            top = json.loads(r.stdout)["findings"][0]
        except (ValueError, KeyError, IndexError):
            check(False, "aarch64 tranalyze --json: %d %r %r" % (r.returncode, r.stdout[:500], r.stderr))
            return
        got = {k: top.get(k) for k in ("kind", "seq", "ranks", "others")}
        check(got == {"kind": "divergence", "seq": 12, "ranks": [0], "others": [1, 2, 3]} and
              top["call"]["function"] == "log_metrics", "aarch64 tranalyze under qemu: %s %s" % (got, top["call"]))
        say("aarch64 shim under qemu: 4 traces; the aarch64 tranalyze: %s #%d on rank 0 at %s" %
            (top["kind"], top["seq"], top["call"]["site"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if "--qemu" in sys.argv:
        test_qemu()
    else:
        test_wheel()
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
