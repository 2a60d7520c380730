#!/bin/bash
# data_corrupt.sh: damaged datasets fail clearly, naming the file:
#   a flipped byte in an image -> that sample is skipped, counted and
#   logged with shard and index; --max-bad=0 then fails the run;
#   a flipped byte in HDF5 metadata, a truncated shard, a deleted shard,
#   an index that does not match its shards, and an index from a newer
#   format version are start-up errors.
set -euo pipefail
FM=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -r "$FM/t10k-images-idx3-ubyte.gz" ] || {
    echo "SKIP: Fashion-MNIST not found in $FM (Debian package dataset-fashion-mnist)"; exit 77; }
PACK=${top_builddir:?run from make check}/data/torus-pack
BENCH=$top_builddir/data/torus-data-bench
DUMP=$top_builddir/tests/integration/data_dump
T=$(mktemp -d "$top_builddir/data_corrupt.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
D=$T/ds
"$PACK" --shards=4 --no-progress -s t10k -o "$D" "$FM/t10k-images-idx3-ubyte.gz" > /dev/null
cp -a "$D" "$T/clean"
run() { # run the eval and train pipelines over the whole set
    "$BENCH" --modes=eval,train --threads=2 -b 100 --size=28 --eval-resize=0 --no-dd "$@" "$D" > "$T/out" 2> "$T/err"
}
run --max-bad=0 || fail "clean dataset: $(cat "$T/err")"
grep -q 'bad 0' "$T/out" || fail "clean dataset has bad samples"
restore() { rm -rf "$D"; cp -a "$T/clean" "$D"; }
flip() { # flip one byte of FILE at OFFSET
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf '%b' "\\$(printf '%03o' $(( b ^ 0x40 )))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# 1. One flipped byte inside sample 1234's image.
read -r path off < <("$DUMP" "$D/t10k-index.txt" addr 1234)
flip "$path" "$off"
set +e; "$DUMP" "$D/t10k-index.txt" raw "$T/raw" 2> "$T/dump.err"; rc=$?; set -e
if [ $rc -ne 1 ] || ! grep -q 'CRC mismatch' "$T/dump.err"; then fail "data_dump missed the flip (rc $rc)"; fi
run || fail "one bad sample must be skipped, not fatal: $(cat "$T/err")"
grep -q 'bad 1' "$T/out" || fail "bad sample not counted: $(cat "$T/out")"
grep -q "tdata: bad sample 1234: shard .*t10k-0000[0-3]-of-00004.h5 index [0-9]* (t10k-images-idx3-ubyte.gz#[0-9]*): CRC32C mismatch; skipped" "$T/err" \
    || fail "bad sample log: $(head -3 "$T/err")"
set +e; run --max-bad=0; rc=$?; set -e
if [ $rc -ne 1 ] || ! grep -q 'more than --max-bad=0 bad samples; last: bad sample 1234' "$T/err"; then
    fail "--max-bad=0 did not fail the run (rc $rc): $(tail -2 "$T/err")"
fi
echo "ok: flipped image byte: skipped, counted, logged; --max-bad fails"
restore

expect_fail() { # expect_fail PATTERN WHAT
    set +e; run; rc=$?; set -e
    [ $rc -eq 1 ] || fail "$2: exit $rc, want 1"
    grep -q "$1" "$T/err" || fail "$2: message: $(cat "$T/err")"
    echo "ok: $2: $(tail -1 "$T/err")"
    restore
}

# 2. HDF5 superblock signature damaged.
flip "$D/t10k-00002-of-00004.h5" 1
expect_fail 't10k-00002-of-00004.h5: not a readable HDF5 file' "flipped metadata byte"
# 3. Truncated shard.
truncate -s $(( $(stat -c %s "$D/t10k-00001-of-00004.h5") / 2 )) "$D/t10k-00001-of-00004.h5"
expect_fail 't10k-00001-of-00004.h5: truncated' "truncated shard"
# 4. Deleted shard.
rm "$D/t10k-00003-of-00004.h5"
expect_fail 't10k-00003-of-00004.h5: missing shard: No such file or directory' "deleted shard"
# 5. Index that does not match: another shard's CRC of CRCs.
c3=$(awk '$1 == "shard" && $2 == 3 { print $6 }' "$D/t10k-index.txt")
sed -i "s/^\(shard 0 .*\) [0-9a-f]*\$/\1 $c3/" "$D/t10k-index.txt"
expect_fail 't10k-00000-of-00004.h5: does not match the index' "mismatched index"
# 6. Shards swapped under the index.
mv "$D/t10k-00000-of-00004.h5" "$T/s0"; mv "$D/t10k-00001-of-00004.h5" "$D/t10k-00000-of-00004.h5"
mv "$T/s0" "$D/t10k-00001-of-00004.h5"
expect_fail 'does not match the index' "swapped shards"
# 7. Written by a newer format version.
sed -i 's/^torus-index 1$/torus-index 2/' "$D/t10k-index.txt"
expect_fail 'index format version 2 is newer than this reader supports (1)' "newer index version"
