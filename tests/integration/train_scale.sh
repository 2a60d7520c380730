#!/bin/bash
# train_scale.sh: loss scaling in torus-train's step (--loss-scale), on the
# dnnl backend. With a power-of-two scale every scaled gradient is exactly
# the scale times the unscaled one and the update folds 1/S into its
# arguments, so a run with a static or dynamic scale gives the losses,
# weights, momentum and BN statistics of the run without one, bit for bit
# (a small ResNet with BN and LARS). An injected overflow
# (TTRAIN_TEST_OVERFLOW=RANK:STEP) skips the step and halves the scale;
# under mpirun the overflow of one rank skips the step on both, whose
# weights stay alike (the checkpoint's state-hash check). A resume restores
# the scale and its clean-step count; a hostile saved scale refuses the file
# (the resume falls back to the one before).
set -u
. "${top_srcdir:?run through make check}/tests/integration/train_lib.sh"
tr_need_mpirun
tr_need_h5diff
attr=${top_builddir:?}/tests/integration/ckpt_attr

run=("$bin" --model cifar-resnet --depth 8 --synthetic --image-size 12
     --dataset-size 256 --epochs 1 --warmup-epochs 0 --lr 0.5 --lars
     --print-every 1 --threads 1 --batch 32
     --bucket-kb 4096) # a fixed theta: auto follows the links, which vary
# NAME ARGS...: a run into $tmp/NAME (checkpoint dir) and $tmp/NAME.jsonl
train() {
    local n=$1
    shift
    "${run[@]}" --checkpoint-dir "$tmp/$n" --metrics "$tmp/$n.jsonl" "$@" \
        >"$tmp/$n.log" 2>&1 || fail "$n: $(tail -3 "$tmp/$n.log")"
}
# A B STEP: checkpoints of A and B at STEP hold the same bits
same_state() {
    for g in /params /momentum /bn_stats; do
        h5diff "$(ck "$tmp/$1" "$3")" "$(ck "$tmp/$2" "$3")" $g $g >"$tmp/diff" 2>&1 ||
            fail "$2 vs $1: $g differ: $(head -3 "$tmp/diff")"
    done
}
# DIR STEP NAME: an attribute of the checkpoint
attr_of() { h5dump -a "$3" "$(ck "$tmp/$1" "$2")" | sed -n 's/^ *(0): //p'; }

# Options: errors name the option; the plan shows the mode.
for bad in static:0.5 static:3e7 dynamic:1024:0 dynamic:x bogus; do
    "$bin" --synthetic --dry-run --loss-scale $bad >"$tmp/log" 2>&1
    [ $? -eq 2 ] && grep -q -- "--loss-scale: loss scale '$bad'" "$tmp/log" ||
        fail "--loss-scale $bad: $(cat "$tmp/log")"
done
"$bin" --synthetic --dry-run | grep -q '^loss scale     auto$' || fail "the plan lacks the loss scale"

# 1. Scaled runs equal the unscaled one bit for bit. dynamic:1024:2 grows
# the scale every 2 clean steps: 6 steps end at 8192.
train off --max-steps 6 --loss-scale off
train static --max-steps 6 --loss-scale static:1024
train dyn --max-steps 6 --loss-scale dynamic:1024:2
grep -q 'dynamic loss scale from 1024 (halved on inf/nan, doubled after 2 clean steps' "$tmp/dyn.log" ||
    fail "dynamic: banner: $(grep 'loss scale' "$tmp/dyn.log")"
for n in static dyn; do
    cmp -s <(losses "$tmp/off.jsonl") <(losses "$tmp/$n.jsonl") ||
        fail "$n: losses differ: $(paste <(losses "$tmp/off.jsonl") <(losses "$tmp/$n.jsonl") | tr '\n' ' ')"
    same_state off $n 6
done
[ "$(attr_of dyn 6 loss_scale)" = 8192 ] || fail "dynamic: saved scale $(attr_of dyn 6 loss_scale), expected 8192"
[ "$(attr_of dyn 6 loss_scale_mode)" = '"dynamic"' ] || fail "dynamic: saved mode $(attr_of dyn 6 loss_scale_mode)"
grep -q '^loss scale 8192 at the end, 0 overflow steps' "$tmp/dyn.log" || fail "dynamic: summary"

# 2. An overflow at step 3: skipped and halved (2048 -> 1024, then 2048
# after 2 clean steps); the weights are those of the unscaled run that
# skips the same step, and not those of the run that skips none.
TTRAIN_TEST_OVERFLOW=0:3 train offo --max-steps 6 --loss-scale off
TTRAIN_TEST_OVERFLOW=0:3 train dyno --max-steps 6 --loss-scale dynamic:1024:2
grep -q 'warning: global step 3: inf/nan in the gradients at loss scale 2048; update skipped, loss scale now 1024' "$tmp/dyno.log" ||
    fail "overflow: warning: $(grep warning "$tmp/dyno.log")"
grep -q 'warning: global step 3: inf/nan in the gradients; update skipped (1 of' "$tmp/offo.log" ||
    fail "overflow without scaling: $(grep warning "$tmp/offo.log")"
same_state offo dyno 6
h5diff "$(ck "$tmp/off" 6)" "$(ck "$tmp/dyno" 6)" /params /params >/dev/null 2>&1 &&
    fail "overflow: the skipped step changed nothing"
[ "$(attr_of dyno 6 loss_scale)" = 2048 ] && [ "$(attr_of dyno 6 loss_scale_overflows)" = 1 ] ||
    fail "overflow: saved scale $(attr_of dyno 6 loss_scale), overflows $(attr_of dyno 6 loss_scale_overflows)"
