#!/bin/bash
# train_elastic.sh: a run resumed on another number of ranks trains on the
# batches of the uninterrupted run (mpirun, BN-free tiny-cnn, fp32 wire, a
# packed dataset of 110 images at global batch 20: 5 steps an epoch, 10
# images left out of each, shares of 5, 10, 6-7 and 2-3 on 4, 2, 3 and 8
# ranks; a warmup and poly decay: the LR of every step differs).
#   1. Stopped at global step 3 (mid-epoch) on 4 ranks and resumed on 2
#      (to step 7, then on 8 to the end), on 3 and on 8: every epoch
#      serves each of its 100 samples exactly once, and every step's
#      global batch is the uninterrupted run's (TTRAIN_TEST_SERVED records
#      the sample ids each rank serves), as are the LR and global batch of
#      every step line.
#   2. The final weights of 4 -> 2 -> 8, 4 -> 3 and 4 -> 8 are within 1e-5
#      of the uninterrupted run's (only the summation order differs);
#      4 -> 4 is bit-identical.
#      A checkpoint written before that order (its data_order attribute
#      removed) resumes, saying how many samples the epoch serves twice.
#   3. A global batch of 64 trains on 3 ranks (shares 22, 21, 21).
#   4. A rank that stalls past --comm-timeout ends the job with the
#      peer-lost status 5 (documented in --help), not the 1 of a failure.
set -u
. "${top_srcdir:?run through make check}/tests/integration/train_lib.sh"
tr_need_mpirun
tr_need_h5diff
export TR_MPI_TIMEOUT=240
py=/usr/bin/python3
"$py" -c 'import h5py, numpy' 2>/dev/null ||
    { echo "SKIP: $py has no h5py/numpy (install python3-h5py)"; exit 77; }
tr_idx_dataset "$tmp/ds" 7 110 20 || { echo "FAIL: no dataset: $(cat "$tmp/idx.log")"; exit 1; }

run=("$bin" --model tiny-cnn --data "$tmp/ds" --image-size 28 --channels 1
     --epochs 2 --warmup-epochs 0.5 --decay poly --lr 0.5 --print-every 1 --threads 1
     --batch 20 --wire fp32 --bucket-kb 4096)
# NAME NP ARGS...: a run recording its served ids in $tmp/NAME.ids/.
served() {
    local name=$1 np=$2
    shift 2
    mkdir -p "$tmp/$name.ids"
    TTRAIN_TEST_SERVED=$tmp/$name.ids tr_mpirun -np "$np" -x TTRAIN_TEST_SERVED \
        "${run[@]}" --metrics "$tmp/$name.jsonl" "$@" >"$tmp/$name.log" 2>&1 ||
        fail "$name ($np ranks): $(tail -3 "$tmp/$name.log")"
}

served full 4 --checkpoint-dir "$tmp/full"
served stop 4 --max-steps 3 --checkpoint-dir "$tmp/stop"
[ -n "$(ck "$tmp/stop" 3)" ] || fail "no checkpoint at step 3: $(ls "$tmp/stop")"
for n in 2 3 8 4; do cp -a "$tmp/stop" "$tmp/r$n"; done
served r2a 2 --max-steps 7 --resume --checkpoint-dir "$tmp/r2"
served r2b 8 --resume --checkpoint-dir "$tmp/r2"
served r3 3 --resume --checkpoint-dir "$tmp/r3"
served r8 8 --resume --checkpoint-dir "$tmp/r8"
served r4 4 --resume --checkpoint-dir "$tmp/r4"
grep -q "resumed from .*ckpt-3-.* at epoch 0 step 3 (global step 3)" "$tmp/r3.log" ||
    fail "4 -> 3 did not resume at step 3: $(grep -E 'resum|note' "$tmp/r3.log")"

