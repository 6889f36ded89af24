"""Catalog, from a folder named torch/ (issue 18: its lines were folded as
PyTorch's own, the call site was distributed_c10d.py's broadcast): rank 0
alone broadcasts a metric at step 5; the others' next gradient all-reduce
meets it and every rank hangs."""
import torch.distributed as dist

from common import finish, full, setup


def log_metrics(loss):
    dist.broadcast(loss, src=0)  # planted: extra
    return loss


def train():
    rank, world = setup()
    for step in range(10):
        grads = full(1024, float(rank + step))
        dist.all_reduce(grads)  # planted: grads
        if rank == 0 and step == 5:
            log_metrics(full(1, 0.5))
    finish(rank)


train()
