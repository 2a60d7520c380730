#!/bin/bash
# sweep_diverge.sh: a sweep task that blows up ends "diverged", not
# "budget spent", when the plan sets --diverge-loss; real torus-sweep and
# torus-train, no cluster. tiny-cnn on 2048 Fashion-MNIST images at 14 px,
# batch 32, LR 2000 at batch 256 (250 at 32), no weight decay: the
# training loss jumps to millions in the first steps and stays in the
# hundreds, finite, the test top-1 at chance (the inf/nan rule never
# fires; the ResNet sweep of docs/batch-science.md met such a task).
#   1. Planned with --diverge-loss 100: the plan file keeps it, the task's
#      torus-train gets it, and `torus-sweep run` ends the task as
#      diverged (exit 0: an outcome, not a fault) at global step 12, the
#      third progress point (every 4 steps) above 100; results.jsonl holds
#      its line with "reached":0 and "diverged":1, the task's metrics the
#      "diverged" record.
#   2. The same plan without it: the task spends its whole budget (64
#      steps) and its line has no "diverged".
#   3. A hostile --diverge-loss is refused by plan with exit 2 naming the
#      option, and no plan is written.
set -euo pipefail
sweep=${top_builddir:?run from make check}/trainer/sweep/torus-sweep
train=$top_builddir/trainer/torus-train
pack=$top_builddir/data/torus-pack
FM=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$FM/train-images-idx3-ubyte.gz" ] || {
    echo "SKIP: Fashion-MNIST not found in $FM (Debian package dataset-fashion-mnist)"
    exit 77
}
T=$(mktemp -d "$top_builddir/sweep_diverge.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$top_srcdir/tests/bench/sweep/fmnist_subset.sh"
fmnist_subset "$FM" "$T/fm" 2048 500 "$pack" || fail "cannot pack the Fashion-MNIST subset"

# plan DIR [PLAN OPTIONS...]: the one-task sweep
plan() {
    local d=$1
    shift
    "$sweep" plan "$d" --target 95 --batches 32 --trials 1 --epochs 1 \
        --eval-images 256 --lr 2000 "$@" \
        --train "--data $T/fm --model tiny-cnn --image-size 14 --channels 1 --classes 10 --threads 1 --print-every 4" \
        --recipe "sgd=--warmup-epochs 0 --decay none --weight-decay 0" >"$T/plan.log" 2>&1
}

# ---- 1. with --diverge-loss ----
plan "$T/on" --diverge-loss 100 || fail "plan: $(cat "$T/plan.log")"
grep -qx 'diverge-loss 100' "$T/on/plan" || fail "the plan lacks 'diverge-loss 100': $(cat "$T/on/plan")"
rc=0
"$sweep" run "$T/on" 0 --torus-train "$train" >"$T/on.log" 2>&1 || rc=$?
[ $rc = 0 ] || fail "run of the diverging task: exit $rc: $(tail -3 "$T/on.log")"
grep -q -- '--diverge-loss 100' "$T/on.log" || fail "torus-train did not get --diverge-loss: $(head -1 "$T/on.log")"
grep -q 'training diverged: global step 12: the training loss .* is above --diverge-loss 100 at 3 progress points in a row' "$T/on.log" ||
    fail "no finite-loss divergence at step 12: $(grep -i 'diverg\|loss' "$T/on.log" | tail -4)"
grep -q '^torus-sweep: task 0: diverged at global step 12,' "$T/on.log" ||
    fail "the sweep does not say diverged: $(tail -1 "$T/on.log")"
line=$(cat "$T/on/results.jsonl")
[ "$(wc -l <"$T/on/results.jsonl")" = 1 ] &&
    [[ $line == '{"task":0,"batch":32,"recipe":"sgd","trial":0,"lr":2000,"reached":0,"steps":12,'*',"diverged":1}' ]] ||
    fail "results.jsonl: '$line'"
[ "$(tail -1 "$T/on/work/task-0.jsonl")" = '{"diverged":1,"global_step":12}' ] ||
    fail "the task's metrics do not end in the diverged record: $(tail -1 "$T/on/work/task-0.jsonl")"
echo "ok: a task past --diverge-loss ends diverged at step 12 (results line, record)"

# ---- 2. without it: the budget is spent ----
plan "$T/off" || fail "plan: $(cat "$T/plan.log")"
! grep -q "^diverge-loss" "$T/off/plan" || fail "a plan without --diverge-loss names it: $(cat "$T/off/plan")"
"$sweep" run "$T/off" 0 --torus-train "$train" >"$T/off.log" 2>&1 ||
    fail "run without --diverge-loss: $(tail -3 "$T/off.log")"
grep -q '^torus-sweep: task 0: budget spent at global step 64,' "$T/off.log" ||
    fail "without --diverge-loss: $(tail -1 "$T/off.log")"
line=$(cat "$T/off/results.jsonl")
[[ $line == '{"task":0,"batch":32,"recipe":"sgd","trial":0,"lr":2000,"reached":0,"steps":64,'*'}' &&
    $line != *diverged* ]] || fail "results.jsonl without --diverge-loss: '$line'"
awk -F'"loss":' 'NF > 1 { split($2, v, ","); if (v[1] + 0 > 100) n++ } END { exit n < 12 }' "$T/off/work/task-0.jsonl" ||
    fail "the task did not blow up (loss above 100 at 12 of its 16 points)"
echo "ok: without --diverge-loss the same task spends its 64 steps"

# ---- 3. hostile values ----
for v in -1 nan inf 1e999 1e16 abc ''; do
    rc=0
    plan "$T/bad" --diverge-loss "$v" || rc=$?
    [ $rc = 2 ] && grep -q -- '--diverge-loss' "$T/plan.log" ||
        fail "plan --diverge-loss '$v': exit $rc: $(cat "$T/plan.log")"
    [ ! -e "$T/bad/plan" ] || fail "plan --diverge-loss '$v' wrote a plan"
done
echo "ok: hostile --diverge-loss values refused (exit 2, the option named)"
