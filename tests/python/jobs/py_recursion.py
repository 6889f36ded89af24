"""A stack deeper than the capture limit: a deeply nested model whose
forward() recurses once per layer (DEPTH layers, more frames than
TRSHIM_PYSTACK_DEPTH keeps); the innermost layer all-reduces its
parameters. At step 2 rank 3's shard of that layer is empty and it skips
the all-reduce: its collective #5 is the loss all-reduce where the others
all-reduce the innermost layer's parameters. The deep calls' Python stacks
are cut to the innermost frames, never overrun.
# EXPECT: seq=5 ranks=3 call=loss others=deep
"""
import os
import sys

import simnccl as dist

DEPTH = int(os.environ.get("PY_RECURSION_DEPTH", "300"))


def forward(layer, params, step):
    if layer < DEPTH:
        return forward(layer + 1, params, step) + 1  # CALL:recurse
    if not (dist.get_rank() == 3 and step == 2):
        dist.all_reduce(params)  # CALL:deep
    return 0


def reduce_loss(loss):
    dist.all_reduce(loss)  # CALL:loss


def main():
    sys.setrecursionlimit(DEPTH + 1000)
    dist.init_process_group()
    params, loss = dist.zeros(512), dist.tensor([3.0])
    for step in range(4):
        forward(0, params, step)
        reduce_loss(loss)
        dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
