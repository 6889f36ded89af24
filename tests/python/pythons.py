"""The CPython interpreters of this machine, by minor version (shared by
tests/python/run_version.py and bench/py_capture.py).

TRSHIM_PYTHONS (paths separated by ':') replaces the search; otherwise:
python3.X on PATH, /usr/bin, /usr/local/bin, and every pyenv version
($PYENV_ROOT, ~/.pyenv, /root/.pyenv), each real file once."""
import glob
import os
import shutil
import subprocess

MINORS = (10, 11, 12, 13, 14)


def _candidates(minor):
    name = "python3.%d" % minor
    found = []
    if shutil.which(name):
        found.append(shutil.which(name))
    found += ["/usr/bin/" + name, "/usr/local/bin/" + name]
    roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv"), "/root/.pyenv"]
    for root in roots:
        if root:
            found += sorted(glob.glob(os.path.join(root, "versions", "3.%d.*" % minor, "bin", name)))
    return found


def version_of(path):
    """(version, real path of the interpreter) or None; pyenv's shims and
    links end at the same real interpreter."""
    try:
        out = subprocess.run([path, "-c", "import os, sys, platform; print(platform.python_version(), "
                              "int(hasattr(sys, '_is_gil_enabled') and not sys._is_gil_enabled()), "
                              "os.path.realpath(sys.executable))"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or len(out.stdout.split()) < 3:
        return None
    ver, free_threaded, real = out.stdout.split(None, 2)
    return ver + (" (free-threaded)" if free_threaded == "1" else ""), real.strip()


def find(minor):
    """[(path, version)] of the interpreters of 3.minor."""
    env = os.environ.get("TRSHIM_PYTHONS")
    paths = env.split(":") if env else _candidates(minor)
    seen, out = set(), []
    for p in paths:
        if not p or not os.path.isfile(p) or not os.access(p, os.X_OK):
            continue
        got = version_of(p)
        if not got or got[1] in seen or not got[0].startswith("3.%d." % minor):
            continue
        seen.add(got[1])
        out.append((p, got[0]))
    return out


def find_all():
    return [(m, p, v) for m in MINORS for p, v in find(m)]
