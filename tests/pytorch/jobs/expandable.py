"""PyTorch's expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,
cuMemCreate/cuMemMap through the driver's entry points): the shim counts
that memory; each rank writes the peak PyTorch reserved to PEAK_FILE.RANK."""
import os

import torch
import torch.distributed as dist

from common import finish, full, setup


def train():
    rank, world = setup()
    kept = []
    for step in range(5):
        kept.append(full(1 << 20, 1.0))
        dist.all_reduce(kept[-1])
    kept += [full(3 << 19, 2.0) for _ in range(rank + 1)]      # rank-specific: peaks differ
    finish(rank)
    with open("%s.%d" % (os.environ["PEAK_FILE"], rank), "w") as f:
        f.write("%d\n" % torch.cuda.max_memory_reserved())


train()
