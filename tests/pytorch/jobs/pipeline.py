"""Catalog: a two-stage pipeline (batch_isend_irecv); stage 1 (rank 1)
receives one micro-batch fewer in step 2; rank 0's last send has no
receive, while rank 1 waits in the final all-reduce."""
import torch
import torch.distributed as dist

from common import finish, full, setup


def micro_batches(rank, step):
    return 3 if (rank == 1 and step == 2) else 4


def train():
    rank, world = setup()
    buf = full(8192, 0.0)
    for step in range(4):
        for mb in range(micro_batches(rank, step)):
            if rank == 0:
                op = dist.P2POp(dist.isend, full(8192, float(mb)), 1)  # planted: send
            else:
                op = dist.P2POp(dist.irecv, buf, 0)  # planted: recv
            for req in dist.batch_isend_irecv([op]):  # planted: batch
                req.wait()
    torch.cuda.synchronize()
    dist.all_reduce(full(1, 1.0))  # planted: final
    finish(rank)


train()
