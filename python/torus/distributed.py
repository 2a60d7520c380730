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
slice in its column (a ring reduce-scatter and an all-gather), all-gather
in the row. With wire="fp16" (the default)
the bucket is divided by the world size first and sent as fp16, as
torus-train does; received slices are added in fp32. wire="fp32" sends
fp32. Both work in place on the bucket. On CPU tensors the casts to and
from fp16 and the adds are libtoruscomm's kernels, those of torus-train's
collectives (ctypes; the GIL is released while they run), and where a
row's ranks share a host (a row is a node under the plugin) the row's two
steps go through a shared memory segment instead of the wire, as
torus-train's in-place placement does (TorusHookState(shared=False) sends
them).
hierarchical_hook reduces each row to its column-0 rank, all-reduces
among those over column 0, and broadcasts back along the row.
Both run over gloo (CPU tensors) and NCCL (CUDA tensors). A hook call
hands its bucket to a communication thread and returns a future at once,
so a bucket's collectives overlap the rest of the backward pass, as DDP's
own all-reduce does. There are `lanes` threads (init_from_env, default 1),
each with its own row and column groups: bucket i goes to lane
i % lanes, so with lanes=2 two buckets are in flight at once, and each
lane runs its buckets in the order DDP hands them over, which is the same
on every rank.
"""

import copy
import mmap
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

from . import _lib, env

__all__ = ["TorusGrid", "TorusHookState", "init_from_env", "local_device",
           "granted_gpus",
           "torus_allreduce_hook", "hierarchical_hook", "allreduce_2d"]


class TorusGrid:
    """This rank's place in the grid and the groups of its row and column.
    row_ranks / col_ranks: the global ranks of its row (ordered by column)
    and of its column (ordered by row)."""

    def __init__(self, rows, cols, row, col, row_ranks, col_ranks, lanes,
                 source):
        self.rows, self.cols, self.row, self.col = rows, cols, row, col
        self.row_ranks, self.col_ranks = row_ranks, col_ranks
        # lanes: one (row group, column group) pair per communication
        # thread of the hooks; the first is the grid's own.
        self.lanes = lanes
        self.row_group, self.col_group = lanes[0]
        self.source = source  # "TORUS_*" or "hosts"
        self.world_size = rows * cols

    def lane(self, i):
        """This grid with lane I's groups (the hooks' thread I uses them)."""
        g = copy.copy(self)
        g.row_group, g.col_group = self.lanes[i]
        return g

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


def granted_gpus():
    """(count, what): the GPUs Slurm granted this process, by the first of
    SLURM_STEP_GPUS (a list), SLURM_GPUS_ON_NODE (a count) and
    CUDA_VISIBLE_DEVICES (a list) that names any, with "NAME=VALUE" for
    messages; (0, "no GPU granted") otherwise. torus-train's rule
    (trainer/train/device.c)."""
    for name in ("SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "CUDA_VISIBLE_DEVICES"):
        v = os.environ.get(name)
        if v is None:
            continue
        if name == "SLURM_GPUS_ON_NODE":
            count = int(v) if v.isdigit() else 0
        else:
            count = 0 if v in ("", "-1", "NoDevFiles") else v.count(",") + 1
        if count > 0:
            return count, f"{name}={v[:64]}"
    return 0, "no GPU granted"


def _local_size():
    """Tasks of this step on this node: LOCAL_WORLD_SIZE, else Slurm's
    SLURM_STEP_TASKS_PER_NODE ("2(x3),1") at SLURM_NODEID, else 1."""
    if os.environ.get("LOCAL_WORLD_SIZE", "").isdigit():
        return int(os.environ["LOCAL_WORLD_SIZE"])
    per = os.environ.get("SLURM_STEP_TASKS_PER_NODE", "")
    node = os.environ.get("SLURM_NODEID", "0")
    counts = []
    for part in filter(None, per.split(",")):
        n, _, rep = part.partition("(x")
        if not n.isdigit() or (rep and not rep.rstrip(")").isdigit()):
            return 1
        counts += [int(n)] * (int(rep.rstrip(")")) if rep else 1)
    return counts[int(node)] if node.isdigit() and int(node) < len(counts) else 1


def local_device():
    """The device this rank computes on, by torus-train's rule: the index
    in TORUS_LOCAL_GPU (the plugin's), the only visible GPU, the local
    rank's when there are enough, or the local rank modulo the visible
    count when each task sees a subset of a step that holds one GPU per
    rank (--gpu-bind=closest); torch.device("cpu") when no GPU was granted
    and none is visible. A rank that was granted GPUs it cannot use, or
    that would share one by accident, raises RuntimeError saying why."""
    rank, lr, ls = env.rank(), env.local_rank(), _local_size()
    granted, what = granted_gpus()
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible == 0:
        if granted:
            why = ("this torch is built without CUDA" if torch.version.cuda is None
                   else "no driver or no device (torch.cuda.is_available() is False)")
            raise RuntimeError(
                f"rank {rank}: Slurm granted this step GPUs ({what}), but torch "
                f"cannot use them: {why}. Stopping rather than training on the "
                "CPU: fix the GPU set-up, or ask for no GPU (sbatch --gpus-per-task=0)")
        return torch.device("cpu")
    pick = os.environ.get("TORUS_LOCAL_GPU")
    if pick is not None:
        if not pick.isdigit() or int(pick) >= visible:
            raise RuntimeError(f"rank {rank}: TORUS_LOCAL_GPU={pick[:32]!r} is not "
                               f"a device index in [0, {visible})")
        return torch.device("cuda", int(pick))
    if visible == 1:
        return torch.device("cuda", 0)
    if ls <= visible:
        return torch.device("cuda", lr)
    if granted >= ls:
        return torch.device("cuda", lr % visible)
    raise RuntimeError(
        f"rank {rank}: local rank {lr} of {ls} ranks on this node, but {visible} "
        f"GPUs are visible and the step was granted {granted}: give each rank "
        "its own GPU (srun --gpus-per-task=1) or set TORUS_LOCAL_GPU")


def init_from_env(backend=None, lanes=1, **kwargs):
    """Start torch.distributed from the environment if it is not running,
    and return the TorusGrid of this rank. backend: "nccl" when CUDA is
    available, else "gloo"; with NCCL the current CUDA device must be
    this rank's first (torch.cuda.set_device(local_device())), since the
    row and column groups' communicators are made on it. lanes: how many
    buckets the hooks reduce at once, each on its own thread over its own
    row and column groups. kwargs go to init_process_group."""
    if not isinstance(lanes, int) or lanes < 1:
        raise ValueError(f"lanes={lanes!r}: a whole number >= 1")
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
    # Every rank creates every group, lane by lane, rows then columns, in
    # the same order (new_group's rule).
    pairs = []
    for _ in range(lanes):
        row_group, row_ranks = _lines(world, me, coords, rows, 0)
        col_group, col_ranks = _lines(world, me, coords, cols, 1)
        pairs.append((row_group, col_group))
    return TorusGrid(rows, cols, coords[me][0], coords[me][1], row_ranks,
                     col_ranks, pairs, source)


class TorusHookState:
    """The state to register a hook with: the grid, the wire type, and
    whether torus_allreduce_hook may reduce a row in shared memory (where
    its ranks share it; else it always sends the row's steps)."""

    def __init__(self, grid, wire="fp16", shared=True):
        if wire not in ("fp16", "fp32"):
            raise ValueError(f"wire={wire!r}: 'fp16' or 'fp32'")
        self.grid, self.wire, self.shared = grid, wire, bool(shared)


def _state(state):
    return state if isinstance(state, TorusHookState) else TorusHookState(state)


_WIRES = {"fp32": (0, torch.float32), "fp16": (1, torch.float16)}
_CODE_DTYPES = {code: dtype for code, dtype in _WIRES.values()}


def _encode(code, src, dst):
    """dst = src on the wire (dst: the wire's dtype, as long as src). CPU
    tensors go through libtoruscomm's kernels (torus-train's, several times
    faster than torch's fp16 casts, and the GIL is released meanwhile);
    device tensors through torch."""
    if src.is_cuda or code == 0:
        dst.copy_(src)
    else:
        _kernel("tcomm_api_encode", code, src, dst)


def _check(name, code, rc):
    """Raise when libtoruscomm's NAME refused its arguments (rc != 0)."""
    if rc != 0:
        raise RuntimeError(f"libtoruscomm: {name}(wire {code}) refused its "
                           f"arguments (code {rc})")


def _kernel(name, code, src, dst):
    """Call libtoruscomm's NAME on SRC and DST (CPU, contiguous, as many
    values each); a refusal (an unknown wire code) raises."""
    _check(name, code, getattr(_lib.comm(), name)(
        code, src.data_ptr(), dst.data_ptr(), dst.numel()))


def _decode(code, src, dst, add=False):
    """dst = src (or dst += src when ADD) widened to fp32."""
    if src.is_cuda:
        dst.add_(src) if add else dst.copy_(src)
        return
    _kernel("tcomm_api_decode_add" if add else "tcomm_api_decode", code, src,
            dst)


def _scale_round(code, x, scale=1.0):
    """x = x * SCALE rounded to the wire's values, in place (one pass): a
    rank's own part of a sum made what its peers receive of theirs, so
    that an element's sum does not depend on which rank adds it, hence on
    where DDP's bucket boundaries cut (they change when DDP rebuilds its
    buckets, and a resumed run must reduce as the uninterrupted one)."""
    if x.is_cuda:
        if scale != 1.0:
            x.mul_(scale)
        if code != 0:
            x.copy_(x.to(_CODE_DTYPES[code]))
        return
    _check("tcomm_api_scale_round", code, _lib.comm().tcomm_api_scale_round(
        code, x.data_ptr(), x.numel(), scale))


_scratch_tls = threading.local()


def _scratch(name, numel, dtype, device):
    """NUMEL values of a buffer the calling thread keeps for reuse: a
    bucket's temporaries are taken once, not per bucket (a fresh large
    allocation is fresh pages that the kernel zeroes, on the cores the
    backward pass needs). A thread runs one bucket at a time, so one
    buffer per name is enough."""
    bufs = getattr(_scratch_tls, "bufs", None)
    if bufs is None:
        bufs = _scratch_tls.bufs = {}
    key = (name, dtype, str(device))
    t = bufs.get(key)
    if t is None or t.numel() < numel:
        t = bufs[key] = torch.empty(numel, dtype=dtype, device=device)
    return t[:numel]


def _chunks(flat, parts):
    """FLAT split into PARTS contiguous views, the first n % PARTS one value
    longer (no padding copy; every view is non-empty when n >= PARTS)."""
    q, r = divmod(flat.numel(), parts)
    return list(flat.split([q + 1] * r + [q] * (parts - r)))


def _exchange(send, to, recv, frm, group):
    """One ring hop: SEND to rank TO while RECV arrives from rank FRM, both
    posted before either is waited on (a ring of blocking sends would
    deadlock)."""
    reqs = [dist.isend(send, to, group=group), dist.irecv(recv, frm, group=group)]
    for q in reqs:
        q.wait()


def _ring_reduce_scatter(acc, ranks, me, group, code, dtype):
    """Ring reduce-scatter over RANKS (ring order) of ACC, one fp32 view per
    member, summed in place: afterwards acc[me] holds the sum over the ring.
    Each hop sends its partial sum on the wire and adds what it receives in
    fp32. A chunk this rank sends is never written again, so the fp32 wire
    sends the view itself."""
    n = len(ranks)
    nxt, prv = ranks[(me + 1) % n], ranks[(me - 1) % n]
    big = acc[0].numel()
    out = _scratch("send", big, dtype, acc[0].device)
    buf = _scratch("recv", big, dtype, acc[0].device)
    for s in range(n - 1):
        send, recv = acc[(me - s - 1) % n], acc[(me - s - 2) % n]
        o = send if code == 0 else out[:send.numel()]
        _encode(code, send, o)
        b = buf[:recv.numel()]
        _exchange(o, nxt, b, prv, group)
        _decode(code, b, recv, add=True)


def _padded(flat, parts, fn):
    """Run FN on FLAT padded with zeros to PARTS values (a view per member
    needs one value each), and copy the result back; for tiny buckets."""
    padded = torch.zeros(parts, dtype=flat.dtype, device=flat.device)
    padded[:flat.numel()] = flat
    fn(padded)
    return flat.copy_(padded[:flat.numel()])


def _all_gather(acc, ranks, me, group, code, dtype):
    """Ring all-gather over RANKS (ring order) of acc[me] on the wire, into
    every view of ACC (fp32): each hop forwards the piece it received last,
    straight into its place in one buffer (gloo's all_gather would copy
    every piece into a fresh tensor and out again). This rank's own piece
    goes through the wire as well, so every rank ends with the same
    values."""
    n = len(ranks)
    nxt, prv = ranks[(me + 1) % n], ranks[(me - 1) % n]
    sizes = [v.numel() for v in acc]
    parts = list(_scratch("gather", sum(sizes), dtype,
                          acc[0].device).split(sizes))
    _encode(code, acc[me], parts[me])
    for s in range(n - 1):
        _exchange(parts[(me - s) % n], nxt, parts[(me - s - 1) % n], prv, group)
    for part, view in zip(parts, acc):
        _decode(code, part, view)


def _ring_allreduce(flat, ranks, me, group, code, dtype):
    """Sum FLAT (a contiguous fp32 tensor of values the wire carries
    exactly, _scale_round) over RANKS in place: the ring reduce-scatter,
    then the all-gather, both on the wire with fp32 adds (gloo's own fp16
    all-reduce sums in fp16, and slowly)."""
    n = len(ranks)
    if n == 1:
        return flat
    if flat.numel() < n:
        return _padded(flat, n, lambda p: _ring_allreduce(p, ranks, me, group,
                                                          code, dtype))
    acc = _chunks(flat, n)
    _ring_reduce_scatter(acc, ranks, me, group, code, dtype)
    _all_gather(acc, ranks, me, group, code, dtype)
    return flat


def _column(piece, grid, code, dtype):
    """The all-reduce of this rank's PIECE of its row's sum over its column
    (both paths of allreduce_2d). The column's ranks hold the same piece of
    their rows' sums; it is rounded to the wire first, as the row's inputs
    were."""
    _scale_round(code, piece)
    _ring_allreduce(piece, grid.col_ranks, grid.row, grid.col_group, code,
                    dtype)


class _RowMemory:
    """One row's shared memory (one per row group, so per lane): a slot of
    CAP fp32 values per member, where each puts its bucket, and a result
    area of CAP, where each puts its reduced slice. A /dev/shm file that
    the row's column-0 rank creates (O_EXCL, 0600, a random name it hands
    the others over the row group) and unlinks once all have mapped it, so
    a crash leaves nothing behind after set-up."""

    def __init__(self, mm, cap, members):
        whole = torch.frombuffer(mm, dtype=torch.float32)
        self.cap = cap
        self.slots = [whole[i * cap:(i + 1) * cap] for i in range(members)]
        self.result = whole[members * cap:(members + 1) * cap]


def _node():
    """The node this rank runs on: Slurm's name for it, else the host's."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def _shm_map(name, size, create):
    """NAME (a /dev/shm path) mapped with SIZE bytes, created (O_EXCL,
    0600) when CREATE; None when it cannot be (on another host the name
    does not exist, or has another size)."""
    try:
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(name, flags, 0o600)
    except OSError:
        return None
    try:
        if create:
            os.ftruncate(fd, size)
        return mmap.mmap(fd, size) if os.fstat(fd).st_size == size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _row_map(grid, cap):
    """The row's _RowMemory of CAP values per slot, or None where its
    members are not all on one node or do not all see the same memory:
    a collective over the row group, which every member enters with the
    same CAP."""
    members, me = grid.cols, grid.col
    # One node first: emulated nodes (network namespaces on one host)
    # would share /dev/shm, and the row's steps would skip their links.
    nodes = [None] * members
    dist.all_gather_object(nodes, _node(), group=grid.row_group)
    if len(set(nodes)) != 1:
        return None
    size = (members + 1) * cap * 4
    name, mm = [None], None
    if me == 0:  # created before the others look for it
        name[0] = f"/dev/shm/torus-hook-{os.getpid()}-{os.urandom(8).hex()}"
        mm = _shm_map(name[0], size, True)
    dist.broadcast_object_list(name, grid.row_ranks[0], group=grid.row_group)
    if me != 0:
        mm = _shm_map(name[0], size, False)
    # Each member marks its own slot with its rank + 1 (the file starts
    # as zeros); all see every mark only when they mapped the same memory.
    row = _RowMemory(mm, cap, members) if mm is not None else None
    if row is not None:
        row.slots[me][0] = float(grid.row_ranks[me] + 1)
    dist.barrier(group=grid.row_group)
    ok = row is not None and all(
        row.slots[i][0].item() == float(r + 1) for i, r in enumerate(grid.row_ranks))
    agreed = torch.tensor([1 if ok else 0])
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN, group=grid.row_group)
    if me == 0 and mm is not None:
        os.unlink(name[0])
    # Unmapped when the last view of it goes (mmap.close() would refuse
    # while torch's views hold its buffer).
    return row if agreed.item() else None


_rows = {}  # id(row group) -> (row group, _RowMemory or None)


def _row_memory(grid, numel):
    """The row's shared memory with room for NUMEL values, mapped on first
    use and again, larger, when a bucket outgrows it (every member of the
    row sees the same buckets, so all decide alike); None where the row
    has none."""
    got = _rows.get(id(grid.row_group))
    if got is not None and (got[1] is None or got[1].cap >= numel):
        return got[1]
    row = _row_map(grid, numel)
    _rows[id(grid.row_group)] = (grid.row_group, row)
    return row


def _row_shared(flat, row, grid, code, dtype):
    """The 2D torus with the row's steps in shared memory, on FLAT already
    scaled and rounded to the wire: each member puts its values in its
    slot; after a row barrier each adds up its own slice over the slots,
    in slot order and in fp32 (so every member's slice sums alike,
    whichever bucket it lies in); the column all-reduce of that slice goes
    over the wire as in the sent path; each puts its slice in the result
    area, and after a second barrier copies the others' slices from there.
    The barriers also order the buckets: a member writes its slot for the
    next bucket only after the second barrier, when every member is done
    adding from the slots, and its next slice only after the next first
    barrier, when every member is done copying results."""
    C, me = grid.cols, grid.col
    n = flat.numel()
    row.slots[me][:n].copy_(flat)
    dist.barrier(group=grid.row_group)
    # The slots and the result area are cut as the bucket is (_chunks).
    acc, results = _chunks(flat, C), _chunks(row.result[:n], C)
    mine = acc[me]
    parts = [_chunks(slot[:n], C)[me] for slot in row.slots]
    torch.add(parts[0], parts[1], out=mine)
    for part in parts[2:]:
        mine.add_(part)
    _column(mine, grid, code, dtype)
    results[me].copy_(mine)
    dist.barrier(group=grid.row_group)
    for i, (view, result) in enumerate(zip(acc, results)):
        if i != me:
            view.copy_(result)
    return flat


def allreduce_2d(flat, grid, wire="fp16", shared=True):
    """Average FLAT (a contiguous 1-D fp32 tensor) over all ranks by the 2D
    torus, in place; returns FLAT. The division by the world size comes
    first, in fp32, as in torus-train, and the quotient is rounded to the
    wire (_scale_round). Reduce-scatter along the row, the
    all-reduce of this rank's piece along its column, all-gather along the
    row; every hop on the wire, every add in fp32. SHARED: on CPU
    tensors, where the row's ranks share memory (one host), its two
    steps go through shared memory instead (_row_shared), as torus-train's
    in-place placement does: a copy and an add instead of the wire's
    casts and a socket's copies; only the column goes over the wire."""
    code, dtype = _WIRES[wire]
    C = grid.cols
    if flat.numel() < C:
        return _padded(flat, C, lambda p: allreduce_2d(p, grid, wire, shared))
    _scale_round(code, flat, 1.0 / grid.world_size)
    if C == 1:
        return _ring_allreduce(flat, grid.col_ranks, grid.row, grid.col_group,
                               code, dtype)
    row = _row_memory(grid, flat.numel()) if shared and not flat.is_cuda else None
    if row is not None:
        return _row_shared(flat, row, grid, code, dtype)
    acc = _chunks(flat, C)
    _ring_reduce_scatter(acc, grid.row_ranks, grid.col, grid.row_group,
                         code, dtype)
    _column(acc[grid.col], grid, code, dtype)
    _all_gather(acc, grid.row_ranks, grid.col, grid.row_group, code, dtype)
    return flat


def hierarchical_2d(flat, grid, wire="fp16"):
    """Average FLAT (a contiguous 1-D fp32 tensor) over all ranks, in
    place: reduce along the row to its column-0 rank, all-reduce over
    column 0, broadcast along the row; returns FLAT."""
    code, dtype = _WIRES[wire]
    flat.div_(grid.world_size)
    x = flat if code == 0 else _scratch("wire", flat.numel(), dtype,
                                        flat.device)
    _encode(code, flat, x)
    leader = grid.row_ranks[0]
    if grid.cols > 1:
        dist.reduce(x, leader, group=grid.row_group)
    if grid.col == 0 and grid.rows > 1:
        dist.all_reduce(x, group=grid.col_group)
    if grid.cols > 1:
        dist.broadcast(x, leader, group=grid.row_group)
    _decode(code, x, flat)
    return flat


_workers = {}
_workers_lock = threading.Lock()


def _comm_thread(lane):
    """The process's communication thread of LANE. One per lane, not a
    pool: every rank must issue a group's collectives in the same order,
    and bucket i goes to lane i % lanes on every rank, whose one FIFO
    thread keeps DDP's bucket order on that lane's own groups."""
    with _workers_lock:
        if lane not in _workers:
            _workers[lane] = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"torus-hook{lane}")
        return _workers[lane]


def _hook(algo, state, bucket):
    st = _state(state)
    buf = bucket.buffer()
    lane = bucket.index() % len(st.grid.lanes)
    grid = st.grid.lane(lane)
    fut = torch.futures.Future()

    def run():
        # DDP leaves the bucket alone until the future is done; the
        # collectives and C kernels release the GIL, so backward (and the
        # other lane) goes on meanwhile.
        try:
            if buf.dtype == torch.float32 and buf.is_contiguous():
                algo(buf.view(-1), grid, st.wire)  # in place
            else:
                flat = buf.float().reshape(-1)
                buf.copy_(algo(flat, grid, st.wire).view_as(buf))
        except BaseException as e:  # the step raises it, not this thread
            fut.set_exception(e)
            return
        fut.set_result(buf)

    _comm_thread(lane).submit(run)
    return fut


def torus_allreduce_hook(state, bucket):
    """DDP communication hook: the bucket averaged over the 2D torus
    (state: a TorusGrid, fp16 wire, or a TorusHookState)."""
    st = _state(state)
    return _hook(lambda flat, grid, wire: allreduce_2d(flat, grid, wire, st.shared),
                 st, bucket)


def hierarchical_hook(state, bucket):
    """DDP communication hook: the bucket averaged hierarchically (row to
    its leader, leaders' column all-reduce, broadcast)."""
    return _hook(hierarchical_2d, state, bucket)
