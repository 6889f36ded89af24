"""Python frames read by shim/stacks/python/tr_python.c, checked against the interpreter.

Run with the Python under test: python3.X test_frames.py path/to/libpyprobe.so
The library (tests/python/pyprobe.c) is loaded with ctypes.CDLL, so every
probe runs with the GIL released, as a wrapped NCCL call under PyTorch does.
Each scenario captures the stack of the calling thread and compares it, frame
by frame, "file:line in qualname", with what the interpreter itself says of
the same frames (sys._getframe, f_lineno; co_qualname from 3.11, co_name on
3.10), and the innermost user frame with a line number known from the source
(a "# LINE:name" marker). Exit status 0 when all pass.
"""
import ctypes
import os
import platform
import sys
import threading

HERE = os.path.abspath(__file__)
LIB = ctypes.CDLL(sys.argv[1])          # CDLL: the GIL is released during calls
LIB_HELD = ctypes.PyDLL(sys.argv[1])    # PyDLL: the GIL is held
for lib in (LIB, LIB_HELD):
    lib.probe.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.probe.restype = ctypes.c_int
    lib.probe_set_depth.argtypes = [ctypes.c_int]
    lib.probe_state.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.probe_describe.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.probe_describe.restype = None
    lib.probe_raw.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.probe_code_matches.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.probe_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
    lib.probe_stats.restype = None

FAILS = []
PASSES = []


def marker(name):
    """Line number of the line ending with '# LINE:name' in this file."""
    tag = "# LINE:" + name
    with open(HERE, encoding="utf-8") as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith(tag):
                return i
    raise KeyError(name)


def qual(code):
    return getattr(code, "co_qualname", code.co_name)


def expected_from(frame, first_line):
    """The stack the interpreter reports, innermost first; frame's own line
    is first_line (the probe call), the callers' are their f_lineno."""
    out = []
    line = first_line
    while frame is not None:
        out.append("%s:%d in %s" % (frame.f_code.co_filename, line, qual(frame.f_code)))
        frame = frame.f_back
        line = frame.f_lineno if frame is not None else 0
    return out


BUF = 1 << 20


def capture(depth=64, lib=None):
    """Captures the stack here; returns (count, lines, expected lines)."""
    lib = lib or LIB
    buf = ctypes.create_string_buffer(BUF)
    lib.probe_set_depth(depth)
    n = lib.probe(buf, BUF)  # LINE:probe
    got = buf.value.decode("utf-8", "replace").splitlines()
    exp = expected_from(sys._getframe(), PROBE_LINE)
    return n, got, exp


PROBE_LINE = marker("probe")


def check(name, cond, detail=""):
    (PASSES if cond else FAILS).append(name)
    print("%s %s%s" % ("ok  " if cond else "FAIL", name, ("\n      " + detail) if (detail and not cond) else ""))


def check_stack(name, res, caller_marker=None, caller_qual=None, depth=64):
    n, got, exp = res
    want = exp[:depth]
    detail = "got:\n        " + "\n        ".join(got) + "\n      expected:\n        " + "\n        ".join(want)
    check(name + ": frames", n == len(want) and got == want, detail)
    if caller_marker:
        line = "%s:%d in %s" % (HERE, marker(caller_marker), caller_qual)
        check(name + ": caller line", len(got) > 1 and got[1] == line, "want %s, got %s" % (line, got[1:2]))


# ---- scenarios -----------------------------------------------------------------


def scenario_main():
    return capture()  # LINE:main


def scenario_thread():
    box = {}

    def body():
        box["res"] = capture()  # LINE:thread

    t = threading.Thread(target=body, name="issuer")
    t.start()
    t.join()
    return box["res"]


def gen():
    yield capture()  # LINE:gen


def scenario_generator():
    return next(gen())


async def coro():
    return capture()  # LINE:coro


def scenario_coroutine():
    c = coro()
    try:
        c.send(None)
    except StopIteration as e:
        return e.value
    raise AssertionError("coroutine did not finish")


def scenario_nested():
    def outer():
        def inner():
            return capture()  # LINE:nested
        return inner()
    return outer()


class Model:
    def step(self):
        return capture()  # LINE:method

    @staticmethod
    def static():
        return capture()  # LINE:static

    @property
    def prop(self):
        return capture()  # LINE:prop


def scenario_lambda():
    f = lambda: capture()  # noqa: E731  # LINE:lambda
    return f()


def scenario_except():
    try:
        raise ValueError("x")
    except ValueError:
        return capture()  # LINE:except


def rec(k, depth):
    if k == 0:
        return capture(depth)  # LINE:rec
    return rec(k - 1, depth)  # LINE:recurse


def scenario_trace():
    # A trace function: 3.10 reads f_lineno, 3.12+ runs instrumented code.
    def tracer(frame, event, arg):
        return tracer
    sys.settrace(tracer)
    try:
        return capture()  # LINE:trace
    finally:
        sys.settrace(None)


UNICODE_SRC = """
def größe(capture):
    return capture()
class Ωmega:
    def 𠀀(self, capture):
        return größe(capture)
def run(capture):
    return Ωmega().𠀀(capture)
def """ + "Ω" * 300 + """(capture):
    return capture()
"""


