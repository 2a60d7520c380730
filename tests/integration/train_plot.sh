#!/bin/bash
# train_plot.sh: torus-plot draws a PNG from torus-train metrics (training
# records and evaluation records, two files over each other) and refuses
# bad input with exit 2.
set -u
plot=${top_srcdir:?}/trainer/torus-plot
if ! command -v gnuplot >/dev/null; then
    echo "SKIP: gnuplot is not installed (Debian: gnuplot-nox)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in 1 2 3 4; do
    printf '{"epoch":0,"step":%d,"global_step":%d,"images_per_s":10.0,"loss":%s,"lr":%s,"global_batch":%d,"data_wait":0.0,"comm_wait":0.0}\n' \
        "$s" "$s" "2.$((9 - s))" "0.0$s" $((s > 2 ? 256 : 128))
done >"$tmp/a.jsonl"
echo '{"epoch":0,"top1":0.81,"top5":0.97}' >>"$tmp/a.jsonl"
sed 's/"loss":2/"loss":1/' "$tmp/a.jsonl" >"$tmp/b.jsonl"
fails=0
bash "$plot" -o "$tmp/out.png" -t check "$tmp/a.jsonl" "$tmp/b.jsonl" >"$tmp/log" 2>&1 ||
    { echo "FAIL: torus-plot: $(cat "$tmp/log")"; fails=1; }
[ "$(head -c 8 "$tmp/out.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    { echo "FAIL: output is not a PNG"; fails=1; }
[ "$(stat -c %s "$tmp/out.png")" -gt 10000 ] || { echo "FAIL: PNG is suspiciously small"; fails=1; }
echo '{"hello":1}' >"$tmp/none.jsonl"
bash "$plot" -o "$tmp/x.png" "$tmp/none.jsonl" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "no torus-train metrics" "$tmp/err" || { echo "FAIL: non-metrics input accepted"; fails=1; }
bash "$plot" -o "$tmp/x.png" "$tmp/missing.jsonl" 2>/dev/null
[ $? -eq 2 ] || { echo "FAIL: missing input accepted"; fails=1; }
[ $fails -eq 0 ] && echo "PASS: torus-plot"
exit $fails
