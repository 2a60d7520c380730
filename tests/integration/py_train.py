"""py_train.py: run by every rank of py_train.sh (srun, 4 ranks on 2
nodes). Trains two copies of a small CNN on Fashion-MNIST from the same
seed, side by side on the same batches of one torus.data ShardLoader:
  "ddp"   DDP with its default all-reduce (gloo);
  "torus" DDP with torus_allreduce_hook (fp16 wire) on the plugin's grid.
Every batch goes through both models in turn, so data, order and
augmentation are the same by construction. After --epochs epochs both are
evaluated on the whole test set (every rank a slice, counts summed).

Checks (exit 1 on every rank if any fails):
  the final test accuracies differ by at most --max-diff points, and both
      exceed --min-acc (the models did learn);
  the losses of the first 5 steps agree within 1e-3 relative (fp16
      rounding moves them far less; a hook that sums instead of
      averaging, or leaves a bucket out, moves them far more);
  the torus model's weights are bitwise the same on every rank (each
      rank applies the same averaged gradient);
  the hook ran on every bucket of every step.
Rank 0 prints one line per epoch and a final "result:" line."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torus.distributed as td
from torus.data import ShardDataset, ShardLoader


class SmallCNN(torch.nn.Module):
    """Two 3x3 conv blocks and a linear classifier, laid out as torchvision
    lays out its models (features, then classifier)."""

    def __init__(self, channels=1, classes=10, size=28):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(channels, 8, 3, padding=1), torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(2))
        self.classifier = torch.nn.Linear(16 * (size // 4) ** 2, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.05, help="peak, decays linearly to 0")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-diff", type=float, default=0.5)
    p.add_argument("--min-acc", type=float, default=80.0)
    return p.parse_args()


def accuracy(models, loader):
    counts = torch.zeros(len(models) + 1)
    with torch.no_grad():
        for x, y in loader:
            for i, m in enumerate(models):
                counts[i] += (m(x).argmax(1) == y).sum().item()
            counts[-1] += len(y)
    dist.all_reduce(counts)
    return [100.0 * c / counts[-1].item() for c in counts[:-1].tolist()], int(counts[-1])


def weights_agree(model):
    """True when every rank holds bitwise rank 0's parameters."""
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    theirs = mine.clone()
    dist.broadcast(theirs, 0)
    same = torch.tensor([int(torch.equal(mine, theirs))])
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    return bool(same.item())


def main():
    a = parse()
    torch.set_num_threads(1)
    grid = td.init_from_env(backend="gloo")
    me, world = dist.get_rank(), dist.get_world_size()
    train_set = ShardDataset(os.path.join(a.data, "train-index.txt"))
    test_set = ShardDataset(os.path.join(a.data, "test-index.txt"))
    train = ShardLoader(train_set, a.batch, train=True, seed=a.seed)
    test = ShardLoader(test_set, 500, train=False)
    say = print if me == 0 else (lambda *x, **k: None)
    say(f"grid {grid}; {world} ranks x {a.batch} = global batch {a.batch * world}, "
        f"{len(train)} steps per epoch ({len(train) * a.batch * world} of "
        f"{len(train_set)} images: the loader's even slices, as torus-train), "
        f"{a.epochs} epochs, seed {a.seed}", flush=True)

    # Small buckets, several per step as a real model has (DDP's first
    # bucket would otherwise hold 1 MiB, the whole model).
    dist._DEFAULT_FIRST_BUCKET_BYTES = 4096
    models, opts = {}, {}
    for name in ("ddp", "torus"):
        torch.manual_seed(a.seed)
        models[name] = DDP(SmallCNN(train_set.channels, len(train_set.classes),
                                    train_set.height), bucket_cap_mb=0.01)
        opts[name] = torch.optim.SGD(models[name].parameters(), lr=a.lr, momentum=0.9)
    calls = []  # (step, bucket index) of every hook call

    def hook(state, bucket):
        calls.append((step, bucket.index()))
        return td.torus_allreduce_hook(state, bucket)
    models["torus"].register_comm_hook(td.TorusHookState(grid, "fp16"), hook)

    fails, first, t0 = [], {n: [] for n in models}, time.time()
    step = 0
    while train.epoch < a.epochs:
        epoch, sums = train.epoch, {n: 0.0 for n in models}
        for x, y in train:
            # Linear decay to 0: the last steps are small, so the final
            # accuracy is the run's, not the noise of its last few steps.
            lr = a.lr * (1 - step / (a.epochs * len(train)))
            for name, m in models.items():
                for g in opts[name].param_groups:
                    g["lr"] = lr
                loss = torch.nn.functional.cross_entropy(m(x), y)
                opts[name].zero_grad(set_to_none=True)
                loss.backward()
                opts[name].step()
                sums[name] += loss.item()
                if step < 5:
                    first[name].append(loss.item())
            step += 1
        say(f"epoch {epoch}: mean train loss ddp {sums['ddp'] / len(train):.4f} "
            f"torus {sums['torus'] / len(train):.4f} ({time.time() - t0:.0f} s)", flush=True)
    for m in models.values():
        m.eval()
    (acc_ddp, acc_torus), seen = accuracy([models["ddp"], models["torus"]], test)
    diff = acc_torus - acc_ddp
    say(f"result: test accuracy ddp {acc_ddp:.2f}% torus {acc_torus:.2f}% "
        f"diff {diff:+.2f} points over {seen} test images; {step} steps, "
        f"{len(calls)} hook calls ({len(set(b for _, b in calls))} buckets), "
        f"{time.time() - t0:.0f} s", flush=True)

    if seen != len(test_set):
        fails.append(f"evaluated {seen} test images, the set has {len(test_set)}")
    if abs(diff) > a.max_diff:
        fails.append(f"accuracy differs by {diff:+.2f} points (at most {a.max_diff})")
    if min(acc_ddp, acc_torus) < a.min_acc:
        fails.append(f"an accuracy is below {a.min_acc}%: did it train?")
    for s, (l0, l1) in enumerate(zip(first["ddp"], first["torus"])):
        if abs(l0 - l1) > 1e-3 * abs(l0):
            fails.append(f"step {s + 1}: loss ddp {l0:.6f} torus {l1:.6f}")
    if not weights_agree(models["torus"]):
        fails.append("the torus model's weights differ between ranks")
    for s in range(step):
        got = sorted(b for t, b in calls if t == s)
        if not got or got != list(range(len(got))):
            fails.append(f"step {s + 1}: the hook ran on buckets {got}")
            break
    for f in fails:
        print(f"FAIL: rank {me}: {f}", flush=True)
    bad = torch.tensor([len(fails)])
    dist.all_reduce(bad)
    dist.destroy_process_group()
    return 1 if bad.item() else 0


if __name__ == "__main__":
    sys.exit(main())
