#!/bin/bash
# tests/bench/comm/node.sh: the one-node communication benchmarks of the
# collectives issue, run by hand (not in make check):
#   1. 4 ranks, 64 MiB fp32: busbw of our ring / torus2d against OpenMPI's
#      own MPI_Allreduce (flat), repeated to show the spread;
#   2. ResNet-50 v1.5 gradient sync over 4 ranks, three runs. Each run
#      has the like-for-like chain from the naive sync to ours, every link
#      one change, with its factor from that run (tests/bench/comm/chain.awk
#      reads each row's own attributes and fails the run on a link that
#      changes anything else, e.g. a "fused" row whose theta leaves every
#      tensor alone):
#        per-tensor flat fp32 (the naive peer: one MPI_Allreduce a tensor)
#          -> fused flat fp32                 (fusion)
#          -> fused torus2d fp32              (algorithm)
#          -> fused torus2d fp16              (wire)
#          -> fused-shm torus2d fp16          (placement: in place, shared)
#      all fused rows at theta 4M, the ranks on a GRID grid (default 2x2,
#      so torus2d is 2-D on the node). PyTorch DDP gloo's pure all-reduce
#      over its own 25 MB fp32 buckets, in the rank's own memory, is
#      compared with the torus row of the same dtype, placement and bucket
#      size: fused torus2d fp32 at theta 25M. busbw is on the user's fp32
#      bytes; wire(MB) says what the wire carried. rw-ref (read and write
#      every gradient once, all ranks at once) is a reference, not a floor;
#      the chain has no flat fp16 link: flat fp16 is MPI_Allreduce with a
#      user op, a peer no framework runs;
#   3. a bucket-size (theta) sweep of the in-place row;
#   4. the cost model at 1024+ ranks with Sony's ABCI parameters.
# Needs /usr/bin/python3 with torch and torchvision (Debian python3-torch
# python3-torchvision); installs them when missing.
# Usage: tests/bench/comm/node.sh [--grid RxC] [BUILD_DIR] (default: 2x2,
#        the current dir)
set -u
here=$(cd "$(dirname "$0")" && pwd)
grid=2x2
if [ "${1:-}" = --grid ]; then
    [[ ${2:-} =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || { echo "node.sh: --grid RxC (4 ranks)" >&2; exit 2; }
    grid=$2
    shift 2
fi
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
    out=$(mpi "$TB" --resnet50 --steps 5 -a flat,torus2d -d fp32,fp16 --theta 4M,25M --grads both \
        --grid "$grid") || { echo "$out"; exit 1; }
    ddp=$(/usr/bin/python3 "$here/ddp_gloo_resnet50.py" --ranks 4 --steps 5) || exit 1
    echo "$out" | grep -E '^(per|rw-ref|fused|#)'
    echo "$ddp"
    echo "$out" | awk -v theta=4M -v algo=torus2d -f "$here/chain.awk" ||
        { echo "node.sh: run $i: the chain does not hold" >&2; exit 1; }
    { echo "$out"; echo "$ddp"; } | awk '
        $1 == "fused" && $2 == "torus2d" && $3 == "fp32" && $4 == "25M" { t = $6 }
        $1 == "ddp-gloo" { ddp = $6 }
        END {
            if (!t || !ddp) { print "node.sh: no fused torus2d fp32 25M or ddp-gloo row"; exit 1 }
            printf "DDP gloo fp32 25M, own memory %.1f ms / torus2d fp32 25M, own memory %.1f ms = %.2fx\n", ddp, t, ddp / t }' ||
        exit 1
done
echo "== 3. theta sweep, in place fp16 torus2d"
mpi "$TB" --resnet50 --steps 5 -a torus2d -d fp16 --grads shared --grid "$grid" \
    --theta 256K,1M,2M,4M,8M,16M,32M | grep -E '^(per|fused)'
echo "== 4. cost model, ABCI (4 V100/node, 2 EDR rails)"
"$TB" --model -P 4096 --ranks-per-node 4 --preset abci --scaling -b 64M -e 64M -d fp16
