#!/bin/bash
# oracle.sh: PyTorch as the engine's oracle, on the CPU, and torus-torch.
#  - oracle-check: the dnnl engine's one training step (logits, loss, every
#    gradient, BN statistics, the SGD step) equals PyTorch fp32's within
#    the stated tolerances, for the CIFAR ResNet-8 and for ResNet-50 at
#    64 px; with one torch layer deliberately wrong (--break) it FAILS.
#  - torus-torch: checkpoints of torus-train (cifar-resnet, 1 input channel;
#    resnet18) export to state dicts that load strict into the PyTorch
#    models (and torchvision's resnet50 state dict goes there and back),
#    import back --like themselves bit for bit (every dataset and
#    attribute), import fresh with the same weights and zero momentum, and
#    torus-train --resume from an imported checkpoint ends on the state
#    hash of the resume from the original; a checkpoint of another model,
#    a state dict of another shape and a pickle that would run code are
#    refused.
# Needs python3 with torch, torchvision, h5py and numpy (tools/install-deps).
set -u
b=${top_builddir:?} s=${top_srcdir:?}
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch, torchvision, h5py, numpy' 2>/dev/null; then
    echo "SKIP: $py lacks torch, torchvision, h5py or numpy (tools/install-deps installs them)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
oc=("$py" "$s/tests/oracle/oracle-check" --dump "$b/tests/oracle/teng_dump" --threads 2)
tt=("$py" "$s/tools/torus-torch")
# torus-torch checks and names checkpoints through the build tree's libtorusdata.
export TORUS_PYTHONPATH=$s/python TORUS_LIBDIR=$b/data/.libs OMP_NUM_THREADS=2

# ---- the oracle: 8 rows, all PASS
check() { # NAME EXPECTED-RC ARGS...: runs oracle-check, checks its exit and rows
    local name=$1 want=$2
    shift 2
    "${oc[@]}" "$@" >"$tmp/$name.out" 2>&1
    local rc=$?
    cat "$tmp/$name.out"
    [ $rc -eq "$want" ] || fail "$name: oracle-check exited $rc, not $want"
    [ "$(grep -c '^ROW [a-z.]* \(PASS\|FAIL\) ' "$tmp/$name.out")" -eq 8 ] ||
        fail "$name: not 8 ROW lines"
}
check cifar 0 --backend dnnl --model cifar-resnet8
check resnet50 0 --backend dnnl --model resnet50 --px 64
# A wrong layer: its gradients, those upstream and the step fail.
check broken 1 --backend dnnl --model cifar-resnet8 --break layer2.0.conv1
for row in grad.conv grad.bn step; do
    grep -q "^ROW $row FAIL" "$tmp/broken.out" || fail "--break: row $row did not fail"
done
"${oc[@]}" --backend dnnl --model resnet50 --px 4 >/dev/null 2>&1
[ $? -eq 2 ] || fail "oracle-check --px 4 is not a usage error (exit 2)"
# Without a GPU in PyTorch the GPU rows are N/A (3), never a pass.
if ! "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    "${oc[@]}" --backend cuda --model cifar-resnet8 >"$tmp/log" 2>&1
    [ $? -eq 3 ] || fail "oracle-check --backend cuda without CUDA is not N/A (3): $(cat "$tmp/log")"
fi

# ---- torus-torch round trips
train=("$b/trainer/torus-train" --synthetic --dataset-size 32 --epochs 1 --batch 8
       --threads 2 --warmup-epochs 0)
cifar=(--model cifar-resnet --depth 8 --image-size 12)
"${train[@]}" "${cifar[@]}" --max-steps 2 --checkpoint-dir "$tmp/a" >"$tmp/log" 2>&1 ||
    fail "training cifar-resnet: $(tail -3 "$tmp/log")"
ck=$(ls "$tmp"/a/ckpt-2-*.h5)
"${tt[@]}" export "$ck" "$tmp/c.pt" --model cifar-resnet || fail "export cifar-resnet"
mkdir "$tmp/b"
"${tt[@]}" import "$tmp/c.pt" "$tmp/b" --model cifar-resnet --like "$ck" || fail "import --like"
"${tt[@]}" import "$tmp/c.pt" "$tmp/fresh.h5" --model cifar-resnet --image-size 12 ||
    fail "import (fresh)"
"${train[@]}" --model resnet18 --image-size 32 --classes 10 --max-steps 1 \
    --checkpoint-dir "$tmp/r18" >"$tmp/log" 2>&1 || fail "training resnet18: $(tail -3 "$tmp/log")"
ck18=$(ls "$tmp"/r18/ckpt-1-*.h5)
"${tt[@]}" export "$ck18" "$tmp/r18.pt" --model resnet18 || fail "export resnet18"
"${tt[@]}" import "$tmp/r18.pt" "$tmp/r18b.h5" --model resnet18 --like "$ck18" ||
    fail "import resnet18 --like"
"$py" - "$ck" "$tmp/b/$(basename "$ck")" "$tmp/fresh.h5" "$tmp/c.pt" \
    "$ck18" "$tmp/r18b.h5" "$tmp/r18.pt" <<'EOF' || fail "round trips (above)"
