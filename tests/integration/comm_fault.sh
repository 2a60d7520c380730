#!/bin/bash
# comm_fault.sh: lost ranks under mpirun (one host; comm_cluster.sh does the
# same across the emulated Slurm nodes). A rank that hangs mid-collective
# is named by every other rank, and the job ends non-zero, well within 60 s
# (also inside a pipelined all-reduce, and for a rank that starts so late
# that the others wait inside MPI's start-up);
# a rank that is killed mid-collective ends the job non-zero, no hang; a
# rank that sends a longer vector than the others is named as the sender
# of a mismatch, not as lost.
set -u
. "$top_srcdir/tests/integration/comm_lib.sh"
BIN="$top_builddir/tests/integration/comm_fault_check"

# _gives_up WHAT MIN PATTERN ARGS...: the job ends non-zero within 60 s,
# no hang, at least MIN of the 3 ranks that waited print PATTERN, and rank 2
# (the one at fault) does not.
_gives_up() {
    local what=$1 min=$2 pat=$3 t0=$SECONDS out rc n
    shift 3
    out=$(cm_mpirun 4 "$BIN" --timeout 3 "$@" 2>&1)
    rc=$?
    echo "$out" | grep -E "hanging|late|$pat"
    [ $rc != 0 ] && [ $rc != 124 ] || cm_fail "$what: exit $rc (124 = hung)"
    n=$(echo "$out" | grep -c "$pat")
    [ "$n" -ge "$min" ] || cm_fail "$what: $n of 3 ranks printed '$pat' (want $min)"
    echo "$out" | grep "$pat" | grep -q "rank 2:" && cm_fail "$what: rank 2 blamed itself"
    [ $((SECONDS - t0)) -le 60 ] || cm_fail "$what: took $((SECONDS - t0)) s"
}
# Rank 2 hangs in the all-reduce: every other rank names it.
_gives_up stall 3 'rank 2 is lost' --stall 2 --algo torus2d
# Pipelined torus2d (rows in shared memory, 32 MiB in 16 pieces): the
# column ring waits on the pipeline's own thread.
_gives_up "pipelined stall" 3 'rank 2 is lost' --stall 2 --algo torus2d --grid 2x2 --count 8388608
# Rank 2 starts 45 s late: the others wait inside MPI's start-up, where
# tcomm's start-up deadline (4 x --timeout, at least 20 s) ends it. Each
# rank's deadline runs from its own start, which on a loaded host can be
# seconds apart, and mpirun ends the job when the first one gives up: at
# least one must say so.
_gives_up "late start" 1 'start-up did not finish within 20 s' --late 2 45

# Rank 2 all-reduces a longer vector than the others once (a caller bug):
# the rank that receives its longer message (rank 0, its column peer in
# the 2x2 grid) names rank 2 as the sender of a mismatch; nobody calls the
# live rank 2 lost. (On the world communicator, MPI's own handler ends the
# job with "MPI_ERR_TRUNCATE: message truncated".)
t0=$SECONDS
out=$(cm_mpirun 4 "$BIN" --longer 2 --timeout 3 --algo torus2d --grid 2x2 2>&1)
rc=$?
echo "$out" | grep -E 'sent more|is lost' | head -4
[ $rc != 0 ] && [ $rc != 124 ] || cm_fail "longer: exit $rc (124 = hung)"
echo "$out" | grep -q 'rank 2 sent more than this rank expected in the column communicator (MPI_ERR_TRUNCATE)' ||
    cm_fail "longer: no rank named rank 2's longer message"
echo "$out" | grep -q 'rank 2 is lost' && cm_fail "longer: the live rank 2 was called lost"
[ $((SECONDS - t0)) -le 60 ] || cm_fail "longer: took $((SECONDS - t0)) s"

t0=$SECONDS
out=$(cm_mpirun 4 "$BIN" --die 1 --timeout 3 --algo hier 2>&1)
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || cm_fail "kill: exit $rc (124 = hung)"
echo "$out" | grep -q 'finished all iterations' && cm_fail "kill: a rank finished despite the loss"
[ $((SECONDS - t0)) -le 60 ] || cm_fail "kill: took $((SECONDS - t0)) s"
echo "$out" | grep -Ei 'rank 1|dying|exited on signal' | head -3
echo "PASS"
