# train_lib.sh: what the torus-train integration tests share (sourced by
# train_ckpt.sh, train_ckpt_dist.sh, train_dist.sh, train_scale.sh,
# train_input.sh): $bin, checked to have
# its dnnl backend; $tmp, a folder removed at exit; fail() counting into
# $fails; losses FILE (the losses of a metrics file); ck DIR STEP (the
# checkpoint of a step, whatever its run id); tr_need_mpirun (SKIP without
# mpirun); tr_mpirun ARGS (mpirun on this host, bounded by
# TR_MPI_TIMEOUT seconds, 60 by default); tr_need_h5diff (SKIP without
# h5diff); tr_idx_dataset OUT SEED NTRAIN NTEST (a small packed dataset).
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

tr_need_h5diff() {
    if ! command -v h5diff >/dev/null; then
        echo "SKIP: h5diff not found (install hdf5-tools)"
        exit 77
    fi
}

# OUT SEED NTRAIN NTEST: a packed dataset of random 28x28 grayscale images
# and labels (IDX files as Fashion-MNIST ships them, from SEED) in OUT.
tr_idx_dataset() {
    python3 - "$tmp/idx$2" "$2" "$3" "$4" <<'PY' || return 1
import gzip, random, struct, sys
pre, rnd = sys.argv[1], random.Random(int(sys.argv[2]))
for split, n in (("train", int(sys.argv[3])), ("test", int(sys.argv[4]))):
    img = bytes(rnd.randrange(256) for _ in range(n * 28 * 28))
    lab = bytes(rnd.randrange(10) for _ in range(n))
    with gzip.open(f"{pre}-{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + img)
    with gzip.open(f"{pre}-{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + lab)
PY
    local s
    for s in train test; do
        "$top_builddir/data/torus-pack" --no-progress -o "$1" -s $s \
            "$tmp/idx$2-$s-images-idx3-ubyte.gz" >"$tmp/idx.log" 2>&1 || return 1
    done
}

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
