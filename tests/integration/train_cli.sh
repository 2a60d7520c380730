#!/bin/bash
# train_cli.sh: torus-train's command line and config file: help, dry-run
# plan (LR and batch per epoch), clear errors for bad values (exit 2, the
# option or FILE:LINE named), output paths checked before any work, and a
# tiny synthetic run with a batch schedule that writes JSON-lines metrics;
# runs that diverge (inf/nan gradients, and a finite loss that explodes
# past --diverge-loss) stop with exit 1 and a "diverged" record.
set -u
bin=${top_builddir:?}/trainer/torus-train
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error STATUS PATTERN ARGS...: runs torus-train, checks the exit
# status and that stderr matches PATTERN.
expect_error() {
    local want=$1 pat=$2
    shift 2
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ $rc -eq "$want" ] || fail "'$*': exit $rc, expected $want"
    grep -q -- "$pat" "$tmp/err" || fail "'$*': stderr lacks '$pat': $(cat "$tmp/err")"
}

"$bin" --help >"$tmp/help" || fail "--help exits nonzero"
for s in NAME SYNOPSIS OPTIONS EXAMPLES "EXIT STATUS" --lars-eta --batch; do
    grep -q -- "$s" "$tmp/help" || fail "--help lacks '$s'"
done
[ "$(awk 'length > 79' "$tmp/help" | wc -l)" -eq 0 ] || fail "--help has lines over 79 columns"
"$bin" --version | grep -q '^torus-train ' || fail "--version"
expect_error 2 'eval-only needs --checkpoint-dir' --synthetic --eval-only
expect_error 2 'eval-only needs --checkpoint-dir' --synthetic --checkpoint-dir "$tmp" --eval-only
expect_error 2 'max-nonfinite: -1 must be >= 0' --synthetic --max-nonfinite -1
expect_error 2 'diverge-loss: -1 must be > 0 (0: off)' --synthetic --diverge-loss -1
expect_error 2 "diverge-loss: 'nan' is not a number" --synthetic --diverge-loss nan
expect_error 2 "diverge-loss: 'inf' is not a number" --synthetic --diverge-loss inf
expect_error 2 "diverge-loss: '1e999' is not a number" --synthetic --diverge-loss 1e999
expect_error 2 "diverge-loss: '20x' is not a number" --synthetic --diverge-loss 20x
expect_error 2 'diverge-points: 0 is not in 1..1000000' --synthetic --diverge-loss 20 --diverge-points 0
expect_error 2 'diverge-points: 1000001 is not in 1..1000000' --synthetic --diverge-points 1000001
expect_error 2 "diverge-points: '2.5' is not an integer" --synthetic --diverge-points 2.5
expect_error 2 'target-top1 and --eval-every need --data' --synthetic --target-top1 50
expect_error 2 'target-top1 in 0..100' --synthetic --target-top1 101
expect_error 2 'eval-every must be >= 0' --synthetic --eval-every -1

# Dry run: Goyal's recipe at batch 1024 (peak 0.4, warmup from 0.1 over
# 5 epochs, x0.1 at 30/60/80) and a Sony batch stage at epoch 2.
"$bin" --synthetic --dataset-size 102400 --batch 0:1024,2:2048 --epochs 90 \
    --dry-run >"$tmp/plan" || fail "--dry-run exits nonzero"
# row EPOCH BATCH STEPS LR_START: the plan has that row.
row() {
    awk -v e="$1" -v b="$2" -v n="$3" -v lr="$4" \
        '$1 == e && $2 == b && $3 == b && $4 == n && $5 == lr { ok = 1 }
         END { exit !ok }' "$tmp/plan" ||
        fail "dry-run row for epoch $1: $(awk -v e="$1" '$1 == e' "$tmp/plan")"
}
row 0 1024 100 0.1
row 2 2048 50 0.38   # warmup: 0.1 + (0.8 - 0.1) * 2/5 at batch 2048
row 45 2048 50 0.08  # peak 0.8 after one step decay
grep -q '^total ' "$tmp/plan" || fail "dry-run lacks the total"

