"""A data-parallel PyTorch training job, as trshim's examples run it on the
simulated GPUs: a linear model fitted by gradient descent; each rank
computes its gradient on its shard of the data (on the CPU: the simulated
runtime runs no kernels), moves it to its GPU with .cuda(), all-reduces it
with NCCL and applies the average. Started by torchrun or by the DeepSpeed
launcher (both set RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

TRAIN_PLANT=log_metrics: rank 0 alone all-reduces its loss for logging at
step 10 (the catalog's most common hang). TRAIN_PLANT=save_checkpoint:
rank 0 alone broadcasts the weights when it saves a checkpoint at step 10.
"""
import os

import torch
import torch.distributed as dist

STEPS = 30


def log_metrics(loss):
    metric = torch.tensor([loss]).cuda()
    dist.all_reduce(metric)                  # every rank must call this, not only rank 0
    return float(metric.cpu()) / dist.get_world_size()


def save_checkpoint(weights):
    w = weights.cuda()
    dist.broadcast(w, src=0)                 # a collective inside `if rank == 0:`
    torch.save(w.cpu(), os.devnull)


def main():
    plant = os.environ.get("TRAIN_PLANT", "")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(1234)
    true_w = torch.randn(256, generator=gen)
    x = torch.randn(world * 512, 256, generator=gen)[rank::world]
    y = x @ true_w
    w = torch.zeros(256)
    for step in range(STEPS):
        err = x @ w - y
        loss = float((err * err).mean())
        grad = (2.0 / len(x)) * (x.t() @ err)
        g = grad.cuda()
        dist.all_reduce(g)
        w -= 0.1 * g.cpu() / world
        if rank == 0 and step == 10 and plant == "log_metrics":
            log_metrics(loss)
        if rank == 0 and step == 10 and plant == "save_checkpoint":
            save_checkpoint(w)
        if rank == 0 and step % 10 == 0:
            print("step %2d loss %.4f" % (step, loss), flush=True)
    # the ranks' weights must be identical: rank 0's, broadcast, compared everywhere
    w0 = w.cuda()
    dist.broadcast(w0, src=0)
    differ = torch.tensor([0.0 if torch.equal(w0.cpu(), w) else 1.0]).cuda()
    dist.all_reduce(differ)
    if rank == 0:
        print("done: loss %.6f, weights %s on %d ranks" % (
            loss, "identical" if float(differ.cpu()) == 0 else "DIFFERENT", world), flush=True)
    dist.destroy_process_group()


main()
