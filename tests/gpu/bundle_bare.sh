#!/bin/bash
# tests/gpu/bundle_bare.sh: the GPU bundle runs on a bare node. It builds
# the bundle (make gpu-bundle), checks it is at most 40 MiB, unpacks it,
# and runs it in a mount namespace (unshare -m) where the system's library
# folders (/usr/lib/x86_64-linux-gnu, which /lib and /lib64 lead to on
# Debian 12, and all of /usr/local, where CUDA is) hold only glibc,
# libstdc++, libgcc_s and bash's libtinfo (so that run-gpu, a bash script,
# starts). There it asserts that
#   - ld.so resolves every library of every bundled program and of the
#     cuda module from the bundle's lib/ (or those kept system files),
#     none "not found" but the CUDA libraries (which are hidden);
#   - bin/torus-train trains 2 CPU steps (--backend dnnl --synthetic);
#   - bin/torus-data-bench decodes the bundled JPEG sample (HDF5, TurboJPEG);
#   - bin/torus-train --backend cuda fails with exit 1 naming the module
#     and libcudnn.so.9 (no CUDA library is left visible);
#   and, outside the namespace (this machine's CUDA visible, no driver),
#   that the bundle's module loads into the bundle's torus-train and
#   reports the missing driver;
#   - torus-data-bench runs the training transform on the bundled sample
#     (run-gpu's decode row);
#   - ./run-gpu with no GPU (no driver to initialise) says so and exits 3.
# Needs root (mount namespaces); the CI machine is root.
set -u
B=${top_builddir:?run from make check}
S=${top_srcdir:?run from make check}
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for unshare -m"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: no unshare (util-linux)"; exit 77; }
grep -q '^#define TORUS_HAVE_CUDNN' "$B/config.h" ||
    { echo "SKIP: configured without CUDA and cuDNN: no cuda module, no GPU bundle"; exit 77; }

make -s -C "$B" gpu-bundle >"$B/bundle_bare.make.log" 2>&1 ||
    fail "make gpu-bundle: $(tail -n 20 "$B/bundle_bare.make.log")"
tar=$(ls "$B"/torus-gpu-*-x86_64.tar.xz 2>/dev/null | head -n 1)
[ -f "$tar" ] || fail "no torus-gpu-*-x86_64.tar.xz in $B"
size=$(stat -c %s "$tar")
[ "$size" -le $((40 * 1024 * 1024)) ] || fail "$tar is $size bytes, over 40 MiB"
T=$(mktemp -d "${TMPDIR:-/tmp}/bundle_bare.XXXXXX")
trap 'rm -rf "$T"' EXIT
tar -C "$T" -xJf "$tar" || fail "cannot unpack $tar"
name=$(basename "$tar" -x86_64.tar.xz)
G=$T/$name
for d in bin lib lib/torus; do [ -d "$G/$d" ] || fail "$name has no $d/"; done
[ -x "$G/run-gpu" ] || fail "$name has no run-gpu"

# The system files a bare GPU node has: glibc, the C++ runtime, bash's.
SYS=/usr/lib/x86_64-linux-gnu
mkdir "$T/sys" "$T/empty" "$T/out"
for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 \
    libdl.so.2 librt.so.1 libresolv.so.2 libutil.so.1 libanl.so.1 libnss_files.so.2 \
    libnss_dns.so.2 libstdc++.so.6 libgcc_s.so.1 libtinfo.so.6; do
    [ -e "$SYS/$f" ] && cp -L "$SYS/$f" "$T/sys/$f"
