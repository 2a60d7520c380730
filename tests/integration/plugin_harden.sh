#!/bin/bash
# plugin_harden.sh: spank_torus.so against a hostile client and odd steps,
# on one local cluster (4 nodes, 2 leaves, 8 CPUs each):
#  - a forged SLURM_STEP_NODELIST / SLURM_STEP_TASKS_PER_NODE (written into
#    the step's environment by plugin_forge.so, as a modified srun could
#    send it) is refused from slurmstepd's own counts, before expansion;
#  - a forged SLURM_TOPOLOGY_ADDR_PATTERN=node does not make a tree cluster
#    "flat" (the switch map comes from TopologyPlugin only);
#  - a topology.conf over topology_max=, or missing, fails the step with a
#    message instead of silently giving nodes different layouts;
#  - heterogeneous steps: refused with --torus, torus off without;
#  - --overcommit, --distribution=cyclic and plane=2: every task's TORUS_*
#    follows the node it really runs on (SLURM_LOCALID there), not its
#    SLURM_PROCID under a block distribution.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
. "$top_srcdir/tests/integration/plugin_lib.sh"
FORGE="$top_builddir/tests/integration/.libs/plugin_forge.so"
[ -f "$FORGE" ] || tl_fail "$FORGE is not built (make check builds it)"
pl_up --nodes 4 --leaves 2
t=$PL_TMP
stack="$TL_BASE/etc/plugstack.conf"
topo="$TL_BASE/etc/topology.conf"
# set_stack "FORGE ARGS" "TORUS ARGS": the forger first, so that its
# init_post_opt rewrites the environment before ours reads it.
set_stack() {
    { [ -z "$1" ] || echo "optional $FORGE $1"; echo "required $PL_SO $2"; } >"$stack"
}
# Run a step that must succeed; its tasks' output in $t/$1, stderr in .err.
run_ok() {
    local out=$1
    shift
    srun "$@" 2>"$t/$out.err" | sort -n >"$t/$out" || tl_fail "srun $* failed: $(cat "$t/$out.err")"
}
expect_err() { grep -q -- "$2" "$t/$1.err" || tl_fail "$1: no '$2' in: $(cat "$t/$1.err")"; }

# 1. A node list of 131072 names for a 2-node step: refused from the count.
set_stack "SLURM_STEP_NODELIST=a[1-65536],b[1-65536]" "default=auto"
run_ok forged_list -N2 --ntasks-per-node=2 sh -c "$PL_PRINT"
python3 "$PL_CHECK" unset "$t/forged_list"
expect_err forged_list 'torus: warning: torus off: SLURM_STEP_NODELIST holds 131072 nodes but the step has 2'
# Tasks per node that do not match what slurmstepd runs.
set_stack "SLURM_STEP_TASKS_PER_NODE=3,1" "default=auto"
run_ok forged_tpn -N2 --ntasks-per-node=2 sh -c "$PL_PRINT"
python3 "$PL_CHECK" unset "$t/forged_tpn"
expect_err forged_tpn "gives node 0 3 tasks but slurmstepd runs 2 there"
set_stack "SLURM_STEP_TASKS_PER_NODE=1000000(x2)" "default=auto"
run_ok forged_sum -N2 --ntasks-per-node=2 sh -c "$PL_PRINT"
expect_err forged_sum "adds up to 2000000 tasks but the step has 4"

# 2. SLURM_TOPOLOGY_ADDR_PATTERN=node from the environment proves nothing.
set_stack "SLURM_TOPOLOGY_ADDR_PATTERN=node" "default=auto topology=addr"
run_ok forged_flat -N4 --ntasks-per-node=2 sh -c "$PL_PRINT"
"$PL_TOOL" --nodes 'n[1-4]' --tasks-per-node 2 --topology none --json >"$t/none.json"
pl_match "$t/forged_flat" "$t/none.json"
grep -q SLURM_TOPOLOGY_ADDR "$t/forged_flat" && tl_fail "a forged pattern made the network flat"

