#!/usr/bin/python3
"""hook_bench.py: one run of tests/bench/python/hook_netns.sh, on every rank
(srun --torus=auto). Per step of a torchvision model (ResNet-50 by
default) under DDP, the gradient synchronisation time of:
  ddp           DDP's default all-reduce (gloo, fp32, asynchronous)
  fp16          DDP with torch's fp16_compress_hook (default_hooks)
  torus2d       torus_allreduce_hook, fp16 wire (one lane, the default;
                each row's steps in shared memory where the row is one node)
  torus2d-sent  the same with the row's steps sent too (shared=False)
  torus2d2      torus2d on 2 lanes (two buckets in flight)
  hierarchical  hierarchical_hook, fp16 wire

How the sync time is measured: each step runs forward + backward twice on
the same batch, once under DDP's no_sync() (no communication at all) and
once synchronised; each from a barrier to the slowest rank's end of
backward() (DDP's backward returns once every bucket's future is done and
the averaged gradients are written). sync = synchronised - no_sync: the
communication time the step does not hide behind its backward pass
(all four overlap it: the torus hooks hand their buckets to a
communication thread). The input is small (--batch, --image-size): the gradients are the
model's full size whatever the input, and the compute, which the host's
cores share among all ranks, stays as small as the model allows. For the torus hooks the span from the step's first hook call to its last
bucket's end is also given (column hook): the communication thread's part
of the step.

The CPU the synchronisation costs is given too (column cpu): the
processes' CPU time (every thread, user and system) of the synchronised
step minus the no_sync one, summed over all ranks; on a host whose cores
the ranks share, that is the time the communication takes from compute.

Rank 0 prints "row VARIANT STEP sync_ms synced_ms nosync_ms hook_ms cpu_ms"
for every timed step, after --warmup untimed ones.
"""
import argparse
import copy
import sys
import time

import torch
import torch.distributed as dist
import torchvision
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import torus.distributed as td

VARIANTS = ("ddp", "fp16", "torus2d", "hierarchical", "torus2d2", "torus2d-sent")
DEFAULT = "ddp,fp16,torus2d,hierarchical"


def slowest(t0):
    t = torch.tensor([time.perf_counter() - t0])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item() * 1e3


def make(a, grid, variant, hook_ms):
    torch.manual_seed(1)
    m = DDP(torchvision.models.__dict__[a.model](), bucket_cap_mb=a.bucket_mb)
    if variant == "fp16":
        m.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif variant != "ddp":
        algo = td.hierarchical_hook if variant == "hierarchical" else td.torus_allreduce_hook
        if variant != "torus2d2":  # init_from_env's default: one lane
            grid = copy.copy(grid)
            grid.lanes = grid.lanes[:1]

        # hook_ms holds this step's first hook call and the last bucket's
        # end: the span of the communication thread's work.
        def timed(state, bucket):
            if not hook_ms:
                hook_ms.append(time.perf_counter())

            def done(f):
                hook_ms[1:] = [time.perf_counter()]
                return f.value()
            return algo(state, bucket).then(done)
        state = td.TorusHookState(grid, "fp16", shared=variant != "torus2d-sent")
        m.register_comm_hook(state, timed)
    return m


def cpu_sum(c0):
    """The CPU time (ms) all ranks' processes used since their C0, every
    thread counted, summed over the ranks."""
    t = torch.tensor([time.process_time() - c0], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item() * 1e3


def step(m, x, y, sync):
    dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    if sync:
        torch.nn.functional.cross_entropy(m(x), y).backward()
    else:
        with m.no_sync():
            torch.nn.functional.cross_entropy(m(x), y).backward()
    ms = slowest(t0)
    cpu = cpu_sum(c0)
    m.zero_grad(set_to_none=True)
    return ms, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=2, help="per rank")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=25)
    ap.add_argument("--variants", default=DEFAULT,
                    help=f"of {','.join(VARIANTS)}")
    ap.add_argument("--first", type=int, default=0,
                    help="rotate the variants' order by this many")
    a = ap.parse_args()
    variants = a.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            sys.exit(f"--variants: unknown '{v}' (of {','.join(VARIANTS)})")
    variants = variants[a.first % len(variants):] + variants[:a.first % len(variants)]
    torch.set_num_threads(1)
    grid = td.init_from_env(backend="gloo", lanes=2)
    me = dist.get_rank()
    g = torch.Generator().manual_seed(100 + me)
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=g)
    y = torch.randint(0, 1000, (a.batch,), generator=g)
    if me == 0:
        n = sum(p.numel() for p in torchvision.models.__dict__[a.model]().parameters())
        print(f"# {dist.get_world_size()} ranks, grid {grid}, {a.model} {n} parameters "
              f"({n * 4 / 2**20:.1f} MiB fp32), DDP buckets {a.bucket_mb:g} MB, "
              f"input {a.batch}x3x{a.image_size}x{a.image_size} per rank", flush=True)
    for v in variants:
        hook_ms = []
        m = make(a, grid, v, hook_ms)
        for s in range(a.warmup + a.steps):
            nosync, nosync_cpu = step(m, x, y, False)
            del hook_ms[:]
            synced, synced_cpu = step(m, x, y, True)
            inside = f"{(hook_ms[1] - hook_ms[0]) * 1e3:.1f}" if len(hook_ms) == 2 else "-"
            if me == 0 and s >= a.warmup:
                print(f"row {v} {s - a.warmup} {synced - nosync:.1f} {synced:.1f} "
                      f"{nosync:.1f} {inside} {synced_cpu - nosync_cpu:.1f}", flush=True)
        del m
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
