#!/bin/bash
# jobs_elastic.sh: jobs/train-elastic.sbatch on the local 4-node cluster
# (spank_torus.so), submitted with --nodes=2-4 and a rank per node
# (--cpus-per-task=2 on 2-CPU nodes), BN-free tiny-cnn on 2048 Fashion-MNIST
# images at 12 px (1000 test), global batch 64 (uneven shares on 3 ranks),
# fp32 wire, 2 epochs = 64 steps, a checkpoint every 5 steps:
#   1. the reference: the same script, uninterrupted, on the 4 nodes.
#   2. one job that lives through three changes:
#      a. a node lost mid-run: n4 is marked DOWN; with --no-kill the job
#         goes on, the surviving ranks leave with the peer-lost status 5
#         and the script relaunches srun --resume on n1-n3, in the same
#         start (no requeue);
#      b. shrink: n4 back, n3 and n4 drained, then USR1 (scancel
#         --signal=USR1 --batch): checkpoint, requeue, and the next start
#         runs on the 2 nodes left;
#      c. grow: n3 and n4 resumed, USR1 again: the third start runs on 4.
#      The job ends COMPLETED; its metrics hold global steps 1..64 once
#      each (no gap, no repeat: torus-train --resume dropped the records
#      of the steps it trained again), the global batch 64 at every step
#      and the reference's LR at every step, and its final top-1 is within
#      0.5 points of the reference's.
#   3. the same run folder submitted with another --batch is refused with
#      one sentence before any srun.
# Slurm 22.05 holds a requeued job about 2 minutes (Reason=BeginTime)
# before it may start again; the test releases it at once with
# scontrol update JobId=N StartTime=now (tl_requeued_release), as an admin
# could, once the previous start's step daemons are gone.
# It prints the time each change cost: from the node marked down (or the
# USR1) to the first global step of the new step, and, for the node, to
# the first step past the one reached before it was lost.
# Rank 0 sleeps 0.2 s a step (TTRAIN_TEST_SLEEP): a window for each change.
# A lost peer counts after 10 s without progress (TCOMM_TIMEOUT; the
# default is 30 s), which bounds the time a lost node costs here.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
so=$top_builddir/plugins/.libs/spank_torus.so
FM=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$so" ] || tl_fail "$so is not built"
[ -f "$FM/train-images-idx3-ubyte.gz" ] ||
    tl_skip "Fashion-MNIST not found in $FM (Debian package dataset-fashion-mnist)"
jobs=$(cd "$top_srcdir/jobs" && pwd)
sbatch() { timeout 240 env sbatch "$@"; }

tl_cluster_up --nodes 4 --leaves 2 --plugin "$so"
t=$TL_BASE/el
mkdir -p "$t"
cd "$t"
# The first 2048 training and 1000 test images of Fashion-MNIST.
python3 - "$FM" "$t/fm" <<'PY'
import gzip, struct, sys
src, pre = sys.argv[1], sys.argv[2]
for split, base, n in (("train", "train", 2048), ("test", "t10k", 1000)):
    for kind, hdr in (("images-idx3", 16), ("labels-idx1", 8)):
        raw = gzip.open(f"{src}/{base}-{kind}-ubyte.gz").read()
        head = bytearray(raw[:hdr])
        head[4:8] = struct.pack(">I", n)
        per = 784 if hdr == 16 else 1
        with gzip.open(f"{pre}-{split}-{kind}-ubyte.gz", "wb") as f:
            f.write(bytes(head) + raw[hdr:hdr + n * per])
PY
for s in train test; do
    "$top_builddir/data/torus-pack" --no-progress -o "$t/ds" -s $s "$t/fm-$s-images-idx3-ubyte.gz" >/dev/null ||
        tl_fail "torus-pack $s failed"
done

export TORUS_BUILD=$top_builddir TORUS_CKPT_EVERY=5 TORUS_PRINT_EVERY=1
export OMPI_MCA_btl_tcp_if_include=lo TCOMM_TIMEOUT=10
job=(--nodes=2-4 --cpus-per-task=2 --time=00:10:00)
model=(--model tiny-cnn --image-size 12 --channels 1 --epochs 2 --warmup-epochs 0.5
       --decay poly --lr 0.5 --wire fp32 --bucket-kb 4096 --threads 1)
