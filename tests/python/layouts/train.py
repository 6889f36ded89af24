"""The job of run_layouts.py (issue 18), copied into each layout of a
user's code (a folder named torch/, a Megatron-LM or nanotron checkout, a
package installed into a virtual environment, an editable install): the
planted hang of py_extra.py. At step 3 rank 0 all-reduces its loss in
log_metrics() where the other ranks all-reduce their gradients in
train_step(): collective #4 diverges, rank 0 is the culprit, and tranalyze
must name the marked lines of this file whatever the folders around it are
called and however it was installed.
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
