"""py_env.py: torus.env reads rank, world size and the plugin's grid from
the environment as docs/pytorch.md says, and names the variable of a
malformed or inconsistent value (ValueError). Run by py_data.sh."""
import os
import sys

from torus import env

fails = 0
KEYS = ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS",
        "SLURM_NTASKS", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "TORUS_VERSION", "TORUS_DIMS", "TORUS_COORD",
        "TORUS_GROUP", "TORUS_NGROUPS")


def case(name, values, want=None, error=None):
    global fails
    for k in KEYS:
        os.environ.pop(k, None)
    os.environ.update(values)
    try:
        got = (env.rank(), env.world_size(), env.grid())
    except ValueError as e:
        got = e
    if error is not None:
        ok = isinstance(got, ValueError) and error in str(got)
    else:
        ok = got == want
    print(("ok: " if ok else "FAIL: ") + f"{name}: {got!r}")
    fails += not ok


case("nothing set", {}, (0, 1, None))
case("torchrun", {"RANK": "2", "WORLD_SIZE": "4"}, (2, 4, None))
case("srun", {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "8"},
     (3, 4, None))
case("RANK wins", {"RANK": "1", "SLURM_PROCID": "3", "WORLD_SIZE": "4"}, (1, 4, None))
grid = env.Grid(2, 2, 1, 0, 1, 2)
plugin = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "TORUS_VERSION": "1",
          "TORUS_DIMS": "2x2", "TORUS_COORD": "1,0", "TORUS_GROUP": "1",
          "TORUS_NGROUPS": "2"}
case("plugin grid", plugin, (2, 4, grid))
case("unknown contract version", dict(plugin, TORUS_VERSION="2"), (2, 4, None))
case("malformed TORUS_DIMS", dict(plugin, TORUS_DIMS="2y2"), error="TORUS_DIMS='2y2'")
case("TORUS_DIMS not the world", dict(plugin, TORUS_DIMS="3x2"),
     error="TORUS_DIMS=3x2 does not hold the 4 tasks")
case("TORUS_COORD outside", dict(plugin, TORUS_COORD="2,0"), error="TORUS_COORD=2,0 lies outside")
case("TORUS_GROUP too big", dict(plugin, TORUS_GROUP="2"), error="TORUS_GROUP=2")
case("TORUS_COORD missing", {k: v for k, v in plugin.items() if k != "TORUS_COORD"},
     error="TORUS_COORD is not set")
case("RANK not a number", {"RANK": "x1"}, error="RANK='x1' is not an integer")
case("negative world", {"WORLD_SIZE": "-4"}, error="WORLD_SIZE='-4' is negative")
case("world 0", {"WORLD_SIZE": "0"}, error="world size 0")
print(f"{fails} failures")
sys.exit(1 if fails else 0)
