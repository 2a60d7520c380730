# tests/integration/comm_lib.sh: helpers for the comm_*.sh tests (sourced).
# cm_mpirun P ARGS... runs ARGS under OpenMPI's mpirun with P ranks, as root
# if need be, oversubscribed (2 cores here), with yielding waits so 8 ranks
# on 2 cores do not starve each other, and a hard time limit.

: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
CM_CHECK="$top_builddir/tests/integration/comm_check"

cm_fail() {
    echo "FAIL: $*" >&2
    exit 1
}

cm_skip() {
    echo "SKIP: $*"
    exit 77
}

cm_mpirun() {
    local np=$1
    shift
    local mpirun=${MPIRUN:-mpirun}
    [ "$mpirun" = no ] && mpirun=mpirun
    command -v "$mpirun" >/dev/null || cm_skip "mpirun not found (install openmpi-bin)"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none \
        timeout 120 "$mpirun" --oversubscribe --bind-to none \
        --mca mpi_yield_when_idle 1 --mca btl self,vader,tcp \
        -np "$np" "$@"
}
