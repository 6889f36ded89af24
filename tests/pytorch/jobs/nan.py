"""Catalog: a NaN born on one rank: rank 2's gradients hold a NaN at element
77 in step 3; after the all-reduce every rank has it."""
import torch
import torch.distributed as dist

from common import finish, setup


def gradients(rank, step):
    g = torch.full((4096,), 0.5)
    if rank == 2 and step == 3:
        g[77] = float("nan")
    return g.cuda()


def train():
    rank, world = setup()
    for step in range(6):
        dist.all_reduce(gradients(rank, step))  # planted: grads
    finish(rank)


train()
