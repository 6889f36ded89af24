#!/usr/bin/env python3
"""The cost of a Python stack on a wrapped NCCL call (issue 7): run by bash
bench/run with one CPython, without and with LD_PRELOAD=libtrshim.so:

    python3.X bench/py_overhead.py LIBFAKEGPU LIBPYLOOP [CALLS_PER_ROUND]

libfakegpu.so (whose CUDA and NCCL functions return at once) is loaded with
RTLD_GLOBAL and a one-rank communicator made through the process's global
scope (so through the shim's wrappers when it is preloaded). From the
innermost frame of a stack of exactly 30 Python frames (distinct functions,
each its own code object), Python calls libpyloop.so's loop_allreduce
through ctypes.CDLL (the GIL released, as around PyTorch's NCCL calls),
which calls ncclAllReduce CALLS_PER_ROUND times per round from C; the
median of 9 rounds. Prints, one line each:
  shim yes|no PATH
  py_allreduce_30 NS      ns per ncclAllReduce issued under 30 Python frames
  py_allreduce_loop_30 NS the same with the loop in Python (one ctypes call
                          per collective, as a training loop makes them)
  py_growth BYTES STACKS  then 1M more calls from 8 different 30-frame stacks
                          (cycled, 125k calls each): malloc's bytes in use
                          after minus before (glibc mallinfo2; the shim
                          keeps nothing per call), and the Python stacks
                          the trace then holds (python.dropped must be 0)."""
import ctypes
import functools
import glob
import json
import os
import sys
import time

FAKE, LOOP = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 40000

fake = ctypes.CDLL(FAKE, mode=ctypes.RTLD_GLOBAL)
api = ctypes.CDLL(None)
loop = ctypes.CDLL(LOOP)
loop.loop_allreduce.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
loop.loop_allreduce.restype = ctypes.c_double
loop.heap_in_use.restype = ctypes.c_longlong
loop.which_allreduce.restype = ctypes.c_char_p
allreduce = api.ncclAllReduce
allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_void_p, ctypes.c_void_p]

where = loop.which_allreduce().decode()
print("shim %s %s" % ("yes" if "libtrshim" in where else "no", where))

buf = ctypes.c_void_p()
assert api.cudaMalloc(ctypes.byref(buf), 4096) == 0
uid = (ctypes.c_char * 128)()
assert api.ncclGetUniqueId(uid) == 0
comm = ctypes.c_void_p()
api.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_char * 128, ctypes.c_int]
assert api.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0


def depth():
    f, n = sys._getframe(1), 0
    while f is not None:
        n, f = n + 1, f.f_back
    return n


CHAINS = {}


def at(total, fn, variant=0):
    """Calls fn (a partial: no frame of its own) so that its callee's frame
    is the total-th: a chain of distinct functions (variant: another set
    of code objects, so another stack of the same depth)."""
    n = total - depth() - 1
    key = (n, variant)
    if key not in CHAINS:
        src = []
        for i in range(n):
            src.append("def f%d(fn):" % i)
            src += ["    x%d = %d" % (k, k) for k in range(4)]
            src.append("    return %s" % ("f%d(fn)" % (i + 1) if i + 1 < n else "fn()"))
        g = {}
        exec(compile("\n".join(src), "bench_chain_%d_%d.py" % (n, variant), "exec"), g)
        CHAINS[key] = g["f0"]
    return CHAINS[key](fn)


def c_loop(n, rounds):
    # the innermost Python frame: ncclAllReduce is called from C, 30 frames deep
    return loop.loop_allreduce(n, rounds, buf, comm)


def py_loop(n, rounds):
    ts = []
    for r in range(-1, rounds):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            allreduce(buf, buf, 1024, 7, 0, comm, None)
        if r >= 0:
            ts.append((time.perf_counter_ns() - t0) / n)
    return sorted(ts)[rounds // 2]


# 30 frames: 29 Python frames of ours + the frame calling ctypes (c_loop)
print("py_allreduce_30 %.1f" % at(30, functools.partial(c_loop, N, 9)), flush=True)
print("py_allreduce_loop_30 %.1f" % at(30, functools.partial(py_loop, N // 4, 9)), flush=True)

def variants(n, rounds):
    for k in range(8):
        at(30, functools.partial(c_loop, n, rounds), variant=k)


# pass 0: the 8 stacks' first captures (from the same lines as later: the
# same stacks); passes 1, 2: 2 x 8 x 5 rounds (with the warm-up) x 12.5k = 1M calls
for i in range(3):
    if i == 1:
        before = loop.heap_in_use()
    variants(100 if i == 0 else 125000 // 10, 1 if i == 0 else 4)
after = loop.heap_in_use()
api.ncclCommDestroy.argtypes = [ctypes.c_void_p]
api.ncclCommDestroy(comm)
stacks = -1
d = os.environ.get("TRSHIM_DIR")
if "libtrshim" in where and d:
    # the trace the writer thread writes after ncclCommDestroy (up to 10 s)
    for _ in range(1000):
        paths = glob.glob(os.path.join(d, "*.json"))
        if paths:
            with open(paths[0]) as f:
                t = json.load(f)
            stacks = len(t.get("pystacks", [])) if t["python"]["dropped"] == 0 else -2
            break
        time.sleep(0.01)
print("py_growth %d %d" % (after - before, stacks), flush=True)
