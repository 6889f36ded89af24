"""ELF files as trshim reads them, without pyelftools: the machine, DT_NEEDED, the GLIBC_x.y
versions needed (.gnu.version_r), the dynamic symbols; and this machine's name and glibc.

Standard library only and no import of the package: trshim doctor uses it, and the wheel's
build backend (packaging/trshim_build.py) and tests/install/test_wheel.py load this file by
its path to check every ELF file of the wheel.
"""
import os
import re
import struct

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
