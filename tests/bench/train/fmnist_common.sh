# fmnist_common.sh: sourced by the Fashion-MNIST accuracy benchmarks as
# `. fmnist_common.sh BUILDDIR [WORKDIR]`. Sets B (the build tree), W (the
# work directory, made; a fresh one under /tmp without WORKDIR), TRAIN and
# DATA, packing Fashion-MNIST (dataset-fashion-mnist) into
# $W/fashion-mnist-packed with torus-pack unless it is already there.
me=$(basename "$0")
B=$(cd "${1:?usage: $me BUILDDIR [WORKDIR]}" && pwd)
W=${2:-$(mktemp -d "/tmp/torus-${me%.sh}.XXXXXX")}
mkdir -p "$W"
TRAIN=$B/trainer/torus-train
DATA=$W/fashion-mnist-packed
SRC=${FMNIST_SRC:-/usr/share/datasets/fashion-mnist}
if [ ! -x "$TRAIN" ]; then
    echo "no torus-train in $B/trainer (build first: tools/build)" >&2
    exit 2
fi
if [ ! -f "$SRC/train-images-idx3-ubyte.gz" ]; then
    echo "no Fashion-MNIST in $SRC (apt-get install dataset-fashion-mnist)" >&2
    exit 2
fi
if [ ! -f "$DATA/train-index.txt" ] || [ ! -f "$DATA/test-index.txt" ]; then
    "$B/data/torus-pack" -o "$DATA" "$SRC/train-images-idx3-ubyte.gz" >/dev/null
    "$B/data/torus-pack" -o "$DATA" -s test "$SRC/t10k-images-idx3-ubyte.gz" >/dev/null
fi

# fm_top1 LOG: the last epoch's test top-1, the best, and the last epoch's
# number (from 0), "last best epoch".
fm_top1() {
    awk '/^epoch [0-9]+ test: top-1/ { v = $5; sub(/%/, "", v); last = v; ep = $2
                                       if (v + 0 > best + 0) best = v }
         END { if (last == "") exit 1; print last, best, ep }' "$1"
}
