#!/bin/bash
# data_pack_idx.sh: round trip of Fashion-MNIST (IDX, gzipped and plain)
# through torus-pack and libtdata: the bytes and labels read back equal the
# IDX files'; the shards are plain HDF5 for h5ls/h5dump; a rerun resumes;
# two shard ranges (a job array) give the same index as one run.
set -euo pipefail
FM=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ ! -r "$FM/t10k-images-idx3-ubyte.gz" ]; then
    echo "SKIP: Fashion-MNIST not found in $FM (Debian package dataset-fashion-mnist)"
    exit 77
fi
PACK=${top_builddir:?run from make check}/data/torus-pack
DUMP=$top_builddir/tests/integration/data_dump
T=$(mktemp -d "$top_builddir/data_idx.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for set in t10k train; do
    "$PACK" -j2 --shards=3 --no-progress -o "$T/$set" -s "$set" \
        "$FM/$set-images-idx3-ubyte.gz" > "$T/$set.log"
    grep -q ' 0 rejected' "$T/$set.log" || fail "$set: rejections: $(cat "$T/$set.log")"
    "$DUMP" "$T/$set/$set-index.txt" raw "$T/$set.raw"
    zcat "$FM/$set-images-idx3-ubyte.gz" | tail -c +17 > "$T/$set.ref"
    zcat "$FM/$set-labels-idx1-ubyte.gz" | tail -c +9 > "$T/$set.ref.labels"
    cmp "$T/$set.raw" "$T/$set.ref" || fail "$set: image bytes differ"
    cmp "$T/$set.raw.labels" "$T/$set.ref.labels" || fail "$set: labels differ"
    echo "ok: $set round trip ($(stat -c %s "$T/$set.raw") bytes)"
done
grep -q '^images 10000$' "$T/t10k/t10k-index.txt" || fail "t10k count"
grep -q '^layout dense$' "$T/t10k/t10k-index.txt" || fail "layout"
grep -q '^shape 28 28 1$' "$T/t10k/t10k-index.txt" || fail "shape"
# Fashion-MNIST's well-known statistics: mean 0.2860, std 0.3530.
awk '/^mean/ { if ($2 < 0.285 || $2 > 0.287) exit 1 }
     /^std/  { if ($2 < 0.352 || $2 > 0.354) exit 1 }' \
    "$T/train/train-index.txt" || fail "mean/std off: $(grep -E '^(mean|std)' "$T/train/train-index.txt")"

# Plain HDF5: the standard tools read it.
if command -v h5ls > /dev/null; then
    h5ls "$T/t10k/t10k-00000-of-00003.h5" > "$T/h5ls.txt"
    for d in images labels crc32c names class_ids; do
        grep -q "^$d " "$T/h5ls.txt" || fail "h5ls lacks $d"
    done
    h5dump -a torus_format_version "$T/t10k/t10k-00000-of-00003.h5" | grep -q '(0): 1' \
        || fail "h5dump cannot read the version attribute"
    echo "ok: h5ls/h5dump read the shards"
fi
# h5py (Debian python3-h5py) reads them too: record 0 of shard 0 equals
# the IDX record its name points at.
if /usr/bin/python3 -c 'import h5py, numpy' 2> /dev/null; then
    /usr/bin/python3 - "$T/t10k/t10k-00000-of-00003.h5" "$T/t10k.ref" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
ref = np.fromfile(sys.argv[2], dtype=np.uint8).reshape(-1, 28, 28, 1)
name = f["names"][0]
rec = int((name.decode() if isinstance(name, bytes) else name).split("#")[1])
assert f.attrs["torus_format_version"] == 1
assert f["images"].shape[1:] == (28, 28, 1)
assert (f["images"][0] == ref[rec]).all(), "h5py image differs"
PY
    echo "ok: h5py reads the shards"
else
    echo "note: python3-h5py not installed; h5py check not run"
fi

# Read-only opens take no HDF5 file lock (parallel file systems): the
# shards still open while another process holds exclusive flock()s on them.
if command -v flock > /dev/null; then
    locks=()
    for f in "$T"/t10k/t10k-0000[0-2]-of-00003.h5; do
        flock -x "$f" sleep 30 &
        locks+=($!)
    done
    sleep 0.3
    env -u HDF5_USE_FILE_LOCKING "$DUMP" "$T/t10k/t10k-index.txt" raw "$T/locked.raw" \
        || { kill "${locks[@]}"; fail "cannot read shards locked by another process"; }
    kill "${locks[@]}" 2> /dev/null || true
    cmp "$T/locked.raw" "$T/t10k.ref" || fail "locked read differs"
    echo "ok: opened without HDF5 file locking"
fi

# Many shards: the reader raises the open-file soft limit it needs, and
# says clearly when the hard limit is too low.
"$PACK" --shards=100 --no-progress -o "$T/many" -s t10k "$FM/t10k-images-idx3-ubyte.gz" > /dev/null
( ulimit -Sn 60; "$DUMP" "$T/many/t10k-index.txt" raw "$T/many.raw" ) || fail "soft fd limit not raised"
cmp "$T/many.raw" "$T/t10k.ref" || fail "100-shard round trip"
set +e
( ulimit -Sn 60; ulimit -Hn 80; "$DUMP" "$T/many/t10k-index.txt" raw "$T/many.raw" ) 2> "$T/fd.err"
rc=$?
set -e
if [ $rc -ne 2 ] || ! grep -q '100 shards need 164 open files but the hard limit is 80' "$T/fd.err"; then
    fail "hard fd limit: rc $rc: $(cat "$T/fd.err")"
fi
echo "ok: open-file limit raised, or a clear error"

# Uncompressed IDX gives the same data.
zcat "$FM/t10k-images-idx3-ubyte.gz" > "$T/t10k-images-idx3-ubyte"
zcat "$FM/t10k-labels-idx1-ubyte.gz" > "$T/t10k-labels-idx1-ubyte"
"$PACK" --shards=2 --no-progress -o "$T/plain" -s t10k "$T/t10k-images-idx3-ubyte" > /dev/null
"$DUMP" "$T/plain/t10k-index.txt" raw "$T/plain.raw"
cmp "$T/plain.raw" "$T/t10k.ref" || fail "plain IDX differs"
echo "ok: plain IDX"

# Resume: a rerun skips complete shards; a deleted one is packed again,
# identically (deterministic plan and contents).
idx=$T/t10k/t10k-index.txt
cp "$idx" "$T/index.before"
"$PACK" --shards=3 --no-progress -o "$T/t10k" -s t10k "$FM/t10k-images-idx3-ubyte.gz" > "$T/rerun.log"
grep -q '0 shards written, 3 already done' "$T/rerun.log" || fail "rerun: $(cat "$T/rerun.log")"
rm "$T/t10k/t10k-00001-of-00003.h5"
"$PACK" --shards=3 --no-progress -o "$T/t10k" -s t10k "$FM/t10k-images-idx3-ubyte.gz" > "$T/rerun.log"
grep -q '1 shards written, 2 already done' "$T/rerun.log" || fail "resume: $(cat "$T/rerun.log")"
cmp "$idx" "$T/index.before" || fail "resumed index differs"
rm "$idx"
"$PACK" --index-only -s t10k -o "$T/t10k" > /dev/null
cmp "$idx" "$T/index.before" || fail "--index-only index differs"
echo "ok: resume, --index-only"

# Job array: two ranges into one directory give the same index.
"$PACK" --shards=3 --shard-range=0:1 --no-progress -o "$T/arr" -s t10k \
    "$FM/t10k-images-idx3-ubyte.gz" > /dev/null
[ ! -e "$T/arr/t10k-index.txt" ] || fail "index written before all shards exist"
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=2 \
    "$PACK" --array --shards=3 --no-progress -o "$T/arr" -s t10k \
    "$FM/t10k-images-idx3-ubyte.gz" > /dev/null
cmp "$T/arr/t10k-index.txt" "$T/index.before" || fail "job-array index differs"
# A different seed gives a different shard plan.
"$PACK" --shards=3 --seed=7 --no-progress -o "$T/seed7" -s t10k \
    "$FM/t10k-images-idx3-ubyte.gz" > /dev/null
! cmp -s "$T/seed7/t10k-index.txt" "$T/index.before" || fail "seed ignored"
echo "ok: job array ranges and seed"
