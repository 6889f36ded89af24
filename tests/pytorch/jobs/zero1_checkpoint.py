"""Issue 30, DeepSpeed ZeRO-1's shape by hand (started by the deepspeed
launcher): rank 0 alone saves a checkpoint between the gradient all-reduce
and the loss all-reduce of step 1. The checkpoint's first barrier (1 float)
pairs silently with rank 1's loss all-reduce (1 float, another line); the
job hangs at the next call (the checkpoint's gather meets rank 1's next
gradients). The buffers live on the device from the start, so both ranks
go on issuing their steps' calls: rank 0's are rank 1's shifted by the two
checkpoint calls. The first divergence is #4, where the lines of the two
1-float all-reduces differ: rank 0 has calls more."""
import torch.distributed as dist

from common import finish, full, setup


def save_checkpoint():
    dist.all_reduce(full(1, 1.0))  # planted: ckpt_barrier
    dist.all_reduce(full(64, 1.0))  # planted: ckpt_gather


def train():
    rank, world = setup()
    grads, loss = full(4096, 1.0), full(1, 0.25)
    for step in range(6):
        dist.all_reduce(grads)  # planted: grads
        if step == 1 and rank == 0:
            save_checkpoint()
        dist.all_reduce(loss)  # planted: loss
    finish(rank)


train()