# Bad values: exit 2 and the culprit named.
expect_error 2 "no training data" --batch 256
expect_error 2 "unknown option '--bogus'" --synthetic --bogus
expect_error 2 "missing value for" --synthetic --batch
expect_error 2 "--batch: batch schedule '0:256,x'" --synthetic --batch 0:256,x
expect_error 2 "--lr: 'fast' is not a number" --synthetic --lr fast
expect_error 2 "--epochs: '1.5' is not an integer" --synthetic --epochs 1.5
expect_error 2 "unknown model 'vgg'" --synthetic --model vgg
expect_error 2 "6n+2" --synthetic --model cifar-resnet --depth 21
expect_error 2 "unknown decay 'linear'" --synthetic --decay linear
expect_error 2 "momentum 1.5 is not in" --synthetic --momentum 1.5
expect_error 2 "must start at epoch 0" --synthetic --batch 3:256
expect_error 2 "warmup of 100 epochs" --synthetic --warmup-epochs 100
# Without --warmup-epochs a short run warms up for half of it, not the 5
# epochs that would not fit.
"$bin" --synthetic --epochs 1 --dry-run >"$tmp/out" 2>"$tmp/err" || fail "--epochs 1: $(cat "$tmp/err")"
grep -q 'warmup 0.5 epochs' "$tmp/out" || fail "--epochs 1: no half-epoch warmup: $(grep warmup "$tmp/out")"
"$bin" --synthetic --epochs 90 --dry-run | grep -q 'warmup 5 epochs' || fail "--epochs 90: warmup is not 5"
expect_error 2 "milestones must be positive and increasing" --synthetic --milestones 30,20
expect_error 2 "larger than the dataset" --synthetic --dataset-size 100 --batch 256
expect_error 2 "unknown backend 'tpu'" --synthetic --backend tpu

# Timeouts: --comm-timeout wins over TCOMM_TIMEOUT, which wins over 30 s;
# the plan says which, and bad values are errors naming their source.
for o in --comm-timeout --checkpoint-timeout TCOMM_TIMEOUT; do
    grep -q -- "$o" "$tmp/help" || fail "--help lacks '$o'"
done
timeouts() { # EXPECTED ARGS...: the plan's timeouts line
    local got
    got=$("$bin" --synthetic --dry-run "${@:2}" | grep '^timeouts')
    [ "$got" = "timeouts       $1" ] || fail "dry-run ${*:2}: '$got', expected '$1'"
}
timeouts "comm 30 s (default), checkpoint wait 600 s"
TCOMM_TIMEOUT=9 timeouts "comm 9 s (TCOMM_TIMEOUT), checkpoint wait 600 s"
TCOMM_TIMEOUT=9 timeouts "comm 2.5 s (--comm-timeout), checkpoint wait 60 s" \
    --comm-timeout 2.5 --checkpoint-timeout 60
TCOMM_TIMEOUT=soon expect_error 2 "TCOMM_TIMEOUT: 'soon' is not a positive number" --synthetic --dry-run
expect_error 2 "comm-timeout: -1 is not in (0, 86400]" --synthetic --comm-timeout -1
expect_error 2 "checkpoint-timeout: 0 is not in (0, 604800]" --synthetic --checkpoint-timeout 0

# Config file: settings apply, the command line wins, errors name FILE:LINE.
cat >"$tmp/good.conf" <<'CONF'
# a comment
model = cifar-resnet
lars
lars-eta = 0.02   # trailing comment
batch = 0:128,1:256
CONF
"$bin" --config "$tmp/good.conf" --synthetic --lars-eta 0.005 --dataset-size 2560 \
    --epochs 2 --warmup-epochs 0.5 --dry-run >"$tmp/plan2" || fail "config file dry run"
grep -q 'cifar-resnet depth 20' "$tmp/plan2" || fail "config: model not applied"
grep -q 'LARS eta 0.005' "$tmp/plan2" || fail "config: command line did not win"
printf 'model = resnet50\nmomentum = lots\n' >"$tmp/bad.conf"
expect_error 2 "bad.conf:2: 'lots' is not a number" --config "$tmp/bad.conf" --synthetic
printf 'learning-rate = 0.1\n' >"$tmp/bad2.conf"
expect_error 2 "bad2.conf:1: unknown setting 'learning-rate'" --config "$tmp/bad2.conf" --synthetic
expect_error 2 "cannot open" --config "$tmp/missing.conf" --synthetic

# oneDNN is required by configure: a torus-train without it is a broken
# build, and the runs below must not be dropped for it.
"$bin" --version | grep -Eq 'backends: ([a-z0-9-]+, )*dnnl' ||
    fail "torus-train --version lists no dnnl backend: $("$bin" --version)"

