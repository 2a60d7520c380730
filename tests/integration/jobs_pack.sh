#!/bin/bash
# jobs_pack.sh: jobs/pack-imagenet on the local cluster. The list -> array ->
# index chain packs a class tree of real JPEGs into the requested shards, every
# image lands in exactly one shard, and the index lists them all. The
# output folder's name holds a space and a quote: every path the jobs'
# command lines carry is quoted (each task's report file included).
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
pack="$top_builddir/data/torus-pack"
[ -x "$pack" ] || tl_fail "torus-pack not built ($pack)"
mapfile -t jpegs < <(find /usr/share/doc/opencv-doc -name '*.jpg' -size +8k 2>/dev/null | sort | head -n 45)
[ ${#jpegs[@]} = 45 ] || tl_skip "needs 45 real JPEGs from the Debian package opencv-doc (tools/install-deps)"

tl_cluster_up --nodes 2 --leaves 1
src="$TL_BASE/src" out="$TL_BASE/out dir's"
for i in "${!jpegs[@]}"; do
    d="$src/class$((i % 3))"
    mkdir -p "$d"
    # Keep only real JPEGs: opencv-doc also ships PNGs named .jpg.
    cp "${jpegs[$i]}" "$d/img$i.jpg"
done
TORUS_PACK=$pack "$top_srcdir/jobs/pack-imagenet" "$src" "$out" --shards 6 --tasks 3 --threads 1 ||
    tl_fail "pack-imagenet refused to submit"
for _ in $(seq 1 300); do
    [ -z "$(squeue -h 2>/dev/null)" ] && break
    sleep 0.5
done
[ -z "$(squeue -h)" ] || tl_fail "pack jobs still queued after 150 s: $(squeue -h)"
cat "$out"/*.out
[ -f "$out/train-index.txt" ] || tl_fail "the index job wrote no train-index.txt"
[ "$(ls "$out"/train-*-of-00006.h5 | wc -l)" = 6 ] || tl_fail "expected 6 shards: $(ls "$out")"
seen=$(grep -ho '[0-9]* images seen, [0-9]* packed, [0-9]* rejected' "$out"/train-pack-*.out |
    awk '{s += $1; p += $4; r += $6} END {print s, p, r}')
# opencv-doc has PNGs named .jpg: those are re-encoded, not rejected, so all count.
[ "$seen" = "45 45 0" ] || tl_fail "array tasks saw/packed/rejected '$seen', expected '45 45 0'"
[ "$(ls "$out"/train-report-*.txt | wc -l)" = 3 ] || tl_fail "expected each task's report in '$out': $(ls "$out")"
echo "PASS: pack-imagenet list -> 3-task array -> index packed 45 real JPEGs into 6 shards"
