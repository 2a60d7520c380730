#!/bin/bash
# cluster_netns.sh: the network-namespace mode of the local cluster. Each node
# gets its own namespace and address, traffic between nodes is real TCP over
# tbf-shaped veth links, PMIx works across them, and `down` leaves no
# namespace, bridge or daemon behind.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
probe="$top_builddir/tests/integration/pmix_probe"
command -v ip >/dev/null && command -v tc >/dev/null || tl_skip "iproute2 (ip, tc) is not installed"

tl_cluster_up --nodes 4 --leaves 2 --netns --rate 200mbit
. "$TL_BASE/run/cluster.conf"

addrs=$(timeout 60 srun -N4 -n4 sh -c 'echo $(hostname) $(ip -4 -o addr show scope global | awk "{print \$4}")') ||
    tl_fail "srun across namespaces failed"
echo "$addrs"
[ "$(awk '{print $2}' <<<"$addrs" | sort -u | wc -l)" = 4 ] || tl_fail "nodes do not have 4 distinct addresses"
for i in 1 2 3 4; do
    ns="${ns_prefix}n$i"
    [ -e "/run/netns/$ns" ] || tl_fail "namespace $ns missing"
    q=$(nsenter --net="/run/netns/$ns" tc qdisc show) || tl_fail "tc in $ns failed"
    grep -q 'tbf.*rate 200Mbit' <<<"$q" || tl_fail "node n$i link not shaped to 200Mbit: $q"
done

out=$(timeout 120 srun --mpi=pmix -N4 -n4 "$probe") || tl_fail "PMIx across namespaces failed"
[ "$(grep -c '^rank=' <<<"$out")" = 4 ] || tl_fail "expected 4 PMIx ranks: $out"

# Real TCP through the shaped links: 20 MB from n1 to n3 take at least
# 20e6*8/200e6 = 0.8 s at 200mbit (less tbf's burst, counted from the first
# byte); an unshaped veth moves them in a few milliseconds.
n3_addr=$(awk '$1=="n3"{print $2}' <<<"$addrs" | cut -d/ -f1)
port=$((port_base + 40))
recv='import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1]))); s.listen(1); s.settimeout(30)
c,_=s.accept(); n=0; t0=None
while True:
    b=c.recv(1<<16)
    if t0 is None: t0=time.time()
    if not b: break
    n+=len(b)
print(n, time.time()-t0)'
send='import socket,sys,time
for i in range(50):
    try: s=socket.create_connection((sys.argv[1], int(sys.argv[2]))); break
    except OSError: time.sleep(0.1)
s.sendall(bytes(20000000)); s.close()'
srun -N1 -n1 -w n3 python3 -c "$recv" "$port" >"$TL_BASE/recv.out" &
listener=$!
srun -N1 -n1 -w n1 python3 -c "$send" "$n3_addr" "$port" || tl_fail "TCP transfer n1 -> n3 failed"
wait $listener || tl_fail "TCP receiver on n3 failed"
read -r nbytes secs <"$TL_BASE/recv.out"
[ "$nbytes" = 20000000 ] || tl_fail "n3 received $nbytes bytes, expected 20000000"
awk -v t="$secs" 'BEGIN { exit !(t >= 0.6) }' ||
    tl_fail "20 MB crossed a 200mbit link in $secs s: shaping is not in effect"
echo "20 MB n1 -> n3 in $secs s over 200mbit links (0.8 s at line rate)"

# Teardown must remove every namespace, the bridge and all daemons.
pids=$(cat "$TL_BASE"/run/*.pid)
"$top_srcdir/tests/cluster/down" --base "$TL_BASE" --quiet
for i in 1 2 3 4; do
    [ ! -e "/run/netns/${ns_prefix}n$i" ] || tl_fail "namespace ${ns_prefix}n$i left behind"
done
! ip link show "$bridge" >/dev/null 2>&1 || tl_fail "bridge $bridge left behind"
for p in $pids; do
    ! kill -0 "$p" 2>/dev/null || tl_fail "daemon pid $p still running after down"
done
echo "PASS: netns cluster with shaped links, PMIx across namespaces, clean teardown"
