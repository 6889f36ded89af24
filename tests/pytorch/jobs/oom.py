"""Catalog: one rank runs out of device memory (TRSIM_DEVICE_MEM=256M): rank
1 keeps activations of every step on the device and dies of torch's
OutOfMemoryError; the others hang in their next all-reduce."""
import torch
import torch.distributed as dist

from common import full, setup


def keep_activations(rank, step, kept):
    if rank == 1:
        kept.append(torch.empty(16 << 20).cuda())  # planted: oom


def train():
    rank, world = setup()
    kept = []
    for step in range(10):
        dist.all_reduce(full(1024, 1.0))  # planted: grads
        keep_activations(rank, step, kept)
        torch.cuda.synchronize()
    print("rank %d done" % rank, flush=True)


train()
