#!/bin/bash
# train_resume.sh: torus-train checkpoints. A run stopped and resumed from
# its checkpoint gives bitwise the losses of the uninterrupted run (across
# a batch-size change); a damaged newest checkpoint is skipped with a
# warning for the one before it; SIGUSR1 checkpoints and exits with 3;
# --keep bounds the files; a checkpoint of another model is refused.
set -u
bin=${top_builddir:?}/trainer/torus-train
if ! "$bin" --version | grep -Eq 'backends: ([a-z0-9-]+, )*dnnl'; then # configure requires it
    echo "FAIL: torus-train lists no dnnl backend: $("$bin" --version)"
    exit 1
fi
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
losses() { sed 's/.*"loss":\([^,]*\),.*/\1/' "$@"; }

run=("$bin" --synthetic --model cifar-resnet --depth 8 --image-size 12
     --dataset-size 64 --epochs 3 --batch 0:16,1:32 --lars --decay poly
     --warmup-epochs 0.5 --print-every 1 --threads 2)

# The reference: 8 steps (4 at batch 16, then 2 + 2 at batch 32).
"${run[@]}" --metrics "$tmp/full.jsonl" >"$tmp/log" 2>&1 || fail "full run: $(tail -3 "$tmp/log")"
[ "$(wc -l <"$tmp/full.jsonl")" -eq 8 ] || fail "full run: expected 8 metric lines"

# Stop after 5 steps, resume: the same 8 losses, bit for bit.
"${run[@]}" --max-steps 5 --checkpoint-dir "$tmp/a" --metrics "$tmp/a.jsonl" >"$tmp/log" 2>&1 ||
    fail "first half: $(tail -3 "$tmp/log")"
ck() { ls "$1"/ckpt-"$2"-*.h5 2>/dev/null | head -1; } # DIR STEP: the file
[ -n "$(ck "$tmp/a" 5)" ] || fail "no checkpoint at step 5: $(ls "$tmp/a")"
"${run[@]}" --checkpoint-dir "$tmp/a" --resume --metrics "$tmp/a.jsonl" >"$tmp/log" 2>&1 ||
    fail "resume: $(tail -3 "$tmp/log")"
grep -q 'resumed from .*ckpt-5-[0-9a-f]\{8\}.h5 at epoch 1 step 1 (global step 5)' "$tmp/log" ||
    fail "resume message: $(grep resum "$tmp/log")"
cmp -s <(losses "$tmp/full.jsonl") <(losses "$tmp/a.jsonl") ||
    fail "resumed losses differ: $(paste <(losses "$tmp/full.jsonl") <(losses "$tmp/a.jsonl") | tr '\n' ' ')"

# Checkpoints every 2 steps, keep 2: steps 4 and 6 remain. Damage the
# newest inside its data: resume warns and takes step 4.
"${run[@]}" --max-steps 6 --checkpoint-every 2 --keep 2 --checkpoint-dir "$tmp/b" \
    >"$tmp/log" 2>&1 || fail "checkpoint-every run: $(tail -3 "$tmp/log")"
[ "$(ls "$tmp/b" | sed 's/-[0-9a-f]*\.h5$//')" = "$(printf 'ckpt-4\nckpt-6')" ] ||
    fail "--keep 2 left: $(ls "$tmp/b" | tr '\n' ' ')"
size=$(stat -c %s "$(ck "$tmp/b" 6)")
dd if=/dev/urandom of="$(ck "$tmp/b" 6)" bs=1 seek=$((size / 2)) count=4096 conv=notrunc status=none
: >"$tmp/b.jsonl"
"${run[@]}" --checkpoint-dir "$tmp/b" --resume --metrics "$tmp/b.jsonl" >"$tmp/log" 2>&1 ||
    fail "resume past a damaged checkpoint: $(tail -3 "$tmp/log")"
grep -q 'warning: checkpoint .*ckpt-6-.*.h5 does not load' "$tmp/log" || fail "no warning about the damaged checkpoint"
grep -q 'resumed from .*ckpt-4-.*.h5' "$tmp/log" || fail "did not fall back to step 4"
cmp -s <(losses "$tmp/full.jsonl" | tail -4) <(losses "$tmp/b.jsonl") ||
    fail "losses after the fallback differ from the uninterrupted run"

# A truncated file is damaged too; with nothing else left the run fails
# with a clear error.
mkdir "$tmp/c" && head -c 5000 "$(ck "$tmp/a" 5)" >"$tmp/c/$(basename "$(ck "$tmp/a" 5)")"
"${run[@]}" --checkpoint-dir "$tmp/c" --resume >"$tmp/log" 2>&1
[ $? -eq 1 ] || fail "resume from only a truncated checkpoint did not fail"
grep -q "none of the 1 checkpoints" "$tmp/log" || fail "truncated: message: $(tail -2 "$tmp/log")"

# Another model's checkpoint is refused, saying what differs.
"$bin" --synthetic --model cifar-resnet --depth 14 --image-size 12 --dataset-size 64 \
    --epochs 3 --batch 16 --warmup-epochs 0 --threads 2 --checkpoint-dir "$tmp/a" --resume \
    >"$tmp/log" 2>&1
[ $? -eq 1 ] && grep -q "its model is cifar-resnet depth 8, 1x12x12 input, 10 classes, this run's cifar-resnet depth 14" "$tmp/log" ||
    fail "depth-14 model loaded a depth-8 checkpoint: $(tail -2 "$tmp/log")"

# An empty directory: start afresh.
"${run[@]}" --max-steps 1 --checkpoint-dir "$tmp/d" --resume >"$tmp/log" 2>&1 || fail "fresh resume"
grep -q "no checkpoint in .*, starting afresh" "$tmp/log" || fail "fresh resume message"

# SIGUSR1: checkpoint at the next step boundary, exit 3, resumable.
"${run[@]}" --epochs 200 --checkpoint-dir "$tmp/e" >"$tmp/sig.log" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q '^epoch 0 step 2/' "$tmp/sig.log" && break; sleep 0.1; done
kill -USR1 "$pid"
wait "$pid"
rc=$?
pid=
[ $rc -eq 3 ] || fail "SIGUSR1: exit $rc, expected 3: $(tail -2 "$tmp/sig.log")"
grep -q 'stopped by signal 10 at global step [0-9]* after writing a checkpoint' "$tmp/sig.log" ||
    fail "SIGUSR1 message: $(tail -2 "$tmp/sig.log")"
ls "$tmp/e"/ckpt-*-*.h5 >/dev/null 2>&1 || fail "SIGUSR1 left no checkpoint"
"${run[@]}" --epochs 200 --max-steps 40 --checkpoint-dir "$tmp/e" --resume >"$tmp/log" 2>&1 ||
    fail "resume after SIGUSR1: $(tail -2 "$tmp/log")"
grep -q 'resumed from' "$tmp/log" || fail "resume after SIGUSR1 did not load"

[ $fails -eq 0 ] && echo "PASS: torus-train checkpoints and resume"
exit $((fails > 0))
