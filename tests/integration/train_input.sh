#!/bin/bash
# train_input.sh: torus-train's 8-bit input path (--input u8) on the dnnl
# backend, where the engine runs it on the host with the GPU kernel's
# per-element maths (data/read/tdata_norm.h): u8 NHWC batches with the
# flips deferred, fetched one step ahead and normalised and mirrored by the
# engine, train exactly as the loader's float batches do (losses, test
# evaluations, weights, momentum and BN statistics bit for bit, across an
# epoch boundary); a run stopped while a batch was fetched ahead resumes
# exactly (the checkpoint does not count it as served); bad --input values
# are refused; the engine's poison mode (TENG_POISON=1) changes nothing.
set -u
. "${top_srcdir:?run through make check}/tests/integration/train_lib.sh"
tr_need_h5diff

# A small grayscale dataset (IDX, as Fashion-MNIST ships), packed.
tr_idx_dataset "$tmp/ds" 5 96 32 || fail "packing: $(tail -2 "$tmp/idx.log")"

run=("$bin" --model cifar-resnet --depth 8 --batch 16 --epochs 2 --warmup-epochs 0
     --threads 1 --print-every 1 --data "$tmp/ds")
train() { # NAME ARGS...
    local n=$1
    shift
    "${run[@]}" --checkpoint-dir "$tmp/$n" --metrics "$tmp/$n.jsonl" "$@" >"$tmp/$n.log" 2>&1 ||
        fail "$n: $(tail -3 "$tmp/$n.log")"
}
steps() { losses <(grep '"images_per_s"' "$1"); } # the training lines' losses
same_state() { # A B STEP
    for g in /params /momentum /bn_stats; do
        h5diff "$(ck "$tmp/$1" "$3")" "$(ck "$tmp/$2" "$3")" $g $g >"$tmp/diff" 2>&1 ||
            fail "$2 vs $1: $g differ: $(head -3 "$tmp/diff")"
    done
}

for bad in half U8 ""; do
    "${run[@]}" --input "$bad" --dry-run >"$tmp/log" 2>&1
    [ $? -eq 2 ] && grep -q -- "--input: '$bad' is not auto, float or u8" "$tmp/log" ||
        fail "--input '$bad': $(cat "$tmp/log")"
done
# Synthetic 8-bit batches: the engine's host path on dnnl (3 channels);
# a 1-channel model is refused, naming the channels.
"$bin" --synthetic --input u8 --model tiny-cnn --channels 3 --dataset-size 16 \
    --batch 8 --max-steps 2 --threads 1 >"$tmp/log" 2>&1
[ $? -eq 0 ] && grep -q '8-bit input batches, normalised and mirrored on the host' "$tmp/log" &&
    grep -q 'done: global step 2' "$tmp/log" || fail "--input u8 --synthetic: $(cat "$tmp/log")"
"$bin" --synthetic --input u8 --model tiny-cnn --dataset-size 16 --batch 8 \
    --max-steps 1 --threads 1 >"$tmp/log" 2>&1
[ $? -ne 0 ] && grep -q '8-bit synthetic batches need 3 channels, model has 1' "$tmp/log" ||
    fail "--input u8 --synthetic with 1 channel: $(cat "$tmp/log")"

# 12 steps over 2 epochs, each followed by an evaluation.
train float --input float
train u8 --input u8
grep -q '8-bit input batches, normalised and mirrored on the host' "$tmp/u8.log" ||
    fail "u8: banner: $(grep -i input "$tmp/u8.log")"
grep -q '8-bit input' "$tmp/float.log" && fail "float: ran the 8-bit path"
[ "$(steps "$tmp/u8.jsonl" | wc -l)" -eq 12 ] || fail "u8: expected 12 training lines"
cmp -s <(steps "$tmp/float.jsonl") <(steps "$tmp/u8.jsonl") ||
    fail "losses differ: $(paste <(steps "$tmp/float.jsonl") <(steps "$tmp/u8.jsonl") | head -3 | tr '\n' ' ')"
evals() { grep test: "$1" | sed 's/, [0-9.]* s)$/)/'; } # without the time
[ "$(evals "$tmp/u8.log" | wc -l)" -eq 2 ] || fail "u8: expected 2 evaluations"
cmp -s <(evals "$tmp/float.log") <(evals "$tmp/u8.log") ||
    fail "evaluations differ: $(grep test: "$tmp/float.log" "$tmp/u8.log")"
same_state float u8 12
# The batches do not depend on the number of decode threads; and with the
# engine's poison mode (each activation buffer NaN once its planned
# lifetime ends) the run reads nothing outside its plan: the same losses,
# evaluations and state bit for bit.
TENG_POISON=1 train u8t3 --input u8 --decode-threads 3
grep -q '^torus-train: 3 decode thread(s)' "$tmp/u8t3.log" || fail "decode threads: $(grep decode "$tmp/u8t3.log")"
cmp -s <(steps "$tmp/u8.jsonl") <(steps "$tmp/u8t3.jsonl") || fail "3 decode threads, poisoned: losses differ"
cmp -s <(evals "$tmp/u8.log") <(evals "$tmp/u8t3.log") || fail "poisoned: evaluations differ"
same_state u8 u8t3 12
"${run[@]}" --decode-threads 300 --dry-run >"$tmp/log" 2>&1
[ $? -eq 2 ] && grep -q -- "--decode-threads: 300 is not in 0..256" "$tmp/log" || fail "--decode-threads 300: $(cat "$tmp/log")"

# A checkpoint at step 4 taken while the batch of step 5 was already
# fetched ahead (mid-epoch), resumed: the uninterrupted run's losses and
# weights.
train half --input u8 --max-steps 6 --checkpoint-every 4
grep -q '"global_step":4,' "$tmp/half.jsonl" || fail "half: no step 4"
served=$(h5dump -a samples "$(ck "$tmp/half" 4)" | sed -n 's/^ *(0): //p')
[ "$served" = 64 ] || fail "the checkpoint at step 4 records $served samples served, not 4 x 16"
rm -f "$(ck "$tmp/half" 6)"
head -n 4 "$tmp/half.jsonl" >"$tmp/h.jsonl"
"${run[@]}" --input u8 --checkpoint-dir "$tmp/half" --metrics "$tmp/h.jsonl" --resume \
    >"$tmp/log" 2>&1 || fail "resume: $(tail -3 "$tmp/log")"
grep -q 'resumed from .*ckpt-4-.* at epoch 0 step 4 (global step 4)' "$tmp/log" ||
    fail "resume: $(grep resumed "$tmp/log")"
cmp -s <(steps "$tmp/u8.jsonl") <(steps "$tmp/h.jsonl") ||
    fail "resumed losses differ: $(paste <(steps "$tmp/u8.jsonl") <(steps "$tmp/h.jsonl") | tr '\n' ' ')"
same_state u8 half 12

[ $fails -eq 0 ] && echo "ok: 8-bit input path"
exit $((fails > 0))
