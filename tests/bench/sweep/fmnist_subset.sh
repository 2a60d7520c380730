# fmnist_subset.sh: sourced by tests/bench/sweep/run.sh and
# tests/integration/sweep_cluster.sh. Defines
#   fmnist_subset SRC OUT NTRAIN NTEST PACK
# which packs the first NTRAIN training and NTEST test images of the
# Fashion-MNIST idx files in SRC into the torus-pack dataset OUT with the
# torus-pack program PACK (OUT/idx keeps the cut idx files).

# The first N items of a gzipped idx file: its count field (bytes 4..7,
# big-endian) rewritten, then HEADER - 8 bytes of the rest of the header
# and N items of ITEM bytes.
_fm_cut() { # SRC DST N HEADER ITEM
    local n=$3
    {
        zcat "$1" | head -c 4 || true
        printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((n >> 24 & 255)) \
            $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))"
        zcat "$1" | tail -c +9 | head -c $(($4 - 8 + n * $5)) || true
    } | gzip -1 >"$2"
}

fmnist_subset() {
    local src=$1 out=$2 i=$2/idx
    mkdir -p "$i"
    _fm_cut "$src/train-images-idx3-ubyte.gz" "$i/train-images-idx3-ubyte.gz" "$3" 16 784
    _fm_cut "$src/train-labels-idx1-ubyte.gz" "$i/train-labels-idx1-ubyte.gz" "$3" 8 1
    _fm_cut "$src/t10k-images-idx3-ubyte.gz" "$i/t10k-images-idx3-ubyte.gz" "$4" 16 784
    _fm_cut "$src/t10k-labels-idx1-ubyte.gz" "$i/t10k-labels-idx1-ubyte.gz" "$4" 8 1
    "$5" -o "$out" "$i/train-images-idx3-ubyte.gz" >/dev/null &&
        "$5" -o "$out" -s test "$i/t10k-images-idx3-ubyte.gz" >/dev/null
}
