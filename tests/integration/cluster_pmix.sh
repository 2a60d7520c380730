#!/bin/bash
# cluster_pmix.sh: srun --mpi=pmix -N4 -n8 on a real 4-node local cluster, and
# check what PMIx told every rank against the allocation Slurm made.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
probe="$top_builddir/tests/integration/pmix_probe"
[ -x "$probe" ] || tl_fail "pmix_probe not built ($probe)"

tl_cluster_up --nodes 4 --leaves 2
out=$(timeout 120 srun --mpi=pmix -N4 -n8 "$probe") || tl_fail "srun --mpi=pmix -N4 -n8 failed"
echo "$out"

[ "$(wc -l <<<"$out")" = 8 ] || tl_fail "expected 8 rank lines"
declare -A host_of nodeid_of lranks peer_host
for r in 0 1 2 3 4 5 6 7; do
    line=$(grep -E "^rank=$r " <<<"$out") || tl_fail "rank $r reported nothing"
    eval "$(tr ' ' '\n' <<<"$line" | grep -E '^[a-z_]+=[A-Za-z0-9_.-]+$' | sed 's/^/p_/')"
    [ "$p_size" = 8 ] || tl_fail "rank $r: job size $p_size, expected 8"
    [ "$p_local_size" = 2 ] || tl_fail "rank $r: local size $p_local_size, expected 2"
    [[ $p_host =~ ^n[1-4]$ ]] || tl_fail "rank $r: hostname '$p_host' is not one of n1..n4"
    host_of[$r]=$p_host
    # PMIx node ids must agree with hostnames: one id per host, 4 distinct ids.
    if [ -n "${nodeid_of[$p_host]:-}" ] && [ "${nodeid_of[$p_host]}" != "$p_nodeid" ]; then
        tl_fail "host $p_host has two node ids (${nodeid_of[$p_host]}, $p_nodeid)"
    fi
    nodeid_of[$p_host]=$p_nodeid
    lranks[$p_host]="${lranks[$p_host]:-} $p_local_rank"
    peer_host[$r]=$p_peer_host
done
[ "${#nodeid_of[@]}" = 4 ] || tl_fail "expected 4 hosts, saw ${#nodeid_of[@]}"
[ "$(printf '%s\n' "${nodeid_of[@]}" | sort -u | wc -l)" = 4 ] || tl_fail "node ids are not distinct"
for h in "${!lranks[@]}"; do
    [ "$(tr ' ' '\n' <<<"${lranks[$h]}" | grep . | sort | tr '\n' ' ')" = "0 1 " ] ||
        tl_fail "host $h: local ranks are '${lranks[$h]}', expected 0 and 1"
done
# Put/Commit/Fence/Get: every rank read the right hostname of rank+1.
for r in 0 1 2 3 4 5 6 7; do
    want=${host_of[$(((r + 1) % 8))]}
    [ "${peer_host[$r]}" = "$want" ] || tl_fail "rank $r read peer host '${peer_host[$r]}', expected '$want'"
done
# Slurm's block distribution puts ranks 2i, 2i+1 on node n(i+1).
for r in 0 1 2 3 4 5 6 7; do
    [ "${host_of[$r]}" = "n$((r / 2 + 1))" ] || tl_fail "rank $r ran on ${host_of[$r]}, expected n$((r / 2 + 1))"
done
echo "PASS: 8 ranks on 4 nodes, PMIx rank/size/local rank/node id and a fence exchange all consistent"
