"""Issue 30: a plain two-stage pipeline on dist.send/dist.recv, the
backward direction: stage 1 (rank 1) sends each micro-batch's gradient to
stage 0 (rank 0), which posts one receive fewer in step 1 (it drops that
micro-batch). Every send has the same line and size, so rank 0's later
receives pair silently with rank 1's earlier sends; rank 1's last send has
no receive, while rank 0 waits in the final all-reduce."""
import torch
import torch.distributed as dist

from common import finish, full, setup


def micro_batches(rank, step):
    return 3 if (rank == 0 and step == 1) else 4


def train():
    rank, world = setup()
    grad = full(8192, 0.0)
    for step in range(4):
        for mb in range(micro_batches(rank, step)):
            if rank == 1:
                dist.send(full(8192, float(mb)), 0)  # planted: send
            else:
                dist.recv(grad, 1)  # planted: recv
    torch.cuda.synchronize()
    dist.all_reduce(full(1, 1.0))  # planted: final
    finish(rank)


train()
