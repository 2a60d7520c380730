#!/bin/bash
# plugin_sbatch.sh: spank_torus.so through sbatch and salloc on the local cluster:
# #SBATCH --torus reaches every srun of the script (an RxC only the steps of
# its size; the others get auto with a warning, said by srun before the
# step and by the nodes), an explicit srun --torus
# overrides it, --torus=off clears it, and an invalid spec fails sbatch at
# submission. Task environments are compared with torus-layout --json.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
. "$top_srcdir/tests/integration/plugin_lib.sh"
pl_up --nodes 4 --leaves 2
t=$PL_TMP

rc=0
sbatch --torus=0x2 --wrap true 2>"$t/bad.err" || rc=$?
[ $rc = 255 ] || tl_fail "sbatch --torus=0x2 exited $rc, expected 255"
grep -q 'torus: --torus=0x2: ' "$t/bad.err" || tl_fail "no torus: message: $(cat "$t/bad.err")"

cat >"$t/job.sh" <<JOB
#!/bin/bash
#SBATCH -N4 --ntasks-per-node=2
#SBATCH --torus=4x2
P='$PL_PRINT'
srun sh -c "\$P" | sort -n >'$t/inherit'
srun --torus=auto sh -c "\$P" | sort -n >'$t/override'
srun --torus=off sh -c "\$P" | sort -n >'$t/off'
'$PL_TOOL' --json >'$t/script.json'
# A helper step of another size: the allocation's 4x2 does not apply.
srun -n1 sh -c "\$P" >'$t/helper' 2>'$t/helper.err'
# ...but the same RxC on srun's own command line still fails it.
srun -n1 --torus=4x2 true 2>'$t/explicit.err'; echo \$? >'$t/explicit.rc'
JOB
sbatch --wait -o "$t/job.out" "$t/job.sh" >/dev/null || tl_fail "batch job failed: $(cat "$t/job.out")"

pl_layout "$t/4x2.json" --nodes 'n[1-4]' --tasks-per-node 2 --spec 4x2
pl_match "$t/inherit" "$t/4x2.json"
pl_layout "$t/auto.json" --nodes 'n[1-4]' --tasks-per-node 2 --spec auto
pl_match "$t/override" "$t/auto.json"
cmp -s "$t/inherit" "$t/override" && tl_fail "srun --torus=auto did not override #SBATCH --torus=4x2"
python3 "$PL_CHECK" unset "$t/off"
# torus-layout in the batch script sees the job's allocation and #SBATCH spec.
pl_match "$t/inherit" "$t/script.json"

# #SBATCH --torus=4x2 reaches every srun: a 1-task helper gets auto with a
# warning instead of failing; srun --torus=4x2 -n1 still fails.
node=$(cut -d' ' -f2 "$t/helper")
pl_layout "$t/helper.json" --nodes "$node" --tasks-per-node 1 --spec auto
pl_match "$t/helper" "$t/helper.json"
grep -q "torus: warning: --torus=4x2 from the allocation does not match this step's 1 tasks; using auto" \
    "$t/helper.err" || tl_fail "helper step: $(cat "$t/helper.err")"
# srun says it once itself, before the step starts (before the node's
# line), as for a step of a job that lost or gained nodes since the
# allocation.
said=$(grep -n "^srun: torus: warning: --torus=4x2 from the allocation no longer fits this step: the grid holds 8 tasks, the step has 1 on 1 nodes; the step's grid is derived as with --torus=auto$" "$t/helper.err" | cut -d: -f1 || true)
at_node=$(grep -n "^torus: warning: --torus=4x2 from the allocation does not match" "$t/helper.err" | cut -d: -f1 || true)
[ "$(wc -l <<<"$said")" = 1 ] && [ -n "$said" ] && [ "$said" -lt "$at_node" ] ||
    tl_fail "srun did not say once, before the step, that the allocation's 4x2 no longer fits: $(cat "$t/helper.err")"
[ "$(cat "$t/explicit.rc")" != 0 ] && grep -q 'torus: --torus=4x2: the grid holds 8 tasks but the step has 1' \
    "$t/explicit.err" || tl_fail "srun --torus=4x2 -n1: $(cat "$t/explicit.err")"

# salloc: same validation, and the spec reaches sruns in the shell.
rc=0
salloc -N1 --torus=4y2 true 2>"$t/salloc.err" || rc=$?
[ $rc = 255 ] && grep -q 'torus: --torus=4y2: ' "$t/salloc.err" ||
    tl_fail "salloc --torus=4y2: rc=$rc $(cat "$t/salloc.err")"
salloc -N4 --ntasks-per-node=2 --torus=8x1 sh -c "srun sh -c '$PL_PRINT' | sort -n >'$t/salloc'" \
    2>/dev/null || tl_fail "salloc --torus=8x1 failed"
pl_layout "$t/8x1.json" --nodes 'n[1-4]' --tasks-per-node 2 --spec 8x1
pl_match "$t/salloc" "$t/8x1.json"
echo "PASS: spank_torus under sbatch and salloc"
