#!/usr/bin/env python3
"""train_imagenet.py: a torchvision model (ResNet-50 by default) trained
data-parallel with torus's pieces: torus.data's ShardLoader over a
torus-pack'ed set (train-index.txt and test-index.txt in --data),
torus.distributed's grid and 2D-torus all-reduce hook, and LARS with a
linear warmup and polynomial decay (the large-batch recipe).

Launch one process per task, as jobs/train-pytorch.sbatch does:
    srun --mpi=pmix --torus=auto python3 train_imagenet.py --data DIR
with MASTER_ADDR and MASTER_PORT set for torch's env:// rendezvous.
Each rank computes on its own GPU (torus.distributed.local_device: the
plugin's TORUS_LOCAL_GPU or the local rank) with NCCL, model and batches
on it; without a GPU on the CPU with gloo. A rank that Slurm granted GPUs
it cannot use stops, saying why, rather than training on the CPU.
Rank 0 prints one line per --print-every steps and the test top-1 after
every epoch. With --checkpoint FILE, rank 0 saves the model, the
optimizer's momentum and the loader position there after every epoch, at
--max-steps and on SIGUSR1/SIGTERM (then the run exits with status 3, at
the first step boundary any rank saw the signal), and a run that finds
FILE resumes from it (the loader's next batch is the one the saved run
would have taken). The file holds tensors, ints and strings only, and is
loaded with torch.load(weights_only=True) after checking that it is a
regular file of this user, written by no one else, and a plain tensor
archive (a TorchScript archive, whose code torch 1.13 runs even under
weights_only, is refused before it is read): a planted file runs no code.
"""
import argparse
import math
import os
import re
import signal
import stat
import sys
import time
import zipfile

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

