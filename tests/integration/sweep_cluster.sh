#!/bin/bash
# sweep_cluster.sh: torus-sweep and jobs/sweep.sbatch on the local Slurm
# cluster, on a small Fashion-MNIST subset (2048 training, 500 test
# images, 14 px, tiny-cnn): a two-batch (32, 64), one-recipe, one-trial
# sweep to a low target (test top-1 40%).
#   1. Preemption: task 1 run by hand gets SIGTERM after its first
#      checkpoint; torus-sweep exits 3, records nothing, and its
#      torus-train has written a checkpoint.
#   2. jobs/sweep.sbatch submits the two pending tasks as an array and
#      waits: task 1 resumes from its checkpoint (not from step 0), both
#      reach the target (task 1's metrics carry the first attempt's time
#      before the second's evaluations), results.jsonl holds exactly tasks
#      0 and 1, and sweep.png is a PNG of the size asked for (1000x650).
#   3. Run again: nothing is submitted or trained (the results and every
#      task's metrics stay byte for byte the same), and `torus-sweep run`
#      of a finished task skips it.
#   4. report --target: at the plan's target it reads the same steps
#      from the tasks' evaluations as the results hold; at a lower one no
#      more steps; above the plan's it is refused (exit 2).
#   5. A hostile line appended to the results is refused by the report
#      with the file and line.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
sweep=$top_builddir/trainer/sweep/torus-sweep
train=$top_builddir/trainer/torus-train
pack=$top_builddir/data/torus-pack
FM=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$FM/train-images-idx3-ubyte.gz" ] ||
    tl_skip "Fashion-MNIST not found in $FM (Debian package dataset-fashion-mnist)"
command -v gnuplot >/dev/null || tl_skip "gnuplot not found (tools/install-deps installs gnuplot-nox)"
tl_cluster_up --nodes 1
t=$TL_BASE/sweep
. "$top_srcdir/tests/bench/sweep/fmnist_subset.sh"
fmnist_subset "$FM" "$t/fm" 2048 500 "$pack" || tl_fail "cannot pack the Fashion-MNIST subset"

d=$t/run
"$sweep" plan "$d" --target 40 --batches 32,64 --trials 1 --epochs 4 \
    --eval-images 256 --lr 0.8 \
    --train "--data $t/fm --model tiny-cnn --image-size 14 --channels 1 --classes 10 --threads 1 --print-every 1000" \
    --recipe "sgd=--warmup-epochs 0 --decay none --weight-decay 0" >"$t/plan.log" ||
    tl_fail "plan: $(cat "$t/plan.log")"
[ "$("$sweep" pending "$d")" = "0-1" ] || tl_fail "pending: '$("$sweep" pending "$d")', expected 0-1"

# ---- 1. a task stopped by SIGTERM after its first checkpoint ----
# Task 1 checkpoints every 4 steps (256 images / batch 64); the test
# makes its torus-train sleep 3 s at step 5, the window for the signal.
TTRAIN_TEST_SLEEP=step:0:5:3 TORUS_TRAIN=$train "$sweep" run "$d" 1 >"$t/kill.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    ls "$d"/work/task-1.ckpt/*.h5 >/dev/null 2>&1 && break
    sleep 0.1
done
ls "$d"/work/task-1.ckpt/*.h5 >/dev/null 2>&1 || tl_fail "task 1 wrote no checkpoint: $(tail -3 "$t/kill.log")"
kill -TERM $pid
rc=0
wait $pid || rc=$?
[ $rc = 3 ] || tl_fail "task 1 stopped by SIGTERM: exit $rc, expected 3: $(tail -3 "$t/kill.log")"
grep -q 'run the task again to resume it' "$t/kill.log" || tl_fail "no resume hint: $(tail -2 "$t/kill.log")"
[ ! -s "$d/results.jsonl" ] || tl_fail "a stopped task left a result: $(cat "$d/results.jsonl")"
echo "PASS: SIGTERM stops a task after its checkpoint (exit 3, no result)"

# ---- 2. the array: task 0 afresh, task 1 resumed ----
TORUS_BUILD=$top_builddir TORUS_SWEEP_THROTTLE=1 timeout 300 \
    "$top_srcdir/jobs/sweep.sbatch" "$d" >"$t/sweep.log" 2>&1 ||
    tl_fail "jobs/sweep.sbatch: $(tail -15 "$t/sweep.log"; tail -5 "$d"/work/task-*.out)"
grep -q 'submitting tasks 0-1' "$t/sweep.log" || tl_fail "did not submit 0-1: $(head -3 "$t/sweep.log")"
# The tasks' logs are task-JOB_INDEX.out (%A_%a): a rerun keeps them.
task_out() { ls "$d"/work/task-[0-9]*_"$1".out 2>/dev/null | head -1; }
[ -n "$(task_out 0)" ] && [ -n "$(task_out 1)" ] || tl_fail "no task-JOB_INDEX.out logs: $(ls "$d/work")"
grep -q 'resumed from .*(global step [1-9]' "$(task_out 1)" ||
    tl_fail "task 1 did not resume from its checkpoint: $(grep -E 'resumed|afresh' "$(task_out 1)")"
grep -q 'starting afresh' "$(task_out 0)" || tl_fail "task 0 did not start afresh"
# Each attempt's evaluation times restart at 0: the sweep's line before
# the second attempt of task 1 carries the time of the first.
[ "$(grep -c '^{"sweep_time_before":' "$d/work/task-1.jsonl")" = 2 ] &&
    grep '^{"sweep_time_before":' "$d/work/task-1.jsonl" | tail -1 | grep -q ':[0-9]*[1-9][0-9]*\.' ||
    tl_fail "task 1's metrics lack the attempts' times: $(grep sweep_time "$d/work/task-1.jsonl")"
# The results and every task's metrics (torus-train's records and the
# sweep's marks) read back through json-c with the readers' rules.
jc="$top_builddir/tests/unit/json_check"
"$jc" results "$d/results.jsonl" || tl_fail "json-c does not read results.jsonl back"
for m in "$d"/work/task-*.jsonl; do "$jc" metrics "$m" || tl_fail "json-c does not read $m back"; done
awk '{ print }' "$d/results.jsonl" | sed 's/,"time".*//' | sort >"$t/res"
grep -c . "$t/res" | grep -qx 2 || tl_fail "results: $(cat "$d/results.jsonl")"
grep -q '^{"task":0,"batch":32,"recipe":"sgd","trial":0,"lr":0.80000000000000004,"reached":1,"steps":[1-9]' "$t/res" &&
    grep -q '^{"task":1,"batch":64,"recipe":"sgd","trial":0,"lr":0.80000000000000004,"reached":1,"steps":[1-9]' "$t/res" ||
    tl_fail "results do not hold both tasks reaching the target: $(cat "$d/results.jsonl")"
