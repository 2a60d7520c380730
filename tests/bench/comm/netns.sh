#!/bin/bash
# tests/bench/comm/netns.sh: the emulated-cluster benchmark of the
# collectives issue, by hand (root; not in make check). 4 nodes x 2 ranks,
# every node in its own network namespace with its link shaped by tbf to
# RATE (default 1gbit); a 64 MiB all-reduce with every algorithm at fp32 and
# fp16, with the cost model's prediction (link parameters probed at
# start-up) beside each measurement, and the link limit 2(N-1)/N * S / B
# for each wire: S is 64 MiB on an fp32 wire and half that on an fp16 one.
# Usage: tests/bench/comm/netns.sh [--compare BUILD_B] [--runs N] BUILD_DIR [RATE] [MTU]
# MTU (default 1500) sets the node links' MTU; 9000 emulates the jumbo
# frames of an HPC Ethernet fabric (less TCP/IP header and per-packet cost).
# --compare BUILD_B: A/B mode. BUILD_DIR (A) and BUILD_B take turns on the
# same cluster, A then B in every round, N rounds (default 3), so that load
# and the link's state hit both alike; at the end, per wire and algorithm,
# each side's median time over the rounds and B/A. Use it to judge a change
# against the commit before it (two build trees).
# NETNS_MIB: the all-reduce's size in MiB (64), e.g. 1 for a quick check
# that the script runs.
# NETNS_THETA=auto,1M,4M,16M (not in A/B mode): then also ResNet-50's
# gradient sync at each fusion size, hybrid fp16 in place as torus-train
# runs it (auto: as torus-train --bucket-kb auto, its '# theta auto:' line
# says what and why); repeat the list to alternate (at most 16), NETNS_STEPS steps (5).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
build_b="" runs=""
while [ $# -gt 0 ]; do
    case $1 in
    --compare) [ $# -ge 2 ] || usage; build_b=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --runs) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; runs=$2; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "netns.sh: unknown option '$1'" >&2; usage ;;
    *) break ;;
    esac
done
build=$(cd "${1:?usage: netns.sh [--compare BUILD_B] [--runs N] BUILD_DIR [RATE] [MTU]}" && pwd)
rate=${2:-1gbit}
mtu=${3:-1500}
[ -n "$runs" ] || runs=$([ -n "$build_b" ] && echo 3 || echo 1)
for b in "$build" ${build_b:+"$build_b"}; do
    [ -x "$b/trainer/bench/torus-bench" ] || { echo "netns.sh: no torus-bench under $b" >&2; exit 2; }
done
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
mib=${NETNS_MIB:-64}
[[ $mib =~ ^[1-9][0-9]*$ ]] || { echo "netns.sh: NETNS_MIB must be a whole number of MiB" >&2; exit 2; }
S=$((mib << 20))
bits=${rate%gbit}
[ "$bits" != "$rate" ] && B=$((bits * 125000000)) || B=$((${rate%mbit} * 125000))
awk -v s=$S -v b=$B 'BEGIN { printf "link limit 2(N-1)/N * S / B at the nominal rate: %.3f s on an fp32 wire, %.3f s on an fp16 wire (half the bytes)\n", 1.5 * s / b, 0.75 * s / b }'
# One run of every algorithm on WIRE with the tools of BUILD; its output
# as torus-bench prints it. OpenMPI 4.1.4's TCP start-up can crash inside
# MPI_Init on a loaded host (tcomm names it): that alone is retried, twice
# at most, each retry logged (as tests/cluster/testlib.sh's tl_srun_mpi).
bench() { # BUILD WIRE
    local try out rc
    for try in 1 2 3; do
        out=$(timeout 600 srun --mpi=pmix -N4 -n8 "$1/trainer/bench/torus-bench" -b "${mib}M" -e "${mib}M" \
            -n 3 -w 1 -a flat,ring,hier,hier-rs,torus2d,hybrid -d "$2" --probe 2>&1)
        rc=$?
        [ $rc != 0 ] && [ $try -lt 3 ] && grep -q 'OpenMPI crashed inside MPI_Init' <<<"$out" || break
        echo "RETRY: $2 try $try: OpenMPI crashed inside MPI_Init" >&2
    done
    printf '%s\n' "$out"
    return $rc
}
if [ -z "$build_b" ]; then
    for k in $(seq "$runs"); do
        for wire in fp32 fp16; do bench "$build" $wire; done
    done
    if [ -n "${NETNS_THETA:-}" ]; then
        echo "== ResNet-50 sync, hybrid fp16 in place, theta $NETNS_THETA"
        timeout 1800 srun --mpi=pmix -N4 -n8 "$build/trainer/bench/torus-bench" --resnet50 \
            --steps "${NETNS_STEPS:-5}" -a hybrid -d fp16 --grads shared --theta "$NETNS_THETA" 2>&1 |
            grep -E '^(# theta auto|mode|per|fused|torus-bench)'
    fi
    echo "== model at scale with the same links: see torus-bench --model --help"
    exit 0
fi
# A/B: rows "side wire algo time_us" in rows.txt; a run without its rows
# stops the script with the run's output.
: >"$base/rows.txt"
for k in $(seq "$runs"); do
    for side in A B; do
        b=$build
        [ $side = B ] && b=$build_b
        for wire in fp32 fp16; do
            out=$(bench "$b" $wire 2>&1)
            rows=$(awk -v s=$side '$1 ~ /^[0-9]+$/ && $5 ~ /^[0-9.]+$/ { print s, $3, $4, $5 }' <<<"$out")
            [ "$(wc -l <<<"$rows")" = 6 ] || { echo "netns.sh: round $k side $side $wire: expected 6 rows:" >&2; echo "$out" >&2; exit 1; }
            echo "round $k $side $wire: $(awk '{ printf "%s %.0f ms  ", $3, $4 / 1e3 }' <<<"$rows")"
            echo "$rows" >>"$base/rows.txt"
        done
    done
done
echo "== A: $build"
echo "== B: $build_b"
echo "median of $runs rounds (ms):"
printf '%-5s %-8s %10s %10s %6s\n' wire algo A B B/A
for wire in fp32 fp16; do
    for algo in flat ring hier hier-rs torus2d hybrid; do
        m() { awk -v s="$1" -v w=$wire -v a=$algo '$1 == s && $2 == w && $3 == a { print $4 }' "$base/rows.txt" |
            sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] / 1e3 }'; }
        ma=$(m A) mb=$(m B)
        awk -v w=$wire -v a=$algo -v x="$ma" -v y="$mb" 'BEGIN { printf "%-5s %-8s %10.1f %10.1f %6.3f\n", w, a, x, y, y / x }'
    done
done
