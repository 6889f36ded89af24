"""Catalog: a checkpoint broadcast that only rank 0 runs, started by the
DeepSpeed launcher (deepspeed --num_gpus 2 checkpoint.py)."""
import os

import deepspeed
import torch
import torch.distributed as dist


def save_checkpoint(state):
    dist.broadcast(state, src=0)  # planted: checkpoint


def main():
    deepspeed.init_distributed(dist_backend="nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    grads = torch.ones(4096).cuda()
    for step in range(8):
        dist.all_reduce(grads)  # planted: grads
        if step == 4 and rank == 0:
            save_checkpoint(grads[:16])
    torch.cuda.synchronize()
    print(rank, "done", flush=True)


main()
