"""Catalog: fp16 gradients overflow in the all-reduce: every rank's input
is finite (60000, fp16's largest is 65504), their sum is not."""
import torch
import torch.distributed as dist

from common import finish, full, setup


def train():
    rank, world = setup()
    for step in range(4):
        grads = full(2048, 60000.0 if step == 2 else 1.0, dtype=torch.float16)
        dist.all_reduce(grads)  # planted: grads
    finish(rank)


train()
