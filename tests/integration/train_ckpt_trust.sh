#!/bin/bash
# train_ckpt_trust.sh: a checkpoint is trusted only when it is consistent
# (one process; real HDF5 checkpoints written by torus-train, then forged
# with ckpt_attr through the HDF5 library, so that checksums still hold).
# Every refusal is a warning "checkpoint F does not load (REASON ...)".
#   1. Each poison of the newest checkpoint (step 6) is refused with its
#      reason, and --resume falls back to step 4 of the same run: a param
#      all NaN, a momentum all inf, BN statistics all NaN (cifar-resnet),
#      global_step 2^62, a global step or a step that disagrees with the
#      other,
#      samples 2^62, previous_lr NaN, loss_scale NaN and -1, bucket_kb -1
#      and 2^40, another run's
#      id recorded under this run's name, a BN running variance of -1, a
#      param stored in an external file, a virtual dataset or behind an
#      external link (another file's values: never read), a gzip filter.
#   2. Junk named for another run (random bytes; another run's checkpoint
#      renamed to a new id), newer than the run's own files, does not stop
#      the resume: the run's own newest loads. But a run whose own files
#      all fail never falls back to another run's.
#   3. A FIFO, a link to /dev/zero and a socket under the newest
#      checkpoint's name are refused by name, without blocking, and the
#      resume falls back.
#   4. A full file system (a 16 KiB tmpfs), in a folder named like HDF5's
#      errno text, is named: "No space left on
#      device (ENOSPC)".
#   5. --epochs 984 (a configuration record over 64 KiB) writes its
#      checkpoint and resumes from it.
set -u
. "${top_srcdir:?run through make check}/tests/integration/train_lib.sh"
forge=$top_builddir/tests/integration/ckpt_attr

tiny=("$bin" --synthetic --model tiny-cnn --image-size 12 --dataset-size 256
      --epochs 2 --batch 16 --warmup-epochs 0 --print-every 1 --threads 1)
bn=("$bin" --synthetic --model cifar-resnet --depth 8 --image-size 12 --dataset-size 64
    --epochs 3 --batch 0:16,1:32 --warmup-epochs 0 --print-every 1 --threads 1)
"${tiny[@]}" --max-steps 6 --checkpoint-every 2 --keep 3 --checkpoint-dir "$tmp/base" \
    >"$tmp/log" 2>&1 || fail "tiny-cnn run: $(tail -3 "$tmp/log")"
"${bn[@]}" --max-steps 6 --checkpoint-every 2 --keep 3 --checkpoint-dir "$tmp/bnbase" \
    >"$tmp/log" 2>&1 || fail "cifar-resnet run: $(tail -3 "$tmp/log")"
run_id=$(basename "$(ck "$tmp/base" 6)" | sed 's/^ckpt-6-\(.*\)\.h5$/\1/')

# _resume WHAT DIR ARGS...: --resume from DIR (a copy of base) must exit 0
# from step 4 of the run, after a warning about step 6.
_resume() {
    local what=$1 d=$2
    shift 2
    timeout 60 "$@" --max-steps 8 --checkpoint-dir "$d" --resume >"$tmp/log" 2>&1 ||
        { fail "$what: exit $?: $(tail -3 "$tmp/log")"; return 1; }
    grep -q "resumed from $d/ckpt-4-$run_id.h5 .*(global step 4)" "$tmp/log" ||
        { fail "$what: did not fall back to step 4: $(grep -E 'resum|warning' "$tmp/log")"; return 1; }
    return 0
}

