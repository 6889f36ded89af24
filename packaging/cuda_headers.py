#!/usr/bin/env python3
"""Prints the include folders of NVIDIA's Python wheels (nvidia-cuda-runtime,
nvidia-cuda-crt, nvidia-nccl-cu13: nvidia/<name>/include) that together hold
every header named on the command line, one per line; prints nothing when
some header is in none of them. meson.build runs it with the Python that runs
meson, so the wheel's build (pyproject.toml's build requirements) needs no
CUDA toolkit."""
import os
import sys


def include_dirs():
    seen = []
    for entry in sys.path:
        base = os.path.join(entry or ".", "nvidia")
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            inc = os.path.realpath(os.path.join(base, name, "include"))
            if os.path.isdir(inc) and inc not in seen:
                seen.append(inc)
    return seen


def main(headers):
    dirs = include_dirs()
    chosen = []
    for h in headers:
        where = next((d for d in dirs if os.path.isfile(os.path.join(d, h))), None)
        if where is None:
            return 0
        if where not in chosen:
            chosen.append(where)
    # cuda_runtime_api.h includes crt/host_defines.h (nvidia-cuda-crt): same folder in CUDA 13
    # wheels, its own in older ones
    crt = next((d for d in dirs if os.path.isfile(os.path.join(d, "crt", "host_defines.h"))), None)
    if crt and crt not in chosen:
        chosen.append(crt)
    print("\n".join(chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
