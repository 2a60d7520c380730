#!/bin/bash
# tests/integration/cuda_module.sh: torus-train and the other programs of
# the CPU package link no CUDA library (ldd), and the cuda backend, the
# loadable module torus_cuda.so, says what is missing instead of failing
# to start:
#   - ldd of torus-train, torus-bench, torus-sweep, torus-data-bench, torus-pack,
#     torus-layout and spank_torus.so lists none of libcuda, libcudart,
#     libcublas(Lt), libcudnn*, libnccl, libnvrtc, libnvJitLink;
#   - where the module was built: it does link cuDNN (so the check above
#     means something), and with no driver on this machine
#     `torus-train --backend cuda` with TORUS_BACKEND_PATH loads it
#     (RTLD_NOW: every symbol it takes from torus-train resolves) and fails
#     with exit 1 naming libcuda.so.1; `--backend auto` trains 1 step on
#     dnnl; a module from another torus version is refused, naming both
#     versions; with the module in no folder searched the error says it is
#     not installed and names the package.
set -u
B=${top_builddir:?run from make check}
fail() { echo "FAIL: $*"; exit 1; }
CUDA_RE='lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc|nvJitLink)\.so'

for p in trainer/torus-train trainer/bench/torus-bench trainer/sweep/torus-sweep data/torus-data-bench \
    data/torus-pack topology/torus-layout plugins/.libs/spank_torus.so; do
    [ -e "$B/$p" ] || fail "$p not built"
    out=$(ldd "$B/$p") || fail "ldd $p failed: $out"
    bad=$(grep -E "$CUDA_RE" <<<"$out")
    [ -z "$bad" ] || fail "$p links CUDA libraries: $bad"
done
echo "ldd trainer/torus-train: no CUDA library among $(ldd "$B/trainer/torus-train" | wc -l) entries"

MOD=$B/trainer/backends/cuda/.libs/torus_cuda.so
if [ ! -e "$MOD" ]; then
    grep -q '^#define TORUS_HAVE_CUDNN' "$B/config.h" &&
        fail "configure found cuDNN but $MOD was not built"
    echo "PASS (ldd only): configured without cuDNN, no cuda module to load"
    exit 0
fi
readelf -d "$MOD" | grep -q 'NEEDED.*libcudnn\.so' || fail "$MOD does not link cuDNN"

T=$(mktemp -d "${TMPDIR:-/tmp}/cuda_module.XXXXXX")
trap 'rm -rf "$T"' EXIT
run() { # expected-rc output-file args...
    local want=$1 f=$2
    shift 2
    "$B/trainer/torus-train" --synthetic --model tiny-cnn --dataset-size 16 \
        --batch 8 --max-steps 1 --threads 1 "$@" >"$f" 2>&1
    local rc=$?
    [ $rc = "$want" ] || fail "torus-train $* exited $rc, want $want: $(cat "$f")"
}

if ldconfig -p | grep -q 'libcuda\.so\.1' || [ -e /dev/nvidia0 ]; then
    echo "note: this machine has an NVIDIA driver: the no-driver case is not checked"
else
    TORUS_BACKEND_PATH=$T/none:$(dirname "$MOD") run 1 "$T/drv" --backend cuda
    grep -q "torus_cuda.so): no NVIDIA driver: libcuda.so.1 cannot be loaded" "$T/drv" ||
        fail "no-driver message: $(cat "$T/drv")"
    TORUS_BACKEND_PATH=$(dirname "$MOD") run 0 "$T/auto" --backend auto
    grep -q 'backend dnnl' "$T/auto" || fail "--backend auto did not fall back to dnnl: $(cat "$T/auto")"
fi

# Another version's module: the same file with its version string changed.
ver=$("$B/trainer/torus-train" --version | sed -n 's/^torus-train \([^ ]*\) .*/\1/p')
[ -n "$ver" ] || fail "no version from torus-train --version"
other=${ver//?/9}
mkdir "$T/old"
V=$ver O=$other perl -0777 -pe 's/(?<![\x20-\x7e])\Q$ENV{V}\E\0/$ENV{O}\0/g' "$MOD" >"$T/old/torus_cuda.so"
cmp -s "$MOD" "$T/old/torus_cuda.so" && fail "version string $ver not found in $MOD"
TORUS_BACKEND_PATH=$T/old run 1 "$T/ver" --backend cuda-fp16
grep -q "is not the cuda module of torus $ver .*from torus $other" "$T/ver" ||
    fail "version mismatch message: $(cat "$T/ver")"

# No module in the folders searched ($T/none, then pkglibdir unless a
# module is installed there).
TORUS_BACKEND_PATH=$T/none "$B/trainer/torus-train" --synthetic --backend gpu \
    --max-steps 1 >"$T/none.log" 2>&1 && fail "--backend gpu without a module ran"
if grep -q "not installed" "$T/none.log"; then
    grep -q "cuda backend is not installed: no torus_cuda.so in TORUS_BACKEND_PATH=$T/none or /.*torus-cuda package" "$T/none.log" ||
        fail "not-installed message: $(cat "$T/none.log")"
else
    echo "note: a module is installed in pkglibdir: $(cat "$T/none.log")"
fi
echo "PASS: no CUDA in the CPU programs; the cuda module loads into torus-train and names what is missing"