# ---- 1. exactly once, the same global batches ----
# DIRS...: the served ids of a run pieced together from these runs.
check_order() {
    "$py" - "$tmp/full.ids" "$@" <<'PY'
import collections, glob, sys
def steps(dirs):
    out = collections.defaultdict(list)
    for d in dirs:
        for f in glob.glob(d + "/served-*.txt"):
            for line in open(f):
                e, s, *ids = map(int, line.split())
                out[(e, s)] += ids
    return out
ref, got = steps(sys.argv[1:2]), steps(sys.argv[2:])
bad = []
for e in (0, 1):
    ids = [i for (ee, s), v in got.items() if ee == e for i in v]
    dup = len(ids) - len(set(ids))
    if len(ids) != 100 or dup:
        bad.append(f"epoch {e}: {len(ids)} served, {dup} twice (want 100, 0)")
if sorted(got) != sorted(ref) or len(ref) != 10:
    bad.append(f"steps {sorted(got)} vs the uninterrupted {sorted(ref)}")
for k in sorted(ref):
    if sorted(got.get(k, [])) != sorted(ref[k]):
        bad.append(f"epoch {k[0]} step {k[1]}: another global batch")
print("; ".join(bad[:4]))
sys.exit(1 if bad else 0)
PY
}
for c in "2 -> 8:r2a r2b" 3:r3 8:r8 4:r4; do
    dirs=("$tmp/stop.ids")
    for d in ${c#*:}; do dirs+=("$tmp/$d.ids"); done
    why=$(check_order "${dirs[@]}") || fail "4 -> ${c%%:*} ranks: $why"
done

# The step lines' LR and global batch are the uninterrupted run's.
steps() { grep -o '"global_step":[0-9]*,[^}]*"lr":[^,]*,"global_batch":[0-9]*' "$@" |
          sed 's/"images_per_s":[^,]*,"loss":[^,]*,//'; }
for c in "2 -> 8:r2a r2b" 3:r3 8:r8 4:r4; do
    files=()
    for d in stop ${c#*:}; do files+=("$tmp/$d.jsonl"); done
    cmp -s <(steps "$tmp/full.jsonl") <(cat "${files[@]}" | steps) ||
        fail "4 -> ${c%%:*} ranks: step lines differ: $(diff <(steps "$tmp/full.jsonl") <(cat "${files[@]}" | steps) | head -4)"
done
[ "$(steps "$tmp/full.jsonl" | wc -l)" = 10 ] || fail "the uninterrupted run has no 10 step lines"

# ---- 2. the weights at the end ----
# A B TOL: the params of two checkpoints agree within TOL (0: bitwise).
close() {
    "$py" - "$@" <<'PY'
import h5py, numpy as np, sys
a, b, tol = h5py.File(sys.argv[1]), h5py.File(sys.argv[2]), float(sys.argv[3])
d = max(float(np.max(np.abs(a["params"][k][()] - b["params"][k][()])))
        for k in a["params"])
print(f"max |difference| {d:.3g}")
sys.exit(0 if (d <= tol if tol else d == 0) else 1)
PY
}
end=$(ck "$tmp/full" 10)
[ -n "$end" ] || fail "the uninterrupted run wrote no checkpoint at step 10"
for n in 2 3 8; do
    lab=$n
    [ $n = 2 ] && lab="2 -> 8"
    if why=$(close "$end" "$(ck "$tmp/r$n" 10)" 1e-5); then echo "4 -> $lab: weights: $why"
    else fail "4 -> $lab: weights: $why"; fi
done
why=$(close "$end" "$(ck "$tmp/r4" 10)" 0) || fail "4 -> 4: weights not bitwise: $why"

# A checkpoint of the per-rank slices (before the global-block order; the
# attribute removed): the resume says what it costs. On 4 ranks at step 3
# rank k had served positions [27k, 27k + 15); the rest of the epoch is
# [60, 100): 9 + 15 samples twice.
cp -a "$tmp/stop" "$tmp/old"
"$py" -c 'import h5py, sys; del h5py.File(sys.argv[1], "r+").attrs["data_order"]' "$(ck "$tmp/old" 3)"
tr_mpirun -np 4 "${run[@]}" --max-steps 4 --resume --checkpoint-dir "$tmp/old" >"$tmp/log" 2>&1 ||
    fail "an old-order checkpoint: $(tail -3 "$tmp/log")"
grep -q "written by 4 ranks serving each their own slice .*: the rest of epoch 0 serves 24 of its 100 samples a second time and leaves as many unseen" "$tmp/log" ||
    fail "an old-order checkpoint: $(grep -E 'warning|resum' "$tmp/log")"
grep -q "a second time" "$tmp/r4.log" && fail "a new checkpoint was called old"

# ---- 3. a global batch of 64 on 3 ranks ----
tr_mpirun -np 3 "$bin" --model tiny-cnn --synthetic --image-size 12 --dataset-size 256 \
    --epochs 1 --warmup-epochs 0 --batch 64 --threads 1 --print-every 1 --max-steps 2 \
    --metrics "$tmp/b64.jsonl" >"$tmp/log" 2>&1 || fail "batch 64 on 3 ranks: $(tail -3 "$tmp/log")"
grep -q "local batch 22" "$tmp/log" || fail "batch 64 on 3 ranks: $(head -2 "$tmp/log")"
[ "$(grep -c '"loss"' "$tmp/b64.jsonl" 2>/dev/null)" = 2 ] ||
    fail "batch 64 on 3 ranks: no 2 steps in the metrics"

# ---- 4. a lost rank has its own exit status ----
# Rank 1 stalls 8 s under --comm-timeout 2 (ring, no shared memory: a
# libtcomm wait with a deadline, as in train_ckpt_dist.sh): 5, not 1.
TCOMM_TIMEOUT=600 tr_mpirun -np 2 -x TCOMM_TIMEOUT -x TCOMM_SHM=0 -x TTRAIN_TEST_SLEEP=step:1:3:8 \
    "$bin" --model tiny-cnn --synthetic --image-size 12 --dataset-size 256 --epochs 1 \
    --warmup-epochs 0 --batch 32 --threads 1 --wire fp32 --bucket-kb 4096 --algo ring \
    --max-steps 6 --comm-timeout 2 >"$tmp/log" 2>&1
rc=$?
[ $rc = 5 ] || fail "a stalled rank: exit $rc, not 5 (peer lost): $(grep -E 'lost|torus-train:' "$tmp/log" | tail -2)"
grep -q "rank 1 is lost or stalled" "$tmp/log" || fail "a stalled rank was not named: $(tail -2 "$tmp/log")"
"$bin" --help | grep -q "5 a rank was lost" || fail "--help: no exit status 5"

[ $fails -eq 0 ] && echo "PASS: resized runs train on the uninterrupted run's batches"
exit $((fails > 0))
