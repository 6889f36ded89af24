"""tr_python.c with offsets made wrong on purpose (a pyprobe built with
-DTR_PY_TEST_HOOKS, TR_PY_TEST_BREAK=...): the check must catch each one,
turn Python capture off with one "trshim:" line, and never crash; a wrong
TSS key offset must be found again by the search.

Run with the Python under test: python3.X test_break.py path/to/libpyprobe_hooks.so
"""
import os
import subprocess
import sys

CHILD = r'''
import ctypes, sys, threading
lib = ctypes.CDLL(sys.argv[1])
lib.probe.argtypes = [ctypes.c_char_p, ctypes.c_int]
lib.probe_describe.argtypes = [ctypes.c_char_p, ctypes.c_int]
lib.probe_describe.restype = None
buf = ctypes.create_string_buffer(1 << 16)
def depth(fr):
    n = 0
    while fr is not None:
        n, fr = n + 1, fr.f_back
    return n
def f():
    return "%d/%d" % (lib.probe(buf, len(buf)), depth(sys._getframe()))
if len(sys.argv) > 2:
    # the first captures come from a thread without Python: no check yet
    c = [lib.probe_from_c_thread() for _ in range(3)]
    print("cfirst", *c, lib.probe_state(buf, 64))
counts = [f() for _ in range(3)]
box = []
t = threading.Thread(target=lambda: box.append(f()))
t.start(); t.join()
d = ctypes.create_string_buffer(512)
lib.probe_describe(d, 512)
print("counts", *(counts + box))
print("state", lib.probe_state(buf, 64))
print("first", buf.value.decode().splitlines()[0] if counts[0] else "-")
print("describe", d.value.decode())
'''

FAILS = []


def check(name, cond, detail=""):
    if not cond:
        FAILS.append(name)
    print("%s %s%s" % ("ok  " if cond else "FAIL", name, ("\n      " + detail) if detail and not cond else ""))


def run(mode, *extra):
    env = dict(os.environ)
    env.pop("TR_PY_TEST_BREAK", None)
    if mode:
        env["TR_PY_TEST_BREAK"] = mode
    p = subprocess.run([sys.executable, "-c", CHILD, sys.argv[1]] + list(extra), env=env, capture_output=True,
                       text=True, timeout=120)
    out = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    warn = [line for line in p.stderr.splitlines() if line.startswith("trshim:")]
    return p.returncode, out, warn, p.stderr


def all_found(out):
    """every capture found all the frames the interpreter has"""
    cs = out.get("counts", "").split()
    return len(cs) == 4 and all(c.split("/")[0] == c.split("/")[1] != "0" for c in cs)


def none_found(out):
    cs = out.get("counts", "").split()
    return len(cs) == 4 and all(c.split("/")[0] == "0" for c in cs)


def tss_offset(out):
    d = out.get("describe", "")
    return d.split("_PyRuntime+")[1].split()[0] if "_PyRuntime+" in d else None


def main():
    rc, out, warn, err = run(None)
    print("      " + out.get("describe", ""))
    check("unbroken: frames", rc == 0 and all_found(out) and out.get("state") == "4",
          "rc=%d %s %s" % (rc, out, err))
    check("unbroken: no trshim line", not warn, str(warn))
    table = tss_offset(out)

    rc, out, warn, err = run(None, "cfirst")
    check("first captures from a C thread: none, check deferred, then frames",
          rc == 0 and out.get("cfirst") == "0 0 0 3" and all_found(out) and out.get("state") == "4",
          "rc=%d %s %s" % (rc, out, err))

    rc, out, warn, err = run("tss")
    print("      " + out.get("describe", ""))
    check("wrong TSS key offset: searched, found at the table's offset", rc == 0 and all_found(out)
          and out.get("state") == "4" and "(searched)" in out.get("describe", "")
          and tss_offset(out) == table, "rc=%d %s %s" % (rc, out, err))
    check("wrong TSS key offset: no trshim line", not warn, str(warn))

    rc, out, warn, err = run("notss")
    print("      " + out.get("describe", ""))
    check("no TSS key offset (as on 3.14): searched, found at the table's offset", rc == 0 and all_found(out)
          and out.get("state") == "4" and "(searched)" in out.get("describe", "")
          and tss_offset(out) == table, "rc=%d %s %s" % (rc, out, err))

    rc, out, warn, err = run("novm")
    check("without process_vm_readv (/proc/self/mem): frames", rc == 0 and all_found(out)
          and out.get("state") == "4", "rc=%d %s %s" % (rc, out, err))

    for mode in ("frame", "code"):
        rc, out, warn, err = run(mode)
        check("wrong %s offset: off, no crash" % mode, rc == 0 and none_found(out)
              and out.get("state") == "5", "rc=%d %s %s" % (rc, out, err))
        check("wrong %s offset: one trshim line" % mode, len(warn) == 1, str(warn))
        print("      " + (warn[0] if warn else "(no line)"))

    rc, out, warn, err = run("version")
    check("unsupported version: no frames", rc == 0 and none_found(out)
          and out.get("state") == "2", "rc=%d %s %s" % (rc, out, err))
    check("unsupported version: one trshim line", len(warn) == 1, str(warn))
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