import torus.distributed as td
from torus.data import ShardDataset, ShardLoader


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="torus-pack output folder")
    p.add_argument("--arch", default="resnet50", help="torchvision model [resnet50]")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch", type=int, default=256, help="global batch [256]")
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("--lr", type=float, default=2.0, help="LARS base LR at batch 256 [2.0]")
    p.add_argument("--warmup-epochs", type=float, default=2.0)
    p.add_argument("--weight-decay", type=float, default=5e-5)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--eta", type=float, default=0.001, help="LARS trust coefficient")
    p.add_argument("--hook", default="torus2d", choices=("torus2d", "hierarchical", "ddp"))
    p.add_argument("--wire", default="fp16", choices=("fp16", "fp32"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads [torch's]")
    p.add_argument("--decode-threads", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this global step")
    p.add_argument("--print-every", type=int, default=50)
    p.add_argument("--checkpoint", help="save/resume file")
    return p.parse_args()


class LARS(torch.optim.Optimizer):
    """SGD with momentum and layer-wise trust ratios (You et al.): weights
    of rank >= 2 get lr * eta ||w|| / (||g|| + wd ||w||) and weight decay;
    biases and BN parameters plain SGD without decay."""

    def __init__(self, params, lr, momentum, weight_decay, eta):
        super().__init__(params, dict(lr=lr, momentum=momentum,
                                      weight_decay=weight_decay, eta=eta))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                d = p.grad
                rate = g["lr"]
                if p.ndim > 1:
                    w, gn = p.norm(), d.norm()
                    d = d.add(p, alpha=g["weight_decay"])
                    if w > 0 and gn > 0:
                        rate *= g["eta"] * w / (gn + g["weight_decay"] * w)
                buf = self.state[p].setdefault("momentum", torch.zeros_like(p))
                buf.mul_(g["momentum"]).add_(d, alpha=rate)
                p.sub_(buf)


FORMAT = "torus-example-1"
# The entries of torch.save's zip format: a pickle that weights_only
# checks, tensor storages and bookkeeping; nothing that is code.
_ENTRY = re.compile(r"[^/]+/(data\.pkl|version|byteorder|data/[0-9]+|\.data/serialization_id)")


def _refuse(path, why):
    raise SystemExit(f"train_imagenet.py: {path}: {why}: not resuming from it")


def load_checkpoint(path):
    """The checkpoint at path, checked before any byte is unpickled (see
    the module's text); SystemExit naming the file otherwise."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        _refuse(path, "not a regular file")
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        _refuse(path, f"owned by uid {st.st_uid} or writable by others "
                f"(mode {stat.S_IMODE(st.st_mode):o}): not this user's own checkpoint")
    if not zipfile.is_zipfile(path):
        _refuse(path, "not a torch.save zip archive")
    with zipfile.ZipFile(path) as z:
        bad = [n for n in z.namelist() if not _ENTRY.fullmatch(n)]
    if bad:
        _refuse(path, f"holds {bad[0]!r}, which no plain checkpoint holds "
                "(a TorchScript archive or other code)")
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # the safe unpickler names what it refused
        lines = str(e).splitlines() or [type(e).__name__]
        detail = next((x for x in lines if "Unsupported" in x), lines[-1])
        detail = detail[detail.find("WeightsUnpickler error:"):] if "WeightsUnpickler" in detail else detail
        _refuse(path, f"refused by torch.load(weights_only=True): {detail.strip()[:200]}")
    if not isinstance(ck, dict) or ck.get("format") != FORMAT:
        _refuse(path, f"not a {FORMAT} checkpoint")
    return ck


def save_checkpoint(path, model, opt, loader, step):
    """Tensors, ints and strings only (torch 1.13's safe loader refuses
    floats: the learning rate is recomputed from the step, and the other
    hyper-parameters come from the command line). Written beside, then
    renamed: a crash leaves the last complete file."""
    params = [p for g in opt.param_groups for p in g["params"]]
    momentum = [opt.state[p]["momentum"].cpu() if "momentum" in opt.state[p] else None
                for p in params]
    state = {"format": FORMAT, "model": {k: v.cpu() for k, v in model.state_dict().items()},
             "momentum": momentum, "loader": loader.state_dict(), "step": int(step)}
    torch.save(state, path + ".tmp")
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)


def restore(ck, path, model, opt, loader, device):
    params = [p for g in opt.param_groups for p in g["params"]]
    mom = ck.get("momentum")
    if not isinstance(mom, list) or len(mom) != len(params):
        _refuse(path, "its momentum does not match this model's parameters")
    model.load_state_dict(ck["model"])
    for p, m in zip(params, mom):
        if m is not None:
            if not isinstance(m, torch.Tensor) or m.shape != p.shape:
                _refuse(path, "a momentum tensor's shape does not match its parameter")
            opt.state[p]["momentum"] = m.to(device, p.dtype)
    loader.load_state_dict(ck["loader"])
    return int(ck["step"])


_signal = 0


def _on_signal(sig, _frame):
    global _signal
    _signal = sig


def stop_agreed(device):
    """The signal any rank has seen (0: none), the same on every rank, so
    that all stop at the same step boundary."""
    flag = torch.tensor([float(_signal)], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())


def lr_at(a, step, steps_per_epoch):
    peak = a.lr * a.batch / 256
    warm = a.warmup_epochs * steps_per_epoch
    total = a.epochs * steps_per_epoch
    if step < warm:
        return peak * (step + 1) / warm
    return peak * (1 - (step - warm) / max(1, total - warm)) ** 2


def evaluate(model, loader, channels, device):
    model.eval()
    counts = torch.zeros(2, device=device)  # NCCL reduces device tensors only
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if channels == 1:
                x = x.expand(-1, 3, -1, -1)
            counts += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)],
                                   device=device)
    dist.all_reduce(counts)
    model.train()
    return (counts[0] / counts[1]).item()


def main():
    a = parse()
    # First: a signal during start-up (rendezvous, data, resume) must not
    # kill the rank, or the job ends FAILED instead of requeued.
    signal.signal(signal.SIGUSR1, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    if a.threads:
        torch.set_num_threads(a.threads)
    try:
        device = td.local_device()
    except RuntimeError as e:
        raise SystemExit(f"train_imagenet.py: {e}")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    grid = td.init_from_env(backend="nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.batch % world:
        raise SystemExit(f"--batch {a.batch} is not a multiple of {world} ranks")
    train_set = ShardDataset(os.path.join(a.data, "train-index.txt"))
    test_set = ShardDataset(os.path.join(a.data, "test-index.txt"))
    train = ShardLoader(train_set, a.batch // world, train=True,
                        image_size=a.image_size, seed=a.seed,
                        decode_threads=a.decode_threads)
    test = ShardLoader(test_set, a.batch // world, train=False,
                       image_size=a.image_size)
    torch.manual_seed(a.seed)
    net = torchvision.models.__dict__[a.arch](num_classes=len(train_set.classes)).to(device)
    model = DDP(net, device_ids=[device.index] if device.type == "cuda" else None)
    if a.hook != "ddp":
        hook = td.torus_allreduce_hook if a.hook == "torus2d" else td.hierarchical_hook
        model.register_comm_hook(td.TorusHookState(grid, a.wire), hook)
    opt = LARS(model.parameters(), a.lr, a.momentum, a.weight_decay, a.eta)
    step = 0
    if a.checkpoint and os.path.exists(a.checkpoint):
        step = restore(load_checkpoint(a.checkpoint), a.checkpoint, model.module, opt,
                       train, device)
        if rank == 0:
            print(f"resumed from {a.checkpoint} at epoch {train.epoch} step {train.step} "
                  f"(global step {step})", flush=True)
    if rank == 0:
        print(f"{world} ranks on {device.type}{'' if device.index is None else f' {device.index}'}"
              f" ({dist.get_backend()}), grid {grid.rows}x{grid.cols} ({grid.source}), "
              f"hook {a.hook} wire {a.wire}, {len(train)} steps per epoch", flush=True)

    def save():
        if a.checkpoint and rank == 0:
            save_checkpoint(a.checkpoint, model.module, opt, train, step)

    t0 = time.time()
    while train.epoch < a.epochs:
        epoch = train.epoch
        for x, y in train:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if train_set.channels == 1:
                x = x.expand(-1, 3, -1, -1)
            for g in opt.param_groups:
                g["lr"] = lr_at(a, step, len(train))
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if not math.isfinite(loss.item()):
                raise SystemExit(f"rank {rank}: loss {loss.item()} at step {step}")
            if rank == 0 and step % a.print_every == 0:
                rate = a.print_every * a.batch / (time.time() - t0)
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} "
                      f"lr {opt.param_groups[0]['lr']:.4g} {rate:.1f} img/s", flush=True)
                t0 = time.time()
            sig = stop_agreed(device)
            if step == a.max_steps or sig:
                save()
                if rank == 0 and sig and a.checkpoint:
                    print(f"stopped by signal {sig} at global step {step} after "
                          "writing a checkpoint", flush=True)
                dist.destroy_process_group()
                sys.exit(3 if sig else 0)
        top1 = evaluate(model, test, test_set.channels, device)
        if rank == 0:
            print(f"epoch {epoch} test top-1 {100 * top1:.2f}%", flush=True)
        save()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
