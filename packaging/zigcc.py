#!/usr/bin/env python3
"""The wheel's C compiler: zig cc (PyPI's ziglang) for one target, e.g.

    zigcc.py x86_64-linux-gnu.2.28 ARGS...      (the compiler, in a meson machine file)
    zigcc.py --ar ARGS...                       (zig ar)

zig links against its own stubs of glibc of the version named in the target,
so what it builds runs on glibc 2.28 and newer (manylinux_2_28), from any
build machine, for x86_64 and aarch64 alike. Two things of the project's
link line are translated for it (shim/meson.build is written for Debian's
gcc):
  - Debian's LLVM libunwind.a (x86_64 only, built for Debian's glibc) becomes
    -lunwind: zig builds LLVM's libunwind from its own sources for the target
    and links it statically; its header comes first on the include path
    (packaging/include/libunwind/libunwind.h, zig's lib/libunwind/include);
  - -Wl,--exclude-libs,ALL is dropped (zig's linker has no such option): the
    shim's version script (local: *) already keeps every symbol of a static
    library out of its exports.
Links get -Wl,--strip-debug: zig builds libunwind and its runtime with
debug information (the symbol table stays)."""
import os
import sys


def zig_dir():
    import ziglang
    return os.path.dirname(ziglang.__file__)


def translate(args):
    out = []
    for a in args:
        if a.startswith("-Wl,"):
            parts, keep, i = a[4:].split(","), [], 0
            while i < len(parts):
                if parts[i] == "--exclude-libs":
                    i += 2
                    continue
                if not parts[i].startswith("--exclude-libs="):
                    keep.append(parts[i])
                i += 1
            if not keep:
                continue
            a = "-Wl," + ",".join(keep)
        elif os.path.basename(a) == "libunwind.a":
            a = "-lunwind"
        out.append(a)
    return out


def main(argv):
    zdir = zig_dir()
    zig = os.path.join(zdir, "zig")
    if argv and argv[0] == "--ar":
        cmd = [zig, "ar"] + argv[1:]
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        args = translate(argv[1:])
        if not any(a in ("-c", "-E", "-S", "-M", "-MM", "--version", "-v", "-dumpversion") for a in args):
            args.append("-Wl,--strip-debug")
        cmd = [zig, "cc", "-target", argv[0], "-isystem", os.path.join(here, "include"),
               "-isystem", os.path.join(zdir, "lib", "libunwind", "include")] + args
    os.execv(zig, cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
