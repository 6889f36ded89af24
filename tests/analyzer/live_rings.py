"""Synthetic rings of a live job (gen_ring.py's), and a process that plays
the ranks' shims: it advances every ring's heartbeat and poller pass twice a
second, as libtrshim.so's poller does, and stores the live header fields a
test sets (a stall, pending operations). For the watcher's benchmark
(bench/watch_bench.py) and tests (tests/live/test_live.py, case multinode)."""
import mmap
import os
import struct
import threading
import time

import gen_ring as gr
import gen_traces as g

OFFS = gr.STRUCTS["header"][0]


def job(name, nranks, steps, extra=True):
    """nranks ranks of the world communicator; rank 0 one extra all-reduce at step 11 (extra)"""
    ranks, wid = g.world_job(name, nranks)
    for step in range(steps):
        for r in ranks:
            if extra and step == 11 and r.rank == 0:
                r.coll(0, count=1, site="log_metrics", caller="train_step")
            r.coll(0, count=1 << 20, site="train_step", caller="train_step")
    return ranks


def write_rings(out, ranks, done_below=None):
    os.makedirs(out, exist_ok=True)
    gpu = gr.gpu_upto(done_below) if done_below else None
    paths = []
    for r in ranks:
        p = os.path.join(out, gr.ring_name(r))
        gr.rank_ring(r, gpu=gpu).write(p)
        paths.append(p)
    return paths


class Beater:
    """the ranks' heartbeats: every ring's heartbeat_ns and pass_ns advanced by this process's clock"""

    def __init__(self, paths):
        self.maps = []
        for p in paths:
            with open(p, "r+b") as f:
                self.maps.append(mmap.mmap(f.fileno(), gr.HEADER_BYTES))
        self.base = [struct.unpack_from("<Q", m, OFFS["heartbeat_ns"])[0] for m in self.maps]
        self.t0 = time.monotonic()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def now(self, i):
        return self.base[i] + int((time.monotonic() - self.t0) * 1e9)

    def run(self):
        while not self.stop:
            for i, m in enumerate(self.maps):
                t = self.now(i)
                struct.pack_into("<Q", m, OFFS["heartbeat_ns"], t)
                struct.pack_into("<Q", m, OFFS["pass_ns"], t)
            time.sleep(0.5)

    def set(self, i, field, code, value):
        struct.pack_into("<" + code, self.maps[i], OFFS[field], value)

    def close(self):
        self.stop = True
        self.thread.join()
        for m in self.maps:
            m.close()
