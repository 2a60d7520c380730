#!/bin/bash
# py_hook.sh: torus.distributed on the local Slurm cluster with the torus
# plugin: `srun --mpi=pmix --torus=auto -N2 -n4 python3 py_hook.py`. Every
# rank builds its row and column groups from the plugin's TORUS_DIMS and
# TORUS_COORD (init_from_env; the grid must come from TORUS_*, 2 rows of 2),
# and after one backward of a tiny CNN the torus hooks' gradients equal
# DDP's default all-reduce: fp32 wire within 1e-6 relative, fp16 wire within
# fp16 rounding (py_hook.py states the bounds), torus2d with the rows'
# steps in shared memory (the default) and sent. The rendezvous is torch's
# env:// on 127.0.0.1 (the cluster's nodes share this host's network).
# Then jobs/train-pytorch.sbatch runs the example (ResNet-18 at 28x28, 2
# steps) to completion on the CPUs of the same 2x2 grid, from a packed
# set, its rendezvous at the first node's address (no MASTER_ADDR given),
# and saves its checkpoint in the job's run folder.
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
. "$top_srcdir/tests/cluster/testlib.sh"
plugin=$top_builddir/plugins/.libs/spank_torus.so
[ -f "$plugin" ] || tl_fail "$plugin is not built"
tl_cluster_up --nodes 2 --leaves 1 --plugin "$plugin"
# tl_cluster_up's trap replaced py_lib.sh's: remove $tmp too.
trap 'rc=$?; rm -rf "$tmp"; (exit $rc); tl_cluster_down' EXIT
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo TL_SRUN_TIMEOUT=240 \
    tl_srun_mpi --mpi=pmix --torus=auto -N2 -n4 "$PY" "$top_srcdir/tests/integration/py_hook.py")
rc=$?
printf '%s\n' "$out"
[ $rc = 0 ] || tl_fail "srun -N2 -n4 py_hook.py: exit $rc"
grep -q 'grid TorusGrid(2x2, row 0, col 0, from TORUS_\*)' <<<"$out" ||
    tl_fail "the grid did not come from the plugin's TORUS_* as 2x2"
[ "$(grep -c '^ok: ' <<<"$out")" = 6 ] || tl_fail "expected 6 hook checks to pass"
echo "PASS: 4 ranks on 2 nodes: torus hooks == DDP's all-reduce"

py_idx_dataset "$tmp/ds" 32 2 train || exit 1
py_idx_dataset "$tmp/ds" 8 1 test || exit 1
cd "$tmp" || exit 1
# No MASTER_ADDR: the job takes the first node's NodeAddr (the node names
# n1, n2 resolve nowhere). A CPU cluster of 2-CPU nodes: no GPU, 1 CPU
# and 256 MB per task.
GLOO_SOCKET_IFNAME=lo TORUS_PYTHON=$PY TORUS_DATA=$tmp/ds TORUS_RUN=$tmp/run \
    TORUS_EXAMPLE=$top_srcdir/examples/pytorch/train_imagenet.py \
    TORUS_TRAIN_ARGS="--arch resnet18 --image-size 28 --batch 8 --max-steps 2 --threads 1 --print-every 1" \
    timeout 300 sbatch --wait -N2 --ntasks-per-node=2 --gpus-per-task=0 -c 1 --mem-per-cpu=256M \
    -o "$tmp/job.out" "$top_srcdir/jobs/train-pytorch.sbatch" >/dev/null ||
    { cat "$tmp/job.out"; tl_fail "train-pytorch.sbatch failed (its output above)"; }
grep -q '^== torus pytorch: .* rendezvous 127.0.0.1:' "$tmp/job.out" &&
    grep -q '^4 ranks on cpu (gloo), grid 2x2 (TORUS_\*), hook torus2d wire fp16' "$tmp/job.out" &&
    grep -q '^epoch 0 step 2 loss' "$tmp/job.out" && grep -q '^== torus pytorch: OK' "$tmp/job.out" &&
    [ -s "$tmp/run/checkpoint.pt" ] ||
    tl_fail "train-pytorch.sbatch: $(cat "$tmp/job.out")"
echo "PASS: jobs/train-pytorch.sbatch: rendezvous at the first node's address, 2 steps on the plugin's 2x2 grid, checkpoint in its run folder"
