#!/usr/bin/env python3
"""A real single-rank PyTorch job with the NCCL backend (tests/gpu/run.sh runs
it under LD_PRELOAD=libtrshim.so) whose collectives come from known lines of
this file: a rank-specific metrics all_reduce (`if rank == 0:`, the planted
call of the failure catalog) and the gradient all_reduce, from a nested
function and from a second thread. Every line that issues a collective is
marked `# SITE name`; check_gpu.py reads the markers and checks that the
trace's Python stack of each call names exactly that line."""
import os
import socket
import threading

import torch
import torch.distributed as dist


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_metrics(rank, loss):
    if rank == 0:
        dist.all_reduce(loss)  # SITE metrics


def train_step(grad):
    def reduce_grads():
        dist.all_reduce(grad)  # SITE grads
    reduce_grads()


def side_thread(t):
    dist.all_reduce(t)  # SITE thread


def main():
    if not torch.cuda.is_available():
        print("torch_sites: no CUDA device visible to PyTorch")
        return 1
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    grad = torch.ones(4096, device="cuda")
    loss = torch.ones(1, device="cuda")
    for _ in range(2):
        train_step(grad)
        log_metrics(0, loss)
    t = threading.Thread(target=side_thread, args=(torch.ones(16, device="cuda"),))
    t.start()
    t.join()
    torch.cuda.synchronize()
    print("torch_sites done torch %s" % torch.__version__)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
