#!/bin/bash
# tests/bench/comm/link_ring.sh: what the emulated cluster's links carry
# when they are loaded the way netns.sh's column rings load them, with no
# MPI and no torus code, by hand (root; not in make check).
#
# The same 4-node cluster as netns.sh (tests/cluster/up --netns, tbf RATE
# on both ends of every node link, MTU), then iperf3 (a C tool, so the
# measuring program costs little CPU) in three patterns, SECONDS each:
#   one way    n1 -> n2 alone: one link direction, no traffic back but ACKs
#   ring x1    every node to the next at once (n1->n2->n3->n4->n1): each
#              link busy both ways, one stream per direction
#   ring xQ    the same with Q parallel streams (default 2, netns.sh's
#              ranks per node: torus2d's columns all cross at once)
# For each: the payload each receiving node got (MB/s, median over nodes),
# its share of RATE, and the 64 MiB fp32 link limit at that payload rate
# (2(N-1)/N * S / rate, netns.sh's formula): the least time any all-reduce
# can take on these links with that flow pattern. netns.sh's "/ link limit"
# divides by the nominal RATE instead.
# Usage: tests/bench/comm/link_ring.sh [RATE] [MTU] [SECONDS] [Q]
#        (defaults: 1gbit 1500 6 2). Needs iperf3 (apt-get install iperf3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
rate=${1:-1gbit}
mtu=${2:-1500}
secs=${3:-6}
q=${4:-2}
[ "$(id -u)" = 0 ] || { echo "link_ring.sh: needs root (network namespaces, tc)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "link_ring.sh: iperf3 not found: apt-get install iperf3" >&2; exit 2; }
[[ $secs =~ ^[1-9][0-9]*$ && $q =~ ^[1-9][0-9]*$ ]] || { echo "link_ring.sh: SECONDS and Q must be whole numbers > 0" >&2; exit 2; }
bits=${rate%gbit}
[ "$bits" != "$rate" ] && B=$((bits * 125000000)) || B=$((${rate%mbit} * 125000))
base=/tmp/torus-link-ring
out=$(mktemp -d /tmp/link-ring.XXXXXX)
cleanup() {
    "$top/tests/cluster/down" --base "$base" --quiet
    rm -rf "$out"
}
trap cleanup EXIT
"$top/tests/cluster/down" --base "$base" --quiet 2>/dev/null
"$top/tests/cluster/up" --base "$base" --nodes 4 --port-base 17800 --netns --rate "$rate" --mtu "$mtu" --quiet ||
    exit 1
. "$base/run/cluster.conf"
ns() { echo "/run/netns/${ns_prefix}n$1"; }
addr() { nsenter --net="$(ns "$1")" ip -o -4 addr show dev "tv${port_base}n$1" | awk '{print $4}' | cut -d/ -f1; }
echo "== $(date -u +%FT%TZ) 4 nodes, netns, tbf $rate ($B B/s) per node link, MTU $mtu, iperf3 ${secs}s per pattern"
# One pattern: PAIRS is "from:to ..."; STREAMS parallel streams per pair.
# Prints the receivers' MB/s, one per line.
pattern() { # STREAMS PAIRS...
    local streams=$1 pair from to k=0
    shift
    for pair in "$@"; do
        to=${pair#*:}
        # One client each (-1), and a deadline: a client that cannot connect
        # must not leave its server (and the wait below) waiting forever.
        nsenter --net="$(ns "$to")" timeout $((secs + 30)) iperf3 -s -p $((5800 + to)) -1 >/dev/null 2>&1 &
    done
    sleep 0.5
    for pair in "$@"; do
        from=${pair%:*} to=${pair#*:} k=$((k + 1))
        nsenter --net="$(ns "$from")" iperf3 -c "$(addr "$to")" -p $((5800 + to)) -t "$secs" -P "$streams" -J \
            >"$out/c$k.json" 2>&1 &
    done
    wait
    for k in $(seq $#); do
        python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
if "error" in d: sys.exit("link_ring.sh: iperf3: " + d["error"])
print("%.2f" % (d["end"]["sum_received"]["bits_per_second"] / 8e6))' "$out/c$k.json" || exit 1
    done
}
printf '%-10s %-28s %12s %8s %18s\n' pattern "receivers' MB/s" "median MB/s" "/ rate" "64 MiB limit (s)"
report() { # NAME RATES...
    local name=$1
    shift
    local med
    med=$(printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    awk -v n="$name" -v all="$*" -v m="$med" -v B="$B" 'BEGIN {
        printf "%-10s %-28s %12.2f %8.3f %18.3f\n", n, all, m, m * 1e6 / B, 1.5 * 67108864 / (m * 1e6) }'
}
r=$(pattern 1 1:2) || exit 1
report "one way" $r
r=$(pattern 1 1:2 2:3 3:4 4:1) || exit 1
report "ring x1" $r
r=$(pattern "$q" 1:2 2:3 3:4 4:1) || exit 1
report "ring x$q" $r
