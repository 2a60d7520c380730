#!/bin/bash
# tests/bench/sweep/resnet.sh: the batch-size curve on a BatchNorm ResNet
# (docs/batch-science.md, "cifar-resnet --depth 8"): steps to a target test
# top-1 against the global batch on the full Fashion-MNIST at 14 px,
# momentum SGD against LARS, both with linear scaling, warmup and poly
# decay, planned and run with torus-sweep on this machine.
#
# usage: tests/bench/sweep/resnet.sh BINDIR WORKDIR
# BINDIR holds torus-sweep, torus-train and torus-pack (a build tree's
# programs copied there, so that rebuilding the tree does not change the
# programs under a running sweep). WORKDIR gets the packed data (data/)
# and the sweep (sweep/: plan, results.jsonl, work/). Runs WORKERS [2]
# tasks at once, each torus-train on one compute thread; the order puts
# the middle LR trial of every (batch, recipe) first, the batches spread
# out (128, 1024, 8192, 32, ...) so that an early stop leaves a coarse
# curve, then the lower trials, then the higher ones. Stop it at any time
# with SIGTERM to its process group (kill -TERM -- -PGID; each running
# torus-train checkpoints) and run it again:
# finished tasks are skipped, a stopped one resumes from its checkpoint.
# It plans only when WORKDIR/sweep/plan is missing (torus-sweep refuses
# to change a plan that has results).
# Environment: WORKERS [2], SIZE [14] pixels, TARGET [88], EPOCHS [24],
#   TRIALS [3] LR trials (a factor 2 apart), ONLY_TRIAL=K: run trial K only,
#   SGD_LR [0.4], LARS_LR [8] (base LRs at batch 256), BATCHES
#   [32:8192], ORDER [128 1024 8192 32 512 4096 256 2048 64],
#   DIVERGE_LOSS [23] (the plan's --diverge-loss; 0: off),
#   SWEEP [WORKDIR/sweep], FMNIST_SRC [/usr/share/datasets/fashion-mnist].
set -uo pipefail
me=$(basename "$0")
bin=$(cd "${1:?usage: $me BINDIR WORKDIR}" && pwd) || exit 2
W=${2:?usage: $me BINDIR WORKDIR}
sweep=$bin/torus-sweep
export TORUS_TRAIN=$bin/torus-train
src=${FMNIST_SRC:-/usr/share/datasets/fashion-mnist}
dir=${SWEEP:-$W/sweep}
mkdir -p "$W" || exit 1

if [ ! -f "$W/data/test-index.txt" ]; then
    "$bin/torus-pack" -o "$W/data" "$src/train-images-idx3-ubyte.gz" >/dev/null &&
        "$bin/torus-pack" -o "$W/data" -s test "$src/t10k-images-idx3-ubyte.gz" >/dev/null ||
        { echo "$me: cannot pack Fashion-MNIST from $src" >&2; exit 1; }
fi

if [ ! -f "$dir/plan" ]; then
    # Both recipes share the schedule (2 warmup epochs from the base LR,
    # then poly decay, power 2, to 0 at the end of the budget) and the
    # weight decay, so the curves differ by the optimizer only; LARS
    # leaves BN and bias parameters out of the trust ratio and the weight
    # decay (torus-train's default).
    sched="--warmup-epochs 2 --decay poly --weight-decay 5e-4"
    # A task whose training loss stays above 23, ten times chance (ln 10
    # = 2.3 for 10 classes), at 3 progress points in a row stops as
    # diverged: in the first sweep LARS at 8192 (LR 8) sat at a finite
    # loss of 128 to 362 and 16% top-1 for its whole budget (2,100 s).
    # Of that sweep's first 20 tasks, the 4 this would have stopped all
    # missed the target; no other task's progress loss went above 3.3.
    "$sweep" plan "$dir" --target "${TARGET:-88}" --batches "${BATCHES:-32:8192}" \
        --trials "${TRIALS:-3}" --lr-spread 2 --ref-batch 256 --epochs "${EPOCHS:-24}" \
        --eval-images 16384 --diverge-loss "${DIVERGE_LOSS:-23}" \
        --train "--data $W/data --model cifar-resnet --depth 8 --image-size ${SIZE:-14} --channels 1 --classes 10 --backend dnnl --threads 1 --print-every 1000" \
        --recipe "sgd=--lr ${SGD_LR:-0.4} $sched" \
        --recipe "lars=--lars --lars-eta 0.001 --lr ${LARS_LR:-8} $sched" || exit 1
fi

# Task ids are batch-major, then recipe, then trial.
ntasks=$(grep -c '^task ' "$dir/plan")
trials=$(awk '$1 == "trials" { print $2 }' "$dir/plan")
batches=$(awk '$1 == "task" { print $3 }' "$dir/plan" | uniq | tr '\n' ' ')
mid=$(((trials - 1) / 2))
passes=$mid
for ((k = 1; k < trials; k++)); do
    [ $((mid - k)) -ge 0 ] && passes+=" $((mid - k))"
    [ $((mid + k)) -lt "$trials" ] && passes+=" $((mid + k))"
done
order=
for k in ${ONLY_TRIAL:-$passes}; do
    for b in ${ORDER:-128 1024 8192 32 512 4096 256 2048 64}; do
        i=0
        for x in $batches; do
            [ "$x" = "$b" ] && for r in 0 1; do order+=" $(((i * 2 + r) * trials + k))"; done
            i=$((i + 1))
        done
    done
done

# A worker takes the next task of the order that is neither done nor
# running (torus-sweep locks a running task and skips a done one).
# Its log goes to a file of its own until the task is its (a worker that
# finds the task locked must not touch the runner's log).
worker() {
    local id log tmp=$dir/work-worker-$1.log
    for id in $order; do
        [ "$id" -lt "$ntasks" ] || continue
        log=$dir/work-task-$id.log
        if "$sweep" run "$dir" "$id" >"$tmp" 2>&1; then
            mv "$tmp" "$log"
            grep '^torus-sweep: task' "$log" | tail -1
        elif grep -q 'is running elsewhere' "$tmp"; then
            rm -f "$tmp"
        else
            mv "$tmp" "$log"
            echo "$me: task $id failed or stopped: $(tail -2 "$log")" >&2
            return 1
        fi
    done
}
pids=
for ((w = 0; w < ${WORKERS:-2}; w++)); do
    worker "$w" &
    pids+=" $!"
    sleep 5 # the first takes a task before the second looks
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
echo "$me: $(wc -l <"$dir/results.jsonl" 2>/dev/null || echo 0) of $ntasks tasks done"
exit $rc
