#!/bin/bash
# sweep_report.sh: torus-sweep report when no task reached the target, with
# the real torus-sweep and gnuplot and no cluster: a two-batch plan whose
# results say both tasks ran their budget and missed (as torus-sweep run
# appends them). The report must print its table (both batches "not hit"),
# say that no batch reached the target, draw the PNG (an empty frame
# labelled so) and exit 0; gnuplot refuses a plot with no defined point,
# which made this exit 1 before. Then the same sweep with a second part
# (batch 128, planned apart, as a plan with results cannot change):
# report DIR DIR2 merges it into one table, and a part planned with
# another target is refused, naming both plans, and an option where the
# first directory goes is a usage error, not a directory.
set -euo pipefail
sweep=${top_builddir:?run from make check}/trainer/sweep/torus-sweep
command -v gnuplot > /dev/null || { echo "SKIP: gnuplot not installed (Debian: gnuplot-nox)"; exit 77; }
T=$(mktemp -d "$top_builddir/sweep_report.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
d=$T/run
"$sweep" plan "$d" --target 90 --batches 32,64 --trials 1 --epochs 1 --lr 0.1 \
    --train "--data $T/none --model tiny-cnn" --recipe "sgd=--decay none" > "$T/plan.log" ||
    fail "plan: $(cat "$T/plan.log")"
while read -r _ id batch recipe trial lr; do
    printf '{"task":%d,"batch":%d,"recipe":"%s","trial":%d,"lr":%s,"reached":0,"steps":%d,"time":1.5,"top1":42.5}\n' \
        "$id" "$batch" "$recipe" "$trial" "$lr" $((batch * 3)) >> "$d/results.jsonl"
done < <(grep '^task ' "$d/plan")
[ "$(wc -l < "$d/results.jsonl")" = 2 ] || fail "plan has not 2 tasks: $(cat "$d/plan")"
rc=0
"$sweep" report "$d" -o "$T/s.png" > "$T/report.log" 2>&1 || rc=$?
[ $rc = 0 ] || fail "report exit $rc: $(cat "$T/report.log")"
[ "$(grep -c '^sgd  *\(32\|64\) .*not hit' "$T/report.log")" = 2 ] || fail "table: $(cat "$T/report.log")"
grep -q 'no batch reached the target' "$T/report.log" || fail "no 'no batch reached': $(cat "$T/report.log")"
[ "$(head -c 8 "$T/s.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || fail "s.png is not a PNG"
[ "$(stat -c %s "$T/s.png")" -gt 1000 ] || fail "s.png is empty"

d2=$T/part2
"$sweep" plan "$d2" --target 90 --batches 128 --trials 1 --epochs 1 --lr 0.1 \
    --train "--data $T/none --model tiny-cnn" --recipe "sgd=--decay none" > "$T/plan2.log" ||
    fail "plan part 2: $(cat "$T/plan2.log")"
printf '{"task":0,"batch":128,"recipe":"sgd","trial":0,"lr":0.10000000000000001,"reached":1,"steps":50,"time":2,"top1":90.5}\n' \
    > "$d2/results.jsonl"
"$sweep" report "$d" "$d2" -o "$T/m.png" > "$T/merge.log" 2>&1 || fail "report of two parts: $(cat "$T/merge.log")"
grep -q '^sgd  *128 .* 50 .*perfect' "$T/merge.log" || fail "merged table: $(cat "$T/merge.log")"
[ "$(grep -c '^sgd  *\(32\|64\) .*not hit' "$T/merge.log")" = 2 ] || fail "merged table lost part 1: $(cat "$T/merge.log")"
sed -i 's/^target 90$/target 80/' "$d2/plan"
rc=0
"$sweep" report "$d" "$d2" -o "$T/m.png" > "$T/merge.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "$d/plan and $d2/plan differ in 'target'" "$T/merge.log" ||
    fail "parts of two sweeps: exit $rc: $(cat "$T/merge.log")"
rc=0
"$sweep" report -o "$T/m.png" "$d" > "$T/merge.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "cannot start with '-'" "$T/merge.log" ||
    fail "an option taken for a sweep directory: exit $rc: $(cat "$T/merge.log")"
echo "ok: report with no batch at the target: table, message, PNG, exit 0; two parts merged, two sweeps refused"
