#!/bin/bash
# train_ckpt_dist.sh: checkpoints with several ranks (mpirun -np 2, BN-free
# tiny-cnn, --wire fp32).
#   1. All ranks resume from rank 0's pick: past a damaged newest file both
#      fall back to the same step; a rank that cannot load rank 0's pick
#      (its --checkpoint-dir lacks it: an MPMD launch) ends the job naming
#      itself and the file, instead of resuming alone at another step.
#   2. A change of ranks: a 2-rank checkpoint resumed on 1 process with
#      the same global batch schedule continues with the losses of the
#      uninterrupted 1-process run, with a note; with another schedule it
#      is refused, saying that a change of ranks needs the same schedule;
#      another wire between 2-rank runs is refused.
#   3. Rank 0's slow write (TTRAIN_TEST_SLEEP, 5 s) does not make rank 1
#      call it lost under --comm-timeout 2: the run ends with 0; past
#      --checkpoint-timeout the job ends, saying so.
#   4. --comm-timeout reaches libtcomm and wins over TCOMM_TIMEOUT: a rank
#      stalled 8 s before a step is named lost after 2 s.
# 3 and 4 use --algo ring with TCOMM_SHM=0: today only libtcomm's own
# point-to-point waits have a deadline (not MPI's all-reduce that hybrid
# picks for one small bucket, nor the in-place sum in shared memory);
# without one, 3 would pass with or without the heartbeat rounds.
set -u
. "${top_srcdir:?run through make check}/tests/integration/train_lib.sh"
tr_need_mpirun
export TR_MPI_TIMEOUT=90
mpi() { tr_mpirun "$@"; }

run=("$bin" --model tiny-cnn --synthetic --image-size 12 --dataset-size 256
     --epochs 1 --warmup-epochs 0 --lr 2 --print-every 1 --threads 1
     --batch 32 --wire fp32 --bucket-kb 4096) # fixed: auto follows the links

# The reference: one process, 8 steps.
"${run[@]}" --max-steps 8 --metrics "$tmp/one.jsonl" >"$tmp/log" 2>&1 ||
    fail "1 process: $(tail -3 "$tmp/log")"

# ---- 1. every rank resumes from rank 0's pick ----
mpi -np 2 "${run[@]}" --max-steps 6 --checkpoint-every 2 --checkpoint-dir "$tmp/s" \
    >"$tmp/log" 2>&1 || fail "2 ranks, 6 steps: $(tail -5 "$tmp/log")"
f=$(ck "$tmp/s" 6)
dd if=/dev/urandom of="$f" bs=1 seek=$(($(stat -c %s "$f") / 2)) count=4096 conv=notrunc status=none
cp -a "$tmp/s" "$tmp/s0" && mkdir "$tmp/s1" && cp -a "$(ck "$tmp/s" 2)" "$tmp/s1/"
mpi -np 1 "${run[@]}" --max-steps 8 --checkpoint-dir "$tmp/s0" --resume : \
    -np 1 "${run[@]}" --max-steps 8 --checkpoint-dir "$tmp/s1" --resume >"$tmp/log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "a rank without rank 0's checkpoint: exit $rc (124: hung)"
grep -q "rank 1 cannot load $tmp/s1/ckpt-4-[0-9a-f]*.h5, the checkpoint rank 0 chose" "$tmp/log" ||
    fail "a rank without rank 0's checkpoint: $(grep -E 'resum|rank' "$tmp/log" | tail -4)"
grep -q "resumed from .*ckpt-2-" "$tmp/log" && fail "rank 1 resumed alone from step 2"
mpi -np 2 "${run[@]}" --max-steps 8 --checkpoint-dir "$tmp/s" --resume --metrics "$tmp/r.jsonl" \
    >"$tmp/log" 2>&1 || fail "2 ranks past a damaged checkpoint: $(tail -5 "$tmp/log")"
grep -q "resumed from .*ckpt-4-.* (global step 4)" "$tmp/log" ||
    fail "2 ranks did not fall back to step 4: $(grep -E 'resum|warning' "$tmp/log")"