def scenario_unicode(name):
    """str objects of every kind: latin-1 (größe), UCS-2 (Ωmega, the file
    name), UCS-4 (U+20000), and a qualname longer than the probe's 512-byte
    buffer (cut on a character boundary)"""
    g = {}
    exec(compile(UNICODE_SRC, name, "exec"), g)
    return g["run"](capture), g["Ω" * 300](capture)


def scenario_gil_held():
    return capture(lib=LIB_HELD)  # LINE:held


def main():
    ver = ctypes.create_string_buffer(64)
    state = LIB.probe_state(ver, 64)
    desc = ctypes.create_string_buffer(512)
    print("python %s (%s), probe: version %s, state %d" % (platform.python_version(), sys.executable,
                                                          ver.value.decode(), state))
    vi = sys.version_info
    want_ver = "%d.%d.%d" % vi[:3] if vi >= (3, 11) else "%d.%d" % vi[:2]
    check("version from the process", ver.value.decode() == want_ver, "want %s" % want_ver)

    check_stack("main thread", scenario_main(), "main", "scenario_main")
    LIB.probe_describe(desc, 512)
    print("     " + desc.value.decode())
    check("offsets checked", LIB.probe_state(ver, 64) == 4, desc.value.decode())
    check_stack("second thread", scenario_thread(), "thread",
                "scenario_thread.<locals>.body" if vi >= (3, 11) else "body")
    check_stack("generator", scenario_generator(), "gen", "gen")
    check_stack("coroutine", scenario_coroutine(), "coro", "coro")
    check_stack("nested closure", scenario_nested(), "nested",
                "scenario_nested.<locals>.outer.<locals>.inner" if vi >= (3, 11) else "inner")
    m = Model()
    check_stack("method", m.step(), "method", "Model.step" if vi >= (3, 11) else "step")
    check_stack("static method", Model.static(), "static", "Model.static" if vi >= (3, 11) else "static")
    check_stack("property", m.prop, "prop", "Model.prop" if vi >= (3, 11) else "prop")
    check_stack("lambda", scenario_lambda(), "lambda",
                "scenario_lambda.<locals>.<lambda>" if vi >= (3, 11) else "<lambda>")
    check_stack("except block", scenario_except(), "except", "scenario_except")
    check_stack("under sys.settrace", scenario_trace(), "trace", "scenario_trace")
    check_stack("GIL held (PyDLL)", scenario_gil_held(), "held", "scenario_gil_held")
    for fname in ("/tmp/caf\u00e9/train.py", "/tmp/\u03a9/\U0001f600/train.py"):
        res, long_res = scenario_unicode(fname)
        check_stack("unicode names, file %s" % ascii(fname), res)
        n, got, exp = long_res
        want = exp[1].rsplit(" in ", 1)[0] + " in " + "\u03a9" * 255     # 511 bytes at most
        check("long qualname cut on a character boundary", n >= 2 and got[1] == want and got[2:] == exp[2:],
              "got %r" % got[1][:80])

    # deeper than the limit: cut to the innermost frames, not overrun
    res = rec(200, 64)
    check_stack("recursion 200 deep, limit 64", res, "rec", "rec", depth=64)
    check("recursion: cut at the limit", res[0] == 64 and len(res[2]) > 200, "n=%d" % res[0])
    rec_line = "%s:%d in rec" % (HERE, marker("recurse"))
    check("recursion: outer frames at the recursive call", res[1][2:] == [rec_line] * 62, str(res[1][2:4]))
    res = rec(20, 4096)
    check_stack("recursion 20 deep, limit 4096", res, "rec", "rec", depth=4096)
    res = rec(10, 1)
    check_stack("limit 1", res, depth=1)
    res = rec(10, 0)
    check("limit 0: no frames", res[0] == 0 and res[1] == [], str(res[:2]))

    # a thread that has no Python
    check("a C thread: no frames", LIB.probe_from_c_thread() == 0)

    # raw frames: keys, lines, the code object still matches its key
    frames = (ctypes.c_uint64 * (3 * 64))()   # tr_py_frame: code, code_key, line, lasti: 24 bytes
    n = LIB.probe_raw(frames, 64)  # LINE:raw
    keys = [frames[3 * i + 1] for i in range(n)]
    line0 = ctypes.c_int32.from_buffer(frames, 16).value
    check("raw: innermost line", n >= 1 and line0 == marker("raw"), "n=%d line=%d" % (n, line0))
    check("raw: keys non-zero", n >= 1 and all(keys))
    check("raw: code matches key", n >= 1 and all(LIB.probe_code_matches(frames[3 * i], frames[3 * i + 1])
                                                  for i in range(n)))
    check("raw: other key does not match", n >= 1 and not LIB.probe_code_matches(frames[0], frames[1] ^ 2))

    # many threads capturing at once, many times: the same stacks every time
    errors = []

    def worker(k):
        first = None
        for i in range(300):
            r = capture() if k % 2 else next(gen())
            if r[1] != r[2][:64]:
                errors.append((k, i, r[1][:3], r[2][:3]))
                return
            if first is None:
                first = r[1]
            elif r[1] != first:
                errors.append((k, i, "changed"))
                return

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("8 threads x 300 captures", not errors, str(errors[:2]))

    stats = (ctypes.c_uint64 * 6)()
    LIB.probe_stats(stats)
    print("     this thread: captures %d, frames %d, line cache hits %d, misses %d, cut %d, bad chains %d"
          % tuple(stats))
    check("no bad chains", stats[5] == 0)

    print("%d passed, %d failed" % (len(PASSES), len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
