#!/bin/bash
# train_resume.sh: torus-train checkpoints. A run stopped and resumed from
# its checkpoint gives bitwise the losses of the uninterrupted run (across
# a batch-size change); a damaged newest checkpoint is skipped with a
# warning for the one before it; the records a resumed run trains again
# leave its --metrics file first (a file with a corrupt line is refused,
# untouched); SIGUSR1 checkpoints and exits with 3; --keep bounds the
# files; a checkpoint of another model is refused.
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

# A run that stopped after its checkpoint at global step 4 had recorded
# steps 5-7 (its checkpoint at 7 lost with it). Resumed, it drops their
# records before training them again: each global step once, the lines
# up to step 4 byte for byte, the losses of the uninterrupted run.
gsteps() { grep -o '"global_step":[0-9]*' "$1" | cut -d: -f2 | tr '\n' ' '; }
"${run[@]}" --max-steps 7 --checkpoint-every 4 --checkpoint-dir "$tmp/f" --metrics "$tmp/f.jsonl" \
    >"$tmp/log" 2>&1 || fail "run to step 7: $(tail -3 "$tmp/log")"
rm -f "$(ck "$tmp/f" 7)"
[ -n "$(ck "$tmp/f" 4)" ] && [ "$(gsteps "$tmp/f.jsonl")" = "1 2 3 4 5 6 7 " ] ||
    fail "run to step 7: $(ls "$tmp/f"), global steps $(gsteps "$tmp/f.jsonl")"
cp "$tmp/f.jsonl" "$tmp/f.before"
# A line that is not JSON: refused, naming FILE:LINE, the file untouched.
sed '3s/}$//' "$tmp/f.jsonl" >"$tmp/g.jsonl" && cp "$tmp/g.jsonl" "$tmp/g.before"
"${run[@]}" --checkpoint-dir "$tmp/f" --resume --metrics "$tmp/g.jsonl" >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "torus-train: --metrics: $tmp/g.jsonl:3: " "$tmp/log" ||
    fail "corrupt metrics line: exit $rc: $(tail -2 "$tmp/log")"
cmp -s "$tmp/g.jsonl" "$tmp/g.before" && [ ! -e "$tmp/g.jsonl.tmp" ] ||
    fail "corrupt metrics line: the file changed or $tmp/g.jsonl.tmp is left"
"${run[@]}" --checkpoint-dir "$tmp/f" --resume --metrics "$tmp/f.jsonl" >"$tmp/log" 2>&1 ||
    fail "resume at 4 with records to 7: $(tail -3 "$tmp/log")"
grep -q "^torus-train: --metrics $tmp/f.jsonl: 3 records past the resumed global step 4 dropped$" "$tmp/log" ||
    fail "no word of the dropped records: $(grep -e --metrics "$tmp/log")"
[ "$(gsteps "$tmp/f.jsonl")" = "1 2 3 4 5 6 7 8 " ] ||
    fail "resumed metrics: global steps $(gsteps "$tmp/f.jsonl")"
cmp -s <(head -4 "$tmp/f.before") <(head -4 "$tmp/f.jsonl") ||
    fail "resumed metrics: the records up to step 4 changed"
cmp -s <(losses "$tmp/full.jsonl") <(losses "$tmp/f.jsonl") ||
    fail "resumed metrics: losses differ from the uninterrupted run"

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
