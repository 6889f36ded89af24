"""Catalog: a rank-specific branch (`if rank == 0: log metrics`) adds a
collective on rank 0. At step 3 rank 0 all-reduces its loss in log_metrics()
where the other ranks all-reduce the gradients in train_step(): collective
#4 of the world communicator diverges, rank 0 is the culprit.
# EXPECT: seq=4 ranks=0 call=extra others=grad
"""
import simnccl as dist


def log_metrics(step, loss):
    if dist.get_rank() == 0 and step == 3:
        dist.all_reduce(loss)  # CALL:extra


def train_step(grads):
    dist.all_reduce(grads)  # CALL:grad


def main():
    dist.init_process_group()
    grads, loss = dist.zeros(4096), dist.tensor([0.5])
    for step in range(6):
        log_metrics(step, loss)
        train_step(grads)
        dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
