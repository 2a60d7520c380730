"""This process's place in the job, from its environment (nothing is
guessed beyond what the launcher and the torus plugin set):

    rank        RANK (torchrun), else SLURM_PROCID (srun), else PMIX_RANK,
                else OMPI_COMM_WORLD_RANK, else 0
    world size  WORLD_SIZE, else SLURM_STEP_NUM_TASKS, else SLURM_NTASKS,
                else OMPI_COMM_WORLD_SIZE, else 1
    local rank  LOCAL_RANK, else SLURM_LOCALID, else OMPI_COMM_WORLD_LOCAL_RANK,
                else 0
    grid        TORUS_VERSION=1, TORUS_DIMS=RxC, TORUS_COORD=r,c (the
                plugin's contract, docs/env-contract.md); None when absent,
                and then callers fall back to one row per node.

Values are checked: a malformed or inconsistent variable raises ValueError
naming it.
"""

import os
from collections import namedtuple

Grid = namedtuple("Grid", "rows cols row col group ngroups")


def _int(names, default):
    for name in names:
        v = os.environ.get(name)
        if v is None or v == "":
            continue
        try:
            n = int(v, 10)
        except ValueError:
            raise ValueError(f"{name}={v!r} is not an integer") from None
        if n < 0:
            raise ValueError(f"{name}={v!r} is negative")
        return n
    return default


def rank():
    return _int(("RANK", "SLURM_PROCID", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"), 0)


def world_size():
    n = _int(("WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS",
              "OMPI_COMM_WORLD_SIZE"), 1)
    if n < 1:
        raise ValueError("world size 0 in the environment")
    return n


def local_rank():
    return _int(("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"), 0)


def _pair(name, sep):
    v = os.environ.get(name)
    if v is None:
        raise ValueError(f"TORUS_VERSION=1 but {name} is not set")
    parts = v.split(sep)
    try:
        a, b = (int(p, 10) for p in parts)
    except ValueError:
        raise ValueError(f"{name}={v!r}: expected two integers separated "
                         f"by {sep!r}") from None
    return a, b


def grid(world=None):
    """The plugin's grid for this task, or None when the torus is off (no
    TORUS_VERSION) or the contract version is one this package does not
    know (the contract says to ignore the variables then)."""
    if os.environ.get("TORUS_VERSION") != "1":
        return None
    rows, cols = _pair("TORUS_DIMS", "x")
    row, col = _pair("TORUS_COORD", ",")
    world = world_size() if world is None else world
    if rows < 1 or cols < 1 or rows * cols != world:
        raise ValueError(f"TORUS_DIMS={rows}x{cols} does not hold the "
                         f"{world} tasks of this job")
    if not (0 <= row < rows and 0 <= col < cols):
        raise ValueError(f"TORUS_COORD={row},{col} lies outside "
                         f"TORUS_DIMS={rows}x{cols}")
    ngroups = _int(("TORUS_NGROUPS",), 1)
    group = _int(("TORUS_GROUP",), 0)
    if ngroups < 1 or group >= ngroups:
        raise ValueError(f"TORUS_GROUP={group} is not below "
                         f"TORUS_NGROUPS={ngroups}")
    return Grid(rows, cols, row, col, group, ngroups)
