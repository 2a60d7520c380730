# train_lib.sh: what the torus-train integration tests share (sourced by
# train_ckpt.sh, train_ckpt_dist.sh, train_dist.sh): $bin, checked to have
# its dnnl backend; $tmp, a folder removed at exit; fail() counting into
# $fails; losses FILE (the losses of a metrics file); ck DIR STEP (the
# checkpoint of a step, whatever its run id); tr_need_mpirun (SKIP without
# mpirun); tr_mpirun ARGS (mpirun on this host, bounded by
# TR_MPI_TIMEOUT seconds, 60 by default).
bin=${top_builddir:?run through make check}/trainer/torus-train
if ! "$bin" --version | grep -Eq 'backends: ([a-z0-9-]+, )*dnnl'; then # configure requires it
    echo "FAIL: torus-train lists no dnnl backend: $("$bin" --version)"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
losses() { sed 's/.*"loss":\([^,]*\),.*/\1/' "$1"; }
ck() { ls "$1"/ckpt-"$2"-*.h5 2>/dev/null | head -1; }

tr_need_mpirun() {
    if ! command -v mpirun >/dev/null; then
        echo "SKIP: mpirun not found (install openmpi-bin)"
        exit 77
    fi
}

tr_mpirun() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none \
        timeout "${TR_MPI_TIMEOUT:-60}" mpirun --oversubscribe --bind-to none \
        --mca mpi_yield_when_idle 1 --mca btl self,vader,tcp "$@"
}
