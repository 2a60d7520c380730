#!/usr/bin/python3
"""loader_bench.py: one side of tests/bench/python/loader.sh, in a process
of its own.

  torus        torus.data.ShardLoader over the packed set (train mode:
               random-resized crop SIZE, flip, normalise; float32 NCHW),
               --workers decode threads and one I/O thread
  torchvision  torchvision.datasets.ImageFolder over the same JPEGs with
               RandomResizedCrop(SIZE, scale) + RandomHorizontalFlip +
               ToTensor + Normalize, in a DataLoader with --workers worker
               processes (shuffled; float32 NCHW batches)

Both: batch --batch, incomplete last batch dropped, the same crop scale.
One untimed epoch first (page cache, worker start-up paid once by
torus's threads too), then --epochs timed epochs: a new iterator per
epoch, as a training loop makes one. Prints one line:
  SIDE images N wall S cpu C img/s R img/cpu-s Q
CPU time is getrusage: this process (every thread) plus its reaped
children (the DataLoader's workers, joined at the end of each epoch).
"""
import argparse
import resource
import sys
import time

import torch


def cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def torus_epochs(a):
    from torus.data import ShardDataset, ShardLoader
    ds = ShardDataset(a.packed + "/train-index.txt")
    loader = ShardLoader(ds, a.batch, train=True, image_size=a.size,
                         seed=1, rank=0, world_size=1, decode_threads=a.workers,
                         io_threads=1, scale=a.scale)
    while True:
        yield iter(loader)


def torchvision_epochs(a):
    import torchvision
    from torchvision import transforms as T
    tf = T.Compose([T.RandomResizedCrop(a.size, scale=tuple(a.scale)),
                    T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(a.photos, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers, drop_last=True)
    while True:
        yield iter(loader)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("side", choices=("torus", "torchvision"))
    ap.add_argument("--packed", help="torus-pack output (torus)")
    ap.add_argument("--photos", help="class folders of JPEGs (torchvision)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--scale", type=float, nargs=2, default=[0.08, 1.0])
    a = ap.parse_args()
    torch.set_num_threads(1)
    epochs = (torus_epochs if a.side == "torus" else torchvision_epochs)(a)
    shape = None
    for x, _ in next(epochs):  # untimed
        shape = tuple(x.shape)
    if shape is None or shape[1:] != (3, a.size, a.size) or x.dtype != torch.float32:
        sys.exit(f"{a.side}: batches {shape} {x.dtype}, expected N x 3 x {a.size} x {a.size} float32")
    n, t0, c0 = 0, time.perf_counter(), cpu()
    for _ in range(a.epochs):
        for x, _ in next(epochs):
            n += len(x)
    t, c = time.perf_counter() - t0, cpu() - c0
    print(f"{a.side} images {n} wall {t:.3f} cpu {c:.3f} img/s {n / t:.1f} "
          f"img/cpu-s {n / c:.1f}", flush=True)


if __name__ == "__main__":
    main()