train=("$jobs/train-elastic.sbatch" --data "$t/ds" --batch 64)
steps() { sed -n 's/.*"global_step":\([0-9]*\),"images.*/\1/p' "$1" 2>/dev/null; }
top1() { sed -n 's/.*"top1":\([0-9.]*\).*/\1/p' "$1" | tail -1; }
# STEP: wait (up to 120 s) until the elastic run's metrics reach STEP.
reach() {
    local i
    for ((i = 0; i < 1200; i++)); do
        [ "$(steps "$t/el/metrics.jsonl" | tail -1)" -ge "$1" ] 2>/dev/null && return 0
        sleep 0.1
    done
    tl_fail "the elastic run did not reach global step $1: $(tail -5 el.out)"
}
# SINCE STEP [INODE]: seconds from SINCE (date +%s.%N) until the metrics
# show a step line for STEP (the file is polled every 0.1 s); with INODE,
# in a file that is no longer that one (a line for STEP from before a
# resume counts only once torus-train has dropped it and trained again).
until_step() {
    local i
    for ((i = 0; i < 1800; i++)); do
        { [ -z "${3:-}" ] || [ "$(stat -c %i "$t/el/metrics.jsonl" 2>/dev/null)" != "$3" ]; } &&
            steps "$t/el/metrics.jsonl" | grep -qx "$2" && break
        sleep 0.1
    done
    awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

# ---- 1. the reference ----
sbatch --wait "${job[@]}" -o ref.out "${train[@]}" --run "$t/ref" -- "${model[@]}" >/dev/null ||
    tl_fail "reference run failed: $(tail -20 ref.out)"
grep -q '^== train-elastic: start 1, step 1: 4 nodes (n1,n2,n3,n4) x 1 ranks = 4 ranks, global batch 64, from the beginning$' ref.out ||
    tl_fail "the reference did not run on 4 nodes x 1 rank: $(grep '^==' ref.out)"

# ---- 2. lost, shrink, grow ----
j=$(TTRAIN_TEST_SLEEP=step:0:0:0.2 sbatch --parsable "${job[@]}" -o el.out "${train[@]}" --run "$t/el" -- "${model[@]}")
reach 12
last=$(steps "$t/el/metrics.jsonl" | tail -1)
ino=$(stat -c %i "$t/el/metrics.jsonl")
down=$(date +%s.%N)
scontrol update NodeName=n4 State=DOWN Reason=jobs_elastic
# The relaunched torus-train drops the metrics past its checkpoint (a new
# file) before it trains those steps again: a step recorded before that
# is waited for in the new file.
for _ in $(seq 900); do grep -q '^== train-elastic: start 1, step [0-9]*: 3 nodes' el.out && break; sleep 0.1; done
from=$(sed -n 's/^== train-elastic: start 1, step [0-9]*: 3 nodes (n1,n2,n3) x 1 ranks = 3 ranks, global batch 64, resuming at global step \([0-9]*\) (relaunch [0-9] of 3: a rank was lost (exit status 5) on 4 nodes)$/\1/p' el.out)
[ -n "$from" ] && grep -q '^== train-elastic: a rank was lost (exit status 5) at ' el.out ||
    tl_fail "no relaunch on n1-n3 after n4 was lost: $(grep -E '^==|torus-train:|error' el.out)"
# When the script saw the lost rank (its line's UTC time of day).
seen=$(sed -n 's/^== train-elastic: a rank was lost (exit status 5) at \([0-9:.]*\) UTC;.*/\1/p' el.out | head -1)
seen=$(awk -v a="$down" -v b="$(TZ=UTC date -d "$seen" +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
stale() { if steps "$t/el/metrics.jsonl" | grep -qx "$1"; then echo "$ino"; fi; }
s1=$(stale $((from + 1))) s2=$(stale $((last + 1)))
first=$(until_step "$down" $((from + 1)) "$s1")
past=$(until_step "$down" $((last + 1)) "$s2")
echo "ok: n4 lost at global step $last: seen lost after ${seen} s, relaunched on n1-n3 from step $from, first new step after ${first} s, past step $last after ${past} s"

reach 30
# n4 is back by itself (ReturnToService=2: its slurmd still answers).
[ "$(sinfo -h -n n4 -o %t)" = idle ] || scontrol update NodeName=n4 State=RESUME
scontrol update NodeName=n3,n4 State=DRAIN Reason=jobs_elastic
sig=$(date +%s.%N)
scancel --signal=USR1 --batch "$j"
tl_requeued_wait "$j"
held=$(date +%s.%N)
tl_requeued_release "$j"
stop=$(sed -n 's/^torus-train: stopped by signal 10 at global step \([0-9]*\) after writing a checkpoint$/\1/p' el.out | tail -1)
[ -n "$stop" ] || tl_fail "USR1 did not checkpoint: $(grep -E '^==|torus-train:' el.out)"
first2=$(until_step "$sig" $((stop + 1)))
grep -q "^== train-elastic: start 2, step [0-9]*: 2 nodes (n1,n2) x 1 ranks = 2 ranks, global batch 64, resuming at global step $stop$" el.out ||
    tl_fail "the second start did not shrink to n1,n2: $(grep -E '^==|torus-train:' el.out)"
echo "ok: shrink: USR1 at step $stop, requeued (held by Slurm, released after $(awk -v a="$sig" -v b="$held" 'BEGIN { printf "%.1f", b - a }') s), restarted on n1,n2; first new step ${first2} s after the signal"

reach $((stop + 10))
scontrol update NodeName=n3,n4 State=RESUME
sig=$(date +%s.%N)
scancel --signal=USR1 --batch "$j"
tl_requeued_wait "$j"
tl_requeued_release "$j"
stop=$(sed -n 's/^torus-train: stopped by signal 10 at global step \([0-9]*\) after writing a checkpoint$/\1/p' el.out | tail -1)
first3=$(until_step "$sig" $((stop + 1)))
grep -q "^== train-elastic: start 3, step [0-9]*: 4 nodes (n1,n2,n3,n4) x 1 ranks = 4 ranks, global batch 64, resuming at global step $stop$" el.out ||
    tl_fail "the third start did not grow to 4 nodes: $(grep -E '^==|torus-train:' el.out)"
echo "ok: grow: USR1 at step $stop, restarted on n1-n4; first new step ${first3} s after the signal"
tl_wait_gone "$j" 180
scontrol show job "$j" | grep -q 'JobState=COMPLETED' ||
    tl_fail "job $j: $(scontrol show job "$j" | grep JobState); $(tail -20 el.out)"

# Every global step once, batch 64, the reference's LR; the final top-1.
[ "$(steps "$t/el/metrics.jsonl" | tr '\n' ' ')" = "$(seq -s ' ' 1 64) " ] ||
    tl_fail "global steps not 1..64 once each: $(steps "$t/el/metrics.jsonl" | wc -l) lines, repeated: $(steps "$t/el/metrics.jsonl" | sort -n | uniq -d | tr '\n' ' ')"
# The relaunch from step $from dropped the records past it itself (when
# the lost step had recorded any).
[ -z "$s1" ] || grep -q "torus-train: --metrics $t/el/metrics.jsonl: [0-9]* records* past the resumed global step $from dropped$" el.out ||
    tl_fail "the relaunch from step $from did not drop the records past it: $(grep -e '--metrics' el.out)"
lrb() { sed -n 's/.*"global_step":\([0-9]*\),"images.*"lr":\([^,]*\),"global_batch":\([0-9]*\).*/\1 \2 \3/p' "$1"; }
# (a pattern that matched no line would compare nothing with nothing)
[ "$(lrb "$t/el/metrics.jsonl" | wc -l)" = 64 ] && [ "$(lrb "$t/ref/metrics.jsonl" | wc -l)" = 64 ] ||
    tl_fail "the step records' lr and global_batch were not read: $(lrb "$t/el/metrics.jsonl" | wc -l) and $(lrb "$t/ref/metrics.jsonl" | wc -l) of 64"
diff <(lrb "$t/ref/metrics.jsonl") <(lrb "$t/el/metrics.jsonl") >lr.diff ||
    tl_fail "LR or global batch differ from the reference: $(head -5 lr.diff)"
awk '$3 != 64 { exit 1 }' <(lrb "$t/el/metrics.jsonl") || tl_fail "a global batch other than 64"
a=$(top1 "$t/ref/metrics.jsonl") b=$(top1 "$t/el/metrics.jsonl")
echo "final top-1: reference $a, elastic (4 -> 3 -> 2 -> 4 nodes) $b"
awk -v a="$a" -v b="$b" 'BEGIN { exit !(a != "" && b != "" && (a - b) ^ 2 <= 0.5 ^ 2) }' ||
    tl_fail "final top-1 $b is not within 0.5 points of the reference's $a"
echo "ok: job $j COMPLETED; steps 1..64 once each, batch 64 and the reference's LR at every step"

# ---- 3. another batch for the same run folder ----
rc=0
sbatch --wait "${job[@]}" -o batch.out "${train[@]}" --run "$t/el" --batch 32 -- "${model[@]}" >/dev/null || rc=$?
grep -q "^train-elastic: this run's global batch is 64, fixed at its first start ($t/el/global-batch), and a restart may not change it to 32: submit the new batch with a new run folder$" batch.out &&
    [ $rc != 0 ] && ! grep -q 'step 1:' batch.out ||
    tl_fail "--batch 32 on a run of batch 64 was not refused before srun (rc $rc): $(cat batch.out)"
echo "PASS: train-elastic.sbatch: a lost node, a shrink and a growth in one job, as the uninterrupted run"
