#!/bin/bash
# json_check.sh: the checker that reads torus's JSON files back through
# json-c (tests/unit/json_check, called on the real files by
# torus_layout_cli.sh, comm_bench.sh and sweep_cluster.sh) refuses what it
# must, so that its "ok" there means something: for each kind one valid
# file passes (a real torus-layout --json for the layout), and a retyped,
# missing or out-of-range field, a duplicate key, a line that is not JSON
# and an empty file each fail with exit 1 and a message naming the file
# and line.
set -u
jc=${top_builddir:?}/tests/unit/json_check
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
# ok KIND TEXT: TEXT (one record a line) passes.
ok() {
    printf '%s\n' "$2" >"$tmp/f.json"
    "$jc" "$1" "$tmp/f.json" >"$tmp/out" 2>&1 ||
        { echo "FAIL: $1 refused a valid file: $(cat "$tmp/out")"; fails=1; }
}
# bad KIND WANT TEXT: TEXT fails, and the message matches WANT.
bad() {
    printf '%s\n' "$3" >"$tmp/f.json"
    "$jc" "$1" "$tmp/f.json" >"$tmp/out" 2>&1
    local rc=$?
    [ $rc = 1 ] && grep -Eq -- "$2" "$tmp/out" ||
        { echo "FAIL: $1: exit $rc, want 1 and /$2/: $(cat "$tmp/out")"; fails=1; }
}
f=$tmp/f.json

# layout: a real one, then placed outside its grid
"$top_builddir/topology/torus-layout" --nodes 'n[1-2]' --tasks-per-node 2 --json >"$tmp/layout.json" ||
    { echo "FAIL: torus-layout --json"; exit 1; }
ok layout "$(cat "$tmp/layout.json")"
bad layout "$f:1: .*row" "$(sed 's/"row":0/"row":99/' "$tmp/layout.json")"
bad layout "$f:1: dims is not" "$(sed 's/"dims":\[[0-9]*,/"dims":[/' "$tmp/layout.json")"

# bench: a size row and a --resnet50 row
b='"ranks":4,"nodes":2,"grid":"2x2","algo":"ring","wire":"fp16"'
ok bench "{$b,\"size\":1024,\"count\":256}
{$b,\"mode\":\"fused\",\"time_ms\":1.5,\"busbw_GBps\":2,\"wire_bytes\":512}"
bad bench "$f:2: \"time_ms\" is string" "{$b,\"size\":1024,\"count\":256}
{$b,\"mode\":\"fused\",\"time_ms\":\"fast\",\"busbw_GBps\":2,\"wire_bytes\":512}"

# metrics: torus-train's four records and the sweep's mark
step='"epoch":0,"step":1,"global_step":1,"images_per_s":10.0,"loss":2.3,"lr":0.1,"global_batch":32,"data_wait":0.0,"comm_wait":0.0'
ok metrics "{$step}
{\"epoch\":0,\"step\":2,\"global_step\":2,\"images_per_s\":10.0,\"loss\":null,\"lr\":0.1,\"global_batch\":32,\"data_wait\":0.0,\"comm_wait\":0.0}
{\"epoch\":0,\"global_step\":2,\"top1\":81.25,\"top5\":97.5,\"test_loss\":0.52,\"time\":1.0}
{\"target_top1\":80,\"global_step\":2,\"top1\":81.25,\"time\":1.0}
{\"diverged\":1,\"global_step\":3}
{\"sweep_time_before\":12.5}"
bad metrics "$f:2: no \"lr\"" "{$step}
{\"epoch\":0,\"step\":2,\"global_step\":2,\"images_per_s\":10.0,\"loss\":2.2,\"global_batch\":32,\"data_wait\":0.0,\"comm_wait\":0.0}"
bad metrics "$f:1: \"loss\" is string" "{${step/\"loss\":2.3/\"loss\":\"2.3\"}}"
bad metrics "$f:1: a key given twice" "{$step,\"loss\":1.0}"
bad metrics "$f:2" "{$step}
{\"epoch\":0,"

# results
r='"task":0,"batch":32,"recipe":"sgd","trial":0,"lr":0.8,"reached":1,"steps":40,"time":12.5,"top1":81.25'
ok results "{$r}"
bad results "$f:1: no \"steps\"" "{${r/\"steps\":40,/}}"
: >"$f"
"$jc" results "$f" >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "no JSON object" "$tmp/out" || { echo "FAIL: an empty file: $(cat "$tmp/out")"; fails=1; }

[ $fails = 0 ] && echo "PASS: json_check refuses each bad file, naming the file and line"
exit $fails
