#!/bin/bash
# comm_fault_calls.sh: no hang and no false blame in every libtcomm call
# that waits for other ranks, on the real local Slurm cluster (srun
# --mpi=pmix -N2 -n4; the rank at fault, 3, shares its node with rank 2).
# For each call, rank 3 is stopped (SIGSTOP: a hung node) or killed
# (SIGKILL) just before it, so the others wait inside it:
#   flat all-reduce (MPI_Allreduce under a guard thread), tcomm_max_double, tcomm_sum_double,
#   tcomm_bcast_bytes, tcomm_shared_alloc (its first agreement),
#   tcomm_finalize (which frees windows and finalizes MPI: blocking), and
#   inside tcomm_shared_alloc's window allocation itself (TCOMM_FAULT:
#   before its agreement, and between it and the blocking
#   MPI_Win_allocate_shared, where only the guard thread can end the wait).
# Every other rank must exit non-zero within 60 s, naming rank 3 ("rank 3
# is lost"; after a SIGKILL srun's "task 3" names it as well).
# Then: rank 3 cannot allocate its shared segment (its backing directory
# does not exist): every rank fails, the others naming rank 3, none hangs.
# Then: rank 3 hangs in its own start-up after tcomm_init (outside any
# collective): the start-up watchdog, armed until tcomm_startup_done,
# ends it. Then: a long wait on purpose (tcomm_barrier_timeout,
# tcomm_set_timeout) blames no one, and still names a stopped rank.
# Finally: the killed jobs left nothing in their shared-memory
# backing directory.
set -u
. "$top_srcdir/tests/cluster/testlib.sh"
. "$top_srcdir/tests/integration/comm_lib.sh"
BIN="$top_builddir/tests/integration/comm_fault_check"
tl_cluster_up --nodes 2
export OMPI_MCA_btl_tcp_if_include=lo
# A backing directory of our own (as comm_cluster.sh): OpenMPI's vader
# segments and the windows' files of these jobs go there and nowhere else,
# so what they leave behind can be counted (tl_cluster_down removes it).
SHM="$TL_BASE/ompi-shm"
mkdir -p "$SHM" "$TL_BASE/ompi-tmp"
export OMPI_MCA_btl_vader_backing_directory="$SHM"
export OMPI_MCA_osc_sm_backing_directory="$SHM"
export OMPI_MCA_orte_tmpdir_base="$TL_BASE/ompi-tmp"

# _run WHAT ARGS...: srun the check; sets OUT, RC, DT.
_run() {
    local what=$1 t0=$SECONDS
    shift
    OUT=$(TL_SRUN_TIMEOUT=90 tl_srun_mpi --mpi=pmix -N2 -n4 "$@")
    RC=$?
    DT=$((SECONDS - t0))
    echo "$OUT" | grep -E 'rank 3|task 3|TCOMM_FAULT|start-up' | head -6 | sed "s/^/[$what] /"
    [ $RC != 0 ] || tl_fail "$what: the job succeeded without rank 3"
    [ $RC != 124 ] || tl_fail "$what: the job hung"
    [ $DT -le 60 ] || tl_fail "$what: took $DT s"
    echo "$OUT" | grep -q 'finished all iterations' &&
        tl_fail "$what: a rank finished despite the loss"
    return 0
}

# _named WHAT PATTERN: all 3 other ranks print PATTERN naming rank 3, and
# rank 3 does not blame itself.
_named() {
    local n
    n=$(echo "$OUT" | grep -E "rank [012]:.*$2" | grep -c "rank 3")
    [ "$n" -ge 3 ] || tl_fail "$1: $n of 3 ranks named rank 3 ('$2')"
    echo "$OUT" | grep -E "^(comm_fault_check: |tcomm: )?rank 3:.*$2" | grep -q "rank 3 is lost" &&
        tl_fail "$1: rank 3 blamed itself"
    return 0
}

# A killed rank: srun names its task, or the ranks name it.
_killed() {
    echo "$OUT" | grep -Eq 'task 3|rank 3 is lost' || tl_fail "$1: rank 3 is not named"
}

for call in flat max sum bcast shared finalize; do
    args=(--in "$call")
    [ "$call" = flat ] && args=(--in allreduce --algo flat)
    _run "$call stop" "$BIN" --timeout 3 --stall 3 "${args[@]}"
    _named "$call stop" 'rank 3 is lost'
    _run "$call kill" "$BIN" --timeout 3 --die 3 "${args[@]}"
    _killed "$call kill"
done
# Inside tcomm_shared_alloc's window allocation: rank 3 stops or dies at
# the points TCOMM_FAULT names (transport/shm_win.c).
for point in shm-agree shm-alloc; do
    _run "$point stop" env TCOMM_FAULT="$point:3:STOP" "$BIN" --timeout 3 --in shared
    _named "$point stop" 'rank 3 is lost'
    _run "$point kill" env TCOMM_FAULT="$point:3:KILL" "$BIN" --timeout 3 --in shared
    _killed "$point kill"
done

# One rank cannot allocate: every rank fails together, naming it.
_run "no shm" "$BIN" --timeout 3 --in shared --no-shm 3
_named "no shm" 'rank 3 could not'
echo "$OUT" | grep -q 'rank 3: shared-memory directory /nonexistent' ||
    tl_fail "no shm: rank 3 did not say why"
echo "$OUT" | grep -q 'shared block allocated' && tl_fail "no shm: a rank went on with a shared block"

# A long wait on purpose: rank 0 busy for 6 s (a checkpoint write) while
# the others wait with a 12 s deadline (tcomm_barrier_timeout, or
# tcomm_set_timeout around a max), the timeout being 3 s: no one is
# blamed. A rank that stops in that wait is still named, after 12 s.
for call in long-barrier long-timeout; do
    t0=$SECONDS
    OUT=$(TL_SRUN_TIMEOUT=90 tl_srun_mpi --mpi=pmix -N2 -n4 "$BIN" --timeout 3 --slow 0 6 --in $call)
    RC=$?
    echo "$OUT" | grep -E 'busy|lost|finished' | sed "s/^/[$call] /"
    [ $RC = 0 ] || tl_fail "$call: exit $RC: a rank was blamed for a long wait"
    [ "$(echo "$OUT" | grep -c 'finished all iterations')" = 4 ] || tl_fail "$call: not every rank finished"
done
_run "long-barrier stop" "$BIN" --timeout 3 --stall 3 --in long-barrier
_named "long-barrier stop" 'rank 3 is lost or stalled: no progress for 12 s'

# A start-up step after tcomm_init that hangs outside any collective, with
# a long collective deadline: only the start-up watchdog (5 s) ends it.
_run "start-up" env TCOMM_STARTUP_TIMEOUT=5 "$BIN" --timeout 40 --startup-hang 3 100
echo "$OUT" | grep -q 'rank 3: start-up did not finish within 5 s: this rank did not reach its first training step' ||
    tl_fail "start-up: the watchdog did not end rank 3"
[ $DT -le 30 ] || tl_fail "start-up: took $DT s (the watchdog allows 5)"

# What the killed jobs left in shared memory.
left=$(ls -A "$SHM")
[ -z "$left" ] || tl_fail "killed jobs left in $SHM: $(echo $left)"
echo "PASS: every call names a lost rank within 60 s, allocations fail together, long waits blame no one, start-up is watched, nothing left in shared memory"