# 3. topology.conf over the limit, then within a raised limit, then missing.
cp "$topo" "$t/topology.conf.orig"
head -c 102400 /dev/zero | tr '\0' '#' | fold -w 99 >>"$topo"
set_stack "" "default=auto topology_max=64K"
rc=0
srun -N4 --ntasks-per-node=2 sh -c 'echo ran' >"$t/big.out" 2>"$t/big.err" || rc=$?
[ $rc != 0 ] && [ ! -s "$t/big.out" ] || tl_fail "a topology.conf over topology_max ran the step"
expect_err big "torus: error: $topo: [0-9]* bytes, larger than 65536 (the topology.conf limit)"
set_stack "" "default=auto topology_max=1M"
run_ok big_ok -N4 --ntasks-per-node=2 sh -c "$PL_PRINT"
grep -q ' topology/tree 1$' "$t/big_ok" || tl_fail "topology_max=1M did not read the tree"
mv "$topo" "$topo.away"
rc=0
srun -N4 --ntasks-per-node=2 sh -c 'echo ran' >"$t/missing.out" 2>"$t/missing.err" || rc=$?
mv "$topo.away" "$topo"
cp "$t/topology.conf.orig" "$topo"
[ $rc != 0 ] && [ ! -s "$t/missing.out" ] || tl_fail "a missing topology.conf ran the step"
expect_err missing "torus: error: $topo: No such file or directory.*; TopologyPlugin is topology/tree"
# --torus=off still runs such a step.
set_stack "" "default=auto"
srun -N1 -n1 --torus=off true || tl_fail "--torus=off failed"

# 5. Heterogeneous steps.
rc=0
salloc -N1 -n2 : -N1 -n2 srun --torus -n2 : -n2 sh -c 'echo ran' >"$t/het.out" 2>"$t/het.err" || rc=$?
[ $rc != 0 ] && ! grep -q ran "$t/het.out" || tl_fail "a het step with --torus ran: rc=$rc"
expect_err het "torus: error: --torus: heterogeneous step (4 tasks in all, 2 in this component)"
salloc -N1 -n2 : -N1 -n2 srun -n2 : -n2 sh -c "$PL_PRINT" >"$t/het_default" 2>"$t/het_default.err" ||
    tl_fail "a het step without --torus failed: $(cat "$t/het_default.err")"
python3 "$PL_CHECK" unset "$t/het_default"
expect_err het_default "torus: warning: torus off: heterogeneous step"

# 6. Task placement other than block: compare by (node, SLURM_LOCALID).
P='echo $SLURM_PROCID $SLURM_LOCALID $(hostname) $TORUS_DIMS $TORUS_COORD $TORUS_GROUP $TORUS_NGROUPS $TORUS_NODE_INDEX $TORUS_SOURCE $TORUS_VERSION'
placed() { # NAME TPN SRUN_ARGS...: run, then match torus-layout
    local name=$1 tpn=$2
    shift 2
    run_ok "$name" "$@" --torus sh -c "$P"
    local nodes
    nodes=$(scontrol show hostlistsorted "$(awk '{print $3}' "$t/$name" | sort -u | paste -sd, -)")
    pl_layout "$t/$name.json" --nodes "$nodes" --tasks-per-node "$tpn"
    python3 - "$t/$name.json" "$t/$name" "$name" <<'PY' || tl_fail "$name: TORUS_* do not follow the tasks' nodes"
import json, sys
doc = json.load(open(sys.argv[1]))
rows, cols = doc["dims"]
tpn = len(doc["tasks"]) // sum(len(g) for g in doc["groups"])
order = [n for g in doc["groups"] for n in g]
want = {}
for t in doc["tasks"]:  # block order: local id = procid % tpn
    want[(t["node"], t["procid"] % tpn)] = ("%dx%d" % (rows, cols), "%d,%d" % (t["row"], t["col"]),
        str(t["group"]), str(len(doc["groups"])), str(order.index(t["node"])), doc["source"], "1")
seen, block = set(), True
for line in open(sys.argv[2]):
    f = line.split()
    procid, local, node = int(f[0]), int(f[1]), f[2]
    got = tuple(f[3:])
    if got != want.get((node, local)):
        sys.exit("FAIL: task %d (%s local %d): env %s, layout %s" % (procid, node, local, got, want.get((node, local))))
    seen.add((node, local))
    if procid % tpn != local:
        block = False
if seen != set(want):
    sys.exit("FAIL: %d tasks, layout has %d" % (len(seen), len(want)))
if sys.argv[3] != "overcommit" and block:
    sys.exit("FAIL: %s placed tasks in block order; the case tests nothing" % sys.argv[3])
print("ok: %s: %d tasks follow their nodes in %dx%d" % (sys.argv[3], len(seen), rows, cols))
PY
}
placed overcommit 16 -N2 -n32 --overcommit
placed cyclic 2 -N4 --ntasks-per-node=2 --distribution=cyclic
placed plane 4 -N2 --ntasks-per-node=4 --distribution=plane=2
echo "PASS: spank_torus against forged environments, topology.conf limits, het steps and placements"
