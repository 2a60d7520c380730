#!/bin/bash
# tests/bench/comm/twolevel.sh: the plugin's `auto` grid against a
# topology-blind grid on a two-level emulated network, by hand
# (root; not in make check: it measures, it does not assert).
#
# 4 nodes x 2 ranks, each node in its own network namespace. Leaves
# interleave Slurm's node order ({n1,n3} and {n2,n4}, given to the plugin by
# topology_file=), so a grid that follows the node list puts its rows
# across the leaves. Each node's egress is shaped by htb: LEAF_RATE to the
# node of its own leaf (and the controller), CROSS_RATE to the other leaf's
# nodes (u32 filters on the destination address). Two runs of torus-bench
# torus2d at SIZE fp32, each with the TORUS_* grid the plugin set:
#   aware: plugstack default=auto topology_file=<the leaves>
#   blind: plugstack default=auto topology=none (the node list, one group)
# and the cost model's prediction of each from torus-layout, with the
# link rates measured between two nodes of one leaf (one flow a node, as
# the aware grid's rows load it) and of two leaves (two flows a node, as
# every grid's columns load it) as its link classes (a blind grid whose
# rows cross the leaves and whose columns stay inside them is priced as
# the same grid on contiguous leaves with the leaf and cross rates swapped).
# Rates stay low so that the links, not the 2 shared cores, bound the time.
#
# Measured 2026-12-03 01:20-01:30 UTC (2 shared cores, defaults, 5 runs of
#   5 iterations): aware 2x4 (rows n1 n3 | n2 n4) median 1729.5 ms, blind
#   4x2 (node-list order, every column hop across) 3006.1 ms: blind/aware
#   1.74. Probed links 0.0228 GB/s in a leaf, 0.0038 across with two flows
#   a node (one flow 0.0053, two one-way flows 0.0048; nominal 0.025,
#   0.00625); model 1666.7 ms (-4%) and 3348.7 ms (+11%).
#
# Usage: tests/bench/comm/twolevel.sh BUILD_DIR [LEAF_RATE] [CROSS_RATE] [SIZE]
#        (defaults 200mbit 50mbit 8M; rates in mbit)
# TWOLEVEL_RUNS runs per side (5), TWOLEVEL_ITERS iterations per run (5).
# TWOLEVEL_THETA=auto,1M,4M,16M: after the aware runs, also ResNet-50's
# gradient sync on the aware grid at each fusion size, hybrid fp16 in place
# as torus-train runs it (auto: as torus-train --bucket-kb auto, with its
# '# theta auto:' line); TWOLEVEL_STEPS steps (3). Slow at the default rates (51 MB
# a step on the wire): raise them for it.
# A run that prints no torus2d row (srun or torus-bench failed) stops the
# script with its output and exit 1: the medians are always of every run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
build=$(cd "${1:?usage: twolevel.sh BUILD_DIR [LEAF_RATE] [CROSS_RATE] [SIZE]}" && pwd)
leaf=${2:-200mbit}
cross=${3:-50mbit}
size=${4:-8M}
iters=${TWOLEVEL_ITERS:-5}
runs=${TWOLEVEL_RUNS:-5}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "TWOLEVEL_RUNS must be a positive count" >&2; exit 2; }
base=/tmp/torus-twolevel
so="$build/plugins/.libs/spank_torus.so"
[[ $leaf =~ ^[0-9]+mbit$ && $cross =~ ^[0-9]+mbit$ ]] || { echo "rates must look like 200mbit" >&2; exit 2; }
trap '"$top/tests/cluster/down" --base "$base" --quiet' EXIT
"$top/tests/cluster/down" --base "$base" --quiet 2>/dev/null
"$top/tests/cluster/up" --base "$base" --nodes 4 --leaves 2 --port-base 17600 --netns --cpus 4 \
    --plugin "$so" --plugin-args "default=auto" --quiet || exit 1
. "$base/env"
. "$base/run/cluster.conf"

# ------------------------------------------------ two-level shaping (htb)
addr() { nsenter --net="/run/netns/${ns_prefix}n$1" ip -o -4 addr show dev "tv${port_base}n$1" |
    awk '{print $4}' | cut -d/ -f1; }
leaf_of() { echo $((($1 + 1) % 2)); } # n1,n3 -> leaf 0; n2,n4 -> leaf 1
for i in 1 2 3 4; do
    ns="/run/netns/${ns_prefix}n$i" dev="tv${port_base}n$i"
    nsenter --net="$ns" tc qdisc add dev "$dev" root handle 1: htb default 10 r2q 1000
    nsenter --net="$ns" tc class add dev "$dev" parent 1: classid 1:10 htb rate "$leaf" ceil "$leaf" burst 64k
    nsenter --net="$ns" tc class add dev "$dev" parent 1: classid 1:20 htb rate "$cross" ceil "$cross" burst 64k
    for j in 1 2 3 4; do
        [ "$(leaf_of "$i")" != "$(leaf_of "$j")" ] || continue
        nsenter --net="$ns" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
            match ip dst "$(addr "$j")/32" flowid 1:20
    done