# A tiny run: ResNet-8 on 12 px synthetic images, the batch doubling at
# epoch 1; metrics carry both batches and finite losses.
"$bin" --synthetic --model cifar-resnet --depth 8 --image-size 12 \
    --dataset-size 64 --epochs 2 --batch 0:16,1:32 --lars --decay poly \
    --warmup-epochs 0.5 --print-every 1 --threads 1 \
    --metrics "$tmp/m.jsonl" >"$tmp/run" 2>&1 || fail "tiny run: $(cat "$tmp/run")"
grep -q '^done: global step 6; this run: 128 images' "$tmp/run" || fail "tiny run summary: $(tail -1 "$tmp/run")"
[ "$(wc -l <"$tmp/m.jsonl")" -eq 6 ] || fail "metrics: expected 6 lines"
grep -q '"global_batch":16' "$tmp/m.jsonl" || fail "metrics: no batch 16"
grep -q '"global_batch":32' "$tmp/m.jsonl" || fail "metrics: no batch 32"
grep -q '"loss":nan\|"loss":inf' "$tmp/m.jsonl" && fail "metrics: non-finite loss"
for k in epoch step images_per_s loss lr global_batch data_wait comm_wait; do
    grep -q "\"$k\":" "$tmp/m.jsonl" || fail "metrics: no key $k"
done
# Same seed, same losses to the last printed digit, on 2 threads too
# (--metrics appends: seed1.jsonl gets both runs, 4 lines each)
# (what a bitwise resume builds on); another seed, other losses.
tiny=(--synthetic --model cifar-resnet --depth 8 --image-size 12
      --dataset-size 64 --epochs 1 --batch 16 --warmup-epochs 0
      --print-every 1 --threads 2)
for s in 1 1 2; do
    "$bin" "${tiny[@]}" --seed $s --metrics "$tmp/seed$s.jsonl" >/dev/null 2>&1 ||
        fail "seeded run $s"
done
a=$(sed 's/.*"loss":\([^,]*\),.*/\1/' "$tmp/seed1.jsonl" | head -4 | tr '\n' ' ')
b=$(sed 's/.*"loss":\([^,]*\),.*/\1/' "$tmp/seed1.jsonl" | tail -4 | tr '\n' ' ')
[ "$a" = "$b" ] || fail "same seed, different losses: $a vs $b"
c=$(sed 's/.*"loss":\([^,]*\),.*/\1/' "$tmp/seed2.jsonl" | tr '\n' ' ')
[ "$a" != "$c" ] || fail "seeds 1 and 2 gave the same losses: $a"

# Divergence: LR 1e30 blows the weights up in step 1, so the next
# steps' gradients hold inf/nan: each is skipped with a warning (no
# update), and the third in a row past --max-nonfinite 2 ends the run
# (exit 1) naming the step; the metrics stay valid JSON (null loss).
"$bin" --synthetic --model tiny-cnn --image-size 12 --dataset-size 256 \
    --epochs 1 --warmup-epochs 0 --batch 32 --lr 1e30 --max-nonfinite 2 \
    --print-every 1 --threads 1 --metrics "$tmp/nf.jsonl" >"$tmp/nf.out" 2>"$tmp/nf.err"
rc=$?
[ $rc = 1 ] || fail "diverging run: exit $rc, expected 1"
[ "$(grep -c 'global step [23]: inf/nan in the gradients; update skipped' "$tmp/nf.err")" = 2 ] ||
    fail "diverging run: expected 2 skipped steps: $(cat "$tmp/nf.err")"
grep -q 'training diverged: global step 4: .* 3 steps in a row (--max-nonfinite 2' "$tmp/nf.err" ||
    fail "diverging run: no 'diverged' error: $(tail -2 "$tmp/nf.err")"
[ "$(grep -c '"loss":null' "$tmp/nf.jsonl")" = 2 ] || fail "diverging run: expected 2 null losses"
python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/nf.jsonl" ||
    fail "diverging run: metrics are not JSON lines"
# Divergence on a finite loss: tiny-cnn at LR 1000 (125 at batch 32)
# without weight decay blows up in step 2 and stays finite, between 38
# and 230 (2.3 at chance): the inf/nan rule never fires. The progress
# losses of steps 1-6 are 2.3, 150, 38.1, 58.5, 78.2, 114.6: with
# --diverge-loss 40 the one point above it at step 2 is followed by one
# below (the count starts again), and the third point in a row above it
# (steps 4 to 6) ends the run: exit 1, the message naming the step, the
# loss and the limit, and a "diverged" record after the 6 progress
# records. Without the option the same run trains its 16 steps, exit 0.
blowup=(--synthetic --model tiny-cnn --image-size 12 --dataset-size 512
        --epochs 1 --warmup-epochs 0 --batch 32 --lr 1000 --weight-decay 0
        --print-every 1 --threads 1)
