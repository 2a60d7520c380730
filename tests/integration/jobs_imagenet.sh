#!/bin/bash
# jobs_imagenet.sh: the ImageNet batch jobs on the local cluster (2 nodes,
# spank_torus.so), on a tiny ImageNet-shaped tree of 48 real JPEGs: WNID
# class folders under train/, a flat val/ with LOC_val_solution.csv.
#   1. pack-imagenet packs train as a 2-task array and val/ (as split
#      test) from its labels file: 32 + 16 images, none rejected.
#   2. stage, a job of its own, copies both splits to each node's directory
#      and verifies them; a byte flipped inside an image of one node's copy
#      (same size, same CRC-of-CRCs: only the per-sample CRC32C sees it)
#      fails the rerun, naming the node and the shard, while the other
#      node keeps its copy, unchanged since its stamp, without reading it.
#   3. train-imagenet.sbatch trains 12 steps uninterrupted: the reference.
#   4. The same job, staging to node-local directories, is preempted with
#      scancel --signal=USR1 --batch: it checkpoints, requeues itself, and
#      its restart resumes from that step and ends with the reference's
#      state hash and final checkpoint (weights, momentum, BN statistics),
#      bit for bit, the reference's loss at every step
#      (none lost or repeated) and its evaluations; its metrics are drawn
#      into curves.png.
#   5. eval.sbatch on that run prints the top-1/top-5 (and loss) of the
#      run's own final evaluation.
#   6. Another --batch for that run folder is refused before srun.
#   7. -N1-2 with no task count trains on both nodes, 2 ranks each.
# The tiny model (TORUS_MODEL_ARGS), the jobs' asks cut to a node of
# this cluster (no GPU: --gpus-per-node=0 for train-imagenet.sbatch,
# --gpus-per-task=0 for eval.sbatch; 1 CPU and 512 MB per task) and rank 0 sleeping 0.4 s a step in the
# preempted run (TTRAIN_TEST_SLEEP, a window for the signal) are the only
# test settings; everything else is the jobs' own.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
so="$top_builddir/plugins/.libs/spank_torus.so"
[ -f "$so" ] || tl_fail "$so is not built"
mapfile -t jpegs < <(find /usr/share/doc/opencv-doc -name '*.jpg' -size +8k 2>/dev/null | sort | head -n 48)
[ ${#jpegs[@]} = 48 ] || tl_skip "needs 48 real JPEGs from the Debian package opencv-doc (tools/install-deps)"
command -v gnuplot >/dev/null || tl_skip "gnuplot is not installed (gnuplot-nox, tools/install-deps)"
jobs=$(cd "$top_srcdir/jobs" && pwd)
# A dead node must fail the test, not hang it.
sbatch() { timeout 240 env sbatch "$@"; }

# Every job's --help (from anywhere, as sbatch's spool copy reads its own
# header) and the refusal of an unknown option.
for f in stage train-imagenet.sbatch eval.sbatch bench.sbatch; do
    # grep reads it all: -q would end the pipe early (SIGPIPE under pipefail)
    "$jobs/$f" --help | grep "^Usage: " >/dev/null || tl_fail "$f --help has no Usage line"
    rc=0
    "$jobs/$f" --bogus >/dev/null 2>&1 || rc=$?
    [ $rc = 2 ] || tl_fail "$f --bogus exited $rc, expected 2"
done

tl_cluster_up --nodes 2 --leaves 1 --plugin "$so"
t=$TL_BASE/jt
src=$t/src out=$t/packed
mkdir -p "$src/val" "$t/runs"
wnids=(n01440764 n01443537 n01484850 n01491361)
echo "ImageId,PredictionString" >"$src/LOC_val_solution.csv"
for i in "${!jpegs[@]}"; do
    w=${wnids[$((i % 4))]}
    if [ "$i" -lt 32 ]; then
        mkdir -p "$src/train/$w"
        cp "${jpegs[$i]}" "$src/train/$w/${w}_$i.JPEG"
    else
        id=ILSVRC2012_val_$(printf %08d "$i")
        cp "${jpegs[$i]}" "$src/val/$id.JPEG"
        echo "$id,$w 1 1 40 40" >>"$src/LOC_val_solution.csv"
    fi
done
cd "$t/runs"

# 1. Pack: train as an array, val/ through its labels file.
export TORUS_PACK=$top_builddir/data/torus-pack
"$jobs/pack-imagenet" "$src/train" "$out" --shards 4 --tasks 2 --threads 1 -- --resize-shorter=48 >/dev/null
"$jobs/pack-imagenet" "$src/val" "$out" --split test --shards 2 --tasks 1 --threads 1 -- \
    --val-labels="$src/LOC_val_solution.csv" --resize-shorter=48 >/dev/null
for _ in $(seq 600); do [ -z "$(squeue -h)" ] && break; sleep 0.2; done
[ -z "$(squeue -h)" ] || tl_fail "pack jobs still queued after 120 s: $(squeue -h)"
for s in "train 2 32" "test 1 16"; do
    set -- $s
    n=$(ls "$out/$1"-pack-*_*.out 2>/dev/null | wc -l)
    [ "$n" = "$2" ] || tl_fail "$1: $n array task outputs, expected $2: $(ls "$out")"
    seen=$(cat "$out/$1"-pack-*.out | grep -o '[0-9]* images seen, [0-9]* packed, [0-9]* rejected' |
        awk '{s += $1; p += $4; r += $6} END {print s, p, r}')
    [ "$seen" = "$3 $3 0" ] && [ -f "$out/$1-index.txt" ] ||
        tl_fail "$1: seen/packed/rejected '$seen' (expected '$3 $3 0'), index: $(ls "$out")"
done
echo "ok: pack-imagenet packed train (2-task array) and val/ as test: 32 + 16 real JPEGs"

# 2. Stage as a job of its own, then catch a damaged copy on one node.
export TORUS_BUILD=$top_builddir
sbatch --wait -N2 -o stage.out "$jobs/stage" "$out" "$t/local/%n" >/dev/null ||
    tl_fail "stage job failed: $(cat stage.out)"
for n in n1 n2; do
    grep -q "^stage: $n: train: verified 32 images, 0 CRC32C mismatches" stage.out &&
        grep -q "^stage: $n: test: verified 16 images, 0 CRC32C mismatches" stage.out &&
        cmp -s "$out/train-index.txt" "$t/local/$n/train-index.txt" &&
        [ "$(ls "$t/local/$n"/train-*.h5 | wc -l)" = 4 ] || tl_fail "stage on $n: $(cat stage.out; ls "$t/local/$n")"
done
shard=$t/local/n2/train-00001-of-00004.h5
soi=$(LC_ALL=C grep -obaP '\xff\xd8\xff' "$shard" | head -1 | cut -d: -f1)
[ -n "$soi" ] || tl_fail "no JPEG in $shard"
printf '\x55' | dd of="$shard" bs=1 seek=$((soi + 600)) conv=notrunc status=none
rc=0
sbatch --wait -N2 -o stage2.out "$jobs/stage" "$out" "$t/local/%n" >/dev/null || rc=$?
[ $rc != 0 ] && grep -q "^stage: n2: train: torus-data-bench: verify: $shard: sample [0-9]*: CRC32C mismatch" stage2.out &&
    grep -q "^stage: n1: train: the copy in $t/local/n1 matches its stamp" stage2.out &&
    grep -q "^stage: n2: train: torus-data-bench: verified 32 images, 1 CRC32C mismatches" stage2.out ||
    tl_fail "a flipped byte in n2's copy was not caught (rc $rc): $(cat stage2.out)"
echo "ok: stage copied and verified on n1 and n2; a flipped byte in n2's copy fails it: $(grep -m1 'CRC32C mismatch$' stage2.out)"

# 3. The reference run; 4. the same, staged, preempted and requeued.
export TORUS_MODEL_ARGS="--model cifar-resnet --depth 8 --image-size 16 --channels 3 --classes 4"
# The reference and the requeued run compare bit for bit: one fixed theta
# (auto follows the links probed at start-up, which vary with load).
export TORUS_TRAIN_ARGS="--bucket-kb 4096"
export TORUS_THREADS=1 TORUS_PRINT_EVERY=1
# A CPU cluster of 2-CPU nodes: no GPU, one CPU and 512 MB per task.
cpu_job=(--gpus-per-task=0 --cpus-per-task=1 --mem-per-cpu=512M)
cpu_train=(--gpus-per-node=0 --cpus-per-task=1 --mem-per-cpu=512M)
train=("$jobs/train-imagenet.sbatch" --data "$out" --batch 8 --epochs 3 --warmup 1)
# A start that OpenMPI itself crashed (see tl_srun_mpi) is submitted again,
# from scratch: its run (and stage) folders are removed first.
for try in 1 2 3; do
    rc=0
    sbatch --wait -N2 --ntasks-per-node=1 "${cpu_train[@]}" -o ref.out "${train[@]}" --run "$t/runs/ref" >/dev/null || rc=$?
    [ $rc != 0 ] && [ $try -lt 3 ] && tl_mpi_crashed ref.out || break
    echo "RETRY: reference run try $try: OpenMPI crashed inside MPI_Init" >&2
    rm -rf "$t/runs/ref"
done
[ $rc = 0 ] || tl_fail "reference run failed: $(tail -20 ref.out)"
href=$(sed -n 's/^state hash \([0-9a-f]*\) at global step 12$/\1/p' ref.out)
[ -n "$href" ] || tl_fail "reference run printed no final state hash: $(tail -5 ref.out)"
for try in 1 2 3; do
    j=$(TTRAIN_TEST_SLEEP=step:0:0:0.4 sbatch --parsable -N2 --ntasks-per-node=1 "${cpu_train[@]}" -o pre.out "${train[@]}" \
        --run "$t/runs/pre" --stage "$t/local-pre/%n")
    for _ in $(seq 600); do
        grep -q '^epoch 0 step 2/' pre.out 2>/dev/null && break
        tl_mpi_crashed pre.out && break
        sleep 0.2
    done
    [ $try -lt 3 ] && tl_mpi_crashed pre.out || break
    echo "RETRY: preempted run try $try: OpenMPI crashed inside MPI_Init" >&2
    scancel "$j" 2>/dev/null || true
    tl_wait_gone "$j" 60
    rm -rf pre.out "$t/runs/pre" "$t/local-pre"
done
grep -q '^epoch 0 step 2/' pre.out || tl_fail "preempted run did not reach step 2: $(cat pre.out)"
scancel --signal=USR1 --batch "$j"
tl_requeued_wait "$j"
scontrol show job "$j" | grep -q 'Restarts=1' || tl_fail "job $j was not requeued: $(cat pre.out)"
tl_requeued_release "$j"
tl_wait_gone "$j" 180
scontrol show job "$j" | grep -q 'JobState=COMPLETED .*' || tl_fail "job $j: $(scontrol show job "$j" | grep JobState)"
stop=$(sed -n 's/^torus-train: stopped by signal 10 at global step \([0-9]*\) after writing a checkpoint$/\1/p' pre.out | head -1)
[ -n "$stop" ] && grep -q "^== checkpointed; requeueing job $j" pre.out || tl_fail "USR1 did not checkpoint: $(cat pre.out)"
grep -q "^== torus imagenet: job $j (restart 1)" pre.out &&
    grep -q "^torus-train: resumed from .*/ckpt-$stop-[0-9a-f]*.h5 at .*(global step $stop)" pre.out ||
    tl_fail "the restart did not resume from step $stop: $(cat pre.out)"
grep -q '^stage: n2: test: verified 16 images, 0 CRC32C mismatches' pre.out && [ -f "$t/local-pre/n1/train-index.txt" ] ||
    tl_fail "the preempted run did not stage: $(head -20 pre.out)"
# The final state hash (weights and BN statistics) and the final
# checkpoints' weights and momentum, every float printed with 9
# significant digits (exact for fp32): bitwise equal.
hpre=$(sed -n 's/^state hash \([0-9a-f]*\) at global step 12$/\1/p' pre.out)
[ "$hpre" = "$href" ] || tl_fail "state hash after preempt+resume '$hpre', uninterrupted '$href'"
groups() { h5dump -m %.9g -g /params -g /momentum -g /bn_stats "$1"/checkpoints/ckpt-12-*.h5 | grep -v '^HDF5 '; }
groups ref >ref.groups && groups pre >pre.groups || tl_fail "h5dump cannot read the final checkpoints"
[ "$(grep -c DATASET ref.groups)" -gt 10 ] && cmp -s ref.groups pre.groups ||
    tl_fail "final weights, momentum or BN statistics differ after preempt+resume: $(diff ref.groups pre.groups | head -4)"
# Every rank took back its own BN statistics, and the run removed them.
ls pre/checkpoints/bn-* >/dev/null 2>&1 && tl_fail "the finished run left $(ls pre/checkpoints/bn-*)"
evals() { grep '"top1"' "$1" | sed 's/,"time":.*//'; }
[ "$(evals ref/metrics.jsonl | wc -l)" = 3 ] && cmp -s <(evals ref/metrics.jsonl) <(evals pre/metrics.jsonl) ||
    tl_fail "the epochs' evaluations differ: $(diff <(evals ref/metrics.jsonl) <(evals pre/metrics.jsonl))"
losses() { sed -n 's/.*"global_step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$1"; }
[ "$(losses ref/metrics.jsonl | wc -l)" = 12 ] && cmp -s <(losses ref/metrics.jsonl) <(losses pre/metrics.jsonl) ||
    tl_fail "per-step losses differ: $(diff <(losses ref/metrics.jsonl) <(losses pre/metrics.jsonl) | head -5)"
[ -s pre/curves.png ] || tl_fail "no curves.png in the run directory"
echo "ok: USR1 at step $stop -> checkpoint -> requeue -> resume: 12 steps, state hash $hpre and checkpoint bitwise as uninterrupted"

# 5. Evaluate the final checkpoint: the run's own last evaluation.
TORUS_EVAL_BATCH=8 sbatch --wait -N2 --ntasks-per-node=1 "${cpu_job[@]}" -o eval.out "$jobs/eval.sbatch" --run "$t/runs/pre" \
    --data "$out" >/dev/null || tl_fail "eval job failed: $(cat eval.out)"
want=$(grep '"top1"' pre/metrics.jsonl | tail -1 |
    sed 's/.*"top1":\([^,]*\),"top5":\([^,]*\),"test_loss":\([^,]*\),.*/\1 \2 \3/' |
    awk '{printf "top-1: %.2f%%\ntop-5: %.2f%%\nloss %.4f", $1, $2, $3}')
got=$(tail -2 eval.out; grep -o 'loss [0-9.]*' eval.out | tail -1)
[ "$got" = "$want" ] || tl_fail "eval printed '$got', the run's last evaluation was '$want'"
echo "ok: eval.sbatch: $(tail -2 eval.out | tr '\n' ' ')as the run's last evaluation"
# 6. The run's global batch is fixed (jobs/elastic.sh): another --batch
# for its folder stops before any srun, saying so in one sentence.
rc=0
sbatch --wait -N2 --ntasks-per-node=1 "${cpu_train[@]}" -o batch.out "${train[@]}" --run "$t/runs/pre" --batch 16 >/dev/null || rc=$?
[ $rc != 0 ] && grep -q "^train-imagenet: this run's global batch is 8, fixed at its first start ($t/runs/pre/global-batch), and a restart may not change it to 16: submit the new batch with a new run folder$" batch.out &&
    ! grep -q '^== training: ' batch.out || tl_fail "--batch 16 on a run of batch 8 was not refused before srun (rc $rc): $(cat batch.out)"
echo "ok: $(grep -o "this run's global batch is 8.*" batch.out)"
# 7. A node range and no task count: the job takes both nodes, whole, and
# a rank per --cpus-per-task CPUs of each (2 CPUs: 2 ranks a node).
sbatch --wait -N1-2 "${cpu_train[@]}" -o range.out "${train[@]}" --run "$t/runs/range" -- --max-steps 2 >/dev/null ||
    tl_fail "the node-range job failed: $(tail -20 range.out)"
grep -q '^== train-imagenet: start 1, step 1: 2 nodes (n1,n2) x 2 ranks = 4 ranks, global batch 8, from the beginning$' range.out &&
    grep -q '^done: global step 2;' range.out || tl_fail "-N1-2 did not train on 2 nodes x 2 ranks: $(grep -E '^==|^done' range.out)"
echo "ok: -N1-2 without a task count: $(grep -o '2 nodes (n1,n2) x 2 ranks = 4 ranks' range.out)"
echo "PASS: ImageNet jobs: pack array, stage, train, preempt, requeue, bitwise resume, eval, batch fixed, node range"
