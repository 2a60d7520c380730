#!/bin/bash
# train_ckpt.sh: checkpoints never lose a run (one process; the ranks'
# side is train_ckpt_dist.sh).
#   1. Another run's checkpoints in the directory (ckpt-997..999 of another
#      run id, and old-style ckpt-997..999.h5) are never pruned, the run
#      keeps its own newest --keep, and --resume continues this run (the
#      one written last), not the other one's higher step.
#   2. --keep 1 after a fallback past a damaged file: the file just written
#      stays, the damaged later one goes; the next resume loads it.
#   3. A checkpoint of another configuration is refused with what differs:
#      global batch schedule; training data (two packed datasets of the
#      same size and shape); --eval-only takes other data with a note.
#   4. Hostile attributes (1000 integers where one is expected, a 60 kB
#      string, a double for a string, a variable-length string) fail the
#      file cleanly, no crash.
#   5. Stale temporary files of this run are removed at a resume; another
#      run's are left alone.
set -u
. "${top_srcdir:?run through make check}/tests/integration/train_lib.sh"
forge=$top_builddir/tests/integration/ckpt_attr
steps() { ls "$1" | sed -n 's/^ckpt-\([0-9]*\)-[0-9a-f]\{8\}\.h5$/\1/p' | sort -n | tr '\n' ' '; }

run=("$bin" --synthetic --model tiny-cnn --image-size 12 --dataset-size 256
     --epochs 2 --batch 16 --warmup-epochs 0 --print-every 1 --threads 1)

# ---- 1. another run's files are not this run's ----
d=$tmp/shared
"${run[@]}" --max-steps 3 --checkpoint-every 1 --checkpoint-dir "$tmp/other" >"$tmp/log" 2>&1 ||
    fail "other run: $(tail -3 "$tmp/log")"
mkdir "$d"
for s in 1 2 3; do
    f=$(ck "$tmp/other" $s)
    cp "$f" "$d/$(basename "$f" | sed "s/^ckpt-$s-/ckpt-$((996 + s))-/")"
    cp "$f" "$d/ckpt-$((996 + s)).h5" # old-style names, no run id
done
touch -d '1 hour ago' "$d"/*
"${run[@]}" --max-steps 6 --checkpoint-every 2 --keep 2 --checkpoint-dir "$d" \
    --metrics "$tmp/m1.jsonl" >"$tmp/log" 2>&1 || fail "fresh run: $(tail -3 "$tmp/log")"
[ "$(steps "$d")" = "4 6 997 998 999 " ] ||
    fail "a fresh run beside another run's ckpt-997..999 left steps: $(steps "$d")"
[ "$(ls "$d"/ckpt-99[789].h5 | wc -l)" -eq 3 ] || fail "old-style files were removed"
[ "$(ls "$d" | grep -c -- "$(basename "$(ck "$d" 6)" | cut -c8-)")" -eq 2 ] ||
    fail "this run's files do not share one run id: $(ls "$d" | tr '\n' ' ')"
"${run[@]}" --max-steps 8 --checkpoint-dir "$d" --resume >"$tmp/log" 2>&1 ||
    fail "resume beside another run: $(tail -3 "$tmp/log")"
grep -q "resumed from $(ck "$d" 6) at .* (global step 6)" "$tmp/log" ||
    fail "resume did not continue this run at step 6: $(grep -E 'resumed|warning' "$tmp/log")"
[ "$(steps "$d")" = "4 6 8 997 998 999 " ] || fail "after the resume: $(steps "$d")"

# ---- 2. --keep 1 after a fallback past a damaged file ----
d=$tmp/keep1
"${run[@]}" --max-steps 6 --checkpoint-every 2 --checkpoint-dir "$d" >"$tmp/log" 2>&1 ||
    fail "keep1 run: $(tail -3 "$tmp/log")"
f=$(ck "$d" 6)
dd if=/dev/urandom of="$f" bs=1 seek=$(($(stat -c %s "$f") / 2)) count=4096 conv=notrunc status=none
"${run[@]}" --max-steps 5 --checkpoint-every 1 --keep 1 --checkpoint-dir "$d" --resume \
    >"$tmp/log" 2>&1 || fail "keep1 resume: $(tail -3 "$tmp/log")"
grep -q "resumed from .*/ckpt-4-.* (global step 4)" "$tmp/log" || fail "keep1: no fallback to step 4: $(grep resum "$tmp/log")"
[ "$(steps "$d")" = "5 " ] || fail "--keep 1 after the fallback left steps: $(steps "$d") (want 5)"
"${run[@]}" --max-steps 6 --checkpoint-dir "$d" --resume >"$tmp/log" 2>&1 ||
    fail "keep1: second resume: $(tail -3 "$tmp/log")"
