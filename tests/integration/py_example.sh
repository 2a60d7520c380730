#!/bin/bash
# py_example.sh: examples/pytorch/train_imagenet.py (torchvision ResNet-18
# at 28x28 here) runs as 2 ranks on this host (torch's env:// rendezvous,
# the grid one row per host), with the loader, the torus hook and LARS:
#   a run of 6 steps, and a run stopped at step 3 then resumed from its
#   checkpoint to step 6, print the same losses at steps 4 to 6 (model,
#   LARS momentum and the loader's position all come back);
#   the resumed run says where it resumed, and at the end of the epoch
#   (step 8) prints the test top-1 (every rank's counts summed).
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
py_idx_dataset "$tmp/ds" 64 2 train || exit 1
py_idx_dataset "$tmp/ds" 20 1 test || exit 1
ex=$top_srcdir/examples/pytorch/train_imagenet.py
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fail() { echo "FAIL: $*"; exit 1; }
run2() { # NAME ARGS...: 2 ranks, rank 0's output in $tmp/NAME.0
    local name=$1 r pids=()
    shift
    for r in 0 1; do
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo RANK=$r WORLD_SIZE=2 \
            timeout 300 "$PY" "$ex" --data "$tmp/ds" --arch resnet18 --image-size 28 \
            --batch 8 --epochs 2 --print-every 1 --threads 1 "$@" >"$tmp/$name.$r" 2>&1 &
        pids+=($!)
    done
    wait "${pids[0]}" || fail "$name: rank 0: $(tail -5 "$tmp/$name.0")"
    wait "${pids[1]}" || fail "$name: rank 1: $(tail -5 "$tmp/$name.1")"
    port=$((port + 1))
}
losses() { sed -n 's/^epoch 0 step \([4-6]\) loss \([^ ]*\) .*/\1 \2/p' "$1"; }
run2 whole --max-steps 6
run2 first --max-steps 3 --checkpoint "$tmp/ck.pt"
grep -q '^2 ranks, grid 1x2 (hosts), hook torus2d wire fp16, 8 steps per epoch' "$tmp/first.0" ||
    fail "banner: $(head -3 "$tmp/first.0")"
run2 resumed --max-steps 9 --checkpoint "$tmp/ck.pt"
grep -q '^resumed at epoch 0 step 3 (global step 3)' "$tmp/resumed.0" ||
    fail "no resume line: $(head -3 "$tmp/resumed.0")"
[ "$(losses "$tmp/whole.0" | wc -l)" = 3 ] || fail "expected losses of steps 4-6: $(cat "$tmp/whole.0")"
[ "$(losses "$tmp/whole.0")" = "$(losses "$tmp/resumed.0")" ] ||
    fail "resumed losses differ: $(losses "$tmp/whole.0" | tr '\n' ' ') vs $(losses "$tmp/resumed.0" | tr '\n' ' ')"
echo "ok: stopped at 3 and resumed: the losses of steps 4-6 equal an uninterrupted run's"
grep -Eq '^epoch 0 test top-1 [0-9.]+%' "$tmp/resumed.0" || fail "no evaluation: $(tail -3 "$tmp/resumed.0")"
echo "ok: $(grep 'test top-1' "$tmp/resumed.0")"
