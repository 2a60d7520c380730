#!/bin/bash
# plugin_uneven.sh: spank_torus.so on an uneven allocation (5 nodes under
# one leaf, 3 under the other): auto must keep rows inside a leaf, give a
# valid grid, and match torus-layout for the full step and for sub-steps.
set -euo pipefail
. "$top_srcdir/tests/cluster/testlib.sh"
. "$top_srcdir/tests/integration/plugin_lib.sh"
pl_up --nodes 8 --leaf-sizes 5,3
t=$PL_TMP
# "nodes tasks-per-node": the full step, single-task nodes, a sub-step
# inside one leaf, and a sub-step over both.
for shape in "8 2" "8 1" "3 2" "5 1"; do
    set -- $shape
    pl_dump "$t/u$1x$2" -N"$1" --ntasks-per-node="$2" --torus
    nodes=$(cut -d' ' -f2 "$t/u$1x$2" | sort -u | paste -sd, -)
    pl_layout "$t/u$1x$2.json" --nodes "$nodes" --tasks-per-node "$2"
    pl_match "$t/u$1x$2" "$t/u$1x$2.json"
done
# 8 nodes x 2 tasks: a 2-node row would straddle the 5+3 split somewhere.
python3 - "$t/u8x2.json" <<'PY' || tl_fail "a row spans both leaves"
import json, sys
doc = json.load(open(sys.argv[1]))
rows = {}
for t in doc["tasks"]:
    rows.setdefault(t["row"], set()).add(t["group"])
assert all(len(g) == 1 for g in rows.values()), rows
PY
echo "PASS: spank_torus on 5+3 leaves"
