"""More distinct Python stacks, or more code objects, than the shim keeps
(65536 of each): the stacks past the bound get -1 and are counted in
"python.dropped", the job is unaffected. One rank.
  PY_BOUNDS=stacks  70 functions of 1000 all-reduces each, every call on its
                    own line: 70000 distinct stacks, few code objects
  PY_BOUNDS=codes   70000 functions of one all-reduce each: 70000 code
                    objects
Generated code (file "bounds_gen.py"): function j's k-th all-reduce is on
line j * (CALLS + 1) + k + 2.
# EXPECT: clean bounds
"""
import os

import simnccl as dist

WHAT = os.environ.get("PY_BOUNDS", "stacks")
FUNCS, CALLS = (70, 1000) if WHAT == "stacks" else (70000, 1)


def main():
    dist.init_process_group()
    t = dist.zeros(1)
    src = []
    for j in range(FUNCS):
        src.append("def f%d(t):" % j)
        src += ["    all_reduce(t)"] * CALLS
    g = {"all_reduce": dist.all_reduce}
    exec(compile("\n".join(src), "bounds_gen.py", "exec"), g)
    for j in range(FUNCS):
        g["f%d" % j](t)  # CALL:gen
        if j % max(1, 1000 // CALLS) == 0:
            dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