# _poison WHAT NAME KIND REASON [bn]: forge NAME of step 6, resume, and
# the warning gives REASON (a grep -F string).
_poison() {
    local what=$1 name=$2 kind=$3 reason=$4 base=$tmp/base cmd=("${tiny[@]}") d
    [ "${5:-}" = bn ] && base=$tmp/bnbase cmd=("${bn[@]}")
    d=$tmp/p-${what// /_}
    rm -rf "$d" && cp -a "$base" "$d"
    [ "${5:-}" = bn ] && run_id=$(basename "$(ck "$d" 6)" | sed 's/^ckpt-6-\(.*\)\.h5$/\1/')
    "$forge" "$(ck "$d" 6)" "$name" "$kind" || { fail "$what: cannot forge"; return; }
    _resume "$what" "$d" "${cmd[@]}" || return
    grep -Fq "warning: checkpoint $(ck "$d" 6) does not load ($reason" "$tmp/log" ||
        fail "$what: reason: $(grep warning "$tmp/log")"
}

# ---- 1. poisons ----
_poison "param NaN" params/conv1.w fill=nan \
    "param conv1.w holds 72 NaN or infinite value(s) of 72 (the first at element 0)"
_poison "momentum inf" momentum/fc.w fill=inf \
    "the momentum of param fc.w holds 160 NaN or infinite value(s) of 160 (the first at element 0)"
_poison "global_step 2^62" global_step i64=4611686018427387904 \
    "its global step 4611686018427387904 disagrees with its position, epoch 0 step 6: the plan has 0 steps before that epoch and 16 in it"
_poison "global_step disagrees" global_step i64=5 "it records 6 optimizer steps in 5 global steps"
_poison "step disagrees" step i64=5 \
    "its global step 6 disagrees with its position, epoch 0 step 5: the plan has 0 steps before that epoch and 16 in it"
_poison "samples 2^62" samples i64=4611686018427387904 \
    "it records 4611686018427387904 samples served, but the batch schedule serves 96 in the steps before epoch 0 step 6"
_poison "previous_lr NaN" previous_lr f64=nan \
    "its previous learning rate nan is not a finite, positive one after 6 optimizer steps"
_poison "loss_scale NaN" loss_scale f64=nan "its loss scale nan is not finite in [1, 2^24]"
_poison "loss_scale -1" loss_scale f64=-1 "its loss scale -1 is not finite in [1, 2^24]"
_poison "bucket_kb -1" bucket_kb i64=-1 "it records a bucket size of -1 KiB (0..1048576)"
_poison "bucket_kb 2^40" bucket_kb i64=1099511627776 "it records a bucket size of 1099511627776 KiB (0..1048576)"
_poison "run id" run str=0000beef "it records run 0000beef, not the $run_id of its name"
# A tensor whose values would come from another file (a secret) is never
# read; a filter other than Fletcher32 is refused too.
_poison "external storage" params/conv1.w "external=$tmp/secret.bin" \
    "param conv1.w is stored in an external file: its values would come from another file"
_poison "virtual dataset" params/conv1.w "virtual=$tmp/secret.h5" \
    "param conv1.w is a virtual dataset: its values would come from another file"
_poison "external link" params/conv1.w "extlink=$tmp/secret.h5" \
    "param conv1.w is a soft or external link (it could name another file)"
_poison "gzip filter" params/conv1.w gzip \
    "param conv1.w has a filter other than the Fletcher32 checksum"
# The BN run crosses a batch change (epoch 1 at 32): step 6 is epoch 2.
_poison "BN statistics NaN" bn_stats/0 fill=nan \
    "BN statistics 0 holds" bn
_poison "BN variance -1" bn_stats/1 fill=-1 \
    "BN statistics 1 is a BN running variance and holds -1 at element 0 (a variance is >= 0)" bn
run_id=$(basename "$(ck "$tmp/base" 6)" | sed 's/^ckpt-6-\(.*\)\.h5$/\1/')

# ---- 2. junk of other runs; never another run's checkpoint ----
d=$tmp/junk && rm -rf "$d" && cp -a "$tmp/base" "$d"
head -c 5000 /dev/urandom >"$d/ckpt-9-0badf00d.h5"
"${tiny[@]}" --max-steps 1 --checkpoint-dir "$tmp/other" >"$tmp/log" 2>&1 || fail "other run: $(tail -2 "$tmp/log")"
cp "$(ck "$tmp/other" 1)" "$d/ckpt-1-0000beef.h5" # its record says another id
touch -d '1 minute' "$d/ckpt-9-0badf00d.h5" "$d/ckpt-1-0000beef.h5"
timeout 60 "${tiny[@]}" --max-steps 8 --checkpoint-dir "$d" --resume >"$tmp/log" 2>&1 ||
    fail "junk: exit $?: $(tail -3 "$tmp/log")"
grep -q "resumed from $d/ckpt-6-$run_id.h5 .*(global step 6)" "$tmp/log" ||
    fail "junk of other runs stopped the resume: $(grep -E 'resum|warning|none' "$tmp/log")"
grep -q "warning: no file named for run 0badf00d in '$d' reads as a checkpoint of that run; passing them over" "$tmp/log" ||
    fail "junk: no warning for 0badf00d: $(grep warning "$tmp/log")"
grep -Fq "does not load (it records run $(basename "$(ck "$tmp/other" 1)" | cut -c8-15), not the 0000beef of its name" "$tmp/log" ||
    fail "junk: the renamed checkpoint: $(grep warning "$tmp/log")"
# This run's own files all poisoned: no fallback to the other run's.
d=$tmp/own && rm -rf "$d" && mkdir "$d" && cp -a "$(ck "$tmp/other" 1)" "$d/"
cp -a "$(ck "$tmp/base" 4)" "$(ck "$tmp/base" 6)" "$d/"
for s in 4 6; do "$forge" "$(ck "$d" $s)" previous_lr f64=inf || fail "cannot forge $s"; done
touch -d '1 minute' "$(ck "$d" 6)"
timeout 60 "${tiny[@]}" --max-steps 8 --checkpoint-dir "$d" --resume >"$tmp/log" 2>&1
rc=$?
[ $rc = 1 ] || fail "own run poisoned: exit $rc, expected 1: $(tail -2 "$tmp/log")"
grep -q "none of the 2 checkpoints of run $run_id in '$d' loads" "$tmp/log" ||
    fail "own run poisoned: $(tail -2 "$tmp/log")"
grep -q "resumed from" "$tmp/log" && fail "own run poisoned: resumed from another run's checkpoint"

# ---- 3. not regular files ----
for kind in fifo zero socket; do
    d=$tmp/k-$kind && rm -rf "$d" && cp -a "$tmp/base" "$d"
    f=$d/ckpt-8-$run_id.h5
    case $kind in
    fifo) mkfifo "$f"; what="a FIFO" ;;
    zero) ln -s /dev/zero "$f"; what="a character device" ;;
    socket) python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$f"
        what="a socket" ;;
    esac
    timeout 60 "${tiny[@]}" --max-steps 8 --checkpoint-dir "$d" --resume >"$tmp/log" 2>&1 ||
        { fail "$kind: exit $? (124: blocked): $(tail -3 "$tmp/log")"; continue; }
    grep -Fq "warning: checkpoint $f does not load ('$f' is $what, not a regular file" "$tmp/log" ||
        fail "$kind: $(grep warning "$tmp/log")"
    grep -q "resumed from $(ck "$d" 6) " "$tmp/log" || fail "$kind: no fallback to step 6"
