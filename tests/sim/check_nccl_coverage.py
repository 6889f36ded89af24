#!/usr/bin/env python3
"""Every NCCL host function of NCCL 2.18 to 2.32 is defined by the simulator
(implemented, or failing loudly), so that no call reaches a real libnccl.

    check_nccl_coverage.py LIBTRSIM EXPORTS_DIR LIBNCCL|VENV...

EXPORTS_DIR holds the export lists of the real libraries
(tests/nccl/exports/<version>.txt, one nccl* function a line); every name
in them must be a function of LIBTRSIM, and so must every function a real
libnccl.so.2 exports (its pnccl* names included). A VENV (a folder) stands
for the libnccl.so.2 of the nvidia-nccl wheel installed in it (PyTorch's);
a library that does not exist is skipped with a line. Prints what is
missing and exits 1 when anything is.
"""
import glob
import os
import sys

from gen_unsupported import functions   # the same reading of a symbol table


def main():
    sim, exports, libs = sys.argv[1], sys.argv[2], sys.argv[3:]
    have = functions(sim)
    bad = 0
    lists = sorted(glob.glob(os.path.join(exports, "*.txt")))
    if not lists:
        print("FAIL: no export lists in %s" % exports)
        return 1
    for path in lists:
        with open(path) as f:
            want = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        left = sorted(want - have)
        print("%s: %d functions, %d missing" % (os.path.basename(path), len(want), len(left)))
        if left:
            print("  " + " ".join(left))
            bad = 1
    found = []
    for lib in libs:
        if os.path.isdir(lib):
            found += sorted(glob.glob(os.path.join(lib, "lib", "python3*", "site-packages", "nvidia", "nccl", "lib",
                                                   "libnccl.so*"))) or [lib + "/(no libnccl)"]
        else:
            found.append(lib)
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
    print("FAIL" if bad else "ok")
    return bad


if __name__ == "__main__":
    sys.exit(main())
