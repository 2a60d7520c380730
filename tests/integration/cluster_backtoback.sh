#!/bin/bash
# cluster_backtoback.sh: two clusters started back to back on the same
# --port-base (as tests/bench/comm/netns.sh and twolevel.sh do, run after
# run): the first runs a job and stops, leaving connections in TIME-WAIT on
# its ports; the second comes up on those ports at once (slurmctld and
# slurmd bind with SO_REUSEADDR, tests/cluster/up lets TIME-WAIT pass) and
# runs a job on every node. A port that something listens on is still
# refused, naming it.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
up=$top_srcdir/tests/cluster/up
down=$top_srcdir/tests/cluster/down
tl_cluster_up --nodes 2 --leaves 1
port=$(sed -n 's/^port_base=//p' "$TL_BASE/run/cluster.conf")
[ -n "$port" ] || tl_fail "no port_base in $TL_BASE/run/cluster.conf"
[ "$(srun -N2 hostname | sort | tr '\n' ' ')" = "n1 n2 " ] || tl_fail "first cluster: srun -N2 hostname"
"$down" --base "$TL_BASE" --quiet
ports="sport = :$port or sport = :$((port + 1)) or sport = :$((port + 2))"
tw=$(ss -Htan state time-wait "( $ports )" | wc -l)
[ "$tw" -gt 0 ] || tl_fail "the first cluster left no connection in TIME-WAIT on ports $port-$((port + 2)): nothing to check"
"$up" --base "$TL_BASE" --nodes 2 --leaves 1 --port-base "$port" --quiet 8>&- ||
    tl_fail "second cluster on ports $port-$((port + 2)) with $tw connections in TIME-WAIT did not come up"
[ "$(srun -N2 hostname | sort | tr '\n' ' ')" = "n1 n2 " ] || tl_fail "second cluster: srun -N2 hostname"
echo "ok: second cluster up on port $port at once ($tw connections in TIME-WAIT)"
# A listening socket still blocks the range (here: the running cluster's own).
b2=$(mktemp -d "${TMPDIR:-/tmp}/torus-test.XXXXXX")
if msg=$("$up" --base "$b2" --nodes 1 --port-base "$port" 2>&1 8>&-); then
    "$down" --base "$b2" --quiet
    rm -rf "$b2"
    tl_fail "a cluster came up on port $port while another listens there"
fi
rm -rf "$b2"
grep -q "port $port is already in use" <<<"$msg" || tl_fail "busy port: $msg"
echo "PASS: back-to-back clusters on one port base"
