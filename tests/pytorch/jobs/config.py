"""Issue 13: a collective through NCCL 2.31's ncclAllReduceConfig, called
with ctypes on rank 1 only (a logging path that picked the new entry
point), on a communicator the job made itself with ctypes, as libraries
built on raw NCCL do: every other rank's next all-reduce meets it and the
job hangs. trshim must diagnose it exactly like a plain extra all-reduce."""
import ctypes

import torch
import torch.distributed as dist

from common import full, setup

NCCL_FLOAT32, NCCL_SUM, UNDEF = 7, 0, -2 ** 31
nccl = ctypes.CDLL(None)      # the process's NCCL, as loaded (and as the shim wraps it)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class CollConfig(ctypes.Structure):
    """ncclCollConfig_t of NCCL 2.32"""
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("ext", ctypes.c_void_p), ("minCTAs", ctypes.c_int), ("maxCTAs", ctypes.c_int),
                ("nvlsCTAs", ctypes.c_int), ("cgaClusterSize", ctypes.c_int), ("algSelection", ctypes.c_char_p),
                ("forceAlgSelection", ctypes.c_int), ("CTAPolicy", ctypes.c_int),
                ("userProfilerTag", ctypes.c_uint64), ("launchCompletionEvent", ctypes.c_void_p)]


def ok(rc, what):
    if rc != 0:
        raise RuntimeError("%s: NCCL error %d" % (what, rc))


def make_comm(rank, world):
    uid = UniqueId()
    if rank == 0:
        ok(nccl.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    t = torch.tensor(list(uid.internal.ljust(128, b"\0")), dtype=torch.uint8).cuda()
    dist.broadcast(t, src=0)
    uid = UniqueId(bytes(t.cpu().tolist()))
    comm = ctypes.c_void_p()
    ok(nccl.ncclCommInitRank(ctypes.byref(comm), world, uid, rank), "ncclCommInitRank")
    return comm


def stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def all_reduce(comm, t):
    p, n = ctypes.c_void_p(t.data_ptr()), ctypes.c_size_t(t.numel())
    ok(nccl.ncclAllReduce(p, p, n, NCCL_FLOAT32, NCCL_SUM, comm, stream()), "ncclAllReduce")  # planted: grads


def log_metrics(comm, loss):
    cfg = CollConfig(ctypes.sizeof(CollConfig), 0xcafebeef, 23203, None, UNDEF, 2, UNDEF, UNDEF, None, 1, UNDEF,
                     0, None)
    p, c = ctypes.c_void_p(loss.data_ptr()), ctypes.byref(cfg)
    ok(nccl.ncclAllReduceConfig(p, p, ctypes.c_size_t(1), NCCL_FLOAT32, NCCL_SUM, comm, stream(), c), "AllReduceConfig")  # planted: config


def train():
    rank, world = setup()
    comm = make_comm(rank, world)
    for step in range(10):
        grads = full(1024, float(rank + step))
        all_reduce(comm, grads)
        if rank == 1 and step == 5:
            log_metrics(comm, full(1, 0.5))
    torch.cuda.synchronize()
    print("rank %d done" % rank, flush=True)


train()
