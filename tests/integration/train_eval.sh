#!/bin/bash
# train_eval.sh: the test-set evaluation does not depend on the batch size,
# and --eval-only leaves its record in --metrics.
#   1. --eval-only of one checkpoint on 65 test images at --batch 4, 5, 7,
#      13, 16, 32, 64 (last batches of 1, 2 and none) prints the same
#      top-1, top-5 and loss, and writes one eval record each to --metrics
#      with the same numbers (a batch of one image once scored otherwise:
#      the engine re-planned an inner product of one row with another
#      weights layout than the params held).
#   2. The evaluation during training (--batch 16: a last batch of 1)
#      writes what --eval-only of its checkpoint writes at --batch 13.
set -u
. "${top_srcdir:?run through make check}/tests/integration/train_lib.sh"
tr_idx_dataset "$tmp/ds" 7 64 65 || { echo "FAIL: packing: $(tail -2 "$tmp/idx.log")"; exit 1; }
net=(--model cifar-resnet --depth 8 --threads 1 --data "$tmp/ds" --checkpoint-dir "$tmp/ck")
# The numbers of an eval record: top-1, top-5, loss.
nums() { sed -n 's/.*"top1":\([^,]*\),"top5":\([^,]*\),"test_loss":\([^,]*\),.*/\1 \2 \3/p' "$1"; }

# ---- 2. training's own evaluation (a last batch of 1) ----
"$bin" "${net[@]}" --batch 16 --epochs 1 --warmup-epochs 0 --lr 0.4 \
    --metrics "$tmp/train.jsonl" >"$tmp/log" 2>&1 || fail "training: $(tail -3 "$tmp/log")"
grep -q '"top1"' "$tmp/train.jsonl" || fail "training wrote no eval record"
during=$(grep '"top1"' "$tmp/train.jsonl" | tail -1 > "$tmp/t1" && nums "$tmp/t1")

# ---- 1. --eval-only at every batch size ----
want=
for b in 13 4 5 7 16 32 64; do
    rm -f "$tmp/m.jsonl"
    "$bin" "${net[@]}" --batch $b --eval-only --metrics "$tmp/m.jsonl" >"$tmp/log" 2>&1 ||
        { fail "--eval-only --batch $b: $(tail -3 "$tmp/log")"; continue; }
    line=$(sed -n 's/.* test: \(.*\) (65 images.*/\1/p' "$tmp/log")
    [ -n "$line" ] || fail "--eval-only --batch $b printed no result: $(tail -2 "$tmp/log")"
    [ "$(grep -c . "$tmp/m.jsonl" 2>/dev/null)" = 1 ] ||
        fail "--eval-only --batch $b --metrics: $(grep -c . "$tmp/m.jsonl" 2>/dev/null) records, want 1"
    got="$line / $(nums "$tmp/m.jsonl")"
    if [ -z "$want" ]; then
        want=$got
        [ "$(nums "$tmp/m.jsonl")" = "$during" ] ||
            fail "training's evaluation ($during) is not --eval-only's at --batch 13 ($(nums "$tmp/m.jsonl"))"
    fi
    [ "$got" = "$want" ] || fail "--eval-only --batch $b: $got; --batch 13: $want"
done
grep -q '"epoch":1,"global_step":4,' "$tmp/m.jsonl" ||
    fail "the eval record names no checkpoint position: $(cat "$tmp/m.jsonl")"

[ $fails -eq 0 ] || exit 1
echo "PASS: evaluation independent of the batch size ($want); --eval-only writes its record"
