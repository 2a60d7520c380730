#!/bin/bash
# comm_bench.sh: torus-bench works in its three modes and its results are
# checked: the sweep as one process and under mpirun (every line #wrong 0
# out-of-place and in-place, one line per size x wire x algorithm; with
# --json one JSON object per line that says the same, in-place rows of a
# node's torus2d row reduced where they lie, hybrid's picks (algorithm and
# wire per placement) as its '# hybrid ran' line says, fp32 in place on
# one node; "# Avg bus bandwidth" the mean
# of the printed busbw columns), the ResNet-50 mode (161 tensors,
# busbw on the user's fp32 bytes and the wire's bytes apart; the
# --json one object per row; the like-for-like chain of
# tests/bench/comm/chain.awk holds on its rows and
# fails on a "fused" row whose theta leaves every tensor alone,
# correct fused results), and the model mode (the 2D torus needs far fewer
# steps than the ring at 4096 ranks and is predicted faster there); the
# header's wait policy (napping exactly where the ranks outnumber their
# CPUs, TCOMM_POLL_SLEEP winning); plus --help and usage errors.
set -u
. "$top_srcdir/tests/integration/comm_lib.sh"
TB="$top_builddir/trainer/bench/torus-bench"

"$TB" --help | grep -q 'RESNET-50 OPTIONS' || cm_fail "--help lacks its sections"
"$TB" --bogus >/dev/null 2>&1; [ $? = 2 ] || cm_fail "an unknown option must exit 2"
"$TB" -a nosuch 2>&1 | grep -q "bad algorithm list 'nosuch'" || cm_fail "bad -a not named"

out=$("$TB" -b 4K -e 64K -f 4 -n 2 -w 1 -d fp32,fp16) || { echo "$out"; cm_fail "singleton sweep"; }
echo "$out" | grep -q '# all results correct' || cm_fail "singleton sweep not checked"

json=$(mktemp)
trap 'rm -f "$json"' EXIT
out=$(cm_mpirun 3 "$TB" -b 1K -e 256K -f 16 -n 2 -w 1 -a all -d fp32,fp16,bf16 --group-size 2 --json "$json" 2>&1) ||
    { echo "$out"; cm_fail "sweep under mpirun -np 3"; }
echo "$out" | head -4
"$top_builddir/tests/unit/json_check" bench "$json" || cm_fail "json-c does not read --json back"
lines=$(echo "$out" | grep -c '^ ')
[ "$lines" = $((3 * 3 * 6)) ] || { echo "$out"; cm_fail "expected 54 result lines, got $lines"; }
echo "$out" | awk '/^ / && $5 != "n/a" && ($8 != 0 || $12 != 0 || $9 == "n/a") {bad=1} END {exit bad}' ||
    cm_fail "a sweep line has #wrong != 0, or no in-place result"
# The closing line: the mean of every printed busbw (columns 7 and 11).
echo "$out" | awk '/^ / && $5 != "n/a" { s += $7 + $11; n += 2 }
    /^# Avg bus bandwidth *: / { avg = $NF; seen = 1 }
    END { d = avg - s / n; if (d < 0) d = -d; exit !(seen && n > 0 && d < 0.001) }' ||
    cm_fail "'# Avg bus bandwidth' is not the mean busbw: $(echo "$out" | tail -2)"
# How waits poll: napping from the first poll exactly where the 3 ranks
# outnumber the CPUs they may run on (nproc: this shell's affinity, which
# mpirun's ranks inherit); TCOMM_POLL_SLEEP set wins.
cpus=$(nproc)
if [ 3 -gt "$cpus" ]; then want="nap from the first poll"; else want="spin, then nap"; fi
echo "$out" | grep -q "^# waits $want: 3 ranks share rank 0's machine, with $cpus CPUs" ||
    cm_fail "waits: want '$want' for 3 ranks on $cpus CPUs: $(echo "$out" | grep '^# waits')"
w=$(cm_mpirun 3 -x TCOMM_POLL_SLEEP=20000 "$TB" -b 1K -e 1K -n 1 -w 0 -a ring -d fp32 2>&1 | grep '^# waits')
[[ $w == "# waits spin, then nap: 3 ranks"* ]] || cm_fail "TCOMM_POLL_SLEEP=20000 does not win: $w"
hyb=$(echo "$out" | grep '^# *hybrid ran ')
/usr/bin/python3 - "$json" "$lines" "$hyb" <<'PY' || cm_fail "--json does not match the table"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == int(sys.argv[2]), "%d JSON rows" % len(rows)
ok = [r for r in rows if r.get("supported", True)]
assert all(r["oop_wrong"] == 0 and r["ip_wrong"] == 0 for r in ok)
assert all(abs(r["oop_busbw_GBps"] - r["oop_algbw_GBps"] * 4 / 3) < 1e-5 for r in ok)
assert any(r["algo"] == "torus2d" and r["ip_reduced_in_place"] for r in ok)
assert not any(r["algo"] == "flat" and r["ip_reduced_in_place"] for r in ok)
assert {r["algo"] for r in rows if not r.get("supported", True)} == {"hier-rs"}
# hybrid: what it picked, per placement, as the table's '# hybrid ran' line
# says; on one node in place it sums in fp32 whatever the wire asked.
hy = [r for r in ok if r["algo"] == "hybrid"]
said = [l.split("hybrid ran ", 1)[1].strip() for l in sys.argv[3].splitlines()]
assert len(hy) == 9 and len(said) == 9, (len(hy), len(said))
for r, line in zip(hy, said):
    want = "%s on %s out of place, %s on %s in place" % (
        r["oop_ran"], r["oop_ran_wire"], r["ip_ran"], r["ip_ran_wire"])
    assert line == want, (line, want)
    assert r["oop_ran"] in ("flat", "ring", "hier", "torus2d"), r