grep -Eq '^sgd +32 +1/1 ' "$t/sweep.log" || tl_fail "no table row for batch 32: $(cat "$t/sweep.log")"
png=$d/sweep.png
[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || tl_fail "$png is not a PNG"
[ "$(od -An -tu1 -j 12 -N 4 "$png" | tr -d ' ')" = 73726882 ] || tl_fail "$png has no IHDR first"
wh=$(od -An -tu1 -j 16 -N 8 "$png" | awk '{ print $1*16777216 + $2*65536 + $3*256 + $4 "x" $5*16777216 + $6*65536 + $7*256 + $8 }')
[ "$wh" = 1000x650 ] || tl_fail "$png is $wh, expected 1000x650"
echo "PASS: the array ran task 0 afresh and resumed task 1; results, table and a 1000x650 PNG"

# ---- 3. run again: nothing reruns ----
sums() { md5sum "$d/results.jsonl" "$d"/work/task-*.jsonl; }
before=$(sums)
TORUS_BUILD=$top_builddir timeout 120 "$top_srcdir/jobs/sweep.sbatch" "$d" >"$t/again.log" 2>&1 ||
    tl_fail "second run: $(tail -5 "$t/again.log")"
grep -q 'nothing to run' "$t/again.log" || tl_fail "second run submitted something: $(head -3 "$t/again.log")"
TORUS_TRAIN=/bin/false "$sweep" run "$d" 0 >"$t/skip.log" 2>&1 || tl_fail "run of a done task: $(cat "$t/skip.log")"
grep -q 'task 0 is done (.*results.jsonl:[12]): skipped' "$t/skip.log" || tl_fail "not skipped: $(cat "$t/skip.log")"
[ "$(sums)" = "$before" ] || tl_fail "the second run changed results or metrics"
echo "PASS: a second run trains nothing"

# ---- 4. report --target, read back from the evaluations ----
steps_of() { awk -v b="$1" '$1 == "sgd" && $2 == b { print $5 }' "$2"; }
"$sweep" report "$d" -o "$t/t40.png" >"$t/t40.log" 2>&1 || tl_fail "report: $(cat "$t/t40.log")"
"$sweep" report "$d" -o "$t/t40b.png" --target 40 >"$t/t40b.log" 2>&1 ||
    tl_fail "report --target 40: $(cat "$t/t40b.log")"
"$sweep" report "$d" -o "$t/t20.png" --target 20 >"$t/t20.log" 2>&1 ||
    tl_fail "report --target 20: $(cat "$t/t20.log")"
# The first evaluation at or above T% in a task's metrics, read here.
first_at() {
    awk -v T="$2" 'match($0, /"global_step":[0-9]+/) { g = substr($0, RSTART + 14, RLENGTH - 14) }
        /"top5":/ && !/target_top1/ && match($0, /"top1":[0-9.]+/) &&
        substr($0, RSTART + 7, RLENGTH - 7) + 0 >= T { print g; exit }' "$1"
}
for k in 0 1; do
    b=$((32 << k))
    s40=$(steps_of $b "$t/t40.log") s40b=$(steps_of $b "$t/t40b.log") s20=$(steps_of $b "$t/t20.log")
    e20=$(first_at "$d/work/task-$k.jsonl" 20)
    [ -n "$s40" ] && [ "$s40" = "$s40b" ] && [ "$s20" = "$e20" ] && [ "$s20" -le "$s40" ] ||
        tl_fail "batch $b: steps $s40 (results), $s40b (--target 40), $s20 (--target 20; the metrics say $e20)"
done
rc=0
"$sweep" report "$d" -o "$t/t41.png" --target 41 >"$t/t41.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "at most the plan's 40" "$t/t41.log" || tl_fail "--target 41: exit $rc, $(cat "$t/t41.log")"
echo "PASS: report --target reads the evaluations (same steps at the plan's target, no more at 20%)"

# ---- 5. a hostile results line ----
echo '{"task":1,"batch":64,"oops":1}' >>"$d/results.jsonl"
rc=0
"$sweep" report "$d" -o "$t/x.png" >"$t/bad.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q 'results.jsonl:3: unknown field' "$t/bad.log" ||
    tl_fail "hostile line: exit $rc, $(cat "$t/bad.log")"
echo "PASS: a hostile results line is refused with file:line"
