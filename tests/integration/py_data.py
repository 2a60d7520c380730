"""py_data.py DATASET DUMP DATA_DUMP: the checks of py_data.sh (see there).
DUMP is `data_dump INDEX ids` of the set: the stored 28x28 pixels in global
id order, DUMP.labels one byte per sample."""
import os
import shutil
import subprocess
import sys
import re
import tempfile

import torch

from torus.data import ShardDataset, ShardLoader, TorusDataError, permutation

ds_dir, dump, data_dump = sys.argv[1:4]
index = os.path.join(ds_dir, "train-index.txt")
PX = 28 * 28
pixels = open(dump, "rb").read()
labels = open(dump + ".labels", "rb").read()
fails = 0


def fail(msg):
    global fails
    print("FAIL:", msg)
    fails += 1


def ok(msg):
    print("ok:", msg)


ds = ShardDataset(index)
N = len(ds)
if N != 256 or len(pixels) != N * PX or len(labels) != N:
    fail(f"set of {N} images, dump {len(pixels)} bytes, {len(labels)} labels")
    sys.exit(1)


def run(loader, batches=None):
    """(ids, labels, images) of one epoch (or BATCHES batches)."""
    out = []
    for i, (x, y, ids) in enumerate(loader):
        out.append((ids.clone(), y.clone(), x.clone()))
        if batches is not None and i + 1 == batches:
            break
    return out


def labels_match(epoch, what):
    for ids, y, _ in epoch:
        want = torch.tensor([labels[i] for i in ids.tolist()])
        if not torch.equal(want, y):
            fail(f"{what}: labels differ from data_dump's at ids {ids.tolist()}")
            return


# 1. Every sample exactly once per epoch across 4 ranks (train: even
# slices of 64, batch 16; eval: batch 10, partial batches kept), and the
# train labels are the stored ones.
for train, bs in ((True, 16), (False, 10)):
    for epoch in (0, 1):
        seen = []
        for r in range(4):
            ld = ShardLoader(ds, bs, train=train, output="uint8", seed=3, rank=r,
                             world_size=4, return_ids=True)
            ld.set_epoch(epoch)
            ep = run(ld)
            labels_match(ep, f"rank {r} train={train}")
            seen += [i for ids, _, _ in ep for i in ids.tolist()]
        if sorted(seen) != list(range(N)):
            fail(f"train={train} epoch {epoch}: 4 ranks saw {len(seen)} samples, "
                 f"{len(set(seen))} distinct, of {N}")
        else:
            ok(f"train={train} epoch {epoch}: 4 ranks saw each of {N} samples once")

# 2. The train order is libtdata's (seed, epoch) permutation, the one
# torus-train shuffles with: one rank reads it front to back.
ld = ShardLoader(ds, 16, train=True, output="uint8", seed=11, rank=0,
                 world_size=1, return_ids=True)
for epoch in (0, 1):
    got = [i for ids, _, _ in run(ld) for i in ids.tolist()]
    if got != permutation(11, epoch, N):
        fail(f"epoch {epoch}: order is not tdata_perm(11, {epoch})")
    else:
        ok(f"epoch {epoch}: order is libtdata's permutation")

# 3. Eval pixels and labels equal data_dump's (28x28, no resize); the float
# output is the same pixels normalised NCHW.
ev = ShardLoader(ds, 32, train=False, output="uint8", world_size=1, rank=0,
                 return_ids=True)
bad = 0
for ids, y, x in run(ev):
    for k, i in enumerate(ids.tolist()):
        want = torch.frombuffer(bytearray(pixels[i * PX:(i + 1) * PX]),
                                dtype=torch.uint8).view(28, 28, 1)
        bad += not torch.equal(x[k], want)
    labels_match([(ids, y, x)], "eval")
(fail if bad else ok)(f"eval uint8 pixels equal data_dump's ({bad} differ)")
evf = ShardLoader(ds, 32, train=False, output="float", world_size=1, rank=0,
                  return_ids=True)
scale, bias = evf.norm()
(_, _, xu), (_, _, xf) = run(ev, 1)[0], run(evf, 1)[0]
ref = xu.permute(0, 3, 1, 2).float() * scale[0] + bias[0]
if xf.shape != (32, 1, 28, 28) or not torch.allclose(xf, ref, rtol=1e-6, atol=1e-6):
    fail(f"float output {tuple(xf.shape)} is not the normalised uint8")
