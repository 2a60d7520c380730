#!/bin/bash
# data_pack_jpeg.sh: torus-pack on real photographs (opencv-doc) in every
# directory layout, and its validation policy on odd files made at test
# time by real encoders (ImageMagick) or by truncating a real JPEG:
#   CMYK and PNG-named-.JPEG are re-encoded to RGB JPEG; progressive and
#   grayscale are stored unchanged; truncated/undecodable/non-image files
#   are rejected with a line naming them, counted, and make the exit 1.
set -euo pipefail
OCV=/usr/share/doc/opencv-doc
if ! command -v convert > /dev/null || ! command -v identify > /dev/null; then
    echo "SKIP: ImageMagick (convert, identify) not installed (Debian package imagemagick)"; exit 77
fi
[ -d "$OCV" ] || { echo "SKIP: real JPEGs not found: install the Debian package opencv-doc"; exit 77; }
PACK=${top_builddir:?run from make check}/data/torus-pack
DUMP=$top_builddir/tests/integration/data_dump
T=$(mktemp -d "$top_builddir/data_jpeg.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Real JPEGs (not the PNGs that opencv-doc names .jpg), 24 of them.
mapfile -t JPEGS < <(find "$OCV" -iname '*.jpg' -size +20k | sort | while read -r f; do
    [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" = ffd8 ] && echo "$f"; done | head -24)
[ ${#JPEGS[@]} -eq 24 ] || fail "expected 24 JPEGs in $OCV, found ${#JPEGS[@]}"

# ImageNet train layout: train/WNID/WNID_N.JPEG
mkdir -p "$T/train/n01440764" "$T/train/n01443537" "$T/train/n01484850"
wnids=(n01440764 n01443537 n01484850)
for i in "${!JPEGS[@]}"; do
    w=${wnids[$((i % 3))]}
    cp "${JPEGS[$i]}" "$T/train/$w/${w}_$i.JPEG"
done
# Odd files from a real photo.
SRC=${JPEGS[0]}
odd=$T/train/n01484850
convert "$SRC" -colorspace CMYK "$odd/odd_cmyk.JPEG"
convert "$SRC" -interlace JPEG "$odd/odd_progressive.JPEG"
convert "$SRC" -colorspace Gray "$odd/odd_gray.JPEG"
convert "$SRC" "png:$odd/odd_png.JPEG"
identify -format '%[colorspace]' "$odd/odd_cmyk.JPEG" | grep -q CMYK || fail "ImageMagick did not write CMYK"
sz=$(stat -c %s "$SRC")
head -c $((sz * 2 / 3)) "$SRC" > "$odd/odd_truncated.JPEG"
echo "not an image" > "$odd/odd_text.JPEG"
expect_rej=2
SK=/usr/lib/python3/dist-packages/skimage/data/truncated.jpg
if [ -r "$SK" ]; then cp "$SK" "$odd/odd_skimage.JPEG"; expect_rej=3; fi
printf 'n01440764 tench, Tinca tinca\nn01443537 goldfish, Carassius auratus\nn01484850 great white shark\n' > "$T/synsets.txt"

set +e
"$PACK" -j2 --shards=3 --no-progress --classes="$T/synsets.txt" --report="$T/report.txt" \
    -o "$T/out" "$T/train" > "$T/pack.log" 2> "$T/pack.err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "exit status $rc, want 1 (rejections): $(cat "$T/pack.err")"
total=$((24 + 6 + expect_rej - 2))
grep -q "$total images seen, $((total - expect_rej)) packed, $expect_rej rejected, 2 re-encoded" "$T/pack.log" \
    || fail "summary: $(cat "$T/pack.log")"
for f in odd_truncated odd_text; do
    grep -q "rejected .*$f.JPEG: " "$T/pack.err" || fail "no report line for $f"
done
grep -q 'odd_truncated.JPEG: Premature end of JPEG file' "$T/pack.err" || fail "truncation reason"
grep -q "^reencoded	.*odd_cmyk.JPEG" "$T/report.txt" || fail "CMYK not reported"
grep -q "^reencoded	.*odd_png.JPEG" "$T/report.txt" || fail "PNG not reported"
echo "ok: odd files: $expect_rej rejected with reasons, CMYK and PNG re-encoded, exit 1"

"$DUMP" "$T/out/train-index.txt" files "$T/back"
grep -q '^class 0 n01440764 tench, Tinca tinca$' "$T/out/train-index.txt" || fail "class words"
# Clean files come back byte for byte, progressive and gray included.
for w in "${wnids[@]}"; do
    for f in "$T/train/$w"/*.JPEG; do
        b=$(basename "$f")
        case $b in odd_cmyk*|odd_png*|odd_truncated*|odd_text*|odd_skimage*) continue;; esac
        cmp -s "$f" "$T/back/$w/$b" || fail "$w/$b differs after the round trip"
    done
done
# Labels are the class folders.
while read -r name cls; do
    [ "${name%%/*}" = "$cls" ] || fail "label of $name is $cls"
done < "$T/back.labels"
[ "$(wc -l < "$T/back.labels")" -eq $((total - expect_rej)) ] || fail "count"
# Re-encoded files are RGB JPEGs that look like the original.
for f in odd_cmyk odd_png; do
    [ "$(head -c 2 "$T/back/n01484850/$f.JPEG" | od -An -tx1 | tr -d ' ')" = ffd8 ] || fail "$f not JPEG"
    identify -format '%[colorspace]' "$T/back/n01484850/$f.JPEG" | grep -q sRGB || fail "$f not RGB"
    psnr=$(compare -metric PSNR "$SRC" "$T/back/n01484850/$f.JPEG" null: 2>&1 || true)
    awk -v p="$psnr" 'BEGIN { exit !(p + 0 > 28) }' || fail "$f: PSNR $psnr against the source"
done
echo "ok: ImageNet train layout round trip; CMYK/PNG re-encoded to RGB"
# The reader decodes every kept file (grayscale, progressive, re-encoded)
# through both pipelines and both layouts without a bad sample.
BENCH=$top_builddir/data/torus-data-bench
"$BENCH" --modes=train,eval --threads=2 -b 4 --max-bad=0 --no-dd "$T/out" > "$T/bench.txt"
"$BENCH" --modes=train,eval --threads=1 -b 4 --max-bad=0 --layout=nhwc --dtype=f16 --no-dd "$T/out" >> "$T/bench.txt"
[ "$(grep -c ', bad 0$' "$T/bench.txt")" -eq 4 ] || fail "reader: $(cat "$T/bench.txt")"
echo "ok: the pipeline reads every packed file"
# A saved listing (for job arrays) gives the same shards as walking the tree.
"$PACK" --list-only --listing="$T/train.list" --classes="$T/synsets.txt" -o "$T/out2" "$T/train" > /dev/null
grep -q "^items $total\$" "$T/train.list" || fail "listing: $(head -5 "$T/train.list")"
set +e
"$PACK" -j2 --shards=3 --no-progress --listing="$T/train.list" -o "$T/out2" "$T/train" > /dev/null 2>&1
set -e
cmp "$T/out/train-index.txt" "$T/out2/train-index.txt" || fail "index from the listing differs"
echo "ok: --listing"

# ImageNet val, flat, with LOC_val_solution.csv and with the devkit file.
mkdir -p "$T/val"
echo "ImageId,PredictionString" > "$T/LOC_val_solution.csv"
: > "$T/gt.txt"
printf 'n01484850\nn01440764\nn01443537\n' > "$T/devkit_synsets.txt" # devkit ID order
devid=(2 3 1)  # devkit ID of wnids[0..2]
for i in $(seq 1 9); do
    n=$(printf 'ILSVRC2012_val_%08d' "$i")
    cp "${JPEGS[$i]}" "$T/val/$n.JPEG"
    k=$((i % 3))
    echo "$n,${wnids[$k]} 1 2 3 4 ${wnids[$k]} 5 6 7 8" >> "$T/LOC_val_solution.csv"
    echo "${devid[$k]}" >> "$T/gt.txt"
done
"$PACK" --no-progress -s val --shards=2 --classes="$T/synsets.txt" \
    --val-labels="$T/LOC_val_solution.csv" -o "$T/val_csv" "$T/val" > /dev/null
"$PACK" --no-progress -s val --shards=2 --classes="$T/synsets.txt" \
    --val-labels="$T/gt.txt" --devkit-synsets="$T/devkit_synsets.txt" \
    -o "$T/val_dev" "$T/val" > /dev/null
"$DUMP" "$T/val_csv/val-index.txt" files "$T/vc"
"$DUMP" "$T/val_dev/val-index.txt" files "$T/vd"
cmp "$T/vc.labels" "$T/vd.labels" || fail "csv and devkit labels differ"
grep -q '^ILSVRC2012_val_00000004.JPEG n01443537$' "$T/vc.labels" || fail "val label: $(cat "$T/vc.labels")"
cmp "$T/val/ILSVRC2012_val_00000004.JPEG" "$T/vc/ILSVRC2012_val_00000004.JPEG" || fail "val bytes"
# A flat directory without labels is a usage error that says what to do.
set +e
"$PACK" --no-progress -o "$T/x" "$T/val" 2> "$T/err.txt"; rc=$?
set -e
if [ $rc -ne 2 ] || ! grep -q -- '--val-labels' "$T/err.txt"; then fail "flat dir without labels: rc $rc"; fi
echo "ok: flat val with LOC_val_solution.csv and devkit ground truth"

# --resize-shorter and --decoded on a plain class/file tree.
mkdir -p "$T/tree/a" "$T/tree/b"
for i in 0 1 2 3 4 5; do cp "${JPEGS[$i]}" "$T/tree/$([ $((i % 2)) = 0 ] && echo a || echo b)/img$i.jpg"; done
"$PACK" --no-progress --shards=1 --resize-shorter=64 -o "$T/small" "$T/tree" > /dev/null
"$DUMP" "$T/small/train-index.txt" files "$T/sm"
for f in "$T/sm"/*/*.jpg; do
    read -r w h < <(identify -format '%w %h\n' "$f")
    m=$(( w < h ? w : h ))
    [ "$m" -eq 64 ] || fail "$f: shorter side $m after --resize-shorter=64"
done
"$PACK" --no-progress --shards=2 --decoded=24x32 -o "$T/dec" "$T/tree" > /dev/null
if ! grep -q '^layout dense$' "$T/dec/train-index.txt" || ! grep -q '^shape 24 32 3$' "$T/dec/train-index.txt"; then
    fail "--decoded layout"
fi
"$DUMP" "$T/dec/train-index.txt" raw "$T/dec.raw"
[ "$(stat -c %s "$T/dec.raw")" -eq $((6 * 24 * 32 * 3)) ] || fail "--decoded size"
echo "ok: --resize-shorter and --decoded"
