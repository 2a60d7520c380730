#!/bin/bash
# run_bench.sh: CPU training throughput and peak memory, torus vs PyTorch,
# measured in the same run: ResNet-50 v1.5, batch 32, 224 px, 2 threads,
# synthetic data. The runs alternate (torus, torch, torus, torch, ...) so
# that load from anything else on the machine hits both alike; the summary
# takes each side's best round and its largest peak RSS.
#
# PyTorch runs as the issue asks: Debian's python3-torch 1.13 under
# /usr/bin/python3, jemalloc preloaded (libjemalloc2), and
# OPENBLAS_CORETYPE=SkylakeX (Debian's OpenBLAS misdetects this CPU).
# jemalloc gets MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 (override
# with TORCH_MALLOC_CONF): with its default 10 s decay it hands the
# activations back to the kernel within a multi-second step and refaults
# them (measured here: 24 s of 44 s in the kernel), which would make the
# baseline look worse than PyTorch can do.
#
# usage: tests/bench/train/run_bench.sh [--builddir DIR] [--rounds N]
#        [--steps N] [--warmup N] [--threads N] [--batch N] [--size PX]
# Targets: torus images/s >= 1.2x PyTorch, torus peak RSS <= PyTorch's.
# Exit status: 0 when both targets are met, 1 when not, 2 on a usage or
# setup error.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=${top_builddir:-$PWD}
rounds=2 steps=5 warmup=2 threads=2 batch=32 size=224
while [ $# -gt 0 ]; do
    case $1 in
    --builddir) builddir=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "run_bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

bench=$builddir/tests/bench/train/bench_train
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -x "$bench" ] || { echo "run_bench.sh: $bench not built (make check builds it; or pass --builddir)" >&2; exit 2; }
[ -r "$jemalloc" ] || { echo "run_bench.sh: $jemalloc missing: apt-get install libjemalloc2" >&2; exit 2; }
/usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null ||
    { echo "run_bench.sh: /usr/bin/python3 lacks torch/torchvision: apt-get install python3-torch python3-torchvision" >&2; exit 2; }

args=(--batch "$batch" --size "$size" --threads "$threads" --warmup "$warmup" --steps "$steps")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "# $(date -u +%FT%TZ) $(uname -n) load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    OMP_NUM_THREADS=$threads "$bench" "${args[@]}" 2>/dev/null | tee -a "$out"
    OMP_NUM_THREADS=$threads LD_PRELOAD=$jemalloc OPENBLAS_CORETYPE=SkylakeX \
        MALLOC_CONF=${TORCH_MALLOC_CONF-dirty_decay_ms:-1,muzzy_decay_ms:-1} \
        /usr/bin/python3 "$here/bench_torch.py" "${args[@]}" | tee -a "$out"
done

# field NAME PREFIX: best images/s or largest RSS of one side's lines.
field() { grep "^$2 " "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
t_ips=$(field images_per_s torus | sort -g | tail -1)
p_ips=$(field images_per_s torch | sort -g | tail -1)
t_rss=$(field peak_rss_mb torus | sort -g | tail -1)
p_rss=$(field peak_rss_mb torch | sort -g | tail -1)
ratio=$(awk -v a="$t_ips" -v b="$p_ips" 'BEGIN { printf "%.2f", a / b }')
echo "summary: torus ${t_ips} img/s, PyTorch ${p_ips} img/s, ratio ${ratio} (target >= 1.2);" \
     "peak RSS torus ${t_rss} MB, PyTorch ${p_rss} MB (target: torus <= PyTorch)"
awk -v r="$ratio" -v t="$t_rss" -v p="$p_rss" 'BEGIN { exit !(r >= 1.2 && t <= p) }'
