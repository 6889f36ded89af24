"""Issue 20 on PyTorch: tensor-parallel pairs {0,1} {2,3} and data-parallel
pairs {0,2} {1,3} from new_group; rank 3 skips its data-parallel gradient
all-reduce in step 3 (same size every step: its next ones pair with its
peer's previous ones), and the job hangs only at the end, in a wait cycle:
rank 1 in its last data-parallel all-reduce, rank 3 in the world one."""
import torch.distributed as dist

from common import finish, full, new_group, setup


def has_batch(rank, step):
    return not (rank == 3 and step == 3)


def train():
    rank, world = setup()
    tp = [new_group([0, 1]), new_group([2, 3])][rank // 2]
    dp = [new_group([0, 2]), new_group([1, 3])][rank % 2]
    for step in range(8):
        dist.all_reduce(full(2048, 1.0), group=tp)  # planted: tp_forward
        dist.all_reduce(full(2048, 1.0), group=tp)  # planted: tp_backward
        if has_batch(rank, step):
            dist.all_reduce(full(8192, 1.0), group=dp)  # planted: dp_grads
    dist.all_reduce(full(1, 1.0))  # planted: final
    finish(rank)


train()
