#!/bin/bash
# jobs_gres.sh: what the job scripts ask of Slurm, on a local cluster that
# declares GPUs as GRES (tests/cluster/up --gpus 2: fake device nodes, no
# driver behind them) and binds tasks to CPUs (--bind). One cluster, 2
# nodes of 2 CPUs; each check fails on the scripts as they were:
#   1. train-imagenet.sbatch asks for GPUs per node (here 1) and each step
#      a GPU per task (Slurm grants it: SLURM_STEP_GPUS,
#      CUDA_VISIBLE_DEVICES) and memory per CPU; the
#      trainer, granted a GPU it cannot drive, stops naming the reason
#      (no NVIDIA driver) instead of training on the CPU; eval.sbatch
#      (after 2, on that run's checkpoint) alike.
#   2. The same job on the CPU (--gpus-per-node=0; its whole nodes still
#      bring their GPUs, which its steps do not take): srun gets -c, so the
#      rank's CPU mask holds its threads (no "run by turns" warning); the
#      banner says why auto chose the CPU; a BATCH of the submitting shell
#      changes nothing; a TERM to the batch shell during the trainer's
#      start-up checkpoints at the first step and requeues; the restart
#      resumes and completes.
#   3. A job that keeps starting from the same checkpoint stops
#      (TORUS_MAX_IDLE_RESTARTS) instead of requeueing forever.
#   4. train-pytorch.sbatch granted a GPU that torch cannot use stops,
#      saying why.
#   5. sweep.sbatch with --nodes=2 --ntasks-per-node=2 gets 4 tasks on 2
#      nodes (its header no longer cuts it to one rank).
#   6. pack-imagenet's array asks for its CPUs, memory and time, and when
#      the list job fails the array and the index job are cancelled
#      instead of pending forever.
#   7. stage: %u becomes the user, a '$' is refused, a matching stamp
#      skips the re-read, and a file system too small fails before any
#      copy, naming both sizes.
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
. "$top_srcdir/tests/cluster/testlib.sh"
plugin=$top_builddir/plugins/.libs/spank_torus.so
[ -f "$plugin" ] || tl_fail "$plugin is not built"
jobs=$(cd "$top_srcdir/jobs" && pwd)
tl_cluster_up --nodes 2 --leaves 1 --cpus 2 --gpus 2 --bind --memory 16384 --plugin "$plugin"
trap 'rc=$?; rm -rf "$tmp"; (exit $rc); tl_cluster_down' EXIT
sbatch() { timeout 240 env sbatch "$@"; }
py_idx_dataset "$tmp/ds" 32 2 train || exit 1
py_idx_dataset "$tmp/ds" 8 1 test || exit 1
cd "$tmp" || exit 1
export TORUS_BUILD=$top_builddir TORUS_MODEL_ARGS="--model cifar-resnet --depth 8" TORUS_PRINT_EVERY=1
# The cuda module of this build, where it is built: then the reason is the
# driver's; else that the module is not installed.
mod=$top_builddir/trainer/backends/cuda/.libs
if [ -f "$mod/torus_cuda.so" ]; then
    export TORUS_BACKEND_PATH=$mod
    why='no NVIDIA driver'
else
    why='the cuda backend is not installed'
fi
field() { scontrol show job "$1" | grep -o "$2=[^ ]*" | head -1; }
train=("$jobs/train-imagenet.sbatch" --data "$tmp/ds" --batch 4 --epochs 1 --warmup 0)

# 1. The GPU job as written (only -c and the GPUs per node cut to this
# cluster's 2 CPUs, a rank a node).
j=$(sbatch --parsable -N2 --ntasks-per-node=1 --gpus-per-node=1 -c 2 -o gpu.out "${train[@]}" --run "$tmp/gpu")
[ "$(field "$j" TresPerNode)" = TresPerNode=gres:gpu:1 ] && [ "$(field "$j" MinMemoryCPU)" = MinMemoryCPU=4G ] ||
    tl_fail "train-imagenet.sbatch asks for '$(field "$j" TresPerNode)' and '$(field "$j" MinMemoryCPU)', expected GPUs per node and 4G per CPU"
tl_wait_gone "$j" 120
grep -q "rank [01]: Slurm granted this step GPUs (SLURM_STEP_GPUS=[01]), but --backend auto cannot use them: .*$why" gpu.out &&
    ! grep -q '^done: ' gpu.out && [ "$(field "$j" JobState)" = JobState=FAILED ] ||
    tl_fail "a rank granted a GPU without a driver did not stop naming it ($(field "$j" JobState)): $(cat gpu.out)"
echo "ok: train-imagenet.sbatch: $(field "$j" TresPerNode), $(field "$j" MinMemoryCPU); $(grep -o 'rank 0: Slurm granted.*cannot use them' gpu.out | head -1)"

