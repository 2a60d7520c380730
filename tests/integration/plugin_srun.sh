#!/bin/bash
# plugin_srun.sh: spank_torus.so under srun on the local cluster (4 nodes,
# 2 leaves): --torus=auto, explicit specs, an invalid spec, one that does not
# fit, off, non-uniform tasks, and torus-layout run inside the step. Every
# task's TORUS_* must equal `torus-layout --json` for the same nodes.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
. "$top_srcdir/tests/integration/plugin_lib.sh"
pl_up --nodes 4 --leaves 2
t=$PL_TMP

srun --help 2>&1 | grep -q -- '--torus=auto|off|RxC' || tl_fail "--torus missing from srun --help"

# auto, and the shapes that fit 4 nodes x 2 tasks.
pl_dump "$t/auto" -N4 --ntasks-per-node=2 --torus=auto
pl_layout "$t/auto.json" --nodes 'n[1-4]' --tasks-per-node 2 --spec auto
pl_match "$t/auto" "$t/auto.json"
grep -q ' topology/tree 1$' "$t/auto" || tl_fail "auto did not use topology/tree"
for spec in 1x8 2x4 4x2 8x1; do
    pl_dump "$t/$spec" -N4 --ntasks-per-node=2 --torus="$spec"
    pl_layout "$t/$spec.json" --nodes 'n[1-4]' --tasks-per-node 2 --spec "$spec"
    pl_match "$t/$spec" "$t/$spec.json"
done
# --torus without a value is auto; 4 tasks per node on 2 nodes.
pl_dump "$t/bare" -N2 --ntasks-per-node=4 --torus
pl_layout "$t/bare.json" --nodes 'n[1-2]' --tasks-per-node 4
pl_match "$t/bare" "$t/bare.json"

# torus-layout inside the step reads the step's own allocation.
srun -N4 --ntasks-per-node=2 --torus sh -c \
    "[ \$SLURM_PROCID != 0 ] || '$PL_TOOL' --json >'$t/inside.json'" ||
    tl_fail "torus-layout inside a step failed"
pl_match "$t/auto" "$t/inside.json"

# Invalid spec: srun fails at submission (255), naming the option.
rc=0
srun -N1 -n1 --torus=4y2 true 2>"$t/bad.err" || rc=$?
[ $rc = 255 ] || tl_fail "--torus=4y2 exited $rc, expected 255"
grep -q 'torus: --torus=4y2: ' "$t/bad.err" || tl_fail "no torus: message: $(cat "$t/bad.err")"

# A grid that does not fit the step fails it before any task runs.
rc=0
srun -N4 --ntasks-per-node=2 --torus=3x3 sh -c 'echo ran' >"$t/nofit.out" 2>"$t/nofit.err" || rc=$?
[ $rc != 0 ] || tl_fail "--torus=3x3 on 8 tasks succeeded"
[ ! -s "$t/nofit.out" ] || tl_fail "--torus=3x3 ran tasks"
grep -q 'torus: --torus=3x3: the grid holds 9 tasks but the step has 8' "$t/nofit.err" ||
    tl_fail "3x3 message: $(cat "$t/nofit.err")"
rc=0
srun -N2 --ntasks-per-node=2 --torus=1x4 true 2>/dev/null && srun -N2 --ntasks-per-node=2 --torus=4x1 true 2>/dev/null ||
    tl_fail "fitting 1x4/4x1 failed"
srun -N2 --ntasks-per-node=4 --torus=2x3 true 2>"$t/split.err" && tl_fail "2x3 on 8 tasks succeeded"
srun -N2 --ntasks-per-node=4 --torus=1x8 true 2>/dev/null || tl_fail "1x8 on 2 nodes x 4 failed"
srun -N2 --ntasks-per-node=4 --torus=8x1 true 2>/dev/null || tl_fail "8x1 on 2 nodes x 4 failed"
srun -N2 --ntasks-per-node=4 --torus=4x2 true 2>/dev/null || tl_fail "4x2 on 2 nodes x 4 failed"
rc=0
srun -N2 --ntasks-per-node=3 --torus=3x2 true 2>"$t/split.err" || rc=$?
[ $rc != 0 ] && grep -q 'split' "$t/split.err" || tl_fail "3x2 over 3 tasks/node: $(cat "$t/split.err")"

# off: no TORUS_* at all, not even inherited ones.
TORUS_DIMS=9x9 TORUS_COORD=1,1 pl_dump "$t/off" -N4 --ntasks-per-node=2 --torus=off
python3 "$PL_CHECK" unset "$t/off"

# Non-uniform tasks per node: off, with a warning the user sees.
pl_dump "$t/uneven" -N2 -n3 --torus=auto
python3 "$PL_CHECK" unset "$t/uneven"
grep -q 'torus: warning: torus off: tasks per node are not uniform' "$t/uneven.err" ||
    tl_fail "no non-uniform warning: $(cat "$t/uneven.err")"
echo "PASS: spank_torus under srun"
