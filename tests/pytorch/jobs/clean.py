"""A clean job: all-reduce, broadcast, all-gather, reduce-scatter, a
sub-group: no finding (with PG_TIMEOUT, every group has that
timeout: PyTorch's watchdog must not fire)."""
import torch
import torch.distributed as dist

from common import finish, full, new_group, setup


def train():
    rank, world = setup()
    pair = [new_group([0, 1]), new_group([2, 3])][rank // 2]
    for step in range(6):
        dist.all_reduce(full(4096, float(rank)))
        dist.broadcast(full(256, float(step)), src=0)
        out = torch.empty(world * 128).cuda()
        dist.all_gather_into_tensor(out, full(128, float(rank)))
        red = torch.empty(128).cuda()
        dist.reduce_scatter_tensor(red, full(world * 128, 1.0))
        dist.all_reduce(full(512, 1.0), group=pair)
    finish(rank)


train()
