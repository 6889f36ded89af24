"""CUDA graphs: each rank captures one all-reduce into a graph with
torch.cuda.graph and replays it REPLAYS times (the environment; default
200). With GRAPH_FEWER=1 rank 3 replays it once fewer and then stalls on
the host: the others' last replay waits for it on the GPU."""
import os
import time

import torch
import torch.distributed as dist

from common import finish, full, setup


def capture(t):
    # warm-up on a side stream, as PyTorch's documentation asks before a capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # planted: captured
    return g


def train():
    rank, world = setup()
    t = full(1024, float(rank))
    g = capture(t)
    replays = int(os.environ.get("REPLAYS", "200"))
    if os.environ.get("GRAPH_FEWER") == "1" and rank == 3:
        replays -= 1
    for _ in range(replays):
        g.replay()  # planted: replay
    torch.cuda.synchronize()
    if os.environ.get("GRAPH_FEWER") == "1" and rank == 3:
        time.sleep(3600)
    got = t.cpu()
    assert bool((got == float(world - 1)).all()), got[:4]
    # the graph goes before the process group: PyTorch's clean-up of a graph holding a collective
    # (a CUDA user object's destructor, run on the driver's own thread) must not race the exit
    del g
    finish(rank)


train()
