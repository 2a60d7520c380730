#!/bin/bash
# data_inputs.sh: the reader (libtdata through data_dump) and torus-pack
# open their inputs only as regular files and read text with a bound, on a
# real packed dataset (opencv-doc JPEGs):
#   - a shard, an index or a --listing that is a FIFO, an index that is a
#     link to /dev/zero: refused at once by name and kind (a FIFO shard
#     hung inside H5Fopen before);
#   - an index with a 200 MB line: refused at the line cap, in little
#     time and memory; a NUL byte in a line, a control character in a
#     shard's file name: refused;
#   - normalisation that is not finite or absurd (mean nan, std inf,
#     1e-300, -1, 1e-6, 1e6) or missing: refused with the file and line;
#     std 2e-6 and 9e5 are still taken.
set -euo pipefail
OCV=/usr/share/doc/opencv-doc
[ -d "$OCV" ] || { echo "SKIP: real JPEGs not found: install the Debian package opencv-doc"; exit 77; }
PACK=${top_builddir:?run from make check}/data/torus-pack
DUMP=$top_builddir/tests/integration/data_dump
T=$(mktemp -d "$top_builddir/data_inputs.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mapfile -t J < <(find "$OCV" -iname '*.jpg' -size +20k | sort | while read -r f; do
    [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" = ffd8 ] && echo "$f"; done | head -4)
mkdir -p "$T/src/a" "$T/src/b"
for i in 0 1 2 3; do cp "${J[$i]}" "$T/src/$([ $i -lt 2 ] && echo a || echo b)/$i.jpg"; done
"$PACK" --no-progress --shards=2 -o "$T/ok" "$T/src" > "$T/pack.log" 2>&1 || fail "pack: $(cat "$T/pack.log")"
"$DUMP" "$T/ok/train-index.txt" raw "$T/raw" || fail "the good dataset does not read"

# expect DIR-OR-INDEX MESSAGE WHAT: data_dump fails within 10 s with MESSAGE.
expect() {
    local rc=0
    timeout 10 "$DUMP" "$1" raw "$T/raw" > "$T/out" 2>&1 || rc=$?
    [ $rc = 2 ] && grep -qF -- "$2" "$T/out" || fail "$3: exit $rc (124: hung), $(cut -c1-300 "$T/out")"
}
cp -r "$T/ok" "$T/fifo"
rm "$T/fifo/train-00001-of-00002.h5"
mkfifo "$T/fifo/train-00001-of-00002.h5"
expect "$T/fifo/train-index.txt" "train-00001-of-00002.h5: a FIFO, not a regular file; refused" "FIFO shard"
mkfifo "$T/fifo-index.txt"
expect "$T/fifo-index.txt" "fifo-index.txt: a FIFO, not a regular file; refused" "FIFO index"
ln -s /dev/zero "$T/ok/zero-index.txt"
expect "$T/ok/zero-index.txt" "zero-index.txt: a character device, not a regular file; refused" "/dev/zero index"
rm "$T/ok/zero-index.txt"
rc=0
timeout 10 "$PACK" --no-progress --listing="$T/fifo-index.txt" -o "$T/o" "$T/src" > "$T/out" 2>&1 || rc=$?
[ $rc = 2 ] && grep -qF -- "--listing: $T/fifo-index.txt: a FIFO, not a regular file" "$T/out" ||
    fail "FIFO listing: exit $rc, $(cat "$T/out")"
echo "ok: a FIFO shard, index and listing and a /dev/zero index are refused by name"

ix=$T/ok/train-index.txt
{ head -2 "$ix"; printf 'creator '; head -c 200000000 /dev/zero | tr '\0' a; echo; tail -n +4 "$ix"; } > "$T/ok/big-index.txt"
t0=$(date +%s%N)
if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "$T/rss" timeout 10 "$DUMP" "$T/ok/big-index.txt" raw "$T/raw" > "$T/out" 2>&1 || true
    rss=$(tail -1 "$T/rss")
    [ "$rss" -lt 65536 ] || fail "200 MB line: $rss KB of memory"
else
    timeout 10 "$DUMP" "$T/ok/big-index.txt" raw "$T/raw" > "$T/out" 2>&1 || true
    rss="(not measured: no /usr/bin/time)"
fi
ms=$((($(date +%s%N) - t0) / 1000000))
grep -qF "big-index.txt:3: line longer than 65536 bytes" "$T/out" || fail "200 MB line: $(cut -c1-300 "$T/out")"
[ $ms -lt 2000 ] || fail "200 MB line refused after $ms ms"
rm "$T/ok/big-index.txt"
printf 'torus-index 1\ncreator a\0b\n' > "$T/ok/nul-index.txt"
expect "$T/ok/nul-index.txt" "nul-index.txt:2: NUL byte in a text line" "NUL byte"
rm "$T/ok/nul-index.txt"
sed 's/^\(shard 1 train-00001\)/\1\x1b[2J/' "$T/ok/train-index.txt" > "$T/ok/esc-index.txt"
expect "$T/ok/esc-index.txt" "esc-index.txt:$(grep -n '^shard 1 ' "$T/ok/train-index.txt" | cut -d: -f1): bad shard line" "ESC in a shard name"
rm "$T/ok/esc-index.txt"
echo "ok: a 200 MB index line is refused at the cap in $ms ms, $rss KB; a NUL byte, an ESC in a shard name are refused"

norm() { # KEY VALUES: the good index with that line replaced
    sed "s/^$1 .*/$1 $2/" "$ix" > "$T/ok/n-index.txt"
}
for bad in "mean:nan 0.5 0.5:mean nan of channel 0" "mean:0.5 inf 0.5:mean inf of channel 1" \
    "mean:0.5 0.5 -inf:mean -inf of channel 2" "std:inf 1 1:std inf of channel 0" \
    "std:1 1e-300 1:std 1e-300 of channel 1" "std:1 1 -1:std -1 of channel 2" \
    "std:0 1 1:std 0 of channel 0" "std:1e-6 1 1:std 1e-06 of channel 0" "std:1e6 1 1:std 1e+06 of channel 0"; do
    IFS=: read -r key vals msg <<< "$bad"
    norm "$key" "$vals"
    expect "$T/ok/n-index.txt" "n-index.txt:$(grep -n "^$key " "$ix" | cut -d: -f1): $msg refused" "$key $vals"
done
grep -v '^std ' "$ix" > "$T/ok/n-index.txt"
expect "$T/ok/n-index.txt" "n-index.txt: no 'std' line" "no std line"
for good in "2e-6 1 1" "9e5 0.5 0.5"; do
    norm std "$good"
    "$DUMP" "$T/ok/n-index.txt" raw "$T/raw" > "$T/out" 2>&1 || fail "std $good refused: $(cat "$T/out")"
done
echo "ok: mean/std not finite, std <= 1e-6 or >= 1e6, or missing, refused with file:line"
