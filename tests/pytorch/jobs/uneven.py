"""Catalog: the data loader gives rank 2 one micro-batch fewer in step 2;
its loss all-reduce meets the others' last gradient all-reduce."""
import torch.distributed as dist

from common import finish, full, setup


def micro_batches(rank, step):
    return 3 if (rank == 2 and step == 2) else 4


def reduce_loss(loss):
    dist.all_reduce(loss)  # planted: loss


def train():
    rank, world = setup()
    for step in range(5):
        for mb in range(micro_batches(rank, step)):
            dist.all_reduce(full(4096, 1.0))  # planted: grads
        reduce_loss(full(1, 0.25))
    finish(rank)


train()
