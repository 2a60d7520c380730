#!/bin/bash
# py_checkpoint.sh: torus.checkpoint, torus-train -> PyTorch -> torus-train
# with a torchvision ResNet-18 (32x32, 10 classes, 2 steps of torus-train):
#   load() puts the checkpoint's weights into torchvision's resnet18 bit for
#   bit; save(like=the checkpoint) writes params, momentum, BN statistics
#   and attributes equal to the original's bit for bit; torus-train
#   --resume from that file ends on the state hash of a resume from the
#   original, and from a file saved after one weight was changed it does
#   not (the check can fail); a file that is no checkpoint raises
#   ConvertError naming it.
set -u
. "${top_srcdir:?run through make check}/tests/integration/py_lib.sh"
"$PY" -c 'import h5py, numpy, torchvision' 2>/dev/null ||
    { echo "SKIP: $PY lacks h5py, numpy or torchvision (tools/install-deps)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
train=("$top_builddir/trainer/torus-train" --synthetic --dataset-size 32 --epochs 1
       --batch 8 --threads 1 --warmup-epochs 0 --model resnet18 --image-size 32 --classes 10)
"${train[@]}" --max-steps 2 --checkpoint-dir "$tmp/orig" >"$tmp/log" 2>&1 ||
    fail "torus-train: $(tail -3 "$tmp/log")"
ck=$(ls "$tmp"/orig/ckpt-2-*.h5) || fail "no checkpoint of step 2"
mkdir "$tmp/back" "$tmp/changed"
echo "not a checkpoint" >"$tmp/junk.h5"
"$PY" - "$ck" "$tmp/back" "$tmp/changed" "$tmp/junk.h5" <<'PYEOF' || fail "round trip (above)"
import sys
import h5py, torch, torchvision
import torus.checkpoint as tc
ck, back, changed, junk = sys.argv[1:]
m = torchvision.models.resnet18(num_classes=10)
tc.load(ck, m, name="resnet18")
with h5py.File(ck) as f:
    w = f["params"]["layer3.1.conv2.w"][...]
    assert m.layer3[1].conv2.weight.detach().numpy().reshape(-1).tobytes() == w.tobytes()
    assert int(m.bn1.num_batches_tracked) == int(f.attrs["global_step"]) == 2
print("ok: load() into torchvision resnet18: weights bit for bit, BN step 2")
out = tc.save(torch.nn.parallel.DataParallel(m), back, "resnet18", like=ck)
with h5py.File(ck) as f, h5py.File(out) as g:
    assert {k: str(v) for k, v in f.attrs.items()} == {k: str(v) for k, v in g.attrs.items()}
    for grp in ("params", "momentum", "bn_stats"):
        assert set(f[grp]) == set(g[grp]), grp
        for k in f[grp]:
            assert f[grp][k][...].tobytes() == g[grp][k][...].tobytes(), (grp, k)
print(f"ok: save(like=) wrote {out}: params, momentum, BN statistics, attributes bit for bit")
with torch.no_grad():
    m.fc.bias[3] += 0.25
tc.save(m, changed, "resnet18", like=ck)
try:
    tc.load(junk, m)
    sys.exit("a file that is no checkpoint loaded")
except tc.ConvertError as e:
    assert junk in str(e), e
    print(f"ok: not a checkpoint: {e}")
PYEOF
for d in orig back changed; do
    "${train[@]}" --max-steps 3 --checkpoint-dir "$tmp/$d" --resume >"$tmp/$d.log" 2>&1 ||
        fail "resume from $d: $(tail -3 "$tmp/$d.log")"
    grep -q "resumed from .*ckpt-2-" "$tmp/$d.log" || fail "$d: did not resume at step 2: $(tail -3 "$tmp/$d.log")"
done
hash() { grep -o 'state hash [0-9a-f]*' "$1"; }
h=$(hash "$tmp/orig.log")
[ -n "$h" ] && [ "$h" = "$(hash "$tmp/back.log")" ] ||
    fail "resume from the saved model: '$(hash "$tmp/back.log")', from the original: '$h'"
[ "$h" != "$(hash "$tmp/changed.log")" ] || fail "a changed weight resumed to the original's state hash"
echo "ok: torus-train --resume from the saved model ends on $h as from the original; a changed one does not"
