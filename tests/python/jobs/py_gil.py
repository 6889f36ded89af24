"""The shim never touches the GIL. Two phases, on every rank:
  busy  another Python thread keeps the interpreter busy (a CPU loop, so it
        holds the GIL whenever this thread releases it) while this thread
        issues 2000 all-reduces through ctypes;
  held  another thread holds the GIL for 3 s without releasing it (a C call
        through ctypes.PyDLL) while this thread, inside a C function called
        through ctypes.CDLL (GIL released, as PyTorch's C++ is), issues an
        all-reduce: the call must return at once (the shim neither takes
        nor waits for the GIL) and its Python stack must be this thread's.
Prints "HELD rank t_enter t_exit hold_start hold_end" (CLOCK_MONOTONIC ns) and
exits 1 if the held call was not inside the hold or took longer than 200 ms.
argv[1]: the helper library (gilhelp.c).
# EXPECT: clean gil
"""
import ctypes
import sys
import threading
import time

import simnccl as dist

CALLS = 2000


def busy(stop, out):
    n = 0
    while not stop.is_set():
        n += 1
    out.append(n)


def phase_busy(grads):
    stop, spins = threading.Event(), []
    spinner = threading.Thread(target=busy, args=(stop, spins), name="spinner")
    spinner.start()
    for i in range(CALLS):
        dist.all_reduce(grads)  # CALL:busy
        if i % 200 == 199:
            dist.synchronize()
    dist.synchronize()
    stop.set()
    spinner.join()
    return spins[0]


def phase_held(helper, grads):
    pydll = ctypes.PyDLL(None)           # usleep with the GIL held
    pydll.usleep.argtypes = [ctypes.c_uint]
    go, span = threading.Event(), []

    def hold():
        go.wait()
        t0 = time.monotonic_ns()
        pydll.usleep(3000000)
        span.append((t0, time.monotonic_ns()))

    holder = threading.Thread(target=hold, name="holder")
    holder.start()
    t_enter, t_exit = ctypes.c_uint64(), ctypes.c_uint64()
    go.set()
    # the holder takes the GIL as soon as this call releases it; the C side
    # waits 1 s, then calls ncclAllReduce (the shim's wrapper) from C
    r = helper.delayed_allreduce(dist.raw_function("ncclAllReduce"), grads.ptr, grads.numel, 7, 0,  # CALL:held
                                 dist.comm_handle(), dist.stream_handle(), 1000,
                                 ctypes.byref(t_enter), ctypes.byref(t_exit))
    holder.join()
    dist.synchronize()
    return r, t_enter.value, t_exit.value, span[0]


def main():
    helper = ctypes.CDLL(sys.argv[1])
    helper.delayed_allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                         ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)]
    dist.init_process_group()
    grads = dist.zeros(1024)
    spins = phase_busy(grads)
    r, t_enter, t_exit, (h0, h1) = phase_held(helper, grads)
    print("BUSY %d spins" % spins)
    print("HELD %d %d %d %d %d" % (dist.get_rank(), t_enter, t_exit, h0, h1), flush=True)
    dist.destroy_process_group()
    ok = r == 0 and h0 < t_enter and t_exit < h1 and t_exit - t_enter < 200000000
    if not ok:
        print("FAIL: rc %d; the call [%d, %d] (%.1f ms) not inside the GIL hold [%d, %d]"
              % (r, t_enter, t_exit, (t_exit - t_enter) / 1e6, h0, h1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
