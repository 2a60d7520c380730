#!/usr/bin/python3
"""ddp_gloo_resnet50.py: the PyTorch peer for torus-bench --resnet50.

Measures the pure gradient synchronisation of PyTorch DDP for ResNet-50
(torchvision, 161 parameter tensors) with the gloo backend, on N CPU
processes of this machine, one thread each, like torus-bench's ranks.

It builds the buckets DDP itself would build (the same torch helper DDP
calls, with DDP's small first bucket and --bucket-mb after it), flattens
each bucket's fp32 gradients into one tensor as DDP's reducer does, and
times, from a barrier to the slowest rank, dividing by the world size and
all-reducing every bucket asynchronously in DDP's order, then waiting for
all of them. No forward or backward runs inside the timed part, so the time
is synchronisation only, as in torus-bench's rows.

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


def _buckets(params, bucket_mb):
    """DDP's bucket assignment: lists of parameter indices, in the order
    DDP's reducer launches them (the last layers' gradients first)."""
    limits = [dist._DEFAULT_FIRST_BUCKET_BYTES, int(bucket_mb * 1024 * 1024)]
    got = dist._compute_bucket_assignment_by_size(params, limits, [False] * len(params))
    indices = got[0] if isinstance(got, tuple) else got
    return list(reversed(indices))


def _worker(rank, n, init, steps, bucket_mb, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    params = list(torchvision.models.resnet50().parameters())
    groups = _buckets(params, bucket_mb)
    flat = [torch.randn(sum(params[i].numel() for i in g)) for g in groups]
    times = []
    for step in range(steps + 1):  # the first step warms up
        dist.barrier()
        t0 = time.perf_counter()
        for f in flat:
            f.div_(n)
        works = [dist.all_reduce(f, async_op=True) for f in flat]
        for w in works:
            w.wait()
        t = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if step:
            times.append(t.item())
    if rank == 0:
        with open(out, "w") as f:
            f.write(f"{len(params)} {sum(p.numel() for p in params)} {len(groups)} "
                    f"{statistics.median(times)}\n")
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
        tensors, params, nb, t = open(out).read().split()
    print(f"# PyTorch {torch.__version__} DDP gloo, {a.ranks} ranks x 1 thread, "
          f"ResNet-50 {tensors} tensors / {params} params in DDP's {nb} buckets "
          f"({a.bucket_mb:g} MB cap), median of {a.steps} steps, slowest rank")
    print(f"ddp-gloo    bucketed fp32 {a.bucket_mb:g}M  time(ms) {float(t) * 1e3:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
