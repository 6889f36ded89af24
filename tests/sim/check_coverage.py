#!/usr/bin/env python3
"""Every function a real library exports is defined by the simulator
(implemented, or failing loudly), so that no call reaches the real library:
libcudart's (suite rt) or libnccl's (suite nccl).

    check_coverage.py --library libcudart LIBTRSIM LIB|VENV...
    check_coverage.py --library libnccl --exports EXPORTS_DIR LIBTRSIM LIB|VENV...

Reads the dynamic symbol tables with nm; prints the functions left to the
real library and exits 1 when there are any. A VENV (a folder) stands for
the library of the NVIDIA wheel installed in it (PyTorch's:
nvidia-cuda-runtime's libcudart, nvidia-nccl's libnccl.so.2); what does not
exist is skipped with a line (the torch suite's venv exists once tests/run
installed it). EXPORTS_DIR holds export lists of real libraries
(tests/nccl/exports/<version>.txt, one function a line): every name in them
must be a function of LIBTRSIM too.
"""
import argparse
import glob
import os
import sys

from gen_unsupported import functions   # the same reading of a symbol table

# where each library lies in a venv, below lib/python3*/site-packages
WHEEL_LIBS = {
    "libcudart": os.path.join("nvidia", "*", "lib", "libcudart.so.*"),
    "libnccl": os.path.join("nvidia", "nccl", "lib", "libnccl.so*"),
}


def check_exports(have, exports):
    """1 when a function of an export list in exports is not in have; exits
    when there is no list"""
    lists = sorted(glob.glob(os.path.join(exports, "*.txt")))
    if not lists:
        print("FAIL: no export lists in %s" % exports)
        sys.exit(1)
    bad = 0
    for path in lists:
        with open(path) as f:
            want = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        left = sorted(want - have)
        print("%s: %d functions, %d missing" % (os.path.basename(path), len(want), len(left)))
        if left:
            print("  " + " ".join(left))
            bad = 1
    return bad


def check_libraries(have, library, libs):
    """1 when a present library of libs (a VENV standing for its wheel's)
    exports a function that is not in have"""
    found = []
    for lib in libs:
        if os.path.isdir(lib):
            found += sorted(glob.glob(os.path.join(lib, "lib", "python3*", "site-packages", WHEEL_LIBS[library]))) \
                or [lib + "/(no %s)" % library]
        else:
            found.append(lib)
    bad = 0
    for lib in found:
        if not os.path.exists(lib):
            print("skipped (not present): %s" % lib)
            continue
        want = functions(lib)
        left = sorted(want - have)
        print("%s: %d functions, %d left to the real library" % (lib, len(want), len(left)))
        if left:
            print("  " + " ".join(left))
            bad = 1
    return bad


def main():
    ap = argparse.ArgumentParser(description="the simulator defines every function of a real library")
    ap.add_argument("--library", required=True, choices=sorted(WHEEL_LIBS))
    ap.add_argument("--exports", help="folder of export lists (<version>.txt)")
    ap.add_argument("sim", metavar="LIBTRSIM")
    ap.add_argument("libs", metavar="LIB|VENV", nargs="+")
    args = ap.parse_args()
    have = functions(args.sim)
    bad = 0
    if args.exports is not None:
        bad = check_exports(have, args.exports)
    bad |= check_libraries(have, args.library, args.libs)
    print("FAIL" if bad else "ok")
    return bad


if __name__ == "__main__":
    sys.exit(main())