# 2. On the CPU, with BATCH in the environment and a TERM during start-up
# (rank 0 sleeps 4 s before it builds the model: TTRAIN_TEST_SLEEP).
j=$(BATCH=999 TTRAIN_TEST_SLEEP=start:0:0:4 sbatch --parsable -N2 --ntasks-per-node=1 -c 2 \
    --gpus-per-node=0 -o cpu.out "${train[@]}" --run "$tmp/cpu")
for _ in $(seq 600); do grep -q '^== training: ' cpu.out 2>/dev/null && break; sleep 0.2; done
grep -q '^== training: ' cpu.out || tl_fail "the CPU job did not start training: $(cat cpu.out)"
sleep 1
scancel --signal=TERM --batch "$j"
tl_requeued_wait "$j"
grep -q '^== TERM: asking torus-train for a checkpoint' cpu.out &&
    grep -q '^torus-train: stopped by signal 10 at global step 1 after writing a checkpoint' cpu.out &&
    grep -q "^== checkpointed; requeueing job $j" cpu.out && scontrol show job "$j" | grep -q 'Restarts=1' ||
    tl_fail "TERM during start-up did not checkpoint and requeue: $(cat cpu.out)"
tl_requeued_release "$j"
tl_wait_gone "$j" 180
[ "$(field "$j" JobState)" = JobState=COMPLETED ] &&
    grep -q "^torus-train: resumed from .*/ckpt-1-[0-9a-f]*.h5 at .*(global step 1)" cpu.out ||
    tl_fail "the requeued job did not resume and complete ($(field "$j" JobState)): $(cat cpu.out)"
grep -q "^torus-train: --backend auto chose dnnl: .*$why" cpu.out ||
    tl_fail "the banner does not say why auto chose the CPU: $(grep -m2 '^torus-train: ' cpu.out)"
grep -q 'backend dnnl with 2 threads' cpu.out && ! grep -q 'compute threads on .* CPU(s) of this task' cpu.out ||
    tl_fail "the rank's 2 threads are not on 2 CPUs of its mask (srun -c): $(grep -m3 '^torus-train: ' cpu.out)"
grep -q '^train-imagenet: note: BATCH is set in the environment and ignored' cpu.out &&
    grep -q '^== recipe goyal, global batch 4;' cpu.out ||
    tl_fail "BATCH=999 of the submitting shell changed the run: $(grep -m3 '^==' cpu.out)"
echo "ok: TERM during start-up -> checkpoint at step 1 -> requeue -> resumed and completed; 2 threads on 2 CPUs; BATCH ignored"
# eval.sbatch of that run, as written: a GPU per task, and the stop.
j=$(TORUS_EVAL_BATCH=4 sbatch --parsable -N2 --ntasks-per-node=1 -c 2 -o evalgpu.out "$jobs/eval.sbatch" --run "$tmp/cpu" --data "$tmp/ds")
[ "$(field "$j" TresPerTask)" = TresPerTask=gres:gpu:1 ] || tl_fail "eval.sbatch asks for '$(field "$j" TresPerTask)'"
tl_wait_gone "$j" 120
grep -q "Slurm granted this step GPUs (SLURM_STEP_GPUS=[01]), but --backend auto cannot use them: .*$why" evalgpu.out &&
    [ "$(field "$j" JobState)" = JobState=FAILED ] ||
    tl_fail "eval.sbatch granted a GPU without a driver did not stop naming it: $(cat evalgpu.out)"
echo "ok: eval.sbatch: $(field "$j" TresPerTask), stopped naming the GPU it cannot use"

# 3. A job that starts again and again from the same checkpoint stops.
j=$(TORUS_MAX_IDLE_RESTARTS=1 sbatch --parsable --hold -N2 --ntasks-per-node=1 -c 1 --gpus-per-node=0 \
    -o idle.out "${train[@]}" --run "$tmp/idle")
mkdir -p "$tmp/idle"
printf '%s none\n' "$j" "$j" >"$tmp/idle/starts"
scontrol release "$j"
tl_wait_gone "$j" 120
[ "$(field "$j" JobState)" = JobState=FAILED ] &&
    grep -q "^train-imagenet: job $j restarted 2 times in a row from the same checkpoint (global step none, .*) without progress: stopping (TORUS_MAX_IDLE_RESTARTS=1)" idle.out ||
    tl_fail "a job without progress was not stopped: $(cat idle.out)"
echo "ok: $(grep -o 'restarted 2 times.*without progress' idle.out)"

# 4. The PyTorch job granted a GPU torch cannot use.
j=$(TORUS_PYTHON=$PY TORUS_DATA=$tmp/ds TORUS_RUN=$tmp/pt TORUS_EXAMPLE=$top_srcdir/examples/pytorch/train_imagenet.py \
    TORUS_TRAIN_ARGS="--arch resnet18 --image-size 28 --batch 2 --max-steps 1 --threads 1" \
    sbatch --parsable -N1 --ntasks-per-node=1 -c 1 --mem-per-cpu=512M -o pt.out "$jobs/train-pytorch.sbatch")
