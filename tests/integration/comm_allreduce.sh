#!/bin/bash
# comm_allreduce.sh: every all-reduce algorithm (flat, ring, hier, hier-rs,
# torus2d, hybrid) at fp32/fp16/bf16 is correct against a double reference,
# bitwise equal on all ranks and across runs, for P in {1,2,3,4,6,8}, for
# counts that do and do not divide evenly, under mpirun, with the default
# per-node layout and with --grid / --group-size shapes.
set -u
. "$top_srcdir/tests/integration/comm_lib.sh"

SIZES=0,1,5,64,1001,4099,40000
run() {
    local np=$1
    shift
    local out
    out=$(cm_mpirun "$np" "$CM_CHECK" --sizes $SIZES "$@" 2>&1) # a later --sizes wins
    local rc=$?
    echo "$out" | sed -n '1p;$p' | sed "s/^/P=$np $* | /"
    [ $rc = 0 ] || { echo "$out" | grep -v ' ok$' | head -30; cm_fail "P=$np $*: exit $rc"; }
    echo "$out" | grep -q '^PASS' || cm_fail "P=$np $*: no PASS line"
    # with --shared, torus2d and hier-rs must really reduce in place
    case " $* " in *" --shared "*)
        echo "$out" | grep -E '^(torus2d|hier-rs) ' | grep -q 'in-place=no' &&
            cm_fail "P=$np $*: a bucket in shared memory was not reduced in place";;
    esac
    # hier-rs must really run (not report unsupported) when groups are equal
    case " $* " in *" --group-size 2 "*)
        [ $((np % 2)) = 0 ] && echo "$out" | grep -q 'hier-rs.*unsupported' &&
            cm_fail "P=$np $*: hier-rs refused equal groups";;
    esac
    return 0
}

# The singleton path (no PMIx server at all) and mpirun with one rank.
"$CM_CHECK" --sizes $SIZES > /dev/null || cm_fail "singleton run failed"
run 1
for P in 2 3 4 6 8; do
    run $P --group-size 2
done
run 4 --grid 2x2
run 6 --grid 2x3 --group-size 3
run 6 --grid 3x2 --group-size 4   # unequal groups: hier-rs refuses, others run
run 8 --grid 2x4 --group-size 4
run 8 --grid 4x2 --group-size 2
# Hybrid on measured link parameters (rank 0 probes, all ranks must agree).
run 6 --grid 3x2 --group-size 2 --probe --algos hybrid --sizes 1,100,100000
# Ring steps (shared memory off, so rows and groups use the ring too) cut
# into many 1 KiB segments, uneven chunks cut alike on both sides, and sent
# whole: the same results.
TCOMM_SHM=0 TCOMM_SEG_KB=1 run 6 --grid 3x2 --group-size 2
TCOMM_SHM=0 TCOMM_SEG_KB=0 run 3 --group-size 2
# Messages of several MiB run in pieces whose network stage (column ring,
# leaders' ring) overlaps the node stages on another thread: 3 uneven
# pieces; also a group of one, and groups reducing by ring (no shm).
TCOMM_PIPELINE=3 run 4 --grid 2x2 --group-size 2 --algos torus2d,hier-rs,hier --sizes 1048577,2500001
TCOMM_PIPELINE=3 run 5 --group-size 2 --algos hier,torus2d --sizes 1048577
TCOMM_SHM=0 TCOMM_PIPELINE=3 run 5 --group-size 2 --algos hier --sizes 1048577
# 4 leaders' ring under the pieces (3 or fewer above).
TCOMM_PIPELINE=3 run 8 --group-size 2 --algos hier --sizes 1048577,2500001
# Gradients in shared memory (--shared), reduced where they lie: whole,
# and in pieces cut as the out-of-place path cuts them (columns of three,
# so that another cut would change the fp32 bits).
TCOMM_PIPELINE=3 run 6 --grid 3x2 --group-size 2 --algos torus2d,hier-rs,hier,hybrid --sizes 1000,1048577,2500001 --shared
# Plain sums (no pre-scaling) too.
run 4 --grid 2x2 --group-size 2 --sum --algos ring,torus2d,hier --wires fp32,fp16
echo "PASS"
