#!/bin/bash
# tests/bench/comm/tbf_goodput.sh: how much TCP payload the emulated
# cluster's links carry, by hand (root; not in make check). Two network
# namespaces joined as tests/cluster/up joins its nodes (a veth per node on
# a bridge, tbf RATE burst 512kb latency 100ms on both ends of each veth),
# one TCP stream of SIZE MiB from one to the other per MTU, 3 times each.
# Prints the median payload rate and its share of RATE beside the share
# that framing leaves (MSS / bytes on the wire per full frame, with the
# 14-byte Ethernet header tbf counts): netns.sh's link limit divides by
# RATE, so the frames' headers are part of any "above the limit".
# Usage: tests/bench/comm/tbf_goodput.sh [RATE] [SIZE_MIB] [MTU...]
#        (defaults: 1gbit 256 1500 9000)
set -u
rate=${1:-1gbit}
mib=${2:-256}
shift $(($# < 2 ? $# : 2))
mtus=${*:-1500 9000}
[ "$(id -u)" = 0 ] || { echo "tbf_goodput.sh: needs root (ip netns, tc)" >&2; exit 2; }
[[ $mib =~ ^[1-9][0-9]*$ ]] || { echo "tbf_goodput.sh: SIZE_MIB must be a whole number" >&2; exit 2; }
bits=${rate%gbit}
[ "$bits" != "$rate" ] && B=$((bits * 125000000)) || B=$((${rate%mbit} * 125000))
pre=tgp$$
down() {
    ip netns del ${pre}a 2>/dev/null; ip netns del ${pre}b 2>/dev/null
    ip link del ${pre}br 2>/dev/null
}
trap down EXIT
# Receiver: accept one connection, read everything, print the seconds from
# the first byte to the last. Sender: connect, send SIZE MiB.
recv_py='
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5599)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0; t0 = None; b = bytearray(1 << 20)
while True:
    k = c.recv_into(b)
    if not k: break
    if t0 is None: t0 = time.perf_counter()
    n += k
print(n, time.perf_counter() - t0, flush=True)'
send_py='
import socket, sys
c = socket.create_connection((sys.argv[1], 5599)); b = bytes(1 << 20)
for _ in range(int(sys.argv[2])): c.sendall(b)
c.close()'
echo "== $(date -u +%FT%TZ) tbf $rate ($B B/s), one TCP stream of $mib MiB, 3 runs per MTU"
printf '%-6s %12s %10s %14s\n' MTU "MB/s (med)" "/ rate" "framing allows"
for mtu in $mtus; do
    down
    ip link add ${pre}br type bridge && ip link set ${pre}br mtu "$mtu" up
    for s in a b; do
        ip netns add $pre$s
        ip link add ${pre}h$s mtu "$mtu" type veth peer name ${pre}n$s mtu "$mtu"
        ip link set ${pre}n$s netns $pre$s
        ip link set ${pre}h$s master ${pre}br up
        ip -n $pre$s link set lo up
        ip -n $pre$s addr add 10.231.0.$([ $s = a ] && echo 1 || echo 2)/24 dev ${pre}n$s
        ip -n $pre$s link set ${pre}n$s up
        ip netns exec $pre$s tc qdisc add dev ${pre}n$s root tbf rate "$rate" burst 512kb latency 100ms
        tc qdisc add dev ${pre}h$s root tbf rate "$rate" burst 512kb latency 100ms
    done
    rates=()
    for run in 1 2 3; do
        exec 3< <(ip netns exec ${pre}b /usr/bin/python3 -c "$recv_py")
        read -r _ <&3
        ip netns exec ${pre}a /usr/bin/python3 -c "$send_py" 10.231.0.2 "$mib" ||
            { echo "tbf_goodput.sh: the sender failed" >&2; exit 1; }
        read -r n secs <&3
        exec 3<&-
        rates+=("$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.2f", n / s / 1e6 }')")
    done
    med=$(printf '%s\n' "${rates[@]}" | sort -g | sed -n 2p)
    # Full frame: MTU + 14 (Ethernet); payload: MTU - 20 (IP) - 32 (TCP with timestamps).
    printf '%-6s %12s %10s %14s   (runs: %s)\n' "$mtu" "$med" \
        "$(awk -v r="$med" -v B="$B" 'BEGIN { printf "%.3f", r * 1e6 / B }')" \
        "$(awk -v m="$mtu" 'BEGIN { printf "%.3f", (m - 52) / (m + 14) }')" "${rates[*]}"
done
