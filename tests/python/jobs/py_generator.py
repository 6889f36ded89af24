"""Collectives issued inside a generator and a nested function. Gradients
are reduced bucket by bucket by a generator (reduce_buckets), the loss by a
closure made by make_hook(). At step 2, rank 1 stops consuming the buckets
one early (a zip() with a shorter list): its collective #11 is the hook's
loss all-reduce where the others reduce their 3rd bucket.
# EXPECT: seq=11 ranks=1 call=nested others=gen
"""
import simnccl as dist

BUCKETS = 3


def reduce_buckets(buckets):
    for b in buckets:
        dist.all_reduce(b)  # CALL:gen
        yield b


def make_hook():
    def hook(t):
        dist.all_reduce(t)  # CALL:nested
    return hook


def main():
    dist.init_process_group()
    buckets = [dist.zeros(1024) for _ in range(BUCKETS)]
    loss = dist.tensor([2.0])
    hook = make_hook()
    for step in range(5):
        names = ["b%d" % i for i in range(BUCKETS)]
        if dist.get_rank() == 1 and step == 2:
            names = names[:-1]
        for _name, _b in zip(names, reduce_buckets(buckets)):  # CALL:consume
            pass
        hook(loss)  # CALL:hookcall
        dist.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
