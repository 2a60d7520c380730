#!/usr/bin/env python3
"""train_imagenet.py: a torchvision model (ResNet-50 by default) trained
data-parallel with torus's pieces: torus.data's ShardLoader over a
torus-pack'ed set (train-index.txt and test-index.txt in --data),
torus.distributed's grid and 2D-torus all-reduce hook, and LARS with a
linear warmup and polynomial decay (the large-batch recipe).

Launch one process per task, as jobs/train-pytorch.sbatch does:
    srun --mpi=pmix --torus=auto python3 train_imagenet.py --data DIR
with MASTER_ADDR and MASTER_PORT set for torch's env:// rendezvous.
Rank 0 prints one line per --print-every steps and the test top-1 after
every epoch. With --checkpoint FILE, rank 0 saves the model, optimizer and
loader position there after every epoch and at --max-steps, and a run that
finds FILE resumes from it (the loader's next batch is the one the saved
run would have taken).
"""
import argparse
import math
import os
import time

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


def lr_at(a, step, steps_per_epoch):
    peak = a.lr * a.batch / 256
    warm = a.warmup_epochs * steps_per_epoch
    total = a.epochs * steps_per_epoch
    if step < warm:
        return peak * (step + 1) / warm
    return peak * (1 - (step - warm) / max(1, total - warm)) ** 2


def evaluate(model, loader, channels):
    model.eval()
    counts = torch.zeros(2)
    with torch.no_grad():
        for x, y in loader:
            if channels == 1:
                x = x.expand(-1, 3, -1, -1)
            counts += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
    dist.all_reduce(counts)
    model.train()
    return (counts[0] / counts[1]).item()


def main():
    a = parse()
    if a.threads:
        torch.set_num_threads(a.threads)
    grid = td.init_from_env()
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
    model = DDP(torchvision.models.__dict__[a.arch](num_classes=len(train_set.classes)))
    if a.hook != "ddp":
        hook = td.torus_allreduce_hook if a.hook == "torus2d" else td.hierarchical_hook
        model.register_comm_hook(td.TorusHookState(grid, a.wire), hook)
    opt = LARS(model.parameters(), a.lr, a.momentum, a.weight_decay, a.eta)
    step = 0
    if a.checkpoint and os.path.exists(a.checkpoint):
        ck = torch.load(a.checkpoint)
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        train.load_state_dict(ck["loader"])
        step = ck["step"]
        if rank == 0:
            print(f"resumed at epoch {train.epoch} step {train.step} "
                  f"(global step {step})", flush=True)
    if rank == 0:
        print(f"{world} ranks, grid {grid.rows}x{grid.cols} ({grid.source}), "
              f"hook {a.hook} wire {a.wire}, {len(train)} steps per epoch", flush=True)

    def save():
        if a.checkpoint and rank == 0:
            torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                        "loader": train.state_dict(), "step": step}, a.checkpoint + ".tmp")
            os.replace(a.checkpoint + ".tmp", a.checkpoint)

    t0 = time.time()
    while train.epoch < a.epochs:
        epoch = train.epoch
        for x, y in train:
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
            if step == a.max_steps:
                save()
                dist.destroy_process_group()
                return
        top1 = evaluate(model, test, test_set.channels)
        if rank == 0:
            print(f"epoch {epoch} test top-1 {100 * top1:.2f}%", flush=True)
        save()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
