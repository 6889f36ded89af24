"""Issue 30, Megatron-core DDP's shape by hand: data parallel over 4 ranks,
every gradient all-reduce from the same line and of the same size (two
buckets a step); rank 2 skips one bucket's all-reduce in step 3. Its later
all-reduces pair silently with its peers' earlier ones (same arguments),
and the job hangs only at the loss all-reduce after the loop, where rank
2's call (another line, another size) meets its peers' last gradients."""
import torch
import torch.distributed as dist

from common import finish, full, setup


def reduce_bucket():
    dist.all_reduce(full(4096, 1.0))  # planted: grads


def train():
    rank, world = setup()
    for step in range(6):
        for bucket in range(2):
            if not (rank == 2 and step == 3 and bucket == 1):
                reduce_bucket()
    torch.cuda.synchronize()
    dist.all_reduce(full(1, 1.0))  # planted: loss
    finish(rank)


train()
