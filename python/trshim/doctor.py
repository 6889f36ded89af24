"""trshim doctor: what recording needs on this node, a line each (ok, info, warn, FAIL):
libtrshim.so (machine, glibc, preloaded into a program), tranalyze, the CUDA runtime, NCCL
and GPU driver the loader gives a C program, each Python's version, NVIDIA's wheels, PyTorch
(its NCCL linked dynamically) and DeepSpeed (a probe run in that Python), the trace folder."""
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys

from trshim.elf import Elf, glibc_version, host_machine
from trshim.env import SHIM_DEFAULT_DIR, check_library_path, preload_with_shim
from trshim.folders import folder_problem
from trshim.where import library_path, tranalyze_path, version

# CPython versions whose frames the shim reads (Python call sites; shim/stacks/python/tr_python*.c)
PY_SUPPORTED = ((3, 10), (3, 14))


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
