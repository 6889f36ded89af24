"""The rank that died, in Python (issue 21; test_crash.py case "py-segv"):
a 4-rank ctypes job (tests/python/site-packages/simnccl.py) whose rank 2,
at step 6, reads address 12 through ctypes.string_at in read_sample: a
SIGSEGV in native code (libc's memmove) while the thread runs Python. The
peers wait in their next AllReduce until the launcher ends them. Lines
marked CRASH-SITE-<name> are asserted by the test."""
import ctypes
import sys
import time

import simnccl as dist


def read_sample(addr):
    return ctypes.string_at(addr, 16)  # CRASH-SITE-py_read_sample


def load_batch(step):
    if dist.get_rank() == 2 and step == 6:
        time.sleep(0.3)  # the peers in AllReduce #6 first
        read_sample(12)  # CRASH-SITE-py_load_batch


def main():
    dist.init_process_group()
    grads = dist.zeros(1024)
    for step in range(1, 11):
        load_batch(step)  # CRASH-SITE-py_main
        dist.all_reduce(grads)
        dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    sys.exit(0)