else:
    ok("float NCHW output = uint8 * scale + bias")

# 4. Same seed, same batches (ids and augmented pixels); another seed not.
def train_run(seed, batches=6):
    return run(ShardLoader(ds, 16, train=True, seed=seed, rank=1, world_size=2,
                           return_ids=True), batches)


a, b, c = train_run(5), train_run(5), train_run(6)
same = all(torch.equal(p[0], q[0]) and torch.equal(p[2], q[2]) for p, q in zip(a, b))
(ok if same else fail)("same seed: same ids and pixels")
if all(torch.equal(p[0], q[0]) for p, q in zip(a, c)):
    fail("seed 6 gave seed 5's order")

# 5. Resume: the state after 5 batches (into epoch 1) gives a new loader
# the batch the first would have given next.
ld = ShardLoader(ds, 16, train=True, seed=9, rank=2, world_size=4,
                 return_ids=True)
def stream(loader):
    while True:
        yield from loader


it = stream(ld)
for _ in range(5):
    next(it)
state = ld.state_dict()
want = next(it)
ld2 = ShardLoader(ds, 16, train=True, seed=9, rank=2, world_size=4,
                  return_ids=True)
ld2.load_state_dict(state)
got = next(iter(ld2))
if state["epoch"] != 1 or state["step"] != 1:
    fail(f"state after 5 batches of 4: {state}")
elif not (torch.equal(want[2], got[2]) and torch.equal(want[0], got[0])
          and torch.equal(want[1], got[1])):
    fail("resumed loader's next batch differs")
else:
    ok("resume at epoch 1 step 1 gives the same next batch")

# 6. Hostile input: a bad option, a truncated shard, a flipped image byte.
try:
    ShardLoader(ds, 0)
    fail("batch size 0 accepted")
except ValueError as e:  # checked in Python, before C (see the end)
    (ok if "batch_size=0" in str(e) else fail)(f"batch 0: {e}")
