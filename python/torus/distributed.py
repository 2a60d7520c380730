"""torus.distributed: the torus plugin's 2D grid for torch.distributed.

    import torus.distributed as td
    grid = td.init_from_env()                # process group + row/col groups
    model = DDP(model)
    model.register_comm_hook(grid, td.torus_allreduce_hook)   # fp16 wire
    # or td.TorusHookState(grid, wire="fp32"), td.hierarchical_hook

init_from_env() starts the default process group from the environment
(rank and world size as torus.env reads them; MASTER_ADDR and MASTER_PORT,
as torch's env:// rendezvous wants them) unless one is running, and builds
one group per row and one per column of the plugin's grid (TORUS_DIMS,
TORUS_COORD). Without the plugin's variables the grid is one row per node
(ranks grouped by host name).

torus_allreduce_hook averages each DDP bucket over the 2D torus:
reduce-scatter in the row (a ring of C-1 steps), all-reduce of this rank's
slice in its column, all-gather in the row. With wire="fp16" (the default)
the bucket is divided by the world size first and sent as fp16, as
torus-train does; received slices are added in fp32. wire="fp32" sends
fp32. hierarchical_hook reduces each row to its column-0 rank, all-reduces
among those over column 0, and broadcasts back along the row.
Both run over gloo (CPU tensors) and NCCL (CUDA tensors). A hook call
hands its bucket to one communication thread per process and returns a
future at once, so a bucket's collectives overlap the rest of the backward
pass, as DDP's own all-reduce does; the thread runs the buckets in the
order DDP hands them over, which is the same on every rank.
"""

import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

from . import env

__all__ = ["TorusGrid", "TorusHookState", "init_from_env",
           "torus_allreduce_hook", "hierarchical_hook", "allreduce_2d"]


class TorusGrid:
    """This rank's place in the grid and the groups of its row and column.
    row_ranks / col_ranks: the global ranks of its row (ordered by column)
    and of its column (ordered by row)."""

    def __init__(self, rows, cols, row, col, row_ranks, col_ranks, row_group,
                 col_group, source):
        self.rows, self.cols, self.row, self.col = rows, cols, row, col
        self.row_ranks, self.col_ranks = row_ranks, col_ranks
        self.row_group, self.col_group = row_group, col_group
        self.source = source  # "TORUS_*" or "hosts"
        self.world_size = rows * cols

    def __repr__(self):
        return (f"TorusGrid({self.rows}x{self.cols}, row {self.row}, "
                f"col {self.col}, from {self.source})")


def _places(world):
    """(row, col) of every rank: the plugin's, else one row per host."""
    grid = env.grid(world)
    mine = (grid.rows, grid.cols, grid.row, grid.col) if grid else None
    allp = [None] * world
    dist.all_gather_object(allp, (mine, socket.gethostname()))
    if all(p[0] for p in allp):
        dims = {p[0][:2] for p in allp}
        if len(dims) != 1:
            raise RuntimeError(f"ranks disagree on TORUS_DIMS: {sorted(dims)}")
        coords = [p[0][2:] for p in allp]
        if len(set(coords)) != world:
            raise RuntimeError("two ranks share a TORUS_COORD")
        return dims.pop(), coords, "TORUS_*"
    if any(p[0] for p in allp):
        raise RuntimeError("TORUS_* is set on some ranks only (ranks "
                           f"{[r for r, p in enumerate(allp) if not p[0]]} lack it)")
    hosts = sorted({p[1] for p in allp}, key=[p[1] for p in allp].index)
    per = [sum(p[1] == h for p in allp) for h in hosts]
    if len(set(per)) != 1:
        raise RuntimeError(f"uneven ranks per host {per}: no grid without "
                           "the torus plugin")
    seen = {h: 0 for h in hosts}
    coords = []
    for p in allp:
        coords.append((hosts.index(p[1]), seen[p[1]]))
        seen[p[1]] += 1
    return (len(hosts), per[0]), coords, "hosts"


def _lines(world, me, coords, count, axis):
    """The groups of the grid's rows (axis 0) or columns (axis 1), COUNT of
    them, each's ranks ordered along the line; returns this rank's group
    and its ranks."""
    mine = None
    for i in range(count):
        ranks = sorted((q for q in range(world) if coords[q][axis] == i),
                       key=lambda q: coords[q][1 - axis])
        g = dist.new_group(ranks)
        if i == coords[me][axis]:
            mine = (g, ranks)
    return mine


