"""The wheel's build backend (pyproject.toml: build-backend = "trshim_build",
backend-path = ["packaging"]): meson-python, with

  - zig cc from PyPI (ziglang) as the C compiler, targeting glibc 2.28
    (packaging/zigcc.py), for the machine's architecture or the one asked
    for: pip wheel -C trshim-arch=aarch64 . (or TRSHIM_WHEEL_ARCH=aarch64):
    x86_64 and aarch64, cross-built from either;
  - the wheel checked and tagged manylinux_2_28_<arch>: every ELF file in it
    is for <arch>, needs no GLIBC_x.y newer than 2.28 and no library outside
    the manylinux set (libc, libm, libdl, libpthread, librt, the loader);
    anything else stops the build instead of giving a wheel that lies.

-C trshim-toolchain=system (or TRSHIM_WHEEL_TOOLCHAIN=system) builds with
the machine's own compiler instead, for this machine only (tag linux_<arch>).
Everything else is meson-python's (-C setup-args=..., editable installs,
sdists)."""
import base64
import hashlib
import os
import platform
import sys
import tempfile
import zipfile

import mesonpy
from mesonpy import (build_sdist, get_requires_for_build_sdist, get_requires_for_build_wheel,  # noqa: F401
                     get_requires_for_build_editable, build_editable)

HERE = os.path.dirname(os.path.abspath(__file__))
GLIBC = (2, 28)
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                  "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def _elf_reader():
    """the Elf class of the trshim command (python/trshim/elf.py, loaded by its path: standard library only)"""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_trshim_elf", os.path.join(HERE, "..", "python", "trshim", "elf.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Elf


def _setting(cs, key, env, default):
    v = cs.pop(key, None)
    if isinstance(v, list):
        v = v[-1]
    return v or os.environ.get(env) or default


def _as_list(v):
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _machine_file(tmp, arch):
    target = "%s-linux-gnu.%d.%d" % ((arch,) + GLIBC)
    zigcc = os.path.join(HERE, "zigcc.py")
    q = lambda s: "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
    lines = ["[binaries]",
             "c = [%s, %s, %s]" % (q(sys.executable), q(zigcc), q(target)),
             "ar = [%s, %s, '--ar']" % (q(sys.executable), q(zigcc))]
    cross = arch != ARCHES.get(platform.machine().lower(), platform.machine())
    if cross:
        lines += ["", "[host_machine]", "system = 'linux'", "cpu_family = %s" % q(arch), "cpu = %s" % q(arch),
                  "endian = 'little'"]
    path = os.path.join(tmp, "zig-%s.ini" % arch)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path, cross


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    cs = dict(config_settings or {})
    arch = _setting(cs, "trshim-arch", "TRSHIM_WHEEL_ARCH", platform.machine()).lower()
    toolchain = _setting(cs, "trshim-toolchain", "TRSHIM_WHEEL_TOOLCHAIN", "zig")
    if arch not in ARCHES:
        raise RuntimeError("trshim: no wheel for architecture %r (x86_64 or aarch64)" % arch)
    arch = ARCHES[arch]
    if toolchain == "system":
        return mesonpy.build_wheel(wheel_directory, cs, metadata_directory)
    if toolchain != "zig":
        raise RuntimeError("trshim: trshim-toolchain is zig or system, not %r" % toolchain)
    with tempfile.TemporaryDirectory(prefix="trshim-wheel-") as tmp:
        machine, cross = _machine_file(tmp, arch)
        cs["setup-args"] = _as_list(cs.get("setup-args")) + [("--cross-file=" if cross else "--native-file=") + machine]
        name = mesonpy.build_wheel(wheel_directory, cs, metadata_directory)
    return _retag(wheel_directory, name, arch)


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _check_elves(zf, arch):
    Elf = _elf_reader()
    problems, seen = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for info in zf.infolist():
            data = zf.read(info)
            if data[:4] != b"\x7fELF":
                continue
            seen += 1
            p = os.path.join(tmp, "f")
            with open(p, "wb") as f:
                f.write(data)
            elf = Elf(p)
            if elf.machine != arch:
                problems.append("%s is for %s, not %s" % (info.filename, elf.machine, arch))
            g = elf.glibc_max()
            if g and g > GLIBC:
                problems.append("%s needs GLIBC_%s (newer than %d.%d)" % (info.filename, ".".join(map(str, g)),
                                                                          GLIBC[0], GLIBC[1]))
            extra = set(elf.needed()) - ALLOWED_NEEDED
            if extra:
                problems.append("%s needs %s (outside manylinux)" % (info.filename, ", ".join(sorted(extra))))
    if seen < 2:
        problems.append("the wheel holds %d ELF files (libtrshim.so and tranalyze expected)" % seen)
    return problems


def _retag(wheel_directory, name, arch):
    """cpXY-cpXY-linux_<arch> (meson-python's tag: this interpreter's, as it takes anything in platlib
    for an extension module) -> py3-none-manylinux_2_28_<arch>: the wheel holds no extension module
    (libtrshim.so is preloaded, not imported), its Python is version-independent"""
    src = os.path.join(wheel_directory, name)
    dist, version = name[:-4].split("-")[:2]
    pytag, abitag = "py3", "none"
    plat = "manylinux_%d_%d_%s" % (GLIBC + (arch,))
    newname = "-".join([dist, version, pytag, abitag, plat]) + ".whl"
    dst = os.path.join(wheel_directory, newname + ".part")
    with zipfile.ZipFile(src) as zin:
        problems = _check_elves(zin, arch)
        if problems:
            os.unlink(src)
            raise RuntimeError("trshim: the wheel is not manylinux_2_28_%s:\n  %s" % (arch, "\n  ".join(problems)))
        distinfo = "%s-%s.dist-info" % (dist, version)
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
            record = []
            for info in zin.infolist():
                if info.filename == distinfo + "/RECORD":
                    continue
                data = zin.read(info)
                if info.filename == distinfo + "/WHEEL":
                    text = data.decode()
                    lines = [l for l in text.splitlines() if not l.startswith("Tag:")]
                    lines.append("Tag: %s-%s-%s" % (pytag, abitag, plat))
                    data = ("\n".join(lines) + "\n").encode()
                zout.writestr(info, data)
                record.append(_record_line(info.filename, data))
            record.append(distinfo + "/RECORD,,")
            rinfo = zipfile.ZipInfo(distinfo + "/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
            rinfo.external_attr = 0o644 << 16
            zout.writestr(rinfo, "\n".join(record) + "\n")
    os.unlink(src)
    os.replace(dst, os.path.join(wheel_directory, newname))
    return newname