# ---- 2. a change of ranks ----
mkdir "$tmp/w" && cp -a "$(ck "$tmp/s0" 4)" "$tmp/w/"
"${run[@]}" --batch 16 --checkpoint-dir "$tmp/w" --resume >"$tmp/log" 2>&1
[ $? -eq 1 ] || fail "2 ranks -> 1 at another batch was not refused"
grep -q "its global batch schedule is 0:32 .*; and it was written by 2 ranks, this run has 1: a change of ranks is allowed only with the same global batch schedule" "$tmp/log" ||
    fail "2 ranks -> 1 at another batch: $(tail -2 "$tmp/log")"
"${run[@]}" --max-steps 8 --checkpoint-dir "$tmp/w" --resume --metrics "$tmp/w.jsonl" \
    >"$tmp/log" 2>&1 || fail "2 ranks -> 1: $(tail -3 "$tmp/log")"
grep -q "note: resuming on 1 ranks a checkpoint written by 2: the global batch schedule is the same" "$tmp/log" ||
    fail "2 ranks -> 1: no note: $(grep -E 'note|resum' "$tmp/log")"
paste <(losses "$tmp/one.jsonl" | tail -4) <(losses "$tmp/w.jsonl") | awk '
    { d = $1 - $2; if (d < 0) d = -d
      if (d > 1e-6 * ($1 < 0 ? -$1 : $1)) { printf "FAIL: step %d: %s vs %s\n", NR + 4, $1, $2; bad = 1 } }
    END { exit bad || NR != 4 }' || fail "2 ranks -> 1: losses of steps 5-8 differ from 1 process"
mpi -np 2 "${run[@]}" --wire fp16 --checkpoint-dir "$tmp/s0" --resume >"$tmp/log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "another wire: exit $rc"
grep -q "its gradients were summed over a fp32 wire, this run's over fp16" "$tmp/log" ||
    fail "another wire: $(grep -E 'resume' "$tmp/log" | head -2)"

# ---- 3. rank 0's slow write ----
t0=$SECONDS
TCOMM_TIMEOUT=600 mpi -np 2 -x TCOMM_TIMEOUT -x TCOMM_SHM=0 -x TTRAIN_TEST_SLEEP=ckpt:0:0:5 \
    "${run[@]}" --algo ring --max-steps 4 --checkpoint-every 2 --comm-timeout 2 --checkpoint-dir "$tmp/slow" \
    >"$tmp/log" 2>&1 || fail "a 5 s write under --comm-timeout 2: $(grep -E 'lost|torus-train:' "$tmp/log" | tail -3)"
[ -n "$(ck "$tmp/slow" 4)" ] || fail "slow write: no checkpoint at step 4"
[ $((SECONDS - t0)) -ge 10 ] || fail "slow write: took $((SECONDS - t0)) s; did the sleep happen?"
t0=$SECONDS
mpi -np 2 -x TTRAIN_TEST_SLEEP=ckpt:0:2:30 "${run[@]}" --max-steps 4 --checkpoint-every 2 \
    --comm-timeout 2 --checkpoint-timeout 3 --checkpoint-dir "$tmp/late" >"$tmp/log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "a write past --checkpoint-timeout: exit $rc"
grep -q "rank 0 has not finished writing the checkpoint within --checkpoint-timeout 3 s" "$tmp/log" ||
    fail "a write past --checkpoint-timeout: $(grep torus-train: "$tmp/log" | tail -3)"
[ $((SECONDS - t0)) -le 25 ] || fail "a write past --checkpoint-timeout took $((SECONDS - t0)) s"

# ---- 4. --comm-timeout reaches libtcomm ----
TCOMM_TIMEOUT=600 mpi -np 2 -x TCOMM_TIMEOUT -x TCOMM_SHM=0 -x TTRAIN_TEST_SLEEP=step:1:3:8 \
    "${run[@]}" --algo ring --max-steps 6 --comm-timeout 2 >"$tmp/log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || fail "a stalled rank under --comm-timeout 2: exit $rc"
grep -q "rank 1 is lost or stalled: no progress for 2 s" "$tmp/log" ||
    fail "a stalled rank under --comm-timeout 2: $(grep -E 'lost|torus-train:' "$tmp/log" | tail -3)"

[ $fails -eq 0 ] && echo "PASS: checkpoints with 2 ranks"
exit $((fails > 0))
