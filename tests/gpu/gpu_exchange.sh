#!/bin/bash
# tests/gpu/gpu_exchange.sh: torus-train's GPU gradient exchange
# (train/exchange.c calling libtcomm's tcomm_gpu through the cuda module's table),
# run by hand with mpirun on a GPU machine that has Open MPI (the GPU
# bundle has no MPI launcher, so run-gpu does not run it). BN-free tiny-cnn, --wire fp32, global
# batch 32, 8 steps at a high learning rate (as train_dist.sh does on the
# CPU); every multi-rank run must give the per-step losses of one process
# at batch 32 on the same backend within 1e-3 relative (GPU summation
# order, cuDNN algorithms per batch), and one process at batch 16 (a rank
# without the sum) must not (the check can fail).
#   staged: 2 ranks on one GPU (CUDA_VISIBLE_DEVICES=0 for both): NCCL
#     refuses two ranks on one device, so `auto` must pick the MPI path
#     staged through pinned host memory (the banner says so, and prints
#     the host fusion's bucket plan), and
#     TCOMM_GPU=nccl there must fail naming the two ranks;
#   nccl torus2d / nccl hier: with 2 or more GPUs, 2 ranks with one GPU each
#     (CUDA_VISIBLE_DEVICES = the local rank): the banner must say NCCL
#     and print the bucket plan that NCCL runs, in the algorithm asked for.
#     SKIP with the reason on fewer GPUs;
#   lost rank (staged, and nccl with 2 GPUs): rank 1 stalls for 60 s
#     before step 4 (TTRAIN_TEST_SLEEP), --comm-timeout 3: the job must end
#     within 40 s with "rank 1 is lost or stalled" (on the NCCL path after
#     polling ncclCommGetAsyncError and ncclCommAbort).
# It prints one "row|result" line per row, for run's table, last.
# Usage: gpu_exchange.sh TORUS_TRAIN WORKDIR. Exit 0 (no FAIL), 1.
set -u
train=${1:?usage: gpu_exchange.sh TORUS_TRAIN WORKDIR}
work=${2:?usage: gpu_exchange.sh TORUS_TRAIN WORKDIR}
mkdir -p "$work" && rm -f "$work"/*.jsonl # --metrics appends
# The cuda module next to that torus-train: a build tree's, or a bundle's.
if [ -z "${TORUS_BACKEND_PATH:-}" ]; then
    d=$(cd "$(dirname "$train")" && pwd)
    export TORUS_BACKEND_PATH=$d/backends/cuda/.libs:$d/../lib/torus
fi
rows=() fails=0
row() { rows+=("$1|$2"); case $2 in FAIL*) fails=$((fails + 1)) ;; esac; }
finish() { for r in "${rows[@]}"; do echo "$r"; done; exit $((fails > 0)); }

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
if ! command -v mpirun >/dev/null; then
    row "gpu exchange" "SKIP   mpirun not found (install openmpi-bin)"
    finish
fi
if [ "$ngpu" -lt 1 ]; then
    row "gpu exchange" "SKIP   no GPU (nvidia-smi -L lists none)"
    finish
fi
mpi2() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none \
        timeout 120 mpirun --oversubscribe --bind-to none \
        --mca btl self,vader,tcp -np 2 "$@"
}
run=("$train" --model tiny-cnn --synthetic --image-size 12 --dataset-size 256
     --epochs 1 --warmup-epochs 0 --lr 2 --print-every 1 --max-steps 8
     --wire fp32 --backend cuda)
losses() { sed 's/.*"loss":\([^,]*\),.*/\1/' "$1"; }
# close A.jsonl B.jsonl: 8 losses each, equal within 1e-3 relative
close() {
    [ "$(wc -l <"$2")" -eq 8 ] || return 1
    paste <(losses "$1") <(losses "$2") | awk '
        { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
          if (!(d <= 1e-3 * a)) bad = 1 } END { exit bad }'
}

CUDA_VISIBLE_DEVICES=0 "${run[@]}" --batch 32 --metrics "$work/one.jsonl" \
    >"$work/one.log" 2>&1 || { row "gpu exchange" "FAIL   1 process: $(tail -n 1 "$work/one.log")"; finish; }
CUDA_VISIBLE_DEVICES=0 "${run[@]}" --batch 16 --dataset-size 128 \
    --metrics "$work/half.jsonl" >"$work/half.log" 2>&1 ||
    { row "gpu exchange" "FAIL   1 process, batch 16: $(tail -n 1 "$work/half.log")"; finish; }
if close "$work/one.jsonl" "$work/half.jsonl"; then
    row "gpu exchange" "FAIL   control: batch 16 alone matched batch 32 (the check cannot fail)"
    finish
fi

