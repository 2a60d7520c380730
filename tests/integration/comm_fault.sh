#!/bin/bash
# comm_fault.sh: lost ranks under mpirun (one host; comm_cluster.sh does the
# same across the emulated Slurm nodes). A rank that hangs mid-collective
# is named by every other rank, and the job ends non-zero, well within 60 s;
# a rank that is killed mid-collective ends the job non-zero, no hang.
set -u
. "$top_srcdir/tests/integration/comm_lib.sh"
BIN="$top_builddir/tests/integration/comm_fault_check"

# _stall WHAT ARGS...: rank 2 hangs in the all-reduce; the job ends
# non-zero within 60 s and the 3 others name rank 2.
_stall() {
    local what=$1 t0=$SECONDS out rc n
    shift
    out=$(cm_mpirun 4 "$BIN" --stall 2 --timeout 3 "$@" 2>&1)
    rc=$?
    echo "$out" | grep -E 'hanging|is lost'
    [ $rc != 0 ] && [ $rc != 124 ] || cm_fail "$what: exit $rc (124 = hung)"
    n=$(echo "$out" | grep -c 'rank 2 is lost')
    [ "$n" = 3 ] || cm_fail "$what: $n of 3 ranks named rank 2"
    [ $((SECONDS - t0)) -le 60 ] || cm_fail "$what: took $((SECONDS - t0)) s"
}
_stall stall --algo torus2d
# Pipelined torus2d (rows in shared memory, 32 MiB in 8 pieces): the
# column ring waits on the pipeline's own thread.
_stall "pipelined stall" --algo torus2d --grid 2x2 --count 8388608

t0=$SECONDS
out=$(cm_mpirun 4 "$BIN" --die 1 --timeout 3 --algo hier 2>&1)
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || cm_fail "kill: exit $rc (124 = hung)"
echo "$out" | grep -q 'finished all iterations' && cm_fail "kill: a rank finished despite the loss"
[ $((SECONDS - t0)) -le 60 ] || cm_fail "kill: took $((SECONDS - t0)) s"
echo "$out" | grep -Ei 'rank 1|dying|exited on signal' | head -3
echo "PASS"
