"""Issue 30, DeepSpeed ZeRO-1's shape by hand (started by the deepspeed
launcher): rank 0 alone saves a checkpoint between the gradient all-reduce
and the loss all-reduce of step 1. The checkpoint's first barrier (1 float)
pairs silently with rank 1's loss all-reduce (1 float, another line); the
job hangs at the next call. The first divergence is #4, where the lines of
the two 1-float all-reduces differ."""
import torch
import torch.distributed as dist

from common import finish, full, setup


def save_checkpoint():
    dist.all_reduce(full(1, 1.0))  # planted: ckpt_barrier
    dist.all_reduce(full(64, 1.0))  # planted: ckpt_gather


def train():
    rank, world = setup()
    for step in range(4):
        dist.all_reduce(full(4096, 1.0))  # planted: grads
        if step == 1 and rank == 0:
            save_checkpoint()
        dist.all_reduce(full(1, 1.0))  # planted: loss
    torch.cuda.synchronize()
    finish(rank)


train()
