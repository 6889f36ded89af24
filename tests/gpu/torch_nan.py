#!/usr/bin/env python3
"""A real single-process PyTorch job with the NCCL backend (tests/gpu/run.sh
runs it under LD_PRELOAD=libtrshim.so): all_reduce of a float32 tensor with
a NaN at 123, of a bfloat16 tensor with a NaN at 7, and (where PyTorch has
the NCCL PreMulSum) of float16 values that overflow when doubled. Prints one
line per fact for check_gpu.py."""
import os
import socket
import sys

import torch
import torch.distributed as dist


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if not torch.cuda.is_available():
        print("torch_nan: no CUDA device visible to PyTorch")
        return 1
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0")
    torch.cuda.set_device(0)
    try:
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    except TypeError:      # PyTorch before device_id
        dist.init_process_group("nccl", rank=0, world_size=1)
    x = torch.ones(1 << 20, device="cuda")
    x[123] = float("nan")
    dist.all_reduce(x)
    b = torch.ones(1000, dtype=torch.bfloat16, device="cuda")
    b[7] = float("nan")
    dist.all_reduce(b)
    h = torch.ones(4096, dtype=torch.float16, device="cuda")
    h[100:110] = 60000.0
    try:
        dist.all_reduce(h, op=dist._make_nccl_premul_sum(2.0))
        print("torch_nan premul yes")
    except Exception as e:       # private API: may be missing
        print("torch_nan premul no (%s)" % type(e).__name__)
    torch.cuda.synchronize()
    print("torch_nan x_nan %s b_nan %s h_inf %d" % (bool(torch.isnan(x[123])), bool(torch.isnan(b[7])),
                                                    int(torch.isinf(h).sum())))
    nccl = torch.cuda.nccl.version() if hasattr(torch.cuda, "nccl") else "?"
    print("torch_nan torch %s cuda %s nccl %s" % (torch.__version__, torch.version.cuda, nccl))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
