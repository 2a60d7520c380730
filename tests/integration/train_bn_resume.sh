#!/bin/bash
# train_bn_resume.sh: the BN running statistics of a multi-rank run
# (mpirun -np 2, cifar-resnet: BN in every block) across checkpoints.
#   1. Periodic checkpoints change nothing: a run with --checkpoint-every 3
#      ends on the state hash of a run that checkpoints only at its end
#      (both end on the ranks' average written there).
#   2. A run stopped by SIGUSR1 leaves each rank's own statistics
#      (bn-RUN-rRANK.f32) next to the checkpoint; its resume ends on the
#      same state hash (weights and BN statistics, bit for bit) and removes
#      them.
#      Resumed on 1 process instead, the note says once that the ranks go
#      on from the average statistics, and the files are removed.
#   3. A damaged or truncated statistics file, or a FIFO in its place, is
#      named in a warning and the rank goes on from the average: the run
#      still ends with 0.
set -u
. "${top_srcdir:?run through make check}/tests/integration/train_lib.sh"
tr_need_mpirun
export TR_MPI_TIMEOUT=90
run=("$bin" --model cifar-resnet --depth 8 --image-size 12 --synthetic --dataset-size 64
     --epochs 2 --batch 16 --warmup-epochs 0 --print-every 1 --threads 1
     --bucket-kb 4096) # a fixed theta: auto follows the links, which vary
hash() { sed -n 's/^state hash \([0-9a-f]*\) at global step 8$/\1/p' "$1"; }

tr_mpirun -np 2 "${run[@]}" --checkpoint-dir "$tmp/e" >"$tmp/end" 2>&1 || fail "reference run: $(tail -3 "$tmp/end")"
h=$(hash "$tmp/end")
[ -n "$h" ] || fail "no final state hash: $(tail -3 "$tmp/end")"
tr_mpirun -np 2 "${run[@]}" --checkpoint-dir "$tmp/p" --checkpoint-every 3 >"$tmp/periodic" 2>&1 ||
    fail "periodic run: $(tail -3 "$tmp/periodic")"
[ "$(hash "$tmp/periodic")" = "$h" ] || fail "checkpoints at steps 3 and 6 changed the run: $(hash "$tmp/periodic") vs $h"
[ -n "$(ck "$tmp/p" 6)" ] || fail "no checkpoint at step 6: $(ls "$tmp/p")"
[ $fails = 0 ] && echo "ok: checkpoints at steps 3, 6 and 8 leave the state hash $h"

# Stops the run with SIGUSR1 after its second step: DIR LOG.
stop() {
    TTRAIN_TEST_SLEEP=step:0:0:0.3 tr_mpirun -np 2 "${run[@]}" --checkpoint-dir "$1" >"$2" 2>&1 &
    local pid=$! rc
    for _ in $(seq 300); do grep -q '^epoch 0 step 2/' "$2" 2>/dev/null && break; sleep 0.1; done
    # One rank is enough (the ranks agree on the stop); mpirun does not
    # forward USR1. The tree: timeout -> mpirun -> the ranks.
    local ranks
    ranks=$(pgrep -P "$(pgrep -P "$pid" | head -1)")
    kill -USR1 $(head -1 <<<"$ranks")
    wait "$pid"
    rc=$?
    [ $rc = 3 ] || fail "stopped run exited $rc, not 3: $(tail -3 "$2")"
    [ "$(ls "$1"/bn-*-r0.f32 "$1"/bn-*-r1.f32 2>/dev/null | wc -l)" = 2 ] ||
        fail "no statistics file per rank after the stop: $(ls "$1")"
}
stop "$tmp/s" "$tmp/stop"
cp -a "$tmp/s" "$tmp/shrink"
tr_mpirun -np 2 "${run[@]}" --checkpoint-dir "$tmp/s" --resume >"$tmp/resume" 2>&1 ||
    fail "resume: $(tail -3 "$tmp/resume")"
[ "$(hash "$tmp/resume")" = "$h" ] || fail "resumed run ends on $(hash "$tmp/resume"), uninterrupted on $h"
ls "$tmp"/s/bn-* >/dev/null 2>&1 && fail "the finished run left $(ls "$tmp"/s/bn-*)"
grep -q 'warning' "$tmp/resume" && fail "warning on a clean resume: $(grep warning "$tmp/resume")"
[ $fails = 0 ] && echo "ok: stopped at step $(sed -n 's/.*stopped by signal 10 at global step \([0-9]*\).*/\1/p' "$tmp/stop" | head -1), resumed: state hash $h"

# A resize: the note says once that the ranks go on from the average; the
# files no rank of the new run can use (rank 1's, and rank 0's: one
# process keeps none) are removed.
"${run[@]}" --max-steps 3 --checkpoint-dir "$tmp/shrink" --resume >"$tmp/shrunk" 2>&1 ||
    fail "2 ranks -> 1: $(tail -3 "$tmp/shrunk")"
[ "$(grep -c "every rank starts from the ranks' average BN running statistics" "$tmp/shrunk")" = 1 ] ||
    fail "2 ranks -> 1: the BN note is not said once: $(grep -E 'note|BN' "$tmp/shrunk")"
ls "$tmp"/shrink/bn-* >/dev/null 2>&1 && fail "2 ranks -> 1 left $(ls "$tmp"/shrink/bn-*)"

# A flipped float and a truncated file: each named, the run goes on.
for damage in flip cut; do
    stop "$tmp/$damage" "$tmp/$damage.log"
    f=$(ls "$tmp/$damage"/bn-*-r1.f32)
    if [ $damage = flip ]; then
        printf '\x7f' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
    else
        truncate -s 1000 "$f"
    fi
    tr_mpirun -np 2 "${run[@]}" --checkpoint-dir "$tmp/$damage" --resume >"$tmp/$damage.out" 2>&1 ||
        fail "$damage: resume failed: $(tail -3 "$tmp/$damage.out")"
    grep "^torus-train: warning: rank 1: $f: truncated or damaged (size or CRC32C)" "$tmp/$damage.out" |
        grep -q "; it goes on from the ranks' average BN statistics$" || fail "$damage: no warning naming $f: $(grep -i 'warn\|bn-' "$tmp/$damage.out")"
done
[ $fails = 0 ] && echo "ok: a flipped and a truncated statistics file are named, the runs go on"
# A FIFO in its place is refused by name, not waited on.
stop "$tmp/fifo" "$tmp/fifo.log"
f=$(ls "$tmp/fifo"/bn-*-r1.f32)
rm "$f" && mkfifo "$f"
tr_mpirun -np 2 "${run[@]}" --checkpoint-dir "$tmp/fifo" --resume >"$tmp/fifo.out" 2>&1 ||
    fail "fifo: resume failed (124: blocked): $(tail -3 "$tmp/fifo.out")"
grep "^torus-train: warning: rank 1: '$f' is a FIFO, not a regular file" "$tmp/fifo.out" |
    grep -q "; it goes on from the ranks' average BN statistics$" || fail "fifo: $(grep -i 'warn\|bn-' "$tmp/fifo.out")"
[ $fails = 0 ] && echo "PASS: BN statistics across checkpoints and resumes" || exit 1
