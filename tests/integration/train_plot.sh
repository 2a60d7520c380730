#!/bin/bash
# train_plot.sh: torus-plot draws a PNG from torus-train metrics (training
# records and evaluation records, two files over each other), draws the
# numbers it was given (checked through -v: the data and axis ranges that
# gnuplot itself reports for each panel; accuracy is in percent, as
# torus-train writes it, on an axis that ends at 100; the target_top1
# record is not an evaluation point), and refuses bad input with exit 2
# (not JSON, no metrics, no jq).
set -u
plot=${top_srcdir:?}/trainer/torus-plot
if ! command -v gnuplot >/dev/null; then
    echo "SKIP: gnuplot is not installed (Debian: gnuplot-nox)"
    exit 77
fi
if ! command -v jq >/dev/null; then
    echo "SKIP: jq is not installed (Debian: jq; tools/install-deps)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in 1 2 3 4; do
    printf '{"epoch":0,"step":%d,"global_step":%d,"images_per_s":10.0,"loss":%s,"lr":%s,"global_batch":%d,"data_wait":0.0,"comm_wait":0.0}\n' \
        "$s" "$s" "2.$((9 - s))" "0.0$s" $((s > 2 ? 256 : 128))
done >"$tmp/a.jsonl"
# Evaluation records as torus-train writes them (trainer/torus-train.c):
# top1/top5 in percent.
echo '{"epoch":0,"global_step":2,"top1":81.2500,"top5":97.5000,"test_loss":0.520000,"time":1.000}' >>"$tmp/a.jsonl"
echo '{"epoch":1,"global_step":4,"top1":90.5000,"top5":99.1000,"test_loss":0.310000,"time":2.000}' >>"$tmp/a.jsonl"
sed 's/"loss":2/"loss":1/' "$tmp/a.jsonl" >"$tmp/b.jsonl"
fails=0
bash "$plot" -v -o "$tmp/out.png" -t check "$tmp/a.jsonl" "$tmp/b.jsonl" >"$tmp/log" 2>&1 ||
    { echo "FAIL: torus-plot: $(cat "$tmp/log")"; fails=1; }
cat "$tmp/log"
# panel PANEL WANT: -v's line for PANEL starts with WANT (the data read).
panel() {
    grep -q "^$1: $2;" "$tmp/log" || { echo "FAIL: $1 panel: want '$2', got '$(grep "^$1:" "$tmp/log")'"; fails=1; }
}
panel loss 'data x 1..4 y 1.5..2.8'
panel lr 'data x 1..4 y 0.01..0.04'
panel batch 'data x 1..4 y 128..256'
panel accuracy 'data x 0..1 y 81.25..99.1'
# The accuracy axis ends at 100 and starts at or below the lowest value,
# not far below it (50 at the least).
awk '/^accuracy:/ { split($NF, r, /\.\./); ok = r[1] >= 50 && r[1] <= 81.25 && r[2] == 100 }
     END { exit !ok }' "$tmp/log" ||
    { echo "FAIL: accuracy axis is not 50..100 at most: $(grep '^accuracy:' "$tmp/log")"; fails=1; }
[ "$(head -c 8 "$tmp/out.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    { echo "FAIL: output is not a PNG"; fails=1; }
[ "$(stat -c %s "$tmp/out.png")" -gt 10000 ] || { echo "FAIL: PNG is suspiciously small"; fails=1; }
# A run that reached --target-top1 also writes a "target_top1" record
# (trainer/train/metrics.c): the top1 that reached the target, no epoch.
# It is no evaluation point (read as one, it was drawn at epoch 90.5).
# A window whose steps were all skipped has a null loss: no training point.
cp "$tmp/a.jsonl" "$tmp/t.jsonl"
echo '{"epoch":0,"step":5,"global_step":5,"images_per_s":10.0,"loss":null,"lr":0.05,"global_batch":256,"data_wait":0.0,"comm_wait":0.0}' >>"$tmp/t.jsonl"
echo '{"target_top1":90.0000,"global_step":4,"top1":90.5000,"time":2.000}' >>"$tmp/t.jsonl"
bash "$plot" -v -o "$tmp/t.png" "$tmp/t.jsonl" >"$tmp/log" 2>&1 ||
    { echo "FAIL: torus-plot with a target_top1 record: $(cat "$tmp/log")"; fails=1; }
panel accuracy 'data x 0..1 y 81.25..99.1'
panel lr 'data x 1..4 y 0.01..0.04'
# JSON is read by jq, not picked out of the text: a record cut short, or
# one that is not an object, is refused naming the file and the line.
head -c -20 "$tmp/a.jsonl" >"$tmp/cut.jsonl"
printf '{"loss":1,"global_step":1}\n[1]\n' >"$tmp/arr.jsonl"
for f in cut arr; do
    bash "$plot" -o "$tmp/x.png" "$tmp/$f.jsonl" 2>"$tmp/err"
    [ $? -eq 2 ] && grep -Eq "torus-plot: '$tmp/$f.jsonl' is not torus-train's JSON: .*(line [0-9]+|$f.jsonl:[0-9]+)" "$tmp/err" ||
        { echo "FAIL: $f.jsonl: $(cat "$tmp/err")"; fails=1; }
done
# Without jq, torus-plot says so (exit 2) instead of drawing nothing.
mkdir "$tmp/bin"
for t in bash gnuplot dirname sed; do ln -s "$(command -v $t)" "$tmp/bin/$t"; done
PATH=$tmp/bin "$tmp/bin/bash" "$plot" -o "$tmp/x.png" "$tmp/a.jsonl" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "jq not found" "$tmp/err" ||
    { echo "FAIL: no jq: $(cat "$tmp/err")"; fails=1; }
echo '{"hello":1}' >"$tmp/none.jsonl"
bash "$plot" -o "$tmp/x.png" "$tmp/none.jsonl" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "no torus-train metrics" "$tmp/err" || { echo "FAIL: non-metrics input accepted"; fails=1; }
bash "$plot" -o "$tmp/x.png" "$tmp/missing.jsonl" 2>/dev/null
[ $? -eq 2 ] || { echo "FAIL: missing input accepted"; fails=1; }
[ $fails -eq 0 ] && echo "PASS: torus-plot"
exit $fails