done

# ---- 4. a full file system ----
# In a folder whose name looks like HDF5's own errno text: HDF5 puts the
# path before the errno in its message, and the path's "errno = 13" (EACCES)
# must not be taken for it.
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    mkdir "$tmp/full"
    unshare -m sh -c 'mount -t tmpfs -o size=16k none "$1" && shift && exec "$@"' _ "$tmp/full" \
        "${tiny[@]}" --max-steps 2 --checkpoint-every 1 --checkpoint-dir "$tmp/full/ck errno = 13," >"$tmp/log" 2>&1
    rc=$?
    [ $rc = 1 ] || fail "full file system: exit $rc: $(tail -2 "$tmp/log")"
    grep -q "torus-train: checkpoint: No space left on device (ENOSPC): " "$tmp/log" ||
        fail "full file system: $(grep torus-train: "$tmp/log" | tail -2)"
else
    fail "a full file system needs root and mount namespaces (unshare -m)"
fi

# ---- 5. a long plan: its configuration record (one line per epoch, over
# 64 KiB at --epochs 984) no longer outgrows the checkpoint's attributes
# (HDF5's object header): the checkpoint is written and resumed from.
long=("${tiny[@]}" --epochs 984)
"${long[@]}" --max-steps 2 --checkpoint-every 2 --checkpoint-dir "$tmp/long" >"$tmp/log" 2>&1 ||
    fail "--epochs 984: $(grep torus-train: "$tmp/log" | tail -2)"
"${long[@]}" --max-steps 3 --checkpoint-dir "$tmp/long" --resume >"$tmp/log" 2>&1 &&
    grep -q "resumed from $tmp/long/ckpt-2-" "$tmp/log" &&
    echo "ok: --epochs 984 wrote a checkpoint and resumed from it" ||
    fail "--epochs 984, resume: $(grep torus-train: "$tmp/log" | tail -2)"

[ $fails -eq 0 ] && echo "PASS: only consistent checkpoints are trusted"
exit $((fails > 0))