import sys, h5py, numpy as np, torch, torchvision
sys.path.insert(0, __import__("os").environ["TORUS_PYTHONPATH"])
from torus.checkpoint_convert import CifarResNet
ck, back, fresh, pt, ck18, back18, pt18 = sys.argv[1:]
def same(a, b, groups, attrs=True):
    with h5py.File(a) as f, h5py.File(b) as g:
        if attrs:
            fa, ga = dict(f.attrs), dict(g.attrs)
            assert fa.keys() == ga.keys() and all(str(fa[k]) == str(ga[k]) for k in fa), (a, b)
        for grp in groups:
            assert set(f[grp]) == set(g[grp]), (grp, a, b)
            for k in f[grp]:
                x, y = f[grp][k][...], g[grp][k][...]
                assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (b, grp, k)
            print("ok: %s: %s/ the same bit for bit (%d tensors)" % (b, grp, len(f[grp])))
same(ck, back, ("params", "momentum", "bn_stats"))
same(ck18, back18, ("params", "momentum", "bn_stats"))
same(ck, fresh, ("params", "bn_stats"), attrs=False)
with h5py.File(fresh) as f:
    assert all(not f["momentum"][k][...].any() for k in f["momentum"]), "fresh momentum"
    assert f.attrs["global_step"] == 0
m = CifarResNet(8, in_channels=1, classes=10)
m.load_state_dict(torch.load(pt), strict=True)
torchvision.models.resnet18(num_classes=10).load_state_dict(torch.load(pt18), strict=True)
sd = torch.load(pt)
with h5py.File(ck) as f:
    assert int(sd["bn1.num_batches_tracked"]) == int(f.attrs["global_step"])
    assert np.array_equal(sd["layer1.0.conv2.weight"].numpy().reshape(-1),
                          f["params"]["layer1.0.conv2.w"][...])
print("ok: strict loads into CifarResNet(8, 1 channel) and torchvision resnet18")
# ResNet-50's names both ways, without a checkpoint: torchvision's state
# dict -> torus tensors -> a state dict that loads strict, the same values.
from torus import checkpoint_convert as cc
m50 = torchvision.models.resnet50(num_classes=10)
spec = cc.spec_from_state_dict("resnet50", m50.state_dict())
params, stats = cc.from_state_dict(spec, m50.state_dict())
sd50 = cc.to_state_dict(spec, params, stats, 7)
torchvision.models.resnet50(num_classes=10).load_state_dict(sd50, strict=True)
for k, v in m50.state_dict().items():
    assert k.endswith("num_batches_tracked") or torch.equal(v, sd50[k]), k
assert len(params) == 161 and len(stats) == 106, (len(params), len(stats))
print("ok: resnet50: 161 tensors and 106 statistics there and back, strict load")
EOF

# torus-train --resume from the imported checkpoint: the run goes on as
# from the original.
mkdir "$tmp/orig" && cp "$ck" "$tmp/orig/"
for d in orig b; do
    "${train[@]}" "${cifar[@]}" --max-steps 4 --checkpoint-dir "$tmp/$d" --resume \
        >"$tmp/$d.log" 2>&1 || fail "resume from $d: $(tail -3 "$tmp/$d.log")"
    grep -q "resumed from .*ckpt-2-" "$tmp/$d.log" || fail "$d: did not resume at step 2"
done
h1=$(grep -o 'state hash [0-9a-f]*' "$tmp/orig.log") h2=$(grep -o 'state hash [0-9a-f]*' "$tmp/b.log")
[ -n "$h1" ] && [ "$h1" = "$h2" ] || fail "resume from the import: '$h2', from the original: '$h1'"
echo "ok: --resume from the imported checkpoint ends on $h2 as from the original"

# A checkpoint of another model, and a state dict of another shape, are refused.
"${tt[@]}" export "$ck" "$tmp/x.pt" --model resnet50 >"$tmp/log" 2>&1
[ $? -eq 1 ] && grep -q "holds model cifar-resnet, not resnet50" "$tmp/log" ||
    fail "export of the wrong model: $(cat "$tmp/log")"
"${tt[@]}" import "$tmp/r18.pt" "$tmp/y.h5" --model cifar-resnet >"$tmp/log" 2>&1
[ $? -eq 1 ] || fail "import of resnet18 weights as cifar-resnet: $(cat "$tmp/log")"
# A pickle that would run code when loaded is refused, not run.
"$py" -c 'import sys, torch
class Evil:
    def __reduce__(self): return (print, ("EVIL CODE RAN",))
torch.save({"conv1.weight": Evil()}, sys.argv[1])' "$tmp/evil.pt"
"${tt[@]}" import "$tmp/evil.pt" "$tmp/z.h5" --model resnet18 >"$tmp/log" 2>&1
[ $? -eq 1 ] && ! grep -q "EVIL CODE RAN" "$tmp/log" && [ ! -e "$tmp/z.h5" ] ||
    fail "a hostile pickle: $(cat "$tmp/log")"
"${tt[@]}" export "$ck" >/dev/null 2>&1
[ $? -eq 2 ] || fail "torus-torch with a missing argument is not a usage error"
[ $fails -eq 0 ] && echo "PASS: oracle and torus-torch"
[ $fails -eq 0 ]
