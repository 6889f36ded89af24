"""A healthy job: every rank issues the same collectives (gradients, a
broadcast of the learning rate, a barrier); no finding.
# EXPECT: clean
"""
import simnccl as dist


def train_step(grads):
    dist.all_reduce(grads)  # CALL:grad


def sync_lr(lr):
    dist.broadcast(lr, src=0)  # CALL:bcast


def main():
    dist.init_process_group()
    grads, lr = dist.zeros(4096), dist.tensor([0.1])
    for step in range(5):
        train_step(grads)
        if step % 2 == 0:
            sync_lr(lr)
        dist.synchronize()
    dist.barrier()  # CALL:barrier
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
