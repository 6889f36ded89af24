"""Where the trshim command's things are: its version, libtrshim.so, tranalyze, the bash completion.

The one module meson configures (python/meson.build fills in the @...@ values): run from the
source tree they stay as they are, and the version reads "unknown (not installed)". In the
wheel the library is beside this package; in a meson install this package is in
DATADIR/trshim/trshim and the library, bindir and DATADIR are named relative to it (so that a
DESTDIR or a moved prefix still finds them), with the library folder's absolute path as a
fallback.
"""
import os
import shutil
import sys
import sysconfig

VERSION = "@VERSION@"
# a meson install: the library folder relative to this package's folder, and absolute
REL_LIBDIR = "@REL_LIBDIR@"
ABS_LIBDIR = "@ABS_LIBDIR@"
# ... bindir (tranalyze) and DATADIR (the bash completion), relative to this package's folder
REL_BINDIR = "@REL_BINDIR@"
REL_DATADIR = "@REL_DATADIR@"
LIBNAME = "libtrshim.so"


def version():
    return VERSION if not VERSION.startswith("@") else "unknown (not installed)"


def _here():
    return os.path.dirname(os.path.realpath(__file__))


def _set(value):
    """a value meson filled in (not empty, not the @...@ of the source tree)"""
    return bool(value) and not value.startswith("@")


def library_path():
    """The absolute path of libtrshim.so: $TRSHIM_LIBRARY, else next to this
    package (the wheel), else the library folder of a meson install."""
    env = os.environ.get("TRSHIM_LIBRARY")
    if env:
        return os.path.abspath(env)
    here = _here()
    candidates = [os.path.join(here, LIBNAME)]
    if _set(REL_LIBDIR):
        candidates.append(os.path.normpath(os.path.join(here, REL_LIBDIR, LIBNAME)))
    if _set(ABS_LIBDIR):
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
    if _set(REL_BINDIR):
        dirs.append(os.path.normpath(os.path.join(_here(), REL_BINDIR)))
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


def completion_path():
    """packaging/completion/trshim.bash as installed: in the package (the wheel: trshim.bash), in the source tree,
    DATADIR/bash-completion/completions/trshim of a meson install; None"""
    here = _here()
    cands = [os.path.join(here, "trshim.bash"),
             os.path.join(here, "..", "..", "packaging", "completion", "trshim.bash")]
    if _set(REL_DATADIR):
        cands.append(os.path.join(here, REL_DATADIR, "bash-completion", "completions", "trshim"))
    for c in cands:
        if os.path.isfile(c):
            return os.path.normpath(c)
    return None