# Two ranks on one GPU: the staged path, chosen by auto.
mpi2 -x CUDA_VISIBLE_DEVICES=0 "${run[@]}" --batch 32 --bucket-kb 1 \
    --metrics "$work/staged.jsonl" >"$work/staged.log" 2>&1
rc=$?
if [ $rc != 0 ]; then
    row "exchange staged 2 ranks/GPU" "FAIL   exit $rc: $(tail -n 2 "$work/staged.log" | tr '\n' ' ')"
elif ! grep -q "device memory, staged through the host" "$work/staged.log"; then
    row "exchange staged 2 ranks/GPU" "FAIL   not the staged path: $(grep buckets "$work/staged.log")"
elif ! grep -Eq "^torus-train: bucket plan: [0-9]+ buckets?: " "$work/staged.log"; then
    row "exchange staged 2 ranks/GPU" "FAIL   no bucket plan in the banner (log: $work/staged.log)"
elif ! close "$work/one.jsonl" "$work/staged.jsonl"; then
    row "exchange staged 2 ranks/GPU" "FAIL   losses differ from 1 process (log: $work/staged.log)"
else
    row "exchange staged 2 ranks/GPU" "PASS   losses of 1 process at batch 32 ($(grep -o 'in [0-9]* buckets' "$work/staged.log"))"
fi
mpi2 -x CUDA_VISIBLE_DEVICES=0 -x TCOMM_GPU=nccl "${run[@]}" --batch 32 \
    >"$work/forced.log" 2>&1
rc=$?
if [ $rc = 0 ] || ! grep -q "ranks 0 and 1 run on the same GPU" "$work/forced.log"; then
    row "TCOMM_GPU=nccl on one GPU" "FAIL   exit $rc, expected a refusal naming ranks 0 and 1 (log: $work/forced.log)"
else
    row "TCOMM_GPU=nccl on one GPU" "PASS   refused, naming ranks 0 and 1"
fi

# lost NAME LOG MPI-ARGS...: rank 1 stalls, the job must end naming it.
lost() {
    local name=$1 log=$2 t0=$SECONDS rc=0
    shift 2
    mpi2 -x TTRAIN_TEST_SLEEP=step:1:4:60 "$@" "${run[@]}" --batch 32 \
        --comm-timeout 3 >"$log" 2>&1 || rc=$?
    if [ $rc = 0 ] || [ $rc = 124 ] || [ $((SECONDS - t0)) -gt 40 ]; then
        row "$name" "FAIL   exit $rc after $((SECONDS - t0)) s (log: $log)"
    elif ! grep -q "rank 1 is lost or stalled" "$log"; then
        row "$name" "FAIL   rank 1 not named: $(grep -m1 -i 'lost\|error' "$log")"
    else
        row "$name" "PASS   rank 1 named after $((SECONDS - t0)) s"
    fi
}
lost "lost rank, staged" "$work/lost-staged.log" -x CUDA_VISIBLE_DEVICES=0

# NCCL: one GPU per rank.
if [ "$ngpu" -ge 2 ]; then
    # shellcheck disable=SC2016 # expanded by the rank's shell, not here
    lost "lost rank, nccl" "$work/lost-nccl.log" bash -c \
        'CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK exec "$@"' _
else
    row "lost rank, nccl" "SKIP   $ngpu GPU: NCCL needs one GPU per rank, 2 at least"
fi
for algo in torus2d hier; do
    name="exchange nccl $algo"
    if [ "$ngpu" -lt 2 ]; then
        row "$name" "SKIP   $ngpu GPU: NCCL needs one GPU per rank, 2 at least"
        continue
    fi
    # shellcheck disable=SC2016 # expanded by the rank's shell, not here
    mpi2 bash -c 'CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK exec "$@"' _ \
        "${run[@]}" --batch 32 --algo $algo --bucket-kb 1 \
        --metrics "$work/$algo.jsonl" >"$work/$algo.log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then
        row "$name" "FAIL   exit $rc: $(tail -n 2 "$work/$algo.log" | tr '\n' ' ')"
    elif ! grep -q "device memory, NCCL" "$work/$algo.log"; then
        row "$name" "FAIL   not the NCCL path: $(grep buckets "$work/$algo.log")"
    elif ! grep -Eq "^torus-train: bucket plan: [0-9]+ buckets?: .*$algo/fp32" "$work/$algo.log"; then
        row "$name" "FAIL   no $algo/fp32 bucket plan in the banner: $(grep 'bucket plan' "$work/$algo.log")"
    elif ! close "$work/one.jsonl" "$work/$algo.jsonl"; then
        row "$name" "FAIL   losses differ from 1 process (log: $work/$algo.log)"
    else
        row "$name" "PASS   losses of 1 process at batch 32"
    fi
done
finish
