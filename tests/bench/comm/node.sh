#!/bin/bash
# tests/bench/comm/node.sh: the one-node communication benchmarks of the
# collectives issue, run by hand (not in make check):
#   1. 4 ranks, 64 MiB fp32: busbw of our ring / torus2d against OpenMPI's
#      own MPI_Allreduce (flat), repeated to show the spread;
#   2. ResNet-50 v1.5 gradient sync over 4 ranks: per-tensor fp32
#      MPI_Allreduce against fused fp16 (every algorithm), with the
#      gradients in each rank's own memory (rows "fused") and in memory the
#      node's ranks share, reduced in place (rows "fused-shm"), and a
#      bucket-size (theta) sweep for the default;
#   3. PyTorch DDP gloo with 25 MB buckets on the same 4 ranks;
#   4. the cost model at 1024+ ranks with Sony's ABCI parameters.
# Usage: tests/bench/comm/node.sh [BUILD_DIR] (default: the current dir)
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-.}
TB="$build/trainer/bench/torus-bench"
[ -x "$TB" ] || { echo "node.sh: no torus-bench under $build (pass the build dir)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 4 "$@"; }

echo "== $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== 1. 4 ranks, 64 MiB fp32 (3 runs)"
for i in 1 2 3; do
    mpi "$TB" -b 64M -e 64M -n 5 -w 2 -a flat,ring,torus2d,hier -d fp32,fp16 | grep -E '^ '
done
echo "== 2. ResNet-50 gradient sync, 4 ranks (2 runs), then theta sweep"
for i in 1 2; do
    mpi "$TB" --resnet50 --steps 5 -a flat,ring,hier,torus2d,hybrid -d fp16 --theta 4M |
        grep -E '^(per|floor|fused|#)'
done
mpi "$TB" --resnet50 --steps 5 -a torus2d -d fp16 --theta 256K,1M,2M,4M,8M,16M,32M | grep -E '^(per|fused)'
echo "== 3. PyTorch DDP gloo, 25 MB buckets, 4 ranks"
/usr/bin/python3 "$here/ddp_gloo_resnet50.py" --ranks 4 --steps 5
echo "== 4. cost model, ABCI (4 V100/node, 2 EDR rails)"
"$TB" --model -P 4096 --ranks-per-node 4 --preset abci --scaling -b 64M -e 64M -d fp16
