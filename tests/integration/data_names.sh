#!/bin/bash
# data_names.sh: names cannot forge structure. A class tree of real JPEGs
# (opencv-doc) whose folder and file names hold a newline that spells an
# index key ("a\nmean nan nan nan", "f\nshards 99.jpg"), tabs, spaces, a
# carriage return, ESC and a C1 control, bytes that are not UTF-8 and
# backslashes, is packed by the real torus-pack
#   1. straight from the tree,
#   2. through --list-only --listing, then two --listing runs (the second
#      finds every shard done),
# and read back by libtdata (data_dump tree: every sample written to
# <class name from the index>/<source name from the shard>): the tree read
# back must equal the source, names and bytes, and the index must hold
# exactly one line per key. Names that cannot be kept are refused with a
# message naming what: a --split with a newline; class words too long for
# an index line. Entries that are not regular files (FIFO, /dev/zero link,
# dangling link, a folder inside a class) are reported one line each, the
# packer does not block on them, and it exits 1.
set -euo pipefail
OCV=/usr/share/doc/opencv-doc
[ -d "$OCV" ] || { echo "SKIP: real JPEGs not found: install the Debian package opencv-doc"; exit 77; }
PACK=${top_builddir:?run from make check}/data/torus-pack
DUMP=$top_builddir/tests/integration/data_dump
T=$(mktemp -d "$top_builddir/data_names.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mapfile -t J < <(find "$OCV" -iname '*.jpg' -size +20k | sort | while read -r f; do
    [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" = ffd8 ] && echo "$f"; done | head -6)
[ ${#J[@]} -eq 6 ] || fail "expected 6 JPEGs in $OCV, found ${#J[@]}"
classes=($'a\nmean nan nan nan' $'b\tc d' $'\xff\xferaw' 'x\x41y' $'\e[31mred\xc2\x85' 'plain')
files=($'f\nshards 99.jpg' $'g\th.jpg' $'\x80bad.jpg' 'sp ace.jpg' 'back\slash.jpg' $'cr\r.jpg')
S=$T/src
i=0
for c in "${classes[@]}"; do
    mkdir -p "$S/$c"
    for f in "${files[@]}"; do cp "${J[$((i % 6))]}" "$S/$c/$f"; i=$((i + 1)); done
done

# The index: one line per key, escaped names, and the tree read back.
check_out() { # OUT WHAT
    local ix=$1/train-index.txt
    for k in torus-index creator split layout images mean std classes shards; do
        [ "$(grep -c "^$k " "$ix")" = 1 ] || fail "$2: $(grep -c "^$k " "$ix") '$k' lines in the index"
    done
    [ "$(grep -c '^class ' "$ix")" = 6 ] && [ "$(grep -c '^shard ' "$ix")" = 2 ] ||
        fail "$2: class/shard lines: $(cat -A "$ix" | head -30)"
    grep -qxF 'class 1 a\x0amean\x20nan\x20nan\x20nan' "$ix" || fail "$2: class 1 not escaped: $(grep '^class 1' "$ix")"
    rm -rf "$T/back"
    "$DUMP" "$ix" tree "$T/back" > /dev/null || fail "$2: read back failed"
    diff -r "$S" "$T/back" > "$T/diff" 2>&1 || fail "$2: the tree read back differs: $(head -5 "$T/diff" | cat -A)"
}
"$PACK" --no-progress --shards=2 -o "$T/out" "$S" > "$T/pack.log" 2>&1 || fail "pack: $(cat "$T/pack.log")"
check_out "$T/out" "from the tree"
echo "ok: 36 hostile names packed from the tree and read back intact"

L=$T/train.list
"$PACK" --list-only --listing="$L" -o "$T/out2" "$S" > "$T/list.log" 2>&1 || fail "list-only: $(cat "$T/list.log")"
[ "$(wc -l < "$L")" = $((3 + 6 + 36)) ] || fail "listing has $(wc -l < "$L") lines, want 45"
for run in 1 2; do
    "$PACK" --no-progress --shards=2 --listing="$L" -o "$T/out2" "$S" > "$T/l$run.log" 2>&1 ||
        fail "--listing run $run: $(cat "$T/l$run.log")"
done
grep -q '0 shards written, 2 already done' "$T/l2.log" || fail "second --listing run: $(cat "$T/l2.log")"
check_out "$T/out2" "through --listing"
cmp -s "$T/out/train-index.txt" "$T/out2/train-index.txt" || fail "the two indexes differ"
echo "ok: --list-only --listing, then two --listing runs: same names, same index"

# Refused, naming what.
rc=0
"$PACK" --split=$'a\nb' -o "$T/o3" "$S" > "$T/split.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q 'bad --split' "$T/split.log" || fail "--split with a newline: exit $rc, $(cat "$T/split.log")"
printf 'plain %s\n' "$(head -c 40000 /dev/zero | tr '\0' w)" > "$T/classes.txt"
mkdir -p "$T/one/plain" && cp "${J[0]}" "$T/one/plain/x.jpg"
rc=0
"$PACK" --no-progress --classes="$T/classes.txt" -o "$T/o4" "$T/one" > "$T/long.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "o4/train-index.txt: class words 0 is 40000 bytes once escaped, too long for an index line (65536 bytes); refused" "$T/long.log" ||
    fail "class words of 40000 bytes: exit $rc, $(cut -c1-300 "$T/long.log")"
echo "ok: a --split with a newline and class words too long for a line are refused by name"

# Entries that are not regular files: one line each, no hang, exit 1.
N=$T/nonreg
mkdir -p "$N/k/nested"
cp "${J[0]}" "$N/k/ok.jpg"
mkfifo "$N/k/fifo.jpg" "$N/topfifo"
ln -s /dev/zero "$N/k/zero.jpg"
ln -s "$T/nowhere" "$N/k/dangling.jpg"
for mode in pack list; do
    rc=0
    if [ $mode = pack ]; then
        timeout 60 "$PACK" --no-progress -o "$T/o5" "$N" > "$T/nr.log" 2> "$T/nr.err" || rc=$?
    else
        timeout 60 "$PACK" --list-only --listing="$T/nr.list" -o "$T/o5" "$N" > "$T/nr.log" 2> "$T/nr.err" || rc=$?
    fi
    [ $rc = 1 ] || fail "$mode: non-regular entries: exit $rc, want 1: $(cat "$T/nr.log" "$T/nr.err")"
    for want in "k/fifo.jpg: a FIFO, not a regular file" "topfifo: a FIFO, not a regular file" \
        "k/zero.jpg: a character device, not a regular file" "k/dangling.jpg: a dangling symbolic link" \
        "k/nested: a directory inside a class folder (not walked)"; do
        grep -q "^torus-pack: skipped $N/$want\$" "$T/nr.err" || fail "$mode: no line '$want': $(cat "$T/nr.err")"
    done
    grep -q '5 \(sources \)\?skipped' "$T/nr.log" || fail "$mode: summary: $(cat "$T/nr.log")"
done
echo "ok: a FIFO, a /dev/zero link, a dangling link and a nested folder are each reported; exit 1"
