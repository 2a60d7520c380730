#!/bin/bash
# tests/bench/comm/node.sh: the one-node communication benchmarks of the
# collectives issue, run by hand (not in make check):
#   1. 4 ranks, 64 MiB fp32: busbw of our ring / torus2d against OpenMPI's
#      own MPI_Allreduce (flat), repeated to show the spread;
#   2. ResNet-50 v1.5 gradient sync over 4 ranks, three runs. Each run has
#      the rows that separate the three changes between the naive sync and
#      ours, and the factor of each, from that run:
#        per-tensor fp32 MPI_Allreduce (the naive peer)
#          -> fused fp32, private memory       (factor: fusion)
#          -> fused fp16, private memory       (factor: fp16 wire)
#          -> fused fp16, in place, shared mem  (factor: in place)
#      with torus2d (the algorithm the in-place path runs on one node) and
#      hybrid; then PyTorch DDP gloo's pure all-reduce time over DDP's own
#      25 MB buckets on the same 4 ranks x 1 thread, in the same run;
#   3. a bucket-size (theta) sweep of the in-place row;
#   4. the cost model at 1024+ ranks with Sony's ABCI parameters.
# Needs /usr/bin/python3 with torch and torchvision (Debian python3-torch
# python3-torchvision); installs them when missing.
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
echo "== 2. ResNet-50 gradient sync, 4 ranks: factor by factor, 3 runs"
if ! /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
    echo "node.sh: installing python3-torch python3-torchvision (the DDP peer)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-torchvision >/dev/null ||
        { echo "node.sh: cannot install the PyTorch peer" >&2; exit 2; }
fi
for i in 1 2 3; do
    out=$(mpi "$TB" --resnet50 --steps 5 -a torus2d,hybrid -d fp32,fp16 --theta 4M --grads both) ||
        { echo "$out"; exit 1; }
    ddp=$(/usr/bin/python3 "$here/ddp_gloo_resnet50.py" --ranks 4 --steps 5) || exit 1
    echo "$out" | grep -E '^(per|floor|fused|#)'
    echo "$ddp"
    { echo "$out"; echo "$ddp"; } | awk '
        $1 == "per-tensor" { naive = $6 }
        $1 == "fused" && $2 == "torus2d" && $3 == "fp32" { f32 = $6 }
        $1 == "fused" && $2 == "torus2d" && $3 == "fp16" { f16 = $6 }
        $1 == "fused-shm" && $2 == "torus2d" && $3 == "fp16" { shm = $6 }
        $1 == "ddp-gloo" { ddp = $6 }
        END {
            if (!naive || !f32 || !f16 || !shm || !ddp) { print "node.sh: missing rows"; exit 1 }
            printf "factors (torus2d): fusion %.2fx (%.1f -> %.1f ms), fp16 wire %.2fx (-> %.1f), in place %.2fx (-> %.1f); all %.2fx; DDP gloo / in place %.2fx\n",
                naive / f32, naive, f32, f32 / f16, f16, f16 / shm, shm, naive / shm, ddp / shm }'
done
echo "== 3. theta sweep, in place fp16 torus2d"
mpi "$TB" --resnet50 --steps 5 -a torus2d -d fp16 --grads shared --theta 256K,1M,2M,4M,8M,16M,32M | grep -E '^(per|fused)'
echo "== 4. cost model, ABCI (4 V100/node, 2 EDR rails)"
"$TB" --model -P 4096 --ranks-per-node 4 --preset abci --scaling -b 64M -e 64M -d fp16