done
# The programs (bin/ also holds torus-torch, a Python script).
for f in "$G"/bin/*; do [ "$(head -c 4 "$f" | tail -c 3)" != ELF ] || echo "$f"; done >"$T/progs"
[ "$(wc -l <"$T/progs")" -ge 8 ] || fail "too few programs in $name/bin: $(cat "$T/progs")"

# Inside the namespace only builtins and the bundle's programs run: the
# system's tools lose their libraries once the folders are covered.
unshare -m bash -c '
    T=$1 G=$2
    mount --bind "$T/empty" /usr/local &&
    mount --bind "$T/sys" /usr/lib/x86_64-linux-gnu || exit 99
    cd "$G" || exit 99
    while read -r p; do
        echo "== $p"
        LD_TRACE_LOADED_OBJECTS=1 /lib64/ld-linux-x86-64.so.2 "$p"
    done <"$T/progs" >"$T/out/list" 2>&1
    LD_TRACE_LOADED_OBJECTS=1 /lib64/ld-linux-x86-64.so.2 lib/torus/torus_cuda.so >"$T/out/module" 2>&1
    bin/torus-train --synthetic --backend dnnl --model tiny-cnn --dataset-size 16 \
        --batch 8 --max-steps 2 --threads 1 >"$T/out/train" 2>&1
    echo $? >"$T/out/train.rc"
    bin/torus-data-bench -m decode -t 1 share/sample >"$T/out/decode" 2>&1
    echo $? >"$T/out/decode.rc"
    bin/torus-data-bench -m train -t 2 -b 64 -n 1024 share/sample >"$T/out/dtrain" 2>&1
    echo $? >"$T/out/dtrain.rc"
    TORUS_BACKEND_PATH=$G/lib/torus bin/torus-train --synthetic --backend cuda \
        --max-steps 1 >"$T/out/cuda" 2>&1
    echo $? >"$T/out/cuda.rc"
    ./run-gpu --out "$T/out/gpu" >"$T/out/run-gpu" 2>&1
    echo $? >"$T/out/run-gpu.rc"
' bash "$T" "$G"
rc=$?
[ $rc = 0 ] || fail "the namespace script exited $rc (bind mounts failed?)"

# Every library from the bundle or the kept system files; none missing
# but the CUDA libraries of the GPU checks, which the node provides.
CUDA_SO='lib(cudnn|cublas|cublasLt|cudart|nccl)\.so\.[0-9]+ => not found'
grep -q 'error while loading' "$T/out/list" "$T/out/module" &&
    fail "ld.so failed: $(grep -h 'error while loading' "$T/out/list" "$T/out/module")"
grep 'not found' "$T/out/list" | grep -Evq "$CUDA_SO" &&
    fail "unresolved libraries: $(grep -E '^==|not found' "$T/out/list" | grep -Ev "$CUDA_SO")"
grep -c '^==' "$T/out/list" | grep -qx "$(wc -l <"$T/progs")" || fail "ld.so --list did not run for every program: $(cat "$T/out/list")"
outside=$(grep '=>' "$T/out/list" | grep -v 'not found' | awk '{print $3}' | grep -Ev "^$G/(bin/\.\./)?lib/" |
    grep -Ev "^(/usr)?/lib/x86_64-linux-gnu/(ld-linux-x86-64|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s)\.so" | sort -u)
[ -z "$outside" ] || fail "libraries resolved outside the bundle: $outside"
from_bundle=$(grep '=>' "$T/out/list" | awk '{print $3}' | grep -Ec "^$G/(bin/\.\./)?lib/")
[ "$from_bundle" -gt 10 ] || fail "only $from_bundle libraries came from the bundle: $(cat "$T/out/list")"
# The module: every non-CUDA library resolves; the CUDA ones are missing here.
grep -q 'not found' "$T/out/module" || fail "the module's CUDA libraries resolved inside the namespace: $(cat "$T/out/module")"
grep 'not found' "$T/out/module" | grep -Evq "$CUDA_SO" &&
    fail "the module misses a non-CUDA library: $(cat "$T/out/module")"

[ "$(cat "$T/out/train.rc")" = 0 ] || fail "torus-train --backend dnnl exited $(cat "$T/out/train.rc"): $(cat "$T/out/train")"
grep -q 'done: global step 2' "$T/out/train" || fail "torus-train did not train 2 steps: $(cat "$T/out/train")"
[ "$(cat "$T/out/decode.rc")" = 0 ] || fail "torus-data-bench exited $(cat "$T/out/decode.rc"): $(cat "$T/out/decode")"
grep -Eq '^decode +1 +[0-9.]+ ' "$T/out/decode" || fail "torus-data-bench printed no rate: $(cat "$T/out/decode")"
# run-gpu's decode row: the training transform over the sample, 16 batches.
[ "$(cat "$T/out/dtrain.rc")" = 0 ] && grep -Eq '^train +2 +[0-9.]+ ' "$T/out/dtrain" ||
    fail "torus-data-bench -m train on the sample: $(cat "$T/out/dtrain")"
[ "$(cat "$T/out/cuda.rc")" = 1 ] || fail "--backend cuda exited $(cat "$T/out/cuda.rc"): $(cat "$T/out/cuda")"
grep -q 'torus_cuda.so does not load: libcudnn.so.9' "$T/out/cuda" ||
    fail "--backend cuda does not name libcudnn.so.9: $(cat "$T/out/cuda")"
[ "$(cat "$T/out/run-gpu.rc")" = 3 ] || fail "run-gpu without a GPU exited $(cat "$T/out/run-gpu.rc"), want 3: $(cat "$T/out/run-gpu")"
grep -qi 'no GPU' "$T/out/run-gpu" || fail "run-gpu did not say there is no GPU: $(cat "$T/out/run-gpu")"
# Outside the namespace, where this machine's CUDA libraries are visible:
# the bundle's stripped module loads into the bundle's torus-train (every
# symbol it takes from the program resolves), and then finds no driver.
if ! ldconfig -p | grep -q 'libcuda\.so\.1' && [ ! -e /dev/nvidia0 ]; then
    TORUS_BACKEND_PATH=$G/lib/torus "$G/bin/torus-train" --synthetic --backend cuda \
        --max-steps 1 >"$T/out/cuda-host" 2>&1
    grep -q "$G/lib/torus/torus_cuda.so): no NVIDIA driver" "$T/out/cuda-host" ||
        fail "the bundle's module in the bundle's torus-train: $(cat "$T/out/cuda-host")"
fi
echo "PASS: $name ($size bytes): $from_bundle library resolutions from the bundle, 2 dnnl steps, decode, cuda names libcudnn.so.9, run-gpu exit 3"