assert all(r["ip_ran_wire"] == "fp32" for r in hy), hy
assert any(r["wire"] != "fp32" for r in hy)
print("ok: %d JSON rows" % len(rows))
PY
echo "$out" | grep -q 'hier-rs *n/a' || cm_fail "hier-rs must be n/a with unequal groups of 2 and 1"

out=$(cm_mpirun 2 "$TB" --resnet50 --steps 1 -a ring,torus2d --theta 2M,auto 2>&1) ||
    { echo "$out"; cm_fail "resnet50 mode"; }
echo "$out"
# theta auto: each auto row's bucket count is the one its reason names.
echo "$out" | awk '/^# theta auto: / { n[++k] = $6 }
    /^fused(-shm)? / && $4 == "auto" { if ($5 != n[k]) bad = 1; rows++ }
    END { exit !(rows == 4 && k == 4 && !bad) }' ||
    cm_fail "--theta auto: expected 4 auto rows, each with its reason's bucket count"
echo "$out" | grep -q '161 tensors, 25557032 parameters' || cm_fail "wrong ResNet-50 shapes"
echo "$out" | grep -Eq '^per-tensor +flat +fp32 +- +161 ' || cm_fail "no per-tensor baseline row"
[ "$(echo "$out" | grep -c '^fused ')" = 4 ] || cm_fail "expected 4 fused rows"
[ "$(echo "$out" | grep -c '^fused-shm ')" = 4 ] || cm_fail "expected 4 fused-shm rows"
echo "$out" | awk '/^(fused|fused-shm|per-tensor) / && $NF != 0 {bad=1} END {exit bad}' ||
    cm_fail "wrong ResNet-50 gradients"

# busbw = 102.2 MB fp32 x 2(P-1)/P / time at P=2; wire(MB) by the wire.
echo "$out" | awk '$1 ~ /^(fused|per-tensor)/ {
        want = 25557032 * 4 / ($6 / 1e3) / 1e9; d = $8 / want - 1
        if (d > 0.01 || d < -0.01 || $9 != ($3 == "fp16" ? 51.1 : 102.2)) bad = 1 }
    END { exit bad }' || cm_fail "resnet50 busbw or wire(MB) columns are not on the right bytes"
out=$(cm_mpirun 2 "$TB" --resnet50 --steps 1 -a flat,torus2d -d fp32,fp16 --theta 4M,1 --json "$json" 2>&1) ||
    { echo "$out"; cm_fail "resnet50 mode for the chain"; }
"$top_builddir/tests/unit/json_check" bench "$json" || cm_fail "json-c does not read --resnet50 --json back"
/usr/bin/python3 - "$json" "$(echo "$out" | grep -cE '^(per-tensor|rw-ref|fused|fused-shm) ')" <<'PY' ||
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == int(sys.argv[2]), "%d JSON rows for %s table rows" % (len(rows), sys.argv[2])
assert all(r["user_bytes"] == 25557032 * 4 for r in rows)
assert all(r["wire_bytes"] == r["user_bytes"] // (2 if r["wire"] == "fp16" else 1) for r in rows)
assert [r["mode"] for r in rows[:2]] == ["per-tensor", "rw-ref"] and "wrong" not in rows[1]
assert all(r["wrong"] == 0 for r in rows if r["mode"] != "rw-ref")
PY
    cm_fail "--resnet50 --json does not match the table"
chain=$top_srcdir/tests/bench/comm/chain.awk
echo "$out" | awk -v theta=4M -v algo=torus2d -f "$chain" || cm_fail "the 4M chain does not hold"
if msg=$(echo "$out" | awk -v theta=1 -v algo=torus2d -f "$chain"); then
    cm_fail "the chain passed with a fused row of one tensor per bucket"
fi
grep -q "^chain: link 'fusion' changes nothing" <<<"$msg" || cm_fail "chain with theta 1: $msg"

out=$("$TB" --model -P 4096 --ranks-per-node 8 --scaling -b 64M -e 64M) || cm_fail "model mode"
echo "$out" | tail -3
echo "$out" | awk '$1 == 4096 && $2 == "512x8" {
        found = 1
        split($NF, s, "/")
        # columns: P grid flat ring hier hier-rs torus2d ...
        if (!($7 < $4) || !(s[2] + 0 < (s[1] + 0) / 5)) bad = 1
    } END { exit !(found && !bad) }' || cm_fail "model: torus2d not ahead of the ring at 4096 ranks"
echo "PASS"