done
printf 'SwitchName=leafA Nodes=n[1,3]\nSwitchName=leafB Nodes=n[2,4]\nSwitchName=spine Switches=leafA,leafB\n' \
    >"$base/etc/twolevel.conf"
printf 'SwitchName=leafA Nodes=n[1-2]\nSwitchName=leafB Nodes=n[3-4]\nSwitchName=spine Switches=leafA,leafB\n' \
    >"$base/etc/swapped.conf"

subnet=$(srun -N1 -n1 ip -o -4 addr show scope global | awk '{print $4}' | head -1)
mkdir -p "$base/ompi-shm"
export OMPI_MCA_btl_tcp_if_include=$subnet OMPI_MCA_btl_vader_backing_directory=$base/ompi-shm
gbs() { awk -v m="${1%mbit}" 'BEGIN {printf "%.6f", m / 8000}'; } # mbit -> GB/s
# The emulated links as the model's keys: the plugin's `auto` chooses with
# them (plugstack), torus-layout predicts with them (--cost).
keys() { echo "leaf_bw_gbs=$(gbs "$1") cross_bw_gbs=$(gbs "$2") leaf_lat_us=100 cross_lat_us=100 node_bw_gbs=2 node_lat_us=5 bytes=$size"; }
cost=$(keys "$leaf" "$cross")
tool() { "$build/topology/torus-layout" --nodes 'n[1-4]' --tasks-per-node 2 "$@"; }
costopts() { for k in $1; do printf -- '--cost %s ' "$k"; done; }
echo "== $(date -u +%FT%TZ) 4 nodes x 2 ranks; leaves {n1,n3} {n2,n4}; htb $leaf in a leaf, $cross across; torus2d $size fp32, $iters iterations"

# One side: the plugstack line, then RUNS runs of torus-bench, each of
# whose torus2d row (the mean of -n iterations) goes to FILE; a run without
# one ends the script, its output shown (no pipeline here: an exit in one
# would leave only its subshell).
run() { # PLUGSTACK_ARGS FILE
    sed -i "s|\(spank_torus.so\).*|\1 $1|" "$base/etc/plugstack.conf"
    srun -N4 --ntasks-per-node=2 sh -c '[ $SLURM_PROCID != 0 ] || echo "grid $TORUS_DIMS source $TORUS_SOURCE node order: $(hostname):$TORUS_COORD"' 2>/dev/null
    : >"$2"
    local k out row
    for k in $(seq "$runs"); do
        out=$(timeout 600 srun --mpi=pmix -N4 --ntasks-per-node=2 "$build/trainer/bench/torus-bench" \
            -b "$size" -e "$size" -n "$iters" -w 1 -a torus2d -d fp32 2>&1)
        row=$(awk '$1 ~ /^[0-9]+$/ && $4 == "torus2d" && $5 ~ /^[0-9.]+$/' <<<"$out")
        if [ -z "$row" ]; then
            echo "twolevel.sh: run $k of $runs ($1) printed no torus2d row:" >&2
            printf '%s\n' "$out" | tail -20 >&2
            exit 1
        fi
        echo "$row" | tee -a "$2"
    done
}
med() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "-- aware (topology_file)"
run "default=auto topology_file=$base/etc/twolevel.conf $cost" "$base/aware.txt"
if [ -n "${TWOLEVEL_THETA:-}" ]; then
    echo "-- ResNet-50 sync on the aware grid, hybrid fp16 in place, theta $TWOLEVEL_THETA"
    timeout 3600 srun --mpi=pmix -N4 --ntasks-per-node=2 "$build/trainer/bench/torus-bench" --resnet50 \
        --steps "${TWOLEVEL_STEPS:-3}" -a hybrid -d fp16 --grads shared --theta "$TWOLEVEL_THETA" 2>&1 |
        grep -E '^(# theta auto|mode|per|fused|torus-bench)'
fi
echo "-- blind (topology=none)"
run "default=auto topology=none $cost" "$base/blind.txt"
for side in aware blind; do
    [ "$(wc -l <"$base/$side.txt")" = "$runs" ] ||
        { echo "twolevel.sh: $side has $(wc -l <"$base/$side.txt") of $runs rows" >&2; exit 1; }
