"""Set-up shared by the torch suite's jobs: the process group on the
simulated GPUs (data moves with .cuda(): the simulator runs no kernels)."""
import datetime
import os

import torch
import torch.distributed as dist


def pg_timeout():
    """the process groups' timeout: PG_TIMEOUT seconds (a short one makes
    PyTorch's watchdog end a hung job: it aborts the communicators, then the
    process), else PyTorch's default"""
    s = os.environ.get("PG_TIMEOUT")
    return {"timeout": datetime.timedelta(seconds=float(s))} if s else {}


def setup():
    """(rank, world size) after init_process_group("nccl") on this rank's device"""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local), **pg_timeout())
    return dist.get_rank(), dist.get_world_size()


def new_group(ranks):
    """dist.new_group with the job's timeout (PyTorch's watchdog of that group)"""
    return dist.new_group(ranks, **pg_timeout())


def finish(rank):
    """the end of a job: one last all-reduce (dist.barrier would fill a
    tensor on the device, a kernel), then the group is destroyed"""
    torch.cuda.synchronize()
    dist.all_reduce(torch.ones(1).cuda())
    torch.cuda.synchronize()
    print("rank %d done" % rank, flush=True)
    dist.destroy_process_group()


def full(n, value, dtype=torch.float32):
    """a tensor of n values on this rank's device, built on the CPU"""
    return torch.full((n,), value, dtype=dtype).cuda()
