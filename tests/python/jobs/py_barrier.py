"""Catalog: only rank 0 takes part in a checkpoint barrier (the checkpoint
is saved on rank 0 only, with a collective inside). After step 2 rank 0
enters dist.barrier() in save_checkpoint(); the others go on to the next
step's gradient all-reduce: collective #4 diverges, rank 0 is the culprit.
# EXPECT: seq=4 ranks=0 call=barrier others=grad
"""
import simnccl as dist


def save_checkpoint(step):
    dist.barrier()  # CALL:barrier


def train_step(grads):
    dist.all_reduce(grads)  # CALL:grad


def main():
    dist.init_process_group()
    grads = dist.zeros(4096)
    for step in range(6):
        train_step(grads)
        if step == 2 and dist.get_rank() == 0:
            save_checkpoint(step)
        dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
