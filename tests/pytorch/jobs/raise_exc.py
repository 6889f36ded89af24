"""Issue 21: rank 2's data loading raises at step 6, after its all-reduce
#6; the exception ends its process through Python (a traceback, status 1)
while the other ranks wait in all-reduce #7, until the launcher stops them."""
import time

import torch.distributed as dist

from common import finish, full, setup


def load_batch(rank, step):
    if rank == 2 and step == 6:
        time.sleep(2)        # the others are inside #7 before this rank dies
        raise ValueError("bad batch %d" % step)  # planted: raise
    return full(1024, float(rank + step))


def train():
    rank, world = setup()
    for step in range(10):
        grads = load_batch(rank, step)
        dist.all_reduce(grads)  # planted: grads
    finish(rank)


train()