"$bin" "${blowup[@]}" --diverge-loss 40 --metrics "$tmp/dl.jsonl" >"$tmp/dl.out" 2>"$tmp/dl.err"
rc=$?
[ $rc = 1 ] || fail "--diverge-loss run: exit $rc, expected 1: $(tail -2 "$tmp/dl.err")"
grep -q 'training diverged: global step 6: the training loss 114.6 is above --diverge-loss 40 at 3 progress points in a row (global steps 4 to 6; lr 125)' "$tmp/dl.err" ||
    fail "--diverge-loss run: no 'diverged' error naming step 6: $(tail -2 "$tmp/dl.err")"
[ "$(tail -1 "$tmp/dl.jsonl")" = '{"diverged":1,"global_step":6}' ] &&
    [ "$(grep -c '"loss":' "$tmp/dl.jsonl")" = 6 ] ||
    fail "--diverge-loss run: metrics do not end in the diverged record after 6 steps: $(tail -2 "$tmp/dl.jsonl")"
"$bin" "${blowup[@]}" --metrics "$tmp/nodl.jsonl" >"$tmp/nodl.out" 2>"$tmp/nodl.err" ||
    fail "the blown-up run without --diverge-loss: exit $?: $(tail -2 "$tmp/nodl.err")"
! grep -q diverged "$tmp/nodl.jsonl" "$tmp/nodl.err" && [ "$(grep -c '"loss":' "$tmp/nodl.jsonl")" = 16 ] ||
    fail "the blown-up run without --diverge-loss did not train its 16 steps"
awk -F'"loss":' 'NF > 1 { split($2, v, ","); if (v[1] + 0 > 100) n++ } END { exit n < 8 }' "$tmp/nodl.jsonl" ||
    fail "the run without --diverge-loss did not blow up (loss above 100 at 8 points)"
# --eval-only of an empty checkpoint directory
mkdir -p "$tmp/nock"
"$bin" --data "$tmp/nock" --checkpoint-dir "$tmp/nock" --eval-only >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "--eval-only with no dataset: expected exit 2"

# Output paths are checked before any work: exit 2 naming the option and
# the path, nothing trained (a regular file as --checkpoint-dir was found
# out only at the first checkpoint).
small=(--synthetic --model tiny-cnn --image-size 12 --dataset-size 64 --batch 16
       --epochs 1 --warmup-epochs 0 --max-steps 2 --threads 1)
touch "$tmp/regular"
for c in "checkpoint-dir: '$tmp/regular' is not a directory|--checkpoint-dir $tmp/regular" \
         "checkpoint-dir: '$tmp/regular' is not a directory|--checkpoint-dir $tmp/regular --eval-only --data $tmp" \
         "checkpoint-dir: cannot create '$tmp/no/ck': '$tmp/no': No such file or directory|--checkpoint-dir $tmp/no/ck" \
         "checkpoint-dir: cannot create '$tmp/regular/ck': '$tmp/regular': Not a directory|--checkpoint-dir $tmp/regular/ck" \
         "metrics: '$tmp' is a directory, not a file|--metrics $tmp" \
         "metrics: cannot create '$tmp/no/m.jsonl': '$tmp/no': No such file|--metrics $tmp/no/m.jsonl" \
         "trace: '$tmp' is a directory, not a file|--trace $tmp" \
         "trace: cannot create '$tmp/no/t.json'|--trace $tmp/no/t.json"; do
    # shellcheck disable=SC2086 # the options split on purpose
    expect_error 2 "torus-train: --${c%%|*}" "${small[@]}" ${c#*|}
    [ ! -s "$tmp/out" ] || fail "${c#*|}: work began before the path was checked: $(head -2 "$tmp/out")"
done
"$bin" "${small[@]}" --checkpoint-dir "$tmp/ck/" --metrics "$tmp/new.jsonl" >/dev/null 2>"$tmp/err" ||
    fail "new --checkpoint-dir (a trailing slash) and --metrics in an existing folder: $(cat "$tmp/err")"

[ $fails -eq 0 ] && echo "PASS: torus-train command line" 
exit $((fails > 0))
