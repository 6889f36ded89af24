"""Catalog: the data loader gives one rank fewer micro-batches (its own
shuffling, no DistributedSampler). Each micro-batch all-reduces the
gradients, then the step all-reduces the loss. At step 2 rank 2 gets 3
micro-batches instead of 4: its collective #14 is the loss all-reduce where
the others issue their 4th gradient all-reduce.
# EXPECT: seq=14 ranks=2 call=loss others=grad
"""
import simnccl as dist

MICRO_BATCHES = 4


def data_loader(step):
    n = MICRO_BATCHES - 1 if dist.get_rank() == 2 and step == 2 else MICRO_BATCHES
    for i in range(n):
        yield i


def backward_microbatch(grads):
    dist.all_reduce(grads)  # CALL:grad


def reduce_loss(loss):
    dist.all_reduce(loss)  # CALL:loss


def main():
    dist.init_process_group()
    grads, loss = dist.zeros(2048), dist.tensor([1.0])
    for step in range(4):
        for _ in data_loader(step):
            backward_microbatch(grads)
        reduce_loss(loss)
        dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