# Overflows that back the scale off do not count toward --max-nonfinite.
TTRAIN_TEST_OVERFLOW=0:0 train every --max-steps 5 --loss-scale dynamic:1024:2 --max-nonfinite 1
[ "$(grep -c 'update skipped, loss scale now' "$tmp/every.log")" -eq 5 ] || fail "overflow every step: $(tail -3 "$tmp/every.log")"

# 3. A resume restores the scale and its clean-step count: interval 3,
# stopped after 4 steps (scale 2048, 1 clean step), resumed to 6, where
# the uninterrupted run doubles to 4096.
train full --max-steps 6 --loss-scale dynamic:1024:3
train half --max-steps 4 --loss-scale dynamic:1024:3
"${run[@]}" --checkpoint-dir "$tmp/half" --metrics "$tmp/half.jsonl" --max-steps 6 \
    --loss-scale dynamic:1024:3 --resume >"$tmp/log" 2>&1 || fail "resume: $(tail -3 "$tmp/log")"
grep -q 'loss scale 2048, 1 clean steps, 0 overflows so far' "$tmp/log" || fail "resume: $(grep 'loss scale' "$tmp/log")"
cmp -s <(losses "$tmp/full.jsonl") <(losses "$tmp/half.jsonl") || fail "resumed losses differ"
same_state full half 6
[ "$(attr_of half 6 loss_scale)" = 4096 ] || fail "resume: final scale $(attr_of half 6 loss_scale), expected 4096"
# A shorter growth interval than the checkpoint's (1 clean step of 3
# saved, now 1): the scale doubles at the first resumed step.
cp -r "$tmp/half" "$tmp/short"
rm -f "$(ck "$tmp/short" 6)"
"${run[@]}" --checkpoint-dir "$tmp/short" --max-steps 5 --loss-scale dynamic:1024:1 --resume \
    >"$tmp/log" 2>&1 || fail "shorter interval: $(tail -3 "$tmp/log")"
[ "$(attr_of short 5 loss_scale)" = 4096 ] || fail "shorter interval: scale $(attr_of short 5 loss_scale), expected 4096"
# Another mode starts afresh, with a note.
cp -r "$tmp/off" "$tmp/offr"
"${run[@]}" --checkpoint-dir "$tmp/offr" --max-steps 7 --loss-scale dynamic --resume >"$tmp/log" 2>&1 ||
    fail "off -> dynamic: $(tail -3 "$tmp/log")"
grep -q 'note: the checkpoint was trained with loss scale off, this run uses dynamic: its scale starts afresh' "$tmp/log" ||
    fail "off -> dynamic: $(grep note "$tmp/log")"
# A hostile saved scale refuses the file, naming the value: the resume
# falls back to step 4 (in a copy: the next case needs step 6).
cp -a "$tmp/half" "$tmp/hostile"
"$attr" "$(ck "$tmp/hostile" 6)" loss_scale f64=1e30 || fail "ckpt_attr"
"${run[@]}" --checkpoint-dir "$tmp/hostile" --max-steps 8 --loss-scale dynamic:1024:3 --resume >"$tmp/log" 2>&1 ||
    fail "hostile scale: $(tail -2 "$tmp/log")"
grep -q "warning: checkpoint .*ckpt-6-.*h5 does not load (its loss scale 1e+30 is not finite in \[1, 2^24\]" "$tmp/log" &&
    grep -q 'resumed from .*ckpt-4-' "$tmp/log" || fail "hostile scale: $(grep -e warning -e resumed "$tmp/log")"
# A malformed one makes the file not load: the resume falls back to step 4.
"$attr" "$(ck "$tmp/half" 6)" loss_scale_clean i64x1000 || fail "ckpt_attr"
"${run[@]}" --checkpoint-dir "$tmp/half" --max-steps 8 --loss-scale dynamic:1024:3 --resume >"$tmp/log" 2>&1 ||
    fail "malformed clean count: $(tail -2 "$tmp/log")"
grep -q "warning: checkpoint .*ckpt-6-.*h5 does not load (its loss-scale state is malformed" "$tmp/log" &&
    grep -q 'resumed from .*ckpt-4-' "$tmp/log" || fail "malformed clean count: $(grep -e warning -e resumed "$tmp/log")"

# 4. Two ranks, rank 1 overflows at step 3: both skip it (the check is on
# the summed gradients), back off alike, and their weights stay equal
# (the checkpoint compares the ranks' state hashes).
tr_mpirun -np 2 -x TTRAIN_TEST_OVERFLOW=1:3 "${run[@]}" --max-steps 6 --loss-scale dynamic:1024:2 \
    --checkpoint-dir "$tmp/two" --checkpoint-every 3 >"$tmp/log" 2>&1 || fail "2 ranks: $(tail -5 "$tmp/log")"
grep -q "2 ranks" "$tmp/log" || fail "2 ranks: did not run as 2 ranks"
grep -q 'global step 3: [0-9]* inf/nan values in the summed gradients at loss scale 2048; update skipped, loss scale now 1024' "$tmp/log" ||
    fail "2 ranks: warning: $(grep warning "$tmp/log")"
[ "$(attr_of two 6 loss_scale)" = 2048 ] || fail "2 ranks: saved scale $(attr_of two 6 loss_scale)"

[ $fails -eq 0 ] && echo "ok: loss scaling"
exit $((fails > 0))