def init_from_env(backend=None, **kwargs):
    """Start torch.distributed from the environment if it is not running,
    and return the TorusGrid of this rank. backend: "nccl" when CUDA is
    available, else "gloo". kwargs go to init_process_group."""
    if not dist.is_initialized():
        if backend is None:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        for v in ("MASTER_ADDR", "MASTER_PORT"):
            if not os.environ.get(v):
                raise RuntimeError(f"{v} is not set: torch.distributed's "
                                   "env:// rendezvous needs it (the job "
                                   "script sets it, see docs/pytorch.md)")
        dist.init_process_group(backend, init_method="env://",
                                rank=env.rank(), world_size=env.world_size(),
                                **kwargs)
    world, me = dist.get_world_size(), dist.get_rank()
    (rows, cols), coords, source = _places(world)
    # Every rank creates every group, rows then columns, in the same order
    # (new_group's rule).
    row_group, row_ranks = _lines(world, me, coords, rows, 0)
    col_group, col_ranks = _lines(world, me, coords, cols, 1)
    return TorusGrid(rows, cols, coords[me][0], coords[me][1], row_ranks,
                     col_ranks, row_group, col_group, source)


class TorusHookState:
    """The state to register a hook with: the grid and the wire type."""

    def __init__(self, grid, wire="fp16"):
        if wire not in ("fp16", "fp32"):
            raise ValueError(f"wire={wire!r}: 'fp16' or 'fp32'")
        self.grid, self.wire = grid, wire


def _state(state):
    return state if isinstance(state, TorusHookState) else TorusHookState(state)


def _ring_reduce_scatter(chunks, ranks, me, group):
    """Ring reduce-scatter of CHUNKS (one per member, on the wire's dtype)
    over RANKS (ring order); returns the fully summed chunk of member ME,
    in fp32. Adds happen in fp32; each hop sends the partial sum."""
    n = len(ranks)
    nxt, prv = ranks[(me + 1) % n], ranks[(me - 1) % n]
    acc = [c.float() for c in chunks]
    buf = torch.empty_like(chunks[0])
    for s in range(n - 1):
        send = (me - s - 1) % n
        recv = (me - s - 2) % n
        out = acc[send].to(chunks[0].dtype)
        reqs = [dist.isend(out, nxt, group=group),
                dist.irecv(buf, prv, group=group)]
        for q in reqs:
            q.wait()
        acc[recv] += buf.float()
    return acc[me]


def allreduce_2d(flat, grid, wire="fp16"):
    """The average of FLAT (a 1-D fp32 tensor) over all ranks, by the 2D
    torus; returns a new fp32 tensor."""
    dtype = torch.float16 if wire == "fp16" else torch.float32
    C = grid.cols
    n = flat.numel()
    per = -(-n // C)
    x = torch.zeros(per * C, dtype=dtype, device=flat.device)
    x[:n] = flat / grid.world_size
    chunks = list(x.view(C, per).unbind(0))
    if C > 1:
        mine = _ring_reduce_scatter(chunks, grid.row_ranks, grid.col,
                                    grid.row_group)
    else:
        mine = chunks[0].float()
    wire_mine = mine.to(dtype)
    if grid.rows > 1:
        dist.all_reduce(wire_mine, group=grid.col_group)
    if C > 1:
        parts = [torch.empty_like(wire_mine) for _ in range(C)]
        dist.all_gather(parts, wire_mine, group=grid.row_group)
        out = torch.cat(parts)
    else:
        out = wire_mine
    return out[:n].float()


def hierarchical_2d(flat, grid, wire="fp16"):
    """The average of FLAT over all ranks: reduce along the row to its
    column-0 rank, all-reduce over column 0, broadcast along the row."""
    dtype = torch.float16 if wire == "fp16" else torch.float32
    x = (flat / grid.world_size).to(dtype)
    leader = grid.row_ranks[0]
    if grid.cols > 1:
        dist.reduce(x, leader, group=grid.row_group)
    if grid.col == 0 and grid.rows > 1:
        dist.all_reduce(x, group=grid.col_group)
    if grid.cols > 1:
        dist.broadcast(x, leader, group=grid.row_group)
    return x.float()


_worker = None
_worker_lock = threading.Lock()


def _comm_thread():
    """The process's one communication thread. One, not a pool: every rank
    must issue its buckets' collectives in the same order on the same
    groups, and a single FIFO thread keeps DDP's bucket order."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = ThreadPoolExecutor(max_workers=1,
                                         thread_name_prefix="torus-hook")
        return _worker


def _hook(algo, state, bucket):
    st = _state(state)
    buf = bucket.buffer()
    fut = torch.futures.Future()

    def run():
        # DDP leaves the bucket alone until the future is done; the
        # collectives release the GIL, so backward goes on meanwhile.
        try:
            avg = algo(buf.float().reshape(-1), st.grid, st.wire)
            buf.copy_(avg.view_as(buf))
        except BaseException as e:  # the step raises it, not this thread
            fut.set_exception(e)
            return
        fut.set_result(buf)

    _comm_thread().submit(run)
    return fut


def torus_allreduce_hook(state, bucket):
    """DDP communication hook: the bucket averaged over the 2D torus
    (state: a TorusGrid, fp16 wire, or a TorusHookState)."""
    return _hook(allreduce_2d, state, bucket)


def hierarchical_hook(state, bucket):
    """DDP communication hook: the bucket averaged hierarchically (row to
    its leader, leaders' column all-reduce, broadcast)."""
    return _hook(hierarchical_2d, state, bucket)
