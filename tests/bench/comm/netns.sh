#!/bin/bash
# tests/bench/comm/netns.sh: the emulated-cluster benchmark of the
# collectives issue, by hand (root; not in make check). 4 nodes x 2 ranks,
# every node in its own network namespace with its link shaped by tbf to
# RATE (default 1gbit); 64 MiB all-reduce with every algorithm at fp32 and
# fp16, with the cost model's prediction (link parameters probed at
# start-up) beside each measurement, and the link limit 2(N-1)/N * S / B.
# Usage: tests/bench/comm/netns.sh BUILD_DIR [RATE] [MTU]
# MTU (default 1500) sets the node links' MTU; 9000 emulates the jumbo
# frames of an HPC Ethernet fabric (less TCP/IP header and per-packet cost).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
build=$(cd "${1:?usage: netns.sh BUILD_DIR [RATE]}" && pwd)
rate=${2:-1gbit}
mtu=${3:-1500}
base=/tmp/torus-comm-cluster
trap '"$top/tests/cluster/down" --base "$base" --quiet' EXIT
"$top/tests/cluster/down" --base "$base" --quiet 2>/dev/null
"$top/tests/cluster/up" --base "$base" --nodes 4 --port-base 17400 --netns --rate "$rate" --mtu "$mtu" --quiet ||
    exit 1
. "$base/env"
# OpenMPI between nodes: the veth subnet; within a node: shared memory in a
# directory of our own (node names repeat across test clusters).
subnet=$(srun -N1 -n1 ip -o -4 addr show scope global | awk '{print $4}' | head -1)
mkdir -p "$base/ompi-shm"
export OMPI_MCA_btl_tcp_if_include=$subnet OMPI_MCA_btl_vader_backing_directory=$base/ompi-shm
echo "== $(date -u +%FT%TZ) 4 nodes x 2 ranks, netns, tbf $rate per node link, MTU $mtu, subnet $subnet"
S=$((64 << 20))
bits=${rate%gbit}
[ "$bits" != "$rate" ] && B=$((bits * 125000000)) || B=$((${rate%mbit} * 125000))
echo "link limit 2(N-1)/N * S / B = $(awk -v s=$S -v b=$B 'BEGIN {printf "%.3f s", 1.5 * s / b}') at the nominal rate"
for wire in fp32 fp16; do
    timeout 600 srun --mpi=pmix -N4 -n8 "$build/trainer/bench/torus-bench" -b 64M -e 64M -n 3 -w 1 \
        -a flat,ring,hier,hier-rs,torus2d,hybrid -d $wire --probe
done
echo "== model at scale with the same links: see torus-bench --model --help"
