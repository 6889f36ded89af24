"""A collective issued from a Python thread other than the main one: at
step 3, rank 0 reports its metrics from a background thread (an extra
all-reduce in report_metrics, which the main thread waits for) where the
other ranks all-reduce the gradients: collective #4 diverges. The Python
stack of that call is the reporter thread's (threading's frames, then
report_metrics), not the main thread's.
# EXPECT: seq=4 ranks=0 call=thread others=grad thread=1
"""
import threading

import simnccl as dist


def report_metrics(loss):
    dist.all_reduce(loss)  # CALL:thread


def train_step(grads):
    dist.all_reduce(grads)  # CALL:grad


def main():
    dist.init_process_group()
    grads, loss = dist.zeros(4096), dist.tensor([0.25])
    for step in range(6):
        if step == 3 and dist.get_rank() == 0:
            reporter = threading.Thread(target=report_metrics, args=(loss,), name="metrics")
            reporter.start()
            reporter.join()
        train_step(grads)
        dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
