"""Catalog: one rank runs out of device memory (its activations for a long
sample do not fit) and dies; the others wait in the next collective. The
failed allocation's Python stack names the line of alloc_activations, and
the device's peak (the weights and their staging copy, in load_model) names
where it was reached.
# EXPECT: oom rank=1 call=oom peak=peak
"""
import simnccl as dist


def alloc_activations(step):
    big = 512 << 20 if dist.get_rank() == 1 and step == 2 else 1 << 20
    return dist.zeros(big // 4)  # CALL:oom


def load_model():
    weights = dist.zeros((64 << 20) // 4)
    staging = dist.zeros((64 << 20) // 4)  # CALL:peak
    staging.free()
    return weights


def train_step(grads):
    dist.all_reduce(grads)  # CALL:grad


def main():
    dist.init_process_group()
    weights = load_model()
    grads = dist.zeros(4096)
    for step in range(5):
        act = alloc_activations(step)
        train_step(grads)
        dist.synchronize()
        act.free()
    weights.free()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
