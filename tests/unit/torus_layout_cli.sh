#!/bin/bash
# torus_layout_cli.sh: the torus-layout tool end to end, without a cluster:
# exit codes, --help, the JSON contract (checked by torus_check.py), the
# topology.conf next to $SLURM_CONF, and reading a step's own environment.
set -euo pipefail
tool="$top_builddir/topology/torus-layout"
check="$top_srcdir/tests/integration/torus_check.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$tool" --help >"$tmp/help" # not into grep -q: it may close the pipe early
grep -q '^SYNOPSIS' "$tmp/help" || fail "--help has no SYNOPSIS"
"$tool" --version | grep -q '^torus-layout ' || fail "--version"

cat >"$tmp/topology.conf" <<'CONF'
# two leaves under one spine, listed in reverse
SwitchName=leaf2 Nodes=n[3-4]
SwitchName=leaf1 Nodes=n[1-2]
SwitchName=spine Switches=leaf[1-2]
CONF

"$tool" --nodes 'n[1-4]' --tasks-per-node 2 --topology "$tmp/topology.conf" --json >"$tmp/a.json"
python3 "$check" json "$tmp/a.json"
# read back through json-c too (the project's reader rules and the schema)
"$top_builddir/tests/unit/json_check" layout "$tmp/a.json" || fail "json-c does not read the layout back"
grep -q '"source":"topology/tree"' "$tmp/a.json" || fail "source is not topology/tree"
grep -q '"groups":\[\["n1","n2"\],\["n3","n4"\]\]' "$tmp/a.json" || fail "groups: $(cat "$tmp/a.json")"

# Inside a "step": no --nodes, topology.conf found next to $SLURM_CONF.
SLURM_CONF="$tmp/slurm.conf" SLURM_STEP_NODELIST='n[1-4]' SLURM_STEP_TASKS_PER_NODE='2(x4)' \
    "$tool" --json >"$tmp/b.json"
cmp "$tmp/a.json" "$tmp/b.json" || fail "step environment gives a different layout"

# #SBATCH --torus reaches the tool like it reaches srun.
SLURM_CONF="$tmp/slurm.conf" SLURM_STEP_NODELIST='n[1-4]' SLURM_STEP_TASKS_PER_NODE='2(x4)' \
    SLURM_SPANK__SLURM_SPANK_OPTION_torus_torus=8x1 "$tool" --json >"$tmp/c.json"
grep -q '"dims":\[8,1\]' "$tmp/c.json" || fail "inherited spec ignored"

# Every explicit shape that fits is accepted and valid; others exit 1.
for spec in 1x8 2x4 4x2 8x1; do
    "$tool" --nodes 'n[1-4]' --tasks-per-node 2 --topology "$tmp/topology.conf" \
        --spec "$spec" --json >"$tmp/s.json"
    python3 "$check" json "$tmp/s.json" >/dev/null
    grep -q "\"dims\":\[${spec%x*},${spec#*x}\]" "$tmp/s.json" || fail "$spec not honoured"
done
rc=0; "$tool" --nodes 'n[1-4]' --tasks-per-node 2 --topology none --spec 3x3 2>"$tmp/err" || rc=$?
[ $rc = 1 ] && grep -q '3x3 holds 9 tasks' "$tmp/err" || fail "3x3: rc=$rc $(cat "$tmp/err")"
rc=0; "$tool" --nodes 'n[1-4]' --spec 4y2 2>"$tmp/err" || rc=$?
[ $rc = 1 ] && grep -q -- '--spec' "$tmp/err" || fail "4y2: rc=$rc"
rc=0; "$tool" --bogus 2>/dev/null || rc=$?
[ $rc = 2 ] || fail "unknown option gave $rc"
rc=0; "$tool" --nodes 'n[1-4]' --topology "$tmp/missing.conf" 2>"$tmp/err" || rc=$?
[ $rc = 1 ] && grep -q 'missing.conf' "$tmp/err" || fail "missing --topology: rc=$rc"

# Non-uniform tasks: torus off, not an error.
"$tool" --nodes 'n[1-3]' --tasks-per-node '2(x2),1' --topology none --json \
    >"$tmp/d.json" 2>"$tmp/err"
grep -q '"dims":\[0,0\]' "$tmp/d.json" && grep -q 'not uniform' "$tmp/err" ||
    fail "non-uniform: $(cat "$tmp/d.json" "$tmp/err")"

# SLURM_TOPOLOGY_ADDR lines as the switch map.
printf 'spine.leafB.n1\nspine.leafA.n2\nspine.leafB.n3\nspine.leafA.n4\n' |
    "$tool" --nodes 'n[1-4]' --tasks-per-node 1 --topology-addr - --json >"$tmp/e.json"
python3 "$check" json "$tmp/e.json" >/dev/null
grep -q '"source":"SLURM_TOPOLOGY_ADDR","groups":\[\["n1","n3"\],\["n2","n4"\]\]' \
    "$tmp/e.json" || fail "addr source: $(cat "$tmp/e.json")"

# The report names all three algorithms with a number each.
"$tool" --nodes 'n[001-128]' --tasks-per-node 8 --topology none --bytes 64M >"$tmp/r.txt"
for algo in 'flat ring' hierarchical '2D torus'; do
    grep -Eq "^  $algo +[0-9]+\.[0-9]+ ms" "$tmp/r.txt" || fail "no prediction for $algo"
done
# topology/block lines beside tree lines: --topology-type picks, none is an
# error naming the file; a bad type is a usage error.
cat "$tmp/topology.conf" >"$tmp/both.conf"
printf 'BlockName=b1 Nodes=n[1,3]\nBlockName=b2 Nodes=n[2,4]\nBlockSizes=2\n' >>"$tmp/both.conf"
rc=0
"$tool" --nodes 'n[1-4]' --topology "$tmp/both.conf" 2>"$tmp/err" >/dev/null || rc=$?
[ $rc = 1 ] && grep -q "both.conf: holds both SwitchName=" "$tmp/err" || fail "both forms: rc $rc $(cat "$tmp/err")"
"$tool" --nodes 'n[1-4]' --tasks-per-node 2 --topology "$tmp/both.conf" --topology-type block --json >"$tmp/f.json"
python3 "$check" json "$tmp/f.json" >/dev/null
grep -q '"source":"topology/block","groups":\[\["n1","n3"\],\["n2","n4"\]\]' "$tmp/f.json" ||
    fail "block: $(cat "$tmp/f.json")"
"$tool" --nodes 'n[1-4]' --tasks-per-node 2 --topology "$tmp/both.conf" --topology-type tree --json |
    cmp - "$tmp/a.json" || fail "--topology-type tree differs from the tree-only file"
rc=0
"$tool" --nodes n1 --topology-type mesh 2>/dev/null || rc=$?
[ $rc = 2 ] || fail "--topology-type mesh exited $rc, not 2"

# topology.yaml next to $SLURM_CONF wins over topology.conf, as in Slurm.
printf -- '- topology: y\n  block:\n    blocks:\n      - block: q\n        nodes: n[1-4]\n' >"$tmp/topology.yaml"
SLURM_CONF="$tmp/slurm.conf" "$tool" --nodes 'n[1-4]' --tasks-per-node 2 --json >"$tmp/g.json"
grep -q '"source":"topology/block","groups":\[\["n1","n2","n3","n4"\]\]' "$tmp/g.json" ||
    fail "topology.yaml not preferred: $(cat "$tmp/g.json")"
echo "PASS: torus-layout CLI"
