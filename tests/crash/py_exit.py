"""The Python exception a rank exits with (issue 21; test_crash.py cases
"py-raise", "py-exit"): a 4-rank ctypes job (tests/python/site-packages/
simnccl.py) whose rank 2, at step 6, after its AllReduce #5, either raises
ValueError("bad batch 6") in load_batch, uncaught (MODE raise: Python
prints the traceback, exit status 1), or calls sys.exit(3) there (MODE
exit: a deliberate exit, not a crash). The peers wait in their next
AllReduce until the launcher ends them. Lines marked CRASH-SITE-<name> are
asserted by the test."""
import sys
import time

import simnccl as dist

MODE = sys.argv[1] if len(sys.argv) > 1 else "raise"


def load_batch(step):
    if dist.get_rank() == 2 and step == 6:
        time.sleep(0.3)  # the peers in AllReduce #6 first
        if MODE == "exit":
            sys.exit(3)  # CRASH-SITE-py_exit
        raise ValueError("bad batch %d" % step)  # CRASH-SITE-py_raise
    return step


def main():
    dist.init_process_group()
    grads = dist.zeros(1024)
    for step in range(1, 11):
        load_batch(step)
        dist.all_reduce(grads)
        dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    sys.exit(0)
