#!/bin/bash
# jobs_bench.sh: jobs/bench.sbatch --quick on the local cluster (2 nodes x 2
# tasks, spank_torus.so): the report has its header, every section
# (layout, sweep, resnet50, model) with this allocation's grid, a summary
# line of busbw for every wire and algorithm at the largest size
# (out-of-place and in-place), the sweep's average busbw, the
# ResNet-50 rows, and "correct yes"; a report path it cannot write fails
# the job.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
so="$top_builddir/plugins/.libs/spank_torus.so"
[ -f "$so" ] || tl_fail "$so is not built"
jobs=$(cd "$top_srcdir/jobs" && pwd)
sbatch() { timeout 240 env sbatch "$@"; }
tl_cluster_up --nodes 2 --leaves 1 --plugin "$so"
cd "$TL_BASE"
export TORUS_BUILD=$top_builddir TORUS_BENCH_ALGOS=ring,torus2d TORUS_BENCH_WIRES=fp32,fp16 \
    TORUS_BENCH_MAXBYTES=16K TORUS_BENCH_GRADS=private
sbatch --wait -N2 --ntasks-per-node=2 -o bench.out "$jobs/bench.sbatch" --quick --report "$TL_BASE/r.txt" >/dev/null ||
    tl_fail "bench job failed: $(cat bench.out)"
r=$TL_BASE/r.txt
for k in cluster date slurm torus job nodes tasks_per_node cpu gpus; do
    grep -q "^$k " "$r" || tl_fail "report header lacks '$k': $(head -12 "$r")"
done
grep -q '^nodes 2 n\[1-2\]$' "$r" && grep -q '^tasks_per_node 2$' "$r" || tl_fail "wrong allocation in the report"
for s in layout sweep resnet50 model summary; do
    grep -q "^## $s$" "$r" || tl_fail "report lacks the $s section"
done
# The grid of the plugin's layout for 2 nodes x 2 tasks, in the layout, the
# sweep's own header (the grid the step got) and the model.
grep -q '^grid: 2 x 2 ' "$r" && grep -q '^# torus-bench sweep: 4 ranks, grid 2x2' "$r" &&
    grep -q '^# model: P=4, 2 ranks/node, grid 2x2' "$r" && grep -q '^grid 2x2$' "$r" ||
    tl_fail "the sections disagree on the 2x2 grid: $(grep -i grid "$r")"
for w in fp32 fp16; do
    for a in ring torus2d; do
        grep -Eq "^busbw_GBps_${w}_$a [0-9]+\.[0-9]+$" "$r" &&
            grep -Eq "^busbw_inplace_GBps_${w}_$a [0-9]+\.[0-9]+$" "$r" ||
            tl_fail "no summary busbw for $w $a: $(sed -n '/## summary/,$p' "$r")"
    done
done
grep -Eq '^avg_busbw_GBps [0-9]+\.[0-9]+$' "$r" && grep -q '^# Avg bus bandwidth *: ' "$r" ||
    tl_fail "no average busbw: $(sed -n '/## summary/,$p' "$r")"
grep -Eq '^resnet50_best_ms [0-9.]+ fused (ring|torus2d) fp16 4M$' "$r" &&
    grep -Eq '^resnet50_per_tensor_ms [0-9.]+$' "$r" && grep -q '^correct yes$' "$r" ||
    tl_fail "summary: $(sed -n '/## summary/,$p' "$r")"
echo "ok: report: $(grep -c . "$r") lines; $(grep '^busbw_GBps_fp16_torus2d' "$r"); $(grep '^resnet50_best_ms' "$r")"
rc=0
sbatch --wait -N1 --ntasks-per-node=1 -o bad.out "$jobs/bench.sbatch" --quick --report /nonexistent/dir/r.txt >/dev/null || rc=$?
[ $rc != 0 ] && grep -q '^bench: cannot write the report /nonexistent/dir/r.txt$' bad.out || tl_fail "unwritable report: rc $rc: $(cat bad.out)"
echo "PASS: bench.sbatch writes a complete, comparable report"
