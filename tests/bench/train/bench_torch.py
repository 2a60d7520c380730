#!/usr/bin/python3
"""bench_torch.py: PyTorch CPU training throughput, the peer of bench_train.

Times whole training steps (forward, backward, momentum SGD with weight
decay 1e-4 except on BN and bias tensors, torus's default policy) of torchvision's ResNet-50 (which is v1.5) on synthetic data and
prints one line in bench_train's format:
  torch model=resnet50 batch=32 size=224 threads=2 steps=5
        images_per_s=... step_s_median=... peak_rss_mb=...
Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision);
run_bench.sh sets jemalloc and OPENBLAS_CORETYPE as the comparison asks.
"""
import argparse
import resource
import statistics
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50",
                    choices=["resnet50", "resnet18"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = getattr(torchvision.models, a.model)(num_classes=1000)
    model.train()
    # torus's policy (topt_config_defaults, exclude_bn_bias): no weight
    # decay on BN scales/shifts and biases, the 1-D tensors here.
    decay = [p for p in model.parameters() if p.dim() > 1]
    plain = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                           {"params": plain, "weight_decay": 0.0}],
                          lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.arange(a.batch) % 1000

    times = []
    loss = None
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("torch model=%s batch=%d size=%d threads=%d steps=%d "
          "images_per_s=%.2f step_s_median=%.3f peak_rss_mb=%.0f loss=%.4f"
          % (a.model, a.batch, a.size, a.threads, a.steps,
             a.batch * len(times) / sum(times), statistics.median(times),
             rss_mb, loss.item()))


if __name__ == "__main__":
    main()
