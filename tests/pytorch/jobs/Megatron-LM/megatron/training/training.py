"""Catalog, in a Megatron-like tree (issue 18): rank 0 alone broadcasts a
metric for logging at step 5; the other ranks' next gradient all-reduce
meets it and every rank hangs."""
import torch.distributed as dist

from common import finish, full, setup


def log_metrics(loss):
    dist.broadcast(loss, src=0)  # planted: extra
    return loss


def pretrain():
    rank, world = setup()
    for step in range(10):
        grads = full(1024, float(rank + step))
        dist.all_reduce(grads)  # planted: grads
        if rank == 0 and step == 5:
            log_metrics(full(1, 0.5))
    finish(rank)
