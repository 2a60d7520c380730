#!/bin/bash
# py_example.sh: examples/pytorch/train_imagenet.py (torchvision ResNet-18
# at 28x28 here) runs as 2 ranks on this host (torch's env:// rendezvous,
# the grid one row per host), with the loader, the torus hook and LARS:
#   a run of 6 steps, and a run stopped at step 3 then resumed from its
#   checkpoint to step 6, print the same losses at steps 4 to 6 (model,
#   LARS momentum and the loader's position all come back);
#   the resumed run says where it resumed, and at the end of the epoch
#   (step 8) prints the test top-1 (every rank's counts summed);
#   SIGUSR1 to a rank stops both at one step boundary with a checkpoint
#   and exit status 3;
#   planted checkpoints run no code: a pickle whose __reduce__ would
#   create a file is refused by the safe loader (the file never appears),
#   a TorchScript archive is refused before it is read, and a file that
#   others may write is refused.
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
grep -q '^2 ranks on cpu (gloo), grid 1x2 (hosts), hook torus2d wire fp16, 8 steps per epoch' "$tmp/first.0" ||
    fail "banner: $(head -3 "$tmp/first.0")"
run2 resumed --max-steps 9 --checkpoint "$tmp/ck.pt"
grep -q "^resumed from $tmp/ck.pt at epoch 0 step 3 (global step 3)" "$tmp/resumed.0" ||
    fail "no resume line: $(head -3 "$tmp/resumed.0")"
[ "$(losses "$tmp/whole.0" | wc -l)" = 3 ] || fail "expected losses of steps 4-6: $(cat "$tmp/whole.0")"
[ "$(losses "$tmp/whole.0")" = "$(losses "$tmp/resumed.0")" ] ||
    fail "resumed losses differ: $(losses "$tmp/whole.0" | tr '\n' ' ') vs $(losses "$tmp/resumed.0" | tr '\n' ' ')"
echo "ok: stopped at 3 and resumed: the losses of steps 4-6 equal an uninterrupted run's"
grep -Eq '^epoch 0 test top-1 [0-9.]+%' "$tmp/resumed.0" || fail "no evaluation: $(tail -3 "$tmp/resumed.0")"
echo "ok: $(grep 'test top-1' "$tmp/resumed.0")"

# A signal: USR1 to rank 1 only; both stop at the same step, exit 3.
pids=()
for r in 0 1; do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo RANK=$r WORLD_SIZE=2 \
        timeout 300 "$PY" "$ex" --data "$tmp/ds" --arch resnet18 --image-size 28 \
        --batch 8 --epochs 50 --print-every 1 --threads 1 --checkpoint "$tmp/sig.pt" >"$tmp/sig.$r" 2>&1 &
    pids+=($!)
done
for _ in $(seq 600); do grep -q '^epoch 0 step 2 ' "$tmp/sig.0" && break; sleep 0.2; done
# The python under rank 1's timeout (timeout itself would die of USR1).
kill -USR1 "$(pgrep -P "${pids[1]}")"
rcs=""
for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
port=$((port + 1))
[ "$rcs" = " 3 3" ] && grep -q '^stopped by signal 10 at global step [0-9]* after writing a checkpoint' "$tmp/sig.0" &&
    [ -s "$tmp/sig.pt" ] || fail "USR1: exit statuses$rcs: $(tail -n 3 "$tmp/sig.0" "$tmp/sig.1")"
echo "ok: $(grep '^stopped by signal' "$tmp/sig.0"), both ranks exit 3"

# Planted checkpoints: one rank resumes from each; none may run code.
refused() { # FILE WHAT
    local out
    out=$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo RANK=0 WORLD_SIZE=1 \
        timeout 300 "$PY" "$ex" --data "$tmp/ds" --arch resnet18 --image-size 28 \
        --batch 8 --epochs 1 --max-steps 1 --threads 1 --checkpoint "$1" 2>&1) &&
        fail "resumed from the planted $1: $out"
    port=$((port + 1))
    grep -q "$2" <<<"$out" || fail "planted $1: expected '$2': $(tail -3 <<<"$out")"
    echo "ok: planted $(basename "$1") refused: $(grep -o "$2.*" <<<"$out" | head -1 | cut -c1-100)"
}
"$PY" - "$tmp" <<'PYEOF' || fail "cannot write the planted checkpoints"
import os, sys, torch
t = sys.argv[1]
class Plant:
    def __reduce__(self):
        return (os.system, (f"touch {t}/pwned",))
torch.save({"format": "torus-example-1", "model": Plant()}, f"{t}/pickle.pt")
torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), f"{t}/script.pt")
torch.save({"format": "torus-example-1"}, f"{t}/shared.pt")
os.chmod(f"{t}/shared.pt", 0o666)
PYEOF
chmod 600 "$tmp/pickle.pt" "$tmp/script.pt"
refused "$tmp/pickle.pt" 'refused by torch.load(weights_only=True)'
[ ! -e "$tmp/pwned" ] || fail "the planted pickle ran its code ($tmp/pwned exists)"
refused "$tmp/script.pt" "which no plain checkpoint holds (a TorchScript archive"
refused "$tmp/shared.pt" "writable by others (mode 666)"
echo "PASS: train_imagenet.py: resume, signal, and planted checkpoints refused"
