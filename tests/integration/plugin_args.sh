#!/bin/bash
# plugin_args.sh: spank_torus.so's plugstack.conf arguments on the local
# cluster (plugstack changes apply to the next step without a restart):
# unknown keys are rejected, default= applies without --torus, topology=none
# and topology=addr on a tree cluster fall back to the node list, and
# cost parameters reach `auto` exactly as torus-layout --cost models them.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
. "$top_srcdir/tests/integration/plugin_lib.sh"
pl_up --nodes 4 --leaves 2
t=$PL_TMP
stack="$TL_BASE/etc/plugstack.conf"
set_args() { echo "required $PL_SO $*" >"$stack"; }

set_args bogus=1
rc=0
srun -N1 -n1 true 2>"$t/bogus.err" || rc=$?
[ $rc != 0 ] || tl_fail "an unknown plugstack key was accepted"
grep -q "torus: plugstack.conf: unknown argument 'bogus'" "$t/bogus.err" ||
    tl_fail "bogus key message: $(cat "$t/bogus.err")"
set_args leaf_bw_gbs=fast
srun -N1 -n1 true 2>/dev/null && tl_fail "leaf_bw_gbs=fast was accepted"

# default= applies when srun has no --torus; --torus still overrides it.
set_args default=8x1
pl_dump "$t/default" -N4 --ntasks-per-node=2
pl_layout "$t/8x1.json" --nodes 'n[1-4]' --tasks-per-node 2 --spec 8x1
pl_match "$t/default" "$t/8x1.json"
pl_dump "$t/over" -N4 --ntasks-per-node=2 --torus=off
python3 "$PL_CHECK" unset "$t/over"

# Cost parameters: the same keys in plugstack.conf and torus-layout --cost.
cost="node_bw_gbs=1 cross_bw_gbs=100 cross_lat_us=0.5 bytes=1G"
set_args default=auto $cost
pl_dump "$t/cost" -N4 --ntasks-per-node=2
tool_cost=()
for kv in $cost; do tool_cost+=(--cost "$kv"); done
pl_layout "$t/cost.json" --nodes 'n[1-4]' --tasks-per-node 2 "${tool_cost[@]}"
pl_match "$t/cost" "$t/cost.json"
# ...and they matter: the default model picks another grid for this step.
pl_layout "$t/plain.json" --nodes 'n[1-4]' --tasks-per-node 2
[ "$(grep -o '"dims":\[[0-9]*,[0-9]*\]' "$t/cost.json")" != \
  "$(grep -o '"dims":\[[0-9]*,[0-9]*\]' "$t/plain.json")" ] ||
    tl_fail "cost parameters did not change the auto grid"

# topology=none: one group from the node list.
set_args default=auto topology=none
pl_dump "$t/none" -N4 --ntasks-per-node=2
"$PL_TOOL" --nodes 'n[1-4]' --tasks-per-node 2 --topology none --json >"$t/none.json"
pl_match "$t/none" "$t/none.json"

# topology=addr on a tree cluster: a node's SLURM_TOPOLOGY_ADDR names only
# its own switches, so the plugin says so and uses the node list.
set_args default=auto topology=addr
pl_dump "$t/addr" -N4 --ntasks-per-node=2
pl_match "$t/addr" "$t/none.json"
grep -q 'torus: warning: SLURM_TOPOLOGY_ADDR only describes' "$t/addr.err" ||
    tl_fail "no addr fallback warning: $(cat "$t/addr.err")"

# verbose: the layout and its reason reach the user once per step.
set_args default=auto verbose
pl_dump "$t/verbose" -N4 --ntasks-per-node=2
[ "$(grep -c '^torus: 2x4, source topology/tree: auto: ' "$t/verbose.err")" = 1 ] ||
    tl_fail "verbose: $(cat "$t/verbose.err")"

# A missing or oversized topology.conf fails the step (plugin_harden.sh).
echo "PASS: spank_torus plugstack arguments"
