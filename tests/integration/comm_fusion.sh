#!/bin/bash
# comm_fusion.sh: fusion buckets across P in {1,2,3,4,6,8} ranks under
# mpirun: correct averages, thread == synchronous == scrambled ready order
# (bitwise), several bucket sizes (theta) including one bucket per tensor
# and one bucket for all; gradients in shared memory reduced in place (see
# below); and a rank with a different layout is caught at seal on every
# rank, with a message naming it.
set -u
. "$top_srcdir/tests/integration/comm_lib.sh"
BIN="$top_builddir/tests/integration/comm_fusion_check"

for P in 1 2 3 4 6 8; do
    for args in "--theta 8192 --algo ring" "--theta 1 --algo hier --group-size 2" \
                "--theta 100000000 --algo torus2d" "--theta 30000 --algo hybrid" \
                "--theta 20000 --algo hier-rs --group-size 2"; do
        [ $P = 1 ] && [ "$args" != "--theta 8192 --algo ring" ] && continue
        [ $((P % 2)) = 1 ] && [[ $args == *hier-rs* ]] && continue
        out=$(cm_mpirun $P "$BIN" $args 2>&1)
        rc=$?
        echo "$out" | sed "s/^/P=$P $args | /"
        [ $rc = 0 ] && echo "$out" | grep -q '^PASS' || cm_fail "P=$P $args (exit $rc)"
    done
done

# Gradients in tcomm_shared_alloc memory: rows (torus2d) and groups
# (hier-rs) on the node reduce in place, a NaN is counted alike on every
# rank, hybrid picks the in-place path; skewed offsets on one rank, and algorithms without an on-node
# stage, keep every rank on the packed path.
_shared() { # P WANT ARGS...
    local P=$1 out rc
    shift
    out=$(cm_mpirun $P "$BIN" --shared "$@" 2>&1)
    rc=$?
    echo "$out" | sed "s/^/shared P=$P $* | /"
    [ $rc = 0 ] && echo "$out" | grep -q '^PASS' || cm_fail "shared P=$P $* (exit $rc)"
}
for P in 2 3 4 6 8; do
    _shared $P all --algo torus2d --theta 20000
    [ $((P % 2)) = 0 ] && _shared $P all --algo hier-rs --group-size 2 --theta 20000
done
_shared 1 none --algo torus2d
_shared 4 all --algo torus2d --grid 2x2 --theta 1
_shared 6 all --algo torus2d --grid 2x3 --theta 100000000
_shared 4 none --algo torus2d --skew 2
_shared 4 none --algo ring --theta 8192
# hybrid prices the in-place sum (core/pick.c), so it picks an algorithm
# that runs it for every bucket, small or large.
_shared 4 all --algo hybrid --theta 30000
_shared 4 all --algo hybrid --grid 2x2 --theta 1
_shared 6 all --algo hybrid --grid 2x3 --group-size 2 --theta 20000

out=$(cm_mpirun 4 "$BIN" --mismatch 2 2>&1)
rc=$?
[ $rc != 0 ] || cm_fail "a rank with a different bucket layout was not caught"
n=$(echo "$out" | grep -c "rank 2's bucket layout .* differs from rank 0's")
[ "$n" = 4 ] || { echo "$out"; cm_fail "expected all 4 ranks to name rank 2, got $n"; }
echo "ok: mismatch caught on all ranks: $(echo "$out" | grep -m1 'differs')"
echo "PASS"
