#!/bin/bash
# run_bench.sh: CPU training throughput and peak memory, torus vs PyTorch,
# measured in the same run: ResNet-50 v1.5, batch 32, 224 px, 2 threads,
# synthetic data, momentum SGD with weight decay 1e-4 except on BN and bias
# tensors on every side. Three sides:
#   train  torus-train --synthetic, the program users run (the target);
#   torus  bench_train, the same engine, model and optimizer without the
#          trainer around them (shows what the trainer adds);
#   torch  PyTorch (bench_torch.py).
# The runs alternate (train, torus, torch, train, ...) so that load from
# anything else on the machine hits all alike; the summary takes each
# side's best round and its largest peak RSS. Every side's peak RSS is the
# process's maximum resident set as /usr/bin/time reports it (%M).
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
#        [--build-only]
# It builds what it needs first: in a configured DIR (default: the current
# directory) `make` of torus-train and bench_train (a check program, so
# plain `make` leaves it out); in a DIR that is not configured, autogen.sh
# (when the tree has no configure yet) and configure, then the same make.
# --build-only stops after the build.
# Targets: torus-train images/s >= 1.2x PyTorch, torus-train peak RSS <=
# PyTorch's.
# Exit status: 0 when both targets are met, 1 when not, 2 on a usage or
# setup error.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=${top_builddir:-$PWD}
rounds=2 steps=5 warmup=2 threads=2 batch=32 size=224 build_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --builddir) builddir=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "run_bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

bench=$builddir/tests/bench/train/bench_train
train=$builddir/trainer/torus-train
top=$(cd "$here/../../.." && pwd)
if [ ! -f "$builddir/Makefile" ]; then
    echo "run_bench.sh: $builddir is not configured: configuring it" >&2
    [ -x "$top/configure" ] || (cd "$top" && ./autogen.sh) >&2 ||
        { echo "run_bench.sh: autogen.sh failed" >&2; exit 2; }
    mkdir -p "$builddir"
    (cd "$builddir" && "$top/configure" >configure.out) >&2 ||
        { echo "run_bench.sh: configure failed (see $builddir/config.log)" >&2; exit 2; }
fi
# make decides what is out of date; up to date, it does nothing.
make -C "$builddir" -j"$(nproc)" trainer/torus-train tests/bench/train/bench_train >&2 ||
    { echo "run_bench.sh: building torus-train and bench_train in $builddir failed" >&2; exit 2; }
[ $build_only = 0 ] || { echo "run_bench.sh: built $train and $bench"; exit 0; }
[ -x "$train" ] || { echo "run_bench.sh: $train not built" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "run_bench.sh: /usr/bin/time missing: apt-get install time" >&2; exit 2; }
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -x "$bench" ] || { echo "run_bench.sh: $bench not built" >&2; exit 2; }
[ -r "$jemalloc" ] || { echo "run_bench.sh: $jemalloc missing: apt-get install libjemalloc2" >&2; exit 2; }
/usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null ||
    { echo "run_bench.sh: /usr/bin/python3 lacks torch/torchvision: apt-get install python3-torch python3-torchvision" >&2; exit 2; }

args=(--batch "$batch" --size "$size" --threads "$threads" --warmup "$warmup" --steps "$steps")
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
echo "# $(date -u +%FT%TZ) $(uname -n) load: $(cut -d' ' -f1-3 /proc/loadavg)"
# rss CMD...: run CMD under /usr/bin/time; peak prints its maximum resident
# set as "peak_rss_mb=N", the same measure for every side.
rss() { /usr/bin/time -f 'maxrss_kb=%M' -o "$out.time" "$@"; }
peak() { awk -F= '/maxrss_kb/ { printf "peak_rss_mb=%.0f", $2 / 1024 }' "$out.time"; }
# torus-train prints one progress line per step; the images/s of the steps
# after the warmup ones, as batch * steps / their total time.
train_line() {
    rss "$train" --synthetic --model resnet50 --batch "$batch" --image-size "$size" \
        --threads "$threads" --max-steps $((warmup + steps)) --print-every 1 \
        --dataset-size 1000000 --weight-decay 1e-4 >"$out.train" 2>&1
    grep -q '^done:' "$out.train" || { tail -3 "$out.train" >&2; exit 2; }
    grep '^epoch .* img/s' "$out.train" | tail -n +$((warmup + 1)) |
        sed 's/.*| \([0-9.]*\) img\/s .*/\1/' |
        awk -v b="$batch" -v h="model=resnet50 batch=$batch size=$size threads=$threads steps=$steps" \
            -v r="$(peak)" '{ t += b / $1; n++ }
            END { printf "train %s images_per_s=%.2f %s\n", h, b * n / t, r }'
}
for r in $(seq "$rounds"); do
    OMP_NUM_THREADS=$threads train_line | tee -a "$out"
    line=$(OMP_NUM_THREADS=$threads rss "$bench" "${args[@]}" 2>/dev/null)
    echo "${line/ peak_rss_mb=[0-9]*/} $(peak)" | tee -a "$out"
    line=$(OMP_NUM_THREADS=$threads LD_PRELOAD=$jemalloc OPENBLAS_CORETYPE=SkylakeX \
        MALLOC_CONF=${TORCH_MALLOC_CONF-dirty_decay_ms:-1,muzzy_decay_ms:-1} \
        rss /usr/bin/python3 "$here/bench_torch.py" "${args[@]}")
    echo "${line/ peak_rss_mb=[0-9]*/} $(peak)" | tee -a "$out"
done

# field NAME PREFIX: best images/s or largest RSS of one side's lines.
field() { grep "^$2 " "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
b_ips=$(field images_per_s torus | sort -g | tail -1)
t_ips=$(field images_per_s train | sort -g | tail -1)
p_ips=$(field images_per_s torch | sort -g | tail -1)
b_rss=$(field peak_rss_mb torus | sort -g | tail -1)
t_rss=$(field peak_rss_mb train | sort -g | tail -1)
p_rss=$(field peak_rss_mb torch | sort -g | tail -1)
ratio=$(awk -v a="$t_ips" -v b="$p_ips" 'BEGIN { printf "%.2f", a / b }')
bratio=$(awk -v a="$b_ips" -v b="$p_ips" 'BEGIN { printf "%.2f", a / b }')
echo "summary: torus-train ${t_ips} img/s, PyTorch ${p_ips} img/s, ratio ${ratio} (target >= 1.2);" \
     "peak RSS torus-train ${t_rss} MB, PyTorch ${p_rss} MB (target: torus-train <= PyTorch);" \
     "bench_train ${b_ips} img/s (${bratio}x), ${b_rss} MB"
awk -v r="$ratio" -v t="$t_rss" -v p="$p_rss" 'BEGIN { exit !(r >= 1.2 && t <= p) }'