grep -q "resumed from .*ckpt-5-.* (global step 5)" "$tmp/log" || fail "keep1: step 5 does not load"

# ---- 3. another configuration is refused, saying what differs ----
"${run[@]}" --batch 32 --checkpoint-dir "$d" --resume >"$tmp/log" 2>&1
[ $? -eq 1 ] || fail "a resume at another batch did not fail"
grep -q "written by another configuration: its global batch schedule is 0:16 over 256 samples per epoch, this run's 0:32 over 256" "$tmp/log" ||
    fail "batch change: message: $(tail -2 "$tmp/log")"
# Two datasets of the same size and shape, other bytes.
for x in a b; do
    tr_idx_dataset "$tmp/fm$x" $([ $x = a ] && echo 1 || echo 2) 64 32 ||
        fail "packing $x: $(tail -2 "$tmp/idx.log")"
done
real=("$bin" --model cifar-resnet --depth 8 --batch 16 --epochs 1 --warmup-epochs 0
      --threads 1 --print-every 10)
"${real[@]}" --data "$tmp/fma" --max-steps 2 --checkpoint-dir "$tmp/real" >"$tmp/log" 2>&1 ||
    fail "training on dataset a: $(tail -3 "$tmp/log")"
"${real[@]}" --data "$tmp/fmb" --checkpoint-dir "$tmp/real" --resume >"$tmp/log" 2>&1
[ $? -eq 1 ] || fail "a resume on other data did not fail"
grep -q "it was trained on $tmp/fma (64 samples, train index .*), this run on $tmp/fmb (64 samples" "$tmp/log" ||
    fail "data change: message: $(tail -2 "$tmp/log")"
"${real[@]}" --data "$tmp/fma" --checkpoint-dir "$tmp/real" --resume --max-steps 3 >"$tmp/log" 2>&1 ||
    fail "a resume on the same data: $(tail -3 "$tmp/log")"
"${real[@]}" --data "$tmp/fmb" --checkpoint-dir "$tmp/real" --eval-only >"$tmp/log" 2>&1 ||
    fail "--eval-only on other data: $(tail -3 "$tmp/log")"
grep -q "note: the model was trained on $tmp/fma" "$tmp/log" || fail "--eval-only on other data: no note"
"$bin" --model cifar-resnet --depth 14 --batch 16 --data "$tmp/fma" --checkpoint-dir "$tmp/real" --eval-only \
    >"$tmp/log" 2>&1
[ $? -eq 1 ] && grep -q "its model is cifar-resnet depth 8, 1x28x28 input, 10 classes, this run's cifar-resnet depth 14" "$tmp/log" ||
    fail "--eval-only of another model: $(tail -2 "$tmp/log")"

# ---- 4. hostile attributes ----
for a in "epoch i64x1000" "global_step i64x1000" "model str60k" "run f64" "wire vlen" "world i64x1000"; do
    rm -rf "$tmp/h" && mkdir "$tmp/h" && cp "$(ck "$tmp/other" 3)" "$tmp/h/"
    set -- $a
    "$forge" "$(ck "$tmp/h" 3)" "$1" "$2" || { fail "cannot forge $a"; continue; }
    "${run[@]}" --checkpoint-dir "$tmp/h" --resume >"$tmp/log" 2>&1
    rc=$?
    [ $rc -eq 1 ] || fail "$a: exit $rc, expected 1 (a crash is 134 or 139): $(tail -2 "$tmp/log")"
    grep -q "warning: checkpoint .* does not load (\(its configuration record is missing or malformed\|training position missing\)[ )]" "$tmp/log" ||
        fail "$a: message: $(grep -E 'warning|resume' "$tmp/log")"
done

# ---- 5. stale temporary files ----
d=$tmp/keep1
run_id=$(basename "$(ck "$d" 6)" | sed 's/^ckpt-6-\(.*\)\.h5$/\1/')
touch "$d/.ckpt-7-$run_id.h5.123-0-0badf00d.tmp" "$d/.ckpt-7-0000beef.h5.123-0-0badf00d.tmp"
"${run[@]}" --max-steps 7 --checkpoint-dir "$d" --resume >"$tmp/log" 2>&1 || fail "tmp: $(tail -3 "$tmp/log")"
[ ! -e "$d/.ckpt-7-$run_id.h5.123-0-0badf00d.tmp" ] || fail "this run's stale .tmp file is still there"
[ -e "$d/.ckpt-7-0000beef.h5.123-0-0badf00d.tmp" ] || fail "another run's .tmp file was removed"
grep -q "removed 1 unfinished checkpoint file(s) of run $run_id" "$tmp/log" || fail "tmp: no message"

[ $fails -eq 0 ] && echo "PASS: checkpoints never lose a run (one process)"
exit $((fails > 0))
