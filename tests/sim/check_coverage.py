#!/usr/bin/env python3
"""Every function a real libcudart exports is defined by the simulator
(implemented, or failing loudly), so that no call reaches the real library.

    check_coverage.py LIBTRSIM LIBCUDART|VENV...

Reads the dynamic symbol tables with nm; prints the functions left to the
real library and exits 1 when there are any. A VENV (a folder) stands for
the libcudart of the nvidia-cuda-runtime wheel installed in it (PyTorch's);
what does not exist is skipped with a line (the torch suite's venv exists
once tests/run installed it).
"""
import glob
import os
import sys

from gen_unsupported import functions   # the same reading of a symbol table


def main():
    sim, libs = sys.argv[1], sys.argv[2:]
    have = functions(sim)
    bad = 0
    found = []
    for lib in libs:
        if os.path.isdir(lib):
            found += sorted(glob.glob(os.path.join(lib, "lib", "python3*", "site-packages", "nvidia", "*", "lib",
                                                   "libcudart.so.*"))) or [lib + "/(no libcudart)"]
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
