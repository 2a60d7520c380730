#!/bin/bash
# run.sh: the input-pipeline benchmarks, run by hand:
#   bash tests/bench/data/run.sh BUILDDIR [WORKDIR]
# 1. Real photographs: the JPEGs of Debian's opencv-doc and python3-sklearn
#    at their original sizes, packed with torus-pack; torus-data-bench
#    (decode, train, eval by thread count) against the torchvision/PIL
#    pipeline doing the same crop and flip on the same files, per core.
#    Both sides: one untimed warm-up, then one timed pass; decode from
#    bytes in memory, train and eval reading files from the page cache
#    (torus: the shards; torchvision: the JPEGs). The ratio judged is
#    torus / torchvision in img/CPU-s at 1 thread, printed per stage.
# photos.sh makes the set; it installs what it needs (Debian packages, as
# root) or names them.
# 2. Shard reads against dd: the same photos replicated to about 1 GB,
#    4 shards, both from the page cache.
# 3. Wait per step: the train pipeline against a simulated step time.
set -euo pipefail
B=$(cd "${1:?usage: run.sh BUILDDIR [WORKDIR]}" && pwd)
W=${2:-$(mktemp -d /tmp/torus-data-bench.XXXXXX)}
mkdir -p "$W"
PACK=$B/data/torus-pack
BENCH=$B/data/torus-data-bench
here=$(cd "$(dirname "$0")" && pwd)
echo "# $(date -u +%FT%TZ) $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
bash "$here/photos.sh" "$W"
[ -x "$PACK" ] && [ -x "$BENCH" ] || { echo "run.sh: no torus-pack/torus-data-bench under $B/data (build first)" >&2; exit 2; }

[ -f "$W/packed/train-index.txt" ] || "$PACK" -j "$(nproc)" --no-progress -o "$W/packed" "$W/photos"

echo "## torus-data-bench on the photos"
"$BENCH" --modes=decode,train,eval --threads=1,2 -b 32 --no-dd "$W/packed" | tee "$W/torus.txt"
echo "## same, without ROI decode and DCT scaling"
"$BENCH" --modes=train --threads=1 -b 32 --no-roi --no-dct-scale --no-dd "$W/packed"
echo "## torchvision/PIL, one process, one thread, same files"
/usr/bin/python3 "$here/torchvision_pipeline.py" "$W/photos" | tee "$W/tv.txt"
echo "## the ratio judged: torus / torchvision, img/CPU-s at 1 thread"
for m in decode train eval; do
    t=$(awk -v m=$m '$1 == m && $2 == 1 { print $5 }' "$W/torus.txt")
    v=$(awk -v m=$m '$2 == m { print $7 }' "$W/tv.txt")
    awk -v m=$m -v t="$t" -v v="$v" 'BEGIN { printf "ratio %-7s %.2fx (torus %s, torchvision %s img/CPU-s)\n", m, t / v, t, v }'
done

echo "## shard reads vs dd (photos x 32, ~1 GB, page cache)"
if [ ! -f "$W/big/train-index.txt" ]; then
    mkdir -p "$W/bigsrc"
    for r in $(seq 1 32); do
        mkdir -p "$W/bigsrc/r$r"
        find "$W/photos" -type f | while read -r f; do ln -f "$f" "$W/bigsrc/r$r/$(basename "$f")"; done
    done
    "$PACK" -j "$(nproc)" --no-progress --shards=4 -o "$W/big" "$W/bigsrc"
fi
"$BENCH" --modes=read "$W/big"

echo "## wait per step: train pipeline, 2 decode threads, batch 32, step 100 ms / 50 ms"
"$BENCH" --modes=train --threads=2 -b 32 -n 1024 --step-ms=100 --no-dd "$W/big"
"$BENCH" --modes=train --threads=2 -b 32 -n 1024 --step-ms=50 --no-dd "$W/big"
echo "# work dir: $W"
