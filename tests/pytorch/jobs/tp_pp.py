"""Issue 30, Megatron's TP=2 x PP=2 by hand (torch.distributed alone):
tensor-parallel pairs {0,1} (stage 0) and {2,3} (stage 1) from new_group,
pipeline pairs {0,2} {1,3}; each micro-batch, stage 0 all-reduces its
activations in its TP group and sends them to its stage-1 peer (isend on
the world group, as Megatron's P2PCommunicator), stage 1 receives and
all-reduces. In step 2 stage 0 runs one micro-batch fewer: its last
tensor-parallel all-reduce and its last send are never issued; stage 1
waits in the receive."""
from common import finish, full, new_group, setup

import torch.distributed as dist


def micro_batches(rank, step):
    return 2 if (rank < 2 and step == 2) else 3


def train():
    rank, world = setup()
    tp = [new_group([0, 1]), new_group([2, 3])][rank // 2]
    act = full(4096, 0.0)
    for step in range(4):
        for mb in range(micro_batches(rank, step)):
            if rank < 2:
                dist.all_reduce(full(4096, 1.0), group=tp)  # planted: tp_forward
                dist.isend(full(4096, float(mb)), rank + 2).wait()  # planted: send_forward
            else:
                dist.irecv(act, rank - 2).wait()  # planted: recv_forward
                dist.all_reduce(act, group=tp)  # planted: tp_stage1
    dist.all_reduce(full(1, 1.0))  # planted: final
    finish(rank)


train()
