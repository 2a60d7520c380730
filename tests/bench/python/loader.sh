#!/bin/bash
# tests/bench/python/loader.sh: torus.data's ShardLoader against
# torchvision's ImageFolder + DataLoader on the same real JPEGs, by hand
# (not in make check):
#   bash tests/bench/python/loader.sh [--runs N] [--epochs E] [--workers K] BUILDDIR [WORKDIR]
# The photos of tests/bench/data/photos.sh (Debian's opencv-doc and
# python3-sklearn JPEGs at their own sizes), packed with BUILDDIR's
# torus-pack for torus. Both sides: train transform (random-resized crop
# 224 of scale 0.08..1 and aspect 3/4..4/3, horizontal flip, normalise)
# into float32 NCHW batches of 32, K decode threads (torus) or K worker
# processes (torchvision, DataLoader defaults otherwise), one untimed
# epoch, then E timed epochs (default 4), in a process of its own
# (loader_bench.py). Rounds alternate torus and torchvision, N rounds
# (default 3); the table gives each side's median img/s and img per
# CPU-second (getrusage: the process's threads and its reaped worker
# processes) and the ratio torus / torchvision of the medians. The issue's
# target is >= 2x in img/CPU-s. Default run: about 1-2 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
runs=3 epochs=4 workers=2
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --workers) workers=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "loader.sh: unknown option '$1'" >&2; usage ;;
    *) break ;;
    esac
done
for v in "$runs" "$epochs" "$workers"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "loader.sh: --runs, --epochs and --workers take a positive whole number, not '$v'" >&2; exit 2; }
done
[ $# -ge 1 ] || usage
B=$(cd "$1" && pwd)
W=${2:-$(mktemp -d /tmp/torus-loader-bench.XXXXXX)}
mkdir -p "$W"
PY=/usr/bin/python3
[ -e "$B/data/.libs/libtorusdata.so.1" ] && [ -x "$B/data/torus-pack" ] ||
    { echo "loader.sh: no libtorusdata/torus-pack under $B/data (build first)" >&2; exit 2; }
export PYTHONPATH=$top/python TORUS_LIBDIR=$B/data/.libs:$B/trainer/comm/.libs OMP_NUM_THREADS=1
echo "# $(date -u +%FT%TZ) $(nproc) cores available (of $(getconf _NPROCESSORS_ONLN)):$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# torch $($PY -c 'import torch, torchvision; print(torch.__version__, "torchvision", torchvision.__version__)')"
bash "$top/tests/bench/data/photos.sh" "$W"
[ -f "$W/packed/train-index.txt" ] ||
    "$B/data/torus-pack" -j "$(nproc)" --no-progress -o "$W/packed" "$W/photos" >"$W/pack.log"
echo "# train transform at 224, batch 32, $workers decode threads / DataLoader workers, 1 untimed + $epochs timed epochs, $runs rounds"
: >"$W/rows.txt"
for r in $(seq "$runs"); do
    for side in torus torchvision; do
        line=$("$PY" "$here/loader_bench.py" "$side" --packed "$W/packed" --photos "$W/photos" \
            --workers "$workers" --epochs "$epochs") ||
            { echo "loader.sh: round $r: $side failed" >&2; exit 1; }
        echo "round $r: $line"
        echo "$line" >>"$W/rows.txt"
    done
done
# Median of each side's column F (img/s: 9, img/cpu-s: 11).
med() { awk -v s="$1" -v f="$2" '$1 == s { print $f }' "$W/rows.txt" | sort -g |
        awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ts=$(med torus 9) tc=$(med torus 11) vs=$(med torchvision 9) vc=$(med torchvision 11)
echo "## median of $runs rounds"
printf '%-12s %10s %12s\n' side img/s img/CPU-s
printf '%-12s %10s %12s\n' torus "$ts" "$tc" torchvision "$vs" "$vc"
awk -v a="$ts" -v b="$vs" -v c="$tc" -v d="$vc" 'BEGIN {
    printf "ratio torus/torchvision: %.2fx img/s, %.2fx img/CPU-s (target >= 2x img/CPU-s)\n", a / b, c / d }'
echo "# work dir: $W"