tl_wait_gone "$j" 180
grep -q 'rank 0: Slurm granted this step GPUs (SLURM_STEP_GPUS=[01]), but torch cannot use them' pt.out &&
    [ "$(field "$j" JobState)" = JobState=FAILED ] ||
    tl_fail "train-pytorch.sbatch granted a GPU torch cannot use did not stop naming it: $(cat pt.out)"
echo "ok: train-pytorch.sbatch: $(grep -o 'Slurm granted.*cannot use them: [^.]*' pt.out | head -1)"

# 5. The sweep's array task has the shape it is given.
j=$(sbatch --parsable --hold --array=0 -N2 --ntasks-per-node=2 -c 1 -o /dev/null "$jobs/sweep.sbatch" "$tmp/nosweep" 2>sweep.err)
[[ $(field "$j" NumNodes) =~ ^NumNodes=2(-2)?$ ]] && [ "$(field "$j" NumTasks)" = NumTasks=4 ] && ! grep -q "can't run" sweep.err ||
    tl_fail "sweep.sbatch -N2 --ntasks-per-node=2: $(field "$j" NumNodes) $(field "$j" NumTasks) $(cat sweep.err)"
scancel "$j"
echo "ok: sweep.sbatch -N2 --ntasks-per-node=2: $(field "$j" NumNodes) $(field "$j" NumTasks)"

# 6. pack-imagenet: the array's asks, and no job left pending when the
# listing fails (a FIFO in the source tree fails it).
mkdir -p "$tmp/src/c1" && mkfifo "$tmp/src/c1/pipe.JPEG"
sub=$(TORUS_PACK=$top_builddir/data/torus-pack "$jobs/pack-imagenet" "$tmp/src" "$tmp/packed" \
    --shards 2 --tasks 2 --threads 2 --time 00:10:00 --mem-per-cpu 256M) || tl_fail "pack-imagenet: $sub"
read -r list arr idx < <(sed -n 's/.*submitted list \([0-9]*\) -> pack array \([0-9]*\) .* -> index \([0-9]*\)$/\1 \2 \3/p' <<<"$sub")
[ -n "$idx" ] || tl_fail "pack-imagenet printed no job ids: $sub"
asks="$(field "$arr" MinCPUsNode) $(field "$arr" MinMemoryCPU) $(field "$arr" TimeLimit)"
[ "$asks" = "MinCPUsNode=2 MinMemoryCPU=256M TimeLimit=00:10:00" ] ||
    tl_fail "pack-imagenet's array asks for '$asks'"
for k in "$list" "$arr" "$idx"; do tl_wait_gone "$k" 60; done
echo "ok: pack-imagenet: the array asks for $asks; after the list job failed nothing is left pending"

# 7. stage on this host (--here): %u, '$', the stamp, and a full disk.
stage() { TORUS_BUILD=$top_builddir "$jobs/stage" --here "$@"; }
out=$(stage "$tmp/ds" "$tmp/local/%u") && [ -f "$tmp/local/$(id -un)/train-index.txt" ] ||
    tl_fail "stage to %u: $out"
out=$(stage "$tmp/ds" "$tmp/local/%u") && grep -q '^stage: .*: train: the copy in .* matches its stamp' <<<"$out" ||
    tl_fail "the second stage read the copy again: $out"
touch "$tmp/local/$(id -un)"/train-00001-of-00002.h5
out=$(stage "$tmp/ds" "$tmp/local/%u") && grep -q ': train: verified 32 images, 0 CRC32C mismatches' <<<"$out" ||
    tl_fail "a copy changed since its stamp was not verified again: $out"
rc=0
out=$(stage "$tmp/ds" "$tmp/local/\$USER" 2>&1) || rc=$?
[ $rc = 2 ] && grep -q "holds a '\\$': a variable the shell did not expand" <<<"$out" || tl_fail "a literal \$USER: $rc $out"
mkdir -p "$tmp/small"
rc=0
out=$(unshare --mount sh -c 'mount -t tmpfs -o size=16k torus-small "$1" && shift && exec "$@"' _ "$tmp/small" \
    env TORUS_BUILD="$top_builddir" "$jobs/stage" --here "$tmp/ds" "$tmp/small/ds" 2>&1) || rc=$?
[ $rc = 1 ] && grep -q "^stage: .*: train: $tmp/small/ds has 0 MiB free, the copy needs [0-9]* MiB more: FAILED" <<<"$out" ||
    tl_fail "a file system too small: exit $rc: $out"
echo "ok: stage: %u, '\$' refused, stamp kept the copy, a touched copy re-verified, a full disk refused before copying"
echo "PASS: the jobs' GPU, CPU, memory and time asks, preemption, restart cap, sweep shape, pack and stage"
