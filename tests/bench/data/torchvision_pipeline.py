#!/usr/bin/python3
"""torchvision_pipeline.py: the torchvision/PIL baseline for torus-data-bench.

Runs the standard ImageNet transforms on the same JPEG files, in one
process on one core (torch and PIL limited to one thread), and prints
images/s and images per CPU-second (the per-core rate, robust to other
load on the machine). Each stage makes one untimed pass first (the page
cache, as torus-data-bench's first batch), then --passes timed passes, and
reports the mean of them, as torus-data-bench does with its one pass:
  decode  PIL open + convert('RGB') (full decode) of bytes already in
          memory, as torus-data-bench's decode row
  train   file read + RandomResizedCrop(SIZE, (0.08, 1), (3/4, 4/3)) +
          RandomHorizontalFlip + ToTensor + Normalize
  eval    file read + Resize(RESIZE) + CenterCrop(SIZE) + ToTensor + Normalize
Usage: torchvision_pipeline.py [--size 224] [--resize 256] [--passes 1] DIR
"""
import argparse
import io
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--resize", type=int, default=256)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("dir")
    a = ap.parse_args()
    import torch
    from PIL import Image
    from torchvision import transforms as T
    torch.set_num_threads(1)
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(a.dir) for f in fs)
    if not files:
        sys.exit("no files in %s" % a.dir)
    norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    train = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(),
                       T.ToTensor(), norm])
    evalt = T.Compose([T.Resize(a.resize), T.CenterCrop(a.size), T.ToTensor(), norm])

    def load(p):
        with open(p, "rb") as f:
            return Image.open(f).convert("RGB")

    raw = {}
    for p in files:
        with open(p, "rb") as f:
            raw[p] = f.read()

    for name, fn in (("decode", lambda p: Image.open(io.BytesIO(raw[p])).convert("RGB")),
                     ("train", lambda p: train(load(p))),
                     ("eval", lambda p: evalt(load(p)))):
        for p in files:  # untimed: warm caches, as torus's first batch
            fn(p)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.passes):
            for p in files:
                fn(p)
        t, c = time.perf_counter() - t0, time.process_time() - c0
        n = len(files) * a.passes
        print("torchvision %-7s 1 thread %10.1f images/s %10.1f img/CPU-s (%d files x %d)"
              % (name, n / t, n / c, len(files), a.passes))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
