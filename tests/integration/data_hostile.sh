#!/bin/bash
# data_hostile.sh: the data readers under AddressSanitizer and UBSan, fed
# hostile files. It compiles libtdata, torus-pack and torus-data-bench with
# -fsanitize=address,undefined into a private directory (the sources
# directly, as tests/fuzz does), packs real datasets from real JPEGs with
# them, alters the files (tests/integration/data_craft rewrites HDF5
# attributes and writes pixel-bomb headers; sed, head and gzip do the rest)
# and requires, for every case: the expected exit status, an error that
# names the file, and no sanitizer report. Cases:
#   index:  extra 'shard' lines, a second 'classes' line, 'shard' before
#           'shards', garbage, cut short;
#   shard:  num_images = 2^64-1 (encoded and dense), an attribute of 4096
#           values where one is expected, a string version, a huge
#           image_shape_hwc, random bytes;
#   dense:  an index 'shape' larger than the shards';
#   bombs:  JPEG and PNG headers declaring 60000^2 pixels (packer), the
#           reader's TDATA_MAX_PIXELS, a gzip IDX past --max-idx-bytes.
set -euo pipefail
: "${top_builddir:?run from make check}" "${top_srcdir:?}"
CC=$(sed -n 's/^CC = //p' "$top_builddir/Makefile")
var() { sed -n "s/^$1 = //p" "$top_builddir/Makefile"; }
T=$(mktemp -d "$top_builddir/data_hostile.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
echo 'int main(void){return 0;}' > "$T/probe.c"
$CC $SAN "$T/probe.c" -o "$T/probe" 2> /dev/null && "$T/probe" || {
    echo "SKIP: $CC cannot build and run -fsanitize=address,undefined programs"; exit 77; }

# --- the sanitized build: every libtdata source, then the two programs.
A=$T/asan
mkdir -p "$A"
CFLAGS="-g -O1 -fno-omit-frame-pointer $SAN -D_GNU_SOURCE -DHAVE_CONFIG_H \
 -I$top_srcdir -I$top_builddir $(var HDF5_CFLAGS) $(var TURBOJPEG_CFLAGS) \
 $(var JPEG_CFLAGS) $(var PNG_CFLAGS) $(var ZLIB_CFLAGS)"
LIBS="$(var HDF5_LIBS) $(var TURBOJPEG_LIBS) $(var JPEG_LIBS) $(var PNG_LIBS) \
 $(var ZLIB_LIBS) -lpthread -lm"
cd "$top_srcdir"
srcs=$(ls common/torus_error.c common/torus_report.c common/torus_cli.c data/format/*.c data/image/*.c data/pack/*.c \
    data/read/*.c data/tools/*.c)
# Two at a time, like the rest of the suite; the object is named by path.
printf '%s\n' $srcs | xargs -P 2 -I{} sh -c \
    'o="$1/$(echo "$2" | tr / _).o"; exec $3 $4 -c "$2" -o "$o"' _ "$A" {} "$CC" "$CFLAGS" \
    || fail "sanitized compile failed"
lib=$(ls "$A"/*.o | grep -v -e data_tools_torus_ -e data_tools_cli)
$CC $SAN "$A/data_tools_torus_pack.c.o" "$A/data_tools_cli.c.o" $lib $LIBS -o "$A/torus-pack" \
    || fail "link torus-pack"
$CC $SAN "$A/data_tools_torus_data_bench.c.o" "$A/data_tools_cli.c.o" $lib $LIBS \
    -o "$A/torus-data-bench" || fail "link torus-data-bench"
cd "$T"
PACK=$A/torus-pack BENCH=$A/torus-data-bench
CRAFT=$top_builddir/tests/integration/data_craft
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "ok: sanitized build of $(echo $srcs | wc -w) sources"

# --- real datasets: 3 classes x 4 JPEGs, encoded (2 shards) and dense.
for c in a b c; do
    mkdir -p "src/$c"
    for i in 1 2 3 4; do "$CRAFT" jpeg "src/$c/$i.jpg" $((16 + i)) $((20 + i)); done
done
"$PACK" --no-progress --shards=2 -o enc src > pack.out 2>&1 || fail "pack: $(cat pack.out)"
"$PACK" --no-progress --shards=1 --decoded=16x16 -o dense src > pack.out 2>&1 \
    || fail "pack dense: $(cat pack.out)"
cp -a enc enc.clean; cp -a dense dense.clean
restore() { rm -rf enc dense; cp -a enc.clean enc; cp -a dense.clean dense; }
bench() { # bench DIR [ENV...]: both pipelines over DIR, output in out/err
    local d=$1; shift
    env "$@" "$BENCH" --modes=eval,train --threads=2 -b 4 --size=16 \
        --eval-resize=0 --no-dd --max-bad=0 "$d" > out 2> err
}
clean_run() { # no sanitizer report on stderr, whatever the status
    if grep -q -e 'Sanitizer' -e 'runtime error:' err; then
        fail "$1: sanitizer report: $(grep -m3 -e ERROR -e 'runtime error' -e SUMMARY err)"
    fi
}
expect() { # expect STATUS PATTERN WHAT: last command's status and message
    local rc=$? want=$1 pat=$2
    clean_run "$3"
    [ "$rc" -eq "$want" ] || fail "$3: exit $rc, want $want: $(tail -3 err)"
    grep -q -- "$pat" err || fail "$3: no '$pat' in: $(tail -3 err)"
    echo "ok: $3: $(grep -m1 -- "$pat" err | cut -c1-160)"
    restore
}
bench enc || fail "clean encoded dataset: $(cat err)"; clean_run "clean encoded"
bench dense || fail "clean dense dataset: $(cat err)"; clean_run "clean dense"
echo "ok: clean datasets read under the sanitizers"
IX=enc/train-index.txt DX=dense/train-index.txt
S0=enc/train-00000-of-00002.h5 D0=dense/train-00000-of-00001.h5

# --- hostile index
line=$(grep '^shard 1 ' "$IX")
for k in 1 2 3 4 5 6 7 8; do echo "$line" >> "$IX"; done
set +e; bench enc; expect 1 "$IX:[0-9]*: more shard lines than 'shards'" "index with 8 extra shard lines"
sed -i '/^shards /i classes 1000' "$IX"
set +e; bench enc; expect 1 "$IX:[0-9]*: bad class count" "a second 'classes' line, larger"
sed -i '/^shards /d' "$IX"
set +e; bench enc; expect 1 "$IX:[0-9]*: shard line before 'shards N'" "shard line before 'shards'"
head -c 3000 /dev/urandom > "$IX"
set +e; bench enc; expect 1 "$IX" "random bytes as the index"
head -n 12 enc.clean/train-index.txt > "$IX"
set +e; bench enc; expect 1 "$IX: .* lines for" "index cut short"

# --- dense shape larger than the shard's
sed -i 's/^shape 16 16 3$/shape 64 64 3/' "$DX"
grep -q '^shape 64 64 3$' "$DX" || fail "dense index has no 'shape 16 16 3' line"
set +e; bench dense; expect 1 "$D0: image shape 16 x 16 x 3 differs from the index's 'shape 64 64 3'" \
    "dense index shape larger than the shard's"

# --- crafted shards
"$CRAFT" attr "$S0" num_images u64 18446744073709551615
set +e; bench enc; expect 1 "$S0: num_images 18446744073709551615 does not match" "encoded num_images 2^64-1"
"$CRAFT" attr "$D0" num_images u64 18446744073709551615
set +e; bench dense; expect 1 "$D0: num_images 18446744073709551615 does not match" "dense num_images 2^64-1"
"$CRAFT" grow "$S0" pixel_count 4096
set +e; bench enc; expect 1 "$S0: attribute 'pixel_count' has rank 1 and 4096 elements, expected 1" \
    "4096 values for a one-value attribute"
"$CRAFT" grow "$D0" image_shape_hwc 4096
set +e; bench dense; expect 1 "$D0: attribute 'image_shape_hwc' has rank 1 and 4096 elements, expected 3" \
    "4096 values for image_shape_hwc"
"$CRAFT" attr "$S0" torus_format_version str 1
set +e; bench enc; expect 1 "$S0: not a torus shard" "string format version"
"$CRAFT" attr "$D0" image_shape_hwc i32 100000 100000 3
sed -i 's/^shape .*/shape 100000 100000 3/' "$DX"
set +e; bench dense; expect 1 "$D0: image_shape_hwc 100000 x 100000 x 3 is not" "huge image_shape_hwc"
head -c "$(stat -c %s "$S0")" /dev/urandom > "$S0.r"; mv "$S0.r" "$S0"
set +e; bench enc; expect 1 "$S0: not a readable HDF5 file" "random bytes as a shard"

# --- decompression bombs: the reader's limit
set +e; bench enc TDATA_MAX_PIXELS=100
expect 1 "bad sample [0-9]*: shard .*enc/train-0000[01]-of-00002.h5 index [0-9]* (.*): JPEG header: JPEG declares [0-9]* x [0-9]* pixels, more than the limit of 100" \
    "TDATA_MAX_PIXELS=100 refuses the stored 17x21..20x24 JPEGs"
set +e; bench enc TDATA_MAX_PIXELS=lots; expect 1 "TDATA_MAX_PIXELS=lots: not a positive integer" "bad TDATA_MAX_PIXELS"

# --- decompression bombs: the packer
mkdir -p bomb/a bomb/b
"$CRAFT" jpeg bomb/a/ok.jpg 16 16
"$CRAFT" jpeg bomb/b/ok.jpg 16 16
"$CRAFT" jpeg bomb/a/jbomb.jpg 16 16 60000 60000
"$CRAFT" png bomb/b/pbomb.png 60000 60000
set +e; "$PACK" --no-progress -o bout bomb > out 2> err
expect 1 "rejected bomb/a/jbomb.jpg: JPEG declares 60000 x 60000 pixels, more than the limit of 134217728" \
    "JPEG pixel bomb rejected by torus-pack"
grep -q "rejected bomb/b/pbomb.png: PNG declares 60000 x 60000 pixels" err || fail "PNG bomb: $(cat err)"
echo "ok: PNG pixel bomb rejected by torus-pack"
set +e; "$PACK" --no-progress --max-pixels=100 -o bout2 bomb > out 2> err
expect 2 "rejected bomb/a/ok.jpg: JPEG declares 16 x 16 pixels, more than the limit of 100" \
    "--max-pixels=100 (every image rejected)"
set +e; "$PACK" --no-progress --max-pixels=0 -o bout3 bomb > out 2> err
expect 2 "--max-pixels: '0' is not an integer in 1.." "--max-pixels=0"
# 8 images of 2048 x 2048: 32 MiB of zeros in 32 KiB of gzip.
{ printf '\x00\x00\x08\x03\x00\x00\x00\x08\x00\x00\x08\x00\x00\x00\x08\x00'
  head -c $((8 * 2048 * 2048)) /dev/zero; } | gzip -1 > big-images-idx3-ubyte.gz
{ printf '\x00\x00\x08\x01\x00\x00\x00\x08'; head -c 8 /dev/zero; } | gzip > big-labels-idx1-ubyte.gz
set +e; "$PACK" --no-progress --max-idx-bytes=1M -o iout big-images-idx3-ubyte.gz > out 2> err
expect 2 "big-images-idx3-ubyte.gz: expands to more than 1048576 bytes" "gzip IDX past --max-idx-bytes"
"$PACK" --no-progress --max-idx-bytes=64M -o iout big-images-idx3-ubyte.gz > out 2> err \
    || fail "IDX under a raised limit: $(cat err)"
clean_run "IDX under a raised limit"
echo "ok: the same IDX packs under --max-idx-bytes=64M"