done
# Link probes, each loading a link as the grids load it:
#  - a ring all-reduce of SIZE over 2 nodes x 2 ranks: each node sends one
#    flow, 2(P-1)/P * SIZE = 1.5 * SIZE, as a row of the aware grid (4 ranks
#    over the 2 nodes of a leaf) loads its leaf link;
#  - torus2d of SIZE over the same 2 x 2 as a 2x2 grid, rows inside the
#    nodes: each node sends two flows, one per column, SIZE in all (each
#    rank's column ring moves SIZE/4 each way, twice): two ranks of every
#    node cross at once, each exchanging both ways with its pair on the
#    other node, as the aware grid's columns (2 rows) do;
#  - for reference, a ring over the 2 nodes with ranks placed cyclically:
#    two one-way flows a node, 3 * SIZE each way.
# The pairs take longer per byte (0.0038 GB/s on 2026-12-03, against 0.0053
# with one flow and 0.0048 with two one-way flows): TCP through htb's queue,
# both ways on each pair. The cross rate is the pairs' one; the blind
# grid's columns are 4-node rings of one-way flows, so the model errs high
# there. (One rank per node, a pair exchanging both ways, reaches only
# about half the rate here, MPI_Allreduce included: not the pattern of a
# torus ring.)
echo "-- link probes: ring and 2x2 torus2d all-reduces of $size over 2 nodes x 2 ranks"
probe() { # NODES ALGO BYTES_PER_LINK_PER_SIZE [torus-bench options]
    local out nodes=$1 algo=$2 per=$3
    shift 3
    out=$(timeout 300 srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 -w "$nodes" ${TL_DIST:+--distribution=$TL_DIST} "$build/trainer/bench/torus-bench" \
        -b "$size" -e "$size" -n "$iters" -w 1 -a "$algo" -d fp32 "$@" 2>&1)
    awk -v s="$size" -v a="$algo" -v per="$per" '$1 ~ /^[0-9]+$/ && $4 == a && $5 ~ /^[0-9.]+$/ {b = s; sub(/M$/, "", b); printf "%.6f\n", per * b * 1048576 / ($5 * 1e-6) / 1e9; ok = 1}
        END { exit !ok }' <<<"$out" || { echo "twolevel.sh: link probe $algo over $nodes printed no row:" >&2; printf '%s\n' "$out" | tail -20 >&2; return 1; }
}
bleaf=$(probe n1,n3 ring 1.5) || exit 1
bcross1=$(probe n1,n2 ring 1.5) || exit 1
bcross=$(probe n1,n2 torus2d 1 --grid 2x2) || exit 1
bcrossc=$(TL_DIST=cyclic probe n1,n2 ring 3) || exit 1
echo "cyclic ring (two one-way flows a node): $bcrossc GB/s"
echo "measured link rate: in a leaf $bleaf GB/s (nominal $(gbs "$leaf")), across $bcross GB/s with two flows a node (nominal $(gbs "$cross"); one flow: $bcross1 GB/s)"
echo "-- cost model (torus-layout, probed rates)"
mkeys() { echo "leaf_bw_gbs=$1 cross_bw_gbs=$2 leaf_lat_us=100 cross_lat_us=100 node_bw_gbs=2 node_lat_us=5 bytes=$size"; }
pa=$(tool --topology "$base/etc/twolevel.conf" --spec auto $(costopts "$(mkeys "$bleaf" "$bcross")") | awk '/2D torus/ {print $3}')
grid=$(tool --topology none --spec auto $(costopts "$cost") --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["dims"]; print("%dx%d" % tuple(d))')
# The blind grid in the real network: rows of 2 nodes (n1 n2 | n3 n4) cross
# the leaves and columns stay inside them: the same grid on contiguous
# leaves with the two rates swapped. Any other blind grid: every hop
# between nodes in node-list order crosses, so one leaf at the cross rate.
if [ "${grid#*x}" = 4 ]; then
    pb=$(tool --topology "$base/etc/swapped.conf" --spec "$grid" $(costopts "$(mkeys "$bcross" "$bleaf")") |
        awk '/2D torus/ {print $3}')
else
    pb=$(tool --topology none --spec "$grid" $(costopts "$(mkeys "$bcross" "$bcross")") | awk '/2D torus/ {print $3}')
fi
echo "predicted aware ${pa} ms, blind (${grid}) ${pb} ms"
# torus-bench line: size count wire algo time(us) ...
ma=$(awk '$4 == "torus2d" {print $5}' "$base/aware.txt" | med)
mb=$(awk '$4 == "torus2d" {print $5}' "$base/blind.txt" | med)
awk -v ma="$ma" -v mb="$mb" -v pa="$pa" -v pb="$pb" 'BEGIN {
    # torus-bench prints microseconds; torus-layout milliseconds.
    printf "measured median aware %.1f ms, blind %.1f ms (blind/aware %.2f)\n", ma / 1e3, mb / 1e3, mb / ma
    printf "model error aware %+.0f%%, blind %+.0f%%\n", (pa * 1e3 / ma - 1) * 100, (pb * 1e3 / mb - 1) * 100 }'
