"""py_hook.py: run by every rank of py_hook.sh (srun, 4 ranks). After one
backward of a tiny CNN on per-rank data, DDP with each torus hook holds the
gradients DDP's default all-reduce gives:
  torus_allreduce_hook fp32 wire: within 1e-6 relative (|d| <= 1e-6 |g| +
      1e-9);
  fp16 wire (torus2d and hierarchical): within the rounding the fp16
      steps allow: |d| <= (W + 2) 2^-11 S + 2^-24, S the elementwise
      average of the ranks' |gradient| (every partial sum is at most S in
      magnitude; W + 2 bounds the roundings on any path);
  and the fp16 results do differ from the fp32 ones somewhere (the wire
      really is fp16), and every rank's own gradient differs from the
      average (the check can fail).
torus2d runs with the row's steps in shared memory (the default; every
row of the plugin's grid is one node here, and the check fails if the
memory was not used or its /dev/shm file is left, or if a column, whose
ranks are on two nodes, gets shared memory) and sent (shared=False).
Several buckets per step (bucket_cap_mb small). Rank 0 prints the grid.
Exit 1 on any failure, on every rank."""
import copy
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torus.distributed as td

torch.set_num_threads(1)
grid = td.init_from_env(backend="gloo", lanes=2)  # buckets on 2 lanes
W, me = dist.get_world_size(), dist.get_rank()
if me == 0:
    print(f"grid {grid}: rows {grid.rows} cols {grid.cols}", flush=True)


def make():
    torch.manual_seed(1)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3),
        torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))


g = torch.Generator().manual_seed(100 + me)
x = torch.randn(6, 1, 12, 12, generator=g)
y = torch.randint(0, 10, (6,), generator=g)


calls = []
# DDP's first backward takes one bucket unless it searches for unused
# parameters; then the first holds 1 MiB whatever bucket_cap_mb says. A
# small one makes the first (and only) backward use several buckets.
dist._DEFAULT_FIRST_BUCKET_BYTES = 4096


def grads(hook=None, state=None):
    m = DDP(make(), bucket_cap_mb=0.004, find_unused_parameters=True)
    if hook:
        def counted(st, bucket):
            calls.append(bucket.buffer().numel())
            return hook(st, bucket)
        m.register_comm_hook(state, counted)
    torch.nn.functional.cross_entropy(m(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in m.parameters()])


plain = make()
local = torch.cat([p.reshape(-1) for p in torch.autograd.grad(
    torch.nn.functional.cross_entropy(plain(x), y), list(plain.parameters()))])
ref = grads()
S = local.abs()
dist.all_reduce(S)
S /= W
fails = []
runs = {
    "torus2d fp32": grads(td.torus_allreduce_hook, td.TorusHookState(grid, "fp32")),
    "torus2d fp16": grads(td.torus_allreduce_hook, grid),
}
# Every row of this grid is one node: its steps went through
# shared memory (one mapping per lane's row group), and the files are gone.
shared = [row for _, row in td._rows.values()]
if len(shared) != 2 or None in shared:
    fails.append(f"the row steps did not go through shared memory: {shared}")
# A line across the nodes (a column, as if it were a row) gets none,
# although on this one machine its ranks would see one /dev/shm: two
# nodes' ranks do not share memory.
across = copy.copy(grid)
across.row_group, across.row_ranks = grid.col_group, grid.col_ranks
across.cols, across.col = grid.rows, grid.row
if td._row_map(across, 16) is not None:
    fails.append("shared memory across two nodes (a column)")
pids = [None] * W
dist.all_gather_object(pids, str(os.getpid()))
left = [f for f in os.listdir("/dev/shm")
        if f.startswith("torus-hook-") and f.split("-")[2] in pids]
if left:
    fails.append(f"shared memory files left in /dev/shm: {left}")
runs.update({
    "torus2d fp32 sent": grads(td.torus_allreduce_hook,
                               td.TorusHookState(grid, "fp32", shared=False)),
    "torus2d fp16 sent": grads(td.torus_allreduce_hook,
                               td.TorusHookState(grid, "fp16", shared=False)),
    "hierarchical fp32": grads(td.hierarchical_hook, td.TorusHookState(grid, "fp32")),
    "hierarchical fp16": grads(td.hierarchical_hook, td.TorusHookState(grid, "fp16")),
})
for name, got in runs.items():
    d = (got - ref).abs()
    if name.endswith("fp32"):
        bound = 1e-6 * ref.abs() + 1e-9
    else:
        bound = (W + 2) * 2.0 ** -11 * S + 2.0 ** -24
    worst = (d - bound).argmax()
    if (d > bound).any():
        fails.append(f"{name}: element {int(worst)} {got[worst]:.9g} vs "
                     f"DDP {ref[worst]:.9g} (bound {bound[worst]:.3g})")
    elif me == 0:
        print(f"ok: {name}: max |diff| {d.max():.3g} over {d.numel()} values")
if len(calls) < 2 * len(runs):
    fails.append(f"the hooks ran on {len(calls)} buckets in {len(runs)} steps, "
                 "expected several per step")
for path in ("", " sent"):
    if torch.equal(runs[f"torus2d fp16{path}"], runs[f"torus2d fp32{path}"]):
        fails.append(f"torus2d{path}: fp16 wire gave exactly the fp32 wire's sums")
if ((local - ref).abs() <= 1e-3 * ref.abs()).all():
    fails.append("this rank's own gradient already equals the average")
for f in fails:
    print(f"FAIL: rank {me}: {f}", flush=True)
bad = torch.tensor([len(fails)])
dist.all_reduce(bad)
dist.destroy_process_group()
sys.exit(1 if bad.item() else 0)
