#!/bin/bash
# tests/bench/sweep/run.sh: the batch-size science benchmark (see README.md
# here and docs/batch-science.md): steps to a target test top-1 on
# Fashion-MNIST against the global batch, momentum SGD against LARS with
# warmup, with torus-sweep. Sized for this 2-core machine: a subset of
# Fashion-MNIST at 14 px and tiny-cnn (the settings below).
#
# usage: tests/bench/sweep/run.sh BUILDDIR [WORKDIR]
# Runs the tasks one after another on this machine (torus-sweep run; the
# cluster form is jobs/sweep.sbatch), the middle LR trial of every task
# first, then the others, so an early stop still leaves a whole curve.
# Stop it at any time (Ctrl-C: the running torus-train checkpoints) and run
# it again: finished tasks are skipped and the stopped one resumes.
# Environment (the defaults are what docs/batch-science.md shows):
#   TRAIN_N [8192] training images, TEST_N [500] test images (the first
#   ones of Fashion-MNIST's splits), SIZE [14] pixels, TARGET [70],
#   BATCHES [32:2048], TRIALS [3], EPOCHS [12] (the budget per task),
#   SGD_LR [0.8], LARS_LR [1] (base LRs at batch 256), LARS_ETA [0.02],
#   EVAL_IMAGES [4096],
#   THREADS [2], ONLY_TRIAL=K: run only trial K (resumable as above)
set -euo pipefail
me=$(basename "$0")
B=$(cd "${1:?usage: $me BUILDDIR [WORKDIR]}" && pwd)
W=${2:-/tmp/torus-sweep-bench}
SRC=${FMNIST_SRC:-/usr/share/datasets/fashion-mnist}
sweep=$B/trainer/sweep/torus-sweep
export TORUS_TRAIN=$B/trainer/torus-train
[ -x "$sweep" ] && [ -x "$TORUS_TRAIN" ] || { echo "$me: build first (no torus-sweep or torus-train in $B)" >&2; exit 2; }
[ -f "$SRC/train-images-idx3-ubyte.gz" ] || { echo "$me: no Fashion-MNIST in $SRC (dataset-fashion-mnist)" >&2; exit 2; }
mkdir -p "$W"

. "$(dirname "$0")/fmnist_subset.sh"
data=$W/fmnist-${TRAIN_N:=8192}-${TEST_N:=500}
[ -f "$data/test-index.txt" ] || fmnist_subset "$SRC" "$data" "$TRAIN_N" "$TEST_N" "$B/data/torus-pack"

dir=$W/sweep
common="--weight-decay 0 --decay none"
"$sweep" plan "$dir" --target "${TARGET:-70}" --batches "${BATCHES:-32:2048}" \
    --trials "${TRIALS:-3}" --lr-spread 2 --epochs "${EPOCHS:-12}" \
    --eval-images "${EVAL_IMAGES:-4096}" \
    --train "--data $data --model tiny-cnn --image-size ${SIZE:-14} --channels 1 --classes 10 --threads ${THREADS:-2} --print-every 1000" \
    --recipe "sgd=--lr ${SGD_LR:-0.8} --warmup-epochs 0 $common" \
    --recipe "lars-warmup=--lars --lars-eta ${LARS_ETA:-0.02} --lr ${LARS_LR:-1} --warmup-epochs 2 $common"

# The middle trial of every (batch, recipe) first, then the lower, then
# the higher ones (task ids: batch-major, then recipe, then trial).
trials=${TRIALS:-3} mid=$(((${TRIALS:-3} - 1) / 2))
order="$mid"
for ((k = 1; k < trials; k++)); do
    [ $((mid - k)) -ge 0 ] && order+=" $((mid - k))"
    [ $((mid + k)) -lt "$trials" ] && order+=" $((mid + k))"
done
[ -z "${ONLY_TRIAL:-}" ] || order=$ONLY_TRIAL
ntasks=$(grep -c '^task ' "$dir/plan")
t0=$(date +%s)
for k in $order; do
    for ((id = 0; id < ntasks; id++)); do
        [ $((id % trials)) = "$k" ] || continue
        "$sweep" run "$dir" $id >"$dir/work-task-$id.log" 2>&1 ||
            { echo "$me: task $id failed or stopped: $(tail -2 "$dir/work-task-$id.log")" >&2; exit 1; }
        grep '^torus-sweep: task' "$dir/work-task-$id.log" | tail -1
    done
done
echo "$me: tasks took $(($(date +%s) - t0)) s"
"$sweep" report "$dir" -o "$dir/sweep.png" --title "tiny-cnn on Fashion-MNIST ($TRAIN_N images, ${SIZE:-14} px): steps to test top-1 ${TARGET:-70}%"
