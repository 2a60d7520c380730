#!/usr/bin/python3
"""ddp_gloo_resnet50.py: the PyTorch peer for torus-bench --resnet50.

Measures PyTorch DDP's gradient synchronisation of ResNet-50 (torchvision,
161 parameter tensors) with the gloo backend and 25 MB buckets, on N CPU
processes of this machine. Each step is a forward and backward of a tiny
batch (2 x 3 x 32 x 32) through the DDP model, so DDP's bucketed
all-reduces run as in training; the same step under no_sync() (the same
compute, no communication) is subtracted.

Usage: ddp_gloo_resnet50.py [--ranks 4] [--steps 5] [--bucket-mb 25]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torchvision


def _step(model, params, x, sync):
    for p in params:
        p.grad = None
    t0 = time.perf_counter()
    if sync:
        model(x).sum().backward()
    else:
        with model.no_sync():
            model(x).sum().backward()
    return time.perf_counter() - t0


def _worker(rank, n, init, steps, bucket_mb, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    net = torchvision.models.resnet50()
    params = list(net.parameters())
    model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=bucket_mb)
    x = torch.zeros(2, 3, 32, 32)
    with_sync, without = [], []
    for i in range(steps + 1):  # the first step warms up
        dist.barrier()
        t = _step(model, params, x, True)
        t_max = torch.tensor([t])
        dist.all_reduce(t_max, op=dist.ReduceOp.MAX)
        dist.barrier()
        u = torch.tensor([_step(model, params, x, False)])
        dist.all_reduce(u, op=dist.ReduceOp.MAX)
        if i:
            with_sync.append(t_max.item())
            without.append(u.item())
    if rank == 0:
        s, b = statistics.median(with_sync), statistics.median(without)
        with open(out, "w") as f:
            f.write(f"{len(params)} {sum(p.numel() for p in params)} {s} {b}\n")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--bucket-mb", type=float, default=25)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result")
        init = "file://" + os.path.join(d, "rendezvous")
        mp.spawn(_worker, args=(a.ranks, init, a.steps, a.bucket_mb, out), nprocs=a.ranks)
        tensors, params, s, b = open(out).read().split()
    sync_ms = (float(s) - float(b)) * 1e3
    print(f"# PyTorch {torch.__version__} DDP gloo, {a.ranks} ranks, {a.bucket_mb:g} MB buckets, "
          f"ResNet-50 {tensors} tensors / {params} params")
    print(f"ddp-gloo    bucketed fp32 {a.bucket_mb:g}M  time(ms) {sync_ms:.2f}  "
          f"(backward with sync {float(s) * 1e3:.2f} - without {float(b) * 1e3:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
