"""Issue 30, Megatron-core DDP's shape by hand: data parallel over 4 ranks,
every gradient all-reduce from the same line and of the same size (two
buckets a step, their buffers allocated once, as DDP's grad buffers are);
rank 2 skips one bucket's all-reduce in step 3. Its later all-reduces pair
silently with its peers' earlier ones (same arguments); after the loop the
loss (1 float, another line) and the logging metrics (3 floats) are
all-reduced: rank 2's loss meets its peers' last gradient bucket (#12) and
the job hangs there. Every rank's calls after the gap are in step with its
peers' shifted by one: rank 2 skipped a call."""
import torch.distributed as dist

from common import finish, full, setup


def reduce_bucket(bucket):
    dist.all_reduce(bucket)  # planted: grads


def train():
    rank, world = setup()
    buckets = [full(4096, 1.0), full(4096, 1.0)]
    loss, metrics = full(1, 0.25), full(3, 0.0)
    for step in range(6):
        for b in range(2):
            if not (rank == 2 and step == 3 and b == 1):
                reduce_bucket(buckets[b])
    dist.all_reduce(loss)  # planted: loss
    dist.all_reduce(metrics)  # planted: metrics
    finish(rank)


train()