work = tempfile.mkdtemp()
bad_dir = os.path.join(work, "ds")
shutil.copytree(ds_dir, bad_dir)
shard = os.path.join(bad_dir, "train-00001-of-00003.h5")
with open(shard, "r+b") as f:
    f.truncate(os.path.getsize(shard) // 2)
try:
    ShardDataset(os.path.join(bad_dir, "train-index.txt"))
    fail("truncated shard accepted")
except TorusDataError as e:
    (ok if "train-00001-of-00003.h5" in str(e) else fail)(f"truncated shard: {e}")
shutil.rmtree(bad_dir)
shutil.copytree(ds_dir, bad_dir)
bindex = os.path.join(bad_dir, "train-index.txt")
path, off = subprocess.run([data_dump, bindex, "addr", "77"], check=True,
                           capture_output=True, text=True).stdout.split()
with open(path, "r+b") as f:
    f.seek(int(off))
    v = f.read(1)[0]
    f.seek(int(off))
    f.write(bytes([v ^ 0x40]))
child = """
import sys
from torus.data import ShardLoader, TorusDataError
ld = ShardLoader(sys.argv[1], 32, train=False, world_size=1, rank=0,
                 max_bad=int(sys.argv[2]))
try:
    n = sum(len(y) for _, y in ld)
except TorusDataError as e:
    print("raised:", e)
    sys.exit(3)
print("samples", n, "bad", ld.stats()["bad"])
"""
p = subprocess.run([sys.executable, "-c", child, bindex, "-1"],
                   capture_output=True, text=True)
want = (r"tdata: bad sample 77: shard .*train-0000[0-2]-of-00003.h5 index \d+ "
        r"\(idx-train-images-idx3-ubyte.gz#\d+\): CRC32C mismatch; skipped\n")
if (p.returncode or "samples 255 bad 1" not in p.stdout
        or len(re.findall(want, p.stderr)) != 1):
    fail(f"corrupt sample: rc {p.returncode} {p.stdout!r} {p.stderr!r}")
else:
    ok("corrupt sample skipped and logged as torus-train logs it")
p = subprocess.run([sys.executable, "-c", child, bindex, "0"],
                   capture_output=True, text=True)
if p.returncode != 3 or "more than --max-bad=0 bad samples" not in p.stdout:
    fail(f"max_bad=0: rc {p.returncode} {p.stdout!r}")
else:
    ok("max_bad=0 raises TorusDataError")
shutil.rmtree(work)

# drop_last means PyTorch's: eval leaves out its partial last batch only
# under drop_last=True (and len() says so); train batches are always full,
# so train=True refuses drop_last=False; even_slices is train's.
def sizes(ld):
    return [len(y) for _, y, _ in ld]


for kw, want in (({}, [100, 100, 56]), ({"drop_last": False}, [100, 100, 56]),
                 ({"drop_last": True}, [100, 100])):
    ld = ShardLoader(ds, 100, train=False, world_size=1, rank=0, return_ids=True, **kw)
    got = sizes(ld)
    if got != want or len(ld) != len(want):
        fail(f"eval {kw}: batches {got}, len {len(ld)}; want {want}")
    else:
        ok(f"eval {kw}: batches {got}")
ld = ShardLoader(ds, 40, train=False, world_size=3, rank=2, drop_last=True, return_ids=True)
if sizes(ld) != [40, 40] or len(ld) != 2:
    fail(f"eval drop_last on rank 2 of 3 (86 samples): {sizes(ld)}, len {len(ld)}")
ld = ShardLoader(ds, 100, train=True, world_size=1, rank=0, drop_last=True, return_ids=True)
if sizes(ld) != [100, 100]:
    fail(f"train drop_last=True: {sizes(ld)}")


def refused(what, fn, word):
    try:
        fn()
    except ValueError as e:
        if word in str(e):
            ok(f"{what} refused: {e}")
            return
        fail(f"{what}: the message '{e}' does not name {word}")
        return
    fail(f"{what} was accepted")


refused("train=True, drop_last=False", lambda: ShardLoader(
    ds, 16, train=True, world_size=1, rank=0, drop_last=False), "drop_last")
refused("train=False, even_slices=True", lambda: ShardLoader(
    ds, 16, train=False, world_size=1, rank=0, even_slices=True), "even_slices")

# Arguments are checked before they reach C: a negative epoch would wrap to
# 2^64 - 1 (once the loader's "no permutation" marker: a segfault in its
# I/O thread), and a negative size or seed would wrap too.
ld = ShardLoader(ds, 16, train=True, world_size=1, rank=0)
refused("set_epoch(-1)", lambda: ld.set_epoch(-1), "epoch")
refused("a state dict of epoch -1", lambda: ld.load_state_dict(
    dict(ld.state_dict(), epoch=-1)), "epoch")
refused("a state dict of step -3", lambda: ld.load_state_dict(
    dict(ld.state_dict(), step=-3)), "step")
refused("set_epoch(1.5)", lambda: ld.set_epoch(1.5), "epoch")
# The loader's last epoch is 2^63 - 1 (libtdata refuses later ones).
refused("set_epoch(2**63)", lambda: ld.set_epoch(1 << 63), "epoch")
refused("a state dict of epoch 2**63", lambda: ld.load_state_dict(
    dict(ld.state_dict(), epoch=1 << 63)), "epoch")
for name, kw in (("seed", {"seed": -1}), ("batch_size", {"batch_size": 0}),
                 ("batch_size", {"batch_size": -16}), ("rank", {"rank": -1}),
                 ("world_size", {"world_size": 0}), ("rank", {"rank": 4, "world_size": 4}),
                 ("io_threads", {"io_threads": -1}), ("image_size", {"image_size": -28}),
                 ("max_bad", {"max_bad": -2}), ("batch_size", {"batch_size": 1 << 40})):
    args = dict({"batch_size": 16, "train": True, "world_size": 1, "rank": 0}, **kw)
    refused(f"ShardLoader({kw})", lambda: ShardLoader(ds, **args), name)
refused("permutation(-1, 0, 5)", lambda: permutation(-1, 0, 5), "seed")
refused("permutation(0, -1, 5)", lambda: permutation(0, -1, 5), "epoch")
print(f"{fails} failures")
sys.exit(1 if fails else 0)
