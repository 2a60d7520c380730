# py_lib.sh: what the Python package's tests share (sourced by py_*.sh):
# $PY, Debian's python3 (a python3 on PATH may be a pyenv shim without
# Debian's torch), with torch checked; the package from the source tree
# (PYTHONPATH) over the build tree's libtorusdata and libtoruscomm
# (TORUS_LIBDIR, a ':' list); $tmp,
# removed at exit; py_idx_dataset OUT N SHARDS [SPLIT] (split SPLIT,
# default train, of N random 28x28 images, IDX as Fashion-MNIST ships
# them, packed into OUT).
PY=${TORUS_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || { echo "SKIP: $PY not found"; exit 77; }
"$PY" -c 'import torch' 2>/dev/null ||
    { echo "SKIP: $PY has no torch (install python3-torch: tools/install-deps)"; exit 77; }
export PYTHONPATH="${top_srcdir:?run through make check}/python${PYTHONPATH:+:$PYTHONPATH}"
export TORUS_LIBDIR="${top_builddir:?}/data/.libs:$top_builddir/trainer/comm/.libs"
for lib in data/.libs/libtorusdata.so.1 trainer/comm/.libs/libtoruscomm.so.1; do
    [ -e "$top_builddir/$lib" ] || { echo "FAIL: $top_builddir/$lib is not built"; exit 1; }
done
export OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/torus-py.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

py_idx_dataset() { # OUT N SHARDS [SPLIT]
    local split=${4:-train}
    "$PY" - "$tmp/idx" "$2" <<'PYEOF' || return 1
import gzip, random, struct, sys
pre, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(n)
img = bytes(rnd.randrange(256) for _ in range(n * 28 * 28))
lab = bytes(rnd.randrange(10) for _ in range(n))
with gzip.open(f"{pre}-train-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 28, 28) + img)
with gzip.open(f"{pre}-train-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, n) + lab)
PYEOF
    "$top_builddir/data/torus-pack" --no-progress --shards="$3" -o "$1" -s "$split" \
        "$tmp/idx-train-images-idx3-ubyte.gz" >"$tmp/pack.log" 2>&1 ||
        { echo "FAIL: torus-pack: $(tail -3 "$tmp/pack.log")"; return 1; }
}
